// Flash attention through the public runtime API on the GPU, against the Eigen (double) CPU
// reference: head dims, both dtypes, causal and not, nq != nk both ways, grouped-query and
// multi-query heads, odd lengths, [B,H,S,D] and [B,S,H,D] layouts, the LSE; the default
// configuration and non-default ones planted as the exact best of a database. The mask variants
// (sliding window, soft-capping, ALiBi, and Gemma 2's window + softcap) through the generic entry.
// Variable-length batches (varlen) and paged K/V caches (dense or packed queries; pools whose
// unused rows are NaN) through the op directly, against the reference per sequence.
// Also the tuner's fp32 reference kernel, and bad arguments through the C API. Skipped without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "search/space.hpp"
#include "templates/attention/attention_op.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/gpu_kernels.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::AttentionResult;
using test::AttentionShape;
using test::AttentionTensor;

/// A head dim between the kernels' tiles (run in the next tile's kernels).
bool tile_between(std::int64_t d) { return d != 32 && d != 64 && d != 96 && d != 128 && d != 256; }

const Op& op() { return flash_attention_op(); }

/// Non-default configurations planted as the tuned best of every case where they are valid:
/// between them they cover each value of every tunable. The last thirteen are the wgmma kernel
/// (impl=1, sm_90a only: elsewhere invalid and skipped) with 1, 2 and 3 consumer warpgroups,
/// with 2 and 3 taking turns (pingpong=1), persistent (one CTA per SM looping over the tiles;
/// GpuAttentionPersistent runs it with a few CTAs, each many tiles), and without register
/// reallocation (reg_split=0: d=64, or d=128 with 2 consumers).
const char* const kPlanted[] = {
    "block_m=64,block_n=32,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0",
    "block_m=128,block_n=128,warps=8,stages=2,q_regs=1,smem_pad=0,impl=0",
    "block_m=256,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=1,impl=0",
    "block_m=128,block_n=64,warps=4,stages=3,q_regs=1,smem_pad=1,impl=0",
    "block_m=64,block_n=128,warps=4,stages=3,q_regs=0,smem_pad=1,impl=0",
    "block_m=128,block_n=32,warps=8,stages=2,q_regs=0,smem_pad=1,impl=0",
    "block_m=64,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0",
    "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1",
    "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1",
    "block_m=192,block_n=64,warps=16,stages=2,q_regs=0,smem_pad=0,impl=1",
    "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1",
    "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1",
    "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1",
    "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
    "persistent=1",
    "block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,reg_split=0",
    "block_m=192,block_n=64,warps=16,stages=2,q_regs=0,smem_pad=0,impl=1,persistent=1,"
    "reg_split=0",
    // 80-key tiles (d=256 only, two consumers), with turns, and persistent.
    "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1",
    "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,persistent=1",
    // K and V freed apart (kv_apart=1, two stages): 128-key tiles with turns (d=64, 128) and
    // 80-key ones (d=256).
    "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,kv_apart=1",
    "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,kv_apart=1",
};
/// The ones the mask variants run: other tile shapes, and the wgmma kernel with 1 and 3
/// consumer warpgroups, 2 taking turns, 2 taking turns persistently, and 2 taking turns
/// without register reallocation; 80-key tiles (d=256); and K and V freed apart.
const char* const kVariantPlanted[] = {kPlanted[0],  kPlanted[2],  kPlanted[4],  kPlanted[7],
                                       kPlanted[9],  kPlanted[10], kPlanted[13], kPlanted[14],
                                       kPlanted[16], kPlanted[18]};

/// A database at `db` whose one best row for (device, flash_attention, t, p) is `params`.
void plant(const std::filesystem::path& db, const DeviceInfo& device, DType t, const Problem& p,
           const std::string& params) {
  Store store = Store::open(db, Store::Mode::read_write);
  store.upsert_device(device);
  BestRecord b;
  b.device_key = device.key();
  b.op = "flash_attention";
  b.dtype = t;
  b.problem_key = op().problem_key(p);
  b.params_key = params;
  b.template_hash = op().template_hash();
  b.median_us = 1.0;
  store.set_best(b);
}

/// One compile cache for the whole binary: a kernel used by several cases compiles once.
const std::filesystem::path& cache_dir() {
  static test::TempDir dir;
  return dir.path();
}

/// A runtime's options with the database `db` alone (no shipped ones) and the binary's cache.
RuntimeOptions options_with(const std::filesystem::path& db) {
  RuntimeOptions ro;
  ro.db_path = db.string();
  ro.use_shipped_databases = false;
  ro.cache_dir = cache_dir().string();
  return ro;
}

Problem problem_of(const AttentionShape& s) {
  Problem p;
  // varlen and page off: the cases with those build their problems themselves.
  p.values = {s.b, s.hq, s.hkv, s.nq, s.nk, s.d, s.causal ? 1 : 0, s.window,
              s.softcap > 0 ? 1 : 0, s.alibi_slopes.empty() ? 0 : 1, 0, 0};
  return p;
}

/// The fields of `s` a problem sets; the cap and the slopes are the caller's.
AttentionShape shape_from(const Problem& p) {
  AttentionShape s;
  s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2];
  s.nq = p.values[3], s.nk = p.values[4], s.d = p.values[5];
  s.causal = p.values[6] != 0;
  s.window = p.values[7];
  return s;
}

/// A [B, H, S, D] tensor: random host values in [-2, 2) rounded to t (never 0) and their device
/// copy in the chosen layout.
struct DeviceTensor {
  AttentionTensor host;
  DeviceBuffer dev;

  DeviceTensor(DType t, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool bshd,
               std::mt19937& rng) {
    test::attention_strides(b, h, s, d, bshd, host);
    dev = test::upload_random(t, host.data, rng);
  }
  const void* ptr() const { return reinterpret_cast<const void*>(dev.get()); }
};

/// Output buffers poisoned with NaN: o in the layout of q, lse [B, Hq, Nq] fp32.
struct Outputs : test::PoisonedOutputs {
  AttentionTensor layout;  // o's strides

  Outputs(const AttentionShape& s, bool bshd)
      : test::PoisonedOutputs(static_cast<std::size_t>(s.b * s.hq * s.nq * s.d),
                              static_cast<std::size_t>(s.b * s.hq * s.nq)) {
    test::attention_strides(s.b, s.hq, s.nq, s.d, bshd, layout);
  }
};

using test::Checker;

/// Downloads o (through its layout) and lse and compares them with the reference.
void check_outputs(const AttentionShape& s, DType t, Outputs& out, const AttentionResult& ref,
                   bool with_lse, const std::string& what) {
  const std::vector<std::uint16_t> o_bits = out.o_bits();
  const std::vector<float> lse = out.lse_values();
  Checker o_check{op().tolerance(t), what + " o"};
  Checker lse_check{op().tolerance(t), what + " lse"};
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t r = 0; r < s.nq; ++r) {
        const std::string row = "b=" + std::to_string(b) + " h=" + std::to_string(h) +
                                " row=" + std::to_string(r);
        const std::size_t at =
            static_cast<std::size_t>(b * out.layout.batch + h * out.layout.head + r * out.layout.seq);
        for (std::int64_t i = 0; i < s.d; ++i) {
          const std::uint16_t bits = o_bits[at + static_cast<std::size_t>(i)];
          // e4m3 inputs write bf16.
          const double v = t == DType::f16 ? test::fp16_bits_to_float(bits)
                                           : test::bf16_bits_to_float(bits);
          o_check(v, ref.o_at(s, b, h, r, i), [&] { return row + " i=" + std::to_string(i); });
        }
        const std::size_t li = static_cast<std::size_t>((b * s.hq + h) * s.nq + r);
        if (with_lse)
          lse_check(lse[li], ref.lse[li], row);
        else if (!std::isnan(lse[li]))
          ADD_FAILURE() << what << ": lse written although the pointer was null";
      }
}

struct Case {
  const char* dims;  // b, hq, hkv, nq, nk, causal; d comes from the test parameter
  bool bshd;         // [B, S, H, D] tensors, else [B, H, S, D]
};

AttentionShape shape_of(const Case& c, std::int64_t d) {
  return shape_from(op().parse_problem(std::string(c.dims) + ",d=" + std::to_string(d)));
}

