// Probe (stop 73): does a TMA ring, one copy-engine request per K or V half-tile issued by one
// thread, read bar 2's K and V faster than decode's 16-byte loads at decode's structure?
//
// Why: bar 2 of the serving-attention issue (b=1, hq=64, hkv=8, nk=32768, d=128: 134 MB) needs
// >= 90 % of copy; the tuned decode reaches 83-85 % on the H100. Stop 69's layout probe read the
// same layout with plain 16-byte loads at one CTA per SM (decode's structure: a contiguous key
// range per split) and got 90-91 % of copy at 16 splits: the bar's own time, with no room for
// any per-CTA work. Deeper cp.async rings did not move decode's sweep (4 stages 55.0 us against
// 52.5). The reads that reached 99 % (read_ceiling.cu) held 2-4 CTAs of 512 threads an SM, so
// bytes in flight per SM look like the limit, and a 16-byte load or cp.async holds registers
// or issue slots per byte. A tensor-map copy moves a whole 64-column half-tile in one
// instruction (stop 33's row-wise bulk copies, 128 a tile, were copy-engine bound: 2.7x slower;
// this is the form that note left open), so one thread can keep 2-6 stages of 32-64 KiB in
// flight while the consumer warps do the math.
//
// The probe: bar 2's bytes as decode lays them out (8 KV heads, K and V regions of 32768 rows
// of 256 bytes), CTA (s, h) of grid (S, 8) reading split s of head h's key tiles in order, one
// producer thread (warp 0) and 4 consumer warps reading each landed stage from shared memory
// (and spinning SPIN ns a tile to stand in for the products), release on an "empty" barrier
// per stage. Tiles of 64 or 128 keys, 2-6 stages, the 128-byte swizzle (two 64-column boxes
// per tensor, as a wgmma or ldmatrix consumer reads them) or one unswizzled 128-column box.
// One CTA per SM (a shared-memory request above half an SM) at S = 8 and 16; two at S = 32.
// References in the same process: copy (decode_bench.py's), and the flat grid-stride read of
// read_ceiling.cu's best form (2 CTAs of 512 threads an SM, 8 loads in flight per thread).
// Each launch alone and in batches of 10 (the bars' method), rotating over two copies of the
// 134 MB so that none starts in L2. A checksum of every byte read is compared against the host's.
//
// Build and run on the GPU machine, from the repository root (one call, ~30 s):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/decode/tma_probe.cu -o /tmp/tma_probe -lcuda && /tmp/tma_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "benchmarks/dev_check.hpp"  // CK, median_ms, copy_tbs, print_device
#include "benchmarks/moe/dev_tma.hpp"  // encode
#include "common/mbarrier.cuh"
#include "common/tma.cuh"

using ktune::tma::TensorMap;
namespace mbar = ktune::mbar;

constexpr int kHeads = 8;
constexpr int kKeys = 32768;
constexpr int kRowBytes = 256;  // d = 128, 16-bit
constexpr long long kRows = 2LL * kHeads * kKeys;  // K and V of every head, one copy
constexpr long long kBytes = kRows * kRowBytes;    // 134 MB
constexpr int kConsumers = 4;                      // warps
constexpr int kThreads = 32 * (1 + kConsumers);
constexpr int kOneCtaSmem = 120 * 1024;  // > half an SM's: one CTA per SM

/// XOR of 32-bit words over [p, p + n) in 16-byte steps by `threads` threads from `t`.
__device__ __forceinline__ unsigned fold_shared(const uint4* p, int n, int t, int threads) {
  unsigned acc = 0;
  for (int i = t; i < n; i += threads) {
    const uint4 x = p[i];
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  return acc;
}

__device__ __forceinline__ void spin_ns(int ns) {
  if (ns <= 0) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < static_cast<unsigned long long>(ns));
}

