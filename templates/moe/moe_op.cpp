// The Mixture-of-Experts layer op: its problem dims, tunables and tensors, the device's limits
// on a point, tolerances, search stages and the sizes the tuner reports; the rest lives in its
// parts (moe_parts.hpp): the kernels and workspace (moe_plan.cpp), the launches
// (moe_launch.cpp), the fp32 reference (moe_reference.cpp), the space's reasons (moe_space.cpp)
// and the built-in defaults (moe_defaults.cpp).
#include "templates/moe/moe_op.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ktune/error.hpp"
#include "templates/moe/args.h"
#include "templates/moe/gemm_args.h"
#include "templates/moe/moe_defaults.hpp"
#include "templates/moe/moe_parts.hpp"

namespace ktune {
namespace {

using namespace moe;

class MoeOp final : public Op {
 public:
  MoeOp()
      : dims_{{"e", 1, kMaxExperts, {}, std::nullopt, "experts", true},
              {"k", 1, kMaxK, {}, std::nullopt,
               "experts per token (top-k), at most e; expert_choice: the mean, top-k x capacity "
               "factor (each expert takes ceil(t * k / e) tokens)",
               true},
              {"h", 8, kMaxRow, {}, std::nullopt, "hidden size, a multiple of 8", true},
              {"i", 8, kMaxRow, {}, std::nullopt, "expert intermediate size, a multiple of 8",
               true},
              {"t", 1, kMaxTokens, {}, std::nullopt, "tokens"},
              {"routing", 0, 4,
               {"softmax", "softmax_renorm", "sigmoid_group", "precomputed", "expert_choice"}, 1,
               "softmax top-k; with weights renormalised over the k (Mixtral); group-limited "
               "sigmoid with correction bias (DeepSeek-V3); ids and weights given; each expert "
               "picks its ceil(t * k / e) tokens of highest softmax score (expert choice)"},
              {"n_group", 1, kMaxGroups, {}, 1, "expert groups (sigmoid_group; else 1)", true},
              {"topk_group", 1, kMaxGroups, {}, 1, "groups kept per token (sigmoid_group; else 1)",
               true}},
        tunables_{
            {"block_m", {16, 32, 64, 128, 192},
             "GEMM rows per block = align padding per expert (192: impl1=impl2=2 only)"},
            {"bn1", {32, 64, 128, 256}, "gemm1 act columns per block (2x rows of w1: gate and up)"},
            {"bk1", {32, 64, 128, 256}, "gemm1 reduction step per ring slot"},
            {"warps1", {2, 4, 8, 12}, "gemm1 warps per block (12: impl1=2 at block_m=192)"},
            {"warps_m1", {1, 2}, "gemm1 warps along M (the rest along N)"},
            {"stages1", {2, 3, 4, 6}, "gemm1 cp.async ring depth"},
            {"group1", {0, 8}, "gemm1 CTA order: 0 launch order; 8: groups of 8 row blocks run "
                               "through every column block (weights shared in L2)"},
            {"prefetch1", {0, 256}, "gemm1 weight loads ask L2 for this many bytes (0: 16)"},
            {"epi1", {0, 1}, "gemm1 epilogue: 0 fragment stores; 1 through shared memory, 16-byte "
                             "stores"},
            {"impl1", {0, 1, 2},
             "gemm1 kernel: 0 mma.sync (sm_80 and later); 1 wgmma (sm_90a: block_m 64/128, bk1 "
             "64, one warpgroup per 64 rows); 2 warp-specialised wgmma (sm_90a: a producer "
             "warpgroup fills an mbarrier ring by TMA and cp.async, one consumer warpgroup per "
             "64 rows)"},
            {"bn2", {32, 64, 128, 256}, "gemm2 output columns per block"},
            {"bk2", {32, 64, 128, 256}, "gemm2 reduction step per ring slot"},
            {"warps2", {2, 4, 8, 12}, "gemm2 warps per block (as warps1)"},
            {"warps_m2", {1, 2}, "gemm2 warps along M (the rest along N)"},
            {"stages2", {2, 3, 4, 6}, "gemm2 cp.async ring depth"},
            {"group2", {0, 8}, "gemm2 CTA order (as group1)"},
            {"prefetch2", {0, 256}, "gemm2 weight loads ask L2 for this many bytes (0: 16)"},
            {"epi2", {0, 1}, "gemm2 epilogue (as epi1)"},
            {"impl2", {0, 1, 2}, "gemm2 kernel (as impl1; 2: the act rows by TMA too)"},
            {"align_chunk", {0, 4096},
             "0: one-block align kernel; else pairs per block of the count/scan/scatter path"},
            {"route_lanes", {8, 32}, "threads per token in the route kernel"},
            {"route_vec", {1, 4}, "logits per load in the route kernel (e % route_vec == 0)"},
            {"combine_vec", {4, 8}, "elements per thread of the combine"},
            {"split2", {1, 2, 4}, "gemm2 split-k: 1 none; s > 1 spreads each row block's weight "
                                  "stream over s CTAs, fp32 partial sums added by the combine "
                                  "(small t)"},
            // Added after databases were written: left out of keys at 0.
            {"persist1", {0, 1, 2},
             "impl1=2: one CTA per SM loops over gemm1's tiles, the producer filling the next "
             "tile's first k-tiles while the consumers store the last (16-bit); 1: tiles in a "
             "fixed stride, 2: each next tile taken from a counter",
             0},
            {"persist2", {0, 1, 2}, "impl2=2: as persist1, for gemm2", 0},
            {"fuse_route", {0, 1, 2},
             "1: route and align in one kernel of one block (t <= 1024, t*k <= 4096: the ids "
             "stay in shared memory, one launch fewer); 2: in the route kernel's grid, each "
             "block placing its own pairs after a grid-wide barrier (at most 64 blocks; no "
             "align kernel); 0: the route kernel, then align",
             0},
            {"cluster1", {1, 2, 3},
             "impl1=2, persist1=0: 2 = clusters of two CTAs along the rows; a pair computing the "
             "same expert's columns loads each weight tile once, half by each CTA, multicast "
             "into both (less L2 traffic); 3 = clusters of two along the columns: the two "
             "column blocks of a row block share the act tile by multicast (gather1=2)",
             1},
            {"cluster2", {1, 2, 3}, "impl2=2, persist2=0: as cluster1, for gemm2 (3: 16-bit)",
             1},
            {"gather1", {0, 2},
             "impl1=2: 2 = x's rows gathered into sorted order by a kernel before gemm1, which "
             "then reads its act tile as one TMA box a k-tile (16-bit, persist1=0, cluster1 1 "
             "or 3)",
             0},
        },
        scalars_{{"routed_scaling", 1.0, "sigmoid_group: weights are multiplied by it"}} {
    // The Param enum (moe_problem.hpp) indexes this list, and the defaults' table fills it.
    if (tunables_.size() != kGather1 + 1)
      throw std::logic_error("moe: the tunables and the Param enum disagree");
  }

