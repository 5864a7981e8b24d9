// Host side of split-KV decode attention: the problem, the search space with a reason for every
// invalid point, per-architecture defaults (the split count picked from the device's SM count),
// the workspace, and the launches of the split kernel, the combine kernel and the reference.
// Paged problems (page > 0) read K/V from page pools through a block table, with per-sequence
// lengths; contiguous ones keep flash_attention's tensors, strides and reference. The mask
// variants (window, softcap, alibi) are flash_attention's dims, tensor and scalar, with its
// semantics; so is `varlen` (packed variable-length sequences through cu_seqlens_q/k), which
// only contiguous problems take.
#include "templates/decode/decode_op.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ktune/error.hpp"
#include "templates/attention/args.h"
#include "templates/attention/attention_op.hpp"
#include "templates/decode/args.h"
#include "templates/decode/cost_model.hpp"
#include "templates/decode/decode_defaults.hpp"
#include "templates/decode/decode_problem.hpp"
#include "templates/kernel_tensor_map.hpp"

namespace ktune {
namespace {

using namespace decode;

constexpr std::int64_t kMaxGrid = 65535;                 // b * hq (and grid y, z)
constexpr std::int64_t kMaxNq = 256;                     // decode, speculative, short chunks
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 30;  // int key positions
constexpr std::int64_t kRowAlign = 8;                    // elements: 16-byte rows
constexpr std::int64_t kPages[] = {0, 16, 32, 64, 128, 256};
constexpr std::int64_t kMaxInt = 2147483647;             // int32 page ids and lengths
constexpr unsigned kMaxSmem = 227u * 1024u;              // any GPU's most per block

/// The cu_seqlens the tuner fills for a varlen problem, flash_attention's pattern (one fixed
/// seed for both, the first sequence the longest, the second the shortest) but with key lengths
/// from 0: the second sequence (of one query) has no key, so that the empty-sequence path (o = 0,
/// lse = -inf, split 0 alone) is verified too. Query lengths in [1, nq], key lengths in [0, nk].
Fill query_offsets(const Shape& s) { return Fill::seq_offsets(1, s.nq); }
Fill key_offsets(const Shape& s) { return Fill::seq_offsets(0, s.nk); }

/// The same problem as flash_attention's: the 7 dims both ops share (b .. causal), then its mask
/// variants (window, softcap, alibi), varlen and page, which decode has under the same names.
Problem attention_problem(const Problem& p) {
  const Shape s = shape_of(p);
  Problem a;
  a.values.assign(p.values.begin(), p.values.begin() + kPage);
  a.values.insert(a.values.end(),
                  {s.window, s.softcap ? 1 : 0, s.alibi ? 1 : 0, s.varlen ? 1 : 0, s.page});
  return a;
}

// Tensor order: q, k, v, o, lse as flash_attention's (k and v are the pools when paged), then
// block_table and seq_lens for paged problems only, then alibi_slopes, then cu_seqlens_q and
// cu_seqlens_k for varlen problems only: a caller's table of pointers only grows, and a
// contiguous problem's tensors are flash_attention's, in its order.
enum Tensor : std::size_t { kQ, kK, kV, kO, kLse, kBlockTable, kSeqLens };

/// Where alibi_slopes sits: after lse (flash_attention's index), or paged after seq_lens.
std::size_t slopes_index(const Shape& s) { return s.paged() ? kSeqLens + 1 : kLse + 1; }
/// Where cu_seqlens_q sits (cu_seqlens_k next): after the slopes, flash_attention's 6 and 7.
std::size_t cu_seqlens_index(const Shape& s) { return slopes_index(s) + 1; }

std::string str(std::int64_t v) { return std::to_string(v); }
const char* kernel_type(DType t) { return t == DType::bf16 ? "ktune::bf16" : "ktune::fp16"; }
const char* cpp_bool(bool b) { return b ? "true" : "false"; }

/// The template arguments of the mask variants: ", WINDOW, SOFTCAP, ALIBI".
std::string variant_args(const Shape& s) {
  return std::string(", ") + cpp_bool(s.window > 0) + ", " + cpp_bool(s.softcap) + ", " +
         cpp_bool(s.alibi);
}

void* tensor(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}

/// Strides from args.layout (else contiguous [B, H, S, D], or varlen packed [total, H, D]) and
/// the scale, checked as flash_attention checks them; throws InvalidArgument. Paged, the k and v
/// entries of the layout are ignored (neither read nor checked): the pools are contiguous
/// [pages, page, Hkv, D]. Varlen, its batch strides are ignored likewise (set to 0): sequences
/// start at their cu_seqlens rows.
struct Common {
  std::int64_t st[12];
  float scale;
};

Common common_args(const RunArgs& a, const Shape& s) {
  Common c{};
  if (a.layout) {
    static const char* const names[12] = {"q batch", "q head", "q seq", "k batch", "k head",
                                          "k seq",   "v batch", "v head", "v seq", "o batch",
                                          "o head",  "o seq"};
    for (int i = 0; i < 12; ++i) {
      c.st[i] = a.layout[i];
      if (s.paged() && i >= 3 && i < 9) continue;
      if (s.varlen && i % 3 == 0) {
        c.st[i] = 0;
        continue;
      }
      const bool row = i % 3 == 2;
      if (c.st[i] < (row ? 1 : 0) || c.st[i] % kRowAlign != 0)
        throw InvalidArgument(std::string("flash_decode: ") + names[i] + " stride " +
                              str(c.st[i]) + " must be a " + (row ? "positive" : "non-negative") +
                              " multiple of " + str(kRowAlign) +
                              " elements (rows start 16-byte aligned)");
    }
  }
  if (!a.layout && s.varlen) {
    // FlashAttention's packed [total, H, D]; no batch stride.
    const std::int64_t packed[12] = {0, s.d, s.hq * s.d,  0, s.d, s.hkv * s.d,
                                     0, s.d, s.hkv * s.d, 0, s.d, s.hq * s.d};
    for (int i = 0; i < 12; ++i) c.st[i] = packed[i];
  } else if (!a.layout) {
    const std::int64_t q_head = s.nq * s.d, kv_head = s.nk * s.d;
    const std::int64_t contiguous[12] = {s.hq * q_head,  q_head,  s.d, s.hkv * kv_head, kv_head,
                                         s.d,            s.hkv * kv_head, kv_head, s.d,
                                         s.hq * q_head,  q_head,  s.d};
    for (int i = 0; i < 12; ++i) c.st[i] = contiguous[i];
  }
  if (s.paged()) {  // the pools' strides: row Hkv * D, head D, no batch
    for (int i : {3, 6}) c.st[i] = 0;
    for (int i : {4, 7}) c.st[i] = s.d;
    for (int i : {5, 8}) c.st[i] = s.hkv * s.d;
  }
  const double scale = a.scalars[0];
  if (std::isinf(scale))
    throw InvalidArgument("flash_decode: scale " + std::to_string(scale) + " is not finite");
  // <= 0 (and NaN) select the usual 1/sqrt(d).
  c.scale = scale > 0 ? static_cast<float>(scale)
                      : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d)));
  return c;
}

