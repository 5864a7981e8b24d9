// Grouped GEMMs of the MoE layer with Hopper warpgroup MMA (wgmma, sm_90a): the semantics,
// arguments and launch grid of moe_gemm_kernel (moe/gemm.cuh), the tensor work on wgmma instead
// of mma.sync, which on the H100 tops out near 60 % of the tensor rate.
//
// One CTA computes a BLOCK_M x BLOCK_N tile of one expert, as moe_gemm_kernel: the BLOCK_M rows
// are one block of sorted_pairs gathered row by row, GATED (gemm1) reads BLOCK_N gate rows and
// BLOCK_N up rows of w1 and writes silu(gate) * up, gemm2 scales by the routing weight and
// scatters to pair_out[pair]; padding rows load zeros and store nothing.
//
// BLOCK_M / 64 warpgroups, each owning 64 rows: per k16 step a warpgroup issues one
// m64nBLOCK_Nk16 (two for GATED, gate and up) with A and B read from shared memory by
// descriptor. The A [BLOCK_M][64] and B [NB * BLOCK_N][64] tiles stream through a STAGES-deep
// ring of 128-byte-swizzled slots (common/wgmma.cuh), filled by every thread with cp.async by
// moe::Loader of gemm.cuh, whose Tile<64> layout is that swizzle (the ring starts 1024-aligned
// and a slot is a multiple of 1024 bytes). A warpgroup whose 64 rows are all padding issues no
// wgmma.
//
// Ring protocol, per k-tile kt (AHEAD tiles are requested ahead, INFLIGHT wgmma groups stay in
// flight past the barrier, AHEAD + INFLIGHT + 1 = STAGES):
//   wait for tile kt's copies, fence.proxy.async (cp.async writes are generic-proxy, wgmma reads
//   through the async proxy), barrier, issue tile kt's wgmmas, commit, wait until INFLIGHT
//   groups remain (tile kt - 1 retired with INFLIGHT = 1), then request tile kt + AHEAD into the
//   slot of tile kt - 1 - INFLIGHT.
// That slot is free: every warpgroup retired its wgmmas on it before reaching this iteration's
// barrier. With STAGES = 2 there is no room for a group in flight (INFLIGHT = 0).
//
// A first version: no warp specialisation, no TMA (the A rows are gathered through an index
// list, which the tensor copy engine can only do with one request per row), no mbarriers. The
// epilogue stores each thread's column pairs straight from the accumulators.
#pragma once

#include "common/math.cuh"
#include "common/pdl.cuh"
#include "common/types.cuh"
#include "common/wgmma.cuh"
#include "moe/args.h"
#include "moe/gemm.cuh"
#include "moe/gemm_sm90_args.h"

