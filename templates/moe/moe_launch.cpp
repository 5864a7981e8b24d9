// The MoE layer's launches (Op::run): routing, alignment, the two grouped GEMMs (the
// warp-specialised ones with their tensor maps), the FP8 inputs' quantisation and the combine,
// each with its arguments and a grid from the problem's upper bounds; expert choice's own
// sequence.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ktune/error.hpp"
#include "templates/kernel_tensor_map.hpp"
#include "templates/moe/gemm_args.h"
#include "templates/moe/gemm_sm90_args.h"
#include "templates/moe/gather_rows.cuh"
#include "templates/moe/moe_parts.hpp"
#include "templates/moe/zero.cuh"

namespace ktune::moe {
namespace {

/// A tensor map of a contiguous tensor of t (bf16, fp16, e4m3) with `dims` (innermost first),
/// read in boxes of `box` in the 128-byte swizzle (moe/gemm_ws_args.h says which map is which).
tma::TensorMap ws_map(const void* ptr, DType t, std::vector<std::uint64_t> dims,
                      std::vector<std::uint32_t> box) {
  std::vector<std::uint64_t> strides;
  std::uint64_t pitch = dtype_size(t);
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) strides.push_back(pitch *= dims[i]);
  return kernel_tensor_map(
      swizzled_map(ptr, t, std::move(dims), std::move(strides), std::move(box)));
}

/// The warp-specialised kernel's arguments: g plus its tensor maps. gemm1: x [x_rows, H] and w1
/// as {H, I, 2, E} (gather1=2: x's rows in sorted order [a_rows, H], read a block's rows a box);
/// gemm2: act [act_rows, I] and w2 as {I, H, E}. Encoded per call on the host (no device work,
/// nothing allocated; a captured graph keeps the bytes).
MoeGemmWsArgs ws_args(const MoeGemmArgs& g, DType t, bool gated, const Shape& s,
                      long long a_rows, const Config& c) {
  const auto u = [](long long v) { return static_cast<std::uint64_t>(v); };
  const GemmTile& tile = gated ? c.g1 : c.g2;
  MoeGemmWsArgs w{};
  w.base = g;
  // cluster=2: a box of half the weight tile's rows (each CTA of a pair loads its half);
  // cluster=3: a box of half the act tile's rows instead.
  const auto bn = static_cast<std::uint32_t>(tile.cluster == 2 ? tile.bn / 2 : tile.bn);
  const auto bm = static_cast<std::uint32_t>(tile.cluster == 3 ? c.block_m / 2 : c.block_m);
  const auto kt = static_cast<std::uint32_t>(128 / dtype_size(t));  // one 128-byte row
  if (gated) {
    w.a_map = ws_map(g.a, t, {u(s.h), u(a_rows)}, {kt, ws_gather(tile) ? bm : 1u});
    w.w_map = ws_map(g.w, t, {u(s.h), u(s.i), 2, u(s.e)}, {kt, bn, 1, 1});
  } else {
    w.a_map = ws_map(g.a, t, {u(s.i), u(a_rows)}, {kt, bm});
    w.w_map = ws_map(g.w, t, {u(s.i), u(s.h), u(s.e)}, {kt, bn, 1});
  }
  return w;
}

/// Launches a.kernels[0], [1], ... in turn, each with a 1-D block, an (x, y, z) grid and
/// clusters of `cluster` CTAs along x and `cluster_y` along y.
class KernelSequence {
 public:
  KernelSequence(const RunArgs& a, Launcher& launcher) : a_(a), launcher_(launcher) {}
  void operator()(unsigned gx, unsigned gy, unsigned threads, unsigned smem, const void* args,
                  std::size_t size, unsigned gz = 1, unsigned cluster = 1,
                  unsigned cluster_y = 1) {
    KernelLaunch k;
    k.kernel = a_.kernels[index_++];
    k.grid[0] = gx;
    k.grid[1] = gy;
    k.grid[2] = gz;
    k.block[0] = threads;
    k.shared_bytes = smem;
    k.args = args;
    k.args_size = size;
    k.cluster = cluster;
    k.cluster_y = cluster_y;
    // Every kernel after the first may be scheduled during its predecessor's tail: each waits
    // (griddep_wait) before reading what the one before it wrote (templates/common/pdl.cuh).
    // The first waits for the caller's previous work on the stream, as any launch.
    k.programmatic = launched_ > 0;
    ++launched_;
    launcher_.launch(k);
  }
  void skip() { ++index_; }
  int sm_count() const { return a_.sm_count; }

