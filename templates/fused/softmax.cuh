// Row softmax of scale * x, max-subtracted, exponentials in fp32. Template parameters: see
// fused/row.cuh.
//
// Exponentials are taken base 2 of x * scale * log2(e): one FFMA and one MUFU.EX2 per element.
// The re-read path keeps a running (max, sum) per thread, rescaling the sum when the max grows,
// so the row is read twice rather than three times.
#pragma once

#include "common/math.cuh"
#include "common/reduce.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"
#include "fused/args.h"
#include "fused/row.cuh"

namespace ktune {

#if defined(__CUDACC__)

/// A running maximum and the sum of 2^(t - max) over the values seen (in the log2 domain).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int mask) {
  return {shfl_xor(v.max, mask), shfl_xor(v.sum, mask)};
}

/// The max to subtract: 0 while no finite max is known, so that empty states give 0, not NaN.
__device__ __forceinline__ float safe_max(float m) {
  return m == __int_as_float(0xff800000) ? 0.0f : m;
}

struct MaxSumOp {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float m = fmaxf(a.max, b.max);
    const float s = safe_max(m);
    return {m, a.sum * exp2_approx(a.max - s) + b.sum * exp2_approx(b.max - s)};
  }
};

template <typename T, int THREADS, int ROWS, int VEC, int ITEMS>
__global__ void __launch_bounds__(THREADS) softmax_kernel(const SoftmaxArgs args) {
  check_row_kernel_params<T, VEC, ITEMS>();
  using G = RowGroup<THREADS, ROWS>;

  const int row = static_cast<int>(blockIdx.x) * ROWS + G::row();
  if (row >= args.m) return;
  const int nv = args.n / VEC;
  const int lane = G::lane();
  const long long offset = static_cast<long long>(row) * args.n;
  const T* x = static_cast<const T*>(args.x) + offset;
  T* y = static_cast<T*>(args.y) + offset;
  const float k = args.scale * kLog2e;
  const float neg_inf = __int_as_float(0xff800000);

  if constexpr (ITEMS > 0) {
    __shared__ float max_slots[ROWS][G::kWarps];
    __shared__ float sum_slots[ROWS][G::kWarps];
    Vec<T, VEC> xv[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = lane + i * G::kThreads;
      xv[i] = load_vec<VEC>(x + j * VEC, j < nv);
    }
    float t[ITEMS][VEC];
    float m = neg_inf;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const bool in = lane + i * G::kThreads < nv;
      unpack(xv[i], t[i]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        t[i][e] = in ? t[i][e] * k : neg_inf;  // past the row: contributes exp2(-inf) = 0
        m = fmaxf(m, t[i][e]);
      }
    }
    m = safe_max(G::reduce(m, max_slots[G::row()], MaxOp()));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        t[i][e] = exp2_approx(t[i][e] - m);
        s += t[i][e];
      }
    }
    const float inv = 1.0f / G::reduce(s, sum_slots[G::row()], SumOp());
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = lane + i * G::kThreads;
#pragma unroll
      for (int e = 0; e < VEC; ++e) t[i][e] *= inv;
      if (j < nv) store_vec(y + j * VEC, pack<T>(t[i]));
    }
  } else {
    constexpr int B = row_batch<THREADS>();
    __shared__ MaxSum slots[ROWS][G::kWarps];
    MaxSum acc = {neg_inf, 0.0f};
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        if (j < nv) {
          float t[VEC];
          unpack(xv[b], t);
          float vm = neg_inf;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            t[e] *= k;
            vm = fmaxf(vm, t[e]);
          }
          const float m = fmaxf(acc.max, vm);
          const float sm = safe_max(m);
          float s = acc.sum * exp2_approx(acc.max - sm);
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += exp2_approx(t[e] - sm);
          acc = {m, s};
        }
      }
    }
    acc = G::reduce(acc, slots[G::row()], MaxSumOp());
    const float m = safe_max(acc.max);
    const float inv = 1.0f / acc.sum;
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        float t[VEC];
        unpack(xv[b], t);
#pragma unroll
        for (int e = 0; e < VEC; ++e) t[e] = exp2_approx(t[e] * k - m) * inv;
        if (j < nv) store_vec(y + j * VEC, pack<T>(t));
      }
    }
  }
}

#endif  // __CUDACC__

}  // namespace ktune
