// Development harness for a small-T gemm2 with swapped operands (benchmarks/moe/SM90.md, "small
// T wants the weights as wgmma's M operand"): out^T = W2[e] x act^T, the weight tile [BW x 64]
// as wgmma's A and the block's NT token rows of act as B (m64nNTk16, NT = 8, 16 or 32), both
// fed by TMA into a STAGES-deep ring by one producer thread, one consumer warpgroup. Not part of
// the op: it answers whether this shape streams gemm2's weights faster than the tuned mma.sync
// kernel (moe_gemm_kernel<bf16, 32, 64, 64, 2 warps, 3 stages, group 8>: 3.93 TB/s, 83 % of DRAM
// peak at DeepSeek-like T=128 on the H200, 2026-12-02) before any op integration.
//
//   check: each configuration's pair_out, NaN-poisoned first, against a double reference on
//          every 5th pair and 3rd column (padding rows are never stored); the mma.sync kernel's
//          likewise.
//   time:  both (dev_util.cuh's time_ms: the median of 5 batches), DeepSeek-like gemm2 (E=64, k=8,
//          H=2048, I=1408) at T = 16, 32, 64, 128 with uniform random routing; TB/s on the
//          weights of the experts touched.
//
// Build (nvcc 13, here or on the GPU machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/swapab_dev.cu -o swapab_dev -lcuda
//   ./swapab_dev [T list, default 16,32,64,128]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/dev_check.hpp"
#include "benchmarks/moe/dev_tma.hpp"
#include "benchmarks/moe/dev_util.cuh"
#include "common/mbarrier.cuh"
#include "common/tma.cuh"
#include "common/types.cuh"
#include "common/wgmma.cuh"
#include "moe/gemm.cuh"
#include "tests/support/moe_gemm_reference.hpp"

using namespace ktune;

// ---- m64nNk16 with both operands K-major in shared memory, N = 8, 16, 32 (the op's layer
// instantiates 64 and up) ----

// ZERO: d = A x B^T with d output-only (the first k16 step of a tile), so that no other
// instruction defines the accumulators inside the wgmma pipeline (ptxas C7515 would serialise
// the wgmmas).
template <int N, bool ZERO>
struct SmallMma;

#if KTUNE_WGMMA
#define KTUNE_SMALL_MMA(N, ZERO, C, REGS, IA, IB)                                            \
  template <>                                                                                \
  struct SmallMma<N, ZERO> {                                                                 \
    __device__ static __forceinline__ void run(float (&d)[N / 2], unsigned long long a,      \
                                               unsigned long long b) {                       \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " #ZERO ", 1;\n"                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" REGS "}, %" #IA \
                   ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                         \
                   : C                                                                       \
                   : "l"(a), "l"(b));                                                        \
    }                                                                                        \
  };
#define KTUNE_R4 "%0, %1, %2, %3"
#define KTUNE_R8 KTUNE_R4 ", %4, %5, %6, %7"
#define KTUNE_R16 KTUNE_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define KTUNE_C4(m) m(d[0]), m(d[1]), m(d[2]), m(d[3])
#define KTUNE_C8(m) KTUNE_C4(m), m(d[4]), m(d[5]), m(d[6]), m(d[7])
#define KTUNE_C16(m) \
  KTUNE_C8(m), m(d[8]), m(d[9]), m(d[10]), m(d[11]), m(d[12]), m(d[13]), m(d[14]), m(d[15])
#define KTUNE_RW(x) "+f"(x)
#define KTUNE_WO(x) "=f"(x)
// setp.ne p, ZERO, 1: p (scale-d) is true, accumulate, when ZERO is 0.
KTUNE_SMALL_MMA(8, 0, KTUNE_C4(KTUNE_RW), KTUNE_R4, 4, 5)
KTUNE_SMALL_MMA(8, 1, KTUNE_C4(KTUNE_WO), KTUNE_R4, 4, 5)
KTUNE_SMALL_MMA(16, 0, KTUNE_C8(KTUNE_RW), KTUNE_R8, 8, 9)
KTUNE_SMALL_MMA(16, 1, KTUNE_C8(KTUNE_WO), KTUNE_R8, 8, 9)
KTUNE_SMALL_MMA(32, 0, KTUNE_C16(KTUNE_RW), KTUNE_R16, 16, 17)
KTUNE_SMALL_MMA(32, 1, KTUNE_C16(KTUNE_WO), KTUNE_R16, 16, 17)
#endif

