// The MoE route and align kernels on the GPU against the double references of
// tests/support/moe_reference: every routing mode, T in {1, 3, 17, 1000}, E in {8, 64, 256} with
// k in {1, 2, 8}, random logits from fresh seeds, outputs poisoned first. Ids must match exactly
// (a swap is accepted only where the reference's selection scores, or its group scores, are
// within 2e-6, a near-tie fp32 scoring cannot resolve; counted and printed), weights to 1e-5 relative; alignment must
// equal the stable reference exactly, on routed ids and on edge cases (an expert with no pairs,
// one with all of them, out-of-range ids, T * k = 65536 * 8). The one-block route + align kernel
// (fuse_route) against the route kernel followed by the align kernel: every output bit for bit.
// Past 256 experts (E in {384, 512}: the kernels' EMAX = 512 forms) the same at the op's route
// geometries, T in {77, 1000} (routing) and up to 4096 x 8 pairs (the multi-block align path).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "runtime/core/driver.hpp"
#include "templates/moe/args.h"
#include "tests/support/moe_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::MoeRouteProblem;

constexpr unsigned kPoison = 0x7fc00001u;  // a NaN as a weight, an absurd id as an int

struct RouteConfig {
  int threads, lanes, vec;
};

/// The host-side validity the Op will state with reasons (see moe/route.cuh).
bool route_valid(int routing, RouteConfig c, int experts) {
  const int scores = (experts + c.lanes * c.vec - 1) / (c.lanes * c.vec) * c.vec;
  if (experts % c.vec != 0 || scores > 64) return false;
  return routing != moe_sigmoid_group || (scores <= 32 && c.threads * scores <= kMoeRouteMaxScores);
}

/// The EMAX argument the op names for `experts` (moe_plan.cpp): none up to 256, ", 512" past it.
std::string emax_arg(int experts) {
  return moe_emax(experts) == kMoeEmax ? "" : ", " + std::to_string(moe_emax(experts));
}

std::string route_name(int routing, RouteConfig c, int experts) {
  const int items = (experts + c.lanes * c.vec - 1) / (c.lanes * c.vec);
  return "ktune::moe_route_kernel<" + std::to_string(routing) + ", " + std::to_string(c.threads) +
         ", " + std::to_string(c.lanes) + ", " + std::to_string(c.vec) + ", " +
         std::to_string(items) + emax_arg(experts) + ">";
}

/// The one-block route + align kernel with c's lanes and vector width, at the op's block size.
int fused_threads(RouteConfig c, int experts) {
  const int items = (experts + c.lanes * c.vec - 1) / (c.lanes * c.vec);
  return moe_route_align_threads(items * c.vec, experts);
}
std::string fused_name(int routing, RouteConfig c, int experts) {
  const int items = (experts + c.lanes * c.vec - 1) / (c.lanes * c.vec);
  return "ktune::moe_route_align_kernel<" + std::to_string(routing) + ", " +
         std::to_string(fused_threads(c, experts)) + ", " + std::to_string(c.lanes) + ", " +
         std::to_string(c.vec) + ", " + std::to_string(items) + emax_arg(experts) + ">";
}

/// The route kernel's grid sorting its own pairs (fuse_route=2), at the op's 128 threads.
std::string sort_name(int routing, RouteConfig c, int experts) {
  const int items = (experts + c.lanes * c.vec - 1) / (c.lanes * c.vec);
  return "ktune::moe_route_sort_kernel<" + std::to_string(routing) + ", 128, " +
         std::to_string(c.lanes) + ", " + std::to_string(c.vec) + ", " + std::to_string(items) +
         emax_arg(experts) + ">";
}
int sort_blocks(RouteConfig c, int tokens) {
  const int per_block = 128 / c.lanes;
  return (tokens + per_block - 1) / per_block;
}
/// Words of the sort kernel's scratch: its header, then the int count table [blocks][E].
std::size_t sort_scratch_words(int experts, int blocks) {
  return static_cast<std::size_t>(moe_sort_header(experts)) +
         (static_cast<std::size_t>(blocks) * experts + 1) / 2;
}
/// Whether the op searches fuse_route=2 there (moe_space.cpp).
bool sort_valid(RouteConfig c, int tokens, int experts) {
  const int blocks = sort_blocks(c, tokens);
  return c.threads == 128 && blocks <= kMoeSortMaxBlocks && blocks * experts <= kMoeSortMaxTable;
}

/// The op's one-block align kernel for `pairs` (moe_plan.cpp: a warp per 128 pairs, 128..1024;
/// at most 512 past 256 experts).
int align_threads(int pairs, int experts) {
  const int most = moe_emax(experts) == kMoeEmax ? 1024 : 512;
  int threads = 128;
  while (threads < most && threads * 4 < pairs) threads *= 2;
  return threads;
}

