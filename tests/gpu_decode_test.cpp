// flash_decode on the GPU against the Eigen (double) CPU reference: batch 1 and 3, MHA, GQA 4:1
// and 8:1, MQA 16:1, nq 1..33, nk 1..4099 (partial tiles, splits of uneven length), head dims
// 64/128/256, causal and not, bf16 and fp16, outputs poisoned with NaN, the LSE (and a null LSE
// pointer), a [B,S,H,D] layout, non-default configurations from the space, and a CUDA graph
// replaying the same bits. Paged KV (page 16 and 256): pools with a shuffled block table, mixed
// sequence lengths 1..nk (1 and nk always), GQA and MQA, causal against each sequence's own
// length, the defaults and split points of the space, against the same double reference run on
// each sequence's gathered keys. Mask variants (sliding window, soft-capping, ALiBi, and all
// three), contiguous and paged, GQA and MQA, decode and 5-row causal blocks, at the default and
// at points of the space with many splits (splits wholly left of the window among them), and the
// tuner's fp32 references with the variants. The op is run directly (compile, load,
// CudaLauncher, a workspace of workspace_bytes()). Skipped without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numeric>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "search/space.hpp"
#include "templates/decode/decode_op.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/decode_points.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/gpu_kernels.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::AttentionResult;
using test::AttentionShape;
using test::AttentionTensor;

const Op& op() { return flash_decode_op(); }

Problem problem_of(const AttentionShape& s, std::int64_t page = 0) {
  Problem p;
  p.values = {s.b, s.hq, s.hkv, s.nq, s.nk, s.d, s.causal ? 1 : 0, page, s.window,
              s.softcap > 0 ? 1 : 0, s.alibi_slopes.empty() ? 0 : 1, 0};
  return p;
}

/// A [B, H, S, D] tensor: random values in [-2, 2) rounded to t (never 0) on the host, and its
/// device copy in the chosen layout.
struct DeviceTensor {
  AttentionTensor host;
  DeviceBuffer dev;

  DeviceTensor(DType t, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool bshd,
               std::mt19937& rng) {
    test::attention_strides(b, h, s, d, bshd, host);
    dev = test::upload_random(t, host.data, rng);
  }
};

/// One configuration ready to run on one problem: its kernels, a workspace, the strides.
struct Prepared {
  Params params;
  Problem problem;
  DType dtype;
  std::vector<KernelHandle> kernels;
  DeviceBuffer workspace;
  std::vector<std::int64_t> layout;  // empty: contiguous [B, H, S, D]

  Prepared(const Params& p, const AttentionShape& s, DType t, const DeviceInfo& dev, bool bshd,
           std::int64_t page = 0)
      : params(p), problem(problem_of(s, page)), dtype(t) {
    const std::vector<KernelSource> sources = op().kernels(params, problem, dtype);
    for (std::size_t i = 0; i < sources.size(); ++i)
      kernels.push_back(
          test::load_kernel(sources[i], dev, op().dynamic_shared_bytes(params, problem, dtype, i)));
    if (const std::size_t bytes = op().workspace_bytes(params, problem, dtype))
      workspace = DeviceBuffer(bytes);
    if (bshd) {
      const std::int64_t q = s.hq * s.d, kv = s.hkv * s.d;
      layout = {s.nq * q, s.d, q, s.nk * kv, s.d, kv, s.nk * kv, s.d, kv, s.nq * q, s.d, q};
    }
  }

  /// Tensors q, k, v, o, lse, alibi_slopes (read with alibi=yes); scalars scale and softcap (read
  /// with softcap=yes).
  void run(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v, CUdeviceptr o,
           CUdeviceptr lse, double scale, CUstream stream, CUdeviceptr slopes = 0,
           double softcap = 0.0) const {
    const std::uint64_t tensors[6] = {q.dev.get(), k.dev.get(), v.dev.get(), o, lse, slopes};
    const double scalars[2] = {scale, softcap};
    RunArgs a;
    a.params = &params;
    a.problem = &problem;
    a.dtype = dtype;
    a.tensors = tensors;
    a.scalars = scalars;
    a.workspace = workspace.get();
    a.kernels = kernels.data();
    a.layout = layout.empty() ? nullptr : layout.data();
    CudaLauncher launcher(stream);
    op().run(a, launcher);
  }

  /// Paged: q, the pools, o, lse, then the block table, the lengths and the slopes.
  void run_paged(const DeviceTensor& q, CUdeviceptr k_pool, CUdeviceptr v_pool, CUdeviceptr o,
                 CUdeviceptr lse, CUdeviceptr block_table, CUdeviceptr seq_lens,
                 CUstream stream, CUdeviceptr slopes = 0, double softcap = 0.0) const {
    const std::uint64_t tensors[8] = {q.dev.get(), k_pool,      v_pool,   o,
                                      lse,         block_table, seq_lens, slopes};
    const double scalars[2] = {0.0, softcap};
    RunArgs a;
    a.params = &params;
    a.problem = &problem;
    a.dtype = dtype;
    a.tensors = tensors;
    a.scalars = scalars;
    a.workspace = workspace.get();
    a.kernels = kernels.data();
    CudaLauncher launcher(stream);
    op().run(a, launcher);
  }
};

/// Output buffers, poisoned with NaN before each run: o in the layout of q, lse [B, Hq, Nq].
struct Outputs : test::PoisonedOutputs {
  AttentionTensor layout;

  Outputs(const AttentionShape& s, bool bshd)
      : test::PoisonedOutputs(static_cast<std::size_t>(s.b * s.hq * s.nq * s.d),
                              static_cast<std::size_t>(s.b * s.hq * s.nq)) {
    test::attention_strides(s.b, s.hq, s.nq, s.d, bshd, layout);
  }
};

using test::Checker;