struct SwapArgs {
  tma::TensorMap w_map;  // w2 as {I, H, E}, box 64 x BW
  tma::TensorMap a_map;  // act as {I, rows}, box 64 x NT
  const int* sorted_pairs;
  const int* block_expert;
  const int* padded_rows;
  const float* topk_weights;
  bf16* out;  // pair_out [pairs, H]
  int pairs;
  int h;
  int i;
};

/// One CTA: block blockIdx.x of NT sorted rows (one expert), weight rows h0 = blockIdx.y * BW ..
/// + BW. Threads 0-127: the consumer warpgroup; thread 128: the producer.
template <int NT, int BW, int STAGES>
__global__ void __launch_bounds__(160, 1)
    swapab_gemm2_kernel(const __grid_constant__ SwapArgs args) {
#if KTUNE_WGMMA
  static_assert(BW % 64 == 0 && BW <= 256, "BW: 64, 128, 192 or 256 weight rows");
  constexpr int MT = BW / 64;                  // m64 tiles per k16 step
  constexpr unsigned W_BYTES = BW * 128;       // [BW][64] bf16, 128-byte rows
  constexpr unsigned A_BYTES = NT * 128;       // [NT][64]
  constexpr unsigned SLOT = W_BYTES + A_BYTES;  // both multiples of 1024
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned base = (wg::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int b = static_cast<int>(blockIdx.x);
  const int h0 = static_cast<int>(blockIdx.y) * BW;
  if (b * NT >= *args.padded_rows) return;
  const int expert = args.block_expert[b];
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(wg::smem_u32(&full[s]), 1);
      mbar::init(wg::smem_u32(&empty[s]), 4);
    }
    mbar::fence_init();
  }
  __syncthreads();
  const int kt_count = (args.i + 63) / 64;
  if (tid >= 128) {
    if (tid == 128) {
      for (int kt = 0; kt < kt_count; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar::wait_parity(wg::smem_u32(&empty[s]), ((kt / STAGES) - 1) & 1);
        const unsigned bar = wg::smem_u32(&full[s]);
        mbar::arrive_expect_tx(bar, SLOT);
        tma::load(base + s * SLOT, &args.w_map, bar, kt * 64, h0, expert);
        tma::load(base + s * SLOT + W_BYTES, &args.a_map, bar, kt * 64, b * NT);
      }
    }
    return;
  }
  float acc[MT][NT / 2];
  // One k-tile's wgmmas from slot s; the first k16 step of the first k-tile writes acc.
  const auto mma_tile = [&](int s, bool first) {
    const unsigned w_tile = base + s * SLOT;
    const unsigned a_tile = w_tile + W_BYTES;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const unsigned long long wd = wg::sw128_desc(w_tile + m * 64 * 128, kk * 32);
        const unsigned long long ad = wg::sw128_desc(a_tile, kk * 32);
        if (first && kk == 0) {
          SmallMma<NT, true>::run(acc[m], wd, ad);
        } else {
          SmallMma<NT, false>::run(acc[m], wd, ad);
        }
      }
  };
  mbar::wait_parity(wg::smem_u32(&full[0]), 0);
  wg::fence();
  mma_tile(0, true);
  wg::commit();
  for (int kt = 1; kt < kt_count; ++kt) {
    const int s = kt % STAGES;
    mbar::wait_parity(wg::smem_u32(&full[s]), (kt / STAGES) & 1);
    wg::fence();
    mma_tile(s, false);
    wg::commit();
    wg::wait<1>();
    // The previous k-tile's wgmmas are done: its slot may be refilled (one arrival per warp).
    if ((tid & 31) == 0) mbar::arrive(wg::smem_u32(&empty[(kt - 1) % STAGES]));
  }
  wg::wait<0>();
