// The order in which the grouped GEMMs take their (row block, column block) tiles: one map from
// a tile's launch index, shared by the GEMM kernels (moe/gemm*.cuh) and by the L2 warm-up kernel
// (moe/warm.cuh), which asks L2 for the weights of the tiles gemm1 takes first.
#pragma once

namespace ktune {
namespace moe {

/// Tile `id` of a gx x gy grid of (row block, column block) tiles: launch order (id = col_block
/// * gx + block), or with GROUP_M > 0 renumbered group by group (GROUP_M row blocks run through
/// every column block, their weights shared in L2). The last group holds the remaining
/// gx % GROUP_M row blocks (or GROUP_M), so the map is one to one.
template <int GROUP_M>
__device__ __forceinline__ void gemm_tile_of(int id, int gx, int gy, int& block, int& col_block) {
  if constexpr (GROUP_M == 0) {
    block = id % gx;
    col_block = id / gx;
  } else {
    const int per_group = GROUP_M * gy;
    const int group = id / per_group;
    const int first = group * GROUP_M;
    const int size = gx - first < GROUP_M ? gx - first : GROUP_M;
    const int in = id - group * per_group;
    block = first + in % size;
    col_block = in / size;
  }
}

}  // namespace moe
}  // namespace ktune
