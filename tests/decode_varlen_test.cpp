// flash_decode over variable-length batches (varlen): the dim (keys unchanged when off; refused
// with pages), the tensors in flash_attention's order sized by the tuner's lengths (an
// empty-key sequence among them), bytes and flops over the real lengths, launches sized from the
// upper bounds, the reference (flash_attention's with VARLEN), the defaults' splits, and NVRTC
// compiles of a sample.
#include "tests/decode_test_support.hpp"

namespace ktune {
namespace {

using namespace decode_test;

// ---- variable-length batches ----

/// Runs a varlen problem with tensors q, k, v, o, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k
/// at 0x10000 * (i + 1) (cu_seqlens_k at `cu_k`), the workspace at 0x100000, scalars scale (0)
/// and softcap (50).
RecordingLauncher<FlashDecodeArgs> run_varlen(const Params& params, const Problem& p,
                                              const std::int64_t* layout = nullptr,
                                              std::uint64_t cu_k = 0x80000) {
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, 0x60000, 0x70000, cu_k};
  return run_with(params, p, tensors, 0x100000, 0.0, layout, 50.0);
}

TEST(DecodeVarlen, DimIsKeyedOnlyWhenOnAndRefusedWithPages) {
  const DimSpec& varlen = op().dims()[11];
  EXPECT_EQ(varlen.name, "varlen");
  EXPECT_EQ(varlen.choices, (std::vector<std::string>{"no", "yes"}));
  EXPECT_TRUE(varlen.matched_exactly());
  EXPECT_EQ(varlen.def.value_or(-1), 0);
  EXPECT_FALSE(varlen.keyed_at_default);
  // Off: keys written before the dim are the same problems with the same keys.
  for (const char* old : {"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no",
                          "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,causal=no,page=16",
                          "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,window=7,alibi=yes"}) {
    const Problem p = op().parse_problem(old);
    EXPECT_EQ(p.values[11], 0) << old;
    EXPECT_EQ(op().problem_key(p), old);
    EXPECT_EQ(op().parse_problem(std::string(old) + ",varlen=no"), p);
  }
  // On: last in the key, after the variants.
  const Problem v =
      op().parse_problem("varlen=yes,b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes");
  EXPECT_EQ(v.values, (std::vector<std::int64_t>{4, 16, 2, 5, 1000, 64, 1, 0, 0, 1, 0, 1}));
  EXPECT_EQ(op().problem_key(v),
            "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes,varlen=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(v)), v);
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,varlen=1"),
                       "varlen=\"1\" is not one of no, yes"));
  // Paged and varlen: an invalid problem that says why, at every page size; every invalid point
  // of such a problem carries the reason.
  for (int page : {16, 256})
    EXPECT_TRUE(contains(problem_error("b=2,hq=8,hkv=2,nq=1,nk=100,d=64,varlen=yes,page=" +
                                       std::to_string(page)),
                         "varlen=yes with page=" + std::to_string(page) +
                             ": variable-length batches are packed contiguous K/V (page=0)"))
        << page;
  Problem paged;  // parse_problem refuses it: built by hand
  paged.values = {2, 8, 2, 1, 100, 64, 0, 16, 0, 0, 0, 1};
  EXPECT_TRUE(contains(op().invalid_reason(op().parse_params("splits=1,block_m=16,block_n=64,"
                                                             "warps=4,stages=2"),
                                           paged, DType::bf16, device("sm_90a"))
                           .value_or(""),
                       "varlen=yes with page=16"));
  // int32 offsets.
  EXPECT_TRUE(contains(problem_error("b=4,hq=1,hkv=1,nq=1,nk=1073741824,d=64,varlen=yes"),
                       "offsets up to 4294967296 do not fit int32"));
  EXPECT_EQ(problem_error("b=1,hq=1,hkv=1,nq=1,nk=1073741824,d=64,varlen=yes"), "");
  // Every mask variant with varlen is a valid problem.
  for (int mask = 0; mask < 8; ++mask)
    EXPECT_EQ(problem_error(std::string("b=5,hq=8,hkv=2,nq=5,nk=100,d=64,causal=yes,varlen=yes") +
                            (mask & 1 ? ",window=9" : "") + (mask & 2 ? ",softcap=yes" : "") +
                            (mask & 4 ? ",alibi=yes" : "")),
              "")
        << mask;
}

