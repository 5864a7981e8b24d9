// Host side of flash attention forward: the problem, its tensors and sizes, the device's limits
// on a point, tolerances; the rest lives in its parts (attention_parts.hpp): the kernels and
// launches (attention_launch.cpp), the space's reasons (attention_space.cpp), and the built-in
// defaults (attention_defaults.cpp).
#include "templates/attention/attention_op.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ktune/error.hpp"
#include "templates/attention/args.h"
#include "templates/attention/args_sm90.h"
#include "templates/attention/attention_defaults.hpp"
#include "templates/attention/attention_parts.hpp"
#include "templates/attention/attention_problem.hpp"

namespace ktune {
namespace {

using namespace attention;

constexpr std::int64_t kMaxGridY = 65535;                      // b * hq rows of the grid
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 30;        // int positions: row + nk < 2^31
constexpr std::int64_t kMaxRowStride = std::int64_t{1} << 23;  // a tile's offsets are 32-bit
constexpr std::int64_t kMaxRows = 2147483647;                  // varlen: int32 row offsets
constexpr std::int64_t kPages[] = {0, 16, 32, 64, 128, 256};   // 0: contiguous K/V

/// The cu_seqlens the tuner fills for a varlen problem: lengths in [1, nq] and [1, nk] (the
/// first sequence the longest, the second the shortest), from one fixed seed for both, so that
/// with nq = nk each sequence has as many keys as queries (packed prefill).
Fill query_offsets(const Shape& s) { return Fill::seq_offsets(1, s.nq); }
Fill key_offsets(const Shape& s) { return Fill::seq_offsets(1, s.nk); }

/// Score-value pairs a row sees, summed over rows: sum over i in [0, nq) of clamp(i + c, 0, nk),
/// the keys j < i + c (bottom-right aligned bounds), in closed form.
double clamped_sum(std::int64_t c, std::int64_t nq, std::int64_t nk) {
  // x = i + c runs over [c, c + nq - 1]: 0 below 0, x on [0, nk], nk above.
  const std::int64_t lo = std::max<std::int64_t>(c, 0), hi = std::min(c + nq - 1, nk);
  double sum = 0.0;
  if (lo <= hi) sum += (static_cast<double>(lo) + static_cast<double>(hi)) *
                       static_cast<double>(hi - lo + 1) / 2.0;
  const std::int64_t above = c + nq - 1 - std::max(nk, c - 1);  // x in (nk, c + nq - 1]
  if (above > 0) sum += static_cast<double>(above) * static_cast<double>(nk);
  return sum;
}

/// Score-value pairs computed for one sequence of nq queries and nk keys (see flops()).
double pairs(const Shape& s, std::int64_t nq, std::int64_t nk) {
  // Row i sees keys j < i + nk - nq + 1 (causal; else all nk) less those
  // j < i + nk - nq - window + 1 (a window), each count clamped to [0, nk].
  const std::int64_t shift = nk - nq;
  double n = s.causal ? clamped_sum(shift + 1, nq, nk)
                      : static_cast<double>(nq) * static_cast<double>(nk);
  if (s.window > 0) n -= clamped_sum(shift - s.window + 1, nq, nk);
  return n;
}

class FlashAttentionOp final : public Op {
 public:
  FlashAttentionOp()
      : dims_{{"b", 1, kMaxGridY, {}, std::nullopt, "batch"},
              {"hq", 1, kMaxGridY, {}, std::nullopt, "query heads (b * hq <= 65535)"},
              {"hkv", 1, kMaxGridY, {}, std::nullopt,
               "key/value heads, dividing hq (hq: multi-head, 1: multi-query, else grouped)"},
              {"nq", 1, kMaxSeq, {}, std::nullopt, "query rows", false, {16}},
              {"nk", 1, kMaxSeq, {}, std::nullopt, "key/value rows"},
              {"d", 8, 256, {}, std::nullopt,
               "head dimension: a multiple of 8 (32, 64, 96, 128 and 256 have tiles of their "
               "own; others run in the next one's, the columns past d zeros)",
               /*exact=*/true},
              {"causal", 0, 1, {"no", "yes"}, 0,
               "causal mask, aligned to the bottom right when nq != nk"},
              // The mask variants come after causal, and are left out of keys when off, so that
              // keys written before them parse and match with the variants off. A window is matched by distance (4096 serves 8192: both
              // bound the work per row), never against 0 (no window), its own regime.
              {"window", 0, kMaxSeq, {}, 0,
               "sliding window: 0 none, else row i sees keys j > i + nk - nq - window (with "
               "causal, the last window keys up to its diagonal)",
               false, {0}, /*keyed_at_default=*/false},
              {"softcap", 0, 1, {"no", "yes"}, 0,
               "logit soft-capping: scores become softcap * tanh(score / softcap), the cap a "
               "scalar",
               false, {}, /*keyed_at_default=*/false},
              {"alibi", 0, 1, {"no", "yes"}, 0,
               "ALiBi: score -= slope[h] * |j - (i + nk - nq)|, slopes an fp32 tensor [hq]",
               false, {}, /*keyed_at_default=*/false},
              // Added after the mask variants, left out of keys when off likewise.
              {"varlen", 0, 1, {"no", "yes"}, 0,
               "variable-length batch: q, k, v, o packed [total, h, d] with int32 cu_seqlens_q "
               "and cu_seqlens_k [b + 1]; nq and nk are the longest lengths, every rule above "
               "uses each sequence's own; lse [hq, total_q]",
               false, {}, /*keyed_at_default=*/false},
              // Added after varlen, left out of keys when off likewise; never crossed by a
              // fallback.
              {"page", 0, 256, {}, 0,
               "0: contiguous K/V; else keys per page (16, 32, 64, 128, 256) of paged K/V pools "
               "k_cache, v_cache [pages, page, hkv, d] read through an int32 block_table [b, "
               "ceil(nk / page)], with int32 seq_lens [b] keys per sequence (nk the longest; "
               "every rule above aligned to each sequence's own); with varlen=yes q and o are "
               "packed by cu_seqlens_q alone",
               /*exact=*/true, {}, /*keyed_at_default=*/false}},
        tunables_{
            {"block_m", {64, 128, 192, 256},
             "query rows per CTA (impl=1: 64 per consumer warpgroup, at most 192)"},
            {"block_n", {32, 64, 80, 128},
             "keys per K/V tile (80: impl=1 at d=256 only, where 2 stages of 128 keys do not "
             "fit)"},
            {"warps", {4, 8, 12, 16},
             "warps per CTA; impl=0: 4 or 8, each owning block_m / warps (16 or 32) query rows; "
             "impl=1: 4 per consumer warpgroup plus the producer's 4"},
            {"stages", {2, 3, 4},
             "depth of the K/V pipeline (cp.async ring, impl=1 the TMA ring); 4 for e4m3 only"},
            {"q_regs", {0, 1}, "1: Q fragments stay in registers; 0: re-read from shared memory"},
            {"smem_pad", {0, 1}, "1: shared-memory rows padded by 16 bytes; 0: XOR swizzle"},
            // Variants of the op beside each other, chosen through the same lookup: 0 is the
            // mma.sync + cp.async kernel (sm_80+), 1 the warp-specialised wgmma + TMA kernel
            // (sm_90a, flash_attention_sm90.cuh).
            {"impl", {0, 1},
             "kernel variant: 0 = mma.sync + cp.async (sm_80 and later); 1 = wgmma + TMA, "
             "a producer warpgroup and block_m / 64 consumers (sm_90a)"},
            // Added after databases were written: left out of keys at 0.
            {"pingpong", {0, 1},
             "impl=1 with 2 or 3 consumers: 1 = the consumer warpgroups take turns issuing their "
             "wgmmas (named barriers), so one's softmax runs under another's products",
             0},
            {"persistent", {0, 1},
             "impl=1: 1 = one CTA per SM loops over the query tiles (a head's last tile first), "
             "loading the next tile's Q and K/V while it finishes P V and writes O; 0 = one CTA "
             "per query tile",
             0},
            {"reg_split", {0, 1},
             "impl=1 with 2 or 3 consumers: 1 = the producer warpgroup gives its registers to "
             "the consumers (setmaxnreg: 24 + 2 x 240 or 32 + 3 x 160 per thread); 0 = every "
             "warpgroup keeps the launch bound's (168 or 128)",
             1},
            {"kv_apart", {0, 1},
             "impl=1 with 2 stages: 1 = a slot's K is freed once its Q K^T has retired and its V "
             "once P V has (two barriers), so the next K tile loads a whole tile earlier; 0 = "
             "both freed after P V",
             0},
        },
        scalars_{{"scale", 0.0, "softmax scale; <= 0: 1/sqrt(d)"},
                 {"softcap", 50.0, "tanh cap of the scaled scores with softcap=yes (> 0; Gemma 2 "
                                   "uses 50); ignored otherwise"},
                 // Tuned with scales other than 1, so that verification covers them.
                 {"q_scale", 0.25, "e4m3: q's dequantisation scale (q = stored value x q_scale)",
                  1.0},
                 {"k_scale", 0.25, "e4m3: k's dequantisation scale", 1.0},
                 {"v_scale", 0.5, "e4m3: v's dequantisation scale", 1.0}} {}