/// "b=.. h=.. row=.. i=.." (i < 0: the row's lse), made only for a reported mismatch.
auto where(std::int64_t b, std::int64_t h, std::int64_t r, std::int64_t i) {
  return [=] {
    return "b=" + std::to_string(b) + " h=" + std::to_string(h) + " row=" + std::to_string(r) +
           (i >= 0 ? " i=" + std::to_string(i) : std::string());
  };
}

void check(const AttentionShape& s, DType t, const Outputs& out, const AttentionResult& ref,
           bool with_lse, const std::string& what) {
  const std::vector<std::uint16_t> o = out.o_bits();
  const std::vector<float> lse = out.lse_values();
  Checker o_check{op().tolerance(t), what + " o"};
  Checker lse_check{op().tolerance(t), what + " lse"};
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t r = 0; r < s.nq; ++r) {
        const std::size_t at = static_cast<std::size_t>(b * out.layout.batch +
                                                        h * out.layout.head + r * out.layout.seq);
        for (std::int64_t i = 0; i < s.d; ++i) {
          const std::uint16_t bits = o[at + static_cast<std::size_t>(i)];
          const double v = t == DType::bf16 ? test::bf16_bits_to_float(bits)
                                            : test::fp16_bits_to_float(bits);
          o_check(v, ref.o_at(s, b, h, r, i), where(b, h, r, i));
        }
        const std::size_t li = static_cast<std::size_t>((b * s.hq + h) * s.nq + r);
        if (with_lse)
          lse_check(lse[li], ref.lse[li], where(b, h, r, -1));
        else if (!std::isnan(lse[li]))
          ADD_FAILURE() << what << ": lse written although the pointer was null (b=" << b
                        << " h=" << h << " row=" << r << ")";
      }
}

/// Runs `a` and `b` on the same inputs into poisoned outputs: b's o and lse match the double
/// reference and are a's bits.
void expect_same_bits(const Prepared& a, const Prepared& b, const DeviceTensor& q,
                      const DeviceTensor& k, const DeviceTensor& v, const AttentionShape& s,
                      DType t, const AttentionResult& ref, const std::string& what,
                      Outputs& out_a, Outputs& out_b) {
  out_a.poison(t);
  out_b.poison(t);
  a.run(q, k, v, out_a.o.get(), out_a.lse.get(), 0.0, nullptr);
  b.run(q, k, v, out_b.o.get(), out_b.lse.get(), 0.0, nullptr);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  check(s, t, out_b, ref, true, what);
  EXPECT_EQ(out_b.o_bits(), out_a.o_bits()) << what;
  const std::vector<float> la = out_a.lse_values(), lb = out_b.lse_values();
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << what;
}

/// A graph capturing b's run once replays, twice, to `direct`'s bits (o and lse), each time
/// into a poisoned output.
void expect_graph_replay(const Prepared& b, const DeviceTensor& q, const DeviceTensor& k,
                         const DeviceTensor& v, const AttentionShape& s, DType t,
                         const Outputs& direct, const std::string& what) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Outputs graphed(s, false);  // allocated before the capture: no allocation may happen inside it
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  b.run(q, k, v, graphed.o.get(), graphed.lse.get(), 0.0, reinterpret_cast<CUstream>(stream));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    graphed.poison(t);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(graphed.o_bits(), direct.o_bits()) << what << " replay " << replay;
    const std::vector<float> got = graphed.lse_values(), want = direct.lse_values();
    ASSERT_EQ(got.size(), want.size()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
        << what << " replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

/// Each contiguous problem of `dims` at head dim d, with fresh inputs (seeded) and its double
/// reference, handed to body(p, s, name, q, k, v, ref): the bit-comparison tests' problems.
template <typename F>
void for_each_problem(const std::vector<const char*>& dims, std::int64_t d, DType t,
                      unsigned seed, F&& body) {
  for (const char* shape : dims) {
    const Problem p = op().parse_problem(std::string(shape) + ",d=" + std::to_string(d));
    AttentionShape s;
    s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2], s.nq = p.values[3];
    s.nk = p.values[4], s.d = d, s.causal = p.values[6] != 0, s.window = p.values[8];
    std::mt19937 rng(seed);
    const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);
    body(p, s, op().problem_key(p) + " " + dtype_name(t), q, k, v, ref);
  }
}

struct Heads {
  std::int64_t hq, hkv;
};
constexpr Heads kHeads[] = {{8, 8}, {32, 8}, {64, 8}, {16, 1}};
constexpr std::int64_t kNq[] = {1, 2, 5, 16, 33};
constexpr std::int64_t kNk[] = {1, 17, 1000, 4099};
/// Head dims of the contiguous suites (GpuDecode, GpuDecodeVariants): d=32 since its defaults
/// merge their splits in clusters (2026-12-03), which only these suites run at that size.
constexpr std::int64_t kSuiteHeadDims[] = {32, 64, 128, 256};
/// The grid leaves out its largest corners (b * hq * nq * nk over 2^21: the double reference
/// costs seconds each there); SpacePointsLayoutsAndGraphs runs the largest (64 heads, 33 rows,
/// 4099 keys) over many points of the space instead.
bool in_grid(std::int64_t b, std::int64_t hq, std::int64_t nq, std::int64_t nk) {
  return b * hq * nq * nk <= (std::int64_t{1} << 21);
}

AttentionShape grid_shape(std::int64_t b, const Heads& heads, std::int64_t nq, std::int64_t nk,
                          bool causal, std::int64_t d) {
  AttentionShape s;
  s.b = b, s.hq = heads.hq, s.hkv = heads.hkv, s.nq = nq, s.nk = nk, s.d = d;
  s.causal = causal;
  return s;
}

