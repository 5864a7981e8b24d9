// Row normalisations: add_rmsnorm and layernorm.
//
// Template parameters: see fused/row.cuh. Both kernels compute h in fp32 and derive y from that
// fp32 h (the re-read path recomputes it from x and residual rather than reading the rounded h).
// Loads past the end of a row are predicated off and yield zeros, so every load of a pass
// issues before any of them is waited on; only stores are guarded by branches.
#pragma once

#include "common/reduce.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"
#include "fused/args.h"
#include "fused/row.cuh"

namespace ktune {

#if defined(__CUDACC__)

template <typename T, int THREADS, int ROWS, int VEC, int ITEMS>
__global__ void __launch_bounds__(THREADS) add_rmsnorm_kernel(const AddRmsNormArgs args) {
  check_row_kernel_params<T, VEC, ITEMS>();
  using G = RowGroup<THREADS, ROWS>;
  __shared__ float slots[ROWS][G::kWarps];

  const int row = static_cast<int>(blockIdx.x) * ROWS + G::row();
  if (row >= args.m) return;
  const int nv = args.n / VEC;
  const int lane = G::lane();
  const long long offset = static_cast<long long>(row) * args.n;
  const T* x = static_cast<const T*>(args.x) + offset;
  const T* r = static_cast<const T*>(args.residual) + offset;
  const T* w = static_cast<const T*>(args.weight);
  T* y = static_cast<T*>(args.y) + offset;
  T* h = static_cast<T*>(args.h) + offset;

  if constexpr (ITEMS > 0) {
    Vec<T, VEC> xv[ITEMS], rv[ITEMS], wv[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      xv[k] = load_vec<VEC>(x + j * VEC, j < nv);
      rv[k] = load_vec<VEC>(r + j * VEC, j < nv);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      wv[k] = load_vec<VEC>(w + j * VEC, j < nv);
    }
    float hf[ITEMS][VEC];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      float b[VEC];
      unpack(xv[k], hf[k]);
      unpack(rv[k], b);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        hf[k][i] += b[i];
        ss = fmaf(hf[k][i], hf[k][i], ss);
      }
      if (j < nv) store_vec(h + j * VEC, pack<T>(hf[k]));
    }
    ss = G::reduce(ss, slots[G::row()], SumOp());
    const float inv = rsqrtf(ss / static_cast<float>(args.n) + args.eps);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      float wf[VEC], o[VEC];
      unpack(wv[k], wf);
#pragma unroll
      for (int i = 0; i < VEC; ++i) o[i] = hf[k][i] * inv * wf[i];
      if (j < nv) store_vec(y + j * VEC, pack<T>(o));
    }
  } else {
    constexpr int B = row_batch<THREADS>();
    float ss = 0.0f;
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B], rv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
        rv[b] = load_vec<VEC>(r + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        float a[VEC], c[VEC];
        unpack(xv[b], a);
        unpack(rv[b], c);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          a[i] += c[i];
          ss = fmaf(a[i], a[i], ss);
        }
        if (j < nv) store_vec(h + j * VEC, pack<T>(a));
      }
    }
    ss = G::reduce(ss, slots[G::row()], SumOp());
    const float inv = rsqrtf(ss / static_cast<float>(args.n) + args.eps);
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B], rv[B], wv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
        rv[b] = load_vec<VEC>(r + j * VEC, j < nv);
        wv[b] = load_vec<VEC>(w + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        float a[VEC], c[VEC], wf[VEC];
        unpack(xv[b], a);
        unpack(rv[b], c);
        unpack(wv[b], wf);
#pragma unroll
        for (int i = 0; i < VEC; ++i) a[i] = (a[i] + c[i]) * inv * wf[i];
        if (j < nv) store_vec(y + j * VEC, pack<T>(a));
      }
    }
  }
}

/// Count, mean and sum of squared deviations of a set of values (Chan et al. combine).
struct Welford {
  float n;
  float mean;
  float m2;
};

__device__ __forceinline__ Welford shfl_xor(Welford v, int mask) {
  return {shfl_xor(v.n, mask), shfl_xor(v.mean, mask), shfl_xor(v.m2, mask)};
}

struct WelfordOp {
  __device__ __forceinline__ Welford operator()(Welford a, Welford b) const {
    const float n = a.n + b.n;
    const float fb = n > 0.0f ? __fdividef(b.n, n) : 0.0f;
    const float d = b.mean - a.mean;
    return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
  }
};

/// Exact mean and squared deviations of one vector, as a Welford state.
template <int VEC>
__device__ __forceinline__ Welford welford_of(const float (&v)[VEC]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < VEC; ++i) s += v[i];
  const float mean = s * (1.0f / VEC);
  float m2 = 0.0f;
#pragma unroll
  for (int i = 0; i < VEC; ++i) m2 = fmaf(v[i] - mean, v[i] - mean, m2);
  return {static_cast<float>(VEC), mean, m2};
}