  std::string_view name() const override { return "flash_attention"; }
  std::string_view summary() const override {
    return "o = softmax(scale * q k^T [softcap, alibi, causal/window mask]) v with the row "
           "log-sum-exp; GQA/MQA, strided, variable-length batches, paged K/V";
  }
  std::string_view family() const override { return "attention"; }
  /// e4m3: q, k and v in FP8 with dequantisation scales, o in bf16 (impl=1, sm_90a).
  std::vector<DType> dtypes() const override { return {DType::bf16, DType::f16, DType::e4m3}; }
  const std::vector<DimSpec>& dims() const override { return dims_; }
  const std::vector<Tunable>& tunables() const override { return tunables_; }
  const std::vector<ScalarSpec>& scalars() const override { return scalars_; }
  std::size_t layout_size() const override { return 12; }

  Problem default_problem() const override {
    return {{2, 16, 16, 4096, 4096, 128, 0, 0, 0, 0, 0, 0}};
  }

  std::optional<std::string> problem_reason(const Problem& p) const override {
    const Shape s = shape_of(p);
    if (s.d % 8 != 0)
      return "d=" + str(s.d) + " is not a multiple of 8 (rows of 16-byte chunks; 8 to 256)";
    if (s.hq % s.hkv != 0)
      return "hq=" + str(s.hq) + " is not a multiple of hkv=" + str(s.hkv) +
             " (each key/value head serves hq / hkv query heads)";
    if (s.b * s.hq > kMaxGridY)
      return "b=" + str(s.b) + " x hq=" + str(s.hq) + " = " + str(s.b * s.hq) +
             " (batch, head) pairs; the grid allows at most " + str(kMaxGridY);
    if (std::find(std::begin(kPages), std::end(kPages), s.page) == std::end(kPages))
      return "page=" + str(s.page) + " is not a supported page size (0: contiguous; 16, 32, 64, "
             "128, 256)";
    if (s.paged() && s.pool_pages() > kMaxRows)
      return "b=" + str(s.b) + " x " + str(s.pages_per_seq()) + " pages of page=" + str(s.page) +
             ": more than 2^31 - 1 pages (int32 page ids)";
    if (s.paged() && s.hkv * s.d >= kMaxRowStride)
      return "page=" + str(s.page) + " pools rows of hkv=" + str(s.hkv) + " x d=" + str(s.d) +
             " = " + str(s.hkv * s.d) + " elements; row strides must stay below 2^23";
    if (s.varlen) {
      // The offsets are int32; the packed rows of the built-in layout are [h, d].
      if (s.b * std::max(s.nq, s.nk) > kMaxRows)
        return "varlen=yes with b=" + str(s.b) + " sequences of up to " +
               str(std::max(s.nq, s.nk)) + " rows: offsets up to " +
               str(s.b * std::max(s.nq, s.nk)) + " do not fit int32 (at most " + str(kMaxRows) +
               ")";
      if (s.hq * s.d >= kMaxRowStride)
        return "varlen=yes packs rows of hq=" + str(s.hq) + " x d=" + str(s.d) + " = " +
               str(s.hq * s.d) + " elements; row strides must stay below 2^23";
    }
    return std::nullopt;
  }