 private:
  const RunArgs& a_;
  Launcher& launcher_;
  std::size_t index_ = 0;
  int launched_ = 0;
};

/// FP8 weights: the quantised GEMM inputs in the workspace and the weights' scales.
struct Fp8Buffers {
  void* xq;
  float* xs;
  void* actq;
  float* acts;
  const float* w1_scale;
  const float* w2_scale;
};

/// persist=2: the tile counters (gemm1's, then gemm2's) zeroed, first in the call
/// (Stage::zero_tiles); nullptr without them.
int* zero_tiles(KernelSequence& launch, const Config& c, const Layout& l,
                std::uintptr_t workspace) {
  if (!counted(c)) return nullptr;
  const MoeZeroArgs z{reinterpret_cast<unsigned long long*>(workspace + l.tiles), 1};
  launch(1, 1, kMoeZeroThreads, 0, &z, sizeof z);
  return reinterpret_cast<int*>(z.data);
}

Fp8Buffers fp8_buffers(const RunArgs& a, const Layout& l) {
  if (a.dtype != DType::e4m3) return {};
  const auto ws = [&](std::size_t off) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace + off));
  };
  const auto* w1s = static_cast<const float*>(tensor(a, 10));
  const auto* w2s = static_cast<const float*>(tensor(a, 11));
  if (!w1s || !w2s)
    throw InvalidArgument(std::string("moe: dtype e4m3 needs ") +
                          (!w1s ? "w1_scale" : "w2_scale") +
                          " (fp32, one dequantisation scale per weight row)");
  return {ws(l.xq), static_cast<float*>(ws(l.xs)), ws(l.actq), static_cast<float*>(ws(l.acts)),
          w1s, w2s};
}

/// The warp-specialised kernel's grid: (blocks, gy), blocks rounded up to whole clusters along x
/// (cluster=2) or gy to whole clusters along y (cluster=3), or for the persistent one a CTA per
/// SM (at most one per tile; every tile when the SM count is unknown).
std::pair<unsigned, unsigned> ws_grid(unsigned blocks, unsigned gy, const GemmTile& g,
                                      const KernelSequence& launch) {
  if (g.cluster == 3) return {blocks, (gy + 1) / 2 * 2};
  const auto cluster = static_cast<unsigned>(g.cluster);
  if (!g.persist) return {(blocks + cluster - 1) / cluster * cluster, gy};
  const unsigned tiles = blocks * gy;
  const int sms = launch.sm_count();
  return {sms > 0 ? std::min(tiles, static_cast<unsigned>(sms)) : tiles, 1u};
}

/// A warp-specialised GEMM's launch: its grid (ws_grid) and clusters, (cluster, 1) along x or
/// (1, 2) along y with cluster=3.
void launch_ws(KernelSequence& launch, const Config& c, bool gated, unsigned blocks, int n,
               const MoeGemmWsArgs& w) {
  const GemmTile& g = gated ? c.g1 : c.g2;
  const auto [gx, gy] = ws_grid(blocks, moe_gemm_grid_y(n, g.bn), g, launch);
  const bool along_y = g.cluster == 3;
  launch(gx, gy, gemm_threads(c, gated), gemm_smem(c, gated), &w, sizeof w, 1,
         along_y ? 1u : static_cast<unsigned>(g.cluster), along_y ? 2u : 1u);
}