/// Every kernel the tests launch, compiled once (in parallel) for this device.
class Kernels {
 public:
  void add(const std::string& file, const std::string& name) { wanted_[name] = file; }
  void build(const std::string& arch) {
    std::vector<CompileJob> jobs;
    for (const auto& [name, file] : wanted_) jobs.push_back({{file, name}, arch, {}});
    const Compiler compiler(std::nullopt);
    const auto outcomes = compile_parallel(compiler, jobs, 0);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!outcomes[i].kernel)
        throw std::runtime_error(jobs[i].source.name_expression + ": " + outcomes[i].error);
      Loaded l;
      l.module = Module(outcomes[i].kernel->cubin);
      l.fn = l.module.function(outcomes[i].kernel->lowered_name);
      loaded_.emplace(jobs[i].source.name_expression, std::move(l));
    }
  }
  template <typename Args>
  void launch(const std::string& name, int grid, int threads, Args args) {
    void* params[] = {&args};
    KTUNE_CU(Driver::get().cuLaunchKernel(loaded_.at(name).fn, static_cast<unsigned>(grid), 1, 1,
                                          static_cast<unsigned>(threads), 1, 1, 0, nullptr,
                                          params, nullptr));
  }

 private:
  struct Loaded {
    Module module;
    CUfunction fn = nullptr;
  };
  std::map<std::string, std::string> wanted_;
  std::map<std::string, Loaded> loaded_;
};

template <typename T>
struct Buf {
  DeviceBuffer dev;
  std::size_t n = 0;
  explicit Buf(std::size_t count) : dev(std::max<std::size_t>(count, 1) * sizeof(T)), n(count) {}
  Buf(const std::vector<T>& host) : Buf(host.size()) {
    KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), host.data(), n * sizeof(T)));
  }
  T* ptr() const { return reinterpret_cast<T*>(dev.get()); }
  void poison() {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    KTUNE_CU(Driver::get().cuMemsetD32Async(dev.get(), kPoison, n * sizeof(T) / 4, nullptr));
  }
  void zero() { KTUNE_CU(Driver::get().cuMemsetD8Async(dev.get(), 0, n * sizeof(T), nullptr)); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    KTUNE_CU(Driver::get().cuMemcpyDtoH(h.data(), dev.get(), n * sizeof(T)));
    return h;
  }
};

const std::vector<RouteConfig> kRouteConfigs = {{128, 32, 4}, {256, 8, 2}, {64, 4, 1}};
// The op's route geometries (route_lanes x route_vec at 128 threads), for the fused comparison.
const std::vector<RouteConfig> kOpRouteConfigs = {{128, 32, 1}, {128, 32, 4}, {128, 8, 1},
                                                  {128, 8, 4}};
const std::vector<int> kFusedTokens = {1, 7, 128, 300};
const std::vector<int> kTokens = {1, 3, 17, 1000};
const std::vector<int> kExperts = {8, 64, 256};
const std::vector<int> kKs = {1, 2, 8};
// Past 256 experts (Kimi-K2's 384, Qwen3-Next's 512 and its k = 10): token counts that are a
// multiple of no tile; 1000 x 10 pairs take three chunks of the multi-block align path.
const std::vector<int> kWideTokens = {77, 1000};
const std::vector<int> kWideExperts = {384, 512};
const std::vector<int> kWideKs = {2, 10};

void group_shape(int experts, int k, MoeRouteProblem& p) {
  p.n_group = experts >= 64 ? 8 : 2;
  const int gsize = experts / p.n_group;
  p.topk_group = std::max(p.n_group / 2, (k + gsize - 1) / gsize);
  p.routed_scaling = 2.5;
}

/// Routing of T tokens over E experts, k each; sigmoid_group with group_shape's groups.
MoeRouteProblem route_problem(int routing, int T, int E, int k) {
  MoeRouteProblem p{T, E, k, routing};
  if (routing == moe_sigmoid_group) group_shape(E, k, p);
  return p;
}

/// The route kernel's arguments for p (aux_loss and aux_scratch may be null).
MoeRouteArgs route_args(const MoeRouteProblem& p, const float* logits, const float* bias,
                        int* ids, float* weights, float* aux, unsigned long long* scratch) {
  return {logits, bias, ids, weights, aux, scratch, p.tokens, p.experts, p.k, p.routing,
          p.n_group, p.topk_group, static_cast<float>(p.routed_scaling)};
}

/// n values drawn from d, none exactly 0 (`instead` takes its place).
std::vector<float> draw(std::size_t n, std::uniform_real_distribution<float>& d,
                        std::mt19937& rng, float instead) {
  std::vector<float> v(n);
  for (float& x : v) {
    x = d(rng);
    if (x == 0.0f) x = instead;
  }
  return v;
}

// A fixed grid for align: one block, or CHUNK pairs per block.
struct AlignConfig {
  int threads;
  int chunk;  // 0: moe_align_kernel (one block)
};
const std::vector<AlignConfig> kAlignConfigs = {{256, 0}, {1024, 0}, {256, 4096}, {1024, 16384},
                                                {128, 1024}};
// Past 256 experts: at most 512 threads (the per-warp arrays of 512 experts), the op's 256 on
// the multi-block path.
const std::vector<AlignConfig> kWideAlignConfigs = {{128, 0}, {512, 0}, {256, 4096}, {256, 1024}};
const std::vector<AlignConfig>& align_configs(int experts) {
  return moe_emax(experts) == kMoeEmax ? kAlignConfigs : kWideAlignConfigs;
}

/// `experts`: past 256 the EMAX = 512 form.
std::string align_name(const char* kind, AlignConfig c, int experts = 1) {
  if (c.chunk == 0)
    return "ktune::moe_align_kernel<" + std::to_string(c.threads) + emax_arg(experts) + ">";
  return std::string("ktune::moe_align_") + kind + "_kernel<" + std::to_string(c.threads) + ", " +
         std::to_string(c.chunk) + emax_arg(experts) + ">";
}