const Case kCases[] = {
    {"b=1,hq=1,hkv=1,nq=1,nk=1", false},
    {"b=1,hq=2,hkv=2,nq=1,nk=1,causal=yes", true},
    {"b=2,hq=4,hkv=4,nq=17,nk=17,causal=yes", true},
    {"b=1,hq=4,hkv=1,nq=17,nk=1000,causal=yes", false},   // MQA, nq < nk
    {"b=2,hq=8,hkv=2,nq=1000,nk=17,causal=yes", true},    // GQA 4:1, rows that see no key
    {"b=2,hq=8,hkv=2,nq=1000,nk=17", false},
    {"b=1,hq=2,hkv=2,nq=1000,nk=1000", false},
    {"b=1,hq=2,hkv=1,nq=4097,nk=4097,causal=yes", true},
    {"b=1,hq=4,hkv=4,nq=333,nk=4097", false},
    {"b=2,hq=4,hkv=1,nq=4097,nk=1000,causal=yes", true},
    {"b=3,hq=2,hkv=2,nq=200,nk=1", false},
    {"b=1,hq=8,hkv=2,nq=128,nk=128,causal=yes", true},     // whole tiles only
};

class GpuAttention
    : public ::testing::TestWithParam<std::tuple<Case, std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    KTUNE_REQUIRE_SUITE(setup_error_);
    ensure_context(0);
    device_ = query_device(0);
  }

  static void SetUpTestSuite() { setup_error_ = test::suite_setup(compile_suite); }

  /// Compiles every kernel the cases will dispatch, in parallel, into the shared cache.
  static void compile_suite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    std::vector<CompileJob> jobs;
    for (std::int64_t d : {32, 64, 96, 128, 256, 40, 80, 112, 192})
      for (DType t : {DType::bf16, DType::f16})
        for (bool causal : {false, true}) {
          if (t != DType::bf16 && tile_between(d)) continue;  // BetweenTiles: bf16 only
          AttentionShape s;
          s.d = d;
          s.causal = causal;
          const Problem p = problem_of(s);
          jobs.push_back({op().kernels(op().default_params(p, t, dev), p, t)[0], dev.arch(), {}});
          for (const char* planted : kPlanted) {
            const Params params = op().parse_params(planted);
            if (!op().invalid_reason(params, p, t, dev))
              jobs.push_back({op().kernels(params, p, t)[0], dev.arch(), {}});
          }
        }
    const Compiler compiler(cache_dir());
    compile_parallel(compiler, jobs, 0);
  }

  static inline std::string setup_error_;
  DeviceInfo device_;
  test::TempDir dir_;
};

// One call through the typed C++ API and its check. Planted configurations get an explicit
// layout; the default gets a null layout for [B,H,S,D] (the contiguous path).
void run_case(Runtime& rt, const AttentionShape& s, DType t, bool bshd, const DeviceTensor& q,
              const DeviceTensor& k, const DeviceTensor& v, const AttentionResult& ref,
              bool explicit_layout, bool with_lse, const std::string& what) {
  Outputs out(s, bshd);
  out.poison(t);
  const AttentionLayout layout = bshd ? AttentionLayout::bshd(s.hq, s.hkv, s.nq, s.nk, s.d)
                                      : AttentionLayout::bhsd(s.hq, s.hkv, s.nq, s.nk, s.d);
  rt.flash_attention(q.ptr(), k.ptr(), v.ptr(), out.o_ptr(), with_lse ? out.lse_ptr() : nullptr,
                     s.b, s.hq, s.hkv, s.nq, s.nk, s.d, s.causal, static_cast<float>(s.scale), t,
                     nullptr, bshd || explicit_layout ? &layout : nullptr);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  check_outputs(s, t, out, ref, with_lse, what);
}

