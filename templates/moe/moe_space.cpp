// Why a point of the MoE layer's space cannot be instantiated (the kernels' own limits, the
// tunables each kernel ignores, the routing modes' constraints) or can never win (tiles larger
// than the rows or columns they cover, split-k where the row blocks fill the GPU), without a
// device: one reason per point, naming its values.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "templates/moe/gemm_args.h"
#include "templates/moe/gemm_sm90_args.h"
#include "templates/moe/moe_defaults.hpp"
#include "templates/moe/moe_parts.hpp"

namespace ktune::moe {

std::optional<std::string> config_reason(const Config& c, const Shape& s,
                                         const std::vector<Tunable>& tunables) {
  // The one value searched where a tunable has no effect.
  const auto first = [&](Param p) { return tunables[p].values.front(); };
  if (c.fp8) {
    if (const char* why = moe_gemm_shape_invalid_reason(s.h, s.i, 1))
      return "h=" + str(s.h) + ", i=" + str(s.i) + ": " + why +
             " (GEMM rows are read in 16-byte chunks)";
    for (const bool gated : {true, false})
      if ((gated ? c.g1 : c.g2).impl == 1)
        return std::string(gated ? "impl1" : "impl2") +
               "=1: e4m3 (FP8) GEMMs run on the mma.sync kernel (impl 0) or the "
               "warp-specialised one (impl 2); the cp.async wgmma kernel takes bf16 and fp16";
  }
  // gather1=2: the warp-specialised gemm1's one-tile-per-CTA kernel on 16-bit rows gathered
  // into sorted order (moe/gather_rows.cuh), not in pairs sharing the weight tile (cluster1=2:
  // built for gemm1's own gather only).
  if (c.g1.gather != 0 &&
      (c.g1.impl != 2 || c.g1.persist != 0 || c.fp8 || c.g1.cluster == 2))
    return "gather1=" + str(c.g1.gather) + " (x's rows gathered into sorted order for the "
           "warp-specialised gemm1) takes impl1=2, persist1=0, bf16 or fp16 and cluster1 1 or "
           "3: impl1=" + str(c.g1.impl) + ", persist1=" + str(c.g1.persist) + ", cluster1=" +
           str(c.g1.cluster) + (c.fp8 ? ", e4m3" : "");
  if (c.g1.cluster == 3 && c.g1.gather != moe_ws_gather_sorted)
    return "cluster1=3 shares gemm1's act tile, one TMA box a k-tile, between two column "
           "blocks: it reads x's rows gathered into sorted order (gather1=2), not gather1=" +
           str(c.g1.gather);
  // The kernel's own reasons, one line per reason (the point's values are in its key).
  for (const bool gated : {true, false}) {
    const GemmTile& g = gated ? c.g1 : c.g2;
    if (g.persist && g.impl != 2)
      return std::string(gated ? "persist1=" : "persist2=") + str(g.persist) +
             " is the warp-specialised " +
             "kernel's (impl" + (gated ? "1" : "2") + "=2); only 0 is searched with impl" +
             (gated ? "1=" : "2=") + str(g.impl);
    if (g.cluster > 1 && g.impl != 2)
      return std::string(gated ? "cluster1=" : "cluster2=") + str(g.cluster) +
             " is the warp-specialised kernel's (impl" + (gated ? "1" : "2") +
             "=2); only 1 is searched with impl" + (gated ? "1=" : "2=") + str(g.impl);
    if (g.impl == 2) {
      // The warp-specialised kernel: a producer warpgroup plus one consumer warpgroup per 64
      // rows (its warps tunable counts the consumers' warps), k step 64, its own ring.
      const std::string n = gated ? "1" : "2";
      const std::string name = "impl" + n + "=2";
      if (c.block_m != 64 && c.block_m != 128 && c.block_m != 192)
        return name + " (warp-specialised wgmma) takes block_m 64, 128 or 192, not " +
               str(c.block_m);
      if (c.block_m == 192 && (g.persist || g.cluster > 1 || c.fp8))
        return name + " at block_m=192 (three consumer warpgroups) runs one 16-bit tile per "
               "CTA: persist" + n + "=0, cluster" + n + "=1, bf16 or fp16 (persist" + n + "=" +
               str(g.persist) + ", cluster" + n + "=" + str(g.cluster) +
               (c.fp8 ? ", e4m3)" : ")");
      if (g.warps != c.block_m / 16)
        return name + " runs one consumer warpgroup per 64 rows (plus a producer warpgroup): "
               "warps" + n + "=" + str(c.block_m / 16) + " at block_m=" + str(c.block_m) +
               ", not " + str(g.warps);
      if (g.warps_m != 1 || g.prefetch != 0 || g.epi != 0)
        return name + " ignores warps_m" + n + ", prefetch" + n + " and epi" + n +
               ": only warps_m" + n + "=1, prefetch" + n + "=0, epi" + n + "=0 are searched";
      if (g.persist && c.fp8)
        return "persist" + n + "=" + str(g.persist) + " runs 16-bit GEMMs (e4m3 takes persist" +
               n + "=0)";
      if (g.cluster > 1 && g.persist)
        return "cluster" + n + "=" + str(g.cluster) + " pairs the CTAs of the one-tile-per-CTA "
               "grid (persist" + n + "=0), not persist" + n + "=" + str(g.persist);
      if (g.cluster == 3 && c.fp8)
        return "cluster" + n + "=3 (pairs along the columns sharing the act tile) is checked on "
               "16-bit GEMMs only (benchmarks/moe/gemm_ws_dev.cu): bf16 or fp16, not e4m3";
      if (gated && c.fp8 && g.bn > 64)
        return name + " with e4m3 weights adds each k-tile's products into fp32 accumulators "
               "(the FP8 wgmma's own accumulation is coarser than the reference's), which "
               "doubles gemm1's accumulator registers: bn1 at most 64, not " + str(g.bn);
      if (g.bk != 128 / c.eb())
        return name + " reads k-tiles of one 128-byte swizzled row per TMA box (64 bf16 or "
               "fp16, 128 e4m3): bk" + n + "=" + str(128 / c.eb()) + ", not " + str(g.bk);
      if (const char* why = moe_gemm_ws_invalid_reason(c.block_m, g.bn, g.stages, gated,
                                                       g.group_m, ws_gather(g)))
        return std::string(gated ? "gemm1" : "gemm2") + " warp-specialised tile: " + why;
      continue;
    }
    if (g.impl == 1) {
      // The wgmma kernel's shape: one warpgroup per 64 rows, k step 64, its own pipeline; the
      // mma.sync-only tunables stay at one value so that no point is timed twice.
      const char* name = gated ? "impl1=1" : "impl2=1";
      const std::string n = gated ? "1" : "2";
      if (c.block_m != 64 && c.block_m != 128)
        return std::string(name) + " (wgmma) takes block_m 64 or 128, not " + str(c.block_m);
      if (g.warps != c.block_m / 16)
        return std::string(name) + " runs one warpgroup per 64 rows: warps" + n + "=" +
               str(c.block_m / 16) + " at block_m=" + str(c.block_m) + ", not " + str(g.warps);
      if (g.warps_m != 1 || g.prefetch != 0 || g.epi != 0)
        return std::string(name) + " ignores warps_m" + n + ", prefetch" + n + " and epi" + n +
               ": only warps_m" + n + "=1, prefetch" + n + "=0, epi" + n + "=0 are searched";
      if (const char* why = moe_gemm_sm90_invalid_reason(c.block_m, g.bn, g.bk, g.stages, gated,
                                                         g.group_m))
        return std::string(gated ? "gemm1" : "gemm2") + " wgmma tile: " + why;
      continue;
    }
    if (const char* why = moe_gemm_invalid_reason(c.block_m, g.bn, g.bk, g.warps, g.warps_m,
                                                  g.stages, gated, g.group_m, g.prefetch, 1,
                                                  g.epi, c.eb()))
      return std::string(gated ? "gemm1" : "gemm2") + " tile: " + why;
  }
  if (c.split2 > 1) {
    // Split-k: the mma.sync kernel's fragment epilogue writes the fp32 partial sums, and the
    // top-k combine adds them.
    if (c.g2.impl != 0 || c.g2.epi != 0)
      return "split2=" + str(c.split2) + " is the mma.sync gemm2's (impl2=0) with fragment "
             "stores (epi2=0): impl2=" + str(c.g2.impl) + ", epi2=" + str(c.g2.epi);
    if (s.expert_choice())
      return "split2=" + str(c.split2) + " with routing=expert_choice: its combine adds "
             "16-bit pair outputs in expert order; only split2=1 is searched";
    const long long k_tiles = (s.i + c.g2.bk - 1) / c.g2.bk;
    if (2LL * c.split2 > k_tiles)
      return "split2=" + str(c.split2) + " leaves fewer than 2 of the " + str(k_tiles) +
             " k-tiles (i=" + str(s.i) + " / bk2=" + str(c.g2.bk) + ") per split";
  }
  if (has_combine(c, s)) {
    if (const char* why = moe_combine_invalid_reason(kCombineThreads, c.combine_vec, s.h))
      return "combine_vec=" + str(c.combine_vec) + " at h=" + str(s.h) + ": " + why;
  } else if (c.combine_vec != first(kCombineVec)) {
    return "combine_vec has no effect at k=1 without split2 (gemm2 writes y, no combine "
           "kernel): only combine_vec=" + str(first(kCombineVec)) + " is searched";
  }
  if (s.route_kernel()) {
    if (s.e % c.route_vec != 0)
      return "route_vec=" + str(c.route_vec) + " needs e % route_vec == 0 (whole vector loads "
             "of a logits row); e=" + str(s.e);
    const int per_thread = route_items(c, s) * c.route_vec;
    const int limit = s.routing == moe_sigmoid_group ? 32 : 64;
    if (per_thread > limit)
      return "route_lanes=" + str(c.route_lanes) + " leaves " + str(per_thread) +
             " scores per thread at e=" + str(s.e) + "; the route kernel keeps at most " +
             str(limit) + " in registers" +
             (s.routing == moe_sigmoid_group ? " (sigmoid_group keeps two per expert)" : "");
    if (s.routing == moe_sigmoid_group && kRouteThreads * per_thread > kMoeRouteMaxScores)
      return "sigmoid_group keeps a float of shared memory per score of every token in a "
             "route block: at most " + str(kMoeRouteMaxScores) + " (" + str(kRouteThreads) +
             " threads x " + str(per_thread) + " scores)";
    if (c.fuse_route == 1 && (s.t > kMoeFuseMaxTokens || s.pairs() > kMoeFuseMaxPairs))
      return "fuse_route=1 routes every token and aligns every pair in one block: at most " +
             str(kMoeFuseMaxTokens) + " tokens and " + str(kMoeFuseMaxPairs) +
             " pairs (t=" + str(s.t) + ", t*k=" + str(s.pairs()) + ")";
    if (c.fuse_route == 2) {
      const int blocks = route_blocks(c, s);
      if (blocks > kMoeSortMaxBlocks)
        return "fuse_route=2 meets its route blocks at a barrier, all resident at once: at "
               "most " + str(kMoeSortMaxBlocks) + " blocks of " +
               str(kRouteThreads / c.route_lanes) + " tokens (route_lanes=" +
               str(c.route_lanes) + "), not " + str(blocks) + " (t=" + str(s.t) + ")";
      if (static_cast<long long>(blocks) * s.e > kMoeSortMaxTable)
        return "fuse_route=2: every block reads every block's expert counts, at most " +
               str(kMoeSortMaxTable) + " (" + str(blocks) + " blocks x e=" + str(s.e) + ")";
    }
    if (c.fuse_route && c.align_chunk > 0)
      return "fuse_route=" + str(c.fuse_route) + " aligns the pairs inside its " +
             (c.fuse_route == 1 ? "one block (the one-block align path)" : "route blocks") +
             ": only align_chunk=0 is searched with it, not " + str(c.align_chunk);
  } else if (c.fuse_route) {
    return "fuse_route=" + str(c.fuse_route) + " has no effect with routing=" +
           (s.expert_choice() ? "expert_choice (its scores and select kernels route and lay "
                                "out the pairs)"
                              : "precomputed (no route kernel)") +
           ": only fuse_route=0 is searched";
  } else if (c.route_lanes != first(kRouteLanes) || c.route_vec != first(kRouteVec)) {
    return std::string("route_lanes and route_vec have no effect with routing=") +
           (s.expert_choice() ? "expert_choice (no route kernel: its scores and select "
                                "kernels have a fixed geometry)"
                              : "precomputed (no route kernel)") +
           ": only route_lanes=" + str(first(kRouteLanes)) +
           ", route_vec=" + str(first(kRouteVec)) + " are searched";
  }
  if (s.expert_choice() && c.align_chunk != first(kAlignChunk))
    return "align_chunk has no effect with routing=expert_choice (no align kernel: every "
           "expert takes exactly ceil(t*k/e) tokens, so the select kernel writes a static "
           "layout): only align_chunk=" + str(first(kAlignChunk)) + " is searched";
  // Can never win: said, not dropped.
  if (c.align_chunk > 0 && s.pairs() <= c.align_chunk)
    return "align_chunk=" + str(c.align_chunk) + " with t*k=" + str(s.pairs()) +
           " pairs is one chunk: the count/scan/scatter path does the one-block kernel's work "
           "in three launches";
  if (c.split2 > 1 && s.pairs() > kSplitMaxRows * std::min<long long>(s.e, s.pairs()))
    return "split2=" + str(c.split2) + " at ~" +
           str(s.pairs() / std::min<long long>(s.e, s.pairs())) + " rows per expert (t*k=" +
           str(s.pairs()) + ", e=" + str(s.e) + "): split-k pays while few row blocks stream "
           "gemm2's weights (<= " + str(kSplitMaxRows) + " rows per expert); here the row "
           "blocks fill the GPU and the partial sums only add traffic";
  const int fit = fitting_block_m(s, tunables[kBlockM].values);
  const int widest = widest_block_m(s, tunables[kBlockM].values);
  if (c.block_m > widest)
    return "block_m=" + str(c.block_m) + " exceeds block_m=" + str(widest) + ": " +
           (widest == fit ? "block_m=" + str(fit) + " already holds"
                          : "block_m=" + str(fit) + " holds the mean, " + str(widest) +
                                " the experts above it, of") +
           " the ~" + str(s.mean_rows()) + " rows per expert of t*k=" + str(s.pairs()) +
           " pairs over e=" + str(s.e) + " experts: a larger block only adds padding rows";
  for (const bool gated : {true, false}) {
    const GemmTile& g = gated ? c.g1 : c.g2;
    if (g.prefetch > 0 && g.bk * c.eb() >= g.prefetch)
      return std::string(gated ? "prefetch1=" : "prefetch2=") + str(g.prefetch) + " with " +
             (gated ? "bk1=" : "bk2=") + str(g.bk) + ": a ring slot already loads " +
             str(g.bk * c.eb()) + " bytes of each weight row; the prefetch adds nothing";
  }
  const int bn1 = fitting_block_n(tunables[kBn1].values, s.i);
  if (c.g1.bn > bn1)
    return "bn1=" + str(c.g1.bn) + " exceeds i=" + str(s.i) + " where bn1=" + str(bn1) +
           " already covers it: the extra columns are padding";
  const int bn2 = fitting_block_n(tunables[kBn2].values, s.h);
  if (c.g2.bn > bn2)
    return "bn2=" + str(c.g2.bn) + " exceeds h=" + str(s.h) + " where bn2=" + str(bn2) +
           " already covers it: the extra columns are padding";
  return std::nullopt;
}

}  // namespace ktune::moe