class GpuMoeRoute : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setup_error_ = test::suite_setup(compile_suite); }
  static void compile_suite() {
    if (!test::gpu_missing_reason().empty()) return;
    ensure_context(0);
    kernels_ = new Kernels;
    for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group})
      for (int e : kExperts)
        for (RouteConfig c : kRouteConfigs)
          if (route_valid(routing, c, e))
            kernels_->add("moe/route.cuh", route_name(routing, c, e));
    for (AlignConfig c : kAlignConfigs)
      for (const char* kind : {"count", "scan", "scatter"}) kernels_->add("moe/align.cuh", align_name(kind, c));
    for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group})
      for (int e : kExperts)
        for (RouteConfig c : kOpRouteConfigs)
          if (route_valid(routing, c, e)) {
            kernels_->add("moe/route.cuh", route_name(routing, c, e));
            kernels_->add("moe/route_align.cuh", fused_name(routing, c, e));
            kernels_->add("moe/route_sort.cuh", sort_name(routing, c, e));
          }
    for (int threads : {128, 256, 512, 1024})
      kernels_->add("moe/align.cuh", align_name("", {threads, 0}));
    // Past 256 experts: the EMAX = 512 forms at the op's geometries.
    for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group})
      for (int e : kWideExperts)
        for (RouteConfig c : kOpRouteConfigs)
          if (route_valid(routing, c, e)) {
            kernels_->add("moe/route.cuh", route_name(routing, c, e));
            kernels_->add("moe/route_align.cuh", fused_name(routing, c, e));
            kernels_->add("moe/route_sort.cuh", sort_name(routing, c, e));
          }
    for (AlignConfig c : kWideAlignConfigs)
      for (const char* kind : {"count", "scan", "scatter"})
        kernels_->add("moe/align.cuh", align_name(kind, c, kMoeMaxExperts));
    // The one-block form at every width align_threads gives past 256 experts (the separate
    // route + align path of the fused tests: 256 threads at T=77 went missing, stop 77's run).
    for (int threads : {128, 256, 512})
      kernels_->add("moe/align.cuh", align_name("", {threads, 0}, kMoeMaxExperts));
    CUdevice dev;
    KTUNE_CU(Driver::get().cuCtxGetDevice(&dev));
    int major = 0, minor = 0;
    KTUNE_CU(Driver::get().cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    KTUNE_CU(Driver::get().cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    const std::string arch = "sm_" + std::to_string(major * 10 + minor) + (major == 9 ? "a" : "");
    kernels_->build(arch);
  }
  static void TearDownTestSuite() {
    delete kernels_;
    kernels_ = nullptr;
  }
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    KTUNE_REQUIRE_SUITE(setup_error_);
  }
  static inline std::string setup_error_;

  /// Runs align with config c on device ids; returns what it wrote.
  static test::MoeAlignResult run_align(const Buf<int>& ids, int pairs, int experts, int block_m,
                                        AlignConfig c) {
    Buf<int> sorted(static_cast<std::size_t>(moe_max_padded(pairs, experts, block_m)));
    Buf<int> blocks(static_cast<std::size_t>(moe_max_blocks(pairs, experts, block_m)));
    Buf<int> padded(1), counts(static_cast<std::size_t>(experts));
    Buf<int> scratch(c.chunk ? static_cast<std::size_t>(moe_align_scratch_ints(pairs, experts, c.chunk)) : 1);
    sorted.poison();
    blocks.poison();
    padded.poison();
    counts.poison();
    scratch.poison();
    MoeAlignArgs a{};
    a.topk_ids = ids.ptr();
    a.sorted_pairs = sorted.ptr();
    a.block_expert = blocks.ptr();
    a.padded_rows = padded.ptr();
    a.expert_counts = counts.ptr();
    a.scratch = c.chunk ? scratch.ptr() : nullptr;
    a.pairs = pairs;
    a.experts = experts;
    a.block_m = block_m;
    if (c.chunk == 0) {
      kernels_->launch(align_name("", c, experts), 1, c.threads, a);
    } else {
      const int grid = (pairs + c.chunk - 1) / c.chunk;
      kernels_->launch(align_name("count", c, experts), grid, c.threads, a);
      kernels_->launch(align_name("scan", c, experts), 1, c.threads, a);
      kernels_->launch(align_name("scatter", c, experts), grid, c.threads, a);
    }
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    test::MoeAlignResult r;
    r.sorted_pairs = sorted.get();
    r.block_expert = blocks.get();
    r.expert_counts = counts.get();
    r.padded_rows = padded.get()[0];
    return r;
  }

  /// Every routing mode over tokens x experts x ks, each valid config of `configs`, against the
  /// double reference; then the routed ids of the softmax_renorm problems at T=1000 aligned.
  static void route_against_reference(const std::vector<int>& tokens,
                                      const std::vector<int>& experts, const std::vector<int>& ks,
                                      const std::vector<RouteConfig>& configs);

  static Kernels* kernels_;
};
Kernels* GpuMoeRoute::kernels_ = nullptr;

