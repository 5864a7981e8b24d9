// flash_decode's variable-length batches on the GPU against the Eigen (double) CPU reference run
// on each sequence alone: head dims 64 and 128, bf16 and fp16, GQA 4:1 and MQA, causal and not,
// one case with sliding window + soft-capping + ALiBi, sequences of 0, 1, 5 and 16 queries
// against 0, 1, 5, 17, 1000 and 4099 keys (empty sequences both ways; more queries than keys).
// q and o are packed [total, hq, d] with padded rows, and o holds rows past total_q: outputs are
// poisoned with NaN first, and the padding and those rows must stay NaN (lse likewise past
// [hq, total_q]). The op is run directly (compile, load, CudaLauncher, a workspace of
// workspace_bytes()) at its default and at points of the space with many splits and small
// tiles; once through Runtime::attention with automatic routing (which must pick flash_decode);
// once captured in a CUDA graph, replaying a direct run's bits. Skipped without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "runtime/dispatch/attention_args.hpp"
#include "search/space.hpp"
#include "templates/decode/decode_op.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/gpu_kernels.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::AttentionResult;
using test::AttentionShape;
using test::AttentionTensor;

const Op& op() { return flash_decode_op(); }

struct VarlenCase {
  const char* name;
  std::int64_t hq, hkv;
  bool causal;
  std::int64_t window;  // 0: none
  double softcap;       // 0: none
  bool alibi;
  std::vector<std::int64_t> len_q, len_k;
};

const VarlenCase kCases[] = {
    // GQA 4:1: a decode row against a long cache, a sequence without queries, one without keys,
    // 16 queries against 4099 keys, single rows, and 16 queries against one key.
    {"gqa", 8, 2, false, 0, 0.0, false, {1, 0, 5, 16, 1, 16}, {1000, 17, 0, 4099, 1, 1}},
    {"gqa_causal", 8, 2, true, 0, 0.0, false, {1, 0, 5, 16, 1, 16}, {1000, 17, 0, 4099, 1, 1}},
    {"mqa_causal", 8, 1, true, 0, 0.0, false, {16, 5, 1, 0, 5}, {4099, 17, 0, 1000, 5}},
    {"window_softcap_alibi", 8, 2, true, 300, 30.0, true, {5, 16, 1, 0, 16},
     {1000, 4099, 17, 5, 0}},
};

std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

std::int64_t longest(const std::vector<std::int64_t>& v) {
  return std::max<std::int64_t>(1, *std::max_element(v.begin(), v.end()));
}

Problem problem_of(const VarlenCase& c, std::int64_t d) {
  Problem p;
  p.values = {static_cast<std::int64_t>(c.len_q.size()), c.hq, c.hkv, longest(c.len_q),
              longest(c.len_k), d, c.causal ? 1 : 0, 0, c.window, c.softcap > 0 ? 1 : 0,
              c.alibi ? 1 : 0, 1};
  return p;
}

/// Padding (elements) after each packed row: rows [total, h, d] with a row stride of
/// h * d + pad, so that unwritten gaps sit between the rows of o.
constexpr std::int64_t kQPad = 64;
constexpr std::int64_t kKvPad = 8;
/// Rows of o (and elements of lse) past the packed ones, owned by no sequence.
constexpr std::int64_t kExtraRows = 16;

/// A packed [rows, h, d] tensor with padded rows: random values in [-2, 2) rounded to t (never
/// 0), on the host (batch stride 0) and on the device.
struct PackedTensor {
  AttentionTensor host;
  DeviceBuffer dev;

  PackedTensor(DType t, std::int64_t rows, std::int64_t h, std::int64_t d, std::int64_t pad,
               std::mt19937& rng) {
    host.batch = 0, host.head = d, host.seq = h * d + pad;
    host.data.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, rows) * host.seq));
    dev = test::upload_random(t, host.data, rng);
  }
};

/// One case's inputs, reference and output buffers.
struct Batch {
  const VarlenCase& c;
  std::int64_t d;
  DType t;
  Problem problem;
  AttentionShape shape;
  std::vector<std::int64_t> cu_q, cu_k;
  std::int64_t total_q;
  PackedTensor q, k, v;
  DeviceBuffer slopes, cu;  // cu: cu_seqlens_q then cu_seqlens_k, int32
  AttentionResult ref;
  std::int64_t o_row;  // o's row stride (elements)
  std::size_t o_elements, lse_elements;

