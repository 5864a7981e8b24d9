// The MoE layer's kernels for one configuration, in launch order (zero, route, align, gemm1,
// gemm2, combine; route and align as one kernel with fuse_route; expert_choice: scores, select,
// gemm1, gemm2, combine; see moe/args.h), their names, block sizes and shared memory, and the
// workspace layout they share.
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "templates/moe/gemm_args.h"
#include "templates/moe/gemm_sm90_args.h"
#include "templates/moe/moe_parts.hpp"
#include "templates/moe/gather_rows.cuh"
#include "templates/moe/zero.cuh"

namespace ktune::moe {

int align_one_threads(std::int64_t pairs, int experts) {
  const int most = moe_emax(experts) == kMoeEmax ? 1024 : kAlignWideThreads;
  int threads = 128;
  while (threads < most && threads * 4 < pairs) threads *= 2;
  return threads;
}

bool has_combine(const Config& c, const Shape& s) { return s.combines() || c.split2 > 1; }

bool fused(const Config& c, const Shape& s) { return c.fuse_route == 1 && s.route_kernel(); }

bool sorted_in_route(const Config& c, const Shape& s) {
  return c.fuse_route == 2 && s.route_kernel();
}

int route_blocks(const Config& c, const Shape& s) {
  const int per_block = kRouteThreads / c.route_lanes;
  return (s.t + per_block - 1) / per_block;
}

bool counted(const Config& c) { return c.g1.persist == 2 || c.g2.persist == 2; }

namespace {

/// gemm1 and gemm2, each after its input's e4m3 quantisation (FP8 weights); gather1=2: gemm1
/// after x's rows are gathered into sorted order.
void add_gemms(std::vector<Stage>& out, const Config& c) {
  if (c.fp8) out.push_back(Stage::quant_x);
  if (gathers(c)) out.push_back(Stage::gather_x);  // 16-bit only: never with quant_x
  out.push_back(Stage::gemm1);
  if (c.fp8) out.push_back(Stage::quant_act);
  out.push_back(Stage::gemm2);
}

}  // namespace

std::vector<Stage> stages_of(const Config& c, const Shape& s) {
  std::vector<Stage> out;
  if (counted(c)) out.push_back(Stage::zero_tiles);  // the GEMMs' tile counters
  if (s.expert_choice()) {
    out.insert(out.end(), {Stage::ec_scores, Stage::ec_select});
    add_gemms(out, c);
    out.push_back(Stage::ec_combine);
    return out;
  }
  if (fused(c, s)) {
    out.push_back(Stage::route_align);  // one block: no aux scratch to zero
  } else if (sorted_in_route(c, s)) {
    out.insert(out.end(), {Stage::zero, Stage::route_sort});  // its barrier zeroed first
  } else {
    if (s.routed()) {
      out.push_back(Stage::zero);  // aux scratch; launched only when aux_loss is requested
      out.push_back(Stage::route);
    }
    if (c.align_chunk == 0) {
      out.push_back(Stage::align);
    } else {
      out.insert(out.end(), {Stage::align_count, Stage::align_scan, Stage::align_scatter});
    }
  }
  add_gemms(out, c);
  // k = 1: pair_out [T * 1, H] is y's layout, so gemm2 writes y and there is nothing to sum,
  // unless gemm2 splits k (the combine then adds the splits).
  if (has_combine(c, s)) out.push_back(Stage::combine);
  return out;
}

Stage stage_at(const Config& c, const Shape& s, std::size_t index) {
  const std::vector<Stage> st = stages_of(c, s);
  if (index >= st.size())
    throw InvalidArgument("moe: kernel index " + str(static_cast<long long>(index)) +
                          " out of range (" + str(static_cast<long long>(st.size())) +
                          " kernels)");
  return st[index];
}

int route_items(const Config& c, const Shape& s) {
  return (s.e + c.route_lanes * c.route_vec - 1) / (c.route_lanes * c.route_vec);
}

int route_align_threads(const Config& c, const Shape& s) {
  return moe_route_align_threads(route_items(c, s) * c.route_vec, s.e);
}

long long padded_rows_of(const Config& c, const Shape& s) {
  return s.expert_choice() ? moe_expert_choice_padded(s.e, s.capacity(), c.block_m)
                           : moe_max_padded(s.pairs(), s.e, c.block_m);
}

unsigned gemm_smem(const Config& c, bool gated) {
  const GemmTile& g = gated ? c.g1 : c.g2;
  if (g.impl == 2) return moe_gemm_ws_smem_bytes(c.block_m, g.bn, g.stages, gated);
  return g.impl == 1 ? moe_gemm_sm90_smem_bytes(c.block_m, g.bn, g.bk, g.stages, gated)
                     : moe_gemm_smem_bytes(c.block_m, g.bn, g.bk, g.stages, gated, c.eb());
}

unsigned gemm_static_smem(const Config& c, bool gated) {
  const GemmTile& g = gated ? c.g1 : c.g2;
  // The persistent kernel keeps two row tables.
  return g.impl >= 1 ? (g.persist ? 2 : 1) * moe_gemm_sm90_static_smem_bytes(c.block_m)
                     : moe_gemm_static_smem_bytes(c.block_m, c.eb());
}

unsigned gemm_threads(const Config& c, bool gated) {
  const GemmTile& g = gated ? c.g1 : c.g2;
  return static_cast<unsigned>(g.impl == 2 ? moe_gemm_ws_threads(c.block_m) : g.warps * 32);
}

Layout layout_of(const Config& c, const Shape& s, DType t) {
  Layout l;
  std::size_t at = 0;
  const auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at += (bytes + kAlign - 1) / kAlign * kAlign;
    return start;
  };
  const auto pairs = static_cast<std::size_t>(s.pairs());
  const auto padded = static_cast<std::size_t>(padded_rows_of(c, s));
  const std::size_t es = dtype_size(io_type(t));
  l.ids = take(s.routed() && !fused(c, s) && !sorted_in_route(c, s) ? pairs * 4 : 0);
  l.weights = take(s.routed() ? pairs * 4 : 0);
  l.sorted_pairs = take(padded * 4);
  l.block_expert = take(padded / static_cast<std::size_t>(c.block_m) * 4);
  l.padded_rows = take(4);
  l.tiles = take(counted(c) ? 8 : 0);
  l.counts = take(static_cast<std::size_t>(s.e) * 4);
  const auto align_ints = [&] {
    return static_cast<std::size_t>(moe_align_scratch_ints(s.pairs(), s.e, c.align_chunk));
  };
  const auto sort_bytes = [&] {
    return static_cast<std::size_t>(moe_sort_header(s.e)) * 8 +
           static_cast<std::size_t>(route_blocks(c, s)) * static_cast<std::size_t>(s.e) * 4;
  };
  l.align = take(sorted_in_route(c, s) ? sort_bytes() : c.align_chunk > 0 ? align_ints() * 4 : 0);
  l.aux = take(s.route_kernel() && !fused(c, s) && !sorted_in_route(c, s)
                   ? (2 * static_cast<std::size_t>(s.e) + 1) * 8
                   : 0);
  l.scores = take(s.expert_choice() ? static_cast<std::size_t>(s.e) * s.t * 4 : 0);
  l.x_sorted = take(gathers(c) ? padded * static_cast<std::size_t>(s.h) * es : 0);
  l.act = take(padded * static_cast<std::size_t>(s.i) * es);
  const std::size_t out_rows = pairs * static_cast<std::size_t>(s.h);
  l.pair_out = take(c.split2 > 1       ? static_cast<std::size_t>(c.split2) * out_rows * 4
                    : s.combines()     ? out_rows * es
                                       : 0);
  if (t == DType::e4m3) {
    const auto tokens = static_cast<std::size_t>(s.t);
    l.xq = take(tokens * static_cast<std::size_t>(s.h));
    l.xs = take(tokens * 4);
    l.actq = take(padded * static_cast<std::size_t>(s.i));
    l.acts = take(padded * 4);
  }
  l.total = at;
  return l;
}

