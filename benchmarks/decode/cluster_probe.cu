// Probe (stop 55): can thread block clusters of 10-16 CTAs, one CTA per SM, stream a decode
// call's K/V at the rate the same grid streams without clusters?
//
// Why: bar 2 of the serving-attention issue (b=1, hq=64, hkv=8, nk=32768, d=128: 134 MB of K and
// V) sits at 75 % of copy on the H200, its ~12 us of fixed cost per call the gap
// (benchmarks/decode/NOTES.md). Merging the splits in a cluster (merge=1) removed the combine
// kernel and ran 0.84-0.86x the time at 2-8 splits, but the 8 (batch, KV head) pairs need ~16
// splits each to stream on ~128 SMs, and clusters of 16 ran 1.05-1.5x slower (stop 37). Either
// the GPU cannot place 8 clusters of 16 at once, or it packs a cluster's CTAs onto fewer SMs
// (two per SM where shared memory allows it). This probe separates the two: 8 "pairs" x S
// splits, each CTA reading its contiguous chunk of a 134 MB buffer with 16-byte streaming
// loads (64 KiB in flight per CTA), a cluster barrier at the end where clustered; for each S,
// cluster size (1 or S) and dynamic shared memory (none: up to 4 CTAs per SM; 120 KiB: one) it
// prints cudaOccupancyMaxActiveClusters and the median time of 30 launches (two buffers
// alternating, so no launch reads what the last left in L2).
//
// Build (here or on the GPU machine; carry the binary):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//        benchmarks/decode/cluster_probe.cu -o cluster_probe
// Run: ./cluster_probe            (one table; ~10 s on an H200)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,             \
                   cudaGetErrorString(e_));                                       \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

constexpr int kThreads = 512;
constexpr int kUnroll = 8;  // 16-byte loads in flight per thread: 64 KiB per CTA
constexpr int kPairs = 8;
constexpr long long kBytes = 134217728;  // bar 2's K and V

__global__ void __launch_bounds__(kThreads)
    stream_chunks(const uint4* __restrict__ buf, long long vec_per_pair, int splits,
                  int clustered, unsigned* out) {
  extern __shared__ unsigned char smem[];  // only to bound CTAs per SM
  const long long per = (vec_per_pair + splits - 1) / splits;
  const long long first = blockIdx.y * vec_per_pair + blockIdx.x * per;
  const long long end = min(first + per, (blockIdx.y + 1LL) * vec_per_pair);
  unsigned acc = 0;
  for (long long i = first + threadIdx.x; i < end; i += kThreads * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long j = i + static_cast<long long>(u) * kThreads;
      v[u] = j < end ? __ldcs(buf + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (clustered)  // as merge=1 ends: every CTA of the cluster waits for the others
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n"
        "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  if (acc == 0x9e3779b9u) {  // never in practice; keeps the loads
    smem[threadIdx.x] = 1;
    out[blockIdx.x] = acc + smem[0];
  }
}

/// Median milliseconds of `reps` calls of launch(r) (r = 0, 1, ...) after `warmup`, each timed
/// alone with CUDA events.
template <typename Launch>
float median_ms(int warmup, int reps, Launch launch) {
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int r = 0; r < warmup + reps; ++r) {
    CHECK(cudaEventRecord(t0));
    launch(r);
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float x = 0;
    CHECK(cudaEventElapsedTime(&x, t0, t1));
    if (r >= warmup) ms.push_back(x);
  }
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Result {
  int splits, cluster, smem_kib, per_sm, max_clusters;
  float us;
};

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, %zu KiB shared memory per SM\n", prop.name, prop.multiProcessorCount,
              prop.sharedMemPerMultiprocessor / 1024);
  uint4* buf[2];
  for (auto& b : buf) {
    CHECK(cudaMalloc(&b, kBytes));
    CHECK(cudaMemset(b, 1, kBytes));
  }
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&out, 64 * sizeof(unsigned)));
  const long long vec_per_pair = kBytes / 16 / kPairs;
  CHECK(cudaFuncSetAttribute(stream_chunks, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CHECK(cudaFuncSetAttribute(stream_chunks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             120 * 1024));

  // Copy bandwidth (read + write over time) of a 1 GiB device-to-device copy, for scale.
  {
    const size_t n = size_t{1} << 30;
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    const float ms = median_ms(2, 10, [&](int) {
      CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    });
    std::printf("copy: %.2f TB/s (read + write, 1 GiB, median of 10)\n",
                2.0 * n / (ms * 1e-3) / 1e12);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }

  std::vector<Result> results;
  for (int splits : {8, 10, 12, 14, 16})
    for (int smem_kib : {0, 120})
      for (int cluster : {1, splits}) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(splits, kPairs);
        cfg.blockDim = dim3(kThreads);
        cfg.dynamicSmemBytes = static_cast<size_t>(smem_kib) * 1024;
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = cluster;
        attr.val.clusterDim.y = 1;
        attr.val.clusterDim.z = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = cluster > 1 ? 1 : 0;
        int per_sm = 0, max_clusters = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_chunks, kThreads,
                                                            cfg.dynamicSmemBytes));
        if (cluster > 1) {
          const cudaError_t e = cudaOccupancyMaxActiveClusters(&max_clusters, stream_chunks, &cfg);
          if (e != cudaSuccess) {
            std::printf("splits %d cluster %d smem %d KiB: %s\n", splits, cluster, smem_kib,
                        cudaGetErrorString(e));
            cudaGetLastError();
            continue;
          }
        }
        const float ms = median_ms(5, 30, [&](int r) {
          CHECK(cudaLaunchKernelEx(&cfg, stream_chunks, static_cast<const uint4*>(buf[r & 1]),
                                   vec_per_pair, splits, cluster > 1 ? 1 : 0, out));
        });
        results.push_back({splits, cluster, smem_kib, per_sm, max_clusters, 1000.f * ms});
      }

  std::printf("\n| splits | cluster | smem KiB | CTAs/SM | max active clusters | us | TB/s read "
              "| / same grid unclustered |\n|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    float base = 0;
    for (const Result& b : results)
      if (b.splits == r.splits && b.smem_kib == r.smem_kib && b.cluster == 1) base = b.us;
    std::printf("| %d | %d | %d | %d | %s | %.1f | %.2f | %.3f |\n", r.splits, r.cluster,
                r.smem_kib, r.per_sm,
                r.cluster > 1 ? std::to_string(r.max_clusters).c_str() : "-", r.us,
                kBytes / (r.us * 1e-6) / 1e12, base > 0 ? r.us / base : 0.f);
  }
  return 0;
}
