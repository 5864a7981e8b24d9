// Grouped GEMMs of the MoE layer, warp-specialised for Hopper (sm_90a): the semantics, grid and
// epilogues of moe_gemm_kernel (moe/gemm.cuh) and moe_gemm_sm90_kernel (moe/gemm_sm90.cuh), with
// the copies taken off the warpgroups that issue the wgmmas.
//
// One CTA computes a BLOCK_M x BLOCK_N tile of one expert. Warpgroup 0 is the producer (it
// gives its registers away with setmaxnreg when there are two consumers); warpgroups 1 ..
// BLOCK_M / 64 are consumers, each owning 64 rows and issuing one m64nBLOCK_Nk16 per k16 step
// (two for GATED: gate and up) from a STAGES-deep ring of 128-byte-swizzled slots, each slot an
// A tile [BLOCK_M][64] and a weight tile [NB * BLOCK_N][64]. e4m3 operands (FP8 weights, a
// quantised per row): the same bytes, so k-tiles of 128 and one m64nBLOCK_Nk32 per 32 bytes of k;
// the epilogue dequantises (a's row scale, the weight row's scale) and stores bf16. The FP8
// wgmma accumulates with less than fp32's precision (measured on the H100: gemm1's act then
// differed from the fp32 reference in enough low bits that, re-quantised to e4m3 for gemm2, y
// missed the reference kernels at a few hundred of 1.2M values at H = 4096), so e4m3 gemm1 sums
// each k-tile's 128 products in a second set of accumulators and adds them to the first in fp32
// (the promotion interval DeepSeek-V3 reports for its FP8 GEMMs); gemm2 writes y, which is not
// re-quantised, straight from the wgmma accumulators.
//
// The producer fills slot s of k-tile kt once the slot's "empty" barrier says the consumers are
// done with k-tile kt - STAGES:
//   weights  one TMA box of 64 x BLOCK_N per weight tile (gemm1: gate and up, as the 4-D map
//            {H, I, 2, E}; gemm2: {I, H, E}), elements past I or H or the reduction arriving as
//            zeros;
//   gemm1 A  x rows gathered through sorted_pairs: GATHER = moe_ws_gather_tma, one 128-byte box
//            per real row, issued by the lanes of warp 0; GATHER = moe_ws_gather_cp_async, the
//            producer's 128 threads copy 16-byte chunks (zeros past H) and arrive on the slot's
//            "full" barrier through cp.async.mbarrier.arrive.noinc; GATHER =
//            moe_ws_gather_sorted, none: a already holds the rows in sorted order (a gather
//            before the kernel), one box of 64 x BLOCK_M as gemm2's act;
//   gemm2 A  the block's act rows, contiguous in sorted order: one box of 64 x BLOCK_M.
// Every copy of a slot completes on its "full" barrier (transaction bytes, plus the 128 cp.async
// arrivals of the cp.async gather). Rows past the block's real ones (padding, always a suffix of
// a block: the align kernels pad each expert's run at its end) are not gathered: whatever the
// slot held stays there, and since a row of the product depends on its own row of A only, those
// rows' results are wrong and never stored. gemm2's padding rows of act were never written by
// gemm1; they feed padding rows only, likewise.
//
// A consumer waits for the slot's "full" barrier, issues its wgmmas, commits, waits until one
// group remains in flight (the previous k-tile's) and releases that k-tile's slot: one arrival
// per warp on the slot's "empty" barrier. A consumer whose 64 rows are all padding only waits
// and releases. The epilogue stores each thread's column pairs from the accumulators
// (gemm1: silu(gate) * up; gemm2: times the routing weight in fp32, to pair_out[pair]).
//
// gemm2 requests the weights of its first STAGES k-tiles before griddep_wait (they depend on the
// expert alone, which the align kernel two launches back wrote), and its act rows after it; in
// clusters (CLUSTER 2), once both CTAs' barriers exist.
#pragma once

#include "common/math.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/cluster.cuh"
#include "common/tma.cuh"
#include "common/types.cuh"
#include "common/warpgroup.cuh"
#include "common/wgmma.cuh"
#include "moe/args.h"
#include "moe/gemm.cuh"
#include "moe/gemm_sm90.cuh"
#include "moe/gemm_ws_args.h"

namespace ktune {
namespace moe {

/// Registers per thread after reallocation with CONSUMERS consumer warpgroups beside the
/// producer's: two (384 threads) 128 x 40 + 256 x 232, three (BLOCK_M 192, 512 threads)
/// 128 x 24 + 384 x 160, both 64512 of the 65536. One consumer (256 threads) keeps the launch
/// bound's 255 and reallocates nothing.
template <int CONSUMERS>
struct WsRegisters {
  static_assert(CONSUMERS == 2 || CONSUMERS == 3, "registers are reallocated for 2 or 3 consumers");
  static constexpr int PRODUCER = CONSUMERS == 3 ? 24 : 40;
  static constexpr int CONSUMER = CONSUMERS == 3 ? 160 : 232;
};

/// A consumer warpgroup's wgmmas of the k-tile in the ring slot at st (its A rows at st + a_off,
/// the NB weight tiles from st + a_bytes, w_bytes apart) into d, committed as one group; fresh:
/// the first overwrites d. CP_GATHER: the A rows arrived by cp.async (generic proxy writes).
template <typename T, int BLOCK_N, int NB, bool CP_GATHER>
__device__ __forceinline__ void ws_issue(float (&d)[NB][BLOCK_N / 2], unsigned st, unsigned a_off,
                                         unsigned a_bytes, unsigned w_bytes, bool fresh) {
  if constexpr (CP_GATHER) wg::fence_proxy_async();
#pragma unroll
  for (int b = 0; b < NB; ++b) wg::fence_acc(d[b]);
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const unsigned long long da = wg::sw128_desc(st + a_off, kk * wg::kK16Bytes);
#pragma unroll
    for (int b = 0; b < NB; ++b)
      wg::MmaSS<T, BLOCK_N>::run(d[b], da,
                                 wg::sw128_desc(st + a_bytes + b * w_bytes, kk * wg::kK16Bytes),
                                 fresh && kk == 0 ? 0 : 1);
  }
  wg::commit();
}

/// gemm1's A rows of the k-tile from k0 into the ring slot at sa, copied by the producer
/// warpgroup's 128 threads (ptid): thread t copies 16-byte chunk t % 8 of rows t / 8 + 16 j below
/// `live`, row r from x's row src[r], zeros past kdim. Completed on the slot's barrier by the
/// caller (mbar::cp_async_arrive_noinc).
template <typename T, int BLOCK_M>
__device__ __forceinline__ void ws_gather_rows(unsigned sa, const T* x, const int* src, int live,
                                               int kdim, int k0, int ptid) {
  constexpr int EPC = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  const int chunk = ptid & 7, row0 = ptid >> 3;
  const int k = k0 + chunk * EPC;
  const bool k_ok = k < kdim;
#pragma unroll
  for (int j = 0; j < BLOCK_M / 16; ++j) {
    const int r = row0 + 16 * j;
    if (r < live)
      attn::cp_async_16(sa + wg::sw128_offset(r, chunk),
                        x + static_cast<long long>(src[r]) * kdim + (k_ok ? k : 0),
                        k_ok ? 16 : 0);
  }
}

/// Named barriers of moe_gemm_ws_persistent_kernel (0 is __syncthreads'): a row table's
/// "written" (producer arrives, consumers wait) and "read" (consumers arrive after their
/// epilogue, the producer waits before rewriting it), per table; and the producer's own.
constexpr int kWsTableFull = 1, kWsTableFree = 3, kWsProducer = 5;

}  // namespace moe