/// Align on `ids` with every config (align_configs(experts)) and block_m in {16, 64, 128}:
/// exactly the reference, and every valid pair once (checked on its own, not only through the
/// reference).
void check_align(const std::vector<int>& ids, int experts, const std::string& what,
                 test::MoeAlignResult (*run)(const Buf<int>&, int, int, int, AlignConfig)) {
  const Buf<int> dev(ids);
  const int pairs = static_cast<int>(ids.size());
  for (int block_m : {16, 64, 128}) {
    const test::MoeAlignResult ref = test::moe_align_ref(ids, experts, block_m);
    for (AlignConfig c : align_configs(experts)) {
      const std::string where = what + " block_m=" + std::to_string(block_m) + " " +
                                align_name("scatter", c, experts);
      const test::MoeAlignResult got = run(dev, pairs, experts, block_m, c);
      EXPECT_EQ(got.padded_rows, ref.padded_rows) << where;
      EXPECT_EQ(got.expert_counts, ref.expert_counts) << where;
      EXPECT_EQ(got.block_expert, ref.block_expert) << where;
      EXPECT_EQ(got.sorted_pairs, ref.sorted_pairs) << where;
      std::vector<int> seen(ids.size(), 0);
      for (int row = 0; row < got.padded_rows && row < static_cast<int>(got.sorted_pairs.size()); ++row) {
        const int p = got.sorted_pairs[row];
        if (p == pairs) continue;
        ASSERT_TRUE(p >= 0 && p < pairs) << where << " row " << row << " = " << p;
        ++seen[p];
        ASSERT_EQ(ids[p], got.block_expert[row / block_m]) << where << " row " << row;
      }
      for (int p = 0; p < pairs; ++p)
        ASSERT_EQ(seen[p], ids[p] >= 0 && ids[p] < experts ? 1 : 0) << where << " pair " << p;
    }
  }
}

void GpuMoeRoute::route_against_reference(const std::vector<int>& tokens,
                                          const std::vector<int>& experts,
                                          const std::vector<int>& ks,
                                          const std::vector<RouteConfig>& configs) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), ub(-0.5f, 0.5f);
  int cases = 0, near_ties = 0;
  for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group})
    for (int T : tokens)
      for (int E : experts)
        for (int k : ks) {
          const MoeRouteProblem p = route_problem(routing, T, E, k);
          const std::vector<float> logits = draw(static_cast<std::size_t>(T) * E, u, rng, 0.25f);
          const std::vector<float> bias = draw(static_cast<std::size_t>(E), ub, rng, 0.125f);
          const test::MoeRouteResult ref = test::moe_route_ref(logits, bias, p);
          const double ref_aux = test::moe_aux_loss_ref(ref, p);
          const Buf<float> dlogits(logits), dbias(bias);
          for (RouteConfig c : configs) {
            if (!route_valid(routing, c, E)) continue;
            const std::string what = route_name(routing, c, E) + " T=" + std::to_string(T) +
                                     " E=" + std::to_string(E) + " k=" + std::to_string(k);
            Buf<int> ids(static_cast<std::size_t>(T) * k);
            Buf<float> w(static_cast<std::size_t>(T) * k), aux(1);
            Buf<unsigned long long> scratch(static_cast<std::size_t>(2 * E + 1));
            ids.poison();
            w.poison();
            aux.poison();
            scratch.zero();
            MoeRouteArgs a = route_args(p, dlogits.ptr(), dbias.ptr(), ids.ptr(), w.ptr(),
                                        aux.ptr(), scratch.ptr());
            const int tokens_per_block = c.threads / c.lanes;
            const int grid = (T + tokens_per_block - 1) / tokens_per_block;
            kernels_->launch(route_name(routing, c, E), grid, c.threads, a);
            KTUNE_CU(Driver::get().cuCtxSynchronize());
            const std::vector<int> gid = ids.get();
            const std::vector<float> gw = w.get();
            const float aux1 = aux.get()[0];
            ++cases;
            int bad = 0;
            for (int t = 0; t < T && bad < 3; ++t) {
              const auto at = [&](const auto& v, int s) { return v[static_cast<std::size_t>(t) * k + s]; };
              std::vector<int> mine(gid.begin() + t * k, gid.begin() + (t + 1) * k);
              std::vector<double> want(ref.weights.begin() + t * k, ref.weights.begin() + (t + 1) * k);
              bool same = true, tie = true;
              for (int s = 0; s < k; ++s) {
                const int g = at(gid, s), r = at(ref.ids, s);
                if (g == r) continue;
                same = false;
                if (g < 0 || g >= E) {
                  tie = false;
                  continue;
                }
                const double sg = ref.select[static_cast<std::size_t>(t) * E + g];
                const double sr = ref.select[static_cast<std::size_t>(t) * E + r];
                if (!(std::fabs(sg - sr) <= 2e-6)) tie = false;
              }
              if (!same && !tie && routing == moe_sigmoid_group) {
                // A near-tie between group scores: accept any ranking of the tied groups.
                for (const std::vector<int>& alt :
                     test::moe_route_group_alternatives(logits, bias, p, t, 2e-6))
                  tie = tie || alt == mine;
              }
              if (!same) {
                if (!tie) {
                  ++bad;
                  ADD_FAILURE() << what << " token " << t << " slot ids differ from the reference";
                  continue;
                }
                ++near_ties;
                want = test::moe_route_weights_for(logits, p, t, mine);
              }
              for (int s = 0; s < k; ++s) {
                const double g = at(gw, s), r = want[s];
                if (!(std::fabs(g - r) <= 1e-5 * std::fabs(r))) {
                  ++bad;
                  ADD_FAILURE() << what << " token " << t << " slot " << s << " weight " << g
                                << ", reference " << r;
                }
              }
            }
            // Aux loss: against the reference on the GPU's own choices; reproducible to the bit
            // on a second launch, which also finds the scratch zeroed again.
            test::MoeRouteResult mine = ref;
            mine.ids = gid;
            const double want_aux = test::moe_aux_loss_ref(mine, p);
            EXPECT_NEAR(aux1, want_aux, 1e-5 * want_aux) << what << " aux (reference choices: " << ref_aux << ")";
            aux.poison();
            kernels_->launch(route_name(routing, c, E), grid, c.threads, a);
            KTUNE_CU(Driver::get().cuCtxSynchronize());
            const float aux2 = aux.get()[0];
            EXPECT_EQ(std::memcmp(&aux1, &aux2, sizeof(float)), 0) << what << " aux " << aux1 << " then " << aux2;
            for (unsigned long long v : scratch.get()) ASSERT_EQ(v, 0ull) << what << " scratch left dirty";
            // Without the aux loss: same ids and weights.
            a.aux_loss = nullptr;
            a.aux_scratch = nullptr;
            ids.poison();
            w.poison();
            kernels_->launch(route_name(routing, c, E), grid, c.threads, a);
            KTUNE_CU(Driver::get().cuCtxSynchronize());
            EXPECT_EQ(ids.get(), gid) << what << " without aux";
            const std::vector<float> gw2 = w.get();
            EXPECT_EQ(std::memcmp(gw2.data(), gw.data(), gw.size() * sizeof(float)), 0) << what;
          }
          // Align the routed ids (reference routing: identical for every route config).
          if (routing == moe_softmax_renorm && T == 1000)
            check_align(ref.ids, E, "routed T=1000 E=" + std::to_string(E) + " k=" + std::to_string(k), run_align);
        }
  std::printf("%d route launches checked, %d tokens accepted as near-ties\n", cases, near_ties);
  EXPECT_LE(near_ties, 20);
}