FlashDecodeArgs make_args(const RunArgs& a, const Shape& s, const Config& c) {
  const Common m = common_args(a, s);
  FlashDecodeArgs k{};
  k.q = tensor(a, kQ);
  k.k = tensor(a, kK);
  k.v = tensor(a, kV);
  k.o = tensor(a, kO);
  k.lse = static_cast<float*>(tensor(a, kLse));
  if (s.paged()) {
    k.block_table = static_cast<const int*>(tensor(a, kBlockTable));
    k.seq_lens = static_cast<const int*>(tensor(a, kSeqLens));
    if (!k.block_table || !k.seq_lens)
      throw InvalidArgument("flash_decode: page=" + str(s.page) +
                            " needs the block_table and seq_lens tensors");
    k.page = static_cast<int>(s.page);
    k.pages_per_seq = static_cast<int>(s.pages_per_seq());
  }
  if (c.splits > 1 && !c.merge) {  // merged in a cluster: no partials to keep
    if (a.workspace == 0 || a.workspace % 16 != 0)
      throw InvalidArgument("flash_decode: splits=" + str(c.splits) +
                            " needs a 16-byte aligned workspace of workspace_bytes()");
    const std::uint64_t part_o_bytes =
        static_cast<std::uint64_t>(c.splits * s.b * s.hq * s.nq * tile_head_dim(s.d)) * 4;
    k.part_o = reinterpret_cast<float*>(static_cast<std::uintptr_t>(a.workspace));
    k.part_lse = reinterpret_cast<float*>(static_cast<std::uintptr_t>(a.workspace + part_o_bytes));
  }
  k.q_batch_stride = m.st[0], k.q_head_stride = m.st[1], k.q_row_stride = m.st[2];
  k.k_batch_stride = m.st[3], k.k_head_stride = m.st[4], k.k_row_stride = m.st[5];
  k.v_batch_stride = m.st[6], k.v_head_stride = m.st[7], k.v_row_stride = m.st[8];
  k.o_batch_stride = m.st[9], k.o_head_stride = m.st[10], k.o_row_stride = m.st[11];
  if (std::optional<std::string> why =
          output_stride_reason("flash_decode", m.st, s.b, s.hq, s.varlen))
    throw InvalidArgument(*why);
  k.batch = static_cast<int>(s.b);
  k.heads_q = static_cast<int>(s.hq);
  k.heads_kv = static_cast<int>(s.hkv);
  k.seq_q = static_cast<int>(s.nq);
  k.seq_k = static_cast<int>(s.nk);
  k.group = static_cast<int>(s.group());
  k.splits = c.splits;
  k.tiles_per_split = static_cast<int>(
      flash_decode_tiles_per_split(split_span(s, c.block_n), c.block_n, c.splits));
  k.split_keys = k.tiles_per_split * c.block_n;
  k.scale = m.scale;
  // The variants' arguments are read only when the problem asks for them.
  k.window = static_cast<int>(s.window);  // <= 2^30, the dim's range
  if (s.softcap) {
    const double cap = a.scalars[1];
    if (!(cap > 0) || std::isinf(cap))
      throw InvalidArgument("flash_decode: softcap " + std::to_string(cap) +
                            " must be a positive finite cap with softcap=yes");
    k.softcap = static_cast<float>(cap);
  }
  if (s.alibi) {
    k.alibi_slopes = static_cast<const float*>(tensor(a, slopes_index(s)));
    if (!k.alibi_slopes)
      throw InvalidArgument("flash_decode: alibi=yes needs the alibi_slopes tensor ([hq] fp32)");
  }
  if (s.varlen) {
    k.cu_seqlens_q = static_cast<const int*>(tensor(a, cu_seqlens_index(s)));
    k.cu_seqlens_k = static_cast<const int*>(tensor(a, cu_seqlens_index(s) + 1));
    if (!k.cu_seqlens_q || !k.cu_seqlens_k)
      throw InvalidArgument(std::string("flash_decode: varlen=yes needs ") +
                            (k.cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q") +
                            " ([b + 1] int32 row offsets)");
  }
  return k;
}

/// tma=1: the tensor maps of K and V (FlashDecodeTmaArgs) over the data's head dim (s.d, not
/// the tiles'), boxes of 64 columns by block_n keys; keys past nk and columns past d land as
/// zeros. A broadcast (stride 0 over more than one head or batch) has no tensor map.
void add_tensor_maps(FlashDecodeTmaArgs& k, const Shape& s, DType t, int block_n) {
  refuse_broadcast("flash_decode tma=1", "k", s.hkv, s.b, k.k_head_stride, k.k_batch_stride,
                   "use tma=0");
  refuse_broadcast("flash_decode tma=1", "v", s.hkv, s.b, k.v_head_stride, k.v_batch_stride,
                   "use tma=0");
  k.k_map = operand_map(k.k, t, s.d, s.nk, s.hkv, s.b, k.k_row_stride, k.k_head_stride,
                        k.k_batch_stride, block_n);
  k.v_map = operand_map(k.v, t, s.d, s.nk, s.hkv, s.b, k.v_row_stride, k.v_head_stride,
                        k.v_batch_stride, block_n);
}

class FlashDecodeOp final : public Op {
 public:
  FlashDecodeOp()
      : dims_{{"b", 1, kMaxGrid, {}, std::nullopt, "batch"},
              {"hq", 1, kMaxGrid, {}, std::nullopt, "query heads (b * hq <= 65535)"},
              {"hkv", 1, kMaxGrid, {}, std::nullopt,
               "key/value heads, dividing hq; the hq / hkv query heads of a group share a tile"},
              // Defaults to 1 (decode), and stays in every key (keyed_at_default).
              {"nq", 1, kMaxNq, {}, 1,
               "query rows per sequence (1: decode; up to 256: speculative, chunked prefill)",
               false, {16}},
              {"nk", 1, kMaxSeq, {}, std::nullopt, "key/value rows (the KV cache length)"},
              {"d", 8, 256, {}, std::nullopt,
               "head dimension: a multiple of 8 (32, 64, 96, 128 and 256 have tiles of their "
               "own; others run in the next one's, the columns past d zeros)",
               /*exact=*/true},
              {"causal", 0, 1, {"no", "yes"}, 0,
               "causal mask, aligned to the bottom right (query row i sees keys j <= nk - nq + i)"},
              {"page", 0, 256, {}, 0,
               "0: contiguous K/V; else keys per page (16, 32, 64, 128, 256) of paged K/V pools "
               "[pages, page, hkv, d] read through a block table, with per-sequence lengths "
               "(nk their maximum; causal aligned to each sequence's own length)",
               /*exact=*/true, {}, /*keyed_at_default=*/false},
              // flash_attention's mask variants, after page and left out of keys when off, so
              // that keys written before them parse and match with the variants off. Aligned as
              // causal is: to nk, or paged to each sequence's own length.
              {"window", 0, kMaxSeq, {}, 0,
               "sliding window: 0 none, else query row i sees keys j > i + nk - nq - window (with "
               "causal, the last window keys up to its diagonal)",
               false, {0}, /*keyed_at_default=*/false},
              {"softcap", 0, 1, {"no", "yes"}, 0,
               "logit soft-capping: scores become softcap * tanh(score / softcap), the cap a "
               "scalar",
               false, {}, /*keyed_at_default=*/false},
              {"alibi", 0, 1, {"no", "yes"}, 0,
               "ALiBi: score -= slope[h] * |j - (i + nk - nq)|, slopes an fp32 tensor [hq]",
               false, {}, /*keyed_at_default=*/false},
              // flash_attention's varlen, after the variants and left out of keys when off
              // likewise (enumerated: the lookup never serves one from the other).
              {"varlen", 0, 1, {"no", "yes"}, 0,
               "variable-length batch: q, k, v, o packed [total, h, d] with int32 cu_seqlens_q "
               "and cu_seqlens_k [b + 1]; nq and nk are the longest lengths, every rule above "
               "uses each sequence's own; lse [hq, total_q]; contiguous K/V only (page=0)",
               false, {}, /*keyed_at_default=*/false}},
        tunables_{
            {"splits", kTunableValues[kSplits],
             "CTAs along the key axis, merged by a combine kernel (1: none); the default picks "
             "enough to fill every SM"},
            {"block_m", kTunableValues[kBlockM],
             "packed rows (query heads of a group x query rows) per CTA"},
            {"block_n", kTunableValues[kBlockN], "keys per K/V tile"},
            {"warps", kTunableValues[kWarps],
             "warps per CTA; each takes block_n / warps keys of every tile"},
            {"stages", kTunableValues[kStages], "depth of the cp.async K/V ring"},
            // Added after databases were written: keys without it mean merge=0.
            {"merge", kTunableValues[kMerge],
             "how the splits are merged: 0 the combine kernel (partials in the workspace); 1 in a "
             "thread block cluster of the splits' CTAs through their shared memory (sm_90; "
             "splits 2, 4, 8 or 16, contiguous K/V, not varlen; no workspace, one kernel)",
             0},
            // Added after databases were written: keys without it mean kv_split=0.
            {"kv_split", kTunableValues[kKvSplit],
             "d=96's tiles (d = 72-96): 0 K/V rows padded to 208 bytes; 1 each tile in two "
             "parts, chunks 0-7 in swizzled 128-byte rows and 8-11 in 64-byte rows, so that a "
             "warp's copies fill whole shared-memory lines",
             0},
            // Added after databases were written: keys without it mean tma=0.
            {"tma", kTunableValues[kTma],
             "how K/V tiles reach shared memory: 0 16-byte cp.async copies by every thread; 1 "
             "tensor-map copies (TMA) of whole 64-column boxes issued by one thread, completing "
             "on an mbarrier per stage (sm_90; contiguous K/V, not varlen, d = 64, 128 or 256's "
             "tiles)",
             0},
        },
        scalars_{{"scale", 0.0, "softmax scale; <= 0: 1/sqrt(d)"},
                 {"softcap", 50.0, "tanh cap of the scaled scores with softcap=yes (> 0; Gemma 2 "
                                   "uses 50); ignored otherwise"}} {}

  std::string_view name() const override { return "flash_decode"; }
  std::string_view summary() const override {
    return "split-KV attention for decode and short queries: GQA heads packed into one tile, "
           "partials merged by log-sum-exp; strided or paged KV (block table, per-sequence "
           "lengths) or packed variable-length batches, causal, sliding window, softcap, "
           "ALiBi, with the row log-sum-exp";
  }
  std::string_view family() const override { return "decode"; }
  const std::vector<DimSpec>& dims() const override { return dims_; }
  const std::vector<Tunable>& tunables() const override { return tunables_; }
  const std::vector<ScalarSpec>& scalars() const override { return scalars_; }
  std::size_t layout_size() const override { return 12; }

  // The first decode bar: 16 sequences, 32 query heads over 8 KV heads, 4096 keys.
  Problem default_problem() const override {
    return {{16, 32, 8, 1, 4096, 128, 0, 0, 0, 0, 0, 0}};
  }

  std::optional<std::string> problem_reason(const Problem& p) const override {
    const Shape s = shape_of(p);
    if (s.d % 8 != 0)
      return "d=" + str(s.d) + " is not a multiple of 8 (rows of 16-byte chunks; 8 to 256)";
    if (s.hq % s.hkv != 0)
      return "hq=" + str(s.hq) + " is not a multiple of hkv=" + str(s.hkv) +
             " (each key/value head serves hq / hkv query heads)";
    if (s.b * s.hq > kMaxGrid)
      return "b=" + str(s.b) + " x hq=" + str(s.hq) + " = " + str(s.b * s.hq) +
             " (batch, head) pairs; at most " + str(kMaxGrid);
    if (std::find(std::begin(kPages), std::end(kPages), s.page) == std::end(kPages))
      return "page=" + str(s.page) + " is not a supported page size (0: contiguous; 16, 32, 64, "
             "128, 256)";
    if (s.paged() && s.pool_pages() > kMaxInt)
      return "b=" + str(s.b) + " x " + str(s.pages_per_seq()) + " pages of page=" + str(s.page) +
             ": more than 2^31 - 1 pages (int32 page ids)";
    if (s.varlen && s.paged())
      // A paged cache has its own per-sequence key lengths (seq_lens); packed queries against
      // pages would need a second layout in the kernels, which no caller has asked for yet.
      return "varlen=yes with page=" + str(s.page) +
             ": variable-length batches are packed contiguous K/V (page=0); a paged cache gives "
             "each sequence its own length through seq_lens";
    if (s.varlen && s.b * std::max(s.nq, s.nk) > kMaxInt)
      return "varlen=yes with b=" + str(s.b) + " sequences of up to " +
             str(std::max(s.nq, s.nk)) + " rows: offsets up to " +
             str(s.b * std::max(s.nq, s.nk)) + " do not fit int32 (at most " + str(kMaxInt) + ")";
    return std::nullopt;
  }

  /// Contiguous: q, k, v, o, the optional lse and alibi_slopes, as flash_attention's six. Paged:
  /// the same first five (k and v the pools [b * ceil(nk / page), page, hkv, d], sized for every
  /// sequence at nk), then block_table int32 [b, ceil(nk / page)], seq_lens int32 [b] and
  /// alibi_slopes. The slopes (fp32 [hq]) are required with alibi=yes and ignored otherwise. The
  /// tuner fills the block table with a permutation of the pool's pages, the lengths in
  /// [max(1, nk / 16), nk], both ends present, and the slopes as flash_attention's. Varlen
  /// (contiguous only): flash_attention's eight, q, k, v, o packed [total, h, d] and lse
  /// [hq, total_q] sized by the tuner's cu_seqlens (query_offsets(), key_offsets()), then
  /// cu_seqlens_q and cu_seqlens_k int32 [b + 1] after the slopes.
  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    // ALiBi's slopes are 2^(-8k/hq), in (0, 1].
    const TensorSpec slopes{"alibi_slopes", TensorRole::input, DType::f32, s.hq, !s.alibi,
                            Fill::uniform(0.01f, 1.0f)};
    if (!s.paged()) {
      // Rows of q and o, of k and v: b * nq and b * nk, or varlen the totals of the tuner's
      // cu_seqlens (the whole arrays are compared: no row may be left unwritten).
      std::int64_t rows_q = s.b * s.nq, rows_k = s.b * s.nk;
      if (s.varlen) {
        rows_q = offsets_of(query_offsets(s), s.b + 1).back();
        rows_k = offsets_of(key_offsets(s), s.b + 1).back();
      }
      const std::int64_t q = rows_q * s.hq * s.d, kv = rows_k * s.hkv * s.d;
      std::vector<TensorSpec> out = {{"q", TensorRole::input, t, q},
                                     {"k", TensorRole::input, t, kv},
                                     {"v", TensorRole::input, t, kv},
                                     {"o", TensorRole::output, t, q},
                                     {"lse", TensorRole::output, DType::f32, s.hq * rows_q, true},
                                     slopes};
      if (s.varlen) {
        out.push_back({"cu_seqlens_q", TensorRole::input, DType::i32, s.b + 1, false,
                       query_offsets(s)});
        out.push_back({"cu_seqlens_k", TensorRole::input, DType::i32, s.b + 1, false,
                       key_offsets(s)});
      }
      return word_aligned_side_tensors(std::move(out), t);
    }
    const std::int64_t q = s.b * s.hq * s.nq * s.d;
    const std::int64_t pool = s.pool_pages() * s.page * s.hkv * s.d;
    return word_aligned_side_tensors(
        {{"q", TensorRole::input, t, q},
            {"k_cache", TensorRole::input, t, pool},
            {"v_cache", TensorRole::input, t, pool},
            {"o", TensorRole::output, t, q},
            {"lse", TensorRole::output, DType::f32, s.b * s.hq * s.nq, true},
            {"block_table", TensorRole::input, DType::i32, s.pool_pages(), false,
             Fill::permutation(s.pool_pages())},
            {"seq_lens", TensorRole::input, DType::i32, s.b, false,
             Fill::uniform_int(std::max<std::int64_t>(1, s.nk / 16), s.nk)},
            slopes},
        t);
  }

  /// Paged: the K/V rows of b sequences of nk keys each (the most any sequence may have: the op
  /// cannot see seq_lens, so this is an upper bound, about 1.9x the rows of the tuner's lengths),
  /// not the pools' padding to whole pages; q, o, lse, the block table and the lengths. The
  /// slopes count only with alibi=yes (read only then). Contiguous, the tensors' bytes: varlen,
  /// the rows of the tuner's lengths and the offsets.
  double min_bytes(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    const double slopes = 4.0 * static_cast<double>(s.hq);
    if (!s.paged()) return Op::min_bytes(p, t) - (s.alibi ? 0.0 : slopes);
    const double e = static_cast<double>(dtype_size(t));
    return e * static_cast<double>(2 * s.b * s.hq * s.nq * s.d) +
           e * static_cast<double>(2 * s.b * s.nk * s.hkv * s.d) +
           4.0 * static_cast<double>(s.b * s.hq * s.nq + s.pool_pages() + s.b) +
           (s.alibi ? slopes : 0.0);
  }

  /// Partial O (fp32, [splits, B, Hq, Nq, D]) then partial log-sum-exp ([splits, B, Hq, Nq]);
  /// none with one split. Varlen, at the longest lengths: the kernels index the workspace by
  /// (b, h, query row) whatever the packing.
  std::size_t workspace_bytes(const Params& params, const Problem& problem,
                              DType) const override {
    const Config c = config_of(params);
    if (c.splits <= 1 || c.merge) return 0;
    const Shape s = kernel_shape(problem);  // partial rows of the tiles' d
    return static_cast<std::size_t>(c.splits * s.b * s.hq * s.nq * (s.d + 1)) * 4;
  }

  std::size_t alignment(const Params&, const Problem&, DType) const override { return 16; }

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
    if (c.merge && device.cc_major > 0 && device.cc_major < 9)
      return "merge=1 needs thread block clusters (compute capability 9.0 or later; this device "
             "has " + str(device.cc_major) + "." + str(device.cc_minor) + ")";
    if (c.tma && device.cc_major > 0 && device.cc_major < 9)
      return "tma=1 needs the tensor memory accelerator (compute capability 9.0 or later; this "
             "device has " + str(device.cc_major) + "." + str(device.cc_minor) + ")";
    const unsigned smem = smem_bytes(c, s);
    if (device.smem_optin_per_block > 0 && smem > static_cast<unsigned>(device.smem_optin_per_block))
      return smem_text(c, s) + ", more than the device's " + str(device.smem_optin_per_block) +
             " per block";
    return std::nullopt;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    if (auto why = static_reason(params, problem, t))
      throw InvalidArgument("flash_decode: " + *why);
    const Config c = config_of(params);
    const Shape s = kernel_shape(problem);
    const std::int64_t dv = shape_of(problem).d;  // the data's head dim, <= s.d
    // Trailing template arguments at their defaults are left out, so that a kernel without
    // variants or varlen (and a contiguous one) keeps the name expression it had before them.
    // The combine reads args.cu_seqlens_q instead of a flag: its name never changes.
    // merge=1 spells every argument up to CLUSTER (page 0 and not varlen there); a head dim
    // between the tiles (dv < s.d) every argument, then DV; kv_split=1 every one, then true;
    // tma=1 every one up to KV_SPLIT (false there), then true.
    const std::string tail =
        c.tma ? ", 0" + variant_args(s) + ", false, " + str(c.merge ? c.splits : 1) + ", " +
                    str(dv) + ", false, true"
        : dv != s.d || c.kv_split
            ? ", " + str(s.page) + variant_args(s) + ", " + cpp_bool(s.varlen) + ", " +
                  str(c.merge ? c.splits : 1) + ", " + str(dv) + (c.kv_split ? ", true" : "")
        : c.merge ? ", 0" + variant_args(s) + ", false, " + str(c.splits)
        : s.variants() || s.varlen
            ? ", " + str(s.page) + variant_args(s) + (s.varlen ? ", true" : "")
        : s.paged() ? ", " + str(s.page)
                    : std::string();
    std::vector<KernelSource> k = {
        {"decode/flash_decode.cuh",
         std::string("ktune::flash_decode_split<") + kernel_type(t) + ", " + str(s.d) + ", " +
             str(c.block_m) + ", " + str(c.block_n) + ", " + str(c.warps) + ", " + str(c.stages) +
             ", " + cpp_bool(s.causal) + tail + ">"}};
    if (c.splits > 1 && !c.merge)
      k.push_back({"decode/flash_decode.cuh",
                   std::string("ktune::flash_decode_combine<") + kernel_type(t) + ", " + str(s.d) +
                       (dv != s.d ? ", " + str(dv) : std::string()) + ">"});
    return k;
  }

  int block_threads(const Params& params, const Problem&, DType,
                    std::size_t kernel_index) const override {
    return kernel_index == 0 ? config_of(params).warps * 32 : kFlashDecodeCombineWarps * 32;
  }

  unsigned dynamic_shared_bytes(const Params& params, const Problem& problem, DType,
                                std::size_t kernel_index) const override {
    const Shape s = kernel_shape(problem);
    return kernel_index == 0 ? smem_bytes(config_of(params), s) : 0;
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const Config c = config_of(*a.params);
    FlashDecodeTmaArgs k{};
    static_cast<FlashDecodeArgs&>(k) = make_args(a, s, c);
    if (c.tma) add_tensor_maps(k, s, a.dtype, c.block_n);
    const FlashDecodeArgs& base = k;
    KernelLaunch split;
    split.kernel = a.kernels[0];
    split.grid[0] = static_cast<unsigned>(row_tiles(s, c.block_m));
    split.grid[1] = static_cast<unsigned>(c.splits);
    split.grid[2] = static_cast<unsigned>(s.b * s.hkv);
    if (c.merge) {  // the splits along x, one cluster each (row tiles along y)
      std::swap(split.grid[0], split.grid[1]);
      split.cluster = static_cast<unsigned>(c.splits);
    }
    split.block[0] = static_cast<unsigned>(c.warps * 32);
    split.shared_bytes = smem_bytes(c, kernel_shape(*a.problem));
    split.args = &k;
    split.args_size = c.tma ? sizeof k : sizeof base;
    launcher.launch(split);
    if (c.splits == 1 || c.merge) return;
    KernelLaunch combine;
    combine.kernel = a.kernels[1];
    combine.grid[0] = static_cast<unsigned>((s.b * s.hq * s.nq + kFlashDecodeCombineWarps - 1) /
                                            kFlashDecodeCombineWarps);
    combine.block[0] = kFlashDecodeCombineWarps * 32;
    combine.args = &base;
    combine.args_size = sizeof base;
    combine.programmatic = true;  // scheduled during the split kernel's tail (common/pdl.cuh)
    launcher.launch(combine);
  }

  // Every problem is flash_attention's too (dims, scalars, strides, math, mask variants, varlen
  // and paged K/V): its fp32 reference (one warp per query row, each key found directly, through
  // the block table when paged) serves unchanged. The tolerance and the flop count are
  // flash_attention's (flops at nk keys per sequence: an upper bound when paged); varlen flops are
  // summed over the tuner's lengths.
  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    return flash_attention_op().reference_kernels(attention_problem(p), t);
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const Problem fa = attention_problem(*a.problem);
    RunArgs b = a;
    b.problem = &fa;
    // Paged tensors in flash_attention's order: the slopes before the table and the lengths.
    std::uint64_t paged[8];
    if (s.paged()) {
      std::copy(a.tensors, a.tensors + kBlockTable, paged);
      paged[kBlockTable] = a.tensors[slopes_index(s)];
      paged[kBlockTable + 1] = a.tensors[kBlockTable];
      paged[kBlockTable + 2] = a.tensors[kSeqLens];
      b.tensors = paged;
    }
    flash_attention_op().run_reference(b, launcher);
  }

  Tolerance tolerance(DType t) const override { return flash_attention_op().tolerance(t); }

  double flops(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    const Op& fa = flash_attention_op();
    if (!s.varlen) return fa.flops(attention_problem(p), t);
    // Each sequence as a batch of one at its own lengths (flash_attention's closed form gives 0
    // for a sequence without queries or keys), over the tuner's cu_seqlens.
    const std::vector<std::int64_t> cq = offsets_of(query_offsets(s), s.b + 1);
    const std::vector<std::int64_t> ck = offsets_of(key_offsets(s), s.b + 1);
    Problem one = attention_problem(p);
    one.values[kB] = 1;
    one.values.back() = 0;  // varlen off: one plain sequence
    double n = 0.0;
    for (std::size_t i = 0; i + 1 < cq.size(); ++i) {
      one.values[kNq] = cq[i + 1] - cq[i];
      one.values[kNk] = ck[i + 1] - ck[i];
      n += fa.flops(one, t);
    }
    return n;
  }

  /// The built-in configuration (decode_defaults.cpp): the table row's tiles and split count
  /// for this device, or the smallest tiles where the row's cannot run here.
  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    const auto valid = [&](const Params& p) { return !invalid_reason(p, problem, t, device); };
    return decode::default_params(kernel_shape(problem), shape_of(problem).d, device, valid);
  }

  std::string default_note(const Problem& problem, DType, const DeviceInfo& device) const override {
    if (!decode::cost_model_serves(kernel_shape(problem), device)) return {};
    return "the default is the H100 decode cost model's ranking of the space, or the rules' "
           "point where predicted within 2 % of its pick (KTUNE_DECODE_COST_MODEL=0: the "
           "rules alone)";
  }

 private:
  /// Why the point cannot be instantiated or can never win (no device needed), or nullopt.
  std::optional<std::string> static_reason(const Params& params, const Problem& problem,
                                           DType t) const {
    if (auto why = point_reason(params, problem, t)) return why;
    const Config c = config_of(params);
    const Shape s = kernel_shape(problem);
    if (c.kv_split && s.d != 96)
      return "kv_split=1 is for d=96's tiles (head dims 72 to 96), not d=" + str(s.d) + "'s";
    if (c.tma) {
      if (s.paged() || s.varlen)
        return std::string("tma=1 with ") + (s.paged() ? "page=" + str(s.page) : "varlen=yes") +
               ": tensor maps read contiguous, fixed-length K/V only";
      if (s.d != 64 && s.d != 128 && s.d != 256)
        return "tma=1 is for d = 64, 128 and 256's tiles, not d=" + str(s.d) + "'s";
    }
    if (c.block_n % (16 * c.warps) != 0)
      return "block_n=" + str(c.block_n) + " / warps=" + str(c.warps) + " = " +
             str(c.block_n / c.warps) + " keys per warp (each warp takes whole 16-key slices)";
    if (const int acc = flash_decode_accumulators(static_cast<int>(s.d), c.block_m, c.block_n,
                                                  c.warps);
        acc > kMaxAccumulators)
      return "block_m=" + str(c.block_m) + " at d=" + str(s.d) + " with " +
             str(c.block_n / c.warps) + " keys per warp: " + str(acc) +
             " fp32 accumulators of O and S per thread (at most " + str(kMaxAccumulators) +
             "; ptxas spills above)";
    if (c.block_m > 16 && 2 * s.rows() <= c.block_m)
      return "block_m=" + str(c.block_m) + " for " + str(s.rows()) + " packed rows (" +
             str(s.group()) + " heads per group x nq=" + str(s.nq) +
             "): half the tile or more would be padding; block_m=" + str(c.block_m / 2) +
             " reads the same K/V";
    const std::int64_t span = split_span(s, c.block_n);
    const std::int64_t used = flash_decode_used_splits(span, c.block_n, c.splits);
    if (used < c.splits)
      return "splits=" + str(c.splits) + " over " + str(flash_decode_tiles(span, c.block_n)) +
             " key tiles of block_n=" + str(c.block_n) + " (nk=" + str(s.nk) +
             (span < s.nk ? ", the last " + str(span) + " in reach of the window" : "") + "): " +
             str(c.splits - used) + " splits would be empty";
    if (smem_bytes(c, s) > kMaxSmem)
      return smem_text(c, s) + ", more than the 227 KiB any GPU gives a block";
    if (c.merge) {
      if (c.splits != 2 && c.splits != 4 && c.splits != 8 && c.splits != 16)
        return "merge=1 with splits=" + str(c.splits) +
               ": a cluster holds 2, 4, 8 or 16 splits (use merge=0, the combine kernel)";
      if (s.paged() || s.varlen)
        return std::string("merge=1 with ") + (s.paged() ? "page=" + str(s.page) : "varlen=yes") +
               ": clusters merge contiguous, fixed-length K/V only (a split past a sequence's "
               "end exits before the cluster's barriers)";
      if (row_tiles(s, c.block_m) > kMaxGrid)
        return "merge=1: " + str(row_tiles(s, c.block_m)) + " row tiles of block_m=" +
               str(c.block_m) + " along y, at most " + str(kMaxGrid);
    }
    // Anything else the kernel's static_asserts would reject (nothing, with the lists above).
    if (const char* why = flash_decode_invalid_reason(static_cast<int>(s.d), c.block_m, c.block_n,
                                                      c.warps, c.stages, static_cast<int>(s.page),
                                                      s.varlen, c.kv_split != 0, c.tma != 0))
      return params_key(params) + ": " + why;
    return std::nullopt;
  }

  static std::string smem_text(const Config& c, const Shape& s) {
    const std::int64_t d = s.d;
    return "block_m=" + str(c.block_m) + ", block_n=" + str(c.block_n) + ", stages=" +
           str(c.stages) + " at d=" + str(d) + " need " + str(smem_bytes(c, s)) +
           " bytes of shared memory (Q tile + " + str(c.stages) + " K and V tiles)";
  }

  std::vector<DimSpec> dims_;
  std::vector<Tunable> tunables_;
  std::vector<ScalarSpec> scalars_;
};

}  // namespace

const Op& flash_decode_op() {
  static const FlashDecodeOp op;
  return op;
}

}  // namespace ktune
