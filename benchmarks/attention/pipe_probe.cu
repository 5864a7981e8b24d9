// Probe (stop 62): which pipe does the e4m3 kernel's conversion of P take, and at what rate?
//
// Why: the e4m3 attention consumer spends ~2240 cycles per 128 x 128 tile an SM where its
// tensor work is 1024 and its exp2s 1024 at the XU's 16 a cycle (benchmarks/attention/NOTES.md,
// stop 38); ncu put the XU at 49 %. Beside its 64 MUFU.EX2 a thread and tile it issues 32
// F2FP (cvt.rn.satfinite.e4m3x2.f32, two scores each). If that conversion runs on the same
// quarter-rate pipe as MUFU, a tile's XU-class work is 1536 cycles, not 1024, and P could be
// rounded to e4m3 with integer instructions instead (the exp2 offset lowered by 120 makes the
// float's bits >> 20 the e4m3 code, subnormals included); if it runs at the FMA/ALU rate, the
// conversion is not what holds the tile.
//
// Kernels (each thread: ITERS rounds of independent chains, asm volatile, results folded with
// LOP3 so nothing is dead): ex2 (8 MUFU.EX2 a round), e4m3 (8 cvt e4m3x2), bf16 (8 cvt bf16x2),
// mix (8 ex2 + 4 e4m3, the kernel's 2 : 1), and int (8 scores rounded to e4m3 by IADD/SHF and
// packed by PRMT, the replacement). Each is timed with clock64 per block (the slowest warp)
// and with events; printed: operations per cycle per SM (ops = the kernel's named instruction,
// per lane) and the mix's time against ex2 + e4m3 alone (1.0: one pipe; 0.67: two).
//
// Build (from the repository root): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//          -I . benchmarks/attention/pipe_probe.cu -o pipe_probe
// Run:   ./pipe_probe      (~2 s)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "benchmarks/dev_check.hpp"

constexpr int kIters = 4096;
constexpr int kThreads = 512;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned short e4m3x2(float a, float b) {
  unsigned short h;
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
  return h;
}
__device__ __forceinline__ unsigned bf16x2(float a, float b) {
  unsigned r;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a), "f"(b));
  return r;
}
// p * 2^-120 (what exp2 gives with its offset lowered by 120) as its e4m3 code, rounded half up.
__device__ __forceinline__ unsigned int_e4m3(float scaled) {
  return (__float_as_uint(scaled) + 0x80000u) >> 20;
}

enum Kind { kEx2, kE4m3, kBf16, kMix, kInt };

template <int KIND>
__global__ void __launch_bounds__(kThreads) probe(const float* in, unsigned* out,
                                                  long long* cycles) {
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = in[(threadIdx.x + i) & 255];
  unsigned acc = 0;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
    if constexpr (KIND == kEx2 || KIND == kMix) {
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = ex2(-x[i]);  // stays in [0.5, 1]
    }
    if constexpr (KIND == kE4m3) {
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        acc ^= e4m3x2(x[i], x[i + 1]);
        x[i] += 1e-7f;  // a new input each round (an FADD beside each conversion)
      }
#pragma unroll
      for (int i = 1; i < 8; i += 2) {
        acc ^= e4m3x2(x[i], x[i - 1]);
        x[i] += 1e-7f;
      }
    }
    if constexpr (KIND == kMix) {
#pragma unroll
      for (int i = 0; i < 8; i += 2) acc ^= e4m3x2(x[i], x[i + 1]);
    }
    if constexpr (KIND == kBf16) {
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        acc ^= bf16x2(x[i], x[i + 1]);
        x[i] += 1e-7f;
      }