TEST_F(GpuMoeRoute, EveryModeMatchesTheReference) {
  route_against_reference(kTokens, kExperts, kKs, kRouteConfigs);
}

// Past 256 experts: the EMAX = 512 route kernels at the op's geometries (32 lanes with 12 to 16
// scores each; softmax modes also 8 lanes with 48 to 64), T = 77 and 1000, k = 2 and 10; the
// routed ids at T = 1000 (2000 and 10000 pairs) through the EMAX = 512 align kernels, one block
// (128 and 512 threads) and the multi-block path (chunks of 1024 and 4096).
TEST_F(GpuMoeRoute, PastTwoFiftySixExpertsEveryModeMatchesTheReference) {
  route_against_reference(kWideTokens, kWideExperts, kWideKs, kOpRouteConfigs);
}

/// What routing and alignment wrote: route then align, or the one-block kernel.
struct Routed {
  std::vector<int> ids, sorted, blocks, counts;
  std::vector<float> weights;
  int padded = 0;
  float aux = NAN;
};

/// How routing and alignment run: the route kernel then the op's one-block align kernel
/// (fuse_route=0), moe_route_align_kernel (1), moe_route_sort_kernel (2).
enum class Path { separate, one_block, grid };

/// Routes and aligns problem p on device logits and bias with route geometry c along `path`.
/// outputs: ids and the aux loss requested (the one-kernel paths then keep the ids in shared
/// memory only). The grid path's scratch starts as garbage but for its zeroed header, as the
/// op's zero kernel leaves it.
Routed route_and_align(Kernels& kernels, const MoeRouteProblem& p, const Buf<float>& logits,
                       const Buf<float>& bias, RouteConfig c, int block_m, Path path,
                       bool outputs) {
  const bool fused = path != Path::separate;
  const int pairs = p.tokens * p.k, E = p.experts;
  Buf<int> ids(static_cast<std::size_t>(pairs));
  Buf<float> w(static_cast<std::size_t>(pairs)), aux(1);
  Buf<unsigned long long> scratch(static_cast<std::size_t>(2 * E + 1));
  Buf<int> sorted(static_cast<std::size_t>(moe_max_padded(pairs, E, block_m)));
  Buf<int> blocks(static_cast<std::size_t>(moe_max_blocks(pairs, E, block_m)));
  Buf<int> padded(1), counts(static_cast<std::size_t>(E));
  for (auto* b : {&ids, &sorted, &blocks, &padded, &counts}) b->poison();
  w.poison();
  aux.poison();
  scratch.zero();
  const MoeRouteArgs r = route_args(p, logits.ptr(), bias.ptr(),
                                    outputs || !fused ? ids.ptr() : nullptr, w.ptr(),
                                    outputs ? aux.ptr() : nullptr,
                                    outputs && !fused ? scratch.ptr() : nullptr);
  const MoeAlignArgs a{fused ? nullptr : ids.ptr(), sorted.ptr(), blocks.ptr(), padded.ptr(),
                       counts.ptr(), nullptr, pairs, E, block_m};
  // The sort kernel's scratch (only on that path; it lives until the launch has finished).
  const int grid = sort_blocks(c, p.tokens);
  Buf<unsigned long long> sort_scratch(path != Path::grid ? 0 : sort_scratch_words(E, grid));
  if (path == Path::grid) {
    sort_scratch.poison();
    KTUNE_CU(Driver::get().cuMemsetD8Async(sort_scratch.dev.get(), 0,
                                           8u * static_cast<std::size_t>(moe_sort_header(E)),
                                           nullptr));
    kernels.launch(sort_name(p.routing, c, E), grid, 128,
                   MoeRouteSortArgs{r, a, sort_scratch.ptr()});
  } else if (fused) {
    kernels.launch(fused_name(p.routing, c, E), 1, fused_threads(c, E), MoeRouteAlignArgs{r, a});
  } else {
    const int per_block = c.threads / c.lanes;
    kernels.launch(route_name(p.routing, c, E), (p.tokens + per_block - 1) / per_block,
                   c.threads, r);
    kernels.launch(align_name("", {align_threads(pairs, E), 0}, E), 1, align_threads(pairs, E),
                   a);
  }
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  Routed out;
  out.ids = ids.get();
  out.weights = w.get();
  out.sorted = sorted.get();
  out.blocks = blocks.get();
  out.counts = counts.get();
  out.padded = padded.get()[0];
  out.aux = aux.get()[0];
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// fuse_route 1 and 2: every output of the one-block kernel and of the sort kernel's grid equals
// the route kernel's followed by the align kernel's, bit for bit (ids, weights, aux loss,
// sorted_pairs, padded_rows, block_expert, counts), for every mode (sigmoid_group with groups),
// T in `tokens`, E in `experts`, k in `ks` (by default T in {1, 7, 128, 300}, E in {8, 64, 256},
// k in {1, 2, 8}), the op's route_lanes x route_vec (where the op allows the path) and two
// block_m; and without the optional outputs (ids in shared memory only) the same alignment and
// weights.
void compare_with_route_then_align(Kernels& kernels, Path path, const char* name,
                                   const std::vector<int>& tokens = kFusedTokens,
                                   const std::vector<int>& experts = kExperts,
                                   const std::vector<int>& ks = kKs) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), ub(-0.5f, 0.5f);
  int cases = 0;
  for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group})
    for (int T : tokens)
      for (int E : experts)
        for (int k : ks) {
          const MoeRouteProblem p = route_problem(routing, T, E, k);
          std::vector<float> logits = draw(static_cast<std::size_t>(T) * E, u, rng, 0.25f);
          const std::vector<float> bias = draw(static_cast<std::size_t>(E), ub, rng, 0.125f);
          if (T > 1) logits[E + 1] = logits[E];  // an exact tie in token 1
          const Buf<float> dlogits(logits), dbias(bias);
          for (int block_m : {16, 64})
            for (RouteConfig c : kOpRouteConfigs) {
              if (!route_valid(routing, c, E)) continue;
              if (path == Path::grid && !sort_valid(c, T, E)) continue;
              const std::string what = (path == Path::grid ? sort_name(routing, c, E)
                                                           : fused_name(routing, c, E)) +
                                       " T=" + std::to_string(T) +
                                       " E=" + std::to_string(E) + " k=" + std::to_string(k) +
                                       " block_m=" + std::to_string(block_m);
              const auto run = [&](Path along, bool outputs) {
                return route_and_align(kernels, p, dlogits, dbias, c, block_m, along, outputs);
              };
              const Routed want = run(Path::separate, true);
              const Routed got = run(path, true);
              ++cases;
              EXPECT_EQ(got.ids, want.ids) << what;
              EXPECT_TRUE(same_bits(got.weights, want.weights)) << what << " weights";
              EXPECT_EQ(std::memcmp(&got.aux, &want.aux, sizeof(float)), 0)
                  << what << " aux " << got.aux << ", separate kernels " << want.aux;
              EXPECT_EQ(got.padded, want.padded) << what;
              EXPECT_EQ(got.counts, want.counts) << what;
              EXPECT_EQ(got.blocks, want.blocks) << what;
              EXPECT_EQ(got.sorted, want.sorted) << what;
              // The alignment is also the stable reference's on these ids.
              const test::MoeAlignResult ref = test::moe_align_ref(want.ids, E, block_m);
              EXPECT_EQ(got.sorted, ref.sorted_pairs) << what;
              EXPECT_EQ(got.blocks, ref.block_expert) << what;
              const Routed bare = run(path, false);
              EXPECT_TRUE(same_bits(bare.weights, want.weights)) << what << " without outputs";
              EXPECT_TRUE(std::isnan(bare.aux)) << what << " aux written without being asked";
              EXPECT_EQ(bare.sorted, want.sorted) << what << " without outputs";
              EXPECT_EQ(bare.blocks, want.blocks) << what << " without outputs";
              EXPECT_EQ(bare.counts, want.counts) << what << " without outputs";
              EXPECT_EQ(bare.padded, want.padded) << what << " without outputs";
              if (::testing::Test::HasFailure()) return;
            }
        }
  std::printf("%d %s launches checked against route + align\n", cases, name);
  EXPECT_GT(cases, 0);
}