/// out = (gathered rows of a) x w[expert]^T with the epilogue of gemm1 (GATED) or gemm2, for the
/// blocks of sorted_pairs, warp-specialised (file comment). Arguments: MoeGemmWsArgs, whose base
/// is moe_gemm_kernel's MoeGemmArgs and whose tensor maps gemm_ws_args.h describes.
///
/// T: bf16 or fp16 (a, w, out), or e4m3 (a and w, dequantised by args.a_scale and args.w_scale
/// as moe_gemm_kernel's; out bf16). BLOCK_M: rows per CTA (64, 128 or 192: one consumer
/// warpgroup per 64), equal to the align kernel's block_m. 192 (three consumers at 160 registers,
/// the producer at 24) reads each weight tile once for 192 rows: fewer tiles per expert where
/// experts get 129-192 or 257-384 rows, 56 KiB of L2 reads per 6.3 MFLOP against 48 per 4.2 at
/// 128 (gemm1's L2 bound, benchmarks/moe/NOTES.md); BLOCK_N then at most 128. BLOCK_N: output
/// columns per CTA (64, 128, 256; GATED: of act, 2 * BLOCK_N rows of w1 are read, so at most
/// 128). The reduction step is one swizzled 128-byte row (64 16-bit elements, 128 e4m3).
/// STAGES: ring depth, 2 to 8. GROUP_M: CTA order as moe_gemm_kernel's. GATHER: gemm1's row
/// gather (MoeWsGather; cp.async measured 3.5-4x faster than a TMA box per row on the H100);
/// ignored by gemm2.
/// CLUSTER: 1, or 2 for clusters of two CTAs along x (common/cluster.cuh) that share the weight
/// tile when both compute the same column block of the same expert: each CTA loads the half of
/// every weight tile of its rank (the tensor map's box is BLOCK_N / 2 rows) multicast into both,
/// so the pair reads it from L2 once; each slot's "empty" barrier then counts both CTAs'
/// consumer warps (a consumer arrives on its partner's barrier too), and the pair syncs the
/// cluster after initialising its barriers and before exiting. A pair whose blocks differ
/// (another expert or column block, or a block past *padded_rows) loads unshared. Measured
/// (H200, Mixtral T=1024): gemm2 0.94x the time of CLUSTER 1, gemm1 1.15x (its pairs' lock
/// step; benchmarks/moe/NOTES.md): a tunable, chosen by measurement. 3: clusters of two along
/// y, the two column blocks of one row block (the GROUP_M order runs over the pairs), sharing
/// the act tile instead: each CTA loads half its rows (the act map's box is 64 x BLOCK_M / 2)
/// multicast into both and its own weights; gemm2, or gemm1 with GATHER 2 (rows already
/// sorted). The op's cluster1/cluster2 = 3; measured (H100, stop 70, benchmarks/moe/NOTES.md):
/// gemm2 0.85-0.93x the time of CLUSTER 1 at Mixtral T = 1024-4096, gemm1 with its gather
/// 0.91x at T=4096 and 1.01x at 1024; the shipped Mixtral rows from T=1024 use it.
///
/// Requirements: those of moe_gemm_kernel; every block's real rows come first (the padding of
/// an expert's run is at its end, as both align paths and expert choice's select write it).
///
/// Launch: grid (args.max_blocks, moe_gemm_grid_y(n, BLOCK_N)), moe_gemm_ws_threads(BLOCK_M)
/// threads, moe_gemm_ws_smem_bytes(BLOCK_M, BLOCK_N, STAGES, GATED) bytes of dynamic shared
/// memory (raise the kernel's dynamic limit first). Blocks past *padded_rows exit at once.
/// CLUSTER 2: the grid's x rounded up to even, a cluster of 2 along x (KernelLaunch::cluster).
/// CLUSTER 3: the grid's y rounded up to even, a cluster of 2 along y.
template <typename T, int BLOCK_M, int BLOCK_N, int STAGES, bool GATED, int GROUP_M = 0,
          int GATHER = moe_ws_gather_cp_async, int CLUSTER = 1>
