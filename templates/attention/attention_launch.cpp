// Flash attention's kernels for one configuration and their launches (Op::run): the kernel
// arguments of a call (pointers, element strides from the layout, checked against what the
// kernels can address), the wgmma kernel's tensor maps and persistent grid, e4m3's V transpose
// into the workspace; and the fp32 reference's kernel and launch.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "templates/attention/attention_op.hpp"
#include "templates/attention/attention_parts.hpp"
#include "templates/kernel_tensor_map.hpp"

namespace ktune::attention {
namespace {

constexpr std::int64_t kRowAlign = 8;                          // elements: 16-byte rows
constexpr unsigned kReferenceThreads = 256;                    // 8 query rows per block
constexpr std::int64_t kMaxPageIds = 2147483647;              // int32 block table entries

const char* kernel_type(DType t) {
  return t == DType::e4m3 ? "ktune::e4m3" : t == DType::bf16 ? "ktune::bf16" : "ktune::fp16";
}

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
  if (std::optional<std::string> why =
          output_stride_reason("flash_attention", st, s.b, s.hq, s.varlen))
    throw InvalidArgument(*why);
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

/// The wgmma kernel's tensor maps cannot read a broadcast operand (kernel_tensor_map.hpp).
void refuse_broadcast(const char* name, std::int64_t heads, std::int64_t batch,
                      long long head_stride, long long batch_stride) {
  ktune::refuse_broadcast("flash_attention impl=1", name, heads, batch, head_stride,
                          batch_stride, "tune this problem's layout with impl=0");
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

}  // namespace

std::vector<KernelSource> kernel_sources(const Config& c, const Shape& s, std::int64_t dv,
                                         DType t) {
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

std::size_t vt_workspace_bytes(const Shape& s, DType t) {
  if (t != DType::e4m3) return 0;
  return static_cast<std::size_t>(s.b * s.hkv * s.d * fp8_vt_keys(s.nk));
}

void launch_attention(const RunArgs& a, Launcher& launcher) {
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
                            str(static_cast<std::int64_t>(vt_workspace_bytes(s, a.dtype))) +
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

std::vector<KernelSource> reference_sources(const Shape& s, DType t) {
  return {{"attention/reference.cuh", std::string("ktune::flash_attention_reference<") +
                                          kernel_type(t) + ", " + str(s.d) + ", " +
                                          cpp_bool(s.causal) + variant_args(s) + ">"}};
}

void launch_reference(const RunArgs& a, Launcher& launcher) {
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

}  // namespace ktune::attention