  Batch(const VarlenCase& vc, std::int64_t dim, DType dtype, std::mt19937&& rng)
      : c(vc),
        d(dim),
        t(dtype),
        problem(problem_of(vc, dim)),
        cu_q(offsets(vc.len_q)),
        cu_k(offsets(vc.len_k)),
        total_q(cu_q.back()),
        q(dtype, cu_q.back(), vc.hq, dim, kQPad, rng),
        k(dtype, cu_k.back(), vc.hkv, dim, kKvPad, rng),
        v(dtype, cu_k.back(), vc.hkv, dim, kKvPad, rng),
        o_row(vc.hq * dim + kQPad),
        o_elements(static_cast<std::size_t>((cu_q.back() + kExtraRows) * o_row)),
        lse_elements(static_cast<std::size_t>(vc.hq * cu_q.back() + kExtraRows)) {
    shape.hq = c.hq, shape.hkv = c.hkv, shape.d = d, shape.causal = c.causal;
    shape.window = c.window, shape.softcap = c.softcap;
    std::vector<float> s(static_cast<std::size_t>(c.hq), 0.f);
    if (c.alibi) {
      // ALiBi's 2^(-8 (h + 1) / hq), shuffled so that heads differ from their order.
      for (std::size_t h = 0; h < s.size(); ++h)
        s[h] = std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(s.size()));
      std::shuffle(s.begin(), s.end(), rng);
      shape.alibi_slopes.assign(s.begin(), s.end());
    }
    slopes = DeviceBuffer(s.size() * 4);
    KTUNE_CU(Driver::get().cuMemcpyHtoD(slopes.get(), s.data(), s.size() * 4));
    std::vector<int> offs;
    for (std::int64_t x : cu_q) offs.push_back(static_cast<int>(x));
    for (std::int64_t x : cu_k) offs.push_back(static_cast<int>(x));
    cu = DeviceBuffer(offs.size() * 4);
    KTUNE_CU(Driver::get().cuMemcpyHtoD(cu.get(), offs.data(), offs.size() * 4));
    ref = test::attention_ref_varlen(shape, cu_q, cu_k, q.host, k.host, v.host);
  }

  CUdeviceptr cu_q_dev() const { return cu.get(); }
  CUdeviceptr cu_k_dev() const { return cu.get() + cu_q.size() * 4; }

  /// The 12 strides: packed rows, no batch stride.
  std::vector<std::int64_t> layout() const {
    return {0, d, q.host.seq, 0, d, k.host.seq, 0, d, v.host.seq, 0, d, o_row};
  }
  AttentionLayout attention_layout() const {
    AttentionLayout l;
    l.q = {0, d, q.host.seq};
    l.k = {0, d, k.host.seq};
    l.v = {0, d, v.host.seq};
    l.o = {0, d, o_row};
    return l;
  }
};

/// o (16-bit) and lse, poisoned with NaN before each run.
struct Outputs : test::PoisonedOutputs {
  explicit Outputs(const Batch& b) : test::PoisonedOutputs(b.o_elements, b.lse_elements) {}
};

using test::Checker;

/// Runs one configuration of the op on the batch into `out`, on `stream`.
struct Prepared {
  Params params;
  std::vector<KernelHandle> kernels;
  DeviceBuffer workspace;

  Prepared(const Params& p, const Batch& b, const DeviceInfo& dev) : params(p) {
    const std::vector<KernelSource> sources = op().kernels(params, b.problem, b.t);
    for (std::size_t i = 0; i < sources.size(); ++i)
      kernels.push_back(
          test::load_kernel(sources[i], dev, op().dynamic_shared_bytes(params, b.problem, b.t, i)));
    if (const std::size_t bytes = op().workspace_bytes(params, b.problem, b.t))
      workspace = DeviceBuffer(bytes);
  }

  void run(const Batch& b, const Outputs& out, CUstream stream) const {
    const std::uint64_t tensors[8] = {b.q.dev.get(), b.k.dev.get(), b.v.dev.get(), out.o.get(),
                                      out.lse.get(), b.slopes.get(), b.cu_q_dev(), b.cu_k_dev()};
    const double scalars[2] = {0.0, b.c.softcap};
    const std::vector<std::int64_t> layout = b.layout();
    RunArgs a;
    a.params = &params;
    a.problem = &b.problem;
    a.dtype = b.t;
    a.tensors = tensors;
    a.scalars = scalars;
    a.workspace = workspace.get();
    a.kernels = kernels.data();
    a.layout = layout.data();
    CudaLauncher launcher(stream);
    op().run(a, launcher);
  }
};

