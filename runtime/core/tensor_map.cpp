#include "runtime/core/tensor_map.hpp"

#include <cstddef>

#include "ktune/error.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/types.hpp"

namespace ktune {
namespace {

constexpr std::size_t kMaxRank = 5;
constexpr std::uint64_t kMaxDim = 1ull << 32;     // globalDim <= 2^32
constexpr std::uint64_t kStrideLimit = 1ull << 40;  // globalStrides < 2^40
constexpr std::uint32_t kMaxBox = 256;
constexpr std::uint32_t kMaxElementStride = 8;

[[noreturn]] void bad(const std::string& what) {
  throw InvalidArgument("tensor map: " + what);
}

// "dims[1] = 0", for messages naming one entry of an array.
std::string entry(const char* array, std::size_t i, std::uint64_t value) {
  return std::string(array) + "[" + std::to_string(i) + "] = " + std::to_string(value);
}

bool is_float(CUtensorMapDataType t) {
  switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return true;
    default:
      return false;
  }
}

// The span within which a swizzle permutes 16-byte chunks; 0 for none.
std::uint32_t swizzle_span(CUtensorMapSwizzle s) {
  switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return 0;
  }
}

}  // namespace

std::uint32_t tensor_map_element_bytes(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

std::string tensor_map_dtype_name(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return "UINT8";
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: return "UINT16";
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: return "UINT32";
    case CU_TENSOR_MAP_DATA_TYPE_INT32: return "INT32";
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: return "UINT64";
    case CU_TENSOR_MAP_DATA_TYPE_INT64: return "INT64";
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: return "FLOAT16";
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: return "FLOAT32";
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return "FLOAT64";
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return "BFLOAT16";
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: return "FLOAT32_FTZ";
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: return "TFLOAT32";
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return "TFLOAT32_FTZ";
    default: return "data type " + std::to_string(static_cast<int>(dtype));
  }
}

std::string tensor_map_swizzle_name(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return "SWIZZLE_NONE";
    case CU_TENSOR_MAP_SWIZZLE_32B: return "SWIZZLE_32B";
    case CU_TENSOR_MAP_SWIZZLE_64B: return "SWIZZLE_64B";
    case CU_TENSOR_MAP_SWIZZLE_128B: return "SWIZZLE_128B";
    default: return "swizzle " + std::to_string(static_cast<int>(swizzle));
  }
}

TensorMapSpec matrix_tensor_map(CUtensorMapDataType dtype, CUdeviceptr address,
                                std::uint64_t rows, std::uint64_t cols,
                                std::uint64_t row_pitch_bytes, std::uint32_t box_rows,
                                std::uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  TensorMapSpec s;
  s.dtype = dtype;
  s.address = address;
  s.dims = {cols, rows};
  s.strides = {row_pitch_bytes};
  s.box = {box_cols, box_rows};
  s.swizzle = swizzle;
  return s;
}

