// The alignment an expert-grid GEMM CTA does for itself (moe_gemm_kernel's EXPERT_GRID): the CTA
// knows its expert from its launch index, reads every pair's expert id, and finds what the align
// kernels (moe/align.cuh) would have written for that expert: the expert's first row in the
// padded layout (the padded counts of the experts below it), its pair count, and the pairs of
// one row block, in increasing pair index (the align kernels' stable order, so act's rows are
// the same rows either way). No align kernel runs before the GEMMs, and no CTA waits for
// another: each one reads the ids (4 bytes a pair, in L2) while its first weight tiles stream.
#pragma once

#include "moe/args.h"
#include "moe/gemm_args.h"

namespace ktune {
namespace moe {

/// An expert's place in the padded layout: its first row and its pair count.
struct OwnRows {
  int start;
  int count;
};

/// Block-wide (every thread calls it; it synchronises the block): the pairs of `expert` with
/// ranks first .. first + BLOCK_M - 1 among that expert's pairs into window[0 .. BLOCK_M) (-1
/// past the last), in increasing pair index. COUNT: also the expert's start and count (a pass
/// over every pair, counting the ids below `expert` into hist); otherwise the pass stops once
/// the window is full and the result is {0, 0}. Ids outside 0..E-1 belong to no expert, as in
/// the align kernels.
///
/// Scratch (shared, moe_gemm_own_smem_bytes): hist [kMoeOwnMaxExperts], window [BLOCK_M],
/// cnt [kMoeOwnPairsPerThread * WARPS + 1]. Pass p reads pairs p * THREADS * V + j * THREADS
/// + tid (coalesced, through L2: the route kernel wrote them), so pair order is (j, warp, lane)
/// order and a pair's rank is the matches before it in that order: the running count, the
/// per-(j, warp) ballot counts of the pass before it, and its lane's ballot bits below it.
template <int THREADS, int BLOCK_M, bool COUNT>
__device__ OwnRows own_rows(const MoeGemmArgs& args, int expert, int first, int* scratch) {
  constexpr int V = kMoeOwnPairsPerThread;
  constexpr int WARPS = THREADS / 32;
  int* const hist = scratch;
  int* const window = hist + kMoeOwnMaxExperts;
  int* const cnt = window + BLOCK_M;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const unsigned below = (1u << lane) - 1u;
  for (int i = tid; i < BLOCK_M; i += THREADS) window[i] = -1;
  if constexpr (COUNT)
    for (int e = tid; e < expert; e += THREADS) hist[e] = 0;
  __syncthreads();
  int running = 0;  // matches in the passes so far (block-uniform)
  for (int base = 0; base < args.pairs; base += THREADS * V) {
    int id[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int p = base + j * THREADS + tid;
      id[j] = p < args.pairs ? __ldcg(args.topk_ids + p) : -1;
    }
    unsigned ballot[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      ballot[j] = __ballot_sync(0xffffffffu, id[j] == expert);
      if (COUNT && static_cast<unsigned>(id[j]) < static_cast<unsigned>(expert))
        atomicAdd(&hist[id[j]], 1);
    }
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < V; ++j) cnt[j * WARPS + warp] = __popc(ballot[j]);
    __syncthreads();
    int run = running;
#pragma unroll
    for (int j = 0; j < V; ++j)
      for (int w = 0; w < WARPS; ++w) {
        if (w == warp && id[j] == expert) {
          const int r = run + __popc(ballot[j] & below) - first;
          if (r >= 0 && r < BLOCK_M) window[r] = base + j * THREADS + tid;
        }
        run += cnt[j * WARPS + w];
      }
    running = run;
    __syncthreads();  // cnt is rewritten by the next pass
    if (!COUNT && running >= first + BLOCK_M) break;
  }
  if constexpr (!COUNT) return {0, 0};
  // The expert's start: the padded counts of the experts below it (hist holds only those).
  if (warp == 0) {
    int sum = 0;
    for (int e = lane; e < expert; e += 32) sum += (hist[e] + BLOCK_M - 1) / BLOCK_M * BLOCK_M;
#pragma unroll
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (lane == 0) cnt[V * WARPS] = sum;
  }
  __syncthreads();
  const OwnRows out{cnt[V * WARPS], running};
  __syncthreads();  // cnt is scratch again for the caller's next call
  return out;
}

/// own_rows' window of a later row block (first = rb * BLOCK_M), out of line: the expert-grid
/// kernel calls it in its row-block loop, where an inlined copy keeps the main loop's addresses
/// live across the epilogue (moe_gemm_kernel, request_weights_out_of_line).
template <int THREADS, int BLOCK_M>
__device__ __noinline__ void own_rows_out_of_line(const MoeGemmArgs& args, int expert, int first,
                                                  int* scratch) {
  own_rows<THREADS, BLOCK_M, false>(args, expert, first, scratch);
}

}  // namespace moe
}  // namespace ktune