TEST_P(GpuAttention, DefaultAndTunedConfigsMatchTheReference) {
  const auto& [c, d, t] = GetParam();
  AttentionShape s = shape_of(c, d);
  const Problem p = problem_of(s);
  const std::string name = op().problem_key(p) + (c.bshd ? " bshd " : " bhsd ") + dtype_name(t);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  if (s.nq == 17) s.scale = 0.3;  // an explicit scale somewhere
  const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, c.bshd, rng);
  const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, c.bshd, rng);
  const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, c.bshd, rng);
  const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);

  RuntimeOptions ro = options_with(dir_.path() / "empty.db");
  Runtime rt(ro);
  const MatchInfo def = rt.query("flash_attention", op().problem_key(p), t);
  EXPECT_EQ(def.kind, Match::default_config);
  run_case(rt, s, t, c.bshd, q, k, v, ref, false, true, name + " default " + def.params);

  int n = 0;
  for (const char* planted : kPlanted) {
    const Params params = op().parse_params(planted);
    if (op().invalid_reason(params, p, t, device_)) continue;
    const std::filesystem::path db = dir_.path() / ("tuned-" + std::to_string(n++) + ".db");
    plant(db, device_, t, p, planted);
    ro.db_path = db.string();
    rt.configure(ro);
    const MatchInfo mi = rt.query("flash_attention", op().problem_key(p), t);
    EXPECT_EQ(mi.kind, Match::exact);
    EXPECT_EQ(mi.params, planted);
    // Every third planted run leaves lse null: o must not depend on it.
    run_case(rt, s, t, c.bshd, q, k, v, ref, true, n % 3 != 0, name + " " + mi.params);
  }
  EXPECT_GE(n, 3) << "too few planted configurations are valid for " << name;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, std::int64_t, DType>>& info) {
  const auto& [c, d, t] = info.param;
  std::string s = std::string(c.dims) + "_d" + std::to_string(d) + (c.bshd ? "_bshd_" : "_bhsd_") +
                  dtype_name(t);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(HeadDims64And128, GpuAttention,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(std::int64_t{64}, std::int64_t{128}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);

const Case kOtherHeadDimCases[] = {
    {"b=2,hq=4,hkv=2,nq=300,nk=77,causal=yes", true},
    {"b=1,hq=3,hkv=1,nq=129,nk=1000", false},
};

INSTANTIATE_TEST_SUITE_P(OtherHeadDims, GpuAttention,
                         ::testing::Combine(::testing::ValuesIn(kOtherHeadDimCases),
                                            ::testing::Values(std::int64_t{32}, std::int64_t{96},
                                                              std::int64_t{256}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);
// Head dims between the kernels' tiles (2026-12-04): d=40 in d=64's, 80 in 96's, 112 in 128's,
// 192 in 256's, the columns past d zeros (head_dims_test.cpp).
INSTANTIATE_TEST_SUITE_P(BetweenTiles, GpuAttention,
                         ::testing::Combine(::testing::ValuesIn(kOtherHeadDimCases),
                                            ::testing::Values(std::int64_t{40}, std::int64_t{80},
                                                              std::int64_t{112},
                                                              std::int64_t{192}),
                                            ::testing::Values(DType::bf16)),
                         case_name);

// Without a GPU too (CI): the problems the suite builds host-side are problems of the op. One
// with a dim missing made SetUpTestSuite throw, and gtest skipped every case without a reason.
TEST(GpuAttentionProblems, EveryCaseBuildsAValidProblem) {
  for (std::int64_t d : {32, 64, 96, 128, 256, 40, 80, 112, 192}) {
    for (const Case& c : kCases) EXPECT_NO_THROW(op().check_problem(problem_of(shape_of(c, d))));
    for (const Case& c : kOtherHeadDimCases)
      EXPECT_NO_THROW(op().check_problem(problem_of(shape_of(c, d))));
    AttentionShape s;  // the suite's compile list
    s.d = d;
    EXPECT_NO_THROW(op().check_problem(problem_of(s))) << "d=" << d;
  }
}

// ---- e4m3 (FP8) inputs ----

/// q, k and v in e4m3 with dequantisation scales through the generic entry (o in bf16, the
/// runtime's workspace for V transposed), the default and planted wgmma configurations, against
/// the double reference of the dequantised values. sm_90a only.
TEST(GpuAttentionE4m3, DefaultAndTunedConfigsMatchTheReference) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major != 9) GTEST_SKIP() << "e4m3 attention runs on sm_90a only; this is " << dev.arch();
  test::TempDir dir;
  const char* const planted[] = {
      "block_m=64,block_n=128,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1",
      "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
      "persistent=1",
      "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1",
  };
  const char* const cases[] = {"b=2,hq=4,hkv=2,nq=300,nk=517,d=128",
                               "b=2,hq=4,hkv=2,nq=300,nk=517,d=128,causal=yes",
                               "b=1,hq=3,hkv=3,nq=77,nk=2049,d=128",
                               "b=1,hq=2,hkv=1,nq=1000,nk=1000,d=256,causal=yes"};
  const float scales[3] = {0.25f, 0.5f, 2.0f};
  for (const char* dims : cases) {
    const Problem p = op().parse_problem(dims);
    AttentionShape s = shape_from(p);
    const std::string name = std::string(dims) + " e4m3";
    std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
    const DeviceTensor q(DType::e4m3, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor k(DType::e4m3, s.b, s.hkv, s.nk, s.d, false, rng);
    const DeviceTensor v(DType::e4m3, s.b, s.hkv, s.nk, s.d, false, rng);
    // The reference sees the dequantised values.
    AttentionTensor qs = q.host, ks = k.host, vs = v.host;
    for (double& x : qs.data) x *= scales[0];
    for (double& x : ks.data) x *= scales[1];
    for (double& x : vs.data) x *= scales[2];
    const AttentionResult ref = test::attention_ref(s, qs, ks, vs);

    RuntimeOptions ro = options_with(dir.path() / "empty.db");
    Runtime rt(ro);
    const auto call = [&](const std::string& what) {
      Outputs out(s, false);
      out.poison(DType::e4m3);
      AttentionArgs a;
      a.q = q.ptr(), a.k = k.ptr(), a.v = v.ptr(), a.o = out.o_ptr(), a.lse = out.lse_ptr();
      a.b = s.b, a.hq = s.hq, a.hkv = s.hkv, a.nq = s.nq, a.nk = s.nk, a.d = s.d;
      a.causal = s.causal;
      a.dtype = DType::e4m3;
      a.q_scale = scales[0], a.k_scale = scales[1], a.v_scale = scales[2];
      rt.attention(a, nullptr);
      KTUNE_CU(Driver::get().cuCtxSynchronize());
      check_outputs(s, DType::e4m3, out, ref, true, what);
    };
    const MatchInfo def = rt.query("flash_attention", op().problem_key(p), DType::e4m3);
    EXPECT_EQ(def.kind, Match::default_config);
    call(name + " default " + def.params);
    int n = 0;
    for (const char* pl : planted) {
      if (op().invalid_reason(op().parse_params(pl), p, DType::e4m3, dev)) continue;
      const std::filesystem::path db = dir.path() / ("e4m3-" + std::to_string(n++) + ".db");
      plant(db, dev, DType::e4m3, p, pl);
      ro.db_path = db.string();
      rt.configure(ro);
      const MatchInfo mi = rt.query("flash_attention", op().problem_key(p), DType::e4m3);
      EXPECT_EQ(mi.kind, Match::exact);
      call(name + " " + mi.params);
    }
    EXPECT_GE(n, s.d == 128 ? 3 : 1) << name;
  }
}

// ---- lazy rescaling of O ----

/// Keys whose scores grow along the sequence (row j of K scaled by 1 + 7 j / nk), so that later
/// key tiles pass the row maxima of earlier ones by far more than 2^8: the wgmma kernel at d=256
/// and for e4m3 rescales O lazily (only then), so its rescaling path runs, several times a row,
/// and the result must still match the double reference. The data is checked to do that. Each
/// case runs its default and one planted configuration. sm_90a only.
TEST(GpuAttentionLazyRescale, RowMaximaGrowingAlongTheKeysMatchTheReference) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major != 9)
    GTEST_SKIP() << "lazy rescaling is the wgmma kernel's (sm_90a); this is " << dev.arch();
  test::TempDir dir;
  struct GrowingCase {
    const char* dims;
    DType t;
    const char* planted;
  };
  const GrowingCase cases[] = {
      {"b=1,hq=2,hkv=2,nq=300,nk=2000,d=256", DType::bf16,
       "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1"},
      {"b=1,hq=2,hkv=1,nq=300,nk=2000,d=256,causal=yes", DType::f16,
       "block_m=128,block_n=64,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1"},
      {"b=1,hq=2,hkv=1,nq=300,nk=2000,d=128", DType::e4m3,
       "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1"},
      {"b=1,hq=4,hkv=2,nq=257,nk=1500,d=128,causal=yes", DType::e4m3,
       "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1"},
  };
  for (const GrowingCase& c : cases) {
    const Problem p = op().parse_problem(c.dims);
    const AttentionShape s = shape_from(p);
    const std::string name = std::string(c.dims) + " " + dtype_name(c.t) + " growing keys";
    std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
    const DeviceTensor q(c.t, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor v(c.t, s.b, s.hkv, s.nk, s.d, false, rng);
    AttentionTensor k;
    test::attention_strides(s.b, s.hkv, s.nk, s.d, false, k);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (std::int64_t b = 0; b < s.b; ++b)
      for (std::int64_t h = 0; h < s.hkv; ++h)
        for (std::int64_t j = 0; j < s.nk; ++j)
          for (std::int64_t i = 0; i < s.d; ++i)
            k.data[static_cast<std::size_t>(b * k.batch + h * k.head + j * k.seq + i)] =
                u(rng) * (1.0 + 7.0 * static_cast<double>(j) / static_cast<double>(s.nk));
    const DeviceBuffer kd = test::upload_values(c.t, k.data);
    // The last query row sees every key: its maximum over all keys passes its maximum over the
    // first 64 by well over 2^8 (log2 units of the scaled scores).
    const double to_log2 = 1.4426950408889634 / std::sqrt(static_cast<double>(s.d));
    double first = -1e300, all = -1e300;
    for (std::int64_t j = 0; j < s.nk; ++j) {
      double dot = 0;
      for (std::int64_t i = 0; i < s.d; ++i) dot += q.host.at(0, 0, s.nq - 1, i) * k.at(0, 0, j, i);
      all = std::max(all, dot * to_log2);
      if (j < 64) first = std::max(first, dot * to_log2);
    }
    ASSERT_GT(all - first, 24.0) << name << ": the data does not make the maxima grow enough";
    const AttentionResult ref = test::attention_ref(s, q.host, k, v.host);

    RuntimeOptions ro = options_with(dir.path() / "empty.db");
    Runtime rt(ro);
    const auto call = [&](const std::string& what) {
      Outputs out(s, false);
      out.poison(c.t);
      AttentionArgs a;
      a.q = q.ptr(), a.k = reinterpret_cast<const void*>(kd.get()), a.v = v.ptr();
      a.o = out.o_ptr(), a.lse = out.lse_ptr();
      a.b = s.b, a.hq = s.hq, a.hkv = s.hkv, a.nq = s.nq, a.nk = s.nk, a.d = s.d;
      a.causal = s.causal;
      a.dtype = c.t;
      if (c.t == DType::e4m3) a.q_scale = a.k_scale = a.v_scale = 1.0f;
      rt.attention(a, nullptr);
      KTUNE_CU(Driver::get().cuCtxSynchronize());
      check_outputs(s, c.t, out, ref, true, what);
    };
    const MatchInfo def = rt.query("flash_attention", op().problem_key(p), c.t);
    EXPECT_EQ(def.kind, Match::default_config);
    EXPECT_TRUE(def.params.find("impl=1") != std::string::npos) << name << ": " << def.params;
    call(name + " default " + def.params);
    const Params planted = op().parse_params(c.planted);
    const std::optional<std::string> why = op().invalid_reason(planted, p, c.t, dev);
    ASSERT_FALSE(why.has_value()) << name << " " << c.planted << ": " << why.value_or("");
    const std::filesystem::path db = dir.path() / (test::param_name(name) + ".db");
    plant(db, dev, c.t, p, c.planted);
    ro.db_path = db.string();
    rt.configure(ro);
    const MatchInfo mi = rt.query("flash_attention", op().problem_key(p), c.t);
    EXPECT_EQ(mi.kind, Match::exact);
    EXPECT_NE(mi.params, def.params) << name;
    call(name + " " + mi.params);
  }
}

// ---- mask variants ----

struct VariantCase {
  const char* dims;  // with window / softcap / alibi; d comes from the test parameter
  double softcap;    // the cap with softcap=yes
};

const VariantCase kVariantCases[] = {
    {"b=1,hq=4,hkv=2,nq=1000,nk=1000,causal=yes,window=256", 0},
    {"b=2,hq=2,hkv=2,nq=333,nk=777,window=100", 0},                 // not causal, nq < nk
    {"b=1,hq=2,hkv=1,nq=777,nk=333,causal=yes,window=64", 0},       // rows that see no key
    {"b=1,hq=2,hkv=2,nq=200,nk=200,causal=yes,window=1", 0},        // the diagonal only
    {"b=1,hq=2,hkv=2,nq=130,nk=4097,causal=yes,window=5000", 0},    // wider than nk
    {"b=1,hq=4,hkv=4,nq=300,nk=300,softcap=yes", 2.0},              // the cap saturates
    {"b=1,hq=4,hkv=4,nq=129,nk=1000,causal=yes,softcap=yes", 50.0},
    {"b=1,hq=8,hkv=2,nq=500,nk=500,alibi=yes", 0},
    {"b=1,hq=4,hkv=1,nq=257,nk=1025,causal=yes,alibi=yes", 0},
    {"b=1,hq=8,hkv=4,nq=2048,nk=2048,causal=yes,window=1024,softcap=yes", 5.0},  // Gemma 2
    {"b=2,hq=4,hkv=2,nq=1000,nk=1500,causal=yes,window=300,softcap=yes,alibi=yes", 3.0},
    {"b=1,hq=2,hkv=2,nq=999,nk=999,window=77,softcap=yes,alibi=yes", 3.0},
};

class GpuAttentionVariants
    : public ::testing::TestWithParam<std::tuple<VariantCase, std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
  }
  /// Compiles every kernel the cases will dispatch, in parallel, into the shared cache.
  static void SetUpTestSuite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    std::vector<CompileJob> jobs;
    for (const VariantCase& c : kVariantCases)
      for (std::int64_t d : {64, 128})
        for (DType t : {DType::bf16, DType::f16}) {
          const Problem p = op().parse_problem(std::string(c.dims) + ",d=" + std::to_string(d));
          jobs.push_back({op().kernels(op().default_params(p, t, dev), p, t)[0], dev.arch(), {}});
          for (const char* planted : kVariantPlanted) {
            const Params params = op().parse_params(planted);
            if (!op().invalid_reason(params, p, t, dev))
              jobs.push_back({op().kernels(params, p, t)[0], dev.arch(), {}});
          }
        }
    compile_parallel(Compiler(cache_dir()), jobs, 0);
  }

  DeviceInfo device_;
  test::TempDir dir_;
};