/// Every shape of the grid at head dim d (batch, heads, nq, nk, causal), as the suite's setup
/// compiles them.
std::vector<AttentionShape> grid_shapes(std::int64_t d) {
  std::vector<AttentionShape> out;
  for (std::int64_t b : {1, 3})
    for (const Heads& heads : kHeads)
      for (std::int64_t nq : kNq)
        for (std::int64_t nk : kNk)
          for (bool causal : {false, true}) {
            if (in_grid(b, heads.hq, nq, nk))
              out.push_back(grid_shape(b, heads, nq, nk, causal, d));
          }
  return out;
}

class GpuDecode : public ::testing::TestWithParam<std::tuple<std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    KTUNE_REQUIRE_SUITE(setup_error_);
    ensure_context(0);
    device_ = query_device(0);
  }

  static void SetUpTestSuite() { setup_error_ = test::suite_setup(compile_suite); }

  /// Compiles every kernel the defaults of the grid dispatch, in parallel, into the cache.
  static void compile_suite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    std::set<std::string> seen;
    std::vector<CompileJob> jobs;
    for (std::int64_t d : kSuiteHeadDims)
      for (DType t : {DType::bf16, DType::f16})
        for (const AttentionShape& s : grid_shapes(d)) {
          const Problem p = problem_of(s);
          for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t))
            if (seen.insert(k.name_expression).second) jobs.push_back({k, dev.arch(), {}});
        }
    compile_parallel(Compiler(test::kernel_cache_dir()), jobs, 0);
  }

  static inline std::string setup_error_;
  DeviceInfo device_;
};

// The default configuration for this device on every shape of the grid; every third run leaves
// lse null.
TEST_P(GpuDecode, DefaultsMatchTheReference) {
  const auto& [d, t] = GetParam();
  int n = 0;
  for (std::int64_t b : {1, 3})
    for (const Heads& heads : kHeads)
      for (std::int64_t nk : kNk) {
        // K and V are drawn once per (batch, heads, nk): filling them dominated the test's time.
        std::mt19937 kv_rng(static_cast<unsigned>(
            std::hash<std::string>()(std::to_string(b * 1000 + heads.hkv) + " " +
                                     std::to_string(nk) + " " + std::to_string(d) + " " +
                                     dtype_name(t))));
        std::optional<DeviceTensor> k, v;
        for (std::int64_t nq : kNq)
          for (bool causal : {false, true}) {
            if (!in_grid(b, heads.hq, nq, nk)) continue;
            AttentionShape s = grid_shape(b, heads, nq, nk, causal, d);
            if (nq == 5) s.scale = 0.3;  // an explicit scale somewhere
            const Problem p = problem_of(s);
            const std::string name = op().problem_key(p) + " " + dtype_name(t);
            std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
            const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
            if (!k) {
              k.emplace(t, s.b, s.hkv, s.nk, s.d, false, kv_rng);
              v.emplace(t, s.b, s.hkv, s.nk, s.d, false, kv_rng);
            }
            const AttentionResult ref = test::attention_ref(s, q.host, k->host, v->host);
            const Params params = op().default_params(p, t, device_);
            ASSERT_EQ(op().invalid_reason(params, p, t, device_), std::nullopt) << name;
            const Prepared prep(params, s, t, device_, false);
            Outputs out(s, false);
            out.poison(t);
            const bool with_lse = ++n % 3 != 0;
            prep.run(q, *k, *v, out.o.get(), with_lse ? out.lse.get() : 0, s.scale, nullptr);
            KTUNE_CU(Driver::get().cuCtxSynchronize());
            check(s, t, out, ref, with_lse, name + " " + op().params_key(params));
          }
      }
}

// Non-default points of the space (every split count, tile, warp count and ring depth among
// them), a [B,S,H,D] layout, and a CUDA graph replay that reproduces a direct run bit for bit.
TEST_P(GpuDecode, SpacePointsLayoutsAndGraphs) {
  const auto& [d, t] = GetParam();
  for (const char* dims : {"b=1,hq=32,hkv=8,nq=5,nk=4099,causal=yes",
                           "b=3,hq=16,hkv=1,nq=1,nk=1000", "b=1,hq=64,hkv=8,nq=33,nk=4099"}) {
    const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d));
    AttentionShape s;
    s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2], s.nq = p.values[3];
    s.nk = p.values[4], s.d = d, s.causal = p.values[6] != 0;
    const std::string name = op().problem_key(p) + " " + dtype_name(t);
    std::mt19937 rng(5);
    const Space space(op(), p, t, device_);
    const std::vector<Params> valid = space.valid_points();
    ASSERT_FALSE(valid.empty()) << name;
    for (bool bshd : {false, true}) {
      const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, bshd, rng);
      const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, bshd, rng);
      const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, bshd, rng);
      const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);
      const std::size_t step = bshd ? valid.size() / 3 + 1 : valid.size() / 12 + 1;
      for (std::size_t i = bshd ? 1 : 0; i < valid.size(); i += step) {
        const Prepared prep(valid[i], s, t, device_, bshd);
        Outputs out(s, bshd);
        out.poison(t);
        prep.run(q, k, v, out.o.get(), out.lse.get(), 0.0, nullptr);
        KTUNE_CU(Driver::get().cuCtxSynchronize());
        check(s, t, out, ref, true,
              name + (bshd ? " bshd " : " bhsd ") + op().params_key(valid[i]));
      }
    }
    // Graph: the default with the largest split count on this device, captured once.
    const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
    const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, false, rng);
    const Params params = op().default_params(p, t, device_);
    const Prepared prep(params, s, t, device_, false);
    Outputs direct(s, false);
    direct.poison(t);
    prep.run(q, k, v, direct.o.get(), direct.lse.get(), 0.0, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    expect_graph_replay(prep, q, k, v, s, t, direct, name);
  }
}