/// Every packed row against the reference; row padding, rows past total_q and lse past
/// [hq, total_q] still NaN.
void check(const Batch& b, const Outputs& out, const std::string& what) {
  const std::vector<std::uint16_t> o = out.o_bits();
  const std::vector<float> lse = out.lse_values();
  Checker o_check{op().tolerance(b.t), what + " o"};
  Checker lse_check{op().tolerance(b.t), what + " lse"};
  std::size_t written = 0;  // padding elements that are no longer NaN
  for (std::int64_t r = 0; r < b.total_q + kExtraRows; ++r)
    for (std::int64_t e = 0; e < b.o_row; ++e) {
      const std::uint16_t bits = o[static_cast<std::size_t>(r * b.o_row + e)];
      const double x =
          b.t == DType::bf16 ? test::bf16_bits_to_float(bits) : test::fp16_bits_to_float(bits);
      const std::int64_t h = e / b.d, i = e % b.d;
      if (r >= b.total_q || h >= b.c.hq) {
        written += !std::isnan(x);
        continue;
      }
      o_check(x, b.ref.o[static_cast<std::size_t>((r * b.c.hq + h) * b.d + i)], [&] {
        return "row " + std::to_string(r) + " h=" + std::to_string(h) + " i=" + std::to_string(i);
      });
    }
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (i >= b.ref.lse.size()) {
      written += !std::isnan(lse[i]);
      continue;
    }
    lse_check(lse[i], b.ref.lse[i], [&] { return "lse[" + std::to_string(i) + "]"; });
  }
  EXPECT_EQ(written, 0u) << what << ": padding or rows past total_q were written";
}

class GpuDecodeVarlen
    : public ::testing::TestWithParam<std::tuple<VarlenCase, std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    KTUNE_REQUIRE_SUITE(setup_error_);
    ensure_context(0);
    device_ = query_device(0);
  }

  static void SetUpTestSuite() { setup_error_ = test::suite_setup(compile_suite); }

  /// The points each case runs: the default, the valid point with the most splits, and one with
  /// 32-key tiles and several splits (more split boundaries inside the sequences).
  static std::vector<Params> points(const Problem& p, DType t, const DeviceInfo& dev) {
    std::vector<Params> out = {op().default_params(p, t, dev)};
    const std::vector<Params> valid = Space(op(), p, t, dev).valid_points();
    const Params* most = nullptr;
    const Params* small = nullptr;
    // The most keys per warp: d=128 (64) and d=256 (32) keep padded K/V rows there.
    const Params* wide = nullptr;
    const auto keys_per_warp = [](const Params& v) { return v.values[2] / v.values[3]; };
    for (const Params& v : valid) {
      if (!most || v.values[0] > most->values[0]) most = &v;
      if (!small && v.values[2] == 32 && v.values[0] >= 4) small = &v;
      if (!wide || keys_per_warp(v) > keys_per_warp(*wide)) wide = &v;
    }
    for (const Params* v : {most, small, wide})
      if (v && std::find(out.begin(), out.end(), *v) == out.end()) out.push_back(*v);
    // d=96's tiles (d=80 here): the default's tile in two parts (kv_split=1) as well.
    const Params split = op().parse_params(op().params_key(out[0]) + ",kv_split=1");
    if (std::find(valid.begin(), valid.end(), split) != valid.end()) out.push_back(split);
    return out;
  }

  /// Compiles every kernel the suite runs, in parallel, into the cache.
  static void compile_suite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    std::set<std::string> seen;
    std::vector<CompileJob> jobs;
    for (const VarlenCase& c : kCases)
      for (std::int64_t d : {32, 64, 128, 256})
        for (DType t : {DType::bf16, DType::f16}) {
          if ((d == 32 || d == 256) && t == DType::f16) continue;  // bf16 only there
          const Problem p = problem_of(c, d);
          for (const Params& params : points(p, t, dev))
            for (const KernelSource& k : op().kernels(params, p, t))
              if (seen.insert(k.name_expression).second) jobs.push_back({k, dev.arch(), {}});
        }
    compile_parallel(Compiler(test::kernel_cache_dir()), jobs, 0);
  }

  static inline std::string setup_error_;
  DeviceInfo device_;
};

std::string seed_name(const VarlenCase& c, std::int64_t d, DType t) {
  return std::string(c.name) + " d=" + std::to_string(d) + " " + dtype_name(t);
}