/// One run through the generic entry (tensors q, k, v, o, lse, slopes; scalars scale, cap).
void run_variant(Runtime& rt, const AttentionShape& s, DType t, const DeviceTensor& q,
                 const DeviceTensor& k, const DeviceTensor& v, const DeviceBuffer& slopes,
                 const AttentionResult& ref, const std::string& what) {
  Outputs out(s, false);
  out.poison(t);
  rt.run("flash_attention", problem_of(s).values, t,
         {q.ptr(), k.ptr(), v.ptr(), out.o_ptr(), out.lse_ptr(),
          s.alibi_slopes.empty() ? nullptr : reinterpret_cast<const void*>(slopes.get())},
         {s.scale, s.softcap}, nullptr);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  check_outputs(s, t, out, ref, true, what);
}

TEST_P(GpuAttentionVariants, DefaultAndTunedConfigsMatchTheReference) {
  const auto& [c, d, t] = GetParam();
  const Problem p = op().parse_problem(std::string(c.dims) + ",d=" + std::to_string(d));
  AttentionShape s = shape_from(p);
  if (p.values[8] != 0) s.softcap = c.softcap;
  const std::string name = op().problem_key(p) + " " + dtype_name(t);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  std::vector<float> slopes(static_cast<std::size_t>(s.hq), 0.f);
  if (p.values[9] != 0) {
    // Slopes as ALiBi makes them, 2^(-8 (h + 1) / hq), shuffled so heads differ from the order.
    for (std::size_t h = 0; h < slopes.size(); ++h)
      slopes[h] = std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(slopes.size()));
    std::shuffle(slopes.begin(), slopes.end(), rng);
    s.alibi_slopes.assign(slopes.begin(), slopes.end());
  }
  DeviceBuffer slopes_dev(slopes.size() * 4);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(slopes_dev.get(), slopes.data(), slopes.size() * 4));
  const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
  const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, false, rng);
  const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, false, rng);
  const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);

  RuntimeOptions ro = options_with(dir_.path() / "empty.db");
  Runtime rt(ro);
  EXPECT_EQ(rt.query("flash_attention", op().problem_key(p), t).kind, Match::default_config);
  run_variant(rt, s, t, q, k, v, slopes_dev, ref, name + " default");

  // The planted configurations: other tile shapes, so the window's tile bounds and the per-warp
  // skips are exercised with 32- and 128-key tiles, and the wgmma kernel's per-warpgroup ranges.
  int n = 0;
  for (const char* planted : kVariantPlanted) {
    const Params params = op().parse_params(planted);
    if (op().invalid_reason(params, p, t, device_)) continue;
    const std::filesystem::path db = dir_.path() / ("tuned-" + std::to_string(n++) + ".db");
    plant(db, device_, t, p, planted);
    ro.db_path = db.string();
    rt.configure(ro);
    EXPECT_EQ(rt.query("flash_attention", op().problem_key(p), t).kind, Match::exact);
    run_variant(rt, s, t, q, k, v, slopes_dev, ref, name + " " + planted);
  }
  EXPECT_GE(n, 2) << name;
}