// merge=1 (sm_90): the splits merged in a thread block cluster through their shared memory give
// the combine kernel's bits (o and lse) at 2, 4, 8 and 16 splits, on decode, multi-row causal,
// MQA and sliding-window problems with partial tiles, and match the double reference; a graph
// replays a clustered launch to the same bits.
TEST_P(GpuDecode, ClusterMergeGivesTheCombinesBits) {
  const auto& [d, t] = GetParam();
  if (device_.cc_major < 9) GTEST_SKIP() << "thread block clusters need compute capability 9.0";
  int compared = 0;
  for_each_problem(test::cluster_test_dims(), d, t, 11,
                   [&](const Problem& p, const AttentionShape& s, const std::string& name,
                       const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                       const AttentionResult& ref) {
    // 2, 4, 8 and 16 splits where the combine's point is valid (not e.g. with empty splits).
    for (const auto& [combine, merged] : test::cluster_test_pairs(op(), p, t, device_)) {
      ASSERT_EQ(op().invalid_reason(merged, p, t, device_), std::nullopt) << name;
      const Prepared a(combine, s, t, device_, false), b(merged, s, t, device_, false);
      EXPECT_EQ(b.workspace.get(), 0u);
      Outputs out_a(s, false), out_b(s, false);
      const std::string what = name + " " + op().params_key(merged);
      expect_same_bits(a, b, q, k, v, s, t, ref, what, out_a, out_b);
      ++compared;
      // A graph of the clustered launch replays the direct run's bits.
      if (merged.values[op().param_index("splits")] == 16 && s.nq == 1 && s.window == 0)
        expect_graph_replay(b, q, k, v, s, t, out_b, what);
    }
  });
  EXPECT_GE(compared, 10) << "too few split counts were valid to compare";
}

// tma=1 (sm_90): K/V tiles copied by tensor maps into the swizzled parts give the cp.async
// ring's bits (the products read the same operands in the same order), tile for tile: the
// default, three other tile shapes, a cluster merge of 4 splits, on decode, multi-row causal,
// MQA and sliding-window problems with partial tiles, in both layouts (the maps read the
// strides); a graph replays a TMA launch to the same bits. (GpuDecodeVariants runs the
// default with tma=1 on every mask variant against the reference.)
TEST_P(GpuDecode, TmaGivesTheCpAsyncBits) {
  const auto& [d, t] = GetParam();
  if (device_.cc_major < 9) GTEST_SKIP() << "tensor maps need compute capability 9.0";
  const std::size_t tma = op().param_index("tma");
  {
    const Problem p = op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=1000,d=" + std::to_string(d));
    Params probe = op().default_params(p, t, device_);
    probe.values[tma] = 1;
    if (const auto why = op().invalid_reason(probe, p, t, device_)) GTEST_SKIP() << *why;
  }
  int compared = 0;
  for (const char* dims : test::tma_test_dims()) {
    const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d));
    AttentionShape s;
    s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2], s.nq = p.values[3];
    s.nk = p.values[4], s.d = d, s.causal = p.values[6] != 0, s.window = p.values[8];
    const std::string name = op().problem_key(p) + " " + dtype_name(t);
    // The default, three other tiles of the space and a cluster merge of 4 splits where valid.
    const std::vector<Params> points = test::tma_test_points(op(), p, t, device_);
    ASSERT_GE(points.size(), 4u) << name << ": fewer than 3 other tiles";
    std::mt19937 rng(17);
    for (bool bshd : {false, true}) {
      const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, bshd, rng);
      const DeviceTensor k(t, s.b, s.hkv, s.nk, s.d, bshd, rng);
      const DeviceTensor v(t, s.b, s.hkv, s.nk, s.d, bshd, rng);
      const AttentionResult ref = test::attention_ref(s, q.host, k.host, v.host);
      for (std::size_t i = 0; i < points.size(); ++i) {
        Params plain = points[i];
        plain.values[tma] = 0;
        Params copied = plain;
        copied.values[tma] = 1;
        ASSERT_EQ(op().invalid_reason(copied, p, t, device_), std::nullopt)
            << name << " " << op().params_key(copied);
        const Prepared a(plain, s, t, device_, bshd), b(copied, s, t, device_, bshd);
        Outputs out_a(s, bshd), out_b(s, bshd);
        const std::string what =
            name + (bshd ? " bshd " : " bhsd ") + op().params_key(copied);
        expect_same_bits(a, b, q, k, v, s, t, ref, what, out_a, out_b);
        ++compared;
        // A graph of the default's TMA launch replays its bits (the maps are kernel arguments).
        if (!bshd && i == 0)
          expect_graph_replay(b, q, k, v, s, t, out_b, what);
      }
    }
  }
  EXPECT_GE(compared, 30) << "too few points compared";
}

// ---- paged KV ----

/// A paged K/V cache on the device: pools [pages, page, Hkv, D] of random values rounded to t
/// (never 0), a shuffled block table (every page once) and the sequences' lengths.
struct PagedCache {
  std::int64_t page, pages_per_seq, hkv, d;
  std::vector<int> table, lens;
  std::vector<double> k, v;  // the pools, as the device holds them
  DeviceBuffer k_dev, v_dev, table_dev, lens_dev;