  /// q, k, v, o, lse, alibi_slopes; with varlen cu_seqlens_q and (contiguous) cu_seqlens_k;
  /// paged, k and v are the pools k_cache and v_cache ([b * ceil(nk / page), page, hkv, d]: every
  /// sequence's pages sized for nk keys), then block_table int32 [b, ceil(nk / page)] and
  /// seq_lens int32 [b]. The tuner fills the table with a permutation of the pool's pages and
  /// the lengths in [max(1, nk / 2), nk], both ends present.
  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    // Rows of q and o, of k and v: b * nq and b * nk, or with varlen the totals of the tuner's
    // cu_seqlens (its whole arrays are compared: no row may be left unwritten).
    std::int64_t rows_q = s.b * s.nq, rows_k = s.b * s.nk;
    if (s.varlen) {
      rows_q = offsets_of(query_offsets(s), s.b + 1).back();
      rows_k = offsets_of(key_offsets(s), s.b + 1).back();
    }
    if (s.paged()) rows_k = s.pool_pages() * s.page;
    const std::int64_t q = rows_q * s.hq * s.d, kv = rows_k * s.hkv * s.d;
    const DType o_type = t == DType::e4m3 ? DType::bf16 : t;  // e4m3 inputs write bf16
    std::vector<TensorSpec> out = {
        {"q", TensorRole::input, t, q},
        {s.paged() ? "k_cache" : "k", TensorRole::input, t, kv},
        {s.paged() ? "v_cache" : "v", TensorRole::input, t, kv},
        {"o", TensorRole::output, o_type, q},
        {"lse", TensorRole::output, DType::f32, s.hq * rows_q, true},
        // Required with alibi=yes; ALiBi's slopes are 2^(-8k/hq), in (0, 1].
        {"alibi_slopes", TensorRole::input, DType::f32, s.hq, !s.alibi,
         Fill::uniform(0.01f, 1.0f)}};
    if (s.varlen) {
      out.push_back({"cu_seqlens_q", TensorRole::input, DType::i32, s.b + 1, false,
                     query_offsets(s)});
      if (!s.paged())
        out.push_back({"cu_seqlens_k", TensorRole::input, DType::i32, s.b + 1, false,
                       key_offsets(s)});
    }
    if (s.paged()) {
      out.push_back({"block_table", TensorRole::input, DType::i32, s.pool_pages(), false,
                     Fill::permutation(s.pool_pages())});
      out.push_back({"seq_lens", TensorRole::input, DType::i32, s.b, false,
                     Fill::uniform_int(std::max<std::int64_t>(1, s.nk / 2), s.nk)});
    }
    out = word_aligned_side_tensors(std::move(out), t);
    out[3].alignment = 0;  // o: 16 bytes, also in bf16 under e4m3 inputs
    return out;
  }