/// gemm1 and gemm2 with their arguments (the warp-specialised kernel's with its tensor maps;
/// act has act_rows rows, x has t), grids from the upper bounds in g1.max_blocks. FP8 weights:
/// x and then act quantised per row to e4m3 before the GEMM that reads them. gather1=2: x's
/// rows gathered into x_sorted [act_rows, H] in sorted order first (moe_gather_rows_kernel, a
/// block per row), which gemm1 then reads.
void launch_gemms(KernelSequence& launch, DType t, const Shape& s, const Config& c,
                  MoeGemmArgs g1, MoeGemmArgs g2, long long act_rows, const Fp8Buffers& q,
                  void* x_sorted) {
  const auto blocks = static_cast<unsigned>(g1.max_blocks);
  // persist=2: gemm2's tile counter follows gemm1's (zero_tiles).
  g2.tile_counter = g1.tile_counter ? g1.tile_counter + 1 : nullptr;
  if (c.fp8) {
    const MoeQuantArgs qx{g1.a, q.xq, q.xs, s.t, s.h, nullptr, nullptr, 0};
    launch(static_cast<unsigned>(s.t), 1, kMoeQuantThreads, 0, &qx, sizeof qx);
    g1.a = q.xq;
    g1.a_scale = q.xs;
    g1.w_scale = q.w1_scale;
  }
  long long x_rows = s.t;
  if (gathers(c)) {
    const MoeGatherRowsArgs ga{g1.a, x_sorted, g1.sorted_pairs, g1.padded_rows, g1.pair_token,
                               g1.pairs, g1.k, s.h, static_cast<int>(act_rows)};
    launch(static_cast<unsigned>(act_rows), 1, kMoeGatherThreads, 0, &ga, sizeof ga);
    g1.a = x_sorted;
    x_rows = act_rows;
  }
  if (c.g1.impl == 2) {
    launch_ws(launch, c, true, blocks, s.i, ws_args(g1, t, true, s, x_rows, c));
  } else {
    launch(blocks, moe_gemm_grid_y(s.i, c.g1.bn), gemm_threads(c, true), gemm_smem(c, true),
           &g1, sizeof g1);
  }
  if (c.fp8) {
    const MoeQuantArgs qa{g1.out, q.actq, q.acts, static_cast<int>(act_rows), s.i,
                          g1.padded_rows, g1.sorted_pairs, g1.pairs};
    launch(static_cast<unsigned>(act_rows), 1, kMoeQuantThreads, 0, &qa, sizeof qa);
    g2.a = q.actq;
    g2.a_scale = q.acts;
    g2.w_scale = q.w2_scale;
  }
  if (c.g2.impl == 2) {
    launch_ws(launch, c, false, blocks, s.h, ws_args(g2, t, false, s, act_rows, c));
  } else {
    launch(blocks, moe_gemm_grid_y(s.h, c.g2.bn), gemm_threads(c, false),
           gemm_smem(c, false), &g2, sizeof g2, static_cast<unsigned>(c.split2));
  }
}

/// routing=expert_choice: scores, select, gemm1 (x gathered through pair_token), gemm2,
/// combine in expert order; every grid from the problem (each expert has exactly C rows).
void run_expert_choice(const RunArgs& a, Launcher& launcher, const Shape& s, const Config& c,
                       const Layout& l) {
  const auto ws = [&](std::size_t off) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace + off));
  };
  int* tokens = tensor(a, 3) ? static_cast<int*>(tensor(a, 3)) : static_cast<int*>(ws(l.ids));
  float* weights =
      tensor(a, 4) ? static_cast<float*>(tensor(a, 4)) : static_cast<float*>(ws(l.weights));
  void* pair_out = ws(l.pair_out);
  const int blocks = static_cast<int>(padded_rows_of(c, s) / c.block_m);
  KernelSequence launch(a, launcher);
  int* const tiles = zero_tiles(launch, c, l, a.workspace);
  MoeExpertChoiceArgs ec{};
  ec.logits = static_cast<const float*>(tensor(a, 1));
  ec.scores = static_cast<float*>(ws(l.scores));
  ec.pair_token = tokens;
  ec.pair_weight = weights;
  ec.sorted_pairs = static_cast<int*>(ws(l.sorted_pairs));
  ec.block_expert = static_cast<int*>(ws(l.block_expert));
  ec.padded_rows = static_cast<int*>(ws(l.padded_rows));
  ec.expert_counts = static_cast<int*>(tensor(a, 8));
  ec.tokens = s.t;
  ec.experts = s.e;
  ec.capacity = s.capacity();
  ec.block_m = c.block_m;
  const int score_tokens = moe_ec_score_tokens(moe_emax(s.e));
  launch(static_cast<unsigned>((s.t + score_tokens - 1) / score_tokens), 1, kMoeEcScoreThreads,
         0, &ec, sizeof ec);
  launch(static_cast<unsigned>(s.e), 1, kEcSelectThreads, 0, &ec, sizeof ec);
  MoeGemmArgs g1{};
  g1.a = tensor(a, 0);
  g1.w = tensor(a, 5);
  g1.out = ws(l.act);
  g1.sorted_pairs = ec.sorted_pairs;
  g1.block_expert = ec.block_expert;
  g1.padded_rows = ec.padded_rows;
  g1.pairs = static_cast<int>(s.pairs());
  g1.k = s.k;
  g1.n = s.i;
  g1.kdim = s.h;
  g1.max_blocks = blocks;
  g1.pair_token = tokens;
  g1.tile_counter = tiles;
  MoeGemmArgs g2 = g1;
  g2.a = g1.out;
  g2.w = tensor(a, 6);
  g2.out = pair_out;
  g2.topk_weights = weights;
  g2.n = s.h;
  g2.kdim = s.i;
  g2.pair_token = nullptr;
  launch_gemms(launch, a.dtype, s, c, g1, g2, padded_rows_of(c, s), fp8_buffers(a, l),
               ws(l.x_sorted));
  const MoeExpertChoiceCombineArgs cb{pair_out, tokens, tensor(a, 7), s.t, s.e, s.capacity(),
                                      s.h};
  launch(static_cast<unsigned>(s.t), moe_combine_grid_y(s.h, kCombineThreads, c.combine_vec),
         kCombineThreads, 0, &cb, sizeof cb);
}

}  // namespace

