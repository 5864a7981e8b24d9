// Host side of flash attention forward: the problem, the search space with a reason for every
// invalid point, the launches of the kernel and its reference; the built-in defaults are in
// attention_defaults.cpp.
#include "templates/attention/attention_op.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ktune/error.hpp"
#include "templates/attention/args.h"
#include "templates/attention/args_sm90.h"
#include "templates/attention/attention_defaults.hpp"
#include "templates/attention/attention_problem.hpp"
#include "templates/kernel_tensor_map.hpp"

namespace ktune {
namespace {

using namespace attention;

constexpr std::int64_t kMaxGridY = 65535;                      // b * hq rows of the grid
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 30;        // int positions: row + nk < 2^31
constexpr std::int64_t kMaxRowStride = std::int64_t{1} << 23;  // a tile's offsets are 32-bit
constexpr std::int64_t kRowAlign = 8;                          // elements: 16-byte rows
constexpr std::int64_t kMaxRows = 2147483647;                  // varlen: int32 row offsets
constexpr unsigned kReferenceThreads = 256;                    // 8 query rows per block
constexpr std::int64_t kPages[] = {0, 16, 32, 64, 128, 256};   // 0: contiguous K/V
constexpr std::int64_t kMaxPageIds = 2147483647;              // int32 block table entries


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

struct Config {
  int block_m, block_n, warps, stages;
  bool q_regs, smem_pad;
  int impl;
  bool pingpong;
  bool persistent;
  bool reg_split;
  bool kv_apart;
};

Config config_of(const Params& p) {
  const auto at = [&](Param i) { return static_cast<int>(p.values[i]); };
  return {at(kBlockM),    at(kBlockN),        at(kWarps),
          at(kStages),    at(kQRegs) != 0,    at(kSmemPad) != 0,
          at(kImpl),      at(kPingpong) != 0, at(kPersistent) != 0,
          at(kRegSplit) != 0, at(kKvApart) != 0};
}

/// The wgmma kernel's consumer warpgroups: one per 64 query rows.
int consumers(const Config& c) { return c.block_m / kSm90RowsPerConsumer; }

/// Bytes of one element of q, k and v: e4m3 1, the 16-bit types 2.
int elem_bytes(DType t) { return static_cast<int>(dtype_size(t)); }

/// `page`: the paged kernels' page size (impl=0 keeps two slots of page ids after its ring).
unsigned smem_bytes(const Config& c, std::int64_t d, DType t, std::int64_t page = 0) {
  if (c.impl == 1)
    return flash_attention_sm90_smem_bytes(static_cast<int>(d), c.block_n, consumers(c),
                                           c.stages, elem_bytes(t), c.kv_apart);
  return flash_attention_smem_bytes(static_cast<int>(d), c.block_m, c.block_n, c.stages,
                                    c.smem_pad, static_cast<int>(page));
}

std::string str(std::int64_t v) { return std::to_string(v); }

const char* kernel_type(DType t) {
  return t == DType::e4m3 ? "ktune::e4m3" : t == DType::bf16 ? "ktune::bf16" : "ktune::fp16";
}
const char* cpp_bool(bool b) { return b ? "true" : "false"; }

/// The template arguments of the mask variants: ", WINDOW, SOFTCAP, ALIBI", then unless
/// `varlen` is false ", VARLEN" where varlen is on or the problem is paged and ", PAGE" where it
/// is paged (left to their defaults otherwise, so that names written before them stay the same;
/// the wgmma kernel takes VARLEN and PAGE last: varlen_page_args()).
std::string varlen_page_args(const Shape& s) {
  return std::string(s.varlen_or_paged() ? std::string(", ") + cpp_bool(s.varlen) : "") +
         (s.paged() ? ", " + std::to_string(s.page) : "");
}
std::string variant_args(const Shape& s, bool varlen = true) {
  return std::string(", ") + cpp_bool(s.window > 0) + ", " + cpp_bool(s.softcap) + ", " +
         cpp_bool(s.alibi) + (varlen ? varlen_page_args(s) : "");
}


void* tensor(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}

/// The kernel arguments of one call: pointers, strides (from args.layout, else contiguous
/// [B, H, S, D], or with varlen packed [total, H, D]) and the scale. Throws InvalidArgument for
/// strides the kernel cannot address.
FlashAttentionArgs make_args(const RunArgs& a, const Shape& s) {
  FlashAttentionArgs k{};
  k.q = tensor(a, 0);
  k.k = tensor(a, 1);
  k.v = tensor(a, 2);
  k.o = tensor(a, 3);
  k.lse = static_cast<float*>(tensor(a, 4));
  std::int64_t st[12];
  if (a.layout) {
    static const char* const names[12] = {"q batch", "q head", "q seq", "k batch", "k head",
                                          "k seq",   "v batch", "v head", "v seq", "o batch",
                                          "o head",  "o seq"};
    for (int i = 0; i < 12; ++i) {
      st[i] = a.layout[i];
      if (s.paged() && i >= 3 && i < 9) continue;  // the pools' own strides (below)
      const bool row = i % 3 == 2;
      // 16-byte rows: 8 elements of 16 bits, 16 of e4m3 (o is bf16 then).
      const std::int64_t align = a.dtype == DType::e4m3 && i < 9 ? 2 * kRowAlign : kRowAlign;
      if (st[i] < (row ? 1 : 0) || st[i] % align != 0 || (row && st[i] >= kMaxRowStride))
        throw InvalidArgument(
            std::string("flash_attention: ") + names[i] + " stride " + str(st[i]) +
            " must be a " + (row ? "positive" : "non-negative") + " multiple of " + str(align) +
            " elements (rows start 16-byte aligned)" + (row ? " below 2^23" : ""));
    }
  } else if (s.varlen) {
    // FlashAttention's packed [total, H, D]; no batch stride.
    const std::int64_t contiguous[12] = {0, s.d, s.hq * s.d,  0, s.d, s.hkv * s.d,
                                         0, s.d, s.hkv * s.d, 0, s.d, s.hq * s.d};
    for (int i = 0; i < 12; ++i) st[i] = contiguous[i];
  } else {
    const std::int64_t q_head = s.nq * s.d, kv_head = s.nk * s.d;
    const std::int64_t contiguous[12] = {s.hq * q_head,  q_head,  s.d, s.hkv * kv_head, kv_head,
                                         s.d,            s.hkv * kv_head, kv_head, s.d,
                                         s.hq * q_head,  q_head,  s.d};
    for (int i = 0; i < 12; ++i) st[i] = contiguous[i];
  }
  k.q_batch_stride = st[0], k.q_head_stride = st[1], k.q_row_stride = st[2];
  k.k_batch_stride = st[3], k.k_head_stride = st[4], k.k_row_stride = st[5];
  k.v_batch_stride = st[6], k.v_head_stride = st[7], k.v_row_stride = st[8];
  k.o_batch_stride = st[9], k.o_head_stride = st[10], k.o_row_stride = st[11];
  if (s.paged()) {  // the pools [pages, page, hkv, d]: row hkv * d, head d, no batch
    k.k_batch_stride = k.v_batch_stride = 0;
    k.k_head_stride = k.v_head_stride = s.d;
    k.k_row_stride = k.v_row_stride = s.hkv * s.d;
  }
  k.batch = static_cast<int>(s.b);
  k.heads_q = static_cast<int>(s.hq);
  k.heads_kv = static_cast<int>(s.hkv);
  k.seq_q = static_cast<int>(s.nq);
  k.seq_k = static_cast<int>(s.nk);
  const double scale = a.scalars[0];
  if (std::isinf(scale))
    throw InvalidArgument("flash_attention: scale " + std::to_string(scale) + " is not finite");
  // <= 0 (and NaN) select the usual 1/sqrt(d).
  k.scale = scale > 0 ? static_cast<float>(scale)
                      : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d)));
  if (a.dtype == DType::e4m3) {
    // Dequantisation scales of e4m3 q, k and v: q's and k's multiply the scores, v's O.
    static const char* const names[3] = {"q_scale", "k_scale", "v_scale"};
    for (int i = 0; i < 3; ++i)
      if (!(a.scalars[2 + i] > 0) || std::isinf(a.scalars[2 + i]))
        throw InvalidArgument(std::string("flash_attention: ") + names[i] + " " +
                              std::to_string(a.scalars[2 + i]) +
                              " must be a positive finite dequantisation scale");
    k.scale = static_cast<float>(k.scale * a.scalars[2] * a.scalars[3]);
    k.o_scale = static_cast<float>(a.scalars[4]);
  }
  // The variants' arguments are read only when the problem asks for them (flash_decode passes
  // one scalar and five tensors).
  k.window = static_cast<int>(s.window);  // <= 2^30, the dim's range
  if (s.softcap) {
    const double cap = a.scalars[1];
    if (!(cap > 0) || std::isinf(cap))
      throw InvalidArgument("flash_attention: softcap " + std::to_string(cap) +
                            " must be a positive finite cap with softcap=yes");
    k.softcap = static_cast<float>(cap);
  }
  if (s.alibi) {
    k.alibi_slopes = static_cast<const float*>(tensor(a, 5));
    if (!k.alibi_slopes)
      throw InvalidArgument("flash_attention: alibi=yes needs the alibi_slopes tensor ([hq] fp32)");
  }
  // After the slopes: cu_seqlens_q and (contiguous) cu_seqlens_k with varlen, then block_table
  // and seq_lens when paged (tensors()).
  if (s.varlen) {
    k.cu_seqlens_q = static_cast<const int*>(tensor(a, 6));
    if (!k.cu_seqlens_q)
      throw InvalidArgument("flash_attention: varlen=yes needs cu_seqlens_q ([b + 1] int32 row "
                            "offsets)");
    if (!s.paged()) {
      k.cu_seqlens_k = static_cast<const int*>(tensor(a, 7));
      if (!k.cu_seqlens_k)
        throw InvalidArgument("flash_attention: varlen=yes needs cu_seqlens_k ([b + 1] int32 row "
                              "offsets; a paged cache gives its lengths through seq_lens)");
    }
  }
  if (s.paged()) {
    const std::size_t at = s.varlen ? 7 : 6;
    k.block_table = static_cast<const int*>(tensor(a, at));
    k.seq_lens = static_cast<const int*>(tensor(a, at + 1));
    if (!k.block_table || !k.seq_lens)
      throw InvalidArgument("flash_attention: page=" + str(s.page) +
                            " needs the block_table and seq_lens tensors");
    k.page = static_cast<int>(s.page);
    k.pages_per_seq = static_cast<int>(s.pages_per_seq());
  }
  return k;
}