std::string variant_name(
    const ::testing::TestParamInfo<std::tuple<VariantCase, std::int64_t, DType>>& info) {
  const auto& [c, d, t] = info.param;
  std::string s = std::string(c.dims) + "_d" + std::to_string(d) + "_" + dtype_name(t);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(Variants, GpuAttentionVariants,
                         ::testing::Combine(::testing::ValuesIn(kVariantCases),
                                            ::testing::Values(std::int64_t{64}, std::int64_t{128}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         variant_name);
// d=80 (between tiles: d=96's kernels, the columns past 80 zeros): bf16 only.
INSTANTIATE_TEST_SUITE_P(VariantsD80, GpuAttentionVariants,
                         ::testing::Combine(::testing::ValuesIn(kVariantCases),
                                            ::testing::Values(std::int64_t{80}),
                                            ::testing::Values(DType::bf16)),
                         variant_name);
// d=96 (the wgmma kernel in d=128's padded shared layout, since 2026-12-04): bf16 only.
INSTANTIATE_TEST_SUITE_P(VariantsD96, GpuAttentionVariants,
                         ::testing::Combine(::testing::ValuesIn(kVariantCases),
                                            ::testing::Values(std::int64_t{96}),
                                            ::testing::Values(DType::bf16)),
                         variant_name);

// ---- the persistent wgmma kernel with a few CTAs ----

/// persistent=1 through the op directly with RunArgs::sm_count of 1, 3 and 7, so that every CTA
/// loops over many query tiles of several heads: the K/V ring, Q's buffer and the consumers'
/// turns carry from tile to tile, through causal tiles that skip keys or see none, windows and
/// the tail of the last tile. Against the double reference, outputs poisoned with NaN.
class GpuAttentionPersistent : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
    if (device_.cc_major != 9) GTEST_SKIP() << "the wgmma kernel needs sm_90a";
  }
  DeviceInfo device_;
};

/// The persistent wgmma kernel's cases: (problem, configuration, softcap), each run against the
/// reference by FewCtasLoopingOverEveryTileMatchTheReference (bf16 and fp16 alternately) and
/// checked valid on sm_90a without a GPU by PersistentCasesAreValidOnSm90a.
struct PersistentCase {
  const char* dims;
  const char* params;
  double softcap;
};
const PersistentCase kPersistentCases[] = {
    {"b=2,hq=4,hkv=1,nq=333,nk=1000,d=128,causal=yes",
     "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
     "persistent=1", 0},
    {"b=2,hq=8,hkv=2,nq=1000,nk=17,d=64,causal=yes",  // tiles that see no key
     "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
     "persistent=1", 0},
    {"b=3,hq=2,hkv=2,nq=200,nk=777,d=64",
     "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1", 0},
    {"b=1,hq=4,hkv=2,nq=700,nk=700,d=128,causal=yes,window=100,softcap=yes,alibi=yes",
     "block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1", 5.0},
    {"b=2,hq=2,hkv=1,nq=300,nk=300,d=256,causal=yes",
     "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1", 0},
    {"b=2,hq=4,hkv=2,nq=333,nk=1001,d=256,causal=yes",  // 80-key tiles, turns
     "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
     "persistent=1", 0},
    {"b=1,hq=3,hkv=1,nq=555,nk=555,d=256,window=200",
     "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,persistent=1", 0},
    // K and V freed apart: tiles skipped by one consumer (causal, a window) wait for both
    // fills before they release both halves.
    {"b=2,hq=4,hkv=1,nq=333,nk=1000,d=128,causal=yes",
     "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
     "persistent=1,kv_apart=1", 0},
    {"b=1,hq=3,hkv=1,nq=555,nk=555,d=256,window=200",
     "block_m=64,block_n=80,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1,persistent=1,"
     "kv_apart=1", 0},
};

// Without a GPU too (CI): every persistent case's configuration is valid on sm_90a for both
// dtypes the GPU test gives it (a case the op refuses otherwise fails only on a GPU).
TEST(GpuAttentionProblems, PersistentCasesAreValidOnSm90a) {
  const DeviceInfo dev = *device_for_arch("sm_90a");
  for (const PersistentCase& c : kPersistentCases)
    for (DType t : {DType::bf16, DType::f16})
      EXPECT_EQ(op().invalid_reason(op().parse_params(c.params), op().parse_problem(c.dims), t,
                                    dev),
                std::nullopt)
          << c.dims << " " << dtype_name(t) << " " << c.params;
}

TEST_F(GpuAttentionPersistent, FewCtasLoopingOverEveryTileMatchTheReference) {
  const Driver& cu = Driver::get();
  const Compiler compiler(cache_dir());
  int n = 0;
  for (const PersistentCase& c : kPersistentCases) {
    const Problem p = op().parse_problem(c.dims);
    const Params params = op().parse_params(c.params);
    const DType t = n++ % 2 == 0 ? DType::bf16 : DType::f16;
    const std::string name = op().problem_key(p) + " " + dtype_name(t) + " " + c.params;
    ASSERT_FALSE(op().invalid_reason(params, p, t, device_)) << name;
    AttentionShape s = shape_from(p);
    if (p.values[8] != 0) s.softcap = c.softcap;
    std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
    std::vector<float> slopes(static_cast<std::size_t>(s.hq), 0.f);
    if (p.values[9] != 0) {
      for (std::size_t h = 0; h < slopes.size(); ++h) slopes[h] = 0.05f * static_cast<float>(h + 1);
      s.alibi_slopes.assign(slopes.begin(), slopes.end());
    }
    DeviceBuffer slopes_dev(slopes.size() * 4);
    KTUNE_CU(cu.cuMemcpyHtoD(slopes_dev.get(), slopes.data(), slopes.size() * 4));
    const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);

    const CompiledKernel ck = compiler.compile({op().kernels(params, p, t)[0], device_.arch(), {}});
    const Module module(ck.cubin);
    const KernelHandle kernel = module.function(ck.lowered_name);
    KTUNE_CU(cu.cuFuncSetAttribute(static_cast<CUfunction>(kernel),
                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(op().dynamic_shared_bytes(params, p, t, 0))));
    for (int sms : {1, 3, 7}) {
      Outputs out(s, false);
      out.poison(t);
      const std::uint64_t tensors[6] = {q.dev.get(), k.dev.get(), v.dev.get(),
                                        reinterpret_cast<std::uint64_t>(out.o_ptr()),
                                        reinterpret_cast<std::uint64_t>(out.lse_ptr()),
                                        slopes_dev.get()};
      const double scalars[2] = {0.0, s.softcap};
      RunArgs a;
      a.params = &params;
      a.problem = &p;
      a.dtype = t;
      a.tensors = tensors;
      a.scalars = scalars;
      a.kernels = &kernel;
      a.sm_count = sms;
      CudaLauncher launcher(nullptr);
      op().run(a, launcher);
      KTUNE_CU(cu.cuCtxSynchronize());
      check_outputs(s, t, out, ref, true, name + " on " + std::to_string(sms) + " CTAs");
    }
  }
}

// ---- the tuner's fp32 reference kernel ----

class GpuAttentionReference : public ::testing::Test {
 protected:
  void SetUp() override { KTUNE_REQUIRE_GPU(); }
};

TEST_F(GpuAttentionReference, MatchesTheCpuReference) {
  ensure_context(0);
  const DeviceInfo dev = query_device(0);
  const Compiler compiler(cache_dir());
  const Driver& cu = Driver::get();
  for (const char* dims : {"b=2,hq=8,hkv=2,nq=300,nk=77,d=64,causal=yes",
                           "b=1,hq=2,hkv=1,nq=77,nk=1000,d=128,causal=yes",
                           "b=1,hq=3,hkv=3,nq=65,nk=129,d=256",
                           "b=1,hq=4,hkv=2,nq=300,nk=500,d=64,causal=yes,window=50,softcap=yes",
                           "b=1,hq=4,hkv=2,nq=99,nk=300,d=128,window=20,alibi=yes",
                           "b=1,hq=2,hkv=1,nq=200,nk=100,d=64,causal=yes,window=9,softcap=yes,"
                           "alibi=yes"}) {
    const Problem p = op().parse_problem(dims);
    const DType t = DType::bf16;
    const std::vector<KernelSource> sources = op().reference_kernels(p, t);
    ASSERT_EQ(sources.size(), 1u);
    const CompiledKernel ck = compiler.compile({sources[0], dev.arch(), {}});
    const Module module(ck.cubin);
    const KernelHandle kernel = module.function(ck.lowered_name);

    AttentionShape s = shape_from(p);
    if (p.values[8] != 0) s.softcap = 4.0;
    std::vector<float> slopes(static_cast<std::size_t>(s.hq));
    for (std::size_t h = 0; h < slopes.size(); ++h) slopes[h] = 0.1f * static_cast<float>(h + 1);
    if (p.values[9] != 0) s.alibi_slopes.assign(slopes.begin(), slopes.end());
    DeviceBuffer slopes_dev(slopes.size() * 4);
    KTUNE_CU(cu.cuMemcpyHtoD(slopes_dev.get(), slopes.data(), slopes.size() * 4));
    std::mt19937 rng(11);
    const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const std::size_t rows = static_cast<std::size_t>(s.b * s.hq * s.nq);
    DeviceBuffer o(rows * static_cast<std::size_t>(s.d) * 4), lse(rows * 4);
    KTUNE_CU(cu.cuMemsetD32Async(o.get(), 0x7fc00000u, rows * static_cast<std::size_t>(s.d), nullptr));
    KTUNE_CU(cu.cuMemsetD32Async(lse.get(), 0x7fc00000u, rows, nullptr));
    const std::uint64_t tensors[6] = {q.dev.get(), k.dev.get(), v.dev.get(), o.get(), lse.get(),
                                      slopes_dev.get()};
    const double scalars[2] = {0.0, s.softcap};
    RunArgs a;
    a.problem = &p;
    a.dtype = t;
    a.tensors = tensors;
    a.scalars = scalars;
    a.kernels = &kernel;
    CudaLauncher launcher(nullptr);
    op().run_reference(a, launcher);
    KTUNE_CU(cu.cuCtxSynchronize());
    std::vector<float> o_host(rows * static_cast<std::size_t>(s.d)), lse_host(rows);
    KTUNE_CU(cu.cuMemcpyDtoH(o_host.data(), o.get(), o_host.size() * 4));
    KTUNE_CU(cu.cuMemcpyDtoH(lse_host.data(), lse.get(), lse_host.size() * 4));
    const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);
    Checker o_check{{1e-4, 1e-5}, std::string(dims) + " reference o"};
    Checker lse_check{{1e-5, 1e-5}, std::string(dims) + " reference lse"};
    for (std::size_t i = 0; i < o_host.size(); ++i)
      o_check(o_host[i], ref.o[i], [&] { return std::to_string(i); });
    for (std::size_t i = 0; i < rows; ++i)
      lse_check(lse_host[i], ref.lse[i], [&] { return std::to_string(i); });
  }
}

// ---- variable-length batches ----