TEST_F(GpuMoeRoute, FusedRouteAlignMatchesRouteThenAlign) {
  compare_with_route_then_align(*kernels_, Path::one_block, "one-block");
}

TEST_F(GpuMoeRoute, SortInTheRouteGridMatchesRouteThenAlign) {
  compare_with_route_then_align(*kernels_, Path::grid, "route-grid sort");
}

// Past 256 experts (EMAX = 512): the one-block kernel (at most 256 threads) at T = 77 and 300
// (up to 3000 pairs), the route grid's sort where its count table holds (e=384 at 32 lanes:
// T <= 84; 8 lanes: more), both against the route kernel then the one-block align kernel.
TEST_F(GpuMoeRoute, FusedPathsPastTwoFiftySixExpertsMatchRouteThenAlign) {
  compare_with_route_then_align(*kernels_, Path::one_block, "one-block (EMAX 512)", {77, 300},
                                kWideExperts, kWideKs);
  compare_with_route_then_align(*kernels_, Path::grid, "route-grid sort (EMAX 512)", {33, 77},
                                kWideExperts, kWideKs);
}

TEST_F(GpuMoeRoute, AlignEdgeCases) {
  std::mt19937 rng(std::random_device{}());
  // One expert takes every pair; the others get none.
  check_align(std::vector<int>(17 * 8, 5), 64, "all to expert 5", run_align);
  // An expert with no pairs among random ids, and out-of-range ids that must be dropped.
  std::vector<int> ids(1000 * 2);
  std::uniform_int_distribution<int> pick(0, 63);
  for (int& v : ids) {
    do v = pick(rng); while (v == 7);
  }
  ids[3] = -1;
  ids[10] = 64;
  ids[999] = 1000;
  ids[1999] = -5;
  check_align(ids, 64, "no pairs for 7, 4 out of range", run_align);
  // Single pair; E = 256.
  check_align(std::vector<int>{255}, 256, "one pair", run_align);
}

