// 16-bit float storage types and conversions for kernels compiled by NVRTC alone: no CUDA or
// host headers. Arithmetic is done in fp32; these types only load, store and convert.
#pragma once

#ifndef __CUDACC_RTC__
#include <cstdint>
#endif

namespace ktune {

struct alignas(2) bf16 {
  unsigned short bits;
};
struct alignas(2) fp16 {
  unsigned short bits;
};

#if defined(__CUDACC__)

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) {
  return __uint_as_float(static_cast<unsigned>(x.bits) << 16);
}
__device__ __forceinline__ float to_float(fp16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}
template <>
__device__ __forceinline__ fp16 from_float<fp16>(float x) {
  fp16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}

/// Two floats packed into one 32-bit register of two 16-bit values (low half = a).
template <typename T>
__device__ __forceinline__ unsigned pack2(float a, float b);
template <>
__device__ __forceinline__ unsigned pack2<bf16>(float a, float b) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}
template <>
__device__ __forceinline__ unsigned pack2<fp16>(float a, float b) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}

#endif  // __CUDACC__

}  // namespace ktune