TEST(DecodeVarlen, TensorsInFlashAttentionsOrderSizedByTheTunersLengths) {
  const std::string shape = "b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,causal=yes,varlen=yes";
  const Problem p = op().parse_problem(shape);
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  const char* names[] = {"q", "k", "v", "o", "lse", "alibi_slopes", "cu_seqlens_q",
                         "cu_seqlens_k"};
  ASSERT_EQ(ts.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(ts[i].name, names[i]);
  // flash_attention's eight, in its order (its reference reads them), same dtypes and roles.
  const Op& fa = get_op("flash_attention");
  const std::vector<TensorSpec> fts = fa.tensors(fa.parse_problem(shape), DType::bf16);
  ASSERT_EQ(fts.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(ts[i].name, fts[i].name);
    EXPECT_EQ(ts[i].dtype, fts[i].dtype);
    EXPECT_EQ(ts[i].role, fts[i].role);
    EXPECT_EQ(ts[i].optional, fts[i].optional) << ts[i].name;
    EXPECT_EQ(ts[i].alignment, fts[i].alignment) << ts[i].name;
  }
  for (std::size_t i : {6, 7}) {
    EXPECT_EQ(ts[i].dtype, DType::i32);
    EXPECT_EQ(ts[i].role, TensorRole::input);
    EXPECT_FALSE(ts[i].optional);
    EXPECT_EQ(ts[i].elements, 6);
    EXPECT_EQ(ts[i].alignment, 4u);  // side tensors: 4-byte words
    EXPECT_EQ(ts[i].fill.kind, Fill::Kind::seq_offsets);
  }
  EXPECT_EQ(ts[0].alignment, 0u);  // the op's 16
  // Queries 1..nq, keys 0..nk: the second sequence (one query) has no key.
  EXPECT_EQ(ts[6].fill.first_int, 1);
  EXPECT_EQ(ts[6].fill.last_int, 7);
  EXPECT_EQ(ts[7].fill.first_int, 0);
  EXPECT_EQ(ts[7].fill.last_int, 1000);
  const std::vector<std::int64_t> cq = offsets_of(ts[6].fill, 6), ck = offsets_of(ts[7].fill, 6);
  EXPECT_EQ(cq[1] - cq[0], 7);
  EXPECT_EQ(cq[2] - cq[1], 1);
  EXPECT_EQ(ck[1] - ck[0], 1000);
  EXPECT_EQ(ck[2] - ck[1], 0);
  // The packed tensors hold exactly the tuner's rows (the comparison covers them all).
  EXPECT_EQ(ts[0].elements, cq.back() * 16 * 64);
  EXPECT_EQ(ts[3].elements, ts[0].elements);
  EXPECT_EQ(ts[1].elements, ck.back() * 4 * 64);
  EXPECT_EQ(ts[2].elements, ts[1].elements);
  EXPECT_EQ(ts[4].elements, 16 * cq.back());
  EXPECT_LT(ck.back(), 5 * 1000);
  // Bytes: those tensors (the slopes only with alibi=yes).
  const double e = 2.0;
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   e * static_cast<double>(2 * ts[0].elements + 2 * ts[1].elements) +
                       4.0 * static_cast<double>(ts[4].elements + 2 * 6));
  // Flops over the real (query, key) pairs of each sequence, bottom-right causal.
  double pairs = 0.0;
  for (std::size_t i = 0; i + 1 < cq.size(); ++i) {
    const std::int64_t nq = cq[i + 1] - cq[i], nk = ck[i + 1] - ck[i];
    for (std::int64_t r = 0; r < nq; ++r)
      pairs += static_cast<double>(std::clamp<std::int64_t>(r + nk - nq + 1, 0, nk));
  }
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 16 * 64 * pairs);
  const Problem plain = op().parse_problem("b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,varlen=yes");
  double all = 0.0;
  for (std::size_t i = 0; i + 1 < cq.size(); ++i)
    all += static_cast<double>((cq[i + 1] - cq[i]) * (ck[i + 1] - ck[i]));
  EXPECT_DOUBLE_EQ(op().flops(plain, DType::bf16), 4.0 * 16 * 64 * all);
  // Off: the tensors and counts of before.
  const Problem off = op().parse_problem("b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,causal=yes");
  EXPECT_EQ(op().tensors(off, DType::bf16).size(), 6u);
  EXPECT_EQ(op().tensors(off, DType::bf16)[0].elements, 5 * 16 * 7 * 64);
}