#pragma unroll
  for (int m = 0; m < MT; ++m) wg::fence_acc(acc[m]);
  // acc[m][i]: weight row h0 + 64 m + Acc::row, token row b * NT + Acc::col of the block.
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < NT / 2; ++i) {
      const int h = h0 + 64 * m + wg::Acc<NT>::row(tid, i);
      const int r = b * NT + wg::Acc<NT>::col(tid, i);
      const int pair = args.sorted_pairs[r];
      if (pair < args.pairs && h < args.h)
        args.out[static_cast<long long>(pair) * args.h + h] =
            from_float<bf16>(acc[m][i] * args.topk_weights[pair]);
    }
#endif
}

// ---- host ----

/// The host alignment of `ids` (expert of each pair) in blocks of bm rows, and act laid out by it.
struct Layout {
  int bm = 0, blocks = 0, padded = 0;
  int* sorted = nullptr;
  int* block_expert = nullptr;
  int* padded_rows = nullptr;
  void* act = nullptr;  // [blocks * bm, I] bf16, padding rows zero

  Layout(const std::vector<int>& ids, int E, int bm_, const std::vector<std::uint16_t>& act_pair,
         int I)
      : bm(bm_) {
    const int pairs = static_cast<int>(ids.size());
    std::vector<int> sorted_h, expert_h;
    for (int e = 0; e < E; ++e) {
      int n = 0;
      for (int p = 0; p < pairs; ++p)
        if (ids[p] == e) sorted_h.push_back(p), ++n;
      while (n % bm) sorted_h.push_back(pairs), ++n;
      for (int j = 0; j < n / bm; ++j) expert_h.push_back(e);
    }
    padded = static_cast<int>(sorted_h.size());
    blocks = padded / bm;
    std::vector<std::uint16_t> act_h(static_cast<std::size_t>(padded) * I, 0);
    for (int r = 0; r < padded; ++r)
      if (sorted_h[r] < pairs)
        std::copy_n(&act_pair[static_cast<std::size_t>(sorted_h[r]) * I], I,
                    &act_h[static_cast<std::size_t>(r) * I]);
    CK(cudaMalloc(&sorted, padded * sizeof(int)));
    CK(cudaMalloc(&block_expert, blocks * sizeof(int)));
    CK(cudaMalloc(&padded_rows, sizeof(int)));
    CK(cudaMalloc(&act, act_h.size() * 2));
    CK(cudaMemcpy(sorted, sorted_h.data(), padded * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(block_expert, expert_h.data(), blocks * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(padded_rows, &padded, sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(act, act_h.data(), act_h.size() * 2, cudaMemcpyHostToDevice));
  }
};

struct Problem {
  int E, H, I, pairs;
  std::vector<int> ids;
  std::vector<std::uint16_t> act_pair, w2;
  std::vector<float> weights;
  void* w2_d = nullptr;
  float* weights_d = nullptr;
  bf16* out_d = nullptr;
  int touched = 0;
};

/// Worst |out - ref| / (0.02 + 0.02 |ref|) over every 5th pair and every 3rd column (every
/// weight row of a 64-row tile is still met: 3 and 64 are coprime); NaN counts as failing (the
/// output was poisoned first).
double check(const Problem& pr, const char* what) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(pr.pairs) * pr.H);
  CK(cudaMemcpy(out.data(), pr.out_d, out.size() * 2, cudaMemcpyDeviceToHost));
  double worst = 0;
  long long bad = 0;
  for (int p = 0; p < pr.pairs; p += 5) {
    const int e = pr.ids[p];
    for (int h = p % 3; h < pr.H; h += 3) {
      double ref = 0;
      const std::uint16_t* wr = &pr.w2[(static_cast<std::size_t>(e) * pr.H + h) * pr.I];
      const std::uint16_t* ar = &pr.act_pair[static_cast<std::size_t>(p) * pr.I];
      for (int i = 0; i < pr.I; ++i)
        ref += test::moe_from_bits(true, wr[i]) * test::moe_from_bits(true, ar[i]);
      ref *= pr.weights[p];
      const double got = test::moe_from_bits(true, out[static_cast<std::size_t>(p) * pr.H + h]);
      const double r = std::fabs(got - ref) / (0.02 + 0.02 * std::fabs(ref));
      if (!(r <= 1.0)) ++bad;
      if (!(r <= worst)) worst = std::isnan(r) ? INFINITY : std::max(worst, r);
    }
  }
  std::printf("  %-44s %s (worst err/tol %.3f, %lld bad)\n", what, bad ? "FAIL" : "ok", worst,
              bad);
  return worst;
}

template <int NT, int BW, int STAGES>
void run_swap(Problem& pr, const Layout& lay, double ref_us) {
  static_assert(NT == 8 || NT == 16 || NT == 32, "NT: 8, 16 or 32");
  if (lay.bm != NT) return;
  SwapArgs a{};
  const cuuint64_t H = pr.H, I = pr.I, E = pr.E, rows = lay.padded;
  a.w_map = encode(pr.w2_d, true, {I, H, E}, {I * 2, H * I * 2}, {64, BW, 1});
  a.a_map = encode(lay.act, true, {I, rows}, {I * 2}, {64, NT});
  a.sorted_pairs = lay.sorted;
  a.block_expert = lay.block_expert;
  a.padded_rows = lay.padded_rows;
  a.topk_weights = pr.weights_d;
  a.out = pr.out_d;
  a.pairs = pr.pairs;
  a.h = pr.H;
  a.i = pr.I;
  const unsigned smem = STAGES * (BW + NT) * 128 + 1024;
  auto k = swapab_gemm2_kernel<NT, BW, STAGES>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 160, smem));
  const dim3 grid(lay.blocks, (pr.H + BW - 1) / BW);
  CK(cudaMemset(pr.out_d, 0xff, static_cast<std::size_t>(pr.pairs) * pr.H * 2));
  k<<<grid, 160, smem>>>(a);
  CK(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "swap NT=%d BW=%d stages=%d (%u KiB, %d/SM)", NT, BW, STAGES,
                smem / 1024, per_sm);
  check(pr, what);
  const float us = 1000.f * time_ms([&](int) { k<<<grid, 160, smem>>>(a); });
  const double bytes = static_cast<double>(pr.touched) * pr.H * pr.I * 2;
  std::printf("  %-44s %8.1f us  %.2f TB/s  %.3fx the mma.sync kernel's time\n", what, us,
              bytes / us * 1e-6, us / ref_us);
}