  std::size_t alignment(const Params&, const Problem&, DType) const override { return 16; }

  /// e4m3: V transposed into Vt [b, hkv, d, fp8_vt_keys(nk)] (fp8_transpose.cuh) each call.
  std::size_t workspace_bytes(const Params&, const Problem& p, DType t) const override {
    return vt_workspace_bytes(shape_of(p), t);
  }

  /// tile_reason(), naming the tiles a head dim between them runs in.
  std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                            DType t, const DeviceInfo& device) const override {
    return naming_tiles(tile_reason(params, problem, t, device), shape_of(problem).d);
  }

  std::optional<std::string> tile_reason(const Params& params, const Problem& problem, DType t,
                                         const DeviceInfo& device) const {
    if (auto why = static_reason(params, problem, t)) return why;
    const Config c = config_of(params);
    const Shape s = kernel_shape(problem);
    if (auto why = needs_sm80_reason(device)) return why;
    if (c.impl == 1 && device.cc_major > 0 && device.cc_major != 9)
      return "impl=1 (wgmma, TMA) needs sm_90a; the device is " + str(device.cc_major) + "." +
             str(device.cc_minor);
    const unsigned smem = smem_bytes(c, s.d, t, s.page);
    if (device.smem_optin_per_block > 0 && smem > static_cast<unsigned>(device.smem_optin_per_block))
      return smem_text(c, s, t) + ", more than the device's " +
             str(device.smem_optin_per_block) + " per block";
    return std::nullopt;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    if (auto why = static_reason(params, problem, t))
      throw InvalidArgument("flash_attention: " + *why);
    return kernel_sources(config_of(params), kernel_shape(problem), shape_of(problem).d, t);
  }

  int block_threads(const Params& params, const Problem&, DType,
                    std::size_t kernel_index) const override {
    return kernel_index == 1 ? kFp8TransposeThreads : config_of(params).warps * 32;
  }

  unsigned dynamic_shared_bytes(const Params& params, const Problem& problem, DType t,
                                std::size_t kernel_index) const override {
    const Shape s = kernel_shape(problem);
    return kernel_index == 1 ? 0u : smem_bytes(config_of(params), s.d, t, s.page);
  }

