// flash_decode's mask variants (window, softcap, alibi): dims and keys (keys written before them
// unchanged), name expressions (a kernel without variants keeps its own), tensors, scalars and
// arguments, the references they reach, a double model of the window's tile skipping and masks
// with soft-capping and ALiBi through splits and the combine, and NVRTC compiles of every
// combination's defaults.
#include "tests/decode_test_support.hpp"

namespace ktune {
namespace {

using namespace decode_test;

// ---- mask variants: sliding window, logit soft-capping, ALiBi ----

TEST(DecodeVariants, DimsAndKeys) {
  const std::vector<DimSpec>& dims = op().dims();
  ASSERT_EQ(dims.size(), 12u);
  const char* names[] = {"b", "hq", "hkv", "nq", "nk", "d", "causal", "page", "window", "softcap",
                         "alibi", "varlen"};
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(dims[i].name, names[i]);
  // As flash_attention's: the window by distance with no window (0) a regime of its own,
  // softcap and alibi exact; all off by default and left out of keys when off.
  EXPECT_FALSE(dims[8].matched_exactly());
  EXPECT_EQ(dims[8].regime(0), 0);
  EXPECT_EQ(dims[8].regime(1), 1);
  EXPECT_EQ(dims[8].regime(4096), dims[8].regime(8192));
  EXPECT_TRUE(dims[9].matched_exactly());
  EXPECT_TRUE(dims[10].matched_exactly());
  for (std::size_t i = 8; i < 11; ++i) {
    EXPECT_EQ(dims[i].def, 0) << dims[i].name;
    EXPECT_FALSE(dims[i].keyed_at_default) << dims[i].name;
  }

  // Keys written before the variants (contiguous and paged) are the same problems, with the
  // same keys.
  for (const char* old : {"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no",
                          "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes",
                          "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,causal=no,page=16"}) {
    const Problem p = op().parse_problem(old);
    ASSERT_EQ(p.values.size(), 12u);
    EXPECT_EQ(std::vector<std::int64_t>(p.values.begin() + 8, p.values.end()),
              (std::vector<std::int64_t>{0, 0, 0, 0}));
    EXPECT_EQ(op().problem_key(p), old);
    EXPECT_EQ(op().parse_problem(std::string(old) + ",window=0,softcap=no,alibi=no"), p);
  }
  EXPECT_EQ(op().problem_key(op().default_problem()),
            "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no");

  // With variants the key shows them, in declared order, whatever order they were given in.
  const Problem v = op().parse_problem(
      "alibi=yes,window=4096,b=1,hq=8,hkv=2,nq=3,nk=9000,d=64,softcap=yes,page=32,causal=yes");
  EXPECT_EQ(v.values, (std::vector<std::int64_t>{1, 8, 2, 3, 9000, 64, 1, 32, 4096, 1, 1, 0}));
  EXPECT_EQ(op().problem_key(v),
            "b=1,hq=8,hkv=2,nq=3,nk=9000,d=64,causal=yes,page=32,window=4096,softcap=yes,"
            "alibi=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(v)), v);
  EXPECT_EQ(op().problem_key(op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,softcap=yes")),
            "b=1,hq=8,hkv=8,nq=1,nk=100,d=64,causal=no,softcap=yes");
  EXPECT_EQ(op().problem_key(op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,alibi=yes")),
            "b=1,hq=8,hkv=8,nq=1,nk=100,d=64,causal=no,alibi=yes");
  // "x" shapes name the integer dims in order; the window is the eighth, after page.
  EXPECT_EQ(op().parse_problem("1x4x4x9x9x32x0x4096"),
            op().parse_problem("b=1,hq=4,hkv=4,nq=9,nk=9,d=32,window=4096"));

  // Bad values say what is allowed; every combination of the variants is a valid problem.
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,window=-1"),
                       "window=-1 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,window=1073741825"),
                       "window=1073741825 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,softcap=30"),
                       "softcap=\"30\" is not one of no, yes"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,alibi=1"),
                       "alibi=\"1\" is not one of no, yes"));
  for (int mask = 1; mask < 8; ++mask)
    for (const char* page : {"", ",page=16", ",page=256"})
      EXPECT_EQ(problem_error(std::string("b=2,hq=8,hkv=2,nq=5,nk=100,d=64,causal=yes") + page +
                              (mask & 1 ? ",window=1" : "") + (mask & 2 ? ",softcap=yes" : "") +
                              (mask & 4 ? ",alibi=yes" : "")),
                "")
          << mask << page;
}

TEST(DecodeVariants, KernelsWithoutVariantsKeepTheirNameExpressions) {
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  const auto exprs = [&](const std::string& shape, DType t = DType::f16) {
    const Problem p = op().parse_problem(shape);
    std::string out;
    for (const KernelSource& k : op().kernels(params, p, t)) out += k.name_expression + " | ";
    return out + op().reference_kernels(p, t)[0].name_expression;
  };
  const std::string base = "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes";
  const std::string split = "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true";
  const std::string combine = "> | ktune::flash_decode_combine<ktune::fp16, 64> | ";
  const std::string fa_ref = "ktune::flash_attention_reference<ktune::fp16, 64, true, ";
  // Off: the name expressions of before the variants (PAGE only when paged); the reference is
  // flash_attention's, paged with its PAGE flag.
  EXPECT_EQ(exprs(base), split + combine + fa_ref + "false, false, false>");
  EXPECT_EQ(exprs(base + ",page=16"),
            split + ", 16" + combine + fa_ref + "false, false, false, false, 16>");
  // On: PAGE (0 when contiguous) and the three flags; the combine never changes. The contiguous
  // reference is flash_attention's with the same flags.
  EXPECT_EQ(exprs(base + ",window=4096"),
            split + ", 0, true, false, false" + combine + fa_ref + "true, false, false>");
  EXPECT_EQ(exprs(base + ",softcap=yes"),
            split + ", 0, false, true, false" + combine + fa_ref + "false, true, false>");
  EXPECT_EQ(exprs(base + ",alibi=yes"),
            split + ", 0, false, false, true" + combine + fa_ref + "false, false, true>");
  EXPECT_EQ(exprs(base + ",window=600,softcap=yes,alibi=yes"),
            split + ", 0, true, true, true" + combine + fa_ref + "true, true, true>");
  EXPECT_EQ(exprs(base + ",page=16,window=7,alibi=yes"),
            split + ", 16, true, false, true" + combine + fa_ref + "true, false, true, false, 16>");
  EXPECT_EQ(exprs(base + ",page=256,softcap=yes"),
            split + ", 256, false, true, false" + combine + fa_ref +
                "false, true, false, false, 256>");
  // The contiguous reference is exactly flash_attention's for the same problem.
  const Op& fa = get_op("flash_attention");
  const std::string shape = base + ",window=4096,softcap=yes,alibi=yes";
  EXPECT_EQ(op().reference_kernels(op().parse_problem(shape), DType::bf16),
            fa.reference_kernels(fa.parse_problem(shape), DType::bf16));
  // Soft-capping and ALiBi change neither the space nor the defaults (contiguous and paged);
  // a paged window neither (its splits divide each sequence from key 0). A contiguous window
  // does: its splits divide only the keys in its reach (DecodeVariants.WindowSplitsCoverIt).
  const DeviceInfo h100 = device("sm_90a");
  for (const char* extra :
       {",softcap=yes,alibi=yes", ",page=16,window=512,softcap=yes,alibi=yes"}) {
    const std::string page = std::string(extra).find("page") != std::string::npos ? ",page=16"
                                                                                  : "";
    const Problem plain = op().parse_problem(std::string(kBar1) + page);
    const Problem variants = op().parse_problem(std::string(kBar1) + extra);
    EXPECT_EQ(Space(op(), plain, DType::bf16, h100).valid_count(),
              Space(op(), variants, DType::bf16, h100).valid_count());
    EXPECT_EQ(op().default_params(plain, DType::bf16, h100),
              op().default_params(variants, DType::bf16, h100));
    EXPECT_EQ(op().workspace_bytes(op().default_params(plain, DType::bf16, h100), plain,
                                   DType::bf16),
              op().workspace_bytes(op().default_params(plain, DType::bf16, h100), variants,
                                   DType::bf16));
  }
}

// Contiguous K/V with a window much shorter than the cache: the splits divide the keys in the
// window's reach (from the first tile any row sees), so each split has work, instead of
// dividing all nk and leaving most splits left of every window.
TEST(DecodeVariants, WindowSplitsCoverIt) {
  const DeviceInfo h100 = device("sm_90a");
  // Bar 2 (one sequence, 8 KV heads, 32768 keys) with a 4096-key window: 16 splits either way
  // (one CTA per SM), 4 tiles of 64 keys each from tile 448 instead of 32 from tile 0.
  const Problem plain = op().parse_problem(kBar2);
  const Problem window = op().parse_problem(std::string(kBar2) + ",window=4096");
  const Params p = op().default_params(plain, DType::bf16, h100);
  const Params w = op().default_params(window, DType::bf16, h100);
  EXPECT_EQ(op().params_key(w), op().params_key(p));
  const auto tiles_per_split = [&](const Problem& problem, const Params& params) {
    return run(params, problem).args[0].tiles_per_split;
  };
  EXPECT_EQ(tiles_per_split(plain, p), 32);
  EXPECT_EQ(tiles_per_split(window, w), 4);
  EXPECT_EQ(flash_decode_window_base(1, 32768, 4096, 64), 448);
  // A window shorter than a split's worth of keys: fewer splits, none empty.
  const Problem narrow = op().parse_problem(std::string(kBar2) + ",window=300");
  const Params n = op().default_params(narrow, DType::bf16, h100);
  EXPECT_EQ(op().param(n, "splits"), 1);
  EXPECT_EQ(op().invalid_reason(n, narrow, DType::bf16, h100), std::nullopt);
  Params many = n;
  many.values[op().param_index("splits")] = 16;
  EXPECT_TRUE(contains(op().invalid_reason(many, narrow, DType::bf16, h100).value_or(""),
                       "in reach of the window"));
  // No window, or one covering the whole cache: the splits divide all nk, as before.
  EXPECT_EQ(flash_decode_window_base(1, 32768, 0, 64), 0);
  EXPECT_EQ(flash_decode_window_base(1, 32768, 40000, 64), 0);
}

TEST(DecodeVariants, TensorsScalarsBytesAndFlops) {
  for (const char* page : {"", ",page=32"}) {
    const std::string shape = std::string("b=3,hq=16,hkv=4,nq=2,nk=1000,d=64") + page;
    const Problem off = op().parse_problem(shape);
    const Problem on = op().parse_problem(shape + ",alibi=yes");
    const std::vector<TensorSpec> ts = op().tensors(off, DType::bf16);
    // Last: after lse (flash_attention's index 5), or paged after seq_lens.
    ASSERT_EQ(ts.size(), *page ? 8u : 6u);
    const TensorSpec& slopes = ts.back();
    EXPECT_EQ(slopes.name, "alibi_slopes");
    EXPECT_EQ(slopes.role, TensorRole::input);
    EXPECT_EQ(slopes.dtype, DType::f32);
    EXPECT_EQ(slopes.elements, 16);
    EXPECT_TRUE(slopes.optional);
    EXPECT_EQ(slopes.fill.kind, Fill::Kind::uniform);
    EXPECT_GT(slopes.fill.lo, 0.f);
    EXPECT_LE(slopes.fill.hi, 1.f);
    EXPECT_FALSE(op().tensors(on, DType::bf16).back().optional);
    // The other variants add no tensor; the slopes' bytes count only when read.
    EXPECT_EQ(op().tensors(op().parse_problem(shape + ",window=9,softcap=yes"), DType::bf16).size(),
              ts.size());
    EXPECT_DOUBLE_EQ(op().min_bytes(on, DType::bf16) - op().min_bytes(off, DType::bf16), 4.0 * 16);
  }
  // The cap is flash_attention's second scalar, 50 when tuning.
  ASSERT_EQ(op().scalars().size(), 2u);
  EXPECT_EQ(op().scalars()[1].name, "softcap");
  EXPECT_DOUBLE_EQ(op().scalars()[1].tuning_value, 50.0);
  // A window bounds the keys each row sees: flash_attention's count for the same problem, and
  // paged (nk keys per sequence, an upper bound) the contiguous one's.
  const Op& fa = get_op("flash_attention");
  const std::string w = "b=2,hq=8,hkv=2,nq=16,nk=4096,d=128,causal=yes,window=1000";
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w), DType::bf16),
                   fa.flops(fa.parse_problem(w), DType::bf16));
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w), DType::bf16), 4.0 * 2 * 8 * 128 * 16 * 1000);
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w + ",page=16"), DType::bf16),
                   op().flops(op().parse_problem(w), DType::bf16));
}

