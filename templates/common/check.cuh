// Verification kernels the tuner runs around every candidate: deterministic random inputs and a
// comparison of an output with the fp32 reference. Grid-stride loops: any grid size works.
#pragma once

#include "common/check_args.h"
#include "common/types.cuh"

namespace ktune {

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_random_kernel(const FillRandomArgs args) {
  T* data = static_cast<T*>(args.data);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < args.n; i += stride) {
    // 24 random bits -> [0, 1); nudge exact zeros away so no element is 0.
    float u = static_cast<float>(mix64(args.seed * 0x100000001b3ULL + i) >> 40) * (1.0f / 16777216.0f);
    float v = args.lo + (args.hi - args.lo) * u;
    if (v == 0.0f) v = 0.0078125f;
    data[i] = from_float<T>(v);
  }
}

__device__ __forceinline__ void atomic_max_nonneg(float* addr, float v) {
  // Non-negative floats order like their bit patterns as signed ints.
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

template <typename T>
__global__ void compare_kernel(const CompareArgs args) {
  const T* out = static_cast<const T*>(args.out);
  unsigned long long bad = 0, nonfinite = 0;
  float max_err = 0.0f, max_ref = 0.0f;
  double sq_err = 0.0, sq_ref = 0.0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < args.n; i += stride) {
    float o = to_float(out[i]);
    float r = args.ref[i];
    bool ref_finite = isfinite(r);
    if (!isfinite(o)) {
      if (ref_finite || !(isnan(o) == isnan(r))) {
        ++bad;
        ++nonfinite;
      }
      continue;
    }
    if (!ref_finite) {
      ++bad;
      continue;
    }
    float err = fabsf(o - r);
    if (!(err <= args.atol + args.rtol * fabsf(r))) ++bad;
    max_err = fmaxf(max_err, err);
    max_ref = fmaxf(max_ref, fabsf(r));
    sq_err += static_cast<double>(err) * err;
    sq_ref += static_cast<double>(r) * r;
  }
  for (int off = 16; off > 0; off >>= 1) {
    bad += __shfl_down_sync(0xffffffffu, bad, off);
    nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, off);
    max_err = fmaxf(max_err, __shfl_down_sync(0xffffffffu, max_err, off));
    max_ref = fmaxf(max_ref, __shfl_down_sync(0xffffffffu, max_ref, off));
    sq_err += __shfl_down_sync(0xffffffffu, sq_err, off);
    sq_ref += __shfl_down_sync(0xffffffffu, sq_ref, off);
  }
  if ((threadIdx.x & 31) == 0) {
    if (bad) atomicAdd(&args.stats->bad, bad);
    if (nonfinite) atomicAdd(&args.stats->nonfinite, nonfinite);
    atomic_max_nonneg(&args.stats->max_abs_err, max_err);
    atomic_max_nonneg(&args.stats->max_abs_ref, max_ref);
    atomicAdd(&args.stats->sum_sq_err, sq_err);
    atomicAdd(&args.stats->sum_sq_ref, sq_ref);
  }
}

}  // namespace ktune
