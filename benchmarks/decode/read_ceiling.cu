// Probe (stop 65): how fast can one kernel launch read N bytes once from DRAM, as a fraction
// of the device-to-device copy rate the decode bars are measured against?
//
// Why: bar 2 of the serving-attention issue (b=1, hq=64, hkv=8, nk=32768, d=128) asks a decode
// call to read its 134 MB of K and V at >= 90 % of copy bandwidth. Ours reads at 83-85 % on the
// H100 (1.06x cuDNN), and every measured loss is fixed cost around the stream (launch, first
// loads, the tail, the combine: benchmarks/decode/NOTES.md). On the H200 a bare stream of 128
// CTAs read the 134 MB at 88 % of copy (cluster_probe.cu, 2026-12-04). This probe gives the
// H100's ceiling for any single launch: no compute, no partials, no combine; grids of 1-16 CTAs
// per SM, 4-16 loads of 16 bytes in flight per thread, each CTA reading one contiguous chunk
// (as a decode split does) or the grid striding over the whole buffer. If its best is under
// 90 % at 134 MB, no kernel that reads K and V once in one launch meets bar 2 as written.
//
// Sizes: 34, 67, 134 (bar 2), 268 (bar 1) and 537 MB, decode_scaling.py's families, and the fit
// t = a + bytes / rate of each kernel's best over them (the fixed part no decode kernel can go
// under). Launches rotate over regions of one 1 GiB pool, at least 200 MB of them (4x the L2),
// so none starts with its bytes in the 50 MB L2. CUDA events: the median of 30 launches each timed
// alone, and the median of 30 batches of 10 back-to-back launches (decode_bench.py's method);
// copy is decode_bench.py's too (2 GiB device to device, read + write).
//
// Build and run on the GPU machine, from the repository root (one call, ~20 s):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . \
//        benchmarks/decode/read_ceiling.cu -o $OUT/read_ceiling && $OUT/read_ceiling
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "benchmarks/dev_check.hpp"  // CK, median_ms, copy_tbs

constexpr int kThreads = 512;
constexpr long long kMaxBytes = 536870912;

/// Reads vecs 16-byte words of buf once. CHUNKED: CTA b reads the b-th contiguous chunk;
/// otherwise the grid strides over the whole buffer. UNROLL loads in flight per thread.
template <int UNROLL, bool CHUNKED>
__global__ void __launch_bounds__(kThreads) read_once(const uint4* __restrict__ buf,
                                                      long long vecs, unsigned* out) {
  long long first, end, step;
  if (CHUNKED) {
    const long long per = (vecs + gridDim.x - 1) / gridDim.x;
    first = blockIdx.x * per + threadIdx.x;
    end = min((blockIdx.x + 1LL) * per, vecs);
    step = kThreads;
  } else {
    first = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
    end = vecs;
    step = static_cast<long long>(gridDim.x) * kThreads;
  }
  unsigned acc = 0;
  for (long long i = first; i < end; i += step * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = i + u * step;
      v[u] = j < end ? __ldcs(buf + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x & 63] = acc;  // never in practice; keeps the loads
}

using Kernel = void (*)(const uint4*, long long, unsigned*);

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const float copy0 = copy_tbs();
  uint4* pool = nullptr;
  CK(cudaMalloc(&pool, 2 * kMaxBytes));
  CK(cudaMemset(pool, 1, 2 * kMaxBytes));
  unsigned* out = nullptr;
  CK(cudaMalloc(&out, 64 * sizeof(unsigned)));
  struct K {
    const char* name;
    Kernel f;
  };
  const K kernels[] = {{"chunk u4", read_once<4, true>},   {"chunk u8", read_once<8, true>},
                       {"chunk u16", read_once<16, true>}, {"stride u4", read_once<4, false>},
                       {"stride u8", read_once<8, false>}, {"stride u16", read_once<16, false>}};
  for (const K& k : kernels)
    CK(cudaFuncSetAttribute(k.f, cudaFuncAttributePreferredSharedMemoryCarveout, 0));
  struct Row {
    long long bytes;
    const char* name;
    int per_sm;
    float us;     // each launch timed alone
    float us10;   // batches of 10 back-to-back launches, per launch
  };
  std::vector<Row> rows;
  const long long sizes[] = {33554432LL, 67108864LL, 134217728LL, 268435456LL, 536870912LL};
  for (const long long bytes : sizes)
    for (const K& k : kernels)
      for (const int per_sm : {1, 2, 4}) {
        const long long vecs = bytes / 16;
        const long long regions = std::max(2LL, (200LL << 20) / bytes + 1);
        const auto launch = [&](int r) {
          k.f<<<sms * per_sm, kThreads>>>(pool + (r % regions) * vecs, vecs, out);
          CK(cudaGetLastError());
        };
        const float ms = median_ms(5, 30, 1, launch);
        const float ms10 = median_ms(5, 30, 10, launch);
        rows.push_back({bytes, k.name, per_sm, 1000.f * ms, 1000.f * ms10});
      }
  const float copy1 = copy_tbs();
  const float copy = 0.5f * (copy0 + copy1);
  std::printf("copy: %.3f TB/s at the start, %.3f at the end (read + write, 2 GiB, median of "
              "20 x 3); %.3f used\n\n",
              copy0, copy1, copy);
  const auto pct = [&](long long bytes, float us) {
    return 100.0 * bytes / (us * 1e-6) / 1e12 / copy;
  };
  std::printf("| MB | kernel | grid / SMs | us alone | %% of copy | us in 10 | %% of copy |\n"
              "|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %.0f | %s | %d | %.1f | %.1f | %.1f | %.1f |\n", r.bytes / 1e6, r.name,
                r.per_sm, r.us, pct(r.bytes, r.us), r.us10, pct(r.bytes, r.us10));
  std::printf("\nbest per size:\n");
  std::vector<double> x, y;  // bytes, best us in batches of 10
  for (const long long bytes : sizes) {
    const Row* best = nullptr;
    const Row* best10 = nullptr;
    for (const Row& r : rows) {
      if (r.bytes != bytes) continue;
      if (!best || r.us < best->us) best = &r;
      if (!best10 || r.us10 < best10->us10) best10 = &r;
    }
    std::printf("%.0f MB: alone %.1f us (%s, grid %d x SMs) %.1f %% of copy; in 10 %.1f us "
                "(%s, %d) %.1f %%\n",
                bytes / 1e6, best->us, best->name, best->per_sm, pct(bytes, best->us),
                best10->us10, best10->name, best10->per_sm, pct(bytes, best10->us10));
    x.push_back(static_cast<double>(bytes));
    y.push_back(best10->us10);
  }
  // Least squares t = a + bytes / rate over the five best times (batches of 10).
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);  // us per byte
  const double a = (sy - slope * sx) / n;
  std::printf("fit over the best (batches of 10): fixed %.2f us, rate %.3f TB/s (%.1f %% of "
              "copy)\n",
              a, 1e-6 / slope, 100.0 * (1e-6 / slope) / copy);
  return 0;
}