TEST(DecodeVariants, ArgumentsReachTheKernelsAndTheReferences) {
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  const std::string base = "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes";
  // Variants off: the cap and the slopes are not read (an invalid cap, a null pointer).
  for (const char* page : {"", ",page=16"}) {
    const Problem off = op().parse_problem(base + page);
    const FlashDecodeArgs a = *page ? run_paged(params, off, nullptr, 0x60000, -1.0, 0).args[0]
                                    : run(params, off, 0x100000, 0.0, nullptr, -1.0, 0).args[0];
    EXPECT_EQ(a.window, 0);
    EXPECT_EQ(a.softcap, 0.f);
    EXPECT_EQ(a.alibi_slopes, nullptr);
  }
  // Contiguous: the slopes are tensor 5 (flash_attention's), the cap scalar 1.
  const Problem all = op().parse_problem(base + ",window=77,softcap=yes,alibi=yes");
  const RecordingLauncher<FlashDecodeArgs> l = run(params, all, 0x100000, 0.0, nullptr, 30.0);
  ASSERT_EQ(l.args.size(), 2u);
  for (const FlashDecodeArgs& a : l.args) {  // the split kernel and the combine
    EXPECT_EQ(a.window, 77);
    EXPECT_FLOAT_EQ(a.softcap, 30.f);
    EXPECT_EQ(a.alibi_slopes, reinterpret_cast<const float*>(0x60000));
  }
  EXPECT_TRUE(contains(run_error([&] { run(params, all, 0x100000, 0.0, nullptr, 0.0); }),
                       "flash_decode: softcap 0.000000 must be a positive finite cap with "
                       "softcap=yes"));
  EXPECT_TRUE(contains(run_error([&] {
                         run(params, all, 0x100000, 0.0, nullptr,
                             std::numeric_limits<double>::infinity());
                       }),
                       "must be a positive finite cap"));
  EXPECT_TRUE(contains(run_error([&] { run(params, all, 0x100000, 0.0, nullptr, 30.0, 0); }),
                       "flash_decode: alibi=yes needs the alibi_slopes tensor ([hq] fp32)"));
  // Paged: the slopes are tensor 7, after the block table and the lengths.
  const Problem paged = op().parse_problem(base + ",page=16,window=77,softcap=yes,alibi=yes");
  const FlashDecodeArgs p = run_paged(params, paged, nullptr, 0x60000, 30.0).args[0];
  EXPECT_EQ(p.window, 77);
  EXPECT_FLOAT_EQ(p.softcap, 30.f);
  EXPECT_EQ(p.alibi_slopes, reinterpret_cast<const float*>(0x80000));
  EXPECT_EQ(p.block_table, reinterpret_cast<const int*>(0x60000));
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, paged, nullptr, 0x60000, 30.0, 0); }),
                       "alibi=yes needs the alibi_slopes tensor"));
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, paged, nullptr, 0x60000, -2.0); }),
                       "softcap -2.000000 must be a positive finite cap"));

  // The references get the same: flash_attention's (contiguous) reads tensor 5 and scalar 1,
  // the paged one tensor 7 and scalar 1.
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {0.0, 30.0};
  {
    const std::uint64_t tensors[6] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000};
    RunArgs a;
    a.problem = &all;
    a.tensors = tensors;
    a.scalars = scalars;
    a.kernels = &kernel;
    RecordingLauncher<FlashAttentionArgs> r;
    op().run_reference(a, r);
    ASSERT_EQ(r.args.size(), 1u);
    EXPECT_EQ(r.args[0].window, 77);
    EXPECT_FLOAT_EQ(r.args[0].softcap, 30.f);
    EXPECT_EQ(r.args[0].alibi_slopes, reinterpret_cast<const float*>(0x60000));
  }
  {
    const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                      0x50000, 0x60000, 0x70000, 0x80000};
    RunArgs a;
    a.problem = &paged;
    a.tensors = tensors;
    a.scalars = scalars;
    a.kernels = &kernel;
    RecordingLauncher<FlashAttentionArgs> r;  // flash_attention's reference, paged
    op().run_reference(a, r);
    ASSERT_EQ(r.args.size(), 1u);
    EXPECT_EQ(r.args[0].window, 77);
    EXPECT_FLOAT_EQ(r.args[0].softcap, 30.f);
    EXPECT_EQ(r.args[0].alibi_slopes, reinterpret_cast<const float*>(0x80000));
    EXPECT_EQ(r.args[0].seq_lens, reinterpret_cast<const int*>(0x70000));
  }
}