namespace ktune {
namespace moe {

/// wgmma groups of moe_gemm_sm90_kernel left in flight past each k-tile's barrier, and the
/// k-tiles its ring requests ahead: together with the slot being read they fill the ring.
__host__ __device__ constexpr int sm90_inflight(int stages) { return stages > 2 ? 1 : 0; }
__host__ __device__ constexpr int sm90_ahead(int stages) {
  return stages - 1 - sm90_inflight(stages);
}

/// The epilogue of both wgmma GEMM kernels: warpgroup thread gtid stores its accumulators of
/// the 64 rows from row0 of the block (acc[0], and for GATED the up product acc[1]) to
/// out[s_dst[row]][n0 + col] for the rows with a destination (s_dst >= 0) and the columns below n:
/// silu(gate) * up for GATED, else times the routing weight s_scale[row] in fp32. Accumulators
/// {4j, 4j + 1} sit in row Acc::row(gtid, 0) and {4j + 2, 4j + 3} in Acc::row(gtid, 2), at
/// columns Acc::col(gtid, 4j) and + 1 (n is even: a pair is in or out).
/// QUANT (e4m3 operands, out bf16): each accumulator is first dequantised, times s_scale[row]
/// (GATED: a's row scale; gemm2: a's row scale times the routing weight) and the scale of its
/// weight row, w_scale[b * n + col] (w_scale: the expert's scales, gate then up for GATED).
template <typename OutT, int BLOCK_N, bool GATED, int NB, bool QUANT = false>
__device__ __forceinline__ void sm90_store(const float (&acc)[NB][BLOCK_N / 2], OutT* out, int n,
                                           int n0, int row0, int gtid, const int* s_dst,
                                           const float* s_scale,
                                           const float* w_scale = nullptr) {
  using A = wg::Acc<BLOCK_N>;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + A::row(gtid, 2 * r);
    const int dst = s_dst[row];
    if (dst < 0) continue;
    const float scale = GATED && !QUANT ? 1.f : s_scale[row];
    OutT* o = out + static_cast<long long>(dst) * n;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int col = n0 + A::col(gtid, 4 * j);
      if (col >= n) continue;
      const int i = 4 * j + 2 * r;
      // Accumulator pair {i, i + 1} of weight tile b, dequantised (QUANT) and row-scaled.
      const auto pair = [&](int b) {
        float2 v = make_float2(acc[b][i] * scale, acc[b][i + 1] * scale);
        if constexpr (QUANT) {
          const float2 cs = __ldg(reinterpret_cast<const float2*>(w_scale + b * n + col));
          v.x *= cs.x;
          v.y *= cs.y;
        }
        return v;
      };
      unsigned word;
      if constexpr (GATED) {
        const float2 g = pair(0), u = pair(NB - 1);  // up: acc[NB - 1] = acc[1]
        word = pack2<OutT>(g.x * sigmoid_approx(g.x) * u.x, g.y * sigmoid_approx(g.y) * u.y);
      } else {
        const float2 v = pair(0);
        word = pack2<OutT>(v.x, v.y);
      }
      *reinterpret_cast<unsigned*>(o + col) = word;
    }
  }
}

/// The main loop of moe_gemm_sm90_kernel over k_tiles k-tiles (file comment: ring protocol).
/// MMA: this warpgroup issues its wgmmas into acc (A rows at a_off in each slot); without, it only
/// keeps the barriers and requests its share of the copies. Every copy is bounds-checked
/// (Loader::load<false>): a second, unchecked copy of the loads for interior tiles (as gemm.cuh
/// has) pushed one-warpgroup tiles to 255 registers and a spill (64 x 256).
template <typename T, bool MMA, int BLOCK_N, int BLOCK_K, int STAGES, int NB, class LD>
__device__ __forceinline__ void sm90_ring(float (&acc)[NB][BLOCK_N / 2], const LD& ld,
                                          int k_tiles, unsigned a_off) {
  constexpr int INFLIGHT = sm90_inflight(STAGES);
  constexpr int AHEAD = sm90_ahead(STAGES);
  constexpr int PITCH = wg::kSw128RowBytes;
  int slot = 0;
  int load_slot = AHEAD % STAGES;
  for (int kt = 0; kt < k_tiles; ++kt) {
    attn::cp_async_wait<AHEAD - 1>();
    wg::fence_proxy_async();
    __syncthreads();
    if constexpr (MMA) {
      const unsigned st = ld.s_base + slot * LD::STAGE_BYTES;
#pragma unroll
      for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
      wg::fence();
#pragma unroll
      for (int kk = 0; kk < BLOCK_K / 16; ++kk) {
        const unsigned long long da = wg::sw128_desc(st + a_off, kk * wg::kK16Bytes);
#pragma unroll
        for (int b = 0; b < NB; ++b)
          wg::MmaSS<T, BLOCK_N>::run(
              acc[b], da,
              wg::sw128_desc(st + LD::A_BYTES + b * BLOCK_N * PITCH, kk * wg::kK16Bytes), 1);
      }
      wg::commit();
      wg::wait<INFLIGHT>();
#pragma unroll
      for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
    }
    const int next = kt + AHEAD;
    if (next < k_tiles) {
#pragma unroll
      for (int part = 0; part < LD::PARTS; ++part) {
        ld.template load<false>(load_slot, next, part);
      }
    }
    attn::cp_async_commit();
    slot = slot + 1 == STAGES ? 0 : slot + 1;
    load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
  }
  if constexpr (MMA) {
    wg::wait<0>();
#pragma unroll
    for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
  }
}

}  // namespace moe