TEST(DecodeVarlen, LaunchesSizedFromTheUpperBounds) {
  const Problem p = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,varlen=yes");
  const Problem fixed = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(why("splits=3,block_m=32,block_n=64,warps=2,stages=4", op().problem_key(p)), "");
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true, 0, false, false, "
            "false, true>");
  EXPECT_EQ(ks[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 64>");
  const Problem masks = op().parse_problem(
      "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,window=9,alibi=yes,varlen=yes");
  EXPECT_EQ(op().kernels(params, masks, DType::bf16)[0].name_expression,
            "ktune::flash_decode_split<ktune::bf16, 64, 32, 64, 2, 4, true, 0, true, false, true, "
            "true>");
  // Workspace, shared memory and the space: those of the same problem without varlen (K/V rows
  // swizzled, unpadded, as the fixed kernel's: flash_decode_kv_swizzled).
  EXPECT_EQ(op().workspace_bytes(params, p, DType::f16),
            op().workspace_bytes(params, fixed, DType::f16));
  EXPECT_EQ(op().dynamic_shared_bytes(params, p, DType::f16, 0),
            op().dynamic_shared_bytes(params, fixed, DType::f16, 0));
  // But for d=128 at 64 keys per warp, where varlen keeps the padded rows (the swizzle spilled
  // there): 272 bytes a row against 256, 2 stages x (K + V) x 128 rows x 16 bytes more.
  {
    const Problem v128 = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=128,varlen=yes");
    const Problem f128 = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=128");
    for (const char* text : {"splits=2,block_m=16,block_n=128,warps=2,stages=2",
                             "splits=2,block_m=16,block_n=128,warps=4,stages=2"}) {
      const Params q = op().parse_params(text);
      const unsigned extra = std::string(text).find("warps=2") != std::string::npos
                                 ? 2u * 2u * 128u * 16u : 0u;
      EXPECT_EQ(op().dynamic_shared_bytes(q, v128, DType::bf16, 0),
                op().dynamic_shared_bytes(q, f128, DType::bf16, 0) + extra) << text;
    }
    EXPECT_FALSE(flash_decode_kv_swizzled(128, true, 64));
    EXPECT_TRUE(flash_decode_kv_swizzled(128, true, 32));
    EXPECT_TRUE(flash_decode_kv_swizzled(64, true, 64));
    EXPECT_TRUE(flash_decode_kv_swizzled(128, false, 64));
    // d=256 at 32 keys per warp keeps its padded rows (varlen or not), d=96 always; d=32's
    // 64-byte rows swizzle (flash_decode_row64_offset).
    for (bool varlen : {false, true}) {
      EXPECT_TRUE(flash_decode_kv_swizzled(256, varlen, 16));
      EXPECT_FALSE(flash_decode_kv_swizzled(256, varlen, 32));
      EXPECT_FALSE(flash_decode_kv_swizzled(96, varlen, 16));
      EXPECT_TRUE(flash_decode_kv_swizzled(32, varlen, 64));
    }
    EXPECT_EQ(flash_decode_kv_pitch(256, false, false, 32), flash_decode_pitch(256));
    EXPECT_EQ(flash_decode_kv_pitch(256, false, false, 16), 512);
  }
  // (merge=1 and tma=1 are contiguous and fixed-length only: the varlen space is the fixed one's
  // points with neither.)
  const auto merged = [](const Params& v) { return v.values[5] == 1 || v.values[7] == 1; };
  const std::vector<Params> fixed_valid = Space(op(), fixed, DType::bf16, device("sm_90a")).valid_points();
  EXPECT_EQ(Space(op(), p, DType::bf16, device("sm_90a")).valid_count(),
            fixed_valid.size() - static_cast<std::size_t>(std::count_if(
                                     fixed_valid.begin(), fixed_valid.end(), merged)));

  // The grids are the fixed problem's: b * hkv CTAs of ceil(g * nq / block_m) row tiles and
  // `splits` splits, the combine one warp per (b, h, row) at the longest lengths; nothing read
  // back on the host.
  const RecordingLauncher<FlashDecodeArgs> l = run_varlen(params, p);
  const RecordingLauncher<FlashDecodeArgs> f = run(params, fixed);
  ASSERT_EQ(l.launches.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    for (int x = 0; x < 3; ++x) EXPECT_EQ(l.launches[i].grid[x], f.launches[i].grid[x]) << i;
    EXPECT_EQ(l.launches[i].block[0], f.launches[i].block[0]);
    EXPECT_EQ(l.launches[i].shared_bytes, f.launches[i].shared_bytes);
    EXPECT_EQ(l.launches[i].programmatic, f.launches[i].programmatic);
  }
  EXPECT_EQ(l.launches[0].grid[0], 2u);  // 8 heads per group x 5 rows, tiles of 32
  EXPECT_EQ(l.launches[0].grid[1], 3u);
  EXPECT_EQ(l.launches[0].grid[2], 8u);
  EXPECT_EQ(l.launches[1].grid[0], (4u * 16 * 5 + 3) / 4);
  const FlashDecodeArgs& a = l.args[0];
  EXPECT_EQ(a.cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(a.cu_seqlens_k, reinterpret_cast<const int*>(0x80000));
  EXPECT_EQ(a.alibi_slopes, nullptr);  // alibi=no: not read
  EXPECT_EQ(a.block_table, nullptr);
  EXPECT_EQ(a.seq_lens, nullptr);
  // Packed [total, h, d]: no batch stride.
  EXPECT_EQ(a.q_batch_stride, 0);
  EXPECT_EQ(a.q_head_stride, 64);
  EXPECT_EQ(a.q_row_stride, 16 * 64);
  EXPECT_EQ(a.k_batch_stride, 0);
  EXPECT_EQ(a.k_head_stride, 64);
  EXPECT_EQ(a.k_row_stride, 2 * 64);
  EXPECT_EQ(a.v_row_stride, 2 * 64);
  EXPECT_EQ(a.o_row_stride, 16 * 64);
  EXPECT_EQ(a.seq_q, 5);
  EXPECT_EQ(a.seq_k, 1000);
  EXPECT_EQ(a.batch, 4);
  EXPECT_EQ(a.tiles_per_split, f.args[0].tiles_per_split);
  EXPECT_EQ(a.split_keys, f.args[0].split_keys);
  EXPECT_EQ(a.part_o, f.args[0].part_o);
  EXPECT_EQ(a.part_lse, f.args[0].part_lse);
  EXPECT_EQ(std::memcmp(&l.args[0], &l.args[1], sizeof a), 0);  // one struct for both kernels
  // A fixed-length problem never sets the offsets (the combine reads them when set).
  EXPECT_EQ(f.args[0].cu_seqlens_q, nullptr);
  EXPECT_EQ(f.args[0].cu_seqlens_k, nullptr);
  // A layout: its head and row strides apply, its batch strides are ignored (not checked).
  std::int64_t layout[12] = {-1, 64, 32 * 64, 7, 64, 4 * 64, 7, 64, 4 * 64, -1, 64, 32 * 64};
  const FlashDecodeArgs b = run_varlen(params, p, layout).args[0];
  EXPECT_EQ(b.q_batch_stride, 0);
  EXPECT_EQ(b.q_row_stride, 32 * 64);
  EXPECT_EQ(b.k_row_stride, 4 * 64);
  EXPECT_EQ(b.o_batch_stride, 0);
  layout[5] = 12;
  EXPECT_TRUE(contains(run_error([&] { run_varlen(params, p, layout); }),
                       "flash_decode: k seq stride 12 must be a positive multiple of 8"));
  EXPECT_TRUE(contains(run_error([&] { run_varlen(params, p, nullptr, 0); }),
                       "flash_decode: varlen=yes needs cu_seqlens_k ([b + 1] int32 row offsets)"));
  // With ALiBi the slopes stay tensor 5, the offsets 6 and 7.
  const FlashDecodeArgs m = run_varlen(params, masks).args[0];
  EXPECT_EQ(m.alibi_slopes, reinterpret_cast<const float*>(0x60000));
  EXPECT_EQ(m.cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(m.window, 9);
}

TEST(DecodeVarlen, ReferenceIsFlashAttentionsVarlen) {
  const std::string shape = "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes,varlen=yes";
  const Problem p = op().parse_problem(shape);
  const Op& fa = get_op("flash_attention");
  const auto ref = op().reference_kernels(p, DType::bf16);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].name_expression,
            "ktune::flash_attention_reference<ktune::bf16, 64, true, false, true, false, true>");
  EXPECT_EQ(ref, fa.reference_kernels(fa.parse_problem(shape), DType::bf16));
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, 0x60000, 0x70000, 0x80000};
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {0.0, 30.0};
  RunArgs a;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = &kernel;
  RecordingLauncher<FlashAttentionArgs> l;
  op().run_reference(a, l);
  ASSERT_EQ(l.launches.size(), 1u);
  EXPECT_EQ(l.launches[0].grid[1], 4u * 16);  // b * hq, rows up to the longest nq
  const unsigned warps = l.launches[0].block[0] / 32;
  EXPECT_GE(l.launches[0].grid[0] * warps, 5u);
  EXPECT_EQ(l.args[0].cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(l.args[0].cu_seqlens_k, reinterpret_cast<const int*>(0x80000));
  EXPECT_EQ(l.args[0].q_row_stride, 16 * 64);
  EXPECT_FLOAT_EQ(l.args[0].softcap, 30.f);
  EXPECT_EQ(op().tolerance(DType::bf16).atol, fa.tolerance(DType::bf16).atol);
}

TEST(DecodeVarlen, DefaultsSplitMixedLengthsAsPagedBatchesDo) {
  const DeviceInfo h100 = device("sm_90a");
  // 64 sequences x 8 KV heads fill the GPU without splits; mixed lengths still want pieces of
  // about 1024 keys of the longest sequence, as a paged batch's.
  const Problem fixed = op().parse_problem("b=64,hq=32,hkv=8,nq=1,nk=8000,d=128");
  const Problem varlen = op().parse_problem("b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,varlen=yes");
  const Params f = op().default_params(fixed, DType::bf16, h100);
  const Params v = op().default_params(varlen, DType::bf16, h100);
  EXPECT_EQ(f.values[0], 1);
  EXPECT_GE(v.values[0], 6);
  EXPECT_EQ(op().invalid_reason(v, varlen, DType::bf16, h100), std::nullopt);
  // The tiles are the fixed problem's.
  EXPECT_EQ(std::vector<std::int64_t>(f.values.begin() + 1, f.values.end()),
            std::vector<std::int64_t>(v.values.begin() + 1, v.values.end()));
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const char* shape : {"b=3,hq=16,hkv=2,nq=16,nk=4099,d=64,causal=yes,varlen=yes",
                              "b=1,hq=8,hkv=8,nq=1,nk=1,d=256,varlen=yes"})
      for (DType t : {DType::bf16, DType::f16}) {
        const Problem p = op().parse_problem(shape);
        EXPECT_EQ(op().invalid_reason(op().default_params(p, t, device(arch)), p, t,
                                      device(arch)),
                  std::nullopt)
            << shape << " " << arch;
      }
}