  std::string_view name() const override { return "moe"; }
  std::string_view summary() const override {
    return "y = sum over each token's top-k experts of weight * (silu(x W1g^T) * x W1u^T) W2^T; "
           "routing, alignment, grouped GEMMs and combine on the GPU";
  }
  std::string_view family() const override { return "moe"; }
  /// e4m3: FP8 weights with per-channel scales (w1_scale, w2_scale), x and y in bf16; x and
  /// act are quantised to e4m3 per row inside the layer (mma.sync GEMMs from sm_89, the
  /// warp-specialised ones on sm_90a).
  std::vector<DType> dtypes() const override { return {DType::bf16, DType::f16, DType::e4m3}; }
  const std::vector<DimSpec>& dims() const override { return dims_; }
  const std::vector<Tunable>& tunables() const override { return tunables_; }
  const std::vector<ScalarSpec>& scalars() const override { return scalars_; }

  Problem default_problem() const override {
    return {{8, 2, 4096, 14336, 1024, moe_softmax_renorm, 1, 1}};
  }

  std::optional<std::string> problem_reason(const Problem& p) const override {
    const Shape s = shape_of(p);
    if (s.k > s.e) return "k=" + str(s.k) + " exceeds e=" + str(s.e) + " (k distinct experts)";
    if (const char* why = moe_gemm_shape_invalid_reason(s.h, s.i))
      return "h=" + str(s.h) + ", i=" + str(s.i) + ": " + why +
             " (GEMM rows are read in 16-byte chunks)";
    if (s.routing != moe_sigmoid_group && (s.n_group != 1 || s.topk_group != 1))
      return "n_group and topk_group apply to routing=sigmoid_group only (got n_group=" +
             str(s.n_group) + ", topk_group=" + str(s.topk_group) + "); leave them 1";
    if (s.e % s.n_group != 0)
      return "e=" + str(s.e) + " is not a multiple of n_group=" + str(s.n_group) +
             " (groups of equal size)";
    if (s.topk_group > s.n_group)
      return "topk_group=" + str(s.topk_group) + " exceeds n_group=" + str(s.n_group);
    if (s.k > s.topk_group * (s.e / s.n_group))
      return "k=" + str(s.k) + " exceeds the " + str(s.topk_group * (s.e / s.n_group)) +
             " experts of the topk_group=" + str(s.topk_group) + " kept groups of " +
             str(s.e / s.n_group);
    // The route kernel keeps at most 32 scores per thread for sigmoid_group (two per expert)
    // with at most 32 lanes per token: E <= 32 * 32 always holds for e <= 512; softmax modes
    // allow 64 per thread. The kernels with per-expert arrays in shared memory take their size
    // as EMAX, 512 past 256 experts (moe_emax), so every routing mode runs up to e = 512.
    return std::nullopt;
  }

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    // Sizes depend on the routing mode: topk_ids / topk_weights hold s.pairs() entries, [t, k]
    // or, with expert_choice, [e, c] (c = ceil(t * k / e), each expert's tokens in increasing
    // id); aux_loss exists for the route-kernel modes only (size 0: not written).
    const Shape s = shape_of(p);
    const std::int64_t pairs = s.pairs(), e = s.e, h = s.h, i = s.i, tok = s.t;
    const bool routed = s.routed();
    const TensorRole ids_role = routed ? TensorRole::output : TensorRole::input;
    // Tuning inputs with y of order 1 (tolerance() assumes it): x uniform in [-1, 1), weights
    // uniform in +-3 / sqrt(fan-in), so gate and up are ~N(0, 1) and each expert's output has
    // variance ~1; precomputed weights average 1 / k, so a token's sum averages 1 (at most 2).
    // FP8 (e4m3) weights: stored values uniform in +-3 (e4m3 keeps 3 mantissa bits over its
    // whole range: no subnormals at this size), the per-channel scales in [0.5, 1.5] /
    // sqrt(fan-in), so the real weights have about the 16-bit fills' spread and every column
    // its own scale.
    const bool fp8 = t == DType::e4m3;
    const DType io = io_type(t);
    const auto scaled = [&](std::int64_t fan_in) {
      const float a = fp8 ? 3.0f : 3.0f / std::sqrt(static_cast<float>(fan_in));
      return Fill::uniform(-a, a);
    };
    const auto channel_scale = [](std::int64_t fan_in) {
      const float r = 1.0f / std::sqrt(static_cast<float>(fan_in));
      return Fill::uniform(0.5f * r, 1.5f * r);
    };
    return {{"x", TensorRole::input, io, tok * h, false, Fill::uniform(-1.0f, 1.0f)},
            {"logits", TensorRole::input, DType::f32, routed ? tok * e : 0, !routed},
            // Small beside the scores' spread (sigmoid of logits in [-2, 2)), as a trained bias
            // that balances the experts is: a bias of +-0.5 made every token pick the same few
            // experts (~37 of 64 touched at t=128 instead of ~62), so sweeps timed a lighter
            // layer than a balanced router runs.
            {"correction_bias", TensorRole::input, DType::f32,
             s.routing == moe_sigmoid_group ? e : 0, true, Fill::uniform(-0.1f, 0.1f)},
            {"topk_ids", ids_role, DType::i32, pairs, routed, Fill::distinct_ids(s.k, s.e)},
            {"topk_weights", ids_role, DType::f32, pairs, routed,
             Fill::uniform(0.0f, 2.0f / static_cast<float>(s.k))},
            {"w1", TensorRole::input, t, e * 2 * i * h, false, scaled(h)},
            {"w2", TensorRole::input, t, e * h * i, false, scaled(i)},
            {"y", TensorRole::output, io, tok * h, false, {}, h, reference_stride(s)},
            {"expert_counts", TensorRole::output, DType::i32, e, true},
            {"aux_loss", TensorRole::output, DType::f32, s.route_kernel() ? 1 : 0, true},
            // e4m3: the weights' dequantisation scales, one per output channel (a per-tensor
            // scale is a constant fill); not used with 16-bit weights.
            {"w1_scale", TensorRole::input, DType::f32, fp8 ? e * 2 * i : 0, !fp8,
             channel_scale(h)},
            {"w2_scale", TensorRole::input, DType::f32, fp8 ? e * h : 0, !fp8,
             channel_scale(i)}};
  }