/// out = (gathered rows of a) x w[expert]^T with the epilogue of gemm1 (GATED) or gemm2, for the
/// blocks of sorted_pairs; see MoeGemmArgs, moe_gemm_kernel and the file comment.
///
/// T: bf16 or fp16. BLOCK_M: rows per CTA (64 or 128, one warpgroup per 64), equal to the align
/// kernel's block_m. BLOCK_N: output columns per CTA (64, 128, 256; GATED: of act, so
/// 2 * BLOCK_N rows of w1 are read and BLOCK_N is at most 128). BLOCK_K: 64, one swizzled
/// 128-byte row. STAGES: ring depth, 2 to 6. GROUP_M: CTA order as moe_gemm_kernel's.
///
/// Requirements: those of moe_gemm_kernel (n and kdim multiples of 8, sorted_pairs entries in
/// [0, pairs], block_expert of every live block in [0, E)); the target is sm_90a (elsewhere the
/// kernel traps).
///
/// Launch: grid (args.max_blocks, moe_gemm_grid_y(n, BLOCK_N)), moe_gemm_sm90_threads(BLOCK_M)
/// threads, moe_gemm_sm90_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED) bytes of dynamic
/// shared memory (raise the kernel's dynamic limit first). Blocks past *padded_rows exit at once.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int STAGES, bool GATED,
          int GROUP_M = 0>
__global__ void __launch_bounds__(BLOCK_M * 2, 1)
    moe_gemm_sm90_kernel(const __grid_constant__ MoeGemmArgs args) {
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(BLOCK_M == 64 || BLOCK_M == 128, "BLOCK_M must be 64 or 128");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256,
                "BLOCK_N must be 64, 128 or 256");
  static_assert(BLOCK_K == 64, "BLOCK_K must be 64 (one 128-byte swizzled row)");
  static_assert(STAGES >= 2 && STAGES <= 6, "STAGES must be 2 to 6");
  static_assert(moe_gemm_sm90_acc_regs(BLOCK_N, GATED) <= 128,
                "more than 128 fp32 accumulators per thread (GATED counts gate and up)");
  static_assert(moe_gemm_sm90_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED) +
                        moe_gemm_sm90_static_smem_bytes(BLOCK_M) <=
                    227 * 1024,
                "shared memory above 227 KiB");
  static_assert(GROUP_M == 0 || GROUP_M == 2 || GROUP_M == 4 || GROUP_M == 8 || GROUP_M == 16 ||
                    GROUP_M == 32,
                "GROUP_M must be 0, 2, 4, 8, 16 or 32");