__global__ void __launch_bounds__(128 + BLOCK_M * 2, 1)
    moe_gemm_ws_kernel(const __grid_constant__ MoeGemmWsArgs wargs) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "T must be bf16, fp16 or e4m3");
  static_assert(BLOCK_M == 64 || BLOCK_M == 128 || BLOCK_M == 192,
                "BLOCK_M must be 64, 128 or 192 (one consumer warpgroup per 64 rows)");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256,
                "BLOCK_N must be 64, 128 or 256");
  static_assert(BLOCK_M != 192 || BLOCK_N <= 128,
                "BLOCK_M 192 (512 threads: 128 registers a thread at launch) takes BLOCK_N at most "
                "128 (one wgmma's accumulators and operands need more than 128 registers at 256)");
  static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be 2 to 8");
  static_assert(moe_gemm_sm90_acc_regs(BLOCK_N, GATED) <= 128,
                "more than 128 fp32 accumulators per consumer thread (GATED counts gate and up)");
  static_assert(moe_gemm_ws_smem_bytes(BLOCK_M, BLOCK_N, STAGES, GATED) +
                        moe_gemm_sm90_static_smem_bytes(BLOCK_M) <=
                    227 * 1024,
                "shared memory above 227 KiB");
  static_assert(GROUP_M == 0 || GROUP_M == 2 || GROUP_M == 4 || GROUP_M == 8 || GROUP_M == 16 ||
                    GROUP_M == 32,
                "GROUP_M must be 0, 2, 4, 8, 16 or 32");
  static_assert(GATHER == moe_ws_gather_cp_async || GATHER == moe_ws_gather_tma ||
                    GATHER == moe_ws_gather_sorted,
                "GATHER must be 0 (cp.async), 1 (a TMA box per row) or 2 (rows already sorted)");
  static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 3, "CLUSTER must be 1, 2 or 3");
  static_assert(CLUSTER != 3 || !GATED || GATHER == moe_ws_gather_sorted,
                "CLUSTER 3 shares the act tile, one TMA box: gemm1 needs its rows sorted "
                "(GATHER 2)");