/// A varlen case: dims without b, nq, nk, d (from the lengths and the test parameter), and the
/// query and key lengths of each sequence.
struct VarlenCase {
  const char* dims;
  std::vector<std::int64_t> len_q, len_k;
};

const VarlenCase kVarlenCases[] = {
    {"hq=4,hkv=4", {1, 200, 77}, {300, 200, 1}},
    {"hq=8,hkv=2,causal=yes", {1, 200, 77}, {300, 200, 1}},  // GQA 4:1
    // MQA; a sequence of no queries, one of no keys (o = 0, lse = -inf), one shorter in keys.
    {"hq=4,hkv=1,causal=yes", {1, 0, 200, 77, 5}, {300, 50, 200, 1, 0}},
    {"hq=4,hkv=2,causal=yes,window=50", {1, 200, 77}, {300, 200, 1}},
    {"hq=4,hkv=2,alibi=yes", {1, 200, 77}, {300, 200, 1}},
    // Many key tiles per sequence (the K/V ring wraps), the causal diagonal shifted by extra
    // keys; soft-capping.
    {"hq=4,hkv=2,causal=yes", {700, 130, 999}, {700, 1030, 999}},
    {"hq=2,hkv=1,softcap=yes", {333, 64}, {517, 129}},
};

std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

/// A parameterised test of the op on GPU 0 (skipped without one).
template <class Param>
class GpuOpTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
  }
  DeviceInfo device_;
};

class GpuAttentionVarlen : public GpuOpTest<std::tuple<VarlenCase, std::int64_t, DType>> {};

/// The cap of the varlen cases with softcap=yes (low enough that tanh bends the scores).
constexpr double kVarlenSoftcap = 4.0;

/// Runs the op's kernel for `params` (or its fp32 reference when null) on q of total_q rows of
/// [Hq, D] (packed, or [B, Nq, Hq, D] through `layout`), k and v (or the pools), the slopes and
/// the tensors after them (`tail`: cu_seqlens, or block_table and seq_lens); returns o (as
/// float, in q's rows) and lse. Outputs start as NaN and hold 64 extra rows past total_q that no
/// sequence owns: they must stay NaN.
void run_gathered(const Problem& p, DType t, const Params* params, std::uint64_t q,
                  std::uint64_t k, std::uint64_t v, std::uint64_t slopes,
                  const std::vector<std::uint64_t>& tail, const std::int64_t* layout,
                  std::int64_t total_q, std::vector<float>& o, std::vector<float>& lse,
                  std::size_t& untouched_bad) {
  const Driver& cu = Driver::get();
  const DeviceInfo dev = query_device(0);
  const Compiler compiler(cache_dir());
  const KernelSource source =
      params ? op().kernels(*params, p, t)[0] : op().reference_kernels(p, t)[0];
  const CompiledKernel ck = compiler.compile({source, dev.arch(), {}});
  const Module module(ck.cubin);
  const KernelHandle kernel = module.function(ck.lowered_name);
  if (params) {
    const unsigned smem = op().dynamic_shared_bytes(*params, p, t, 0);
    if (smem > 48 * 1024)
      KTUNE_CU(cu.cuFuncSetAttribute(static_cast<CUfunction>(kernel),
                                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     static_cast<int>(smem)));
  }
  const std::int64_t hq = op().dim(p, "hq"), d = op().dim(p, "d");
  const std::size_t o_elements = static_cast<std::size_t>((total_q + 64) * hq * d);
  const std::size_t lse_elements = static_cast<std::size_t>(hq * total_q + 64);
  const std::size_t o_size = params ? 2 : 4;
  DeviceBuffer o_dev(o_elements * o_size), lse_dev(lse_elements * 4);
  if (params)
    KTUNE_CU(cu.cuMemsetD16Async(o_dev.get(), t == DType::bf16 ? 0x7fc0 : 0x7e00, o_elements,
                                 nullptr));
  else
    KTUNE_CU(cu.cuMemsetD32Async(o_dev.get(), 0x7fc00000u, o_elements, nullptr));
  KTUNE_CU(cu.cuMemsetD32Async(lse_dev.get(), 0x7fc00000u, lse_elements, nullptr));
  std::vector<std::uint64_t> tensors = {q, k, v, o_dev.get(), lse_dev.get(), slopes};
  tensors.insert(tensors.end(), tail.begin(), tail.end());
  const double scalars[2] = {0.0, kVarlenSoftcap};
  RunArgs a;
  a.params = params;
  a.problem = &p;
  a.dtype = t;
  a.tensors = tensors.data();
  a.layout = layout;
  a.sm_count = 3;  // a persistent grid of 3 CTAs: each walks many items
  a.scalars = scalars;
  a.kernels = &kernel;
  CudaLauncher launcher(nullptr);
  if (params)
    op().run(a, launcher);
  else
    op().run_reference(a, launcher);
  KTUNE_CU(cu.cuCtxSynchronize());
  o.assign(o_elements, 0.f);
  if (params) {
    std::vector<std::uint16_t> bits(o_elements);
    KTUNE_CU(cu.cuMemcpyDtoH(bits.data(), o_dev.get(), bits.size() * 2));
    for (std::size_t i = 0; i < bits.size(); ++i)
      o[i] = static_cast<float>(t == DType::bf16 ? test::bf16_bits_to_float(bits[i])
                                                 : test::fp16_bits_to_float(bits[i]));
  } else {
    KTUNE_CU(cu.cuMemcpyDtoH(o.data(), o_dev.get(), o_elements * 4));
  }
  lse.assign(lse_elements, 0.f);
  KTUNE_CU(cu.cuMemcpyDtoH(lse.data(), lse_dev.get(), lse_elements * 4));
  untouched_bad = 0;
  for (std::size_t i = static_cast<std::size_t>(total_q * hq * d); i < o_elements; ++i)
    untouched_bad += !std::isnan(o[i]);
  for (std::size_t i = static_cast<std::size_t>(hq * total_q); i < lse_elements; ++i)
    untouched_bad += !std::isnan(lse[i]);
  o.resize(static_cast<std::size_t>(total_q * hq * d));
  lse.resize(static_cast<std::size_t>(hq * total_q));
}

/// The ALiBi slopes 0.1 (h + 1) on the device; with alibi=yes and softcap=yes `s` gets them and
/// the cap (kVarlenSoftcap), as the kernels do.
DeviceBuffer variant_inputs(const Problem& p, AttentionShape& s) {
  std::vector<float> slopes(static_cast<std::size_t>(s.hq));
  for (std::size_t h = 0; h < slopes.size(); ++h) slopes[h] = 0.1f * static_cast<float>(h + 1);
  if (op().dim(p, "alibi") != 0) s.alibi_slopes.assign(slopes.begin(), slopes.end());
  if (op().dim(p, "softcap") != 0) s.softcap = kVarlenSoftcap;
  DeviceBuffer dev(slopes.size() * 4);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), slopes.data(), slopes.size() * 4));
  return dev;
}

