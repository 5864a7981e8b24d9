// Probe (stop 65): how much of its predecessors' time can gemm1's weight stream hide by asking
// for its first ring stages before griddepcontrol.wait?
//
// Why: at DeepSeek-like T=128 on the H100 (benchmarks/moe/NOTES.md, stop 65) gemm1's CTAs are
// resident from 4.9 us but wait until the alignment ends at 10.3 us, and DRAM idles until then.
// gemm1 cannot ask for weights earlier today because its CTAs learn their expert from the
// alignment. The proposal in the notes puts gemm1 on an expert-major grid so that each CTA knows
// its weight tile at launch. Before building it, this probe measures the mechanism alone: a
// prologue kernel that spins S us (routing + alignment: it lets its dependents launch at once, as
// they do), then, programmatically launched behind it, a weight stream shaped as gemm1's there
// (one CTA per SM: a 4-stage ring of 32 KiB weight stages, 128 rows x 256 B as bn1=64 gate + up
// rows at bk1=128, plus 32 KiB for the A tiles; 512 KiB a CTA, 738 MiB in all), which either
// waits first (today) or asks for its first 3 stages and then waits (proposed).
//
// Prints, for S = 5 and 10 us: the stream alone, the prologue alone, the two launched serially
// (no programmatic launch: if "wait first" is no faster, the programmatic launch did not take
// effect), and the two chained forms; the saving is wait-first minus early. Medians of 30 calls
// after 5, CUDA events around each call.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/prewait_probe.cu -o prewait_probe && ./prewait_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attention/mma.cuh"  // cp_async_16, cp_async_commit, cp_async_wait
#include "benchmarks/dev_check.hpp"  // CK, launch_ex
#include "common/pdl.cuh"

using namespace ktune;
using namespace ktune::attn;

constexpr int kThreads = 128;
constexpr int kStages = 4;
constexpr int kRows = 128;                          // gate + up rows of one column block
constexpr int kRowBytes = 4096;                     // h = 2048 bf16
constexpr int kTileBytes = 256;                     // bk1 = 128 bf16
constexpr int kStageBytes = kRows * kTileBytes;     // 32 KiB
constexpr int kTiles = kRowBytes / kTileBytes;      // 16 k-tiles
constexpr int kSmem = kStages * kStageBytes + 32768;  // + the A tiles: 160 KiB, one CTA per SM
constexpr size_t kCtaBytes = static_cast<size_t>(kRows) * kRowBytes;

/// Spins for `ns` nanoseconds on one CTA after letting its dependents launch.
__global__ void prologue(long long ns, int* sink) {
  griddep_launch_dependents();
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (threadIdx.x == 0 && t == 42) *sink = 1;
}

/// gemm1's weight stream at DeepSeek-like T=128: CTA b reads rows [128 b, 128 b + 128) of 4 KiB
/// through the ring, a k-tile (256 B of every row) per stage. EARLY: the first kStages - 1
/// stages are asked for before griddepcontrol.wait.
template <bool EARLY>
__global__ void __launch_bounds__(kThreads, 1) stream(const char* w, int* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  const char* base = w + static_cast<size_t>(blockIdx.x) * kCtaBytes;
  const unsigned s0 = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const auto load = [&](int tile, int slot) {
    constexpr int kChunks = kStageBytes / 16;
    constexpr int kPerRow = kTileBytes / 16;
#pragma unroll 4
    for (int i = threadIdx.x; i < kChunks; i += kThreads)
      cp_async_16(s0 + slot * kStageBytes + i * 16,
                  base + static_cast<size_t>(i / kPerRow) * kRowBytes + tile * kTileBytes +
                      (i % kPerRow) * 16);
  };
  if (!EARLY) griddep_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load(s, s);
    cp_async_commit();
  }
  if (EARLY) griddep_wait();
  int acc = 0;
  for (int t = 0; t < kTiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = t + kStages - 1;
    if (next < kTiles) load(next, next % kStages);
    cp_async_commit();
    acc += reinterpret_cast<const int*>(smem + (t % kStages) * kStageBytes)[threadIdx.x];
  }
  cp_async_wait<0>();
  if (acc == 0x12345678) *sink = acc;
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  const size_t bytes = size_t{738} << 20;  // gemm1's weights, all 64 experts
  const int ctas = static_cast<int>(bytes / kCtaBytes);
  char* w = nullptr;
  int* sink = nullptr;
  CK(cudaMalloc(&w, bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(w, 1, bytes));
  for (auto k : {stream<false>, stream<true>})
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaStream_t st = nullptr;  // a stream of its own for the programmatic launches
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream<true>, kThreads, kSmem));
  std::printf("%s, %d SMs; stream: %d CTAs of %d threads, %d KiB shared (%d per SM), %zu MiB\n",
              p.name, p.multiProcessorCount, ctas, kThreads, kSmem / 1024, per_sm, bytes >> 20);

  const auto launch_stream = [&](bool early, bool programmatic) {
    launch_ex(early ? stream<true> : stream<false>, static_cast<unsigned>(ctas), kThreads, kSmem,
              st, programmatic, static_cast<const char*>(w), sink);
  };
  const float alone = median_us(st, [&] { launch_stream(false, false); });
  std::printf("stream alone: %.1f us (%.3f TB/s)\n", alone, bytes / (alone * 1e-6) / 1e12);
  std::printf("\n| spin us | prologue alone | serial | wait first | early | wait first - stream "
              "| early - stream | saving |\n|---|---|---|---|---|---|---|---|\n");
  for (const long long spin_ns : {5000LL, 10000LL}) {
    const float pro = median_us(st, [&] { prologue<<<1, 32, 0, st>>>(spin_ns, sink); });
    const float serial = median_us(st, [&] {  // no programmatic launch: the stream waits
      prologue<<<1, 32, 0, st>>>(spin_ns, sink);
      launch_stream(false, false);
    });
    const float first = median_us(st, [&] {
      prologue<<<1, 32, 0, st>>>(spin_ns, sink);
      launch_stream(false, true);
    });
    const float early = median_us(st, [&] {
      prologue<<<1, 32, 0, st>>>(spin_ns, sink);
      launch_stream(true, true);
    });
    std::printf("| %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", spin_ns / 1000.0,
                pro, serial, first, early, first - alone, early - alone, first - early);
  }
  return 0;
}