#pragma unroll
      for (int i = 1; i < 8; i += 2) {
        acc ^= bf16x2(x[i], x[i - 1]);
        x[i] += 1e-7f;
      }
    }
    if constexpr (KIND == kInt) {
      const unsigned lo = __byte_perm(int_e4m3(x[0]), int_e4m3(x[1]), 0x0040);
      const unsigned hi = __byte_perm(int_e4m3(x[2]), int_e4m3(x[3]), 0x0040);
      const unsigned lo2 = __byte_perm(int_e4m3(x[4]), int_e4m3(x[5]), 0x0040);
      const unsigned hi2 = __byte_perm(int_e4m3(x[6]), int_e4m3(x[7]), 0x0040);
      acc ^= __byte_perm(lo, hi, 0x5410) ^ __byte_perm(lo2, hi2, 0x5410);
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] += 1e-7f;
    }
  }
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += x[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc ^ __float_as_uint(s);
  if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<unsigned long long*>(cycles + blockIdx.x),
                                       static_cast<unsigned long long>(t1 - t0));
}

template <int KIND>
void run(const char* name, double ops_per_round, int sms, const float* in, unsigned* out,
         long long* cycles, double* result) {
  const int blocks = sms * 2;  // 1024 threads an SM: 32 warps, 8 a scheduler
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  probe<KIND><<<blocks, kThreads>>>(in, out, cycles);  // warm-up
  CK(cudaMemset(cycles, 0, sizeof(long long) * blocks));
  CK(cudaEventRecord(a));
  probe<KIND><<<blocks, kThreads>>>(in, out, cycles);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0.f;
  CK(cudaEventElapsedTime(&ms, a, b));
  long long* host = new long long[blocks];
  CK(cudaMemcpy(host, cycles, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
  const long long worst = *std::max_element(host, host + blocks);
  delete[] host;
  // Two blocks an SM run together: per SM, 2 * kThreads lanes did kIters rounds in `worst`.
  const double per_sm = 2.0 * kThreads * kIters * ops_per_round / static_cast<double>(worst);
  std::printf("| %-6s | %8.3f | %10lld | %6.2f |\n", name, ms, worst, per_sm);
  *result = static_cast<double>(worst);
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs, max clock %d MHz; %d rounds, %d threads x 2 blocks an SM\n\n",
              prop.name, sms, clock_khz / 1000, kIters, kThreads);
  float host_in[256];
  for (int i = 0; i < 256; ++i) host_in[i] = 0.5f + 0.5f * static_cast<float>(i) / 256.f;
  float* in;
  unsigned* out;
  long long* cycles;
  CK(cudaMalloc(&in, sizeof host_in));
  CK(cudaMemcpy(in, host_in, sizeof host_in, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, sizeof(unsigned) * sms * 2 * kThreads));
  CK(cudaMalloc(&cycles, sizeof(long long) * sms * 2));
  std::printf("| kernel | ms | cycles (slowest block) | ops / cycle / SM |\n|---|---|---|---|\n");
  double ex2_c = 0, e4_c = 0, bf_c = 0, mix_c = 0, int_c = 0;
  run<kEx2>("ex2", 8, sms, in, out, cycles, &ex2_c);     // ops: MUFU.EX2
  run<kE4m3>("e4m3", 8, sms, in, out, cycles, &e4_c);    // ops: F2FP (e4m3x2)
  run<kBf16>("bf16", 8, sms, in, out, cycles, &bf_c);    // ops: F2FP (bf16x2)
  run<kMix>("mix", 12, sms, in, out, cycles, &mix_c);    // ops: 8 MUFU + 4 F2FP
  run<kInt>("int", 8, sms, in, out, cycles, &int_c);     // ops: scores rounded to e4m3
  // The mix's 8 ex2 + 4 e4m3 alone: ex2's cycles + half of e4m3's (8 conversions a round).
  std::printf("\nmix / (ex2 + e4m3 / 2) = %.2f  (1.0: one pipe for both; ~%.2f: separate)\n",
              mix_c / (ex2_c + e4_c / 2), std::max(ex2_c, e4_c / 2) / (ex2_c + e4_c / 2));
  return 0;
}