TEST_P(GpuDecodeVarlen, DefaultAndSpacePointsMatchEachSequenceAlone) {
  const auto& [c, d, t] = GetParam();
  const std::string name = seed_name(c, d, t);
  const Batch b(c, d, t, std::mt19937(static_cast<unsigned>(std::hash<std::string>()(name))));
  ASSERT_EQ(op().problem_reason(b.problem), std::nullopt) << name;
  Outputs out(b);
  for (const Params& params : points(b.problem, t, device_)) {
    ASSERT_EQ(op().invalid_reason(params, b.problem, t, device_), std::nullopt)
        << name << " " << op().params_key(params);
    const Prepared prep(params, b, device_);
    out.poison(t);
    prep.run(b, out, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    check(b, out, name + " " + op().params_key(params));
  }
}

// Runtime::attention with automatic routing: a varlen call of at most kDecodeMaxNq queries per
// sequence goes to flash_decode (its default here: no database), the packed layout passed as the
// call's strides.
TEST_P(GpuDecodeVarlen, RuntimeAttentionRoutesToDecode) {
  const auto& [c, d, t] = GetParam();
  const std::string name = seed_name(c, d, t);
  const Batch b(c, d, t, std::mt19937(static_cast<unsigned>(std::hash<std::string>()(name))));
  const AttentionLayout layout = b.attention_layout();
  AttentionArgs a;
  a.q = reinterpret_cast<const void*>(b.q.dev.get());
  a.k = reinterpret_cast<const void*>(b.k.dev.get());
  a.v = reinterpret_cast<const void*>(b.v.dev.get());
  Outputs out(b);
  a.o = reinterpret_cast<void*>(out.o.get());
  a.lse = reinterpret_cast<float*>(out.lse.get());
  a.b = static_cast<std::int64_t>(c.len_q.size());
  a.hq = c.hq, a.hkv = c.hkv, a.nq = longest(c.len_q), a.nk = longest(c.len_k), a.d = d;
  a.causal = c.causal;
  a.window = c.window;
  a.softcap = static_cast<float>(c.softcap);
  a.alibi_slopes = c.alibi ? reinterpret_cast<const float*>(b.slopes.get()) : nullptr;
  a.cu_seqlens_q = reinterpret_cast<const std::int32_t*>(b.cu_q_dev());
  a.cu_seqlens_k = reinterpret_cast<const std::int32_t*>(b.cu_k_dev());
  a.layout = &layout;
  a.dtype = t;
  ASSERT_STREQ(attention_op_for(a), "flash_decode") << name;
  test::TempDir dir;
  RuntimeOptions ro;
  ro.db_path = (dir.path() / "empty.db").string();
  ro.use_shipped_databases = false;
  ro.cache_dir = test::kernel_cache_dir().string();
  Runtime rt(ro);
  out.poison(t);
  rt.attention(a, nullptr);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  check(b, out, name + " Runtime::attention");
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<VarlenCase, std::int64_t, DType>>& info) {
  const auto& [c, d, t] = info.param;
  std::string s = std::string(c.name) + "_d" + std::to_string(d) + "_" + dtype_name(t);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(Varlen, GpuDecodeVarlen,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(std::int64_t{64}, std::int64_t{128}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);
// d=32 (64-byte swizzled K/V rows) and d=256 (swizzled but at 32 keys per warp), bf16.
INSTANTIATE_TEST_SUITE_P(VarlenD32D256, GpuDecodeVarlen,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(std::int64_t{32}, std::int64_t{256}),
                                            ::testing::Values(DType::bf16)),
                         case_name);
// d=80: between the tiles (d=96's kernels, the columns past 80 zeros), bf16.
INSTANTIATE_TEST_SUITE_P(VarlenD80, GpuDecodeVarlen,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(std::int64_t{80}),
                                            ::testing::Values(DType::bf16)),
                         case_name);

// Without a GPU too (CI): the problems the suite's setup builds host-side are problems of the
// op; one that is not makes SetUpTestSuite throw before any case runs.
TEST(GpuDecodeVarlenProblems, EveryCaseBuildsAValidProblem) {
  for (const VarlenCase& c : kCases)
    for (std::int64_t d : {64, 80, 128}) EXPECT_NO_THROW(op().check_problem(problem_of(c, d)));
}

// The default with the most splits this device picks, captured in a CUDA graph: no host sync or
// allocation in run(), and replays give a direct run's bits.
TEST(GpuDecodeVarlenGraph, ReplaysReproduceADirectRun) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  const DeviceInfo dev = query_device(0);
  const VarlenCase& c = kCases[3];
  const Batch b(c, 128, DType::bf16, std::mt19937(7));
  const Prepared prep(op().default_params(b.problem, b.t, dev), b, dev);
  Outputs direct(b), graphed(b);
  direct.poison(b.t);
  prep.run(b, direct, nullptr);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  check(b, direct, "direct " + op().params_key(prep.params));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  prep.run(b, graphed, reinterpret_cast<CUstream>(stream));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    graphed.poison(b.t);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(graphed.o_bits(), direct.o_bits()) << "replay " << replay;
    const std::vector<float> x = graphed.lse_values(), y = direct.lse_values();
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ktune