std::vector<KernelSource> kernel_sources(const Config& c, const Shape& s, DType t) {
  const std::string T = kernel_type(t);            // GEMM operands
  const std::string IO = kernel_type(io_type(t));  // act, pair outputs, y
  const auto gemm = [&](const GemmTile& g, bool gated) -> KernelSource {
    if (g.impl == 2 && g.persist)
      return {"moe/gemm_ws_sm90.cuh", std::string("ktune::moe_gemm_ws_") +
                                          (g.persist == 2 ? "dynamic" : "persistent") +
                                          "_kernel<" + T + ", " +
                                          str(c.block_m) + ", " + str(g.bn) + ", " +
                                          str(g.stages) + ", " + (gated ? "true" : "false") +
                                          ", " + str(g.group_m) + ">"};
    if (g.impl == 2)
      return {"moe/gemm_ws_sm90.cuh", "ktune::moe_gemm_ws_kernel<" + T + ", " +
                                          str(c.block_m) + ", " + str(g.bn) + ", " +
                                          str(g.stages) + ", " + (gated ? "true" : "false") +
                                          ", " + str(g.group_m) + ", " + str(ws_gather(g)) +
                                          (g.cluster > 1 ? ", " + str(g.cluster) : "") + ">"};
    if (g.impl == 1)
      return {"moe/gemm_sm90.cuh", "ktune::moe_gemm_sm90_kernel<" + T + ", " + str(c.block_m) +
                                       ", " + str(g.bn) + ", " + str(g.bk) + ", " +
                                       str(g.stages) + ", " + (gated ? "true" : "false") +
                                       ", " + str(g.group_m) + ">"};
    const bool partial = !gated && c.split2 > 1;
    return {"moe/gemm.cuh", "ktune::moe_gemm_kernel<" + T + ", " + str(c.block_m) + ", " +
                                str(g.bn) + ", " + str(g.bk) + ", " + str(g.warps) + ", " +
                                str(g.warps_m) + ", " + str(g.stages) + ", " +
                                (gated ? "true" : "false") + ", " + str(g.group_m) + ", " +
                                str(g.prefetch) + ", 1, " + str(g.epi) +
                                (partial ? ", true" : "") + ">"};
  };
  // The EMAX argument past 256 experts (none below: the names the shipped rows were tuned as).
  const std::string emax = emax_arg(s.e);
  const std::string chunk = str(kAlignThreads) + ", " + str(c.align_chunk) + emax + ">";
  std::vector<KernelSource> out;
  for (const Stage st : stages_of(c, s)) {
    switch (st) {
      case Stage::zero_tiles:
      case Stage::zero: out.push_back({"moe/zero.cuh", "ktune::moe_zero_kernel"}); break;
      case Stage::route:
        out.push_back({"moe/route.cuh", "ktune::moe_route_kernel<" + str(s.routing) + ", " +
                                            str(kRouteThreads) + ", " + str(c.route_lanes) +
                                            ", " + str(c.route_vec) + ", " +
                                            str(route_items(c, s)) + emax + ">"});
        break;
      case Stage::route_align:
        out.push_back({"moe/route_align.cuh",
                       "ktune::moe_route_align_kernel<" + str(s.routing) + ", " +
                           str(route_align_threads(c, s)) + ", " + str(c.route_lanes) + ", " +
                           str(c.route_vec) + ", " + str(route_items(c, s)) + emax + ">"});
        break;
      case Stage::route_sort:
        out.push_back({"moe/route_sort.cuh",
                       "ktune::moe_route_sort_kernel<" + str(s.routing) + ", " +
                           str(kRouteThreads) + ", " + str(c.route_lanes) + ", " +
                           str(c.route_vec) + ", " + str(route_items(c, s)) + emax + ">"});
        break;
      case Stage::align:
        out.push_back({"moe/align.cuh",
                       "ktune::moe_align_kernel<" + str(align_one_threads(s.pairs(), s.e)) +
                           emax + ">"});
        break;
      case Stage::align_count:
        out.push_back({"moe/align.cuh", "ktune::moe_align_count_kernel<" + chunk});
        break;
      case Stage::align_scan:
        out.push_back({"moe/align.cuh", "ktune::moe_align_scan_kernel<" + chunk});
        break;
      case Stage::align_scatter:
        out.push_back({"moe/align.cuh", "ktune::moe_align_scatter_kernel<" + chunk});
        break;
      case Stage::quant_x:
      case Stage::quant_act:
        out.push_back({"moe/quant.cuh", "ktune::moe_quant_rows_kernel"});
        break;
      case Stage::gather_x:
        out.push_back({"moe/gather_rows.cuh", "ktune::moe_gather_rows_kernel<" + IO + ">"});
        break;
      case Stage::gemm1:
        out.push_back(gemm(c.g1, true));
        break;
      case Stage::gemm2:
        out.push_back(gemm(c.g2, false));
        break;
      case Stage::combine:
        out.push_back({"moe/combine.cuh", "ktune::moe_combine_kernel<" + IO + ", " +
                                              str(kCombineThreads) + ", " + str(c.combine_vec) +
                                              (c.split2 > 1 ? ", true" : "") + ">"});
        break;
      case Stage::ec_scores:
        out.push_back({"moe/expert_choice.cuh",
                       emax.empty() ? std::string("ktune::moe_expert_choice_scores_kernel")
                                    : "ktune::moe_expert_choice_scores_wide_kernel<" +
                                          str(moe_emax(s.e)) + ">"});
        break;
      case Stage::ec_select:
        out.push_back({"moe/expert_choice.cuh", "ktune::moe_expert_choice_select_kernel<" +
                                                    str(kEcSelectThreads) + ">"});
        break;
      case Stage::ec_combine:
        out.push_back({"moe/expert_choice.cuh", "ktune::moe_expert_choice_combine_kernel<" + IO +
                                                    ", " + str(kCombineThreads) + ", " +
                                                    str(c.combine_vec) + emax + ">"});
        break;
    }
  }
  return out;
}

