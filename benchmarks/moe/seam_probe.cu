// Probe (stop 72): is one persistent kernel for both GEMMs worth building at DeepSeek-like T=128?
//
// Why: the H100 timeline of DeepSeek-like T=128 (benchmarks/moe/NOTES.md, stop 65) has gemm1
// streaming w1 at 3.01 TB/s and gemm2 w2 at 2.88, where a gemm1-shaped stream alone read 3.17
// (prewait_probe.cu, stop 66). The stop-71 proposal (one kernel, a CTA per SM, gemm1's items then
// gemm2's, a gemm2 item waiting on its expert's count of finished gemm1 items) predicts that
// the seam between the GEMMs and gemm2's lower rate leave the critical path. Before building
// it, this probe times the weight streams alone (no products; an optional spin per k-tile
// stands in for the tensor work) in both structures:
//   two   : gemm1-shaped grid (an (expert, 64 gate + 64 up rows) item per CTA, 4 stages of
//           32 KiB weights + 8 KiB act rows, one CTA per SM), then, launched programmatically,
//           a gemm2-shaped grid that asks for its first weight tiles before its wait: narrow
//           (32 w2 rows a CTA, 3 stages of 8 + 8 KiB, as the shipped H100 row) or wide (128 rows,
//           as gemm1's ring).
//   one   : a CTA per SM walking its share of gemm1's items then gemm2's (wide), one ring across
//           items (the next item's first tiles load while the current one drains); a gemm2
//           item's act tile waits for its expert's 22 gemm1 items (a count per expert, with an
//           epoch per call so that nothing is cleared between calls).
// Each gemm1 item stores its 32 x 64 act block, each gemm2 item its 32-row output block, so the
// dependency carries real data. Bytes: w1 738 MB + w2 369 MB (all 64 experts), act and x from L2.
// Medians of 30 calls after 5, CUDA events around each call; copy as decode_bench.py measures it.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/seam_probe.cu -o seam_probe && ./seam_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "attention/mma.cuh"         // cp_async_16, cp_async_commit, cp_async_wait
#include "benchmarks/dev_check.hpp"  // CK, launch_ex, copy_tbs
#include "common/pdl.cuh"

using namespace ktune;
using namespace ktune::attn;

constexpr int kE = 64, kI = 1408, kH = 2048, kTokens = 128;
constexpr int kThreads = 128;
constexpr int kARows = 32;                        // block_m: rows of an expert's act tile
constexpr int kTile = 256;                        // bytes of a row per k-tile (bk = 128 bf16)
constexpr int kW1Row = kH * 2, kW2Row = kI * 2;   // 4096 and 2816 bytes
constexpr int kK1 = kW1Row / kTile, kK2 = kW2Row / kTile;  // 16 and 11 k-tiles
constexpr int kC1 = kI / 64;                      // 22 gemm1 items an expert
constexpr int kItems1 = kE * kC1;                 // 1408
constexpr size_t kW1Bytes = size_t{kE} * 2 * kI * kW1Row, kW2Bytes = size_t{kE} * kH * kW2Row;

struct Bufs {
  const char* w1;
  const char* w2;
  const char* x;   // [kTokens, kW1Row]
  char* act;       // [kE * kARows, kW2Row]
  char* y;         // [kE * kARows, kW1Row]
  unsigned* done;  // [kE] gemm1 items finished, over all calls
  unsigned target; // epoch * kC1: this call's count of a finished expert
  int* sink;
};

/// An item: kind 1 = gemm1 (expert e, column block c of 64 gate + 64 up rows), 2 = gemm2
/// (expert e, column block c of WROWS w2 rows), 0 = none.
struct Item {
  int kind, e, c;
};

template <int WROWS>
__device__ __forceinline__ const char* w_row(const Bufs& b, const Item& it, int r) {
  if (it.kind == 1) {
    const int row = r < 64 ? it.c * 64 + r : kI + it.c * 64 + (r - 64);
    return b.w1 + (static_cast<size_t>(it.e) * 2 * kI + row) * kW1Row;
  }
  return b.w2 + (static_cast<size_t>(it.e) * kH + it.c * WROWS + r) * kW2Row;
}