#if KTUNE_WGMMA
  constexpr int CONSUMERS = moe_gemm_ws_consumers(BLOCK_M);
  constexpr int NB = GATED ? 2 : 1;    // weight tiles per slot (gate, up)
  constexpr int REGS = BLOCK_N / 2;    // accumulators per weight tile and consumer thread
  constexpr int PITCH = wg::kSw128RowBytes;
  constexpr int EB = static_cast<int>(sizeof(T));
  constexpr int KT = PITCH / EB;       // k per k-tile: one 128-byte swizzled row
  constexpr bool QUANT = EB == 1;      // e4m3: dequantised in the epilogue, out bf16
  // e4m3 gemm1: each k-tile's products are summed in fp32 registers (file comment).
  constexpr bool PROMOTE = QUANT && GATED;
  static_assert(!PROMOTE || moe_gemm_sm90_acc_regs(BLOCK_N, GATED) <= 64,
                "e4m3 gemm1 keeps a second set of accumulators (each k-tile's products, added in "
                "fp32): BLOCK_N at most 64");
  using OutT = typename OutputOf<T>::type;
  constexpr unsigned A_BYTES = BLOCK_M * PITCH;
  constexpr unsigned W_BYTES = BLOCK_N * PITCH;  // one weight tile
  constexpr unsigned STAGE = moe_gemm_ws_stage_bytes(BLOCK_M, BLOCK_N, GATED);
  constexpr bool CP_GATHER = GATED && GATHER == moe_ws_gather_cp_async;
  // gemm1 with its rows already gathered in sorted order: A as gemm2 loads its act.
  constexpr bool SORTED = GATED && GATHER == moe_ws_gather_sorted;
  static_assert(A_BYTES % wg::kSw128AtomBytes == 0 && STAGE % wg::kSw128AtomBytes == 0,
                "slots and their tiles start on the swizzle atom");
  const MoeGemmArgs& args = wargs.base;

  __shared__ int s_src[BLOCK_M];    // gemm1: row of x to gather
  __shared__ int s_dst[BLOCK_M];    // row of out to write, -1: none
  __shared__ float s_scale[BLOCK_M];  // gemm2: routing weight; QUANT: times a's row scale
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (wg::smem_u32(smem) + (wg::kSw128AtomBytes - 1)) &
                        ~(wg::kSw128AtomBytes - 1u);
  const unsigned bars = base + STAGES * STAGE;
  const auto full = [&](int s) { return bars + 8u * s; };
  const auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

  // Programmatic launch: gemm1 waits first (the alignment is its predecessor's output), gemm2
  // before its act rows only.
  if constexpr (GATED) griddep_wait();
  int block, col_block;
  if constexpr (CLUSTER == 3) {
    // Pairs along y: both CTAs of a cluster take one row block and a pair of column blocks (the
    // GROUP_M order over the pairs), rank 0 the even one.
    int col_pair;
    if constexpr (GROUP_M == 0) {
      block = static_cast<int>(blockIdx.x), col_pair = static_cast<int>(blockIdx.y >> 1);
    } else {
      moe::gemm_tile_of<GROUP_M>(static_cast<int>((blockIdx.y >> 1) * gridDim.x + blockIdx.x),
                                 static_cast<int>(gridDim.x), static_cast<int>(gridDim.y >> 1),
                                 block, col_pair);
    }
    col_block = 2 * col_pair + static_cast<int>(blockIdx.y & 1u);
  } else {
    moe::gemm_block_of<GROUP_M>(block, col_block);
  }
  const int m0 = block * BLOCK_M;
  const int tid = threadIdx.x;
  const int padded_rows = *args.padded_rows;
  // CLUSTER 2: the grid is padded to whole pairs, so a block may lie past the tables.
  const bool inside = CLUSTER != 2 || m0 < padded_rows;
  const int expert = inside ? args.block_expert[block] : -1;
  const int pair = tid < BLOCK_M && inside ? args.sorted_pairs[m0 + tid] : -1;
  if constexpr (CLUSTER != 2) {
    // CLUSTER 3: both CTAs of a pair have this row block, so both leave here or neither.
    if (m0 >= padded_rows || expert < 0) return;
  }
  // CLUSTER 3: the grid's y is rounded up to whole pairs, so a column block may lie past n.
  const bool dead =
      m0 >= padded_rows || expert < 0 || (CLUSTER == 3 && col_block * BLOCK_N >= args.n);
  // CLUSTER 2: the pair's other CTA (rank ^ 1) and whether both compute the same expert's column
  // block, so that each loads half of the weight tile multicast into both (file comment).
  unsigned rank = 0;
  bool share = false;
  if constexpr (CLUSTER == 3) {
    // The pair's other CTA (rank ^ 1) has the same rows: both compute unless one's column block
    // lies past n, and then each loads its own act tile.
    rank = cluster::ctarank();
    share = !dead && (col_block ^ 1) * BLOCK_N < args.n;
  } else if constexpr (CLUSTER > 1) {
    rank = cluster::ctarank();
    int peer_block, peer_col;
    const unsigned peer_x = blockIdx.x ^ 1u;
    if constexpr (GROUP_M == 0) {
      peer_block = static_cast<int>(peer_x), peer_col = static_cast<int>(blockIdx.y);
    } else {
      moe::gemm_tile_of<GROUP_M>(static_cast<int>(blockIdx.y * gridDim.x + peer_x),
                                 static_cast<int>(gridDim.x), static_cast<int>(gridDim.y),
                                 peer_block, peer_col);
    }
    const int peer_expert = peer_block * BLOCK_M < padded_rows ? args.block_expert[peer_block] : -1;
    share = !dead && peer_expert == expert && peer_col == col_block;
  }
  const int n0 = col_block * BLOCK_N;
  const int kdim = args.kdim;
  const int k_tiles = (kdim + KT - 1) / KT;

  // The weight tiles of k-tile kt into slot s, on its full barrier. CLUSTER 2: the map's box
  // is half a tile (BLOCK_N / 2 rows); a sharing pair's CTAs each load their half multicast into
  // both, else a CTA loads both halves itself.
  const auto load_w = [&](int s, int kt) {
    const unsigned sb = base + s * STAGE + A_BYTES;
    if constexpr (CLUSTER != 2) {
      if constexpr (GATED) {
        tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, 0, expert);
        tma::load(sb + W_BYTES, &wargs.w_map, full(s), kt * KT, n0, 1, expert);
      } else {
        tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, expert);
      }
    } else {
      constexpr int HALF = BLOCK_N / 2;
      const int h0 = share ? static_cast<int>(rank) : 0, h1 = share ? h0 + 1 : 2;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const unsigned tile = sb + b * W_BYTES;
        for (int h = h0; h < h1; ++h) {
          const unsigned dst = tile + h * HALF * PITCH;
          if (share) {
            if constexpr (GATED)
              cluster::load_multicast(dst, &wargs.w_map, full(s), 0x3, kt * KT, n0 + h * HALF,
                                      b, expert);
            else
              cluster::load_multicast(dst, &wargs.w_map, full(s), 0x3, kt * KT, n0 + h * HALF,
                                      expert);
          } else {
            if constexpr (GATED)
              tma::load(dst, &wargs.w_map, full(s), kt * KT, n0 + h * HALF, b, expert);
            else
              tma::load(dst, &wargs.w_map, full(s), kt * KT, n0 + h * HALF, expert);
          }
        }
      }
    }
  };
  // The act tile of k-tile kt, contiguous rows m0.. (gemm2's act; gemm1's with SORTED), into the
  // slot at sa on its full barrier. CLUSTER 3: the map's box is half the rows; a sharing pair's
  // CTAs each load their half multicast into both, else a CTA loads both halves itself.
  const auto load_a = [&](unsigned sa, int s, int kt) {
    if constexpr (CLUSTER == 3) {
      constexpr int HALF = BLOCK_M / 2;
      if (share) {
        cluster::load_multicast(sa + rank * HALF * PITCH, &wargs.a_map, full(s), 0x3, kt * KT,
                                m0 + static_cast<int>(rank) * HALF);
      } else {
        tma::load(sa, &wargs.a_map, full(s), kt * KT, m0);
        tma::load(sa + HALF * PITCH, &wargs.a_map, full(s), kt * KT, m0 + HALF);
      }
    } else {
      tma::load(sa, &wargs.a_map, full(s), kt * KT, m0);
    }
  };


  // gemm2: the first slots' weights (they depend on the expert alone), their act rows announced
  // with them (requested after the wait). CLUSTER 2: each CTA its half of a shared tile.
  const auto load_first = [&] {
    for (int s = 0; s < STAGES && s < k_tiles; ++s) {
      mbar::arrive_expect_tx(full(s), STAGE);
      load_w(s, s);
    }
  };
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(full(s), CP_GATHER ? 1 + wgrp::kWarpgroupThreads : 1);
      // One arrival per consumer warp; a sharing pair's from both CTAs (the slot is written
      // into both).
      mbar::init(empty(s), 4 * CONSUMERS * (share ? 2 : 1));
    }
    mbar::fence_init();
    tma::prefetch_map(&wargs.w_map);
    tma::prefetch_map(&wargs.a_map);
    if constexpr (!GATED && CLUSTER != 2) {
      // CLUSTER 3: its own weights, before the cluster barrier (a CTA past n loads none).
      if (CLUSTER == 1 || !dead) load_first();
    }
  }
  if constexpr (CLUSTER > 1) {
    // Both CTAs' barriers exist before either copies into or arrives on the other; a CTA with
    // no rows leaves after it (its partner does not share with it).
    cluster::sync();
    if (dead) return;
    // CLUSTER 2: once the partner's barriers exist (its halves are multicast into them).
    if constexpr (!GATED && CLUSTER == 2)
      if (tid == 0) load_first();
  }
  if constexpr (!GATED) griddep_wait();

  // The block's rows: a prefix of real ones (file comment), then padding.
  const bool real = pair >= 0 && pair < args.pairs;
  if (tid < BLOCK_M) {
    if constexpr (GATED) {
      const int src = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : -1;
      s_src[tid] = src;
      s_dst[tid] = real ? m0 + tid : -1;
      if constexpr (QUANT) s_scale[tid] = real ? args.a_scale[src] : 0.f;
    } else {
      s_dst[tid] = real ? pair : -1;
      float w = real ? args.topk_weights[pair] : 0.f;
      if constexpr (QUANT) w *= real ? args.a_scale[m0 + tid] : 0.f;
      s_scale[tid] = w;
    }
  }
  // Publishes the row table and the barriers' initialisation.
  const int live = __syncthreads_count(real);

  if (wgrp::warpgroup_index() == 0) {
    // ---- producer ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_dec<moe::WsRegisters<CONSUMERS>::PRODUCER>();
    if constexpr (CP_GATHER) {
      // Every thread copies its chunks of the rows (ws_gather_rows); thread 0 also issues the
      // weights.
      const T* x = static_cast<const T*>(args.a);
      int s = 0;
      unsigned phase = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        if (kt >= STAGES) mbar::wait_parity(empty(s), phase ^ 1u);
        if (tid == 0) {
          mbar::arrive_expect_tx(full(s), NB * W_BYTES);
          load_w(s, kt);
        }
        moe::ws_gather_rows<T, BLOCK_M>(base + s * STAGE, x, s_src, live, kdim, kt * KT, tid);
        mbar::cp_async_arrive_noinc(full(s));
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
    } else if (wgrp::warp_in_warpgroup() == 0) {
      const int lane = tid & 31;
      int s = 0;
      unsigned phase = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        if (kt >= STAGES) mbar::wait_parity(empty(s), phase ^ 1u);
        const unsigned sa = base + s * STAGE;
        if constexpr (SORTED) {
          if (lane == 0) {
            mbar::arrive_expect_tx(full(s), STAGE);
            load_w(s, kt);
            load_a(sa, s, kt);
          }
        } else if constexpr (GATED) {
          // Lane 0 announces the slot's bytes before any lane's row copy can land.
          if (lane == 0) {
            mbar::arrive_expect_tx(full(s), NB * W_BYTES + static_cast<unsigned>(live) * PITCH);
            load_w(s, kt);
          }
          __syncwarp();
          for (int r = lane; r < live; r += 32)
            tma::load(sa + r * PITCH, &wargs.a_map, full(s), kt * KT, s_src[r]);
        } else if (lane == 0) {
          if (kt >= STAGES) {
            mbar::arrive_expect_tx(full(s), STAGE);
            load_w(s, kt);
          }
          load_a(sa, s, kt);
        }
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
    }
    griddep_launch_dependents();
  } else {
    // ---- consumers ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_inc<moe::WsRegisters<CONSUMERS>::CONSUMER>();
    const int c = wgrp::warpgroup_index() - 1;
    const int gtid = wgrp::thread_in_warpgroup();
    const int lane = tid & 31;
    const unsigned a_off = c * 64 * PITCH;
    const auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) mbar::arrive(empty(s));
      if constexpr (CLUSTER > 1) {
        if (lane == 0 && share) cluster::arrive_remote(empty(s), rank ^ 1u);
      }
    };

    float acc[NB][REGS];
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < REGS; ++i) acc[b][i] = 0.f;

    // Issues the wgmmas of the k-tile in slot s into d once it has landed, and commits them;
    // fresh: the first one overwrites d instead of adding to it.
    const auto issue = [&](float (&d)[NB][REGS], int s, unsigned phase, bool fresh) {
      mbar::wait_parity(full(s), phase);
      moe::ws_issue<T, BLOCK_N, NB, CP_GATHER>(d, base + s * STAGE, a_off, A_BYTES, W_BYTES, fresh);
    };
    if constexpr (PROMOTE) {
      // Each k-tile into part, then added to acc in fp32 once it has landed. One group in
      // flight per warpgroup: the other consumer's wgmmas keep the tensor cores busy meanwhile.
      float part[NB][REGS];
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int i = 0; i < REGS; ++i) part[b][i] = 0.f;
      int s = 0;
      unsigned phase = 0;
      const bool mma = live > c * 64;
      for (int kt = 0; kt < k_tiles; ++kt) {
        if (mma) {
          issue(part, s, phase, true);
          wg::wait<0>();
#pragma unroll
          for (int b = 0; b < NB; ++b) wg::fence_acc(part[b]);
        } else {
          mbar::wait_parity(full(s), phase);
        }
        release(s);
        if (mma)
#pragma unroll
          for (int b = 0; b < NB; ++b)
#pragma unroll
            for (int i = 0; i < REGS; ++i) acc[b][i] += part[b][i];
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
    } else if (live > c * 64) {
      issue(acc, 0, 0u, false);
      int prev = 0;
      int s = STAGES > 1 ? 1 : 0;
      unsigned phase = 0;
      for (int kt = 1; kt < k_tiles; ++kt) {
        issue(acc, s, phase, false);
        wg::wait<1>();
#pragma unroll
        for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
        release(prev);
        prev = s;
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
      wg::wait<0>();
#pragma unroll
      for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
      release(prev);
    } else {
      int s = 0;
      unsigned phase = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        mbar::wait_parity(full(s), phase);
        release(s);
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
    }
    griddep_launch_dependents();  // the epilogue is left

    moe::sm90_store<OutT, BLOCK_N, GATED, NB, QUANT>(
        acc, static_cast<OutT*>(args.out), args.n, n0, c * 64, gtid, s_dst, s_scale,
        QUANT ? args.w_scale + static_cast<long long>(expert) * NB * args.n : nullptr);
  }
  if constexpr (CLUSTER > 1) {
    // Neither CTA of a sharing pair exits while the other may still copy into it or arrive on
    // its barriers.
    if (share) cluster::sync();
  }
