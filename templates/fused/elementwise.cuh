// Elementwise ops over [m, n] rows: bias_act (y = act(x + bias)) and swiglu (y = silu(a) * b).
//
// Template parameters:
//   T        bf16 or fp16 storage; arithmetic is fp32
//   THREADS  threads per block
//   VEC      elements per vector access (VEC * sizeof(T) <= 16 bytes); n % VEC == 0
//   UNROLL   rows per thread: a thread issues UNROLL independent vector loads (2 * UNROLL for
//            swiglu) before it computes anything
// A block is 2^col_shift column threads (host: min(THREADS, next power of two of n / VEC)) by
// THREADS >> col_shift row threads. Thread (c, r) of block (bx, by) handles vector column
// by * 2^col_shift + c of rows bx * rows_per_block + u * row_threads + r, u < UNROLL, where
// rows_per_block = row_threads * UNROLL. Each load instruction of a block thus covers whole
// contiguous stretches of rows, and a thread loads its bias vector once for all its rows.
// Grid: (ceil(m / rows_per_block), ceil((n / VEC) / 2^col_shift)).
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"
#include "fused/args.h"

namespace ktune {

#if defined(__CUDACC__)

template <Activation A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Activation::gelu_tanh) {
    // 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3)
    const float u2 = 1.5957691216057308f * fmaf(0.044715f * x, x * x, x);
    return x * sigmoid_approx(u2);
  } else if constexpr (A == Activation::gelu_erf) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (A == Activation::silu) {
    return x * sigmoid_approx(x);
  } else {
    static_assert(A == Activation::relu, "unknown activation");
    return fmaxf(x, 0.0f);
  }
}

template <typename T, int THREADS, int VEC, int UNROLL>
__device__ __forceinline__ void check_elementwise_params() {
  static_assert(sizeof(T) == 2, "elementwise kernels take bf16 or fp16");
  static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                "THREADS must be a power of two in 32..1024");
  static_assert(VEC >= 1 && (VEC & (VEC - 1)) == 0 && VEC * sizeof(T) <= 16,
                "VEC must be a power of two with VEC * sizeof(T) <= 16");
  static_assert(UNROLL >= 1 && UNROLL <= 8, "UNROLL must be in 1..8");
}

template <typename T, Activation ACT, int THREADS, int VEC, int UNROLL>
__global__ void __launch_bounds__(THREADS) bias_act_kernel(const BiasActArgs args) {
  check_elementwise_params<T, THREADS, VEC, UNROLL>();
  const int shift = args.col_shift;
  const int row_threads = THREADS >> shift;
  const int c = (static_cast<int>(blockIdx.y) << shift) +
                (static_cast<int>(threadIdx.x) & ((1 << shift) - 1));
  if (c >= args.n / VEC) return;
  const long long row0 = static_cast<long long>(blockIdx.x) * row_threads * UNROLL +
                         (static_cast<int>(threadIdx.x) >> shift);
  const long long col = static_cast<long long>(c) * VEC;
  const T* x = static_cast<const T*>(args.x) + col;
  T* y = static_cast<T*>(args.y) + col;

  Vec<T, VEC> xv[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const long long row = row0 + u * row_threads;
    xv[u] = load_vec<VEC>(x + row * args.n, row < args.m);
  }
  float bf[VEC];
  unpack(load_vec<VEC>(static_cast<const T*>(args.bias) + col), bf);
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const long long row = row0 + u * row_threads;
    if (row < args.m) {
      float v[VEC];
      unpack(xv[u], v);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] = activate<ACT>(v[i] + bf[i]);
      store_vec(y + row * args.n, pack<T>(v));
    }
  }
}

template <typename T, int THREADS, int VEC, int UNROLL>
__global__ void __launch_bounds__(THREADS) swiglu_kernel(const SwigluArgs args) {
  check_elementwise_params<T, THREADS, VEC, UNROLL>();
  const int shift = args.col_shift;
  const int row_threads = THREADS >> shift;
  const int c = (static_cast<int>(blockIdx.y) << shift) +
                (static_cast<int>(threadIdx.x) & ((1 << shift) - 1));
  if (c >= args.n / VEC) return;
  const long long row0 = static_cast<long long>(blockIdx.x) * row_threads * UNROLL +
                         (static_cast<int>(threadIdx.x) >> shift);
  const long long col = static_cast<long long>(c) * VEC;
  const long long in_stride = 2LL * args.n;
  const T* a = static_cast<const T*>(args.x) + col;
  const T* b = a + args.n;
  T* y = static_cast<T*>(args.y) + col;

  Vec<T, VEC> av[UNROLL], bv[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const long long row = row0 + u * row_threads;
    av[u] = load_vec<VEC>(a + row * in_stride, row < args.m);
    bv[u] = load_vec<VEC>(b + row * in_stride, row < args.m);
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const long long row = row0 + u * row_threads;
    if (row < args.m) {
      float af[VEC], bf[VEC];
      unpack(av[u], af);
      unpack(bv[u], bf);
#pragma unroll
      for (int i = 0; i < VEC; ++i) af[i] = af[i] * sigmoid_approx(af[i]) * bf[i];
      store_vec(y + row * args.n, pack<T>(af));
    }
  }
}

#endif  // __CUDACC__

}  // namespace ktune