__device__ __forceinline__ const char* a_row(const Bufs& b, const Item& it, int r) {
  if (it.kind == 1) return b.x + static_cast<size_t>((it.e * 7 + r * 13) % kTokens) * kW1Row;
  return b.act + (static_cast<size_t>(it.e) * kARows + r) * kW2Row;
}

template <int WROWS>
__device__ __forceinline__ void load_w(const Bufs& b, const Item& it, int kt, unsigned dst) {
#pragma unroll 4
  for (int i = threadIdx.x; i < WROWS * 16; i += kThreads)
    cp_async_16(dst + i * 16, w_row<WROWS>(b, it, i >> 4) + kt * kTile + (i & 15) * 16);
}

__device__ __forceinline__ void load_a(const Bufs& b, const Item& it, int kt, unsigned dst) {
#pragma unroll 4
  for (int i = threadIdx.x; i < kARows * 16; i += kThreads)
    cp_async_16(dst + i * 16, a_row(b, it, i >> 4) + kt * kTile + (i & 15) * 16);
}

/// The item's output block from a value of its last tile: gemm1 32 rows x 128 bytes of act,
/// gemm2 32 rows x WROWS * 2 bytes of y; then, for gemm1, its expert's count.
template <int WROWS, bool COUNT>
__device__ __forceinline__ void store(const Bufs& b, const Item& it, int v) {
  const uint4 q = make_uint4(v, v, v, v);
  if (it.kind == 1) {
    for (int i = threadIdx.x; i < kARows * 8; i += kThreads)
      *reinterpret_cast<uint4*>(b.act + (static_cast<size_t>(it.e) * kARows + (i >> 3)) * kW2Row +
                                it.c * 128 + (i & 7) * 16) = q;
    if (COUNT) {  // the persistent kernel's gemm2 items wait for these
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(b.done + it.e, 1u);
      }
    }
  } else {
    constexpr int kPer = WROWS * 2 / 16;
    for (int i = threadIdx.x; i < kARows * kPer; i += kThreads)
      *reinterpret_cast<uint4*>(b.y + (static_cast<size_t>(it.e) * kARows + i / kPer) * kW1Row +
                                it.c * WROWS * 2 + (i % kPer) * 16) = q;
  }
}