/// A tensor map addresses every index of a dimension: a broadcast (stride 0) over more than one
/// head or batch cannot be described.
void refuse_broadcast(const char* name, std::int64_t heads, std::int64_t batch,
                      long long head_stride, long long batch_stride) {
  if ((heads > 1 && head_stride == 0) || (batch > 1 && batch_stride == 0))
    throw InvalidArgument(std::string("flash_attention impl=1: ") + name + " " +
                          (heads > 1 && head_stride == 0 ? "head" : "batch") +
                          " stride 0 (a broadcast) cannot be read through a tensor map; pass "
                          "a materialised tensor, or tune this problem's layout with impl=0");
}

/// The tensor map of one [B, H, S, D] operand of the wgmma kernel (args_sm90.h): dims innermost
/// first (d, rows, heads, batch), strides in bytes, a box of 64 columns by `box_rows` rows in the
/// 128-byte swizzle. A dim of size 1 gets a harmless stride (its index is always 0), so that a
/// broadcast stride of 0 there never reaches the driver; over more dims refuse_broadcast() has
/// refused it.
tma::TensorMap operand_map(const void* ptr, DType t, std::int64_t d, std::int64_t rows,
                           std::int64_t heads, std::int64_t batch, long long row_stride,
                           long long head_stride, long long batch_stride, int box_rows) {
  const std::uint64_t eb = dtype_size(t);
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(row_stride) * eb;
  std::uint64_t head_bytes = static_cast<std::uint64_t>(head_stride) * eb;
  std::uint64_t batch_bytes = static_cast<std::uint64_t>(batch_stride) * eb;
  if (heads == 1) head_bytes = row_bytes * static_cast<std::uint64_t>(rows);
  if (batch == 1) batch_bytes = head_bytes * static_cast<std::uint64_t>(heads);
  return kernel_tensor_map(swizzled_map(
      ptr, t,
      {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(rows),
       static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch)},
      {row_bytes, head_bytes, batch_bytes},
      {static_cast<std::uint32_t>(128 / eb), static_cast<std::uint32_t>(box_rows), 1, 1}));
}