#if KTUNE_WGMMA
  using namespace attn;
  constexpr int THREADS = moe_gemm_sm90_threads(BLOCK_M);
  constexpr int NB = GATED ? 2 : 1;        // weight tiles per stage (gate, up)
  constexpr int REGS = BLOCK_N / 2;        // accumulators per weight tile and thread
  constexpr int AHEAD = moe::sm90_ahead(STAGES);
  constexpr int PITCH = wg::kSw128RowBytes;
  using LD = moe::Loader<T, BLOCK_M, BLOCK_N, BLOCK_K, THREADS, GATED, 0>;
  static_assert(LD::STAGE_BYTES % wg::kSw128AtomBytes == 0 &&
                    LD::A_BYTES % wg::kSw128AtomBytes == 0,
                "ring slots and their B tiles start on the swizzle atom");

  __shared__ int s_src[BLOCK_M];    // row of a to gather, -1: zeros
  __shared__ int s_dst[BLOCK_M];    // row of out to write, -1: none
  __shared__ float s_scale[BLOCK_M];
  __shared__ int s_live;            // 1 + the last real row of the block
  extern __shared__ __align__(1024) unsigned char smem[];

  // Programmatic launch: gemm1 waits first, gemm2 just before its A loads (as gemm.cuh).
  if constexpr (GATED) griddep_wait();
  int block, col_block;
  moe::gemm_block_of<GROUP_M>(block, col_block);
  const int m0 = block * BLOCK_M;
  const int tid = threadIdx.x;
  // Row count, expert and pairs in flight together, before the early exits (as gemm.cuh).
  constexpr int ROWS_PER_THREAD = (BLOCK_M + THREADS - 1) / THREADS;
  const int padded_rows = *args.padded_rows;
  const int expert = args.block_expert[block];
  int pair_of[ROWS_PER_THREAD];
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i) {
    const int r = tid + i * THREADS;
    pair_of[i] = BLOCK_M % THREADS == 0 || r < BLOCK_M ? args.sorted_pairs[m0 + r] : -1;
  }
  if (m0 >= padded_rows || expert < 0) return;
  const int n0 = col_block * BLOCK_N;
  const int n = args.n;
  const int kdim = args.kdim;

  LD ld;
  // The dynamic area follows the static arrays; round its start up to the swizzle atom (the
  // 1024 spare bytes of moe_gemm_sm90_smem_bytes).
  moe::gemm_loader_init(
      ld, args, expert, n0, tid,
      (smem_addr(smem) + (wg::kSw128AtomBytes - 1)) & ~(wg::kSw128AtomBytes - 1u));

  // Weight tiles of the prologue first (they depend on the expert alone); they join the first
  // commit group with A tile 0, and group s holds A tile s.
  const int k_tiles = (kdim + BLOCK_K - 1) / BLOCK_K;
#pragma unroll
  for (int s = 0; s < AHEAD; ++s)
    if (s < k_tiles)
#pragma unroll
      for (int part = 0; part < LD::PARTS; ++part) ld.template load<false, LD::LOAD_B>(s, s, part);

  if constexpr (!GATED) griddep_wait();
  float scale_of[ROWS_PER_THREAD];
  moe::gemm_resolve_rows<BLOCK_M, THREADS, GATED>(ld, args, m0, pair_of, scale_of, s_src, s_dst,
                                                 &s_live, nullptr);
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < k_tiles)
#pragma unroll
      for (int part = 0; part < LD::PARTS; ++part) ld.template load<false, LD::LOAD_A>(s, s, part);
    cp_async_commit();
  }

  // Warpgroup `group` owns rows 64 * group ...; it has work when one of them is real. The
  // condition is uniform over the warpgroup, as wgmma's .sync.aligned requires.
  const int group = tid / wg::kWarpgroupThreads;
  const int gtid = tid % wg::kWarpgroupThreads;
  const bool live = s_live > group * 64;
  const unsigned a_off = group * 64 * PITCH;

  float acc[NB][REGS];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < REGS; ++i) acc[b][i] = 0.f;

  // The whole ring loop with or without the tensor work, not a test per k-tile inside it:
  // ptxas serialises every wgmma (a wait after each) when an issue is conditional inside a loop
  // whose groups stay in flight.
  if (live)
    moe::sm90_ring<T, true, BLOCK_N, BLOCK_K, STAGES>(acc, ld, k_tiles, a_off);
  else
    moe::sm90_ring<T, false, BLOCK_N, BLOCK_K, STAGES>(acc, ld, k_tiles, a_off);
  griddep_launch_dependents();  // the epilogue is left (as gemm.cuh)
  cp_async_wait<0>();
  if constexpr (!GATED) {
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
      const int r = tid + i * THREADS;
      if (BLOCK_M % THREADS == 0 || r < BLOCK_M) s_scale[r] = scale_of[i];
    }
    __syncthreads();
  }

  moe::sm90_store<T, BLOCK_N, GATED>(acc, static_cast<T*>(args.out), n, n0, group * 64, gtid,
                                     s_dst, s_scale);
#else
  __trap();
#endif
}

}  // namespace ktune
