// Host helpers shared by the MoE GEMM development harnesses (gemm_dev.cu, gemm_ws_dev.cu): CUDA
// error checks, device copies, NaN-poisoned buffers, the check report, random 16-bit fills, the
// timing loop and the two layers the harnesses time. Built with nvcc -I . -I templates.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "benchmarks/dev_check.hpp"
#include "tests/support/moe_gemm_reference.hpp"


template <typename X>
X* dev_copy(const std::vector<X>& v) {
  X* p;
  CK(cudaMalloc(&p, v.size() * sizeof(X) + 16));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(X), cudaMemcpyHostToDevice));
  return p;
}

template <typename X>
std::vector<X> host_copy(const X* p, std::size_t n) {
  std::vector<X> v(n);
  CK(cudaMemcpy(v.data(), p, n * sizeof(X), cudaMemcpyDeviceToHost));
  return v;
}

inline void* dev_nan(std::size_t elems16) {  // 16-bit elements, all NaN (0xffff in both types)
  void* p;
  CK(cudaMalloc(&p, elems16 * 2 + 16));
  CK(cudaMemset(p, 0xff, elems16 * 2 + 16));
  return p;
}

/// Checks reported so far and how many failed.
inline int failures = 0, checks = 0;

inline void report(const ktune::test::MoeChecker& c) {
  ++checks;
  if (c.failed) {
    ++failures;
    std::printf("FAIL %s: %lld of %lld, first: %s\n", c.what.c_str(), c.failed, c.checked,
                c.first.c_str());
  } else {
    std::printf("ok   %s: %lld values, worst err/tol %.3f\n", c.what.c_str(), c.checked, c.worst);
  }
}

/// Deterministic 16-bit values in +-[1, 63] / 256 (bf16 bits), from a hash of the index and seed.
__global__ void fill_kernel(std::uint16_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    const int v = static_cast<int>(h & 63) | 1;
    const float f = ((h >> 6) & 1 ? -v : v) / 256.0f;
    p[i] = static_cast<std::uint16_t>(__float_as_uint(f) >> 16);
  }
}

inline void fill(void* p, std::size_t n, std::uint32_t seed) {
  fill_kernel<<<1024, 256>>>(static_cast<std::uint16_t*>(p), n, seed);
  CK(cudaGetLastError());
}

/// Median over batches of the mean time of `run(rep)` per repetition, in ms.
template <typename F>
float time_ms(F run) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int w = 0; w < 2; ++w) run(w);
  CK(cudaGetLastError());
  CK(cudaEventRecord(e0));
  run(0);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float est;
  CK(cudaEventElapsedTime(&est, e0, e1));
  const int reps = std::max(4, std::min(50, static_cast<int>(1.5f / std::max(est, 1e-3f))));
  std::vector<float> batch;
  for (int b = 0; b < 5; ++b) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < reps; ++i) run(i);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    batch.push_back(ms / reps);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(batch.begin(), batch.end());
  return batch[2];
}

struct Layer {
  const char* name;
  int E, k, H, I;
};
const Layer kMixtral{"mixtral", 8, 2, 4096, 14336};
const Layer kDeepSeek{"deepseek", 64, 8, 2048, 1408};
