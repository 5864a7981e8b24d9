// Tensor maps (TMA descriptors) for common/tma.cuh, encoded on the host through the driver's
// cuTensorMapEncodeTiled, which ktune loads at run time like every driver entry point. Every
// argument is checked here first, so a bad one gets a message naming it and what is allowed
// instead of the driver's bare CUDA_ERROR_INVALID_VALUE; validation needs no driver or GPU.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ktune {

/// A tiled tensor map before encoding. Dimension 0 is the innermost (contiguous) one: a
/// row-major matrix of R rows x C columns has dims {C, R} and strides {row pitch in bytes}.
struct TensorMapSpec {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;  // element type (its size)
  CUdeviceptr address = 0;  // first element; 16-byte aligned (32 with INTERLEAVE_32B)
  std::vector<std::uint64_t> dims;     // elements per dimension, innermost first; rank 1..5
  std::vector<std::uint64_t> strides;  // bytes between indices of dims 1..rank-1 (rank - 1)
  std::vector<std::uint32_t> box;      // elements per dimension of one tile (rank entries)
  std::vector<std::uint32_t> element_strides;  // traversal step per dimension; empty: all 1
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;  // shared layout of the tile
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;  // zeros past the edges
};

/// The spec of a row-major matrix of `rows` x `cols` elements, `row_pitch_bytes` apart, read
/// and written in tiles of `box_rows` x `box_cols` (TMA coordinates {column, row}).
TensorMapSpec matrix_tensor_map(CUtensorMapDataType dtype, CUdeviceptr address,
                                std::uint64_t rows, std::uint64_t cols,
                                std::uint64_t row_pitch_bytes, std::uint32_t box_rows,
                                std::uint32_t box_cols,
                                CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE);

/// Bytes per element of `dtype`; 0 for types ktune does not encode (the sub-byte packed ones).
std::uint32_t tensor_map_element_bytes(CUtensorMapDataType dtype);

/// The enumerator's name without its prefix ("BFLOAT16", "SWIZZLE_128B"), for messages.
std::string tensor_map_dtype_name(CUtensorMapDataType dtype);
std::string tensor_map_swizzle_name(CUtensorMapSwizzle swizzle);

/// Throws InvalidArgument naming the first argument of `spec` that cuTensorMapEncodeTiled
/// would refuse (the rules of its documentation, for the Hopper data types and swizzles),
/// its value and what is allowed. Calls no driver function.
void validate_tensor_map(const TensorMapSpec& spec);

/// Validates `spec`, then encodes it. Throws InvalidArgument for a bad spec (before touching
/// the driver), NoDevice without a driver, CudaError when the driver lacks
/// cuTensorMapEncodeTiled (older than CUDA 12.0) or refuses the spec.
CUtensorMap encode_tensor_map(const TensorMapSpec& spec);

}  // namespace ktune