#else
  __trap();  // sm_90a only: the host never plans this kernel elsewhere
#endif
}

/// moe_gemm_ws_kernel's tiles on a persistent grid (16-bit types, cp.async row gather): CTA c
/// computes tiles c, c + gridDim.x, ... of the max_blocks x ceil(n / BLOCK_N) grid (in the
/// GROUP_M order; tiles past *padded_rows or of no expert are skipped by every role alike), so
/// its producer fills the ring with the next tile's first k-tiles while the consumers run the
/// last tile's epilogue. The ring and its phases run on across tiles; the row table is double
/// buffered by tile parity (named barriers kWsTableFull / kWsTableFree), its live row count
/// summed by the producer's warps (kWsProducer).
///
/// Launch: grid (min(tiles, SMs)), otherwise as moe_gemm_ws_kernel; gemm2 requests nothing
/// before griddep_wait here.
template <typename T, int BLOCK_M, int BLOCK_N, int STAGES, bool GATED, int GROUP_M = 0>
__global__ void __launch_bounds__(128 + BLOCK_M * 2, 1)
    moe_gemm_ws_persistent_kernel(const __grid_constant__ MoeGemmWsArgs wargs) {
  static_assert(sizeof(T) == 2, "the persistent kernel takes bf16 or fp16");
  static_assert(BLOCK_M == 64 || BLOCK_M == 128,
                "BLOCK_M must be 64 or 128 (one consumer warpgroup per 64 rows)");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256,
                "BLOCK_N must be 64, 128 or 256");
  static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be 2 to 8");
  static_assert(moe_gemm_sm90_acc_regs(BLOCK_N, GATED) <= 128,
                "more than 128 fp32 accumulators per consumer thread (GATED counts gate and up)");
  static_assert(moe_gemm_ws_smem_bytes(BLOCK_M, BLOCK_N, STAGES, GATED) +
                        2 * moe_gemm_sm90_static_smem_bytes(BLOCK_M) <=
                    227 * 1024,
                "shared memory above 227 KiB");
