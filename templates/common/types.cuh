// 16-bit and 8-bit float storage types and conversions for kernels compiled by NVRTC alone: no
// CUDA or host headers. Arithmetic is done in fp32; these types only load, store and convert.
// e4m3 is OCP FP8 E4M3 ("e4m3fn": bias 7, no infinities, 0x7f / 0xff NaN, largest finite 448).
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
struct alignas(1) e4m3 {
  unsigned char bits;
};

/// The element type a kernel writes for inputs of type T: T itself, bf16 for e4m3 inputs (FP8
/// attention's O, the FP8 MoE GEMMs' outputs).
template <typename T>
struct OutputOf {
  using type = T;
};
template <>
struct OutputOf<e4m3> {
  using type = bf16;
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

/// Exact on every target (bit arithmetic): subnormals are m * 2^-9.
__device__ __forceinline__ float to_float(e4m3 x) {
  const unsigned b = x.bits, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(0x7fc00000u);
  const float mag = e == 0u ? static_cast<float>(m) * 0.001953125f
                            : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) ? -mag : mag;
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

/// Rounded to nearest even, saturated to +-448 (sm_89 and later; traps before).
template <>
__device__ __forceinline__ e4m3 from_float<e4m3>(float x) {
  e4m3 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short h;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.f), "f"(x));
  r.bits = static_cast<unsigned char>(h & 0xffu);
#else
  (void)x;
  r.bits = 0;
  __trap();
#endif
  return r;
}

/// Four floats as four e4m3 in one 32-bit register, a in the low byte (sm_89 and later).
__device__ __forceinline__ unsigned pack4_e4m3(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return r;
#else
  (void)a, (void)b, (void)c, (void)d;
  __trap();
  return 0;
#endif
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