// Paged and varlen batches of few (sequence, KV head) pairs: their lengths unknown when the grid
// is sized, splits for 3 CTAs per SM at the longest length (132 SMs: 32 pairs x 12, 16 x 24,
// 64 x 6), at least 256 keys each (8 pairs of 1500 keys: 4, as contiguous), where an SM holds
// two of the CTAs; d=256's row tiles hold one, and keep one wave (16 pairs x 8). Fixed-length
// contiguous K/V keeps one CTA per SM.
// The head dims d=96's tiles serve below 96 (72, 80, 88), one row tile, contiguous K/V on
// sm_90: up to 2 CTAs per SM (their keys stream fewer bytes per CTA); d=80 and d=96 there take
// kv_split=1. Not the few-pairs tiles, paged or varlen K/V, several row tiles, nor sm_80.
TEST(DecodeVarlen, FewPairsOfMixedLengthsSplitForThreeCtasPerSm) {
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_EQ(h100.sm_count, 132);
  const auto splits = [&](const std::string& problem) {
    return checked_default(problem, h100).values[0];
  };
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=6000,d=128,page=16"), 12);
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=6000,d=128,varlen=yes"), 12);
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=9000,d=128"), 4);  // past medium_spans' 8000 keys
  EXPECT_EQ(splits("b=2,hq=32,hkv=8,nq=1,nk=12000,d=128,page=32"), 24);
  EXPECT_EQ(splits("b=16,hq=32,hkv=4,nq=1,nk=5000,d=128,page=16"), 6);
  EXPECT_EQ(splits("b=2,hq=32,hkv=4,nq=1,nk=1500,d=128,varlen=yes"), 4);
  EXPECT_EQ(splits("b=4,hq=16,hkv=4,nq=1,nk=8000,d=256,varlen=yes"), 8);
}