void launch_layer(const RunArgs& a, Launcher& launcher) {
  const Shape s = shape_of(*a.problem);
  const Config c = config_of(*a.params, a.dtype);
  const Layout l = layout_of(c, s, a.dtype);
  const auto ws = [&](std::size_t off) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace + off));
  };
  if (a.workspace == 0 && l.total > 0)
    throw InvalidArgument("moe: a workspace of " + str(static_cast<long long>(l.total)) +
                          " bytes is required (workspace_bytes())");
  if (s.expert_choice()) return run_expert_choice(a, launcher, s, c, l);
  const bool routed = s.routed();
  int* ids = static_cast<int*>(tensor(a, 3));
  float* weights = static_cast<float*>(tensor(a, 4));
  if (!routed && (!ids || !weights))
    throw InvalidArgument("moe: routing=precomputed needs topk_ids and topk_weights");
  // fuse_route: the ids stay in the kernel's shared memory unless the caller asks for them.
  const bool one_block = fused(c, s);
  const bool sort = sorted_in_route(c, s);
  if (routed && !ids && !one_block && !sort) ids = static_cast<int*>(ws(l.ids));
  if (routed && !weights) weights = static_cast<float*>(ws(l.weights));
  int* counts = tensor(a, 8) ? static_cast<int*>(tensor(a, 8)) : static_cast<int*>(ws(l.counts));
  float* aux = s.route_kernel() ? static_cast<float*>(tensor(a, 9)) : nullptr;
  auto* aux_scratch =
      one_block || sort ? nullptr : static_cast<unsigned long long*>(ws(l.aux));
  int* sorted_pairs = static_cast<int*>(ws(l.sorted_pairs));
  int* block_expert = static_cast<int*>(ws(l.block_expert));
  int* padded_rows = static_cast<int*>(ws(l.padded_rows));
  void* act = ws(l.act);
  void* pair_out = has_combine(c, s) ? ws(l.pair_out) : tensor(a, 7);
  const int pairs = static_cast<int>(s.pairs());
  const int max_blocks = static_cast<int>(moe_max_blocks(pairs, s.e, c.block_m));

  KernelSequence launch(a, launcher);
  int* const tiles = zero_tiles(launch, c, l, a.workspace);
  MoeRouteArgs r{};
  if (routed) {
    r.logits = static_cast<const float*>(tensor(a, 1));
    r.correction_bias =
        s.routing == moe_sigmoid_group ? static_cast<const float*>(tensor(a, 2)) : nullptr;
    r.topk_ids = ids;
    r.topk_weights = weights;
    r.aux_loss = aux;
    r.aux_scratch = aux_scratch;
    r.tokens = s.t;
    r.experts = s.e;
    r.k = s.k;
    r.routing = s.routing;
    r.n_group = s.n_group;
    r.topk_group = s.topk_group;
    r.routed_scaling = s.routing == moe_sigmoid_group ? static_cast<float>(a.scalars[0]) : 1.0f;
  }
  MoeAlignArgs al{};
  al.topk_ids = ids;
  al.sorted_pairs = sorted_pairs;
  al.block_expert = block_expert;
  al.padded_rows = padded_rows;
  al.expert_counts = counts;
  al.pairs = pairs;
  al.experts = s.e;
  al.block_m = c.block_m;
  if (one_block) {
    const MoeRouteAlignArgs ra{r, al};
    launch(1, 1, static_cast<unsigned>(route_align_threads(c, s)), 0, &ra, sizeof ra);
  } else if (sort) {
    // Its blocks meet at a barrier: all resident at once (moe/route_sort.cuh).
    const int blocks = route_blocks(c, s);
    if (a.sm_count > 0 && blocks > a.sm_count)
      throw InvalidArgument("moe: fuse_route=2 needs its " + str(blocks) + " route blocks "
                            "resident at once, at most one per SM here (" + str(a.sm_count) +
                            " SMs); use fuse_route=0");
    const MoeRouteSortArgs rs{r, al, static_cast<unsigned long long*>(ws(l.align))};
    // The barrier count, and the aux sums when the loss is asked for.
    const MoeZeroArgs z{rs.scratch, aux ? 1 + 2 * s.e : 1};
    launch(1, 1, kMoeZeroThreads, 0, &z, sizeof z);
    launch(static_cast<unsigned>(blocks), 1, kRouteThreads, 0, &rs, sizeof rs);
  } else {
    if (routed) {
      const MoeZeroArgs z{aux_scratch, 2 * s.e + 1};
      if (aux)
        launch(1, 1, kMoeZeroThreads, 0, &z, sizeof z);
      else
        launch.skip();  // nothing reads the scratch
      const int per_block = kRouteThreads / c.route_lanes;
      launch(static_cast<unsigned>((s.t + per_block - 1) / per_block), 1, kRouteThreads, 0,
             &r, sizeof r);
    }
    if (c.align_chunk == 0) {
      launch(1, 1, static_cast<unsigned>(align_one_threads(pairs, s.e)), 0, &al, sizeof al);
    } else {
      al.scratch = static_cast<int*>(ws(l.align));
      const auto chunks = static_cast<unsigned>((pairs + c.align_chunk - 1) / c.align_chunk);
      launch(chunks, 1, kAlignThreads, 0, &al, sizeof al);
      launch(1, 1, kAlignThreads, 0, &al, sizeof al);
      launch(chunks, 1, kAlignThreads, 0, &al, sizeof al);
    }
  }
  MoeGemmArgs g1{};
  g1.a = tensor(a, 0);
  g1.w = tensor(a, 5);
  g1.out = act;
  g1.sorted_pairs = sorted_pairs;
  g1.block_expert = block_expert;
  g1.padded_rows = padded_rows;
  g1.pairs = pairs;
  g1.k = s.k;
  g1.n = s.i;
  g1.kdim = s.h;
  g1.max_blocks = max_blocks;
  g1.tile_counter = tiles;
  MoeGemmArgs g2 = g1;
  g2.a = act;
  g2.w = tensor(a, 6);
  g2.out = pair_out;
  g2.topk_weights = weights;
  g2.n = s.h;
  g2.kdim = s.i;
  launch_gemms(launch, a.dtype, s, c, g1, g2, padded_rows_of(c, s), fp8_buffers(a, l),
               ws(l.x_sorted));
  if (has_combine(c, s)) {
    const MoeCombineArgs cb{pair_out, tensor(a, 7), s.t, s.k, s.h, c.split2};
    launch(static_cast<unsigned>(s.t), moe_combine_grid_y(s.h, kCombineThreads, c.combine_vec),
           kCombineThreads, 0, &cb, sizeof cb);
  }
}

}  // namespace ktune::moe
