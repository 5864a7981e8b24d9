// Probe (stop 69): does the order in which a decode split reads its keys change the H100's read
// rate at bar 2's size?
//
// Why: bar 2 of the serving-attention issue (b=1, hq=64, hkv=8, nk=32768, d=128: 134 MB of K
// and V) runs at 83-85 % of copy where a plain read of the same bytes reaches 99 % in batches
// of 10 (read_ceiling.cu, stop 66). That probe's best read strided the grid over the whole
// buffer at 2-4 CTAs an SM; read as decode's splits read (one contiguous chunk per CTA, one CTA
// per SM) it reached 95.2 %. Today's sweep of bar 2 (benchmarks/decode/bar2_points.sh) has every
// split count from 8 to 32 within 52.5-56 us: the grid's size does not move it. What a split
// could change cheaply is its order: split s of S reading key tiles s, s + S, s + 2S, ... of its
// head (the S splits of a head then read neighbouring tiles at any moment) instead of tiles
// [s T, (s + 1) T). The combine does not care which keys a split holds.
//
// The probe reads bar 2's bytes as decode lays them out: 8 KV heads, each a K region and a V
// region of 8 MB (32768 keys x 256 bytes), CTA (s, h) reading the K and V tiles of its split of
// head h, 256 threads, one tile (K and V) of 16-byte loads in flight per thread, one CTA per SM
// (a shared-memory request, as decode's ~100-200 KiB rings), no compute. Modes: contiguous and
// interleaved, S = 8 and 16, tiles of 64 and 128 keys; and read_ceiling's two references (a
// contiguous chunk per CTA and a grid stride, one CTA per SM). Each launch alone and in batches
// of 10 (decode_bench.py's method), rotating over two copies of the 134 MB (none starts in L2);
// copy as decode_bench.py measures it.
//
// Build and run on the GPU machine, from the repository root (one call, ~20 s):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . \
//        benchmarks/decode/layout_probe.cu -o $OUT/layout_probe && $OUT/layout_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "benchmarks/dev_check.hpp"  // CK, median_ms, copy_tbs

constexpr int kThreads = 256;
constexpr int kHeads = 8;
constexpr long long kKeys = 32768;
constexpr int kRowBytes = 256;  // d = 128, 16-bit
constexpr long long kRegionVecs = kKeys * kRowBytes / 16;  // one head's K (or V), 16-byte words
constexpr long long kBytes = 2LL * kHeads * kRegionVecs * 16;  // 134 MB
constexpr int kSmemRequest = 120 * 1024;  // > half an SM's: one CTA per SM