// NVRTC: the varlen split kernels (and the combine, whose code reads the offsets: one per arch,
// the other head dims' compile in DecodeCompile) for sm_80 and sm_90a: a small sample (CI has 2
// cores), the defaults without spills.
TEST(DecodeVarlen, KernelsCompileWithoutSpills) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (const char* shape : {"b=8,hq=32,hkv=8,nq=1,nk=8192,d=64",
                              "b=4,hq=32,hkv=8,nq=16,nk=4099,d=128,causal=yes",
                              "b=4,hq=16,hkv=2,nq=5,nk=4099,d=128,causal=yes,window=1000,"
                              "softcap=yes,alibi=yes",
                              "b=8,hq=32,hkv=8,nq=1,nk=8192,d=256"}) {
      const DType t = std::string(shape).find("causal") != std::string::npos ? DType::f16
                                                                            : DType::bf16;
      const Problem p = op().parse_problem(std::string(shape) + ",varlen=yes");
      for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t)) {
        const bool combine = k.name_expression.find("combine") != std::string::npos;
        if (seen.insert({arch, combine ? "combine" : k.name_expression}).second)
          jobs.push_back({k, arch, {}});
      }
    }
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  ASSERT_LE(jobs.size(), 12u);
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  int splits = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%-6s %-92s %3d registers, stack %d, spills %d/%d\n", jobs[i].arch.c_str(),
                expr.c_str(), r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    EXPECT_LE(r.registers, 255) << expr;
    EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
    EXPECT_EQ(r.spill_loads, 0) << jobs[i].arch << " " << expr;
    splits += expr.find("flash_decode_split") != std::string::npos &&
              expr.find(", true>") != std::string::npos;
  }
  EXPECT_EQ(splits, 8);  // every sample's split kernel is a VARLEN one
}

}  // namespace
}  // namespace ktune