/// The key tiles flash_decode_split takes for one CTA (packed rows [r0, r0 + rows) of a sequence
/// of `len` keys, split `split` of `per` tiles), computed as the kernel computes them:
/// [start, low) masked (left of the last row's window), [low, full) unmasked, [full, end) masked.
/// start >= end: the split has no key for these rows. ran = false: the CTA exits at once
/// (paged, a split past the sequence's end).
struct KernelTiles {
  long long start = 0, low = 0, full = 0, end = 0;
  bool ran = true;
};

KernelTiles kernel_tiles(long long len, long long nq, long long group, long long r0,
                         long long rows, long long block_n, long long split, long long per,
                         bool causal, long long window, bool paged) {
  KernelTiles k;
  const long long tiles = (len + block_n - 1) / block_n;
  // Contiguous with a window, the splits divide the tiles from the first one any row sees.
  const long long base =
      paged ? 0 : flash_decode_window_base(nq, len, window, static_cast<int>(block_n));
  const long long begin = base + split * per;
  if (paged && split > 0 && begin >= tiles) {
    k.ran = false;
    return k;
  }
  k.end = std::min(tiles, begin + per);
  k.full = len / block_n;
  if (causal) {
    const long long last = flash_decode_row_limit(r0 + rows - 1, group, nq, len, true);
    k.end = std::min(k.end, last <= 0 ? 0 : (last + block_n - 1) / block_n);
    const long long first = flash_decode_row_limit(r0, group, nq, len, true);
    k.full = first <= 0 ? 0 : first / block_n;
  }
  k.start = k.low = begin;
  if (window > 0) {
    const long long first_lo = flash_decode_row_first(r0, group, nq, len, window);
    const long long last_lo = flash_decode_row_first(r0 + rows - 1, group, nq, len, window);
    k.start = std::max(begin, first_lo <= 0 ? 0 : first_lo / block_n);
    k.low = std::max(k.start,
                     std::min(k.end, last_lo <= 0 ? 0 : (last_lo + block_n - 1) / block_n));
  }
  k.full = std::max(k.low, std::min(k.full, k.end));
  return k;
}