/// CTA (s, h) of grid (S, kHeads): the K and V tiles of split s of head h, KEYS keys a tile, in
/// order (contiguous: tiles [s T, (s + 1) T), T = ceil(tiles / S)) or interleaved (s, s + S, ..).
template <int KEYS, bool INTERLEAVE>
__global__ void __launch_bounds__(kThreads) read_splits(const uint4* __restrict__ kv,
                                                        unsigned* out) {
  extern __shared__ unsigned char unused[];
  constexpr int TILE_VECS = KEYS * kRowBytes / 16;
  constexpr int PER = TILE_VECS / kThreads;  // loads per thread per tile and region
  static_assert(TILE_VECS % kThreads == 0, "whole loads per thread");
  const int splits = static_cast<int>(gridDim.x);
  const int s = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int tiles = static_cast<int>(kKeys / KEYS);
  const int per_split = (tiles + splits - 1) / splits;
  const uint4* k = kv + 2LL * h * kRegionVecs;
  const uint4* v = k + kRegionVecs;
  const int count = INTERLEAVE ? (s < tiles ? (tiles - 1 - s) / splits + 1 : 0)
                               : max(0, min(per_split, tiles - s * per_split));
  unsigned acc = 0;
  for (int i = 0; i < count; ++i) {
    const int n = INTERLEAVE ? s + i * splits : s * per_split + i;
    const long long base = static_cast<long long>(n) * TILE_VECS + threadIdx.x;
    uint4 x[2 * PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      x[u] = __ldcs(k + base + u * kThreads);
      x[PER + u] = __ldcs(v + base + u * kThreads);
    }
#pragma unroll
    for (int u = 0; u < 2 * PER; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
  }
  if (acc == 0x9e3779b9u) out[(blockIdx.y * gridDim.x + blockIdx.x) & 63] = acc;
  (void)unused;
}

/// read_ceiling.cu's references over the same 134 MB: a contiguous chunk per CTA, or a grid
/// stride, 4 loads of 16 bytes in flight per thread.
template <bool CHUNKED>
__global__ void __launch_bounds__(kThreads) read_flat(const uint4* __restrict__ buf,
                                                      long long vecs, unsigned* out) {
  extern __shared__ unsigned char unused[];
  constexpr int U = 8;
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
  for (long long i = first; i < end; i += step * U) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = i + u * step;
      x[u] = j < end ? __ldcs(buf + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x & 63] = acc;
  (void)unused;
}

using SplitKernel = void (*)(const uint4*, unsigned*);
using FlatKernel = void (*)(const uint4*, long long, unsigned*);

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs\n", prop.name, sms);
  const float copy0 = copy_tbs();
  const long long vecs = kBytes / 16;
  uint4* pool = nullptr;
  CK(cudaMalloc(&pool, 2 * kBytes));
  CK(cudaMemset(pool, 1, 2 * kBytes));
  unsigned* out = nullptr;
  CK(cudaMalloc(&out, 64 * sizeof(unsigned)));
  struct Row {
    const char* name;
    int splits;
    float us, us10;
  };
  std::vector<Row> rows;
  const auto time = [&](const char* name, int splits, auto launch) {
    rows.push_back({name, splits, 1000.f * median_ms(5, 40, 1, launch),
                    1000.f * median_ms(5, 40, 10, launch)});
  };
  struct S {
    const char* name;
    SplitKernel f;
  };
  const S split_kernels[] = {{"contiguous, 64-key tiles", read_splits<64, false>},
                             {"interleaved, 64-key tiles", read_splits<64, true>},
                             {"contiguous, 128-key tiles", read_splits<128, false>},
                             {"interleaved, 128-key tiles", read_splits<128, true>}};
  for (const S& k : split_kernels)
    CK(cudaFuncSetAttribute(k.f, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemRequest));
  const FlatKernel chunk = read_flat<true>, stride = read_flat<false>;
  for (FlatKernel f : {chunk, stride})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemRequest));
  // Interleaved modes first and last in each pair's order would favour neither: A B B A.
  for (const int splits : {8, 16})
    for (int pass = 0; pass < 2; ++pass)
      for (int i = 0; i < 4; ++i) {
        const S& k = split_kernels[pass == 0 ? i : 3 - i];
        time(k.name, splits, [&](int r) {
          k.f<<<dim3(splits, kHeads), kThreads, kSmemRequest>>>(pool + (r & 1) * vecs, out);
          CK(cudaGetLastError());
        });
      }
  time("flat contiguous chunk per CTA", sms, [&](int r) {
    chunk<<<sms, kThreads, kSmemRequest>>>(pool + (r & 1) * vecs, vecs, out);
    CK(cudaGetLastError());
  });
  time("flat grid stride", sms, [&](int r) {
    stride<<<sms, kThreads, kSmemRequest>>>(pool + (r & 1) * vecs, vecs, out);
    CK(cudaGetLastError());
  });
  const float copy1 = copy_tbs();
  const float copy = 0.5f * (copy0 + copy1);
  std::printf("copy: %.3f TB/s at the start, %.3f at the end (read + write, 2 GiB); %.3f used\n"
              "134 MB read once, one CTA per SM; splits = CTAs per KV head (flat: CTAs)\n\n",
              copy0, copy1, copy);
  const auto pct = [&](float us) { return 100.0 * kBytes / (us * 1e-6) / 1e12 / copy; };
  std::printf("| read | splits | us alone | %% of copy | us in 10 | %% of copy |\n"
              "|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", r.name, r.splits, r.us, pct(r.us),
                r.us10, pct(r.us10));
  return 0;
}