int stage_threads(const Config& c, const Shape& s, std::size_t index) {
  switch (stage_at(c, s, index)) {
    case Stage::zero_tiles:
    case Stage::zero: return kMoeZeroThreads;
    case Stage::route:
    case Stage::route_sort: return kRouteThreads;
    case Stage::align: return align_one_threads(s.pairs(), s.e);
    case Stage::route_align: return route_align_threads(c, s);
    case Stage::align_count:
    case Stage::align_scan:
    case Stage::align_scatter: return kAlignThreads;
    case Stage::quant_x:
    case Stage::quant_act: return kMoeQuantThreads;
    case Stage::gather_x: return kMoeGatherThreads;
    case Stage::gemm1: return static_cast<int>(gemm_threads(c, true));
    case Stage::gemm2: return static_cast<int>(gemm_threads(c, false));
    case Stage::combine: return kCombineThreads;
    case Stage::ec_scores: return kMoeEcScoreThreads;
    case Stage::ec_select: return kEcSelectThreads;
    case Stage::ec_combine: return kCombineThreads;
  }
  return 0;
}

unsigned stage_shared_bytes(const Config& c, const Shape& s, std::size_t index) {
  switch (stage_at(c, s, index)) {
    case Stage::gemm1: return gemm_smem(c, true);
    case Stage::gemm2: return gemm_smem(c, false);
    default: return 0;
  }
}

}  // namespace ktune::moe
