// Read-rate probe for the MoE GEMMs' weight stream (no tensor work): how fast can a cp.async
// ring like moe_gemm_kernel's read gemm1's weights when each stage takes R rows x C bytes of
// [rows][K] row-major weights (K = 4096 bytes, H = 2048 bf16), from R = 256 rows x 256 bytes
// (the DeepSeek T=128 gemm1 tile: bn1=128 gate + up rows, bk1=128) to R = 16 rows x 4096 bytes
// (every stage one contiguous 64 KiB run)? Same bytes, same stage size, same CTA shape; only
// the pattern changes. A plain 16-byte-load kernel over the whole buffer gives the ceiling.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I templates benchmarks/moe/stream_probe.cu -o stream_probe
//   ./stream_probe [MiB (default 738: DeepSeek gemm1's 64 experts)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attention/mma.cuh"  // cp_async_16, cp_async_commit, cp_async_wait

using namespace ktune::attn;

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

constexpr int kRowBytes = 4096;
constexpr int kThreads = 256;

// One CTA of THREADS: rows [blockIdx.x * ROWS, +ROWS) of the matrix (rows of ROW_BYTES), R rows x
// C bytes per stage, the K chunks of a group of R rows before the next group's. EXTRA bytes of
// shared memory are allocated and unused (a GEMM's A tiles), so that as many CTAs share an SM
// as in the GEMM the pattern comes from.
template <int ROWS, int R, int C, int STAGES, int THREADS = kThreads, int ROW_BYTES = kRowBytes>
__global__ void __launch_bounds__(THREADS) ring_kernel(const char* w, int* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kStage = R * C;
  constexpr int kChunks = kStage / 16;  // per stage
  constexpr int kPerRow = ROW_BYTES / C;
  static_assert(ROW_BYTES % C == 0 && ROWS % R == 0, "whole stages");
  constexpr int kSteps = ROWS / R * kPerRow;
  const char* base = w + static_cast<size_t>(blockIdx.x) * ROWS * ROW_BYTES;
  const unsigned s0 = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  auto load = [&](int step, int slot) {
    const char* tile = base + static_cast<size_t>(step / kPerRow) * R * ROW_BYTES +
                       (step % kPerRow) * C;
#pragma unroll 4
    for (int i = threadIdx.x; i < kChunks; i += THREADS) {
      const int row = i / (C / 16), col = i % (C / 16);
      cp_async_16(s0 + slot * kStage + i * 16,
                  tile + static_cast<size_t>(row) * ROW_BYTES + col * 16);
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kSteps) load(s, s);
    cp_async_commit();
  }
  int acc = 0;
  for (int step = 0; step < kSteps; ++step) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = step + STAGES - 1;
    if (next < kSteps) load(next, next % STAGES);
    cp_async_commit();
    const int* slot = reinterpret_cast<const int*>(smem + (step % STAGES) * kStage);
    acc += slot[threadIdx.x % (kStage / 4)];
  }
  cp_async_wait<0>();
  if (acc == 0x12345678) *sink = acc;
}

__global__ void plain_kernel(const int4* w, size_t n, int* sink) {
  int4 acc = {0, 0, 0, 0};
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(w + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678) *sink = 1;
}

template <class Launch>
double median_us(Launch launch, int reps = 30) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int ROWS, int R, int C, int STAGES, int THREADS = kThreads, int ROW_BYTES = kRowBytes,
          int EXTRA = 0>
