// Verification kernels the tuner runs around every candidate: deterministic random inputs and an
// element-wise comparison against an fp32 reference. T is float, ktune::bf16 or ktune::fp16 (int
// for compare_kernel; int ids come from fill_ids_kernel, int permutations and ranges from
// fill_permutation_kernel and fill_uniform_int_kernel).
// Both run kCheckThreads threads per block over any grid (grid-stride loops).
#pragma once

#include "common/check_args.h"
#include "common/reduce.cuh"
#include "common/types.cuh"

namespace ktune {

#if defined(__CUDACC__)

template <typename T>
__global__ void __launch_bounds__(kCheckThreads) fill_random_kernel(const FillArgs args) {
  T* data = static_cast<T*>(args.data);
  const T nonzero = from_float<T>(args.hi != 0.0f ? 0.5f * args.hi : 0.5f * args.lo);
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kCheckThreads) +
                              threadIdx.x;
       i < args.count; i += static_cast<unsigned long long>(gridDim.x) * kCheckThreads) {
    const T v = from_float<T>(fill_value(args.seed, i, args.lo, args.hi));
    data[i] = to_float(v) == 0.0f ? nonzero : v;
  }
}

/// One thread per row; a slot draws until its id differs from the row's earlier ones, and after
/// 64 draws takes the smallest unused id (rows with row close to bound stay bounded).
__global__ void __launch_bounds__(kCheckThreads) fill_ids_kernel(const FillIdsArgs args) {
  for (unsigned long long r = blockIdx.x * static_cast<unsigned long long>(kCheckThreads) +
                              threadIdx.x;
       r < args.rows; r += static_cast<unsigned long long>(gridDim.x) * kCheckThreads) {
    int* ids = args.data + r * static_cast<unsigned long long>(args.row);
    for (int j = 0; j < args.row; ++j) {
      int id = -1;
      for (int attempt = 0; attempt < 64 && id < 0; ++attempt) {
        const int c = static_cast<int>(
            fill_hash(args.seed, (r * 64 + static_cast<unsigned long long>(j)) * 64 + attempt) %
            static_cast<unsigned long long>(args.bound));
        bool used = false;
        for (int q = 0; q < j; ++q) used = used || ids[q] == c;
        if (!used) id = c;
      }
      for (int c = 0; id < 0 && c < args.bound; ++c) {
        bool used = false;
        for (int q = 0; q < j; ++q) used = used || ids[q] == c;
        if (!used) id = c;
      }
      ids[j] = id;
    }
  }
}

/// A permutation of [0, count) (fill_permute); one thread per element.
__global__ void __launch_bounds__(kCheckThreads) fill_permutation_kernel(const FillIntArgs args) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kCheckThreads) +
                              threadIdx.x;
       i < args.count; i += static_cast<unsigned long long>(gridDim.x) * kCheckThreads)
    args.data[i] = static_cast<int>(fill_permute(args.seed, i, args.count));
}

/// int32 values in [lo, hi], both ends present (fill_int_value).
__global__ void __launch_bounds__(kCheckThreads) fill_uniform_int_kernel(const FillIntArgs args) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kCheckThreads) +
                              threadIdx.x;
       i < args.count; i += static_cast<unsigned long long>(gridDim.x) * kCheckThreads)
    args.data[i] = static_cast<int>(fill_int_value(args.seed, i, args.lo, args.hi));
}

__device__ __forceinline__ float to_float(int x) { return static_cast<float>(x); }

/// False for NaN and +-Inf.
__device__ __forceinline__ bool is_finite(float v) { return fabsf(v) <= 3.402823466e38f; }

template <typename T>
__global__ void __launch_bounds__(kCheckThreads) compare_kernel(const CompareArgs args) {
  const T* out = static_cast<const T*>(args.out);
  unsigned long long bad = 0, nonfinite = 0, first_bad = ~0ull;
  float max_err = 0.0f, max_ref = 0.0f;
  double sq_err = 0.0, sq_ref = 0.0;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kCheckThreads) +
                              threadIdx.x;
       i < args.count; i += static_cast<unsigned long long>(gridDim.x) * kCheckThreads) {
    if (args.row != 0 && args.row_stride > 1 && (i / args.row) % args.row_stride != 0) continue;
    const float o = to_float(out[i]);
    const float r = args.ref[i];
    bool ok;
    if (is_finite(r)) {
      max_ref = fmaxf(max_ref, fabsf(r));
      sq_ref += static_cast<double>(r) * r;
      if (is_finite(o)) {
        const float err = fabsf(o - r);
        max_err = fmaxf(max_err, err);
        sq_err += static_cast<double>(err) * err;
        ok = err <= args.atol + args.rtol * fabsf(r);
      } else {
        ++nonfinite;
        ok = false;
      }
    } else {
      ok = o == r;  // an infinite reference must be matched exactly; a NaN one never is
    }
    if (!ok) {
      ++bad;
      if (i < first_bad) first_bad = i;
    }
  }
  // One atomic per warp and quantity.
  bad = warp_reduce(bad, SumOp());
  nonfinite = warp_reduce(nonfinite, SumOp());
  sq_err = warp_reduce(sq_err, SumOp());
  sq_ref = warp_reduce(sq_ref, SumOp());
  max_err = warp_reduce(max_err, MaxOp());
  max_ref = warp_reduce(max_ref, MaxOp());
  first_bad = warp_reduce(first_bad, MinOp());
  if ((threadIdx.x & 31) == 0) {
    CompareStats* s = args.stats;
    if (bad != 0) {
      atomicAdd(&s->bad, bad);
      atomicMin(&s->first_bad, first_bad);
    }
    if (nonfinite != 0) atomicAdd(&s->nonfinite, nonfinite);
    // Non-negative floats order like their bit patterns.
    atomicMax(reinterpret_cast<unsigned*>(&s->max_abs_err), __float_as_uint(max_err));
    atomicMax(reinterpret_cast<unsigned*>(&s->max_abs_ref), __float_as_uint(max_ref));
    atomicAdd(&s->sum_sq_err, sq_err);
    atomicAdd(&s->sum_sq_ref, sq_ref);
  }
}

#endif  // __CUDACC__

}  // namespace ktune
