// Asks L2 for the w1 tiles gemm1 takes first, while routing and alignment run (the op's
// l2_warm > 0, sm_90): DRAM is idle for the ~5-10 us before gemm1 knows its rows, and at small T
// the MoE call is a stream of expert weights, so those bytes then come from L2.
//
// The kernel runs first in the call, before routing: which expert each of gemm1's row blocks
// holds is not known yet. It assumes `blocks_per_expert` row blocks per expert in expert order
// (as alignment lays them out when every expert gets about t * k / e rows), maps gemm1's first
// `tiles` tiles through gemm1's own order (moe::gemm_tile_of<GROUP_M>, gx x gy) to (expert,
// column block) and prefetches each tile's gate rows (w1[e, n0 .. n0 + bn)) and up rows
// (w1[e, I + n0 ..)) with cp.async.bulk.prefetch.L2 in pieces of kMoeWarmPiece bytes. A wrong
// guess costs DRAM time that was idle and L2 lines nothing else holds; the results never depend
// on it (a prefetch is a hint, nothing is written). The tuner measures whether it pays.
#pragma once

#if defined(__CUDACC__)
#include "common/pdl.cuh"
#include "moe/tile_order.cuh"
#endif

namespace ktune {

struct MoeWarmArgs {
  const unsigned char* w;  // w1 [E, 2I, H] (any element type; byte offsets below)
  long long total_bytes;   // bytes of w1
  long long row_bytes;     // bytes of one w1 row (H elements)
  int experts;             // E
  int n;                   // I: gate rows, then as many up rows, per expert
  int bn;                  // gemm1's columns per tile (bn1)
  int gx, gy;              // gemm1's grid of tiles: row blocks (upper bound), column blocks
  int blocks_per_expert;   // row blocks assumed per expert (at least 1)
  int tiles;               // gemm1 tiles to warm, in its order
};

/// Threads of moe_warm_kernel (one block) and the bytes one prefetch instruction asks for.
constexpr int kMoeWarmThreads = 256;
constexpr int kMoeWarmPiece = 32 * 1024;

#if defined(__CUDACC__)

template <int GROUP_M>
__global__ void __launch_bounds__(kMoeWarmThreads) moe_warm_kernel(const MoeWarmArgs args) {
  // The op's first kernel: it reads nothing another kernel of the call writes, so its
  // dependents (routing) may start at once.
  griddep_wait();
  griddep_launch_dependents();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const long long rows_bytes = static_cast<long long>(args.bn) * args.row_bytes;
  const int pieces = static_cast<int>((rows_bytes + kMoeWarmPiece - 1) / kMoeWarmPiece);
  const long long end_all = args.total_bytes & ~15ll;
  // Item = (tile, gate or up, piece), tile-major: the first tiles are asked for first.
  const int items = args.tiles * 2 * pieces;
  for (int item = static_cast<int>(threadIdx.x); item < items; item += kMoeWarmThreads) {
    const int tile = item / (2 * pieces);
    const int half = item / pieces % 2;
    const int piece = item % pieces;
    int block, col_block;
    moe::gemm_tile_of<GROUP_M>(tile, args.gx, args.gy, block, col_block);
    const int expert = block / args.blocks_per_expert;
    const int n0 = col_block * args.bn;
    if (expert >= args.experts || n0 >= args.n) continue;
    const int rows = args.n - n0 < args.bn ? args.n - n0 : args.bn;
    const long long first = (static_cast<long long>(expert) * 2 * args.n +
                             static_cast<long long>(half) * args.n + n0) * args.row_bytes;
    long long begin = first + static_cast<long long>(piece) * kMoeWarmPiece;
    long long end = first + static_cast<long long>(rows) * args.row_bytes;
    if (begin >= end) continue;
    if (end > begin + kMoeWarmPiece) end = begin + kMoeWarmPiece;
    // 16-byte bounds (e4m3 rows may start at 8): round outwards, inside w1.
    begin &= ~15ll;
    end = (end + 15) & ~15ll;
    if (end > end_all) end = end_all;
    if (end <= begin) continue;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(args.w + begin),
                 "r"(static_cast<unsigned>(end - begin))
                 : "memory");
  }
#endif
}

#endif  // __CUDACC__

}  // namespace ktune