void ring(const char* w, size_t bytes, int* sink, const char* what) {
  constexpr int kSmem = STAGES * R * C + EXTRA;
  auto k = ring_kernel<ROWS, R, C, STAGES, THREADS, ROW_BYTES>;
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, THREADS, kSmem));
  const int ctas = static_cast<int>(bytes / (static_cast<size_t>(ROWS) * ROW_BYTES));
  const double us = median_us([&] { k<<<ctas, THREADS, kSmem>>>(w, sink); });
  const double read = static_cast<double>(ctas) * ROWS * ROW_BYTES;
  std::printf("%-44s R=%3d C=%4d stages=%d smem=%3d KiB ctas/SM=%d ctas=%5d  %8.1f us  %.3f TB/s\n",
              what, R, C, STAGES, kSmem / 1024, per_sm, ctas, us, read / us * 1e-6);
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 738;
  const size_t bytes = mib << 20;
  char* w = nullptr;
  int* sink = nullptr;
  CHECK(cudaMalloc(&w, bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(w, 1, bytes));
  cudaDeviceProp p{};
  CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs, %zu MiB read per launch\n", p.name, p.multiProcessorCount, mib);
  {
    char* a = nullptr;
    char* b = nullptr;
    CHECK(cudaMalloc(&a, 1ull << 30));
    CHECK(cudaMalloc(&b, 1ull << 30));
    const double us = median_us(
        [&] { CHECK(cudaMemcpyAsync(b, a, 1ull << 30, cudaMemcpyDeviceToDevice)); }, 10);
    std::printf("%-44s %8.1f us  %.3f TB/s (read + write)\n", "copy 1 GiB D2D", us,
                2.0 * (1ull << 30) / us * 1e-6);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  for (int blocks : {p.multiProcessorCount * 4, p.multiProcessorCount * 8}) {
    const size_t n = bytes / 16;
    const double us = median_us([&] {
      plain_kernel<<<blocks, 512>>>(reinterpret_cast<const int4*>(w), n, sink);
    });
    std::printf("plain 16-byte loads, %4d blocks of 512 %17s %8.1f us  %.3f TB/s\n", blocks, "", us,
                bytes / us * 1e-6);
  }
  // A CTA reads 256 rows (1 MiB) in 64 KiB stages, 3 deep (192 KiB, one CTA per SM), as
  // gemm1's block_m=32 tile (bn1=128: 256 gate + up rows, bk1=128).
  ring<256, 256, 256, 3>(w, bytes, sink, "gemm1-like: 256 rows x 256 B (bk=128)");
  ring<256, 128, 512, 3>(w, bytes, sink, "128 rows x 512 B (bk=256)");
  ring<256, 64, 1024, 3>(w, bytes, sink, "64 rows x 1 KiB");
  ring<256, 32, 2048, 3>(w, bytes, sink, "32 rows x 2 KiB");
  ring<256, 16, 4096, 3>(w, bytes, sink, "16 whole rows (64 KiB contiguous)");
  // 128 rows (512 KiB) in 32 KiB stages, 3 deep (96 KiB, two CTAs per SM): block_m=16, bn1=64.
  ring<128, 128, 256, 3>(w, bytes, sink, "block_m=16-like: 128 rows x 256 B");
  ring<128, 8, 4096, 3>(w, bytes, sink, "8 whole rows (32 KiB contiguous)");
  // Deeper rings of the gemm1-like pattern.
  ring<256, 128, 256, 6>(w, bytes, sink, "256 rows, stages of 128 x 256 B, 6 deep");
  ring<128, 64, 256, 6>(w, bytes, sink, "128 rows, stages of 64 x 256 B, 6 deep (2/SM)");
  ring<128, 8, 4096, 6>(w, bytes, sink, "128 rows, 8 whole rows x 6 deep");
  // The tuned DeepSeek-like T=128 GEMMs on the H200 (2026-12-02; ncu: gemm1 87 %, gemm2 83 % of
  // DRAM peak at 12 warps per SM): each CTA's ring as the GEMM holds it, A tiles' shared memory
  // reserved, so as many CTAs share an SM. gemm1 (block_m=32, bn1=64, bk1=64, 4 warps, 3
  // stages): 128 gate + up rows x 128 B a stage, 3 CTAs/SM; gemm2 (bn2=64, bk2=64, 2 warps, 3
  // stages, K = I = 1408: rows of 2816 B): 64 rows x 128 B a stage, 6 CTAs/SM. Then the same
  // streams one CTA per SM with a deep ring (what a producer warp with TMA would hold).
  ring<128, 128, 128, 3, 128, 4096, 3 * 32 * 128>(w, bytes, sink, "gemm1 as tuned: 3 x 16 KiB");
  ring<64, 64, 128, 3, 64, 2816, 3 * 32 * 128>(w, bytes, sink, "gemm2 as tuned: 3 x 8 KiB");
  ring<128, 128, 128, 12, 128, 4096>(w, bytes, sink, "gemm1 rows, 1 CTA/SM: 12 x 16 KiB");
  ring<64, 64, 128, 24, 128, 2816>(w, bytes, sink, "gemm2 rows, 1 CTA/SM: 24 x 8 KiB");
  ring<64, 64, 128, 6, 64, 2816, 6 * 32 * 128>(w, bytes, sink, "gemm2 rows, 6 deep: 6 x 8 KiB");
  return 0;
}
