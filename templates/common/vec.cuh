// Aligned vector access to global memory: N elements of T moved as one 2-, 4-, 8- or 16-byte
// load or store (16 bytes is one LDG.E.128 / STG.E.128 per thread).
//
// Loads use the read-only path (ld.global.nc): the caller promises that the data does not change
// while the kernel runs, which holds for kernel inputs that do not alias its outputs.
#pragma once

#include "common/types.cuh"

namespace ktune {

/// N elements of T, aligned to their total size so that one instruction moves them.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "Vec: N must be a power of two");
  static_assert(sizeof(T) * N <= 16, "Vec: at most 16 bytes per access");
  static constexpr int kSize = N;
  T v[N];
};

#if defined(__CUDACC__)

/// Loads N elements from `p`, which must be aligned to sizeof(T) * N bytes.
template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  Vec<T, N> r;
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes == 16) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
        : "l"(p));
  } else if constexpr (kBytes == 8) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  } else if constexpr (kBytes == 4) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
  } else if constexpr (kBytes == 2) {
    unsigned short* w = reinterpret_cast<unsigned short*>(&r);
    asm("ld.global.nc.u16 %0, [%1];" : "=h"(w[0]) : "l"(p));
  } else {
    static_assert(kBytes == 1, "load_vec: unsupported size");
    unsigned short b;
    asm("ld.global.nc.u8 %0, [%1];" : "=h"(b) : "l"(p));
    *reinterpret_cast<unsigned char*>(&r) = static_cast<unsigned char>(b);
  }
  return r;
}

/// Loads N elements from `p` when `pred` holds, else returns zeros without touching memory.
/// A predicated instruction rather than a branch: a thread's guarded loads all issue back to back.
template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p, bool pred) {
  Vec<T, N> r;
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  const int on = pred;
  if constexpr (kBytes == 16) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
        " @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
        : "l"(p), "r"(on));
  } else if constexpr (kBytes == 8) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0;\n"
        " @p ld.global.nc.v2.u32 {%0, %1}, [%2];\n}"
        : "=r"(w[0]), "=r"(w[1])
        : "l"(p), "r"(on));
  } else if constexpr (kBytes == 4) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
        " mov.b32 %0, 0;\n"
        " @p ld.global.nc.u32 %0, [%1];\n}"
        : "=r"(w[0])
        : "l"(p), "r"(on));
  } else if constexpr (kBytes == 2) {
    unsigned short* w = reinterpret_cast<unsigned short*>(&r);
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
        " mov.b16 %0, 0;\n"
        " @p ld.global.nc.u16 %0, [%1];\n}"
        : "=h"(w[0])
        : "l"(p), "r"(on));
  } else {
    static_assert(kBytes == 1, "load_vec: unsupported size");
    unsigned short b;
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
        " mov.b16 %0, 0;\n"
        " @p ld.global.nc.u8 %0, [%1];\n}"
        : "=h"(b)
        : "l"(p), "r"(on));
    *reinterpret_cast<unsigned char*>(&r) = static_cast<unsigned char>(b);
  }
  return r;
}

/// Stores N elements to `p`, which must be aligned to sizeof(T) * N bytes.
template <int N, typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes == 16) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :
                 : "l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]));
  } else if constexpr (kBytes == 8) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" : : "l"(p), "r"(w[0]), "r"(w[1]));
  } else if constexpr (kBytes == 4) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.global.u32 [%0], %1;" : : "l"(p), "r"(w[0]));
  } else if constexpr (kBytes == 2) {
    const unsigned short* w = reinterpret_cast<const unsigned short*>(&v);
    asm volatile("st.global.u16 [%0], %1;" : : "l"(p), "h"(w[0]));
  } else {
    static_assert(kBytes == 1, "store_vec: unsupported size");
    const unsigned short b = *reinterpret_cast<const unsigned char*>(&v);
    asm volatile("st.global.u8 [%0], %1;" : : "l"(p), "h"(b));
  }
}

/// The N elements of a vector as floats.
template <typename T, int N>
__device__ __forceinline__ void unpack(const Vec<T, N>& v, float (&f)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = to_float(v.v[i]);
}

/// bf16 pairs widen with one integer instruction each: the low half shifted up, the high half
/// masked in place.
template <int N>
__device__ __forceinline__ void unpack(const Vec<bf16, N>& v, float (&f)[N]) {
  if constexpr (N >= 2) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    f[0] = to_float(v.v[0]);
  }
}

/// N floats rounded (to nearest even) into a vector; 16-bit types convert two at a time.
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> pack(const float (&f)[N]) {
  Vec<T, N> r;
  if constexpr (sizeof(T) == 2 && N >= 2) {
    unsigned* w = reinterpret_cast<unsigned*>(&r);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = pack2<T>(f[2 * i], f[2 * i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = from_float<T>(f[i]);
  }
  return r;
}

#endif  // __CUDACC__

}  // namespace ktune