/// Softmax attention of one query over `keys` (rows of k and v) with scores `score(j, q . k_j)`.
Partial attend_keys(const std::vector<double>& q, const std::vector<std::vector<double>>& k,
                    const std::vector<std::vector<double>>& v, const std::vector<long long>& keys,
                    const std::function<double(long long, double)>& score) {
  Partial p;
  p.o.assign(q.size(), 0.0);
  if (keys.empty()) return p;
  std::vector<double> s;
  double m = -std::numeric_limits<double>::infinity();
  for (long long j : keys) {
    double x = 0;
    for (std::size_t i = 0; i < q.size(); ++i) x += q[i] * k[static_cast<std::size_t>(j)][i];
    s.push_back(score(j, x));
    m = std::max(m, s.back());
  }
  double l = 0;
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const double e = std::exp(s[n] - m);
    l += e;
    for (std::size_t i = 0; i < q.size(); ++i)
      p.o[i] += e * v[static_cast<std::size_t>(keys[n])][i];
  }
  for (double& x : p.o) x /= l;
  p.lse = m + std::log(l);
  return p;
}

// For every CTA and split: the keys the kernel scores (its tiles, each unmasked tile whole, the
// masked ones filtered by the row's causal limit and window start) are exactly the row's visible
// keys, each once; splits left of every row's window score none and merge with weight 0; with
// soft-capping and ALiBi (the packed row's head's slope) the splits' partials merged by the
// combine equal plain attention. Contiguous and paged (per-sequence lengths, splits past the end
// exiting as the combine skips them).
TEST(DecodeVariants, WindowTilesSplitsAndCombineMatchPlainAttention) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const std::size_t d = 4;
  const double scale = 0.7, cap = 1.5;
  const long long block_m = 16;
  int checked = 0, config = 0, empty_splits = 0, skipped_tiles = 0;
  for (long long nk : {1LL, 17LL, 100LL, 333LL})
    for (long long nq : {1LL, 5LL, 17LL})
      for (long long group : {1LL, 3LL})
        for (long long block_n : {32LL, 64LL})
          for (int splits : {1, 2, 3, 5}) {
            if (flash_decode_used_splits(nk, static_cast<int>(block_n), splits) != splits)
              continue;
            std::vector<std::vector<double>> k(static_cast<std::size_t>(nk),
                                               std::vector<double>(d));
            std::vector<std::vector<double>> v = k;
            for (auto* rows : {&k, &v})
              for (auto& row : *rows)
                for (double& x : row) x = u(rng);
            std::vector<double> slopes(static_cast<std::size_t>(group));
            for (double& x : slopes) x = 0.05 + 0.2 * (u(rng) + 2.0);
            for (bool causal : {false, true})
              for (long long window : {1LL, 7LL, 60LL, 1000LL})
                for (long long len : {nk, (nk + 1) / 2, 1LL}) {
                  const bool paged = len != nk || config % 2 == 1;
                  const bool softcap = config % 4 >= 2, alibi = config % 3 != 0;
                  ++config;
                  // Contiguous: the host divides the keys from the window's first tile
                  // (split_span in decode_op.cpp), and a point with an empty split is invalid.
                  const long long span =
                      paged ? nk
                            : nk - flash_decode_window_base(nq, nk, window,
                                                            static_cast<int>(block_n)) *
                                       block_n;
                  if (flash_decode_used_splits(span, static_cast<int>(block_n), splits) != splits)
                    continue;
                  const long long per =
                      flash_decode_tiles_per_split(span, static_cast<int>(block_n), splits);
                  const long long rows = flash_decode_rows(group, nq);
                  for (long long r0 = 0; r0 < rows; r0 += block_m) {
                    const long long tile_rows = std::min(block_m, rows - r0);
                    std::vector<KernelTiles> ranges;
                    for (int s = 0; s < splits; ++s) {
                      ranges.push_back(kernel_tiles(len, nq, group, r0, tile_rows, block_n, s,
                                                    per, causal, window, paged));
                      // Left of the window: a split with tiles of its own takes none, or
                      // starts past its first.
                      const KernelTiles& t = ranges.back();
                      const long long begin = (nk - span) / block_n + s * per;
                      if (t.ran && begin < t.end && t.start >= t.end) ++empty_splits;
                      if (t.ran && begin < t.start && t.start < t.end) ++skipped_tiles;
                    }
                    // The combine reads the splits that hold keys of the sequence; the kernel
                    // exits exactly for the others.
                    const int used =
                        flash_decode_splits_used(static_cast<int>(len),
                                                 static_cast<int>(per * block_n), splits);
                    for (int s = 0; s < splits; ++s)
                      ASSERT_EQ(ranges[static_cast<std::size_t>(s)].ran, !paged || s < used)
                          << nk << " " << len << " " << s;
                    for (long long r = r0; r < r0 + tile_rows; ++r) {
                      const long long aligned = r / group + len - nq;
                      const long long limit = flash_decode_row_limit(r, group, nq, len, causal);
                      const long long first =
                          std::max(0LL, flash_decode_row_first(r, group, nq, len, window));
                      const double slope = slopes[static_cast<std::size_t>(r % group)];
                      const auto score = [&](long long j, double dot) {
                        double x = scale * dot;
                        if (softcap) x = cap * std::tanh(x / cap);
                        if (alibi) x -= slope * static_cast<double>(std::llabs(j - aligned));
                        return x;
                      };
                      std::vector<double> q(d);
                      for (double& x : q) x = u(rng);
                      std::vector<long long> visible;
                      for (long long j = first; j < limit; ++j) visible.push_back(j);
                      const Partial full = attend_keys(q, k, v, visible, score);
                      std::vector<long long> scored;
                      std::vector<Partial> parts;
                      for (int s = 0; s < (paged ? used : splits); ++s) {
                        const KernelTiles& t = ranges[static_cast<std::size_t>(s)];
                        std::vector<long long> keys;
                        for (long long n = t.start; n < t.end; ++n) {
                          const bool masked = n < t.low || n >= t.full;
                          for (long long j = n * block_n; j < (n + 1) * block_n; ++j)
                            if (!masked || (j < limit && j >= first)) keys.push_back(j);
                        }
                        scored.insert(scored.end(), keys.begin(), keys.end());
                        parts.push_back(attend_keys(q, k, v, keys, score));
                      }
                      ASSERT_EQ(scored, visible)
                          << "nk=" << nk << " len=" << len << " nq=" << nq << " g=" << group
                          << " bn=" << block_n << " splits=" << splits << " causal=" << causal
                          << " window=" << window << " row=" << r;
                      const Partial combined = merge(parts, d);
                      if (std::isinf(full.lse)) {
                        EXPECT_TRUE(std::isinf(combined.lse) && combined.lse < 0);
                      } else {
                        EXPECT_NEAR(combined.lse, full.lse, 1e-12);
                      }
                      for (std::size_t i = 0; i < d; ++i)
                        ASSERT_NEAR(combined.o[i], full.o[i], 1e-12);
                      ++checked;
                    }
                  }
                }
          }
  EXPECT_GT(checked, 20000);
  EXPECT_GT(empty_splits, 100);   // splits wholly left of the window write weight 0
  EXPECT_GT(skipped_tiles, 100);  // and others start past their first tiles
}

