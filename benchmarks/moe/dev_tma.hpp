// Tensor maps for the MoE development harnesses that feed TMA (gemm_ws_dev.cu, swapab_dev.cu):
// cuTensorMapEncodeTiled of a 16-bit tensor in the 128-byte swizzle, as the op's maps are (or
// unswizzled: the decode TMA probe). Link with -lcuda.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/tma.cuh"

/// dims innermost first; strides in bytes of dims 1..; box in elements per dim.
inline ktune::tma::TensorMap encode(const void* ptr, bool bf16, std::vector<cuuint64_t> dims,
                                    std::vector<cuuint64_t> strides,
                                    std::vector<cuuint32_t> box, bool swizzle = true) {
  CUtensorMap m;
  std::vector<cuuint32_t> steps(dims.size(), 1);
  const CUresult r = cuTensorMapEncodeTiled(
      &m, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      static_cast<cuuint32_t>(dims.size()), const_cast<void*>(ptr), dims.data(), strides.data(),
      box.data(), steps.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(r));
    std::exit(2);
  }
  ktune::tma::TensorMap t;
  static_assert(sizeof t == sizeof m, "128 bytes");
  std::memcpy(&t, &m, sizeof t);
  return t;
}
