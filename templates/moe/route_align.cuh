// Routing and alignment in one kernel of one block, for small T * k (the op's fuse_route = 1):
// the same outputs, bit for bit, as moe_route_kernel followed by moe_align_kernel, without the
// second launch and without the ids' round trip through global memory.
//
// The block routes THREADS / LANES tokens at a time (moe::RoutedToken, as moe_route_kernel does
// per block) until all T are done, writing the weights (and the ids where args.route.topk_ids is
// set) to global memory and every pair's id to shared memory as 16 bits; with the aux loss, the
// fixed-point sums stay in shared memory and one warp writes the loss (no scratch, no ticket).
// Then moe::align_block aligns the pairs from shared memory, a warp per 128 pairs as
// moe_align_kernel is sized (4 to THREADS / 32 warps).
//
// Template parameters: as moe_route_kernel's (moe/route.cuh), THREADS at least 128 (the align
// phase's block) and THREADS * ITEMS * VEC <= kMoeRouteMaxScores for every routing mode (the
// host takes moe_route_align_threads(ITEMS * VEC, E)): at 1024 threads up to 8 scores per
// thread, within the 64 registers a thread may use there. The launch bounds say one block per SM
// (without that, ptxas aimed at several and spilled). Shared memory (static, < 48 KiB): the ids
// (8 KiB), the sigmoid scratch or, after routing, the align warps' offsets (<= 32 KiB), the
// expert totals and starts, and the aux sums. EMAX (moe_emax(E), 256 or 512) sizes the
// per-expert arrays; at 512 the block has at most kMoeRouteAlignWideThreads threads, so the
// offsets take at most 16 KiB and the per-expert arrays 10 KiB.
// T <= kMoeFuseMaxTokens and T * k <= kMoeFuseMaxPairs: the host checks them.
#pragma once

#include "moe/align.cuh"
#include "moe/route.cuh"

namespace ktune {

#if defined(__CUDACC__)

template <int ROUTING, int THREADS, int LANES, int VEC, int ITEMS, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS, 1)
    moe_route_align_kernel(const __grid_constant__ MoeRouteAlignArgs args) {
  // The op's first kernel (its launch waits for the caller's work), or launched
  // programmatically: a no-op then (common/pdl.cuh). One block: gemm1 may be scheduled at once,
  // its prologue overlapping this block.
  griddep_wait();
  griddep_launch_dependents();
  moe::check_route<ROUTING, THREADS, LANES, VEC, ITEMS, EMAX>();
  static_assert(THREADS >= 128, "THREADS must be at least 128 (the align phase's block)");
  static_assert(THREADS * ITEMS * VEC <= kMoeRouteMaxScores,
                "THREADS * ITEMS * VEC must be at most 8192 (registers at 1024 threads)");
  static_assert(EMAX == kMoeEmax || THREADS <= kMoeRouteAlignWideThreads,
                "at EMAX 512 THREADS must be at most 256: the align warps' offsets [THREADS / "
                "32][512] beside the ids and the per-expert arrays in 48 KiB");
  using Token = moe::RoutedToken<ROUTING, LANES, VEC, ITEMS>;
  constexpr int TOKENS = THREADS / LANES;  // tokens routed at a time
  constexpr int WARPS = THREADS / 32;
  const MoeRouteArgs& route = args.route;
  const int T = route.tokens;
  const int E = route.experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int group = tid / LANES;

  __shared__ short ids[kMoeFuseMaxPairs];
  __shared__ union {
    float scratch[Token::kSigmoid ? THREADS * Token::N : 1];  // routing: the sigmoid scratch
    int offset[WARPS][EMAX];                                  // then the align warps' rows
  } pool;
  __shared__ int total[EMAX];
  __shared__ int start[EMAX + 1];
  __shared__ unsigned long long aux_p[EMAX];
  __shared__ unsigned aux_count[EMAX];

  const bool aux = route.aux_loss != nullptr;
  if (aux) {
    for (int e = tid; e < E; e += THREADS) {
      aux_p[e] = 0;
      aux_count[e] = 0;
    }
    __syncthreads();
  }
  // Every group runs every pass (a warp's shuffles need all its lanes); tokens past T store
  // nothing.
  float* scratch = pool.scratch + group * Token::kScratch;
  for (int t0 = 0; t0 < T; t0 += TOKENS) {
    const int t = t0 + group;
    const bool live = t < T;
    Token token;
    token.route(route, t, live, scratch);
    if (live) {
      token.store(route, t, ids);
      if (aux) token.add_aux(route, aux_p, aux_count);
    }
  }
  __syncthreads();
  if (aux && tid < 32)
    moe::write_aux_loss(route, [&](int e) {
      return moe::AuxSums{static_cast<unsigned long long>(aux_count[e]), aux_p[e]};
    });
  const int pairs = args.align.pairs;
  const int need = (pairs + 127) / 128;
  const int warps = need < 4 ? 4 : need < WARPS ? need : WARPS;
  moe::align_block<THREADS, EMAX>(args.align, moe::SharedIds{ids}, pool.offset, total, start,
                                  warps);
}

#endif  // __CUDACC__

}  // namespace ktune