// NVRTC: the default kernels of the combinations of the variants (contiguous and paged, decode
// and a 16-row query block, d = 64, 128, 256, bf16 without and fp16 with the causal mask; all
// three variants everywhere, the others sampled) compile for sm_80 and sm_90a and keep everything
// in registers; their references compile.
TEST(DecodeVariants, EveryCombinationsDefaultsCompileWithoutSpills) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  std::vector<bool> is_default;
  const auto add = [&](const KernelSource& k, const std::string& arch, bool def) {
    if (seen.insert({arch, k.name_expression}).second) {
      jobs.push_back({k, arch, {}});
      is_default.push_back(def);
    }
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (int mask = 1; mask < 8; ++mask) {
      const std::string variants = std::string(mask & 1 ? ",window=1000" : "") +
                                   (mask & 2 ? ",softcap=yes" : "") +
                                   (mask & 4 ? ",alibi=yes" : "");
      for (const char* page : {"", ",page=16"})
        for (std::int64_t d : {64, 128, 256})
          for (const char* dims :
               {"b=1,hq=64,hkv=8,nq=1,nk=32768", "b=1,hq=32,hkv=8,nq=16,nk=8192"})
            for (DType t : {DType::bf16, DType::f16}) {
              // A sample (CI time): all three variants (the most registers) everywhere; each
              // other combination at one (query shape, dtype) per head dim and layout, rotating.
              const int pick = (mask + static_cast<int>(d / 64) + (*page ? 1 : 0)) % 4;
              const int here = (std::string(dims).find("nq=1,") != std::string::npos ? 0 : 2) +
                               (t == DType::f16 ? 1 : 0);
              if (mask != 7 && pick != here) continue;
              const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                                   page + variants +
                                                   (t == DType::f16 ? ",causal=yes" : ""));
              for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t))
                add(k, arch, true);
              // The references (flash attention's, arch-independent code) on one arch only.
              if (dev.cc_major == 9)
                for (const KernelSource& k : op().reference_kernels(p, t)) add(k, arch, false);
            }
    }
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  int defaults = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%s %-6s %-88s %3d registers, stack %d, spills %d/%d\n",
                is_default[i] ? "default" : "ref    ", jobs[i].arch.c_str(), expr.c_str(),
                r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    EXPECT_LE(r.registers, 255) << expr;
    if (is_default[i]) {
      ++defaults;
      EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
      EXPECT_EQ(r.spill_loads, 0) << jobs[i].arch << " " << expr;
    }
  }
  // At least one split kernel per arch, combination, layout and head dim (combines and the two
  // query shapes' kernels coincide in places).
  EXPECT_GE(defaults, 2 * 7 * 2 * 3);
}

}  // namespace
}  // namespace ktune