/// The tuned mma.sync gemm2 of DeepSeek-like T=128 on the H200 (block_m=32, bn2=64, bk2=64,
/// 2 warps, 3 stages, group 8).
double run_mma(Problem& pr, const Layout& lay) {
  MoeGemmArgs a{lay.act, pr.w2_d, pr.out_d, lay.sorted, lay.block_expert, lay.padded_rows,
                pr.weights_d, pr.pairs, 8, pr.H, pr.I, lay.blocks, nullptr};
  auto k = moe_gemm_kernel<bf16, 32, 64, 64, 2, 1, 3, false, 8, 0, 1, 0, false>;
  const unsigned smem = moe_gemm_smem_bytes(32, 64, 64, 3, false);
  const dim3 grid(lay.blocks, moe_gemm_grid_y(pr.H, 64));
  CK(cudaMemset(pr.out_d, 0xff, static_cast<std::size_t>(pr.pairs) * pr.H * 2));
  k<<<grid, 64, smem>>>(a);
  CK(cudaDeviceSynchronize());
  check(pr, "mma.sync 32x64x64, 2 warps, 3 stages (tuned)");
  const float us = 1000.f * time_ms([&](int) { k<<<grid, 64, smem>>>(a); });
  const double bytes = static_cast<double>(pr.touched) * pr.H * pr.I * 2;
  std::printf("  %-44s %8.1f us  %.2f TB/s\n", "mma.sync 32x64x64, 2 warps, 3 stages (tuned)", us,
              bytes / us * 1e-6);
  return us;
}