/// CTA (s, h): split s of head h, KEYS keys a tile, STAGES slots, BOXES boxes per tensor and
/// tile (2: two 64-column boxes in the 128-byte swizzle; 1: one 128-column box, no swizzle).
/// Rows of copy `copy_index` start at row copy_index * kRows of the map.
template <int KEYS, int STAGES, int BOXES>
__global__ void __launch_bounds__(kThreads) tma_splits(const __grid_constant__ TensorMap map,
                                                       int copy_index, int spin, unsigned* out) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  constexpr int TENSOR_BYTES = KEYS * kRowBytes;  // K (or V) of one tile
  constexpr int STAGE_BYTES = 2 * TENSOR_BYTES;
  constexpr int BOX_BYTES = TENSOR_BYTES / BOXES;
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ULL);
  const unsigned ring_s = static_cast<unsigned>(__cvta_generic_to_shared(ring));
  const int splits = static_cast<int>(gridDim.x), s = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int tiles = kKeys / KEYS, per = (tiles + splits - 1) / splits;
  const int first = s * per, count = max(0, min(per, tiles - first));
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar::init(static_cast<unsigned>(__cvta_generic_to_shared(&full[i])), 1);
      mbar::init(static_cast<unsigned>(__cvta_generic_to_shared(&empty[i])), kConsumers);
    }
    mbar::fence_init();
    ktune::tma::prefetch_map(&map);
  }
  __syncthreads();
  unsigned acc = 0;
  if (warp == 0) {
    if (lane == 0) {
      const int k_row = static_cast<int>(copy_index * kRows) + 2 * h * kKeys + first * KEYS;
      for (int i = 0; i < count; ++i) {
        const int st = i % STAGES;
        const unsigned f = static_cast<unsigned>(__cvta_generic_to_shared(&full[st]));
        if (i >= STAGES)
          mbar::wait_parity(static_cast<unsigned>(__cvta_generic_to_shared(&empty[st])),
                            ((i / STAGES) & 1) ^ 1);
        mbar::arrive_expect_tx(f, STAGE_BYTES);
        const unsigned dst = ring_s + st * STAGE_BYTES;
        const int row = k_row + i * KEYS;
        for (int b = 0; b < BOXES; ++b) {
          ktune::tma::load(dst + b * BOX_BYTES, &map, f, b * (128 / BOXES), row);
          ktune::tma::load(dst + TENSOR_BYTES + b * BOX_BYTES, &map, f, b * (128 / BOXES),
                           row + kKeys);
        }
      }
    }
  } else {
    const int t = static_cast<int>(threadIdx.x) - 32;
    for (int i = 0; i < count; ++i) {
      const int st = i % STAGES;
      mbar::wait_parity(static_cast<unsigned>(__cvta_generic_to_shared(&full[st])),
                        (i / STAGES) & 1);
      acc ^= fold_shared(reinterpret_cast<const uint4*>(ring + st * STAGE_BYTES),
                         STAGE_BYTES / 16, t, 32 * kConsumers);
      spin_ns(spin);
      __syncwarp();
      if (lane == 0) mbar::arrive(static_cast<unsigned>(__cvta_generic_to_shared(&empty[st])));
    }
  }
  atomicXor(out, acc);
}

/// read_ceiling.cu's best form as the reference: the grid strides over the 134 MB, 8 loads of
/// 16 bytes in flight per thread, 512 threads.
__global__ void __launch_bounds__(512) read_stride(const uint4* __restrict__ buf, long long vecs,
                                                   unsigned* out) {
  constexpr int U = 8;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < vecs;
       i += step * U) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      x[u] = i + u * step < vecs ? __ldcs(buf + i + u * step) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
  }
  atomicXor(out, acc);
}

using SplitKernel = void (*)(const TensorMap, int, int, unsigned*);

static TensorMap encode_rows(void* base, int boxes, int keys) {  // both copies' rows
  return encode(base, true, {128, 2 * kRows}, {kRowBytes},
                {static_cast<cuuint32_t>(128 / boxes), static_cast<cuuint32_t>(keys)},
                boxes == 2);
}