#if KTUNE_WGMMA
  constexpr int CONSUMERS = moe_gemm_ws_consumers(BLOCK_M);
  constexpr int THREADS = 128 + BLOCK_M * 2;
  constexpr int NB = GATED ? 2 : 1;
  constexpr int REGS = BLOCK_N / 2;
  constexpr int PITCH = wg::kSw128RowBytes;
  constexpr int KT = PITCH / 2;
  constexpr unsigned A_BYTES = BLOCK_M * PITCH;
  constexpr unsigned W_BYTES = BLOCK_N * PITCH;
  constexpr unsigned STAGE = moe_gemm_ws_stage_bytes(BLOCK_M, BLOCK_N, GATED);
  const MoeGemmArgs& args = wargs.base;

  __shared__ int s_src[2][BLOCK_M];
  __shared__ int s_dst[2][BLOCK_M];
  __shared__ float s_scale[2][BLOCK_M];
  __shared__ int s_live[2];
  __shared__ int s_count[2][4];  // per producer warp, per table (a warp may run a tile ahead)
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (wg::smem_u32(smem) + (wg::kSw128AtomBytes - 1)) &
                        ~(wg::kSw128AtomBytes - 1u);
  const unsigned bars = base + STAGES * STAGE;
  const auto full = [&](int s) { return bars + 8u * s; };
  const auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

  griddep_wait();
  const int tid = threadIdx.x;
  const int padded_rows = *args.padded_rows;
  const int kdim = args.kdim;
  const int k_tiles = (kdim + KT - 1) / KT;
  const int gx = args.max_blocks, gy = (args.n + BLOCK_N - 1) / BLOCK_N;
  const int tiles = gx * gy;
  // The next tile this CTA computes from `tile` on (tiles when none): the same for every role.
  const auto next_tile = [&](int tile, int& block, int& col_block, int& expert) {
    for (; tile < tiles; tile += gridDim.x) {
      moe::gemm_tile_of<GROUP_M>(tile, gx, gy, block, col_block);
      if (block * BLOCK_M >= padded_rows) continue;
      expert = args.block_expert[block];
      if (expert >= 0) return tile;
    }
    return tiles;
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(full(s), GATED ? 1 + wgrp::kWarpgroupThreads : 1);
      mbar::init(empty(s), 4 * CONSUMERS);
    }
    mbar::fence_init();
    tma::prefetch_map(&wargs.w_map);
    tma::prefetch_map(&wargs.a_map);
  }
  __syncthreads();

  int block = 0, col_block = 0, expert = 0;
  if (wgrp::warpgroup_index() == 0) {
    // ---- producer: per tile, the row table, then its k-tiles into the ring ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_dec<moe::WsRegisters<CONSUMERS>::PRODUCER>();
    const T* x = static_cast<const T*>(args.a);
    int it = 0, iter = 0;
    for (int tile = next_tile(blockIdx.x, block, col_block, expert); tile < tiles;
         tile = next_tile(tile + gridDim.x, block, col_block, expert), ++iter) {
      const int buf = iter & 1;
      const int m0 = block * BLOCK_M, n0 = col_block * BLOCK_N;
      if (iter >= 2) wgrp::bar_sync(moe::kWsTableFree + buf, THREADS);
      const int pair = tid < BLOCK_M ? args.sorted_pairs[m0 + tid] : -1;
      const bool real = pair >= 0 && pair < args.pairs;
      if (tid < BLOCK_M) {
        if constexpr (GATED) {
          s_src[buf][tid] = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : -1;
          s_dst[buf][tid] = real ? m0 + tid : -1;
        } else {
          s_dst[buf][tid] = real ? pair : -1;
          s_scale[buf][tid] = real ? args.topk_weights[pair] : 0.f;
        }
      }
      // Real rows are a prefix: their count is the live row count.
      const unsigned votes = __ballot_sync(0xffffffffu, real);
      if ((tid & 31) == 0) s_count[buf][tid >> 5] = __popc(votes);
      wgrp::bar_sync(moe::kWsProducer, wgrp::kWarpgroupThreads);
      const int live = s_count[buf][0] + s_count[buf][1] + s_count[buf][2] + s_count[buf][3];
      if (tid == 0) s_live[buf] = live;
      wgrp::bar_arrive(moe::kWsTableFull + buf, THREADS);
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        const unsigned phase = (it / STAGES) & 1u;
        if (it >= STAGES) mbar::wait_parity(empty(s), phase ^ 1u);
        const unsigned sa = base + s * STAGE;
        if (tid == 0) {
          mbar::arrive_expect_tx(full(s), GATED ? NB * W_BYTES : STAGE);
          const unsigned sb = sa + A_BYTES;
          if constexpr (GATED) {
            tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, 0, expert);
            tma::load(sb + W_BYTES, &wargs.w_map, full(s), kt * KT, n0, 1, expert);
          } else {
            tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, expert);
            tma::load(sa, &wargs.a_map, full(s), kt * KT, m0);
          }
        }
        if constexpr (GATED) {
          moe::ws_gather_rows<T, BLOCK_M>(sa, x, s_src[buf], live, kdim, kt * KT, tid);
          mbar::cp_async_arrive_noinc(full(s));
        }
      }
    }
    // The consumers' last "read" arrivals, so that no barrier is left mid-phase.
    for (int i = iter >= 2 ? iter - 2 : 0; i < iter; ++i)
      wgrp::bar_sync(moe::kWsTableFree + (i & 1), THREADS);
    griddep_launch_dependents();
  } else {
    // ---- consumers: per tile, the k-tiles from the ring, then the epilogue ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_inc<moe::WsRegisters<CONSUMERS>::CONSUMER>();
    const int c = wgrp::warpgroup_index() - 1;
    const int gtid = wgrp::thread_in_warpgroup();
    const int lane = tid & 31;
    const unsigned a_off = c * 64 * PITCH;
    const auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) mbar::arrive(empty(s));
    };
    float acc[NB][REGS];
    int it = 0, iter = 0;
    for (int tile = next_tile(blockIdx.x, block, col_block, expert); tile < tiles;
         tile = next_tile(tile + gridDim.x, block, col_block, expert), ++iter) {
      const int buf = iter & 1;
      wgrp::bar_sync(moe::kWsTableFull + buf, THREADS);
      // Warp-uniform by construction (the shuffle), so that ptxas keeps the wgmmas batched.
      const bool mma = __shfl_sync(0xffffffffu, s_live[buf], 0) > c * 64;
      if (mma) {
#pragma unroll
        for (int b = 0; b < NB; ++b)
#pragma unroll
          for (int i = 0; i < REGS; ++i) acc[b][i] = 0.f;
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar::wait_parity(full(s), (it / STAGES) & 1u);
          moe::ws_issue<T, BLOCK_N, NB, GATED>(acc, base + s * STAGE, a_off, A_BYTES, W_BYTES,
                                               false);
          wg::wait<1>();
#pragma unroll
          for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
          if (prev >= 0) release(prev);
          prev = s;
        }
        wg::wait<0>();
#pragma unroll
        for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
        release(prev);
        moe::sm90_store<T, BLOCK_N, GATED>(acc, static_cast<T*>(args.out), args.n,
                                           col_block * BLOCK_N, c * 64, gtid, s_dst[buf],
                                           s_scale[buf]);
      } else {
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar::wait_parity(full(s), (it / STAGES) & 1u);
          release(s);
        }
      }
      wgrp::bar_arrive(moe::kWsTableFree + buf, THREADS);
    }
    griddep_launch_dependents();
  }