TEST_P(GpuAttentionVarlen, KernelAndReferenceMatchEachSequenceAlone) {
  const auto& [c, d, t] = GetParam();
  const std::vector<std::int64_t> cu_q = offsets(c.len_q), cu_k = offsets(c.len_k);
  const std::int64_t b = static_cast<std::int64_t>(c.len_q.size());
  const std::int64_t nq = *std::max_element(c.len_q.begin(), c.len_q.end());
  const std::int64_t nk = *std::max_element(c.len_k.begin(), c.len_k.end());
  const Problem p = op().parse_problem(std::string(c.dims) + ",b=" + std::to_string(b) +
                                       ",nq=" + std::to_string(nq) + ",nk=" +
                                       std::to_string(nk) + ",d=" + std::to_string(d) +
                                       ",varlen=yes");
  const std::string name = op().problem_key(p) + " " + dtype_name(t);
  AttentionShape s = shape_from(p);
  const Driver& cu = Driver::get();
  const DeviceBuffer slopes_dev = variant_inputs(p, s);
  std::vector<int> offsets_host;
  for (std::int64_t x : cu_q) offsets_host.push_back(static_cast<int>(x));
  for (std::int64_t x : cu_k) offsets_host.push_back(static_cast<int>(x));
  DeviceBuffer offsets_dev(offsets_host.size() * 4);
  KTUNE_CU(cu.cuMemcpyHtoD(offsets_dev.get(), offsets_host.data(), offsets_host.size() * 4));
  const std::uint64_t cu_q_dev = offsets_dev.get(), cu_k_dev = offsets_dev.get() + cu_q.size() * 4;

  // Packed [total, h, d]: one "batch" of [S, H, D] rows.
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  const DeviceTensor q(t, 1, s.hq, cu_q.back(), s.d, true, rng);
  const DeviceTensor k(t, 1, s.hkv, cu_k.back(), s.d, true, rng);
  const DeviceTensor v(t, 1, s.hkv, cu_k.back(), s.d, true, rng);
  const AttentionResult ref = test::attention_ref_varlen(s, cu_q, cu_k, q.host, k.host, v.host);

  const auto check = [&](const Params* params, const Tolerance& tol, const std::string& what) {
    std::vector<float> o, lse;
    std::size_t untouched_bad = 0;
    run_gathered(p, t, params, q.dev.get(), k.dev.get(), v.dev.get(), slopes_dev.get(),
                 {cu_q_dev, cu_k_dev}, nullptr, cu_q.back(), o, lse, untouched_bad);
    EXPECT_EQ(untouched_bad, 0u) << what << ": elements past total_q were written";
    Checker o_check{tol, what + " o"};
    Checker lse_check{tol, what + " lse"};
    for (std::size_t i = 0; i < o.size(); ++i)
      o_check(o[i], ref.o[i], [&] { return std::to_string(i); });
    for (std::size_t i = 0; i < lse.size(); ++i)
      lse_check(lse[i], ref.lse[i], [&] { return std::to_string(i); });
  };
  check(nullptr, {1e-4, 1e-5}, name + " fp32 reference");
  const Params def = op().default_params(p, t, device_);
  check(&def, op().tolerance(t), name + " default " + op().params_key(def));
  // mma.sync tiles, then the wgmma kernel (sm_90a; its producer threads copy the tiles, zeros
  // past each sequence's rows) with 1 and 3 consumers, turns, and no register split (the
  // defaults take 2 consumers at d=128 and d=256).
  for (const char* planted :
       {kPlanted[0], kPlanted[4], kPlanted[7], kPlanted[11], kPlanted[13], kPlanted[16]}) {
    const Params params = op().parse_params(planted);
    if (op().invalid_reason(params, p, t, device_)) continue;
    check(&params, op().tolerance(t), name + " " + planted);
  }
}