  PagedCache(DType t, std::int64_t b, std::int64_t hkv_, std::int64_t nk, std::int64_t d_,
             std::int64_t page_, std::mt19937& rng)
      : page(page_), pages_per_seq((nk + page_ - 1) / page_), hkv(hkv_), d(d_) {
    const std::int64_t pages = b * pages_per_seq;
    table.resize(static_cast<std::size_t>(pages));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    // Both ends always, the rest anywhere in 1..nk.
    std::uniform_int_distribution<std::int64_t> len(1, nk);
    for (std::int64_t i = 0; i < b; ++i)
      lens.push_back(static_cast<int>(i == 0 ? nk : i == 1 ? 1 : len(rng)));
    const std::size_t n = static_cast<std::size_t>(pages * page * hkv * d);
    for (const auto& [host, dev] : {std::pair{&k, &k_dev}, std::pair{&v, &v_dev}}) {
      host->resize(n);
      *dev = test::upload_random(t, *host, rng);
    }
    table_dev = DeviceBuffer(table.size() * 4);
    KTUNE_CU(Driver::get().cuMemcpyHtoD(table_dev.get(), table.data(), table.size() * 4));
    lens_dev = DeviceBuffer(lens.size() * 4);
    KTUNE_CU(Driver::get().cuMemcpyHtoD(lens_dev.get(), lens.data(), lens.size() * 4));
  }

  /// Sequence b's keys (or values) gathered into a contiguous [1, Hkv, len, D] tensor.
  test::AttentionTensor gather(const std::vector<double>& pool, std::int64_t b) const {
    const std::int64_t len = lens[static_cast<std::size_t>(b)];
    test::AttentionTensor out;
    test::attention_strides(1, hkv, len, d, false, out);
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < len; ++j) {
        const std::int64_t pg = table[static_cast<std::size_t>(b * pages_per_seq + j / page)];
        for (std::int64_t i = 0; i < d; ++i)
          out.data[static_cast<std::size_t>(h * out.head + j * out.seq + i)] =
              pool[static_cast<std::size_t>(((pg * page + j % page) * hkv + h) * d + i)];
      }
    return out;
  }
};

/// The double reference of a paged batch: each sequence on its own gathered keys, its length as
/// nk (so causal is aligned to it), results laid out as one [B, Hq, Nq] batch.
AttentionResult paged_reference(const AttentionShape& s, const DeviceTensor& q,
                                const PagedCache& cache) {
  AttentionResult all;
  for (std::int64_t b = 0; b < s.b; ++b) {
    AttentionShape one = s;
    one.b = 1;
    one.nk = cache.lens[static_cast<std::size_t>(b)];
    test::AttentionTensor q1;
    test::attention_strides(1, s.hq, s.nq, s.d, false, q1);
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t r = 0; r < s.nq; ++r)
        for (std::int64_t i = 0; i < s.d; ++i)
          q1.data[static_cast<std::size_t>(h * q1.head + r * q1.seq + i)] = q.host.at(b, h, r, i);
    const AttentionResult r =
        test::attention_ref(one, q1, cache.gather(cache.k, b), cache.gather(cache.v, b));
    all.o.insert(all.o.end(), r.o.begin(), r.o.end());
    all.lse.insert(all.lse.end(), r.lse.begin(), r.lse.end());
  }
  return all;
}

class GpuDecodePaged : public ::testing::TestWithParam<std::tuple<std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
  }
  DeviceInfo device_;
};

// Mixed lengths (1 and nk among them) over a shuffled pool: the default and points of the space
// with several splits (empty splits for the short sequences) and with tiles smaller and larger
// than a page, for d = 32, 64, 80, 96, 128, 256 (d=96's rows, 12 chunks, are copied by 16
// threads each), causal and not, GQA 4:1, MQA 16:1 and MHA.
TEST_P(GpuDecodePaged, MixedLengthsMatchTheReference) {
  const auto& [page, t] = GetParam();
  for (std::int64_t d : test::paged_test_head_dims())
    for (const char* dims : test::paged_test_dims())
      for (bool causal : {false, true}) {
        const Problem p =
            op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                               ",page=" + std::to_string(page) + (causal ? ",causal=yes" : ""));
        AttentionShape s;
        s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2], s.nq = p.values[3];
        s.nk = p.values[4], s.d = d, s.causal = causal;
        const std::string name = op().problem_key(p) + " " + dtype_name(t);
        std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
        const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
        const PagedCache cache(t, s.b, s.hkv, s.nk, s.d, page, rng);
        const AttentionResult ref = paged_reference(s, q, cache);
        // The default, the most splits, a tile of another size than the default's, and at d=96's
        // tiles the default's tile split in two (decode_ops_test checks them all valid on CPU).
        const std::vector<Params> points = test::paged_test_points(op(), p, t, device_, d);
        ASSERT_GE(points.size(), 2u) << name << ": no valid point";
        int n = 0;
        for (const Params& params : points) {
          ASSERT_EQ(op().invalid_reason(params, p, t, device_), std::nullopt) << name;
          const Prepared prep(params, s, t, device_, false, page);
          Outputs out(s, false);
          out.poison(t);
          const bool with_lse = n++ != 1;
          prep.run_paged(q, cache.k_dev.get(), cache.v_dev.get(), out.o.get(),
                         with_lse ? out.lse.get() : 0, cache.table_dev.get(), cache.lens_dev.get(),
                         nullptr);
          KTUNE_CU(Driver::get().cuCtxSynchronize());
          check(s, t, out, ref, with_lse, name + " " + op().params_key(params));
        }
      }
}