  std::size_t workspace_bytes(const Params& params, const Problem& problem,
                              DType t) const override {
    return layout_of(config_of(params, t), shape_of(problem), t).total;
  }

  std::size_t alignment(const Params&, const Problem&, DType) const override { return 16; }

  std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                            DType t, const DeviceInfo& device) const override {
    if (auto why = static_reason(params, problem, t)) return why;
    if (auto why = needs_sm80_reason(device)) return why;
    const Config c = config_of(params, t);
    if (c.fp8 && device.cc_major * 10 + device.cc_minor < 89)
      return "dtype e4m3 needs FP8 tensor cores (compute capability 8.9 or later); the device "
             "is " + std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
    for (const bool gated : {true, false}) {
      const GemmTile& g = gated ? c.g1 : c.g2;
      if (g.impl >= 1 && device.arch() != "sm_90a")
        return std::string(gated ? "impl1" : "impl2") +
               (g.impl == 1 ? "=1 (wgmma)" : "=2 (warp-specialised wgmma + TMA)") +
               " needs an sm_90a device (compute capability 9.0); the device is " +
               std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
      const unsigned smem = gemm_smem(c, gated) + gemm_static_smem(c, gated);
      if (device.smem_optin_per_block > 0 &&
          smem > static_cast<unsigned>(device.smem_optin_per_block))
        return std::string(gated ? "gemm1" : "gemm2") + " tile needs " + str(smem) +
               " bytes of shared memory (stages x (A + B tiles) + the row table), more than the "
               "device's " + str(device.smem_optin_per_block) + " per block";
    }
    return std::nullopt;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    if (auto why = static_reason(params, problem, t)) throw InvalidArgument("moe: " + *why);
    return kernel_sources(config_of(params, t), shape_of(problem), t);
  }