std::string varlen_name(
    const ::testing::TestParamInfo<std::tuple<VarlenCase, std::int64_t, DType>>& info) {
  const auto& [c, d, t] = info.param;
  std::string s = std::string(c.dims) + "_b" + std::to_string(c.len_q.size()) + "_d" +
                  std::to_string(d) + "_" + dtype_name(t);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(Varlen, GpuAttentionVarlen,
                         ::testing::Combine(::testing::ValuesIn(kVarlenCases),
                                            ::testing::Values(std::int64_t{64}, std::int64_t{128},
                                                              std::int64_t{256}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         varlen_name);
INSTANTIATE_TEST_SUITE_P(VarlenD96, GpuAttentionVarlen,
                         ::testing::Combine(::testing::ValuesIn(kVarlenCases),
                                            ::testing::Values(std::int64_t{96}),
                                            ::testing::Values(DType::f16)),
                         varlen_name);

INSTANTIATE_TEST_SUITE_P(VarlenD80, GpuAttentionVarlen,
                         ::testing::Combine(::testing::ValuesIn(kVarlenCases),
                                            ::testing::Values(std::int64_t{80}),
                                            ::testing::Values(DType::f16)),
                         varlen_name);

// ---- paged K/V ----

/// A paged case: dims without b, nq, nk, d, page; each sequence's query rows (all equal unless
/// `varlen`: q and o then packed by cu_seqlens_q) and keys (seq_lens).
struct PagedCase {
  const char* dims;
  std::vector<std::int64_t> len_q, len_k;
  bool varlen;
};

const PagedCase kPagedCases[] = {
    // Chunked prefill: each sequence's new rows at the end of its cache (bottom-right causal),
    // lengths not multiples of any tile or page; one sequence shorter than its queries (rows
    // that see no key).
    {"hq=8,hkv=2,causal=yes", {200, 200, 200}, {1000, 201, 77}, false},
    {"hq=4,hkv=4", {77, 77}, {300, 1}, false},
    {"hq=4,hkv=1,causal=yes,window=100", {130, 130}, {700, 513}, false},
    {"hq=4,hkv=2,causal=yes,softcap=yes,alibi=yes", {64, 64}, {129, 64}, false},
    // vLLM's prefill call: packed queries (one sequence without any) against the pages.
    {"hq=8,hkv=2,causal=yes", {1, 0, 300, 77}, {400, 50, 300, 1000}, true},
};

class GpuAttentionPaged
    : public GpuOpTest<std::tuple<PagedCase, std::int64_t, DType, std::int64_t>> {};

TEST_P(GpuAttentionPaged, KernelAndReferenceMatchEachSequenceAlone) {
  const auto& [c, d, t, page] = GetParam();
  const std::int64_t b = static_cast<std::int64_t>(c.len_q.size());
  const std::int64_t nq = *std::max_element(c.len_q.begin(), c.len_q.end());
  const std::int64_t nk = *std::max_element(c.len_k.begin(), c.len_k.end());
  const Problem p = op().parse_problem(
      std::string(c.dims) + ",b=" + std::to_string(b) + ",nq=" + std::to_string(nq) + ",nk=" +
      std::to_string(nk) + ",d=" + std::to_string(d) + ",page=" + std::to_string(page) +
      (c.varlen ? ",varlen=yes" : ""));
  const std::string name = op().problem_key(p) + " " + dtype_name(t);
  AttentionShape s = shape_from(p);
  const Driver& cu = Driver::get();
  const DeviceBuffer slopes_dev = variant_inputs(p, s);

  // q packed [total_q, hq, d] (without varlen: [b, nq, hq, d], the same rows); the keys of each
  // sequence packed for the reference, then scattered into pools through a shuffled table.
  const std::vector<std::int64_t> cu_q = offsets(c.len_q), cu_k = offsets(c.len_k);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  const DeviceTensor q(t, 1, s.hq, cu_q.back(), s.d, true, rng);
  AttentionTensor k, v;
  test::attention_strides(1, s.hkv, cu_k.back(), s.d, true, k);
  test::attention_strides(1, s.hkv, cu_k.back(), s.d, true, v);
  const DeviceBuffer k_packed = test::upload_random(t, k.data, rng);
  const DeviceBuffer v_packed = test::upload_random(t, v.data, rng);
  const AttentionResult ref = test::attention_ref_varlen(s, cu_q, cu_k, q.host, k, v);

  const std::int64_t pps = (nk + page - 1) / page, pool_pages = b * pps;
  std::vector<int> table(static_cast<std::size_t>(pool_pages));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int>(i);
  std::shuffle(table.begin(), table.end(), rng);
  // Rows of the pools no sequence owns are NaN: a kernel that reads one fails.
  const std::uint16_t nan = t == DType::bf16 ? 0x7fc0 : 0x7e00;
  const std::size_t row = static_cast<std::size_t>(s.hkv * s.d);
  std::vector<std::uint16_t> k_pool(static_cast<std::size_t>(pool_pages * page) * row, nan);
  std::vector<std::uint16_t> v_pool(k_pool.size(), nan);
  const auto bits = [&](double x) {
    return t == DType::bf16 ? test::float_to_bf16_bits(static_cast<float>(x))
                            : test::float_to_fp16_bits(static_cast<float>(x));
  };
  for (std::int64_t sb = 0; sb < b; ++sb)
    for (std::int64_t j = 0; j < c.len_k[static_cast<std::size_t>(sb)]; ++j) {
      const std::size_t at =
          static_cast<std::size_t>(table[static_cast<std::size_t>(sb * pps + j / page)] * page +
                                   j % page) *
          row;
      for (std::int64_t h = 0; h < s.hkv; ++h)
        for (std::int64_t i = 0; i < s.d; ++i) {
          const std::size_t e = at + static_cast<std::size_t>(h * s.d + i);
          k_pool[e] = bits(k.at(0, h, cu_k[static_cast<std::size_t>(sb)] + j, i));
          v_pool[e] = bits(v.at(0, h, cu_k[static_cast<std::size_t>(sb)] + j, i));
        }
    }
  DeviceBuffer k_dev(k_pool.size() * 2), v_dev(v_pool.size() * 2);
  KTUNE_CU(cu.cuMemcpyHtoD(k_dev.get(), k_pool.data(), k_pool.size() * 2));
  KTUNE_CU(cu.cuMemcpyHtoD(v_dev.get(), v_pool.data(), v_pool.size() * 2));
  std::vector<int> ints(table.begin(), table.end());
  for (std::int64_t n : c.len_k) ints.push_back(static_cast<int>(n));
  for (std::int64_t x : cu_q) ints.push_back(static_cast<int>(x));
  DeviceBuffer ints_dev(ints.size() * 4);
  KTUNE_CU(cu.cuMemcpyHtoD(ints_dev.get(), ints.data(), ints.size() * 4));
  const std::uint64_t table_dev = ints_dev.get();
  const std::uint64_t lens_dev = table_dev + table.size() * 4;
  const std::uint64_t cu_q_dev = lens_dev + c.len_k.size() * 4;
  std::vector<std::uint64_t> tail = {table_dev, lens_dev};
  if (c.varlen) tail.insert(tail.begin(), cu_q_dev);
  // Without varlen q and o are [b, nq, hq, d]: their strides (k's and v's are the pools').
  const std::int64_t bshd[12] = {nq * s.hq * s.d, s.d, s.hq * s.d, 0, 0, 0,
                                 0, 0, 0, nq * s.hq * s.d, s.d, s.hq * s.d};

  const auto check = [&](const Params* params, const Tolerance& tol, const std::string& what) {
    std::vector<float> o, lse;
    std::size_t untouched_bad = 0;
    run_gathered(p, t, params, q.dev.get(), k_dev.get(), v_dev.get(), slopes_dev.get(), tail,
                 c.varlen ? nullptr : bshd, cu_q.back(), o, lse, untouched_bad);
    EXPECT_EQ(untouched_bad, 0u) << what << ": elements past the last query row were written";
    Checker o_check{tol, what + " o"};
    Checker lse_check{tol, what + " lse"};
    for (std::size_t i = 0; i < o.size(); ++i)
      o_check(o[i], ref.o[i], [&] { return std::to_string(i); });
    // lse: [hq, total_q] with varlen, else [b, hq, nq]; the reference's is [hq, total_q].
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t r = 0; r < cu_q.back(); ++r) {
        const std::size_t got = static_cast<std::size_t>(
            c.varlen ? h * cu_q.back() + r : ((r / nq) * s.hq + h) * nq + r % nq);
        lse_check(lse[got], ref.lse[static_cast<std::size_t>(h * cu_q.back() + r)],
                  [&] { return "h=" + std::to_string(h) + " row=" + std::to_string(r); });
      }
  };
  check(nullptr, {1e-4, 1e-5}, name + " fp32 reference");
  const Params def = op().default_params(p, t, device_);
  check(&def, op().tolerance(t), name + " default " + op().params_key(def));
  // mma.sync tiles of 32, 64 and 128 keys (pages smaller than, as large as and larger than a
  // tile), then the wgmma kernel (sm_90a; TMA per page, the last V tile copied; with varlen its
  // producer threads copy every tile) with 1 and 3 consumers, 2 taking turns, persistent (3
  // CTAs walking every tile) with 1 and 2, and no register split.
  for (const char* planted :
       {kPlanted[0], kPlanted[1], kPlanted[6], kPlanted[7], kPlanted[9], kPlanted[10],
        kPlanted[12], kPlanted[13], kPlanted[14], kPlanted[16]}) {
    const Params params = op().parse_params(planted);
    if (op().invalid_reason(params, p, t, device_)) continue;
    check(&params, op().tolerance(t), name + " " + planted);
  }
}

std::string paged_name(
    const ::testing::TestParamInfo<std::tuple<PagedCase, std::int64_t, DType, std::int64_t>>&
        info) {
  const auto& [c, d, t, page] = info.param;
  std::string s = std::string(c.dims) + "_b" + std::to_string(c.len_q.size()) +
                  (c.varlen ? "_varlen" : "") + "_d" + std::to_string(d) + "_" + dtype_name(t) +
                  "_page" + std::to_string(page);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(Paged, GpuAttentionPaged,
                         ::testing::Combine(::testing::ValuesIn(kPagedCases),
                                            ::testing::Values(std::int64_t{64}, std::int64_t{128},
                                                              std::int64_t{256}),
                                            ::testing::Values(DType::bf16, DType::f16),
                                            ::testing::Values(std::int64_t{16},
                                                              std::int64_t{64},
                                                              std::int64_t{256})),
                         paged_name);
// d=96: 16-key pages copy a tile's last 16-byte chunks in a partial round of the producer's
// threads (gather_tile), 64-key pages by TMA boxes past the tensor's d.
INSTANTIATE_TEST_SUITE_P(PagedD96, GpuAttentionPaged,
                         ::testing::Combine(::testing::ValuesIn(kPagedCases),
                                            ::testing::Values(std::int64_t{96}),
                                            ::testing::Values(DType::bf16),
                                            ::testing::Values(std::int64_t{16},
                                                              std::int64_t{64})),
                         paged_name);

// d=80 and 112 (between tiles): the producer's copies (16-key pages) zero the columns past d,
// the TMA boxes (64-key pages) read zeros there.
INSTANTIATE_TEST_SUITE_P(PagedBetweenTiles, GpuAttentionPaged,
                         ::testing::Combine(::testing::ValuesIn(kPagedCases),
                                            ::testing::Values(std::int64_t{80}, std::int64_t{112}),
                                            ::testing::Values(DType::bf16),
                                            ::testing::Values(std::int64_t{16},
                                                              std::int64_t{64})),
                         paged_name);

// ---- bad arguments through the C API ----

TEST_F(GpuAttentionReference, BadArgumentsGetClearErrors) {
  ensure_context(0);
  DeviceBuffer buf(16 << 20);
  char* base = reinterpret_cast<char*>(buf.get());
  const void* q = base;
  const void* k = base + (4 << 20);
  const void* v = base + (8 << 20);
  void* o = base + (12 << 20);
  const auto expect_error = [](ktune_status st, const char* part) {
    EXPECT_EQ(st, KTUNE_ERROR_INVALID_ARGUMENT) << part;
    EXPECT_NE(std::string(ktune_last_error()).find(part), std::string::npos) << ktune_last_error();
  };
  expect_error(ktune_flash_attention(q, k, v, o, nullptr, 1, 8, 3, 64, 64, 64, nullptr, 0, 0.f,
                                     KTUNE_BF16, nullptr),
               "hq=8 is not a multiple of hkv=3");
  expect_error(ktune_flash_attention(q, k, v, o, nullptr, 1, 8, 8, 64, 64, 84, nullptr, 0, 0.f,
                                     KTUNE_BF16, nullptr),
               "d=84 is not a multiple of 8");
  expect_error(ktune_flash_attention(nullptr, k, v, o, nullptr, 1, 8, 8, 64, 64, 64, nullptr, 0,
                                     0.f, KTUNE_BF16, nullptr),
               "q is null");
  expect_error(ktune_flash_attention(q, k, v, base + (12 << 20) + 8, nullptr, 1, 8, 8, 64, 64, 64,
                                     nullptr, 0, 0.f, KTUNE_BF16, nullptr),
               "is not 16-byte aligned");
  std::int64_t strides[12] = {8 * 64 * 64, 64, 8 * 64, 8 * 64 * 64, 64, 8 * 64,
                              8 * 64 * 64, 64, 8 * 64, 8 * 64 * 64, 64, 8 * 64};
  strides[8] = 8 * 64 + 4;
  expect_error(ktune_flash_attention(q, k, v, o, nullptr, 1, 8, 8, 64, 64, 64, strides, 1, 0.f,
                                     KTUNE_BF16, nullptr),
               "v seq stride 516 must be a positive multiple of 8");
  strides[8] = 8 * 64;
  EXPECT_EQ(ktune_flash_attention(q, k, v, o, nullptr, 1, 8, 8, 64, 64, 64, strides, 1, 0.f,
                                  KTUNE_BF16, nullptr),
            KTUNE_OK)
      << ktune_last_error();
  EXPECT_EQ(Driver::get().cuCtxSynchronize(), CUDA_SUCCESS);
}

}  // namespace
}  // namespace ktune
