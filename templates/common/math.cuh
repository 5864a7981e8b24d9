// Fast fp32 math for memory-bound kernels: one special-function instruction each, with errors of a
// few ulp, far below what a 16-bit output can show.
#pragma once

#include "common/types.cuh"

namespace ktune {

#if defined(__CUDACC__)

constexpr float kLog2e = 1.4426950408889634f;

/// 2^x (MUFU.EX2); tiny results flush to zero, x = -inf gives 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// 1 / (1 + e^-x), exact at both ends: 0 for x -> -inf, 1 for x -> +inf.
__device__ __forceinline__ float sigmoid_approx(float x) {
  return __fdividef(1.0f, 1.0f + exp2_approx(-x * kLog2e));
}

#endif  // __CUDACC__

}  // namespace ktune