// The tuner's path: the paged reference kernel (flash_attention's, PAGE set) on the GPU agrees
// with the double reference, so a sweep's verification of a paged problem checks the right thing.
TEST_P(GpuDecodePaged, ReferenceKernelMatchesTheDoubleReference) {
  const auto& [page, t] = GetParam();
  const Problem p = op().parse_problem("b=4,hq=16,hkv=4,nq=3,nk=777,d=128,causal=yes,page=" +
                                       std::to_string(page));
  AttentionShape s;
  s.b = 4, s.hq = 16, s.hkv = 4, s.nq = 3, s.nk = 777, s.d = 128, s.causal = true;
  std::mt19937 rng(3);
  const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
  const PagedCache cache(t, s.b, s.hkv, s.nk, s.d, page, rng);
  const AttentionResult ref = paged_reference(s, q, cache);
  const std::vector<KernelSource> sources = op().reference_kernels(p, t);
  ASSERT_EQ(sources.size(), 1u);
  const KernelHandle kernel = test::load_kernel(sources[0], device_, 0);
  DeviceBuffer o(ref.o.size() * 4), lse(ref.lse.size() * 4);
  const std::uint64_t tensors[8] = {
      q.dev.get(), cache.k_dev.get(),     cache.v_dev.get(),   o.get(),
      lse.get(),   cache.table_dev.get(), cache.lens_dev.get(), 0};
  const double scalars[2] = {0.0, 0.0};
  RunArgs a;
  a.problem = &p;
  a.dtype = t;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = &kernel;
  CudaLauncher launcher(nullptr);
  op().run_reference(a, launcher);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  std::vector<float> got(ref.o.size()), got_lse(ref.lse.size());
  KTUNE_CU(Driver::get().cuMemcpyDtoH(got.data(), o.get(), got.size() * 4));
  KTUNE_CU(Driver::get().cuMemcpyDtoH(got_lse.data(), lse.get(), got_lse.size() * 4));
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref.o[i], 1e-4) << i;
  for (std::size_t i = 0; i < got_lse.size(); ++i)
    if (std::isinf(ref.lse[i])) {
      EXPECT_EQ(got_lse[i], ref.lse[i]) << i;
    } else {
      EXPECT_NEAR(got_lse[i], ref.lse[i], 1e-4) << i;
    }
}

// kv_split=1 (d=96's tiles in two parts, 128- and 64-byte rows) holds the padded tiles' data, so
// the products see the same operands in the same order: the same bits as kv_split=0, tile for
// tile (the default's, others of the space, a cluster merge), on decode, multi-row causal with
// partial tiles, MQA and a sliding window; and both match the double reference.
class GpuDecodeKvSplit : public GpuDecodePaged {};  // (d, dtype) here