void validate_tensor_map(const TensorMapSpec& s) {
  const std::uint32_t esize = tensor_map_element_bytes(s.dtype);
  if (esize == 0) {
    bad("dtype " + tensor_map_dtype_name(s.dtype) +
        " is not supported (allowed: UINT8, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16, "
        "FLOAT32, FLOAT64, BFLOAT16, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ)");
  }
  const std::size_t rank = s.dims.size();
  if (rank < 1 || rank > kMaxRank)
    bad("rank " + std::to_string(rank) + " (dims has that many entries) must be 1 to 5");
  const bool interleaved = s.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE;
  if (interleaved && s.interleave != CU_TENSOR_MAP_INTERLEAVE_16B &&
      s.interleave != CU_TENSOR_MAP_INTERLEAVE_32B) {
    bad("interleave " + std::to_string(static_cast<int>(s.interleave)) +
        " must be INTERLEAVE_NONE, INTERLEAVE_16B or INTERLEAVE_32B");
  }
  if (interleaved && rank < 3)
    bad("rank " + std::to_string(rank) + " must be 3 to 5 with an interleaved layout");
  if (s.strides.size() != rank - 1) {
    bad("strides has " + std::to_string(s.strides.size()) + " entries; rank " +
        std::to_string(rank) + " needs " + std::to_string(rank - 1) +
        " (dimension 0 is contiguous)");
  }
  if (s.box.size() != rank) {
    bad("box has " + std::to_string(s.box.size()) + " entries; rank " + std::to_string(rank) +
        " needs " + std::to_string(rank));
  }
  if (!s.element_strides.empty() && s.element_strides.size() != rank) {
    bad("element_strides has " + std::to_string(s.element_strides.size()) + " entries; rank " +
        std::to_string(rank) + " needs " + std::to_string(rank) + " (or none for all 1)");
  }
  const bool wide = s.interleave == CU_TENSOR_MAP_INTERLEAVE_32B;
  const std::uint64_t align = wide ? 32 : 16;
  if (s.address == 0) bad("global address is null");
  if (s.address % align != 0) {
    bad("global address " + address_text(s.address) + " must be " + std::to_string(align) +
        "-byte aligned" + (wide ? " with INTERLEAVE_32B" : ""));
  }
  for (std::size_t i = 0; i < rank; ++i) {
    if (s.dims[i] == 0 || s.dims[i] > kMaxDim)
      bad(entry("dims", i, s.dims[i]) + " must be 1 to 2^32 elements");
  }
  for (std::size_t i = 0; i + 1 < rank; ++i) {
    const std::uint64_t v = s.strides[i];
    if (v % align != 0 || v >= kStrideLimit) {
      bad(entry("strides", i, v) + " (bytes between indices of dimension " +
          std::to_string(i + 1) + ") must be a multiple of " + std::to_string(align) +
          " and below 2^40" + (wide ? " with INTERLEAVE_32B" : ""));
    }
  }
  for (std::size_t i = 0; i < rank; ++i) {
    if (s.box[i] == 0 || s.box[i] > kMaxBox)
      bad(entry("box", i, s.box[i]) + " must be 1 to 256 elements");
  }
  for (std::size_t i = 0; i < s.element_strides.size(); ++i) {
    const std::uint32_t v = s.element_strides[i];
    if (v == 0 || v > kMaxElementStride) bad(entry("element_strides", i, v) + " must be 1 to 8");
  }
  const std::uint32_t span = swizzle_span(s.swizzle);
  if (s.swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && span == 0) {
    bad(tensor_map_swizzle_name(s.swizzle) +
        " is not supported (allowed: SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B)");
  }
  if (wide && s.swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    bad(tensor_map_swizzle_name(s.swizzle) + " with INTERLEAVE_32B: only SWIZZLE_32B is allowed");
  if (!interleaved) {
    const std::uint64_t inner = static_cast<std::uint64_t>(s.box[0]) * esize;
    if (inner % 16 != 0) {
      bad("the box's inner extent box[0] x " + std::to_string(esize) + " bytes (" +
          tensor_map_dtype_name(s.dtype) + ") = " + std::to_string(inner) +
          " bytes must be a multiple of 16");
    }
    if (span != 0 && inner > span) {
      bad("the box's inner extent box[0] x " + std::to_string(esize) + " bytes = " +
          std::to_string(inner) + " bytes must be at most " + std::to_string(span) +
          " with " + tensor_map_swizzle_name(s.swizzle) + " (the swizzle span)");
    }
  }
  if (s.l2_promotion < CU_TENSOR_MAP_L2_PROMOTION_NONE ||
      s.l2_promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
    bad("l2_promotion " + std::to_string(static_cast<int>(s.l2_promotion)) +
        " must be L2_PROMOTION_NONE, L2_64B, L2_128B or L2_256B");
  }
  if (s.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(s.dtype)) {
    bad("oob_fill NAN_REQUEST_ZERO_FMA needs a floating-point dtype, not " +
        tensor_map_dtype_name(s.dtype));
  }
  if (s.oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE &&
      s.oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
    bad("oob_fill " + std::to_string(static_cast<int>(s.oob_fill)) +
        " must be OOB_FILL_NONE or OOB_FILL_NAN_REQUEST_ZERO_FMA");
  }
}

CUtensorMap encode_tensor_map(const TensorMapSpec& s) {
  validate_tensor_map(s);
  const Driver& d = Driver::get();
  if (d.cuTensorMapEncodeTiled == nullptr) {
    throw CudaError(
        "cuTensorMapEncodeTiled: the CUDA driver lacks it (tensor maps need a driver for CUDA "
        "12.0 or newer)",
        static_cast<int>(CUDA_ERROR_NOT_SUPPORTED), false);
  }
  const std::size_t rank = s.dims.size();
  cuuint64_t dims[kMaxRank] = {}, strides[kMaxRank] = {};
  cuuint32_t box[kMaxRank] = {}, steps[kMaxRank] = {};
  for (std::size_t i = 0; i < rank; ++i) {
    dims[i] = s.dims[i];
    box[i] = s.box[i];
    steps[i] = s.element_strides.empty() ? 1 : s.element_strides[i];
    if (i + 1 < rank) strides[i] = s.strides[i];
  }
  CUtensorMap map{};
  const std::string what = "cuTensorMapEncodeTiled(" + tensor_map_dtype_name(s.dtype) +
                           ", rank " + std::to_string(rank) + ", " +
                           tensor_map_swizzle_name(s.swizzle) + ")";
  cu_check(d.cuTensorMapEncodeTiled(&map, s.dtype, static_cast<cuuint32_t>(rank),
                                    reinterpret_cast<void*>(s.address), dims, strides, box, steps,
                                    s.interleave, s.swizzle, s.l2_promotion, s.oob_fill),
           what.c_str());
  return map;
}

}  // namespace ktune