int main() {
  const int sms = print_device();
  const float copy0 = copy_tbs();
  // Two copies of the 134 MB, filled with a pattern whose XOR per copy the host knows.
  const long long words = 2 * kBytes / 4;
  std::vector<unsigned> host(static_cast<size_t>(words));
  unsigned expect[2] = {0, 0};
  for (long long i = 0; i < words; ++i) {
    const unsigned x = static_cast<unsigned>(i * 2654435761ULL + (i >> 13));
    host[static_cast<size_t>(i)] = x;
    expect[i < words / 2 ? 0 : 1] ^= x;
  }
  unsigned* pool = nullptr;
  CK(cudaMalloc(&pool, 2 * kBytes));
  CK(cudaMemcpy(pool, host.data(), 2 * kBytes, cudaMemcpyHostToDevice));
  unsigned* out = nullptr;
  CK(cudaMalloc(&out, sizeof(unsigned)));

  struct Variant {
    const char* name;
    SplitKernel f;
    int keys, stages, boxes;
  };
  const Variant variants[] = {
      {"64 keys, 2 stages", tma_splits<64, 2, 2>, 64, 2, 2},
      {"64 keys, 3 stages", tma_splits<64, 3, 2>, 64, 3, 2},
      {"64 keys, 4 stages", tma_splits<64, 4, 2>, 64, 4, 2},
      {"64 keys, 6 stages", tma_splits<64, 6, 2>, 64, 6, 2},
      {"128 keys, 2 stages", tma_splits<128, 2, 2>, 128, 2, 2},
      {"128 keys, 3 stages", tma_splits<128, 3, 2>, 128, 3, 2},
      {"128 keys, 3 stages, unswizzled", tma_splits<128, 3, 1>, 128, 3, 1},
  };
  TensorMap maps[2][2];  // [boxes - 1][keys == 128]
  for (int b = 1; b <= 2; ++b)
    for (int k = 0; k < 2; ++k) maps[b - 1][k] = encode_rows(pool, b, k ? 128 : 64);
  for (const Variant& v : variants)
    CK(cudaFuncSetAttribute(v.f, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));

  struct Row {
    const char* name;
    int splits, spin;
    float us, us10;
    bool ok;
  };
  std::vector<Row> rows;
  const auto run_checked = [&](auto launch) {  // one launch on copy 0, checksum compared
    CK(cudaMemset(out, 0, sizeof(unsigned)));
    launch(0);
    unsigned got = 0;
    CK(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost));
    return got == expect[0];
  };
  const auto time = [&](const char* name, int splits, int spin, auto launch) {
    const bool ok = run_checked(launch);
    rows.push_back({name, splits, spin, 1000.f * median_ms(5, 40, 1, launch),
                    1000.f * median_ms(5, 40, 10, launch), ok});
  };
  for (const int spin : {0, 1000})
    for (const int splits : {8, 16, 32})
      for (const Variant& v : variants) {
        const int ring = v.stages * v.keys * 2 * kRowBytes + 1024;
        const int per_sm = splits == 32 ? 2 : 1;
        if (per_sm * ring > 227 * 1024) continue;  // does not fit at this split count
        const int smem = per_sm == 1 ? std::max(ring, kOneCtaSmem) : ring;
        const TensorMap& m = maps[v.boxes - 1][v.keys == 128];
        time(v.name, splits, spin, [&](int r) {
          v.f<<<dim3(splits, kHeads), kThreads, smem>>>(m, r & 1, spin, out);
          CK(cudaGetLastError());
        });
      }
  const long long vecs = kBytes / 16;
  time("flat grid stride, 512 threads, 2 CTAs an SM", 2 * sms, 0, [&](int r) {
    read_stride<<<2 * sms, 512>>>(reinterpret_cast<const uint4*>(pool) + (r & 1) * vecs, vecs,
                                  out);
    CK(cudaGetLastError());
  });
  CK(cudaDeviceSynchronize());
  const float copy1 = copy_tbs();
  const float copy = 0.5f * (copy0 + copy1);
  std::printf("copy: %.3f TB/s at the start, %.3f at the end (read + write, 2 GiB); %.3f used\n"
              "134 MB read once; TMA rows: grid (splits, 8 heads), 1 producer + 4 consumer "
              "warps, one CTA per SM (two at 32 splits)\n\n",
              copy0, copy1, copy);
  const auto pct = [&](float us) { return 100.0 * kBytes / (us * 1e-6) / 1e12 / copy; };
  std::printf("| read | splits | spin ns/tile | checksum | us alone | %% of copy | us in 10 | "
              "%% of copy |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %d | %d | %s | %.1f | %.1f | %.1f | %.1f |\n", r.name, r.splits, r.spin,
                r.ok ? "ok" : "WRONG", r.us, pct(r.us), r.us10, pct(r.us10));
  return 0;
}