TEST_P(GpuDecodeKvSplit, GivesThePaddedTilesBits) {
  const auto& [d, t] = GetParam();
  ASSERT_TRUE(d > 64 && d <= 96) << "kv_split is for d=96's tiles (d = 72-96)";
  const std::size_t kv_split = op().param_index("kv_split");
  int compared = 0;
  for_each_problem({"b=4,hq=32,hkv=32,nq=1,nk=4099", "b=3,hq=32,hkv=8,nq=5,nk=1000,causal=yes",
                    "b=2,hq=16,hkv=1,nq=33,nk=777,causal=yes",
                    "b=2,hq=32,hkv=8,nq=1,nk=4099,window=300"},
                   d, t, 13, [&](const Problem& p, const AttentionShape& s, const std::string& name,
                                 const DeviceTensor& q, const DeviceTensor& k,
                                 const DeviceTensor& v, const AttentionResult& ref) {
    // The default, three other tile shapes (block_m, block_n, warps, stages: the first, middle
    // and last the space holds; each pair compiles two kernels), then a cluster merge of 4
    // splits.
    std::vector<Params> points{op().default_params(p, t, device_)};
    std::vector<Params> others;
    std::set<std::vector<std::int64_t>> tiles;
    for (const Params& x : Space(op(), p, t, device_).valid_points())
      if (x.values[kv_split] == 0 && x.values[5] == 0 &&
          tiles.insert({x.values[1], x.values[2], x.values[3], x.values[4]}).second)
        others.push_back(x);
    ASSERT_GE(others.size(), 3u) << name;
    for (std::size_t i : {std::size_t{0}, others.size() / 2, others.size() - 1})
      points.push_back(others[i]);
    if (device_.cc_major >= 9) {
      Params merged = points[0];
      merged.values[0] = 4;
      merged.values[5] = 1;
      if (!op().invalid_reason(merged, p, t, device_)) points.push_back(merged);
    }
    for (Params plain : points) {
      plain.values[kv_split] = 0;
      Params split = plain;
      split.values[kv_split] = 1;
      ASSERT_EQ(op().invalid_reason(split, p, t, device_), std::nullopt)
          << name << " " << op().params_key(split);
      const Prepared a(plain, s, t, device_, false), b(split, s, t, device_, false);
      Outputs out_a(s, false), out_b(s, false);
      expect_same_bits(a, b, q, k, v, s, t, ref, name + " " + op().params_key(split), out_a,
                       out_b);
      ++compared;
    }
  });
  EXPECT_GE(compared, 16) << "too few points compared";
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::int64_t, DType>>& info) {
  return "d" + std::to_string(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(HeadDims, GpuDecode,
                         ::testing::Combine(::testing::ValuesIn(kSuiteHeadDims),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);

// Head dims between the kernels' tiles: d=40 in d=64's, 80 in 96's (columns past d zeros).
INSTANTIATE_TEST_SUITE_P(BetweenTiles, GpuDecode,
                         ::testing::Combine(::testing::Values(std::int64_t{40}, std::int64_t{80}),
                                            ::testing::Values(DType::bf16)),
                         case_name);

// d=96's tiles: d = 72, 80 and 96.
INSTANTIATE_TEST_SUITE_P(D96Tiles, GpuDecodeKvSplit,
                         ::testing::Values(std::make_tuple(std::int64_t{72}, DType::bf16),
                                           std::make_tuple(std::int64_t{80}, DType::bf16),
                                           std::make_tuple(std::int64_t{96}, DType::bf16),
                                           std::make_tuple(std::int64_t{96}, DType::f16)),
                         case_name);

INSTANTIATE_TEST_SUITE_P(Pages, GpuDecodePaged,
                         ::testing::Combine(::testing::Values(std::int64_t{16}, std::int64_t{256}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         [](const ::testing::TestParamInfo<std::tuple<std::int64_t, DType>>& i) {
                           return "page" + std::to_string(std::get<0>(i.param)) + "_" +
                                  dtype_name(std::get<1>(i.param));
                         });

// ---- mask variants ----

struct VariantCase {
  const char* dims;  // with page / window / softcap / alibi; d comes from the test parameter
  double softcap;    // the cap with softcap=yes
};

// Small enough for the double reference (b * hq * nq * nk under 2^20 each).
const VariantCase kVariantCases[] = {
    {"b=2,hq=32,hkv=8,nq=1,nk=3000,window=500", 0},                    // GQA decode
    {"b=1,hq=16,hkv=4,nq=5,nk=2000,causal=yes,window=64", 0},          // a window per query row
    {"b=2,hq=8,hkv=2,nq=1,nk=1500,softcap=yes", 2.0},                  // the cap saturates
    {"b=1,hq=32,hkv=8,nq=5,nk=1000,causal=yes,alibi=yes", 0},
    {"b=1,hq=16,hkv=2,nq=5,nk=3000,causal=yes,window=300,softcap=yes,alibi=yes", 3.0},
    {"b=3,hq=8,hkv=1,nq=1,nk=777,window=1000,softcap=yes,alibi=yes", 5.0},  // MQA, wider than nk
    {"b=1,hq=8,hkv=2,nq=33,nk=20,causal=yes,window=8,alibi=yes", 0},   // rows that see no key
    {"b=4,hq=32,hkv=8,nq=1,nk=3000,page=16,window=500", 0},
    {"b=3,hq=16,hkv=4,nq=5,nk=2000,causal=yes,page=16,window=64,alibi=yes", 0},
    {"b=4,hq=8,hkv=2,nq=1,nk=1500,page=256,softcap=yes", 2.0},
    {"b=3,hq=16,hkv=2,nq=5,nk=2500,causal=yes,page=256,window=300,softcap=yes,alibi=yes", 3.0},
    // 24 (batch, KV head) pairs: on sm_90 d=64's default merges its splits in clusters (and
    // d=32's) under each mask variant.
    {"b=3,hq=16,hkv=8,nq=1,nk=3000,window=1200", 0},
    {"b=3,hq=24,hkv=8,nq=1,nk=2500,softcap=yes,alibi=yes", 2.0},
    // 32 pairs: d=128's short-span default under a variant takes 8 merged splits at 3 stages.
    {"b=4,hq=32,hkv=8,nq=1,nk=3000,window=1200", 0},
};

/// The case's problem at head dim d, its shape for the double reference (slopes set later).
Problem variant_problem(const VariantCase& c, std::int64_t d) {
  return op().parse_problem(std::string(c.dims) + ",d=" + std::to_string(d));
}

AttentionShape variant_shape(const Problem& p, const VariantCase& c) {
  AttentionShape s;
  s.b = p.values[0], s.hq = p.values[1], s.hkv = p.values[2], s.nq = p.values[3];
  s.nk = p.values[4], s.d = p.values[5], s.causal = p.values[6] != 0;
  s.window = p.values[8];
  if (p.values[9] != 0) s.softcap = c.softcap;
  return s;
}

/// ALiBi slopes as ALiBi makes them, 2^(-8 (h + 1) / hq), shuffled so that a head's slope is not
/// its position: on the host (into s for the reference) and on the device.
DeviceBuffer alibi_slopes(AttentionShape& s, std::mt19937& rng) {
  std::vector<float> slopes(static_cast<std::size_t>(s.hq));
  for (std::size_t h = 0; h < slopes.size(); ++h)
    slopes[h] = std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(slopes.size()));
  std::shuffle(slopes.begin(), slopes.end(), rng);
  s.alibi_slopes.assign(slopes.begin(), slopes.end());
  DeviceBuffer dev(slopes.size() * 4);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), slopes.data(), slopes.size() * 4));
  return dev;
}

class GpuDecodeVariants
    : public ::testing::TestWithParam<std::tuple<VariantCase, std::int64_t, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    KTUNE_REQUIRE_SUITE(setup_error_);
    ensure_context(0);
    device_ = query_device(0);
  }
  static void SetUpTestSuite() { setup_error_ = test::suite_setup(compile_suite); }
  /// Compiles every kernel the cases run, in parallel, into the shared cache.
  static void compile_suite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    std::set<std::string> seen;
    std::vector<CompileJob> jobs;
    for (const VariantCase& c : kVariantCases)
      for (std::int64_t d : kSuiteHeadDims)
        for (DType t : {DType::bf16, DType::f16}) {
          const Problem p = variant_problem(c, d);
          for (const Params& params : test::variant_test_points(op(), p, t, dev))
            for (const KernelSource& k : op().kernels(params, p, t))
              if (seen.insert(k.name_expression).second) jobs.push_back({k, dev.arch(), {}});
        }
    compile_parallel(Compiler(test::kernel_cache_dir()), jobs, 0);
  }
  static inline std::string setup_error_;
  DeviceInfo device_;
};