  void run(const RunArgs& a, Launcher& launcher) const override { launch_attention(a, launcher); }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    return reference_sources(shape_of(p), t);
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    launch_reference(a, launcher);
  }

  Tolerance tolerance(DType t) const override {
    // P is rounded to 16 bits before P V; O is a weighted mean of values in [-2, 2). e4m3: P is
    // rounded to e4m3 (3 mantissa bits): ~2.5 % rms, max 0.04 on O of values in [-2, 2) in the
    // harness's checks (benchmarks/results/attention-fp8-h100-2026-11-24.md).
    if (t == DType::e4m3) return {8e-2, 8e-2};
    return t == DType::bf16 ? Tolerance{2e-2, 2e-2} : Tolerance{5e-3, 5e-3};
  }

  /// The tensors' bytes (the slopes only with alibi=yes); paged, the K/V rows of b sequences of
  /// nk keys (the op cannot see seq_lens: an upper bound), not the pools' padding to pages.
  double min_bytes(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    const double all = Op::min_bytes(p, t) - (s.alibi ? 0.0 : 4.0 * static_cast<double>(s.hq));
    if (!s.paged()) return all;
    const double e = static_cast<double>(dtype_size(t));
    const std::int64_t padding = s.pool_pages() * s.page - s.b * s.nk;  // rows past nk
    return all - e * 2.0 * static_cast<double>(padding * s.hkv * s.d);
  }

  double flops(const Problem& p, DType) const override {
    const Shape s = shape_of(p);
    // Score-value pairs computed: the keys each row sees; with varlen, summed over the
    // sequences of the tuner's cu_seqlens. Paged, at nk keys per sequence (the op cannot see
    // seq_lens: an upper bound).
    if (!s.varlen) return 4.0 * static_cast<double>(s.b * s.hq * s.d) * pairs(s, s.nq, s.nk);
    const std::vector<std::int64_t> cq = offsets_of(query_offsets(s), s.b + 1);
    const std::vector<std::int64_t> ck = offsets_of(key_offsets(s), s.b + 1);
    double n = 0.0;
    for (std::size_t i = 0; i + 1 < cq.size(); ++i)
      n += pairs(s, cq[i + 1] - cq[i], s.paged() ? s.nk : ck[i + 1] - ck[i]);
    return 4.0 * static_cast<double>(s.hq * s.d) * n;
  }

  /// A tuned neighbour on the other side of the short-grid rule wanted other tiles: on the
  /// H100 a 128-row configuration tuned at b=4,hq=16,nq=2048 (1024 CTAs) served to
  /// b=3,hq=16,nq=777 (336) was 0.81x of that problem's optimum, which the 64-row default
  /// finds (benchmarks/results/fallback-h100-2026-11-23-evening.md).
  /// Likewise across the Hopper defaults' regimes: the short keys that keep the mma.sync kernel,
  /// and at d=64 and d=256 the single-consumer 64-row tiles (b=6,hq=16,nq=nk=420,d=64 was served
  /// the 192-row persistent point tuned at b=16,nq=nk=512: 0.80x of its optimum, which the
  /// 64-row default finds: 0.996; benchmarks/results/attention-ffma-h100-2026-11-24.md). At
  /// d=256 the regimes are d256_single_consumer()'s, causal grids under two waves included
  /// (b=1,hq=8,nq=nk=3000 causal: 128-row tiles 0.85x of its optimum, one consumer's 1.0;
  /// benchmarks/results/attention-kv-apart-h200-2026-12-03.md).
  bool fallback_compatible(const Problem& wanted, const Problem& tuned,
                           const DeviceInfo& device) const override {
    const Shape w = kernel_shape(wanted), t = kernel_shape(tuned);
    if ((short_grid_block_n(w, device, 64) > 0) != (short_grid_block_n(t, device, 64) > 0))
      return false;
    if (device.cc_major != 9) return true;
    if ((w.nk <= kWgmmaMinKeys) != (t.nk <= kWgmmaMinKeys)) return false;
    if (w.d == 256) return d256_single_consumer(w, device) == d256_single_consumer(t, device);
    if (w.d != 64) return true;
    return wgmma_single_consumer(w, device, 192) == wgmma_single_consumer(t, device, 192);
  }

  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    return attention::default_params(kernel_shape(problem), t, device, [&](const Params& p) {
      return !invalid_reason(p, problem, t, device);
    });
  }

 private:
  /// Why the point cannot be instantiated at all (no device needed), or nullopt.
  std::optional<std::string> static_reason(const Params& params, const Problem& problem,
                                           DType t) const {
    if (auto why = point_reason(params, problem, t)) return why;
    return config_reason(config_of(params), kernel_shape(problem), shape_of(problem).d, t, *this,
                         params);
  }

  std::vector<DimSpec> dims_;
  std::vector<Tunable> tunables_;
  std::vector<ScalarSpec> scalars_;
};

}  // namespace

const Op& flash_attention_op() {
  static const FlashAttentionOp op;
  return op;
}

std::optional<std::string> output_stride_reason(const char* op, const std::int64_t* st,
                                                std::int64_t b, std::int64_t hq, bool varlen) {
  if (!varlen && b > 1 && st[9] == 0)
    return std::string(op) + ": o batch stride 0 over " + std::to_string(b) +
           " sequences would write them all to one place (outputs take a nonzero stride)";
  if (hq > 1 && st[10] == 0)
    return std::string(op) + ": o head stride 0 over " + std::to_string(hq) +
           " heads would write them all to one place (outputs take a nonzero stride)";
  return std::nullopt;
}

}  // namespace ktune
