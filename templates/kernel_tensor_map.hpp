// Host side of the tensor maps the Hopper kernels take as __grid_constant__ arguments: a
// TensorMapSpec of bf16, fp16 or e4m3 elements in the 128-byte swizzle, encoded through the
// run-time-loaded driver (runtime/core/tensor_map) into the kernel's tma::TensorMap.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/tensor_map.hpp"
#include "runtime/core/types.hpp"
#include "templates/common/tma.cuh"

namespace ktune {

/// A spec of `dims` (elements, innermost first) at `ptr` with `strides` (bytes, of dims 1..), in
/// boxes of `box`, 128-byte swizzled, elements of dtype t (bf16, fp16, or e4m3 copied as bytes).
inline TensorMapSpec swizzled_map(const void* ptr, DType t, std::vector<std::uint64_t> dims,
                                  std::vector<std::uint64_t> strides,
                                  std::vector<std::uint32_t> box) {
  TensorMapSpec spec;
  spec.dtype = t == DType::e4m3   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
               : t == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  spec.address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr));
  spec.dims = std::move(dims);
  spec.strides = std::move(strides);
  spec.box = std::move(box);
  spec.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return spec;
}

/// encode_tensor_map(spec) (validated, refused with a message) as the kernel argument.
inline tma::TensorMap kernel_tensor_map(const TensorMapSpec& spec) {
  const CUtensorMap encoded = encode_tensor_map(spec);
  tma::TensorMap map;
  static_assert(sizeof map == sizeof encoded, "a tensor map is 128 bytes");
  std::memcpy(&map, &encoded, sizeof map);
  return map;
}

/// A tensor map addresses every index of a dimension: a broadcast (stride 0) over more than one
/// head or batch cannot be described. Refuses operand `name` of `what` (e.g. "flash_attention
/// impl=1") with InvalidArgument, naming the configuration to use `instead`.
inline void refuse_broadcast(const std::string& what, const char* name, std::int64_t heads,
                             std::int64_t batch, long long head_stride, long long batch_stride,
                             const std::string& instead) {
  if ((heads > 1 && head_stride == 0) || (batch > 1 && batch_stride == 0))
    throw InvalidArgument(what + ": " + name + " " +
                          (heads > 1 && head_stride == 0 ? "head" : "batch") +
                          " stride 0 (a broadcast) cannot be read through a tensor map; pass "
                          "a materialised tensor, or " + instead);
}

/// The tensor map of one [B, H, S, D] operand (attention's wgmma kernel, args_sm90.h; decode's
/// TMA kernels, FlashDecodeTmaArgs): dims innermost first (d, rows, heads, batch), strides in
/// bytes, a box of 64 columns (128 bytes) by `box_rows` rows in the 128-byte swizzle. A dim of
/// size 1 gets a harmless stride (its index is always 0), so that a broadcast stride of 0 there
/// never reaches the driver; over more dims the caller has refused it.
inline tma::TensorMap operand_map(const void* ptr, DType t, std::int64_t d, std::int64_t rows,
                                  std::int64_t heads, std::int64_t batch, long long row_stride,
                                  long long head_stride, long long batch_stride, int box_rows) {
  const std::uint64_t eb = dtype_size(t);
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(row_stride) * eb;
  std::uint64_t head_bytes = static_cast<std::uint64_t>(head_stride) * eb;
  std::uint64_t batch_bytes = static_cast<std::uint64_t>(batch_stride) * eb;
  if (heads == 1) head_bytes = row_bytes * static_cast<std::uint64_t>(rows);
  if (batch == 1) batch_bytes = head_bytes * static_cast<std::uint64_t>(heads);
  return kernel_tensor_map(swizzled_map(
      ptr, t,
      {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(rows),
       static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch)},
      {row_bytes, head_bytes, batch_bytes},
      {static_cast<std::uint32_t>(128 / eb), static_cast<std::uint32_t>(box_rows), 1, 1}));
}

}  // namespace ktune
