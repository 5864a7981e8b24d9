// Helpers shared by the attention development harnesses (fa_dev.cu, fp8_dev.cu): CK (the CUDA
// error check) and a deterministic uniform fill of any storage type of common/types.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "benchmarks/dev_check.hpp"
#include "common/types.cuh"


__device__ unsigned hash32(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<unsigned>(x);
}

/// p[i] = amp * u, u uniform in [-1, 1) from (seed, i), rounded to T.
template <typename T>
__global__ void fill_uniform(T* p, size_t n, unsigned long long seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float u = (hash32(seed * 0x9e3779b97f4a7c15ULL + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = ktune::from_float<T>((2.f * u - 1.f) * amp);
  }
}
