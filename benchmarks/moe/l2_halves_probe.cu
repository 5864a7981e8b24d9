// Probe (stop 69): is a byte read by SMs on both halves of the H100 fetched from DRAM twice?
//
// Why: ncu today (benchmarks/results/h100-stop69-2026-12-06.md) has Mixtral T=1024's gemm1 read
// 2.55 GB from DRAM for 1.88 GB of w1 and gemm2 1.47 GB for 0.94 GB of w2 (+ 59 MB of act), at
// 73 % and 80 % of DRAM peak; at T=4096 both read 2.6x their weights. Each weight tile is read
// by the 2-3 row blocks of its expert (8-9 at T=4096), and those CTAs start close together, so
// one L2 should serve the later ones. NVIDIA describes the A100/H100 L2 as two partitions, each
// caching data for the SMs of the GPCs attached to it: a tile read by SMs of both halves would
// then come from DRAM twice (2-3 random readers: ~1.5-1.75x; 8 readers: 2x), about what ncu shows.
//
// Kernels (132 CTAs of 256 threads, one per SM by a shared-memory request; each CTA reads 4 MB
// with 16-byte L2-only loads; the reads of one launch come from a 1 GiB pool region no earlier
// launch touched, and ncu flushes the caches before each kernel anyway):
//   own:      CTA b reads region b (no sharing): DRAM bytes = 132 x 4 MB, the baseline;
//   all:      every CTA reads region 0: 4 MB if one L2 serves all, 8 MB if each half fetches it;
//   pairs:    CTAs 2i and 2i+1 read region i (placed wherever the GPU puts them);
//   clusters: the same pairs as clusters of two CTAs (one GPC, so one half).
// Each CTA records its %smid; the host prints, for `pairs`, how many pairs ran on SMs whose ids
// differ by less than 2 (a hint of a GPC, not a proof). Prints kernel times; DRAM bytes come
// from ncu:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . \
//        benchmarks/moe/l2_halves_probe.cu -o $OUT/l2p && \
//   ncu --metrics dram__bytes_read.sum,gpu__time_duration.sum $OUT/l2p
// Prediction (written before any run): all 7.5-8.5 MB (two fetches), own ~554 MB, pairs
// 1.4-1.6x clusters' bytes, clusters ~277 MB (66 regions x 4 MB, once each). If all reads ~4 MB
// and pairs equal clusters, the halves do not duplicate and the GEMMs' excess DRAM reads have
// another cause.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "benchmarks/dev_check.hpp"  // CK, launch_clustered

constexpr int kThreads = 256;
constexpr long long kRegion = 4LL << 20;  // bytes per region
constexpr int kSmem = 120 * 1024;        // > half an SM's shared memory: one CTA per SM

__device__ __forceinline__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

/// CTA b reads region region_of(b) of `base` (kRegion bytes, 16-byte L2-only loads, 8 in
/// flight per thread) and records its SM in sm[b].
template <int MODE>  // 0 own, 1 all, 2 pairs (also clusters)
__global__ void __launch_bounds__(kThreads) read_regions(const uint4* __restrict__ base,
                                                         unsigned* sm, unsigned* out) {
  extern __shared__ unsigned char unused[];
  const int b = static_cast<int>(blockIdx.x);
  const int region = MODE == 0 ? b : MODE == 1 ? 0 : b / 2;
  const uint4* p = base + region * (kRegion / 16);
  constexpr long long kVecs = kRegion / 16;
  constexpr int U = 8;
  unsigned acc = 0;
  for (long long i = threadIdx.x; i < kVecs; i += kThreads * U) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) x[u] = __ldcg(p + i + u * kThreads);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
  }
  if (threadIdx.x == 0) sm[b] = smid();
  if (acc == 0x9e3779b9u) out[b & 63] = acc;
  (void)unused;
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int ctas = prop.multiProcessorCount & ~1;  // whole pairs
  std::printf("%s, %d SMs, L2 %d MB; %d CTAs, 4 MB a region\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, ctas);
  const long long pool_bytes = 1LL << 30;
  unsigned char* pool = nullptr;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 1, pool_bytes));
  unsigned *sm = nullptr, *out = nullptr;
  CK(cudaMalloc(&sm, ctas * sizeof(unsigned)));
  CK(cudaMalloc(&out, 64 * sizeof(unsigned)));
  const auto own = read_regions<0>, all = read_regions<1>, pairs = read_regions<2>;
  for (auto f : {own, all, pairs})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // Consecutive launches start at fresh offsets of the pool (wrapping), so none starts with its
  // bytes in L2 even without ncu's flush: own needs 528 MB, the others at most 264 MB.
  long long offset = 0;
  const auto next = [&](long long bytes) {
    if (offset + bytes > pool_bytes) offset = 0;
    const auto* p = reinterpret_cast<const uint4*>(pool + offset);
    offset += bytes;
    return p;
  };
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  std::vector<unsigned> host(ctas);
  const auto run = [&](const char* name, void (*f)(const uint4*, unsigned*, unsigned*),
                       long long bytes, int cluster) {
    const uint4* p = next(bytes);
    CK(cudaEventRecord(t0));
    launch_clustered(f, dim3(ctas), kThreads, kSmem, dim3(cluster), p, sm, out);
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    CK(cudaMemcpy(host.data(), sm, ctas * sizeof(unsigned), cudaMemcpyDeviceToHost));
    int near = 0;
    for (int i = 0; i + 1 < ctas; i += 2) {
      const int d = static_cast<int>(host[i]) - static_cast<int>(host[i + 1]);
      near += d >= -1 && d <= 1;
    }
    std::printf("%-9s cluster %d: %8.1f us; pairs on SM ids <= 1 apart: %d of %d; first pairs' "
                "SMs: %u/%u %u/%u %u/%u %u/%u\n",
                name, cluster, 1000.f * ms, near, ctas / 2, host[0], host[1], host[2], host[3],
                host[4], host[5], host[6], host[7]);
  };
  for (int rep = 0; rep < 2; ++rep) {
    run("own", own, ctas * kRegion, 1);
    run("all", all, kRegion, 1);
    run("pairs", pairs, ctas / 2 * kRegion, 1);
    run("clusters", pairs, ctas / 2 * kRegion, 2);
  }
  return 0;
}