// The EMAX = 512 align kernels (one block at 128 and 512 threads, the multi-block path in chunks
// of 1024 and 4096): the last expert taking every pair, experts with no pairs and ids just
// outside 0..E-1, a single pair, and 4096 x 8 random pairs (8 and 32 chunks).
TEST_F(GpuMoeRoute, AlignPastTwoFiftySixExperts) {
  std::mt19937 rng(std::random_device{}());
  check_align(std::vector<int>(77 * 8, 383), 384, "all to expert 383", run_align);
  std::vector<int> ids(1000 * 10);
  std::uniform_int_distribution<int> pick(0, 511);
  for (int& v : ids) {
    do v = pick(rng); while (v == 300 || v == 511);
  }
  ids[0] = 512;
  ids[77] = -1;
  ids[4096] = 511;  // the first pair of the second 4096-chunk
  ids[9999] = 1000;
  check_align(ids, 512, "E=512, no pairs for 300, 3 out of range", run_align);
  check_align(std::vector<int>{511}, 512, "one pair, E=512", run_align);
  std::vector<int> large(4096 * 8);
  std::uniform_int_distribution<int> pick384(0, 383);
  for (int& v : large) v = pick384(rng);
  check_align(large, 384, "T*k=4096*8 E=384", run_align);
}

TEST_F(GpuMoeRoute, AlignLargeAndTimes) {
  std::mt19937 rng(std::random_device{}());
  const int pairs = 65536 * 8;
  std::vector<int> ids(pairs);
  std::uniform_int_distribution<int> pick(0, 255);
  for (int& v : ids) v = pick(rng);
  check_align(ids, 256, "T*k=65536*8 E=256", run_align);
  // Skewed: half of the pairs to expert 0.
  for (int i = 0; i < pairs; i += 2) ids[i] = 0;
  check_align(ids, 256, "T*k=65536*8 E=256 skewed", run_align);
}