/// The wgmma kernel's arguments: flash_attention_fwd's plus the tensor maps of Q, K and V.
FlashAttentionSm90Args make_sm90_args(const FlashAttentionArgs& k, const Shape& s, DType t,
                                      int block_n, const void* vt) {
  FlashAttentionSm90Args a{};
  a.base = k;
  // varlen (paged or not): the producer's threads copy the tiles (flash_attention_sm90.cuh), no
  // maps.
  if (s.varlen) return a;
  // Every operand's strides before the driver is asked for any map.
  refuse_broadcast("q", s.hq, s.b, k.q_head_stride, k.q_batch_stride);
  if (s.paged()) {
    // The pools [pages, page, hkv, d] as 4-D maps (d, head, row in the page, page), a box of
    // min(page, block_n) rows of one head of one page; the pages dim covers every int32 page id
    // (the op never sees the pool's size; the block table names the pages).
    a.q_map = operand_map(k.q, t, s.d, s.nq, s.hq, s.b, k.q_row_stride, k.q_head_stride,
                          k.q_batch_stride, kSm90RowsPerConsumer);
    const std::uint64_t eb = dtype_size(t), d = static_cast<std::uint64_t>(s.d);
    const std::uint64_t hkv = static_cast<std::uint64_t>(s.hkv);
    const std::uint64_t page = static_cast<std::uint64_t>(s.page);
    const std::uint32_t box = static_cast<std::uint32_t>(std::min<std::int64_t>(s.page, block_n));
    const auto pool = [&](const void* ptr) {
      return kernel_tensor_map(swizzled_map(ptr, t, {d, hkv, page, std::uint64_t{kMaxPageIds}},
                                            {d * eb, hkv * d * eb, page * hkv * d * eb},
                                            {static_cast<std::uint32_t>(128 / eb), 1, box, 1}));
    };
    a.k_map = pool(k.k);
    a.v_map = pool(k.v);
    return a;
  }
  refuse_broadcast("k", s.hkv, s.b, k.k_head_stride, k.k_batch_stride);
  refuse_broadcast("v", s.hkv, s.b, k.v_head_stride, k.v_batch_stride);
  a.q_map = operand_map(k.q, t, s.d, s.nq, s.hq, s.b, k.q_row_stride, k.q_head_stride,
                        k.q_batch_stride, kSm90RowsPerConsumer);
  a.k_map = operand_map(k.k, t, s.d, s.nk, s.hkv, s.b, k.k_row_stride, k.k_head_stride,
                        k.k_batch_stride, block_n);
  if (t == DType::e4m3) {
    // Vt [b, hkv, d, nk_pad] (fp8_transpose.cuh): a box of block_n keys by d rows.
    const std::uint64_t kp = static_cast<std::uint64_t>(fp8_vt_keys(s.nk));
    const std::uint64_t d = static_cast<std::uint64_t>(s.d);
    a.v_map = kernel_tensor_map(swizzled_map(
        vt, t, {kp, d, static_cast<std::uint64_t>(s.hkv), static_cast<std::uint64_t>(s.b)},
        {kp, kp * d, kp * d * static_cast<std::uint64_t>(s.hkv)},
        {static_cast<std::uint32_t>(block_n), static_cast<std::uint32_t>(s.d), 1, 1}));
    return a;
  }
  a.v_map = operand_map(k.v, t, s.d, s.nk, s.hkv, s.b, k.v_row_stride, k.v_head_stride,
                        k.v_batch_stride, block_n);
  return a;
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
    if (t != DType::e4m3) return 0;
    const Shape s = shape_of(p);
    return static_cast<std::size_t>(s.b * s.hkv * s.d * fp8_vt_keys(s.nk));
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
    const Config c = config_of(params);
    const Shape s = kernel_shape(problem);
    const std::int64_t dv = shape_of(problem).d;  // the data's head dim, <= s.d
    // Trailing template arguments at their defaults are left out, so that a kernel keeps the
    // name expression it had before them; in a wider tile's kernel (dv < s.d) every argument is
    // spelled, then DV.
    const bool between = dv != s.d;
    if (c.impl == 1) {
      const std::string tail =
          between ? std::string(", ") + cpp_bool(c.persistent) + ", " +
                        cpp_bool(c.reg_split) + ", " + cpp_bool(s.varlen) + ", " + str(s.page) +
                        ", " + cpp_bool(c.kv_apart) + ", " + str(dv)
                  : (c.persistent || !c.reg_split || s.varlen_or_paged() || c.kv_apart
                         ? std::string(", ") + cpp_bool(c.persistent)
                         : "") +
                        (!c.reg_split || s.varlen_or_paged() || c.kv_apart
                             ? std::string(", ") + cpp_bool(c.reg_split)
                             : "") +
                        varlen_page_args(s) + (c.kv_apart ? ", false, 0, true" : "");
      std::vector<KernelSource> out = {
          {"attention/flash_attention_sm90.cuh",
           std::string("ktune::flash_attention_sm90<") + kernel_type(t) + ", " + str(s.d) + ", " +
               str(c.block_n) + ", " + str(consumers(c)) + ", " + str(c.stages) + ", " +
               cpp_bool(c.pingpong) + ", " + cpp_bool(s.causal) + variant_args(s, false) + tail +
               ">"}};
      if (t == DType::e4m3)
        out.push_back({"attention/fp8_transpose.cuh",
                       "ktune::fp8_v_transpose<" + str(s.d) + ">"});
      return out;
    }
    return {{"attention/flash_attention.cuh",
             std::string("ktune::flash_attention_fwd<") + kernel_type(t) + ", " + str(s.d) + ", " +
                 str(c.block_m) + ", " + str(c.block_n) + ", " + str(c.warps) + ", " +
                 str(c.stages) + ", " + cpp_bool(s.causal) + ", " + cpp_bool(c.q_regs) + ", 1, " +
                 cpp_bool(c.smem_pad) +
                 (between ? variant_args(s, false) + ", " + cpp_bool(s.varlen) + ", " +
                                str(s.page) + ", " + str(dv)
                          : variant_args(s)) +
                 ">"}};
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

  void run(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const Config c = config_of(*a.params);
    const FlashAttentionArgs k = make_args(a, s);
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = flash_attention_grid_x(k.seq_q, c.block_m);
    l.grid[1] = static_cast<unsigned>(s.b * s.hq);
    l.block[0] = static_cast<unsigned>(c.warps * 32);
    l.shared_bytes = smem_bytes(c, tile_head_dim(s.d), a.dtype, s.page);
    const void* vt = nullptr;
    if (a.dtype == DType::e4m3) {
      // V -> Vt in the workspace first (same stream), then the kernel reads Vt.
      if (a.workspace == 0)
        throw InvalidArgument("flash_attention: e4m3 needs a workspace of " +
                              str(static_cast<std::int64_t>(
                                  workspace_bytes(*a.params, *a.problem, a.dtype))) +
                              " bytes for V transposed");
      Fp8VTransposeArgs t{};
      t.v = k.v;
      t.vt = reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace));
      t.v_row_stride = k.v_row_stride;
      t.v_head_stride = k.v_head_stride;
      t.v_batch_stride = k.v_batch_stride;
      t.batch = k.batch;
      t.heads_kv = k.heads_kv;
      t.seq_k = k.seq_k;
      t.nk_pad = static_cast<int>(fp8_vt_keys(s.nk));
      KernelLaunch tl;
      tl.kernel = a.kernels[1];
      tl.grid[0] = static_cast<unsigned>(t.nk_pad / kFp8TransposeKeys);
      tl.grid[1] = static_cast<unsigned>(s.hkv);
      tl.grid[2] = static_cast<unsigned>(s.b);
      tl.block[0] = kFp8TransposeThreads;
      tl.args = &t;
      tl.args_size = sizeof t;
      launcher.launch(tl);
      vt = t.vt;
    }
    if (c.impl == 1) {
      if (c.persistent) {
        // One CTA per SM (one fits: __launch_bounds__(.., 1) and its shared memory), never more
        // than there are query tiles; without the SM count, one per tile.
        const long long work = flash_attention_sm90_work(k.seq_q, c.block_m, s.b * s.hq);
        l.grid[0] = static_cast<unsigned>(
            a.sm_count > 0 ? std::min<long long>(work, a.sm_count) : work);
        l.grid[1] = 1;
      }
      const FlashAttentionSm90Args k90 = make_sm90_args(k, s, a.dtype, c.block_n, vt);
      l.args = &k90;
      l.args_size = sizeof k90;
      launcher.launch(l);
      return;
    }
    l.args = &k;
    l.args_size = sizeof k;
    launcher.launch(l);
  }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    return {{"attention/reference.cuh", std::string("ktune::flash_attention_reference<") +
                                            kernel_type(t) + ", " + str(s.d) + ", " +
                                            cpp_bool(s.causal) + variant_args(s) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const FlashAttentionArgs k = make_args(a, s);
    constexpr unsigned rows = kReferenceThreads / 32;
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = static_cast<unsigned>((s.nq + rows - 1) / rows);
    l.grid[1] = static_cast<unsigned>(s.b * s.hq);
    l.block[0] = kReferenceThreads;
    l.args = &k;
    l.args_size = sizeof k;
    launcher.launch(l);
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
    const Config c = config_of(params);
    const Shape s = kernel_shape(problem);
    if (t == DType::e4m3 && c.impl != 1)
      return std::string("e4m3 runs on the wgmma kernel only (impl=1, sm_90a)");
    if (const std::int64_t dv = shape_of(problem).d; dv != s.d) {
      if (t == DType::e4m3) return std::string("e4m3 takes d = 128 or 256");
      if (c.impl == 1 && s.d == 32)
        return "impl=1 takes d = 64, 96, 128 or 256; d=" + str(dv) + " runs with impl=0";
    }
    if (t != DType::e4m3 && c.stages == 4)
      return std::string("stages=4 is for e4m3 tiles (half the bytes); 16-bit tiles take 2 or "
                         "3");
    if (c.impl == 1) return sm90_reason(c, s, params, t);
    if (c.block_n == 80)
      return std::string("block_n=80 is for impl=1 (d=256); impl=0 takes 32, 64 or 128");
    if (c.pingpong)
      return std::string("pingpong=1 is for impl=1 (turns between its consumer warpgroups)");
    if (c.persistent)
      return std::string("persistent=1 is for impl=1 (impl=0 runs one CTA per query tile)");
    if (!c.reg_split)
      return std::string("reg_split=0 is for impl=1 (impl=0 has no producer warpgroup): only "
                         "reg_split=1 is searched");
    if (c.kv_apart)
      return std::string("kv_apart=1 is for impl=1 (its TMA ring's slot barriers)");
    if (c.warps > 8)
      return "warps=" + str(c.warps) + " is for impl=1 (4 per warpgroup); impl=0 takes 4 or 8";
    if (c.block_m % (16 * c.warps) != 0)
      return "block_m=" + str(c.block_m) + " is not a multiple of 16 * warps=" + str(c.warps) +
             " (each warp owns whole 16-row fragments)";
    if (c.block_m / c.warps > 32)
      return "block_m=" + str(c.block_m) + " / warps=" + str(c.warps) + " = " +
             str(c.block_m / c.warps) + " query rows per warp (at most 32: two 16-row fragments)";
    if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
      return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
    // Anything else the kernel's static_asserts would reject (nothing, with the lists above).
    if (const char* why = flash_attention_invalid_reason(static_cast<int>(s.d), c.block_m,
                                                         c.block_n, c.warps, c.stages, 1,
                                                         c.smem_pad))
      return params_key(params) + ": " + why;
    return std::nullopt;
  }

  /// static_reason for impl=1, the wgmma kernel.
  std::optional<std::string> sm90_reason(const Config& c, const Shape& s, const Params& params,
                                         DType t) const {
    if (s.paged() && t == DType::e4m3)
      return std::string("page > 0 takes bf16 or fp16 (e4m3's V transpose is per batch)");
    if (s.varlen && t == DType::e4m3)
      return std::string("varlen=yes takes bf16 or fp16 (e4m3's V transpose is per batch)");
    // The paged producer walks every item: persistent, it spilled 12-76 bytes with 32 registers
    // (3 consumers) and 16-36 with 40 (2 consumers at d=256, whose consumers keep 232; NVRTC,
    // CUDA 13.0).
    if (s.paged() && c.persistent && (consumers(c) == 3 || (s.d == 256 && consumers(c) == 2)))
      return "impl=1 persistent with a paged cache and " + str(consumers(c)) +
             " consumer warpgroups at d=" + str(s.d) + " spills (the producer's " +
             (consumers(c) == 3 ? "32" : "40") + " registers); " +
             (consumers(c) == 3 ? "block_m=64 or 128" : "block_m=64") + ", or persistent=0";
    // NVRTC, CUDA 13.0: 8 bytes of spills at d=96 (three consumers' 160 registers, paged).
    if (s.paged() && s.d == 96 && consumers(c) == 3)
      return std::string("impl=1 with a paged cache and 3 consumer warpgroups at d=96 spills "
                         "(their 160 registers): block_m=64 or 128");
    if (s.varlen && c.persistent)
      return std::string("impl=1 with varlen=yes runs one CTA per query tile (persistent=0): "
                         "its tiles past a sequence's end leave at once");
    if (s.d != 64 && s.d != 96 && s.d != 128 && s.d != 256)
      return "impl=1 takes d = 64, 96, 128 or 256; d=" + str(s.d) + " runs with impl=0";
    // With 2 stages the next K tile goes into the slot P V still reads; with 3 or more it
    // loads a whole tile ahead anyway.
    if (c.kv_apart && c.stages != 2)
      return "kv_apart=1 is for stages=2 (stages=" + str(c.stages) +
             " already loads each K tile a whole tile ahead)";
    // NVRTC, CUDA 13.0: 8-12 bytes of spills at the consumers' 240 registers.
    if (c.kv_apart && c.persistent && s.d == 256 && consumers(c) == 2)
      return std::string("kv_apart=1 with persistent=1 at d=256 and two consumers spills (their "
                         "240 registers): persistent=0");
    // The same with a window or ALiBi slopes: 4-24 bytes (attention_compile_test, 2026-12-03).
    if (c.kv_apart && s.d == 256 && consumers(c) == 2 && (s.window > 0 || s.alibi))
      return std::string("kv_apart=1 at d=256 with two consumers and a window or ALiBi spills "
                         "(their 240 registers): block_m=64 or kv_apart=0");
    if (c.kv_apart && s.varlen_or_paged())
      return std::string("kv_apart=1 is for contiguous K/V without varlen (the TMA producer; "
                         "varlen and paged tiles are copied by the producer's threads)");
    // 80-key tiles are FlashAttention-3's at d=256, where two stages of 128 keys do not fit
    // beside two consumers' Q; elsewhere 64 and 128 cover the space.
    if (c.block_n == 80 && (s.d != 256 || t == DType::e4m3))
      return "block_n=80 is searched at d=256 with bf16 or fp16 only (d=" + str(s.d) +
             (t == DType::e4m3 ? ", e4m3" : "") + "): block_n=64 or 128";
    if (s.paged() && c.block_n % s.page != 0 && s.page % c.block_n != 0) {
      // Every power-of-two tile meets it; 80-key tiles only with 16-key pages.
      std::string pages;
      for (std::int64_t page : kPages)
        if (page > 0 && (c.block_n % page == 0 || page % c.block_n == 0))
          pages += (pages.empty() ? "" : " or ") + str(page);
      return "block_n=" + str(c.block_n) + " with a paged cache takes page=" + pages +
             " (a key tile covers whole pages or lies in one), not page=" + str(s.page);
    }
    if (c.block_m % kSm90RowsPerConsumer != 0 || c.block_m > 3 * kSm90RowsPerConsumer)
      return "impl=1 takes block_m = 64, 128 or 192 (64 query rows per consumer warpgroup), "
             "not " + str(c.block_m);
    if (c.warps != 4 * (consumers(c) + 1))
      return "impl=1 with block_m=" + str(c.block_m) + " runs " + str(consumers(c)) +
             " consumer warpgroups and a producer: warps=" + str(4 * (consumers(c) + 1)) +
             ", not " + str(c.warps);
    // Three consumers get 160 registers each; what spills there (attention_compile_test: 280-352
    // bytes for d=128 with 128-key tiles, 176-192 for d=64 with 128-key tiles and a window or
    // ALiBi) is refused rather than measured.
    if (consumers(c) == 3 && c.block_n == 128 && (s.d == 96 || s.d == 128 || s.window > 0 ||
                                                  s.alibi))
      return "impl=1 with 3 consumer warpgroups and block_n=128 at d=" + str(s.d) +
             (s.d == 96 || s.d == 128 ? "" : " with a window or ALiBi") +
             " spills (160 registers per thread); block_n=64 or block_m=128 fit";
    if (c.pingpong && consumers(c) == 1)
      return std::string("pingpong=1 needs 2 or 3 consumer warpgroups (block_m=128 or 192)");
    if (!c.reg_split) {
      if (consumers(c) == 1)
        return std::string("reg_split=0 with one consumer warpgroup: its launch bound already "
                           "gives every warpgroup 255 registers (no reallocation either way); "
                           "only reg_split=1 is searched");
      // Without reallocation a consumer thread has 168 (2 consumers) or 128 (3) registers:
      // ptxas (CUDA 13.0, every variant on) spills beyond these, and serialises wgmmas.
      const bool fits = t != DType::e4m3 && c.block_n == 64 &&
                        (s.d == 64 || ((s.d == 96 || s.d == 128) && consumers(c) == 2));
      if (!fits)
        return "reg_split=0 leaves each consumer thread " +
               str(consumers(c) == 2 ? 168 : 128) + " registers, which spill at d=" + str(s.d) +
               ", block_n=" + str(c.block_n) + ", " + str(consumers(c)) + " consumers" +
               (t == DType::e4m3 ? " (e4m3)" : "") +
               ": it fits 16-bit tiles of block_n=64 at d=64 (2 or 3 consumers) or d=96 and "
               "128 (2)";
    }
    if (c.q_regs || c.smem_pad)
      return std::string("impl=1 keeps Q in shared memory in the 128-byte swizzle: q_regs=0 and "
                         "smem_pad=0");
    if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
      return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
    if (const char* why = flash_attention_sm90_invalid_reason(static_cast<int>(s.d), c.block_n,
                                                              consumers(c), c.stages,
                                                              elem_bytes(t)))
      return params_key(params) + ": " + why;
    return std::nullopt;
  }

  static std::string smem_text(const Config& c, const Shape& s, DType t) {
    const std::int64_t d = s.d;
    return "block_m=" + str(c.block_m) + ", block_n=" + str(c.block_n) + ", stages=" +
           str(c.stages) + (c.smem_pad ? ", smem_pad=1" : "") + " at d=" + str(d) +
           (t == DType::e4m3 ? " (e4m3)" : "") + " need " + str(smem_bytes(c, d, t, s.page)) +
           " bytes of shared memory (Q tile + " + str(c.stages) + " K and V tiles)";
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

}  // namespace ktune