// The default and points with many splits against the double reference; contiguous problems
// through run() with the slopes as tensor 5, paged ones with the slopes after seq_lens.
TEST_P(GpuDecodeVariants, MatchTheReference) {
  const auto& [c, d, t] = GetParam();
  const Problem p = variant_problem(c, d);
  AttentionShape s = variant_shape(p, c);
  const std::int64_t page = p.values[7];
  const std::string name = op().problem_key(p) + " " + dtype_name(t);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  DeviceBuffer slopes;
  if (p.values[10] != 0) slopes = alibi_slopes(s, rng);
  const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
  std::unique_ptr<DeviceTensor> k, v;
  std::unique_ptr<PagedCache> cache;
  AttentionResult ref;
  if (page > 0) {
    cache = std::make_unique<PagedCache>(t, s.b, s.hkv, s.nk, s.d, page, rng);
    ref = paged_reference(s, q, *cache);
  } else {
    k = std::make_unique<DeviceTensor>(t, s.b, s.hkv, s.nk, s.d, false, rng);
    v = std::make_unique<DeviceTensor>(t, s.b, s.hkv, s.nk, s.d, false, rng);
    ref = test::attention_ref(s, q.host, k->host, v->host);
  }
  const std::vector<Params> points = test::variant_test_points(op(), p, t, device_);
  EXPECT_GE(points.size(), 2u) << name;
  for (const Params& params : points) {
    ASSERT_EQ(op().invalid_reason(params, p, t, device_), std::nullopt) << name;
    const Prepared prep(params, s, t, device_, false, page);
    Outputs out(s, false);
    out.poison(t);
    if (page > 0)
      prep.run_paged(q, cache->k_dev.get(), cache->v_dev.get(), out.o.get(), out.lse.get(),
                     cache->table_dev.get(), cache->lens_dev.get(), nullptr, slopes.get(),
                     s.softcap);
    else
      prep.run(q, *k, *v, out.o.get(), out.lse.get(), 0.0, nullptr, slopes.get(), s.softcap);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    check(s, t, out, ref, true, name + " " + op().params_key(params));
  }
}

// The tuner's path: the fp32 reference each problem names (flash_attention's, with PAGE for
// paged ones), given the variants' tensor and scalar at the op's indices, agrees with the double
// reference.
TEST_P(GpuDecodeVariants, ReferenceKernelMatchesTheDoubleReference) {
  const auto& [c, d, t] = GetParam();
  if (d != 128) GTEST_SKIP() << "one head dim is enough for the fp32 reference";
  const Problem p = variant_problem(c, d);
  AttentionShape s = variant_shape(p, c);
  const std::int64_t page = p.values[7];
  std::mt19937 rng(9);
  DeviceBuffer slopes;
  if (p.values[10] != 0) slopes = alibi_slopes(s, rng);
  const DeviceTensor q(t, s.b, s.hq, s.nq, s.d, false, rng);
  std::unique_ptr<DeviceTensor> k, v;
  std::unique_ptr<PagedCache> cache;
  AttentionResult ref;
  std::vector<std::uint64_t> tensors;
  DeviceBuffer o(static_cast<std::size_t>(s.b * s.hq * s.nq * s.d) * 4);
  DeviceBuffer lse(static_cast<std::size_t>(s.b * s.hq * s.nq) * 4);
  if (page > 0) {
    cache = std::make_unique<PagedCache>(t, s.b, s.hkv, s.nk, s.d, page, rng);
    ref = paged_reference(s, q, *cache);
    tensors = {q.dev.get(), cache->k_dev.get(), cache->v_dev.get(), o.get(), lse.get(),
               cache->table_dev.get(), cache->lens_dev.get(), slopes.get()};
  } else {
    k = std::make_unique<DeviceTensor>(t, s.b, s.hkv, s.nk, s.d, false, rng);
    v = std::make_unique<DeviceTensor>(t, s.b, s.hkv, s.nk, s.d, false, rng);
    ref = test::attention_ref(s, q.host, k->host, v->host);
    tensors = {q.dev.get(), k->dev.get(), v->dev.get(), o.get(), lse.get(), slopes.get()};
  }
  ASSERT_EQ(tensors.size(), op().tensors(p, t).size());
  const std::vector<KernelSource> sources = op().reference_kernels(p, t);
  ASSERT_EQ(sources.size(), 1u);
  const KernelHandle kernel = test::load_kernel(sources[0], device_, 0);
  const double scalars[2] = {0.0, s.softcap};
  RunArgs a;
  a.problem = &p;
  a.dtype = t;
  a.tensors = tensors.data();
  a.scalars = scalars;
  a.kernels = &kernel;
  CudaLauncher launcher(nullptr);
  op().run_reference(a, launcher);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  std::vector<float> got(ref.o.size()), got_lse(ref.lse.size());
  KTUNE_CU(Driver::get().cuMemcpyDtoH(got.data(), o.get(), got.size() * 4));
  KTUNE_CU(Driver::get().cuMemcpyDtoH(got_lse.data(), lse.get(), got_lse.size() * 4));
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref.o[i], 1e-4) << i;
  for (std::size_t i = 0; i < got_lse.size(); ++i)
    if (std::isinf(ref.lse[i])) {
      EXPECT_EQ(got_lse[i], ref.lse[i]) << i;
    } else {
      EXPECT_NEAR(got_lse[i], ref.lse[i], 1e-4) << i;
    }
}

std::string variant_name(
    const ::testing::TestParamInfo<std::tuple<VariantCase, std::int64_t, DType>>& info) {
  const auto& [c, d, t] = info.param;
  std::string s = std::string(c.dims) + "_d" + std::to_string(d) + "_" + dtype_name(t);
  return test::param_name(std::move(s));
}

INSTANTIATE_TEST_SUITE_P(Variants, GpuDecodeVariants,
                         ::testing::Combine(::testing::ValuesIn(kVariantCases),
                                            ::testing::ValuesIn(kSuiteHeadDims),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         variant_name);

// Without a GPU too (CI): the problems the suites' setups build host-side are problems of the
// op; one that is not makes SetUpTestSuite throw before any case runs.
TEST(GpuDecodeProblems, EveryCaseBuildsAValidProblem) {
  for (std::int64_t d : kSuiteHeadDims) {
    for (const AttentionShape& s : grid_shapes(d))
      EXPECT_NO_THROW(op().check_problem(problem_of(s)));
    for (const VariantCase& c : kVariantCases)
      EXPECT_NO_THROW(op().check_problem(variant_problem(c, d)));
  }
}

}  // namespace
}  // namespace ktune