template <typename T, bool RESIDUAL, int THREADS, int ROWS, int VEC, int ITEMS>
__global__ void __launch_bounds__(THREADS) layernorm_kernel(const LayerNormArgs args) {
  check_row_kernel_params<T, VEC, ITEMS>();
  using G = RowGroup<THREADS, ROWS>;

  const int row = static_cast<int>(blockIdx.x) * ROWS + G::row();
  if (row >= args.m) return;
  const int nv = args.n / VEC;
  const int lane = G::lane();
  const long long offset = static_cast<long long>(row) * args.n;
  const T* x = static_cast<const T*>(args.x) + offset;
  const T* r = RESIDUAL ? static_cast<const T*>(args.residual) + offset : nullptr;
  const T* w = static_cast<const T*>(args.weight);
  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.y) + offset;
  T* h = RESIDUAL ? static_cast<T*>(args.h) + offset : nullptr;

  if constexpr (ITEMS > 0) {
    __shared__ float sum_slots[ROWS][G::kWarps];
    __shared__ float var_slots[ROWS][G::kWarps];
    Vec<T, VEC> xv[ITEMS], rv[ITEMS], wv[ITEMS], bv[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      xv[k] = load_vec<VEC>(x + j * VEC, j < nv);
      if constexpr (RESIDUAL) rv[k] = load_vec<VEC>(r + j * VEC, j < nv);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      wv[k] = load_vec<VEC>(w + j * VEC, j < nv);
      bv[k] = load_vec<VEC>(bias + j * VEC, j < nv);
    }
    float hf[ITEMS][VEC];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      unpack(xv[k], hf[k]);
      if constexpr (RESIDUAL) {
        float c[VEC];
        unpack(rv[k], c);
#pragma unroll
        for (int i = 0; i < VEC; ++i) hf[k][i] += c[i];
        if (j < nv) store_vec(h + j * VEC, pack<T>(hf[k]));
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) s += hf[k][i];
    }
    const float inv_n = 1.0f / static_cast<float>(args.n);
    const float mean = G::reduce(s, sum_slots[G::row()], SumOp()) * inv_n;
    // Second pass over the registers: the variance of the deviations, without cancellation.
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const bool in = lane + k * G::kThreads < nv;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        hf[k][i] = in ? hf[k][i] - mean : 0.0f;
        ss = fmaf(hf[k][i], hf[k][i], ss);
      }
    }
    const float var = G::reduce(ss, var_slots[G::row()], SumOp()) * inv_n;
    const float rstd = rsqrtf(var + args.eps);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = lane + k * G::kThreads;
      float wf[VEC], bf[VEC], o[VEC];
      unpack(wv[k], wf);
      unpack(bv[k], bf);
#pragma unroll
      for (int i = 0; i < VEC; ++i) o[i] = fmaf(hf[k][i] * rstd, wf[i], bf[i]);
      if (j < nv) store_vec(y + j * VEC, pack<T>(o));
    }
  } else {
    constexpr int B = row_batch<THREADS>();
    __shared__ Welford slots[ROWS][G::kWarps];
    Welford acc = {0.0f, 0.0f, 0.0f};
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B], rv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
        if constexpr (RESIDUAL) rv[b] = load_vec<VEC>(r + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        if (j < nv) {
          float a[VEC];
          unpack(xv[b], a);
          if constexpr (RESIDUAL) {
            float c[VEC];
            unpack(rv[b], c);
#pragma unroll
            for (int i = 0; i < VEC; ++i) a[i] += c[i];
            store_vec(h + j * VEC, pack<T>(a));
          }
          acc = WelfordOp()(acc, welford_of(a));
        }
      }
    }
    acc = G::reduce(acc, slots[G::row()], WelfordOp());
    const float mean = acc.mean;
    const float rstd = rsqrtf(acc.m2 / static_cast<float>(args.n) + args.eps);
    // Second pass from x (and residual): y is computed from fp32 h.
    for (int j0 = lane; j0 < nv; j0 += B * G::kThreads) {
      Vec<T, VEC> xv[B], rv[B], wv[B], bv[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        xv[b] = load_vec<VEC>(x + j * VEC, j < nv);
        if constexpr (RESIDUAL) rv[b] = load_vec<VEC>(r + j * VEC, j < nv);
        wv[b] = load_vec<VEC>(w + j * VEC, j < nv);
        bv[b] = load_vec<VEC>(bias + j * VEC, j < nv);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int j = j0 + b * G::kThreads;
        float a[VEC], wf[VEC], bf[VEC];
        unpack(xv[b], a);
        unpack(wv[b], wf);
        unpack(bv[b], bf);
        if constexpr (RESIDUAL) {
          float c[VEC];
          unpack(rv[b], c);
#pragma unroll
          for (int i = 0; i < VEC; ++i) a[i] += c[i];
        }
#pragma unroll
        for (int i = 0; i < VEC; ++i) a[i] = fmaf((a[i] - mean) * rstd, wf[i], bf[i]);
        if (j < nv) store_vec(y + j * VEC, pack<T>(a));
      }
    }
  }
}

#endif  // __CUDACC__

}  // namespace ktune