__device__ __forceinline__ void spin(int ns) {
  if (ns <= 0) return;
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

/// MODE 1: one gemm1 item per CTA. MODE 2: one gemm2 item per CTA, launched programmatically
/// (first STAGES - 1 weight tiles before the wait). MODE 3: persistent, this CTA's share of
/// gemm1's items then gemm2's (WROWS rows each).
template <int WROWS, int STAGES, int MODE>
__global__ void __launch_bounds__(kThreads, 1) stream(const Bufs b, int work_ns) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr unsigned kW = WROWS * kTile, kSlot = kW + kARows * kTile;
  constexpr int kItems2 = kE * (kH / WROWS);
  const unsigned s0 = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const auto item = [&](int n) -> Item {
    if (MODE == 1) return n == 0 ? Item{1, static_cast<int>(blockIdx.x) / kC1,
                                        static_cast<int>(blockIdx.x) % kC1}
                                 : Item{0, 0, 0};
    constexpr int kPerE = kH / WROWS;
    if (MODE == 2) return n == 0 ? Item{2, static_cast<int>(blockIdx.x) / kPerE,
                                        static_cast<int>(blockIdx.x) % kPerE}
                                 : Item{0, 0, 0};
    const int j = static_cast<int>(blockIdx.x) + n * static_cast<int>(gridDim.x);
    if (j < kItems1) return Item{1, j / kC1, j % kC1};
    if (j < kItems1 + kItems2) return Item{2, (j - kItems1) / kPerE, (j - kItems1) % kPerE};
    return Item{0, 0, 0};
  };
  const auto tiles = [](const Item& it) { return it.kind == 1 ? kK1 : kK2; };
  // Loader and consumer cursors over this CTA's tiles: (item index, item, k-tile).
  int ln = 0, lk = 0, cn = 0, ck = 0;
  Item li = item(0), ci = li;
  const auto load_next = [&](int slot, bool weights_only_before_wait) {
    if (li.kind == 0) return;
    const unsigned dst = s0 + slot * kSlot;
    load_w<WROWS>(b, li, lk, dst);
    // The loader runs at most STAGES - 1 tiles (less than an item) ahead of the consumer, so it
    // never waits here on this CTA's own unfinished gemm1 item: that item's expert is among the
    // last (58-63) and the first gemm2 item of any CTA is among the first experts (0-8). A real
    // kernel must keep that property (or wait in the consumer instead).
    if (MODE == 3 && li.kind == 2 && lk == 0) {  // act of this expert: its gemm1 items done
      if (threadIdx.x == 0) {
        unsigned v;
        do {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(b.done + li.e));
        } while (v < b.target);
      }
      __syncthreads();
    }
    if (!weights_only_before_wait) load_a(b, li, lk, dst + kW);
    if (++lk == tiles(li)) {
      lk = 0;
      li = item(++ln);
    }
  };
  if (MODE == 2) {
    // The weights of the first STAGES - 1 tiles before the wait, their act tiles after it.
    Item it0 = li;
    for (int s = 0; s < STAGES - 1; ++s) load_next(s, true);
    griddep_wait();
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < tiles(it0)) load_a(b, it0, s, s0 + s * kSlot + kW);
      cp_async_commit();
    }
  } else {
    for (int s = 0; s < STAGES - 1; ++s) {
      load_next(s, false);
      cp_async_commit();
    }
  }
  int acc = 0, cslot = 0, lslot = STAGES - 1;
  while (ci.kind != 0) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_next(lslot, false);
    cp_async_commit();
    lslot = lslot + 1 == STAGES ? 0 : lslot + 1;
    acc += reinterpret_cast<const int*>(smem + cslot * kSlot)[threadIdx.x] +
           reinterpret_cast<const int*>(smem + cslot * kSlot + kW)[threadIdx.x];
    spin(work_ns);
    cslot = cslot + 1 == STAGES ? 0 : cslot + 1;
    if (++ck == tiles(ci)) {
      if (MODE == 1) griddep_launch_dependents();
      store<WROWS, MODE == 3>(b, ci, acc);
      ck = 0;
      ci = item(++cn);
    }
  }
  cp_async_wait<0>();
  if (acc == 0x12345678) *b.sink = acc;
}

template <int WROWS, int STAGES>
constexpr int smem_bytes() {
  return STAGES * (WROWS + kARows) * kTile;
}