#else
  __trap();  // sm_90a only: the host never plans this kernel elsewhere
#endif
}

/// moe_gemm_ws_persistent_kernel with tiles taken from a counter (persist=2): a CTA per SM
/// computes tile blockIdx.x first, then takes the next one from args.tile_counter (zeroed by the
/// op's moe_zero_kernel earlier in the same call), so that an SM that finishes early takes more
/// tiles (the fixed stride c, c + gridDim.x, ... ran 1.08-1.18x slower than one CTA per tile at
/// the median on the H100, 2026-11-25: tiles differ in cost). Tiles are numbered over the blocks
/// in use (*padded_rows / BLOCK_M) in the GROUP_M order, so every tile taken is real. The
/// producer's thread 0 requests the next tile when it starts a tile and reads the answer after
/// that tile's k-tiles, so the atomic's latency hides behind the copies; meanwhile the ring fills
/// with the next tile's first k-tiles while the consumers run the last tile's epilogue. The ring
/// and its phases run on across tiles; the tile's table (rows, live count, column block; live -1:
/// no more tiles) is double buffered by tile parity (named barriers kWsTableFull /
/// kWsTableFree), its live row count summed by the producer's warps (kWsProducer).
///
/// Its body repeats much of moe_gemm_ws_persistent_kernel's, which is kept unchanged: rows of
/// db/shipped/h200.db chose that kernel, and shipped rows keep their template hash only while
/// the machine code of their kernels stays the same (scripts/same_machine_code.py; folding both
/// into shared device functions changed its .text). Merge the two when those rows are re-tuned.
///
/// Launch: grid (min(tiles, SMs)), otherwise as moe_gemm_ws_kernel; gemm2 requests nothing
/// before griddep_wait here. args.tile_counter: an int that is zero at launch (left at the
/// number of tiles taken).
template <typename T, int BLOCK_M, int BLOCK_N, int STAGES, bool GATED, int GROUP_M = 0>
__global__ void __launch_bounds__(128 + BLOCK_M * 2, 1)
    moe_gemm_ws_dynamic_kernel(const __grid_constant__ MoeGemmWsArgs wargs) {
  static_assert(sizeof(T) == 2, "the persistent kernel takes bf16 or fp16");
  static_assert(BLOCK_M == 64 || BLOCK_M == 128,
                "BLOCK_M must be 64 or 128 (one consumer warpgroup per 64 rows)");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256,
                "BLOCK_N must be 64, 128 or 256");
  static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be 2 to 8");
  static_assert(moe_gemm_sm90_acc_regs(BLOCK_N, GATED) <= 128,
                "more than 128 fp32 accumulators per consumer thread (GATED counts gate and up)");
  static_assert(moe_gemm_ws_smem_bytes(BLOCK_M, BLOCK_N, STAGES, GATED) +
                        2 * moe_gemm_sm90_static_smem_bytes(BLOCK_M) <=
                    227 * 1024,
                "shared memory above 227 KiB");