  int block_threads(const Params& params, const Problem& problem, DType t,
                    std::size_t index) const override {
    return stage_threads(config_of(params, t), shape_of(problem), index);
  }

  unsigned dynamic_shared_bytes(const Params& params, const Problem& problem, DType t,
                                std::size_t index) const override {
    return stage_shared_bytes(config_of(params, t), shape_of(problem), index);
  }

  void run(const RunArgs& a, Launcher& launcher) const override { launch_layer(a, launcher); }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    return moe::reference_kernels(shape_of(p), t);
  }

  std::size_t reference_workspace_bytes(const Problem& p, DType) const override {
    return moe::reference_workspace_bytes(shape_of(p));
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    launch_reference(a, launcher);
  }

  Tolerance tolerance(DType t) const override {
    // The reference keeps act in fp32; the kernels round act, pair_out and y to 16 bits (unit
    // roundoff u = 2^-9 bf16, 2^-12 fp16). Rounding act perturbs y by about u / sqrt(3) times
    // the output's scale (random signs over I terms), and near-zero outputs (cancellation) see
    // that as an absolute error: atol ~ 10x that at unit-scale outputs covers the largest of
    // T x H samples (5-6 sigma) with margin; rtol covers the two output roundings plus the
    // routing weight's rounding (fp32, exact) and fp32 reassociation over H = 4096-long sums.
    // Inputs must be scaled so that y is of order 1 (weights ~ 1 / sqrt(fan-in)).
    // e4m3: the reference quantises x and act per row as the kernels do (moe/reference.cuh
    // RowQuant), so what differs is fp32 summation order and act's bf16 rounding, which now and
    // then moves an act element to the next e4m3 value (12.5 % of it); the H100 run of
    // gpu_moe_op_test measured that the quantisation itself costs y ~4-5 % rms against the
    // unquantised layer, with outliers to ~0.27 at unit scale. The warp-specialised kernel's
    // FP8 wgmma sums each 128-long k-tile with less than fp32's precision (gemm1 promotes the
    // k-tile sums to fp32, moe/gemm_ws_sm90.cuh), so act's low bits differ from the
    // reference's more often and a few more act elements round to the neighbouring e4m3 value:
    // the H100 run of 2026-11-25 saw up to 0.062 at unit scale (against 0.05 + 0.05 |y|) at a
    // few of ~1M values; atol 0.1 covers that tail and is still ~3x below the quantisation's
    // own outliers, far below what a wrong row, scale or tile costs (order 1).
    if (t == DType::e4m3) return {5e-2, 1e-1};
    return t == DType::bf16 ? Tolerance{2e-2, 2e-2} : Tolerance{4e-3, 4e-3};
  }

  Tolerance tolerance(const Problem& p, DType t) const override {
    // atol is for outputs of order 1; y scales with each token's sum of routing weights: 1 for
    // the softmax modes (at most), routed_scaling for sigmoid_group, up to 2 for the tuner's
    // precomputed weights.
    const Shape s = shape_of(p);
    const double scale = s.routing == moe_precomputed ? 2.0
                         : s.routing == moe_sigmoid_group
                             ? std::max(1.0, std::abs(scalars_[0].tuning_value))
                             : 1.0;
    Tolerance tol = tolerance(t);
    tol.atol *= scale;
    return tol;
  }

  SearchStages search_stages() const override {
    // Each kernel's time depends on block_m and its own tunables only, and the op's time is
    // their sum: for each block_m, gemm1's tile, gemm2's tile and the small kernels are searched
    // one group at a time (hundreds of points instead of the whole product).
    return {{"block_m"},
            {{"impl1", "bn1", "bk1", "warps1", "warps_m1"},
             {"stages1", "group1", "prefetch1", "epi1", "persist1", "cluster1", "gather1"},
             {"impl2", "bn2", "bk2", "warps2", "warps_m2"},
             {"stages2", "group2", "prefetch2", "epi2", "split2", "persist2", "cluster2"},
             {"align_chunk"},
             {"route_lanes", "route_vec", "fuse_route"},
             {"combine_vec"}},
            [this](Params p) { return fit_block_m(std::move(p)); }};
  }

  /// The staged sweep's start for an outer block_m: 192 is the three-consumer warp-specialised
  /// kernels' alone, and needs four groups changed at once (both impls, 12 warps each, gemm2 at
  /// most 128 columns, gemm1 at most 3 stages), more than its one-group repair finds.
  Params fit_block_m(Params p) const {
    if (p.values[kBlockM] != 192) return p;
    for (const char* n : {"impl1", "impl2"}) p.values[param_index(n)] = 2;
    for (const char* n : {"warps1", "warps2"}) p.values[param_index(n)] = 12;
    for (const char* n : {"warps_m1", "warps_m2", "cluster1", "cluster2"})
      p.values[param_index(n)] = 1;
    for (const char* n : {"prefetch1", "prefetch2", "epi1", "epi2", "persist1", "persist2"})
      p.values[param_index(n)] = 0;
    for (const char* n : {"bk1", "bk2"}) p.values[param_index(n)] = 64;
    p.values[param_index("split2")] = 1;
    p.values[param_index("bn2")] = std::min<std::int64_t>(p.values[param_index("bn2")], 128);
    p.values[param_index("stages1")] = std::min<std::int64_t>(p.values[param_index("stages1")], 3);
    return p;
  }
  std::string_view default_strategy() const override { return "staged"; }
  std::string_view bucket_dim() const override { return "t"; }
  std::vector<std::int64_t> default_buckets() const override {
    return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  }

  double flops(const Problem& p, DType) const override {
    const Shape s = shape_of(p);
    const double pairs = static_cast<double>(s.pairs());
    return 2.0 * pairs * (static_cast<double>(s.h) * 2.0 * s.i + static_cast<double>(s.i) * s.h);
  }

  double min_bytes(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    const double es = static_cast<double>(dtype_size(t));            // weights
    const double io = static_cast<double>(dtype_size(io_type(t)));   // x and y
    const double touched = static_cast<double>(std::min<long long>(s.e, s.pairs()));
    const double weights = touched * 3.0 * static_cast<double>(s.h) * s.i * es;  // w1 + w2
    const double tokens = 2.0 * static_cast<double>(s.t) * s.h * io;             // x + y
    // Logits in (routed) or ids and weights in (precomputed); ids and weights out when routed
    // are optional and not counted.
    const double routing = s.routed() ? static_cast<double>(s.t) * s.e * 4.0
                                      : static_cast<double>(s.pairs()) * 8.0;
    return weights + tokens + routing;
  }

  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    return moe::default_params(shape_of(problem), t, device, lists(), [&](const Params& p) {
      return !invalid_reason(p, problem, t, device);
    });
  }

 private:
  /// The listed values the defaults fit a table row to (moe_defaults.hpp).
  Lists lists() const {
    return {tunables_[kBlockM].values, tunables_[kBn1].values, tunables_[kBn2].values,
            tunables_[kCombineVec].values.front()};
  }

  /// Why the point cannot be instantiated (no device needed) or can never win, or nullopt.
  std::optional<std::string> static_reason(const Params& params, const Problem& problem,
                                           DType t) const {
    if (auto why = point_reason(params, problem, t)) return why;
    return config_reason(config_of(params, t), shape_of(problem), tunables_);
  }

  std::vector<DimSpec> dims_;
  std::vector<Tunable> tunables_;
  std::vector<ScalarSpec> scalars_;
};

}  // namespace

const Op& moe_op() {
  static const MoeOp op;
  return op;
}

}  // namespace ktune
