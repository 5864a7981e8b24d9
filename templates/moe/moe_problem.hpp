// The MoE layer op's problem and tunables on the host: dims and parameters by index, the shape a
// problem describes and the configuration a parameter point names (moe_op.cpp and its parts,
// moe_parts.hpp; moe_defaults.cpp).
#pragma once

#include <algorithm>
#include <cstddef>

#include "templates/moe/args.h"
#include "templates/op.hpp"

namespace ktune::moe {

enum Dim : std::size_t { kE, kK, kH, kI, kT, kRouting, kNGroup, kTopkGroup };
enum Param : std::size_t {
  kBlockM,
  kBn1, kBk1, kWarps1, kWarpsM1, kStages1, kGroup1, kPrefetch1, kEpi1, kImpl1,
  kBn2, kBk2, kWarps2, kWarpsM2, kStages2, kGroup2, kPrefetch2, kEpi2, kImpl2,
  kAlignChunk, kRouteLanes, kRouteVec, kCombineVec, kSplit2, kPersist1, kPersist2, kFuseRoute,
  kCluster1, kCluster2, kGather1
};

struct Shape {
  int e, k, h, i, t, routing, n_group, topk_group;
  bool expert_choice() const { return routing == moe_expert_choice; }
  /// expert_choice: tokens per expert.
  int capacity() const { return moe_expert_capacity(t, k, e); }
  /// (token, expert) pairs: T * k, or E * C with expert_choice.
  long long pairs() const {
    return expert_choice() ? static_cast<long long>(e) * capacity() : static_cast<long long>(t) * k;
  }
  /// Router logits in, ids and weights out (optional outputs).
  bool routed() const { return routing != moe_precomputed; }
  /// The route kernel and the aux loss: the top-k modes with logits.
  bool route_kernel() const { return routed() && !expert_choice(); }
  /// A combine kernel sums pairs into y (top-k with k = 1: gemm2 writes y itself).
  bool combines() const { return k > 1 || expert_choice(); }
  /// Mean rows an expert receives: T * k pairs over the min(e, T * k) experts they can reach.
  long long mean_rows() const {
    const long long used = std::min<long long>(e, pairs());
    return (pairs() + used - 1) / used;
  }
};

inline Shape shape_of(const Problem& p) {
  const auto at = [&](Dim d) { return static_cast<int>(p.values[d]); };
  return {at(kE), at(kK), at(kH), at(kI), at(kT), at(kRouting), at(kNGroup), at(kTopkGroup)};
}

/// One grouped GEMM's tunables (moe_gemm_kernel's template arguments after BLOCK_M).
struct GemmTile {
  int bn, bk, warps, warps_m, stages;
  int group_m;   // CTA order: 0 launch order, else groups of group_m row blocks
  int prefetch;  // L2 prefetch bytes of weight loads (0, 256)
  int epi;       // 1: the output tile goes through shared memory, 16-byte stores
  int impl;      // 0: moe_gemm_kernel (mma.sync); 1: moe_gemm_sm90_kernel (wgmma, sm_90a);
                 // 2: moe_gemm_ws_kernel (warp-specialised wgmma + TMA, sm_90a)
  int persist = 0;  // impl 2: a CTA per SM looping over tiles: 1 = moe_gemm_ws_persistent_kernel
                    // (a fixed stride), 2 = moe_gemm_ws_dynamic_kernel (tiles from a counter)
  int cluster = 1;  // impl 2, persist 0: CTAs per cluster (2: pairs along x share the weight
                    // tile; 3: pairs along y, two column blocks of a row block, share the act
                    // tile)
  int gather = 0;   // gemm1, impl 2: 2 = its rows gathered into sorted order by a kernel first
                    // (moe_ws_gather_sorted; gather1); 0 for gemm2
};

struct Config {
  int block_m;
  GemmTile g1, g2;
  int align_chunk;  // 0: one-block align kernel
  int route_lanes, route_vec, combine_vec;
  int split2;  // gemm2 split-k: > 1 writes fp32 partial sums that the combine adds
  int fuse_route;  // 1: route and align in one block (moe_route_align_kernel); 2: in the
                   // route kernel's grid, meeting at a barrier (moe_route_sort_kernel)
  bool fp8;    // dtype e4m3: FP8 weights; x and act quantised per row before each GEMM
  int eb() const { return fp8 ? 1 : 2; }  // bytes of a GEMM operand element
};

inline Config config_of(const Params& p, DType t) {
  const auto at = [&](Param i) { return static_cast<int>(p.values[i]); };
  return {at(kBlockM),
          {at(kBn1), at(kBk1), at(kWarps1), at(kWarpsM1), at(kStages1), at(kGroup1), at(kPrefetch1),
           at(kEpi1), at(kImpl1), at(kPersist1), at(kCluster1), at(kGather1)},
          {at(kBn2), at(kBk2), at(kWarps2), at(kWarpsM2), at(kStages2), at(kGroup2), at(kPrefetch2),
           at(kEpi2), at(kImpl2), at(kPersist2), at(kCluster2)},
          at(kAlignChunk), at(kRouteLanes), at(kRouteVec), at(kCombineVec), at(kSplit2),
          at(kFuseRoute), t == DType::e4m3};
}

/// gemm2's split-k is searched up to this many rows per expert on average (t * k / e).
constexpr long long kSplitMaxRows = 128;

}  // namespace ktune::moe