// Times (CUDA events, 20 launches after 3 warm-ups; printed, not asserted).
TEST_F(GpuMoeRoute, Times) {
  CUevent start, stop;
  KTUNE_CU(Driver::get().cuEventCreate(&start, 0));
  KTUNE_CU(Driver::get().cuEventCreate(&stop, 0));
  auto time = [&](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    KTUNE_CU(Driver::get().cuEventRecord(start, nullptr));
    for (int i = 0; i < 20; ++i) f();
    KTUNE_CU(Driver::get().cuEventRecord(stop, nullptr));
    KTUNE_CU(Driver::get().cuEventSynchronize(stop));
    float ms = 0;
    KTUNE_CU(Driver::get().cuEventElapsedTime(&ms, start, stop));
    return ms * 1000.0 / 20.0;
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int T : {1, 128, 4096})
    for (auto [routing, E, k] : {std::tuple{moe_softmax_renorm, 8, 2}, std::tuple{moe_sigmoid_group, 64, 8},
                                 std::tuple{moe_sigmoid_group, 256, 8}}) {
      std::vector<float> logits(static_cast<std::size_t>(T) * E);
      for (float& v : logits) v = u(rng);
      const Buf<float> dl(logits);
      Buf<int> ids(static_cast<std::size_t>(T) * k);
      Buf<float> w(static_cast<std::size_t>(T) * k);
      MoeRouteArgs a{};
      a.logits = dl.ptr();
      a.topk_ids = ids.ptr();
      a.topk_weights = w.ptr();
      a.tokens = T;
      a.experts = E;
      a.k = k;
      a.routing = routing;
      MoeRouteProblem p;
      group_shape(E, k, p);
      a.n_group = routing == moe_sigmoid_group ? p.n_group : 1;
      a.topk_group = routing == moe_sigmoid_group ? p.topk_group : 1;
      a.routed_scaling = 1.0f;
      for (RouteConfig c : kRouteConfigs) {
        if (!route_valid(routing, c, E)) continue;
        const int tpb = c.threads / c.lanes;
        const double us = time([&] { kernels_->launch(route_name(routing, c, E), (T + tpb - 1) / tpb, c.threads, a); });
        std::printf("route %-44s T=%-5d E=%-3d k=%d: %7.2f us\n", route_name(routing, c, E).c_str(), T, E, k, us);
      }
      KTUNE_CU(Driver::get().cuCtxSynchronize());
    }
  // fuse_route: route + align (the op's one-block align) against the one-block kernel, plain
  // back-to-back launches (no programmatic overlap between the two separate kernels here).
  for (int T : {16, 128})
    for (auto [routing, E, k] : {std::tuple{moe_softmax_renorm, 8, 2},
                                 std::tuple{moe_sigmoid_group, 64, 8}})
      for (RouteConfig c : kOpRouteConfigs) {
        if (!route_valid(routing, c, E)) continue;
        const MoeRouteProblem p = route_problem(routing, T, E, k);
        const Buf<float> dl(draw(static_cast<std::size_t>(T) * E, u, rng, 0.25f));
        const Buf<float> db(std::vector<float>(static_cast<std::size_t>(E), 0.0f));
        const int pairs = T * k, bm = 16;
        Buf<int> ids(static_cast<std::size_t>(pairs)), padded(1);
        Buf<int> counts(static_cast<std::size_t>(E));
        Buf<float> w(static_cast<std::size_t>(pairs));
        Buf<int> sorted(static_cast<std::size_t>(moe_max_padded(pairs, E, bm)));
        Buf<int> blocks(static_cast<std::size_t>(moe_max_blocks(pairs, E, bm)));
        MoeRouteArgs r = route_args(p, dl.ptr(), db.ptr(), ids.ptr(), w.ptr(), nullptr, nullptr);
        MoeAlignArgs a{ids.ptr(), sorted.ptr(), blocks.ptr(), padded.ptr(), counts.ptr(), nullptr,
                       pairs, E, bm};
        const int tpb = c.threads / c.lanes;
        const double separate = time([&] {
          kernels_->launch(route_name(routing, c, E), (T + tpb - 1) / tpb, c.threads, r);
          kernels_->launch(align_name("", {align_threads(pairs, E), 0}), 1,
                           align_threads(pairs, E), a);
        });
        r.topk_ids = nullptr;
        a.topk_ids = nullptr;
        const double fused = time([&] {
          kernels_->launch(fused_name(routing, c, E), 1, fused_threads(c, E),
                           MoeRouteAlignArgs{r, a});
        });
        // fuse_route=2: its header zeroed before each launch, as the op's zero kernel does.
        const int sort_grid = sort_blocks(c, T);
        Buf<unsigned long long> scratch(sort_scratch_words(E, sort_grid));
        const double grid = time([&] {
          KTUNE_CU(Driver::get().cuMemsetD8Async(scratch.dev.get(), 0,
                                                 8u * static_cast<std::size_t>(moe_sort_header(E)),
                                                 nullptr));
          kernels_->launch(sort_name(routing, c, E), sort_grid, 128,
                           MoeRouteSortArgs{r, a, scratch.ptr()});
        });
        std::printf("route+align %-48s T=%-4d E=%-3d k=%d: %7.2f us, fused %7.2f us, "
                    "route-grid sort (with its zeroing) %7.2f us\n",
                    fused_name(routing, c, E).c_str(), T, E, k, separate, fused, grid);
      }
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  for (int pairs : {2, 1024, 8 * 4096, 8 * 65536}) {
    std::vector<int> ids(static_cast<std::size_t>(pairs));
    std::uniform_int_distribution<int> pick(0, 255);
    for (int& v : ids) v = pick(rng);
    const Buf<int> dids(ids);
    const int E = 256, block_m = 64;
    Buf<int> sorted(static_cast<std::size_t>(moe_max_padded(pairs, E, block_m)));
    Buf<int> blocks(static_cast<std::size_t>(moe_max_blocks(pairs, E, block_m)));
    Buf<int> padded(1), counts(E), scratch(static_cast<std::size_t>(moe_align_scratch_ints(pairs, E, 1024)));
    MoeAlignArgs a{dids.ptr(), sorted.ptr(), blocks.ptr(), padded.ptr(), counts.ptr(), scratch.ptr(), pairs, E, block_m};
    for (AlignConfig c : kAlignConfigs) {
      const double us = time([&] {
        if (c.chunk == 0) {
          kernels_->launch(align_name("", c), 1, c.threads, a);
        } else {
          const int grid = (pairs + c.chunk - 1) / c.chunk;
          kernels_->launch(align_name("count", c), grid, c.threads, a);
          kernels_->launch(align_name("scan", c), 1, c.threads, a);
          kernels_->launch(align_name("scatter", c), grid, c.threads, a);
        }
      });
      std::printf("align %-40s pairs=%-7d E=256 block_m=64: %8.2f us\n", align_name("*", c).c_str(), pairs, us);
    }
  }
  KTUNE_CU(Driver::get().cuEventDestroy(start));
  KTUNE_CU(Driver::get().cuEventDestroy(stop));
}

}  // namespace
}  // namespace ktune