int main(int argc, char** argv) {
  std::vector<int> tokens = {16, 32, 64, 128};
  if (argc > 1) {
    tokens.clear();
    for (char* s = std::strtok(argv[1], ","); s; s = std::strtok(nullptr, ","))
      tokens.push_back(std::atoi(s));
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Problem pr;
  pr.E = 64, pr.H = 2048, pr.I = 1408;
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int> val(1, 63), sign(0, 1);
  auto draw = [&] {  // +-[1, 63] / 256 in bf16 bits (exact)
    const float f = (sign(rng) ? -1.f : 1.f) * val(rng) / 256.f;
    return test::moe_to_bits(true, f);
  };
  pr.w2.resize(static_cast<std::size_t>(pr.E) * pr.H * pr.I);
  for (auto& x : pr.w2) x = draw();
  CK(cudaMalloc(&pr.w2_d, pr.w2.size() * 2));
  CK(cudaMemcpy(pr.w2_d, pr.w2.data(), pr.w2.size() * 2, cudaMemcpyHostToDevice));
  for (int T : tokens) {
    const int k = 8;
    pr.pairs = T * k;
    pr.ids.assign(pr.pairs, 0);
    std::uniform_int_distribution<int> ex(0, pr.E - 1);
    for (int t = 0; t < T; ++t) {  // k distinct experts per token
      std::vector<int> pick;
      while (static_cast<int>(pick.size()) < k) {
        const int e = ex(rng);
        if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
      }
      std::copy(pick.begin(), pick.end(), &pr.ids[t * k]);
    }
    std::vector<bool> seen(pr.E, false);
    for (int e : pr.ids) seen[e] = true;
    pr.touched = static_cast<int>(std::count(seen.begin(), seen.end(), true));
    pr.act_pair.resize(static_cast<std::size_t>(pr.pairs) * pr.I);
    for (auto& x : pr.act_pair) x = draw();
    pr.weights.resize(pr.pairs);
    std::uniform_real_distribution<float> wt(0.05f, 1.0f);
    for (auto& x : pr.weights) x = wt(rng);
    CK(cudaMalloc(&pr.weights_d, pr.pairs * sizeof(float)));
    CK(cudaMemcpy(pr.weights_d, pr.weights.data(), pr.pairs * sizeof(float),
                  cudaMemcpyHostToDevice));
    CK(cudaMalloc(&pr.out_d, static_cast<std::size_t>(pr.pairs) * pr.H * 2));
    std::printf("T=%d: %d pairs, %d experts touched, %.0f MB of w2\n", T, pr.pairs, pr.touched,
                pr.touched * 2.0 * pr.H * pr.I / 1e6);
    const Layout l32(pr.ids, pr.E, 32, pr.act_pair, pr.I);
    const Layout l16(pr.ids, pr.E, 16, pr.act_pair, pr.I);
    const Layout l8(pr.ids, pr.E, 8, pr.act_pair, pr.I);
    const double ref = run_mma(pr, l32);
    for (const Layout* l : {&l8, &l16, &l32}) {
      run_swap<8, 128, 8>(pr, *l, ref);
      run_swap<16, 128, 8>(pr, *l, ref);
      run_swap<16, 128, 12>(pr, *l, ref);
      run_swap<16, 256, 6>(pr, *l, ref);
      run_swap<16, 64, 12>(pr, *l, ref);
      run_swap<32, 128, 8>(pr, *l, ref);
      run_swap<32, 128, 4>(pr, *l, ref);
      run_swap<32, 64, 6>(pr, *l, ref);
    }
    CK(cudaFree(pr.weights_d));
    CK(cudaFree(pr.out_d));
  }
  return 0;
}