#if KTUNE_WGMMA
  constexpr int CONSUMERS = moe_gemm_ws_consumers(BLOCK_M);
  constexpr int THREADS = 128 + BLOCK_M * 2;
  constexpr int NB = GATED ? 2 : 1;
  constexpr int REGS = BLOCK_N / 2;
  constexpr int PITCH = wg::kSw128RowBytes;
  constexpr int KT = PITCH / 2;
  constexpr unsigned A_BYTES = BLOCK_M * PITCH;
  constexpr unsigned W_BYTES = BLOCK_N * PITCH;
  constexpr unsigned STAGE = moe_gemm_ws_stage_bytes(BLOCK_M, BLOCK_N, GATED);
  const MoeGemmArgs& args = wargs.base;

  __shared__ int s_src[2][BLOCK_M];
  __shared__ int s_dst[2][BLOCK_M];
  __shared__ float s_scale[2][BLOCK_M];
  __shared__ int s_live[2];      // live rows of the tile in the table; -1: no more tiles
  __shared__ int s_col[2];       // its column block
  __shared__ int s_count[2][4];  // per producer warp, per table
  __shared__ int s_next;         // the tile after the producer's current one
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned base = (wg::smem_u32(smem) + (wg::kSw128AtomBytes - 1)) &
                        ~(wg::kSw128AtomBytes - 1u);
  const unsigned bars = base + STAGES * STAGE;
  const auto full = [&](int s) { return bars + 8u * s; };
  const auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

  griddep_wait();
  const int tid = threadIdx.x;
  const int kdim = args.kdim;
  const int k_tiles = (kdim + KT - 1) / KT;
  // Tiles over the blocks in use only: each one has rows and an expert.
  const int gx = *args.padded_rows / BLOCK_M, gy = (args.n + BLOCK_N - 1) / BLOCK_N;
  const int tiles = gx * gy;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(full(s), GATED ? 1 + wgrp::kWarpgroupThreads : 1);
      mbar::init(empty(s), 4 * CONSUMERS);
    }
    mbar::fence_init();
    tma::prefetch_map(&wargs.w_map);
    tma::prefetch_map(&wargs.a_map);
  }
  __syncthreads();

  if (wgrp::warpgroup_index() == 0) {
    // ---- producer: per tile, the row table, then its k-tiles into the ring ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_dec<moe::WsRegisters<CONSUMERS>::PRODUCER>();
    const T* x = static_cast<const T*>(args.a);
    int it = 0, iter = 0;
    for (int tile = blockIdx.x;; ++iter) {
      const int buf = iter & 1;
      if (iter >= 2) wgrp::bar_sync(moe::kWsTableFree + buf, THREADS);
      if (tile >= tiles) {
        // The consumers' end, then their last "read" arrival, so that no barrier is left
        // mid-phase.
        if (tid == 0) s_live[buf] = -1;
        wgrp::bar_arrive(moe::kWsTableFull + buf, THREADS);
        if (iter >= 1) wgrp::bar_sync(moe::kWsTableFree + (buf ^ 1), THREADS);
        break;
      }
      // The tile after this one, read after this one's k-tiles.
      int next = 0;
      if (tid == 0) next = static_cast<int>(gridDim.x) + atomicAdd(args.tile_counter, 1);
      int block, col_block;
      moe::gemm_tile_of<GROUP_M>(tile, gx, gy, block, col_block);
      const int expert = args.block_expert[block];
      const int m0 = block * BLOCK_M, n0 = col_block * BLOCK_N;
      const int pair = tid < BLOCK_M ? args.sorted_pairs[m0 + tid] : -1;
      const bool real = pair >= 0 && pair < args.pairs;
      if (tid < BLOCK_M) {
        if constexpr (GATED) {
          s_src[buf][tid] = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : -1;
          s_dst[buf][tid] = real ? m0 + tid : -1;
        } else {
          s_dst[buf][tid] = real ? pair : -1;
          s_scale[buf][tid] = real ? args.topk_weights[pair] : 0.f;
        }
      }
      // Real rows are a prefix: their count is the live row count.
      const unsigned votes = __ballot_sync(0xffffffffu, real);
      if ((tid & 31) == 0) s_count[buf][tid >> 5] = __popc(votes);
      wgrp::bar_sync(moe::kWsProducer, wgrp::kWarpgroupThreads);
      const int live = s_count[buf][0] + s_count[buf][1] + s_count[buf][2] + s_count[buf][3];
      if (tid == 0) {
        s_live[buf] = live;
        s_col[buf] = col_block;
      }
      wgrp::bar_arrive(moe::kWsTableFull + buf, THREADS);
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        const unsigned phase = (it / STAGES) & 1u;
        if (it >= STAGES) mbar::wait_parity(empty(s), phase ^ 1u);
        const unsigned sa = base + s * STAGE;
        if (tid == 0) {
          mbar::arrive_expect_tx(full(s), GATED ? NB * W_BYTES : STAGE);
          const unsigned sb = sa + A_BYTES;
          if constexpr (GATED) {
            tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, 0, expert);
            tma::load(sb + W_BYTES, &wargs.w_map, full(s), kt * KT, n0, 1, expert);
          } else {
            tma::load(sb, &wargs.w_map, full(s), kt * KT, n0, expert);
            tma::load(sa, &wargs.a_map, full(s), kt * KT, m0);
          }
        }
        if constexpr (GATED) {
          moe::ws_gather_rows<T, BLOCK_M>(sa, x, s_src[buf], live, kdim, kt * KT, tid);
          mbar::cp_async_arrive_noinc(full(s));
        }
      }
      if (tid == 0) s_next = next;
      wgrp::bar_sync(moe::kWsProducer, wgrp::kWarpgroupThreads);
      tile = s_next;
    }
    griddep_launch_dependents();
  } else {
    // ---- consumers: per tile, the k-tiles from the ring, then the epilogue ----
    if constexpr (CONSUMERS > 1) wgrp::setmaxnreg_inc<moe::WsRegisters<CONSUMERS>::CONSUMER>();
    const int c = wgrp::warpgroup_index() - 1;
    const int gtid = wgrp::thread_in_warpgroup();
    const int lane = tid & 31;
    const unsigned a_off = c * 64 * PITCH;
    const auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) mbar::arrive(empty(s));
    };
    float acc[NB][REGS];
    int it = 0;
    for (int iter = 0;; ++iter) {
      const int buf = iter & 1;
      wgrp::bar_sync(moe::kWsTableFull + buf, THREADS);
      // Warp-uniform by construction (the shuffle), so that ptxas keeps the wgmmas batched.
      const int live = __shfl_sync(0xffffffffu, s_live[buf], 0);
      if (live < 0) break;
      if (live > c * 64) {
#pragma unroll
        for (int b = 0; b < NB; ++b)
#pragma unroll
          for (int i = 0; i < REGS; ++i) acc[b][i] = 0.f;
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar::wait_parity(full(s), (it / STAGES) & 1u);
          moe::ws_issue<T, BLOCK_N, NB, GATED>(acc, base + s * STAGE, a_off, A_BYTES, W_BYTES,
                                               false);
          wg::wait<1>();
#pragma unroll
          for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
          if (prev >= 0) release(prev);
          prev = s;
        }
        wg::wait<0>();
#pragma unroll
        for (int b = 0; b < NB; ++b) wg::fence_acc(acc[b]);
        release(prev);
        moe::sm90_store<T, BLOCK_N, GATED>(acc, static_cast<T*>(args.out), args.n,
                                           s_col[buf] * BLOCK_N, c * 64, gtid, s_dst[buf],
                                           s_scale[buf]);
      } else {
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar::wait_parity(full(s), (it / STAGES) & 1u);
          release(s);
        }
      }
      wgrp::bar_arrive(moe::kWsTableFree + buf, THREADS);
    }
    griddep_launch_dependents();
  }
#else
  __trap();  // sm_90a only: the host never plans this kernel elsewhere
#endif
}

}  // namespace ktune