template <typename K>
void allow(K k, int bytes) {
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  const int sms = p.multiProcessorCount;
  const float copy0 = copy_tbs();
  Bufs b{};
  char *w1, *w2, *x;
  CK(cudaMalloc(&w1, kW1Bytes));
  CK(cudaMalloc(&w2, kW2Bytes));
  CK(cudaMalloc(&x, size_t{kTokens} * kW1Row));
  CK(cudaMalloc(&b.act, size_t{kE} * kARows * kW2Row));
  CK(cudaMalloc(&b.y, size_t{kE} * kARows * kW1Row));
  CK(cudaMalloc(&b.done, kE * sizeof(unsigned)));
  CK(cudaMalloc(&b.sink, 4));
  CK(cudaMemset(w1, 1, kW1Bytes));
  CK(cudaMemset(w2, 1, kW2Bytes));
  CK(cudaMemset(x, 1, size_t{kTokens} * kW1Row));
  CK(cudaMemset(b.done, 0, kE * sizeof(unsigned)));
  b.w1 = w1;
  b.w2 = w2;
  b.x = x;

  constexpr int kS1 = smem_bytes<128, 4>(), kSn = smem_bytes<32, 3>(), kS5 = smem_bytes<128, 5>();
  allow(stream<128, 4, 1>, kS1);
  allow(stream<128, 2, 1>, smem_bytes<128, 2>());
  allow(stream<32, 3, 2>, kSn);
  allow(stream<128, 4, 2>, kS1);
  allow(stream<128, 4, 3>, kS1);
  allow(stream<128, 5, 3>, kS5);
  cudaStream_t st = nullptr;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  unsigned persistent_calls = 0;
  const auto g1 = [&](int ns) {
    launch_ex(stream<128, 4, 1>, kItems1, kThreads, kS1, st, false, b, ns);
  };
  const auto g1two = [&](int ns) {  // 2 stages of 40 KiB: two CTAs an SM
    launch_ex(stream<128, 2, 1>, kItems1, kThreads, smem_bytes<128, 2>(), st, false, b, ns);
  };
  const auto g2n = [&](int ns, bool prog) {
    launch_ex(stream<32, 3, 2>, kE * (kH / 32), kThreads, kSn, st, prog, b, ns);
  };
  const auto g2w = [&](int ns, bool prog) {
    launch_ex(stream<128, 4, 2>, kE * (kH / 128), kThreads, kS1, st, prog, b, ns);
  };
  const auto one = [&](int ns, bool five) {
    Bufs c = b;
    c.target = ++persistent_calls * kC1;
    if (five)
      launch_ex(stream<128, 5, 3>, sms, kThreads, kS5, st, false, c, ns);
    else
      launch_ex(stream<128, 4, 3>, sms, kThreads, kS1, st, false, c, ns);
  };
  const double all = static_cast<double>(kW1Bytes + kW2Bytes);
  std::printf("%s, %d SMs, copy %.3f TB/s; w1 %.1f MB, w2 %.1f MB\n", p.name, sms, copy0,
              kW1Bytes / 1e6, kW2Bytes / 1e6);
  std::printf("\n| work ns/tile | gemm1 alone | gemm1 2 stages alone | gemm2 narrow alone | "
              "gemm2 wide alone | two (narrow) | two (wide) | one (4 st) | one (5 st) | "
              "one(4)/two(narrow) |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const int ns : {0, 250, 500}) {
    const float t1 = median_us(st, [&] { g1(ns); });
    const float t12 = median_us(st, [&] { g1two(ns); });
    const float tn = median_us(st, [&] { g2n(ns, false); });
    const float tw = median_us(st, [&] { g2w(ns, false); });
    const float twon = median_us(st, [&] { g1(ns); g2n(ns, true); });
    const float twow = median_us(st, [&] { g1(ns); g2w(ns, true); });
    const float o4 = median_us(st, [&] { one(ns, false); });
    const float o5 = median_us(st, [&] { one(ns, true); });
    const auto r = [&](float us, double bytes) { return bytes / (us * 1e-6) / 1e12; };
    std::printf("| %d | %.1f (%.3f) | %.1f (%.3f) | %.1f (%.3f) | %.1f (%.3f) | %.1f (%.3f) | "
                "%.1f (%.3f) | %.1f (%.3f) | %.1f (%.3f) | %.3f |\n",
                ns, t1, r(t1, kW1Bytes), t12, r(t12, kW1Bytes), tn, r(tn, kW2Bytes), tw,
                r(tw, kW2Bytes), twon, r(twon, all), twow, r(twow, all), o4, r(o4, all), o5,
                r(o5, all), o4 / twon);
  }
  // The dependency carried data: every expert's count is kC1 per call.
  std::vector<unsigned> done(kE);
  CK(cudaMemcpy(done.data(), b.done, kE * sizeof(unsigned), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int e = 0; e < kE; ++e) bad += done[e] != persistent_calls * kC1;
  std::printf("\ncopy at the end %.3f TB/s; persistent calls %u, experts whose count is not "
              "%d per call: %d of %d\n", copy_tbs(), persistent_calls, kC1, bad, kE);
  return 0;
}
