// The MoE op's host side without a GPU: problem keys and reasons, the search space and its
// reasons, defaults for many shapes, and NVRTC compiles of default kernels (the launches:
// moe_run_test.cpp).
#include <map>

#include "tests/moe_test_support.hpp"
#include "tests/support/compile_report.hpp"

namespace ktune {
namespace {

using namespace moe_test;

// ---- problems ----

TEST(MoeProblem, KeysRoundTripWithDefaults) {
  const Problem p = op().parse_problem("t=16,i=14336,h=4096,k=2,e=8");
  EXPECT_EQ(p.values, (std::vector<std::int64_t>{8, 2, 4096, 14336, 16, 1, 1, 1}));
  EXPECT_EQ(op().problem_key(p),
            "e=8,k=2,h=4096,i=14336,t=16,routing=softmax_renorm,n_group=1,topk_group=1");
  EXPECT_EQ(op().parse_problem(op().problem_key(p)), p);
  EXPECT_EQ(op().parse_problem(std::string(kDeepSeek) + ",t=3").values[5], moe_sigmoid_group);
  EXPECT_EQ(op().problem_key(op().default_problem()),
            "e=8,k=2,h=4096,i=14336,t=1024,routing=softmax_renorm,n_group=1,topk_group=1");
}

TEST(MoeProblem, ExpertShapeIsExactTokensByDistance) {
  std::set<std::string> exact;
  for (const DimSpec& d : op().dims())
    if (d.matched_exactly()) exact.insert(d.name);
  EXPECT_EQ(exact, (std::set<std::string>{"e", "k", "h", "i", "routing", "n_group", "topk_group"}));
}

TEST(MoeProblem, ReasonsAreReadable) {
  EXPECT_EQ(problem_error(std::string(kMixtral) + ",t=1"), "");
  EXPECT_EQ(problem_error(std::string(kDeepSeek) + ",t=1"), "");
  EXPECT_TRUE(contains(problem_error("e=4,k=8,h=64,i=64,t=1"), "k=8 exceeds e=4"));
  EXPECT_TRUE(contains(problem_error("e=8,k=2,h=4100,i=64,t=1"), "multiple of 8"));
  EXPECT_TRUE(contains(problem_error("e=8,k=2,h=64,i=60,t=1"), "I must be"));
  EXPECT_TRUE(contains(problem_error("e=8,k=2,h=64,i=64,t=1,n_group=2"),
                       "apply to routing=sigmoid_group only"));
  EXPECT_TRUE(contains(problem_error("e=10,k=2,h=64,i=64,t=1,routing=sigmoid_group,n_group=4"),
                       "not a multiple of n_group=4"));
  EXPECT_TRUE(contains(
      problem_error("e=8,k=2,h=64,i=64,t=1,routing=sigmoid_group,n_group=2,topk_group=3"),
      "topk_group=3 exceeds n_group=2"));
  EXPECT_TRUE(contains(
      problem_error("e=8,k=3,h=64,i=64,t=1,routing=sigmoid_group,n_group=4,topk_group=1"),
      "k=3 exceeds the 2 experts of the topk_group=1 kept groups"));
  EXPECT_TRUE(contains(problem_error("e=8,k=2,h=64,i=64,t=1,routing=topk"), "softmax"));
  // Up to 512 experts (Kimi-K2's 384, Qwen3-Next's 512), every routing mode.
  EXPECT_EQ(problem_error(std::string(kKimi) + ",t=1"), "");
  EXPECT_EQ(problem_error(std::string(kKimiGroup) + ",t=1"), "");
  EXPECT_EQ(problem_error(std::string(kQwenNext) + ",t=1"), "");
  EXPECT_EQ(problem_error(std::string(kQwenChoice) + ",t=1"), "");
  EXPECT_EQ(problem_error(std::string(kKimiPre) + ",t=1"), "");
  EXPECT_TRUE(contains(problem_error("e=513,k=2,h=64,i=64,t=1"),
                       "e=513 is out of range (allowed 1..512)"));
  EXPECT_TRUE(contains(problem_error("e=8,k=2,h=64,i=64,t=70000"), "t"));
  EXPECT_NE(problem_error("e=8,k=2,h=64,i=64"), "");  // t is required
}

TEST(MoeProblem, TensorsFollowTheRoutingMode) {
  const auto specs = op().tensors(problem(kMixtral, 5), DType::bf16);
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "logits", "correction_bias", "topk_ids",
                                             "topk_weights", "w1", "w2", "y", "expert_counts",
                                             "aux_loss", "w1_scale", "w2_scale"}));
  EXPECT_EQ(specs[1].elements, 5 * 8);
  EXPECT_EQ(specs[2].elements, 0);  // no bias outside sigmoid_group
  EXPECT_EQ(specs[3].dtype, DType::i32);
  EXPECT_EQ(specs[3].role, TensorRole::output);
  EXPECT_TRUE(specs[3].optional);
  EXPECT_EQ(specs[5].elements, 8LL * 2 * 14336 * 4096);
  EXPECT_EQ(specs[7].role, TensorRole::output);
  EXPECT_EQ(specs[8].dtype, DType::i32);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_STREQ(dtype_name(DType::i32), "int32");
  const auto pre = op().tensors(problem(std::string(kMixtral) + ",routing=precomputed", 5),
                                DType::bf16);
  EXPECT_EQ(pre[1].elements, 0);
  EXPECT_EQ(pre[3].role, TensorRole::input);
  EXPECT_FALSE(pre[3].optional);
  EXPECT_EQ(pre[4].role, TensorRole::input);
  EXPECT_EQ(pre[9].elements, 0);
}

TEST(MoeProblem, FlopsAndBytes) {
  const Problem p = problem(kMixtral, 1);
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 2.0 * 2 * (4096.0 * 2 * 14336 + 14336.0 * 4096));
  // T = 1, k = 2: two experts' weights, x, y and the logits row.
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   2.0 * 3 * 4096 * 14336 * 2 + 2.0 * 4096 * 2 + 8 * 4);
  // Many tokens: every expert once.
  EXPECT_DOUBLE_EQ(op().min_bytes(problem(kMixtral, 64), DType::bf16),
                   8.0 * 3 * 4096 * 14336 * 2 + 2.0 * 64 * 4096 * 2 + 64 * 8 * 4);
}

// ---- the space ----

TEST(MoeSpace, SizeValidCountAndReasons) {
  // Too large to list (the staged strategy walks it): a fixed-seed sample has valid points, every
  // invalid one has a reason, and every valid one's kernels fit in shared memory.
  for (int t : {1, 64, 4096}) {
    for (const char* shape : {kMixtral, kDeepSeek}) {
      const auto start = std::chrono::steady_clock::now();
      const Space s(op(), problem(shape, t), DType::bf16, device("sm_90a"));
      std::size_t product = 1;
      for (const Tunable& tu : op().tunables()) product *= tu.values.size();
      EXPECT_EQ(s.size(), product);
      EXPECT_FALSE(s.enumerated());
      EXPECT_TRUE(s.points().empty());
      const std::vector<SpacePoint> sample = s.sample(300000, 7);
      const double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count();
      std::size_t valid = 0;
      std::set<std::string> reasons;
      for (const SpacePoint& pt : sample) {
        if (!pt.invalid) {
          ++valid;
          EXPECT_FALSE(s.check(pt.params).has_value());
          const auto kernels = op().kernels(pt.params, s.problem(), DType::bf16);
          for (std::size_t k = 0; k < kernels.size(); ++k) {
            const unsigned smem = op().dynamic_shared_bytes(pt.params, s.problem(), DType::bf16, k);
            EXPECT_LE(smem + moe_gemm_static_smem_bytes(128), 227u * 1024u);
          }
          continue;
        }
        ASSERT_GT(pt.invalid->size(), 20u) << op().params_key(pt.params);
        reasons.insert(*pt.invalid);
      }
      EXPECT_GT(valid, 0u) << shape << " t=" << t;
      std::printf("%s t=%d: %zu points; sample of %zu: %zu valid, %zu reasons, %.0f ms\n", shape, t,
                  s.size(), sample.size(), valid, reasons.size(), ms);
    }
  }
}

TEST(MoeSpace, PrunesWhatCannotWinWithAReason) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem one = problem(kMixtral, 1);
  Params p = op().default_params(one, DType::bf16, h100);
  EXPECT_EQ(op().param(p, "block_m"), 16);
  p.values[op().param_index("block_m")] = 64;
  p.values[op().param_index("warps_m1")] = 1;
  p.values[op().param_index("warps_m2")] = 1;
  EXPECT_TRUE(contains(op().invalid_reason(p, one, DType::bf16, h100).value_or(""),
                       "a larger block only adds padding rows"));
  Params q = op().default_params(one, DType::bf16, h100);
  EXPECT_EQ(op().param(q, "fuse_route"), 1);  // few softmax-routed pairs: route + align fused
  q.values[op().param_index("fuse_route")] = 0;
  q.values[op().param_index("align_chunk")] = 4096;
  EXPECT_TRUE(contains(op().invalid_reason(q, one, DType::bf16, h100).value_or(""),
                       "three launches"));
  // Where the mean rows per expert pass half the fitting block, the next size up is measured
  // (experts above the mean then take one block), two sizes up is pruned.
  const Problem spread = problem(kDeepSeek, 128);  // 1024 pairs over 64 experts: 16 rows each
  Params w = op().default_params(spread, DType::bf16, h100);
  EXPECT_EQ(op().param(w, "block_m"), 16);
  w.values[op().param_index("block_m")] = 32;
  EXPECT_EQ(op().invalid_reason(w, spread, DType::bf16, h100), std::nullopt);
  w.values[op().param_index("block_m")] = 64;
  EXPECT_TRUE(contains(op().invalid_reason(w, spread, DType::bf16, h100).value_or(""),
                       "block_m=16 holds the mean, 32 the experts above it"));
  const Problem sparse = problem(kDeepSeek, 16);  // 2 rows per expert: 16 only
  w.values[op().param_index("block_m")] = 32;
  EXPECT_TRUE(contains(op().invalid_reason(w, sparse, DType::bf16, h100).value_or(""),
                       "block_m=16 already holds"));
  // The same point at many tokens is fine.
  const Problem many = problem(kMixtral, 4096);
  Params r = op().default_params(many, DType::bf16, h100);
  EXPECT_EQ(op().invalid_reason(r, many, DType::bf16, h100), std::nullopt);
  // Precomputed routing: the route tunables are searched at one value only.
  const Problem pre = problem(std::string(kMixtral) + ",routing=precomputed", 64);
  Params s = op().default_params(pre, DType::bf16, h100);
  EXPECT_EQ(op().invalid_reason(s, pre, DType::bf16, h100), std::nullopt);
  s.values[op().param_index("route_lanes")] = 32;
  EXPECT_TRUE(contains(op().invalid_reason(s, pre, DType::bf16, h100).value_or(""),
                       "no effect with routing=precomputed"));
  // Route vector width against e; GEMM tile reasons come from gemm_args.h.
  const Problem odd = problem("e=6,k=2,h=64,i=64", 64);
  Params o = op().default_params(odd, DType::bf16, h100);
  EXPECT_EQ(op().param(o, "route_vec"), 1);
  o.values[op().param_index("route_vec")] = 4;
  EXPECT_TRUE(contains(op().invalid_reason(o, odd, DType::bf16, h100).value_or(""),
                       "e % route_vec == 0"));
  Params g = op().default_params(many, DType::bf16, h100);
  g.values[op().param_index("impl1")] = 0;  // the mma.sync kernel's tile rules
  g.values[op().param_index("warps1")] = 8;
  g.values[op().param_index("warps_m1")] = 1;
  g.values[op().param_index("bn1")] = 64;
  EXPECT_TRUE(contains(op().invalid_reason(g, many, DType::bf16, h100).value_or(""),
                       "gemm1 tile"));
  EXPECT_TRUE(contains(op().invalid_reason(r, many, DType::f32, h100).value_or(""),
                       "not supported by moe"));
  // gemm2 split-k: the mma.sync kernel with fragment stores, >= 2 k-tiles per split, top-k
  // routing, and only while few row blocks stream the weights.
  const Problem small = problem(kMixtral, 16);
  Params k = op().default_params(small, DType::bf16, h100);
  EXPECT_EQ(op().param(k, "split2"), 1);
  k.values[op().param_index("split2")] = 4;
  EXPECT_EQ(op().invalid_reason(k, small, DType::bf16, h100), std::nullopt);
  Params ke = k;
  ke.values[op().param_index("epi2")] = 1;
  EXPECT_TRUE(contains(op().invalid_reason(ke, small, DType::bf16, h100).value_or(""),
                       "epi2=0"));
  const Problem narrow = problem("e=8,k=2,h=64,i=192", 16);
  Params kn = op().default_params(narrow, DType::bf16, h100);
  kn.values[op().param_index("split2")] = 4;
  kn.values[op().param_index("bk2")] = 64;  // 3 k-tiles
  EXPECT_TRUE(contains(op().invalid_reason(kn, narrow, DType::bf16, h100).value_or(""),
                       "fewer than 2 of the 3 k-tiles"));
  Params km = op().default_params(problem(kMixtral, 1024), DType::bf16, h100);
  km.values[op().param_index("impl2")] = 0;
  km.values[op().param_index("split2")] = 2;
  EXPECT_TRUE(contains(
      op().invalid_reason(km, problem(kMixtral, 1024), DType::bf16, h100).value_or(""),
      "split2=2 at ~256 rows per expert"));
}

TEST(MoeSpace, SharedMemoryAgainstTheDevice) {
  const Problem p = problem(kMixtral, 4096);
  Params big = op().default_params(p, DType::bf16, device("sm_90a"));
  for (const char* n : {"bn1", "bn2"}) big.values[op().param_index(n)] = 128;
  for (const char* n : {"bk1", "bk2"}) big.values[op().param_index(n)] = 64;
  for (const char* n : {"stages1", "stages2"}) big.values[op().param_index(n)] = 4;
  for (const char* n : {"warps1", "warps2"}) big.values[op().param_index(n)] = 8;
  for (const char* n : {"impl1", "impl2"}) big.values[op().param_index(n)] = 0;  // mma.sync
  // gemm1: 4 x (128 + 256) x 64 x 2 = 196608 bytes + 1536 static: fits sm_90a, not sm_80.
  EXPECT_EQ(op().invalid_reason(big, p, DType::bf16, device("sm_90a")), std::nullopt);
  EXPECT_TRUE(contains(op().invalid_reason(big, p, DType::bf16, device("sm_80")).value_or(""),
                       "more than the device's"));
}

// The wgmma GEMM (impl1/impl2 = 1): its own shape rules, sm_90a only, its kernel and launch.
/// Sets tunable `n` of q to v.
void set(Params& q, const char* n, std::int64_t v) { q.values[op().param_index(n)] = v; }

TEST(MoeSpace, WgmmaGemmIsATunable) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  Params w = op().default_params(p, DType::bf16, h100);
  // The default takes the warp-specialised wgmma GEMMs on sm_90a once experts average 64 rows
  // (measured on the H100 and H200: MoeDefaults kWgmma), mma.sync below that and on any other
  // architecture. Mixtral's experts get t / 4 rows, the DeepSeek-like layer's t / 8.
  EXPECT_EQ(op().param(w, "impl1"), 2);
  EXPECT_EQ(op().param(w, "impl2"), 2);
  EXPECT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt);
  for (const auto& [shape, t, impl] :
       {std::tuple{std::string(kMixtral), 1024, 2}, std::tuple{std::string(kMixtral), 256, 2},
        std::tuple{std::string(kMixtral), 255, 0}, std::tuple{std::string(kDeepSeek), 512, 2},
        std::tuple{std::string(kDeepSeek), 511, 0}, std::tuple{std::string(kDeepSeek), 2048, 2},
        std::tuple{std::string(kMixtral), 1, 0}}) {
    const Problem q = problem(shape, t);
    const Params d = op().default_params(q, DType::bf16, h100);
    EXPECT_EQ(op().param(d, "impl1"), impl) << shape << " t=" << t;
    EXPECT_EQ(op().param(d, "impl2"), impl) << shape << " t=" << t;
    EXPECT_EQ(op().invalid_reason(d, q, DType::bf16, h100), std::nullopt) << shape << " t=" << t;
  }
  EXPECT_EQ(op().param(op().default_params(p, DType::bf16, device("sm_80")), "impl1"), 0);
  set(w, "block_m", 128);
  for (const char* n : {"impl1", "impl2"}) set(w, n, 1);
  for (const char* n : {"warps1", "warps2"}) set(w, n, 8);
  for (const char* n : {"warps_m1", "warps_m2"}) set(w, n, 1);
  for (const char* n : {"prefetch1", "prefetch2", "epi1", "epi2"}) set(w, n, 0);
  for (const char* n : {"bk1", "bk2"}) set(w, n, 64);
  for (const char* n : {"stages1", "stages2"}) set(w, n, 4);
  set(w, "bn1", 128);
  set(w, "bn2", 256);
  EXPECT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt)
      << *op().invalid_reason(w, p, DType::bf16, h100);
  EXPECT_TRUE(contains(op().invalid_reason(w, p, DType::bf16, device("sm_80")).value_or(""),
                       "impl1=1 (wgmma) needs an sm_90a device"));
  const std::vector<KernelSource> ks = op().kernels(w, p, DType::bf16);
  int wgmma = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    if (ks[i].file != "moe/gemm_sm90.cuh") continue;
    ++wgmma;
    EXPECT_EQ(op().block_threads(w, p, DType::bf16, i), moe_gemm_sm90_threads(128));
    EXPECT_TRUE(contains(ks[i].name_expression, "ktune::moe_gemm_sm90_kernel<ktune::bf16, 128, "))
        << ks[i].name_expression;
  }
  EXPECT_EQ(wgmma, 2);
  const auto reason = [&](const char* n, std::int64_t v) {
    Params q = w;
    set(q, n, v);
    return op().invalid_reason(q, p, DType::bf16, h100).value_or("");
  };
  EXPECT_TRUE(contains(reason("warps1", 4), "one warpgroup per 64 rows: warps1=8"));
  EXPECT_TRUE(contains(reason("epi2", 1), "impl2=1 ignores warps_m2, prefetch2 and epi2"));
  EXPECT_TRUE(contains(reason("bk1", 128), "gemm1 wgmma tile: BLOCK_K must be 64"));
  EXPECT_TRUE(contains(reason("bn1", 256), "more than 128 fp32 accumulators"));
  EXPECT_TRUE(contains(reason("block_m", 32), "takes block_m 64 or 128"));
}

// The warp-specialised GEMM (impl1/impl2 = 2): a producer warpgroup on top of one consumer
// warpgroup per 64 rows, its own shape rules and ring, sm_90a only, its kernel and launch.
// persist1/persist2: the warp-specialised kernel on a persistent grid, left out of keys at 0,
// 16-bit only, with reasons elsewhere.
TEST(MoeSpace, PersistentWarpSpecialisedGemm) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  Params w = op().default_params(p, DType::bf16, h100);
  ASSERT_EQ(op().param(w, "impl1"), 2);
  EXPECT_EQ(op().params_key(w).find("persist"), std::string::npos);
  w.values[op().param_index("persist1")] = 1;
  EXPECT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt);
  EXPECT_NE(op().params_key(w).find("persist1=1"), std::string::npos);
  const auto ks = op().kernels(w, p, DType::bf16);
  EXPECT_TRUE(std::any_of(ks.begin(), ks.end(), [](const KernelSource& k) {
    return k.name_expression.find("moe_gemm_ws_persistent_kernel<ktune::bf16, 128, ") == 0 ||
           k.name_expression.find("ktune::moe_gemm_ws_persistent_kernel<ktune::bf16, 128, ") ==
               0;
  }));
  Params m = op().default_params(problem(kMixtral, 16), DType::bf16, h100);
  m.values[op().param_index("persist2")] = 1;
  EXPECT_TRUE(contains(
      op().invalid_reason(m, problem(kMixtral, 16), DType::bf16, h100).value_or(""),
      "persist2=1 is the warp-specialised kernel's (impl2=2)"));
  Params e = op().default_params(p, DType::e4m3, h100);
  e.values[op().param_index("persist1")] = 1;
  EXPECT_TRUE(contains(op().invalid_reason(e, p, DType::e4m3, h100).value_or(""),
                       "persist1=1 runs 16-bit GEMMs"));
}

TEST(MoeSpace, ClusteredWarpSpecialisedGemm) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  Params w = op().default_params(p, DType::bf16, h100);
  ASSERT_EQ(op().param(w, "impl1"), 2);
  EXPECT_EQ(op().params_key(w).find("cluster"), std::string::npos);  // 1: left out of keys
  const std::size_t ws = op().workspace_bytes(w, p, DType::bf16);
  w.values[op().param_index("cluster1")] = 2;
  w.values[op().param_index("cluster2")] = 2;
  EXPECT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt);
  EXPECT_NE(op().params_key(w).find("cluster1=2"), std::string::npos);
  EXPECT_EQ(op().workspace_bytes(w, p, DType::bf16), ws);
  std::size_t clustered = 0;
  for (const KernelSource& k : op().kernels(w, p, DType::bf16))
    if (k.name_expression.find("moe_gemm_ws_kernel<") != std::string::npos) {
      EXPECT_NE(k.name_expression.find(", 2>"), std::string::npos) << k.name_expression;
      ++clustered;
    }
  EXPECT_EQ(clustered, 2u);
  // Only the one-tile-per-CTA warp-specialised kernel pairs its CTAs.
  Params q = w;
  q.values[op().param_index("persist2")] = 1;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::bf16, h100).value_or(""),
                       "cluster2=2 pairs the CTAs of the one-tile-per-CTA grid"));
  Params m = op().default_params(problem(kMixtral, 16), DType::bf16, h100);
  m.values[op().param_index("cluster1")] = 2;
  EXPECT_TRUE(contains(
      op().invalid_reason(m, problem(kMixtral, 16), DType::bf16, h100).value_or(""),
      "cluster1=2 is the warp-specialised kernel's (impl1=2)"));
}

// gather1=2: gemm1 on x's rows gathered into sorted order first (one more kernel, a buffer in
// the workspace), left out of keys at 0; cluster1/cluster2=3: pairs along the columns sharing
// the act tile, gemm1's on sorted rows only; reasons for what they do not take.
TEST(MoeSpace, SortedGatherAndColumnClusters) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  const Params w = op().default_params(p, DType::bf16, h100);
  ASSERT_EQ(op().param(w, "impl1"), 2);
  ASSERT_EQ(op().param(w, "impl2"), 2);
  EXPECT_EQ(op().param(w, "gather1"), 0);  // not a default
  EXPECT_EQ(op().params_key(w).find("gather"), std::string::npos);
  const std::size_t ws = op().workspace_bytes(w, p, DType::bf16);
  const auto with = [&](const std::vector<std::pair<const char*, std::int64_t>>& values) {
    Params q = w;
    for (const auto& [n, v] : values) set(q, n, v);
    return q;
  };
  const auto why = [&](const Params& q, DType t = DType::bf16) {
    return op().invalid_reason(q, p, t, h100).value_or("");
  };
  const Params g = with({{"gather1", 2}});
  EXPECT_EQ(op().invalid_reason(g, p, DType::bf16, h100), std::nullopt) << why(g);
  EXPECT_NE(op().params_key(g).find("gather1=2"), std::string::npos);
  EXPECT_EQ(op().parse_params(op().params_key(g)).values, g.values);
  // The sorted rows of x: max_blocks * block_m rows of h, 256-byte aligned.
  const long long rows = moe_max_padded(4096LL * 2, 8, static_cast<int>(op().param(w, "block_m")));
  EXPECT_EQ(op().workspace_bytes(g, p, DType::bf16),
            ws + (static_cast<std::size_t>(rows) * 4096 * 2 + 255) / 256 * 256);
  EXPECT_EQ(op().workspace_bytes(g, p, DType::f16), op().workspace_bytes(g, p, DType::bf16));
  const auto ks = op().kernels(g, p, DType::bf16);
  const auto plain = op().kernels(w, p, DType::bf16);
  ASSERT_EQ(ks.size(), plain.size() + 1);
  std::size_t at = 0;
  while (at < plain.size() && plain[at].name_expression.find("moe_gemm_ws") == std::string::npos)
    ++at;
  ASSERT_LT(at, plain.size());
  EXPECT_EQ(ks[at].file, "moe/gather_rows.cuh");
  EXPECT_EQ(ks[at].name_expression, "ktune::moe_gather_rows_kernel<ktune::bf16>");
  EXPECT_EQ(op().block_threads(g, p, DType::bf16, at), kMoeGatherThreads);
  EXPECT_EQ(op().dynamic_shared_bytes(g, p, DType::bf16, at), 0u);
  const std::string g1 = plain[at].name_expression;  // "..., <group1>, 0>"
  ASSERT_EQ(g1.substr(g1.size() - 4), ", 0>") << g1;
  EXPECT_EQ(ks[at + 1].name_expression, g1.substr(0, g1.size() - 4) + ", 2>");
  for (std::size_t i = at + 2; i < ks.size(); ++i)
    EXPECT_EQ(ks[i].name_expression, plain[i - 1].name_expression);  // gemm2 on
  // In pairs along the columns: both GEMMs' names end in 3 (gemm1's after GATHER 2); the
  // workspace stays that of the gather.
  const Params c3 = with({{"gather1", 2}, {"cluster1", 3}, {"cluster2", 3}});
  EXPECT_EQ(op().invalid_reason(c3, p, DType::bf16, h100), std::nullopt) << why(c3);
  EXPECT_EQ(op().workspace_bytes(c3, p, DType::bf16), op().workspace_bytes(g, p, DType::bf16));
  const auto kc = op().kernels(c3, p, DType::bf16);
  ASSERT_EQ(kc.size(), ks.size());
  EXPECT_EQ(kc[at + 1].name_expression, g1.substr(0, g1.size() - 4) + ", 2, 3>");
  EXPECT_EQ(kc[at + 2].name_expression.substr(kc[at + 2].name_expression.size() - 7),
            ", 0, 3>");
  const Params c2 = with({{"cluster2", 3}});  // gemm2 alone, no gather
  EXPECT_EQ(op().invalid_reason(c2, p, DType::bf16, h100), std::nullopt) << why(c2);
  EXPECT_EQ(op().workspace_bytes(c2, p, DType::bf16), ws);
  // The reasons, naming the values.
  EXPECT_TRUE(contains(why(with({{"cluster1", 3}})),
                       "cluster1=3 shares gemm1's act tile")) << why(with({{"cluster1", 3}}));
  EXPECT_TRUE(contains(why(with({{"cluster1", 3}})), "not gather1=0"));
  EXPECT_TRUE(contains(why(with({{"gather1", 2}, {"cluster1", 2}})), "cluster1=2"))
      << why(with({{"gather1", 2}, {"cluster1", 2}}));
  EXPECT_TRUE(contains(why(with({{"gather1", 2}, {"persist1", 1}})),
                       "takes impl1=2, persist1=0, bf16 or fp16"))
      << why(with({{"gather1", 2}, {"persist1", 1}}));
  EXPECT_TRUE(contains(why(with({{"gather1", 2}, {"persist1", 1}})), "persist1=1"));
  EXPECT_TRUE(contains(why(with({{"cluster2", 3}, {"persist2", 2}})),
                       "cluster2=3 pairs the CTAs of the one-tile-per-CTA grid"))
      << why(with({{"cluster2", 3}, {"persist2", 2}}));
  const Params e = op().default_params(p, DType::e4m3, h100);
  ASSERT_EQ(op().param(e, "impl1"), 2);
  Params eg = e;
  set(eg, "gather1", 2);
  EXPECT_TRUE(contains(why(eg, DType::e4m3), "gather1=2")) << why(eg, DType::e4m3);
  EXPECT_TRUE(contains(why(eg, DType::e4m3), "e4m3")) << why(eg, DType::e4m3);
  Params ec = e;
  set(ec, "cluster2", 3);
  EXPECT_TRUE(contains(why(ec, DType::e4m3), "cluster2=3 (pairs along the columns"))
      << why(ec, DType::e4m3);
  // Not the mma.sync or wgmma kernels'.
  const Problem small = problem(kMixtral, 16);
  Params m = op().default_params(small, DType::bf16, h100);
  ASSERT_NE(op().param(m, "impl1"), 2);
  set(m, "gather1", 2);
  EXPECT_TRUE(contains(op().invalid_reason(m, small, DType::bf16, h100).value_or(""),
                       "impl1=" + std::to_string(op().param(m, "impl1"))));
  Params m2 = op().default_params(small, DType::bf16, h100);
  set(m2, "cluster2", 3);
  EXPECT_TRUE(contains(op().invalid_reason(m2, small, DType::bf16, h100).value_or(""),
                       "cluster2=3 is the warp-specialised kernel's (impl2=2)"));
  // block_m=192: one tile per CTA unpaired; its gemm1 may read sorted rows.
  Params tall = with({{"block_m", 192}, {"warps1", 12}, {"warps2", 12}, {"bn1", 128},
                      {"bn2", 128}, {"stages1", 3}, {"stages2", 4}, {"gather1", 2}});
  EXPECT_EQ(op().invalid_reason(tall, p, DType::bf16, h100), std::nullopt) << why(tall);
  set(tall, "cluster2", 3);
  EXPECT_TRUE(contains(why(tall), "cluster2=1")) << why(tall);
}

TEST(MoeSpace, ThreeConsumerWarpSpecialisedGemm) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  Params w = op().default_params(p, DType::bf16, h100);
  ASSERT_EQ(op().param(w, "impl1"), 2);
  ASSERT_EQ(op().param(w, "impl2"), 2);
  set(w, "block_m", 192);
  set(w, "warps1", 12);
  set(w, "warps2", 12);
  set(w, "bn1", 128);
  set(w, "bn2", 128);
  set(w, "stages1", 3);
  set(w, "stages2", 4);
  ASSERT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt)
      << *op().invalid_reason(w, p, DType::bf16, h100);
  std::size_t tall = 0;
  for (const KernelSource& k : op().kernels(w, p, DType::bf16))
    if (k.name_expression.find("moe_gemm_ws_kernel<ktune::bf16, 192, 128, ") != std::string::npos)
      ++tall;
  EXPECT_EQ(tall, 2u);
  EXPECT_TRUE(contains(op().invalid_reason(w, p, DType::bf16, device("sm_80")).value_or(""),
                       "needs an sm_90a device"));
  const auto why = [&](const char* n, std::int64_t v) {
    Params q = w;
    set(q, n, v);
    return op().invalid_reason(q, p, DType::bf16, h100).value_or("");
  };
  EXPECT_TRUE(contains(why("bn2", 256), "BLOCK_M 192 (512 threads")) << why("bn2", 256);
  EXPECT_TRUE(contains(why("stages1", 4), "shared memory above 227 KiB")) << why("stages1", 4);
  EXPECT_TRUE(contains(why("warps1", 8), "warps1=12 at block_m=192")) << why("warps1", 8);
  EXPECT_TRUE(contains(why("persist2", 2), "at block_m=192 (three consumer warpgroups)"))
      << why("persist2", 2);
  EXPECT_TRUE(contains(why("cluster1", 2), "cluster1=1")) << why("cluster1", 2);
  EXPECT_TRUE(contains(why("impl2", 0), "BLOCK_M must be 16, 32, 64, 128 or 256"))
      << why("impl2", 0);
  EXPECT_TRUE(contains(why("impl1", 1), "takes block_m 64 or 128, not 192")) << why("impl1", 1);
  // The mma.sync and wgmma kernels take no 12-warp tiles.
  Params m = op().default_params(problem(kMixtral, 16), DType::bf16, h100);
  set(m, "warps1", 12);
  EXPECT_TRUE(contains(op().invalid_reason(m, problem(kMixtral, 16), DType::bf16, h100)
                           .value_or(""),
                       "WARPS must be 1, 2, 4 or 8"));
}

// Drives the staged strategy (the op's default) over `space` from the op's default, as the sweep
// drives it: every proposed point goes to visit(q, n) (n counts from 1), which returns the fake
// time reported for it. Returns the number of points.
template <class Visit>
std::size_t drive_staged(const Space& space, const Problem& p, const DeviceInfo& dev,
                         Visit visit) {
  std::unique_ptr<Strategy> staged =
      make_space_strategy(space, "staged", op().default_params(p, DType::bf16, dev), 0);
  std::size_t n = 0;
  for (std::vector<Params> batch = staged->next_batch(); !batch.empty();
       batch = staged->next_batch())
    for (const Params& q : batch) staged->report(q, visit(q, ++n));
  return n;
}

// The staged sweep (the op's default strategy) reaches block_m=192 where experts get more than
// 128 rows, though the default's other tunables are invalid there (its repair finds 12 warps,
// 128-column gemm2 tiles and three stages), and never there on sm_80.
TEST(MoeSpace, StagedSweepReachesThreeConsumerTiles) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const int t : {1024, 4096}) {
      const DeviceInfo dev = device(arch);
      const Problem p = problem(kMixtral, t);
      const Space space(op(), p, DType::bf16, dev);
      std::size_t tall = 0;
      const std::size_t n = drive_staged(space, p, dev, [&](const Params& q, std::size_t i) {
        EXPECT_EQ(space.check(q), std::nullopt) << op().params_key(q);
        if (op().param(q, "block_m") == 192) ++tall;
        // Fake times that favour nothing in particular: the point's position.
        return 100.0 + static_cast<double>(i % 7);
      });
      std::printf("%s t=%lld: %zu points, %zu at block_m=192\n", arch,
                  static_cast<long long>(t), n, tall);
      if (std::string(arch) == "sm_90a")
        EXPECT_GT(tall, 10u) << "t=" << t << ": " << n << " points";
      else
        EXPECT_EQ(tall, 0u) << "t=" << t;
    }
}

// The 20-minute bar on a whole Mixtral sweep (issue 8) depends on how many points the staged
// search proposes over the 13 buckets. Driven here on fake times (no GPU) as the sweep drives it:
// 4777 points (~690 s cold on the H100, stop 63); stop 64's cols1/cols2 took it to 5557 and were
// removed at stop 65 (never faster). A tunable that grows this past the bound needs a sweep
// re-timed on a GPU, or pruning with reasons.
TEST(MoeSpace, StagedSweepOfEveryBucketStaysBounded) {
  const DeviceInfo h100 = device("sm_90a");
  std::size_t total = 0;
  for (const std::int64_t t : op().default_buckets()) {
    const Problem p = problem(kMixtral, static_cast<int>(t));
    const Space space(op(), p, DType::bf16, h100);
    total += drive_staged(space, p, h100, [](const Params&, std::size_t i) {
      return 100.0 + static_cast<double>((i * 7919) % 13);
    });
  }
  std::printf("Mixtral, 13 buckets: %zu staged points\n", total);
  EXPECT_LE(total, 6000u);
}

TEST(MoeSpace, WarpSpecialisedGemmIsATunable) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 4096);
  Params w = op().default_params(p, DType::bf16, h100);
  set(w, "block_m", 128);
  for (const char* n : {"impl1", "impl2"}) set(w, n, 2);
  for (const char* n : {"warps1", "warps2"}) set(w, n, 8);
  for (const char* n : {"warps_m1", "warps_m2"}) set(w, n, 1);
  for (const char* n : {"prefetch1", "prefetch2", "epi1", "epi2"}) set(w, n, 0);
  for (const char* n : {"bk1", "bk2"}) set(w, n, 64);
  set(w, "stages1", 4);
  set(w, "stages2", 4);
  set(w, "bn1", 128);
  set(w, "bn2", 256);
  set(w, "split2", 1);
  ASSERT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt)
      << *op().invalid_reason(w, p, DType::bf16, h100);
  EXPECT_TRUE(contains(op().invalid_reason(w, p, DType::bf16, device("sm_80")).value_or(""),
                       "impl1=2 (warp-specialised wgmma + TMA) needs an sm_90a device"));
  Params only2 = w;
  set(only2, "impl1", 0);
  set(only2, "warps1", 8);
  set(only2, "warps_m1", 2);
  set(only2, "bn1", 128);
  set(only2, "stages1", 3);
  ASSERT_EQ(op().invalid_reason(only2, p, DType::bf16, h100), std::nullopt)
      << *op().invalid_reason(only2, p, DType::bf16, h100);
  EXPECT_TRUE(contains(op().invalid_reason(only2, p, DType::bf16, device("sm_80")).value_or(""),
                       "impl2=2 (warp-specialised wgmma + TMA) needs an sm_90a device"));
  // Its kernels: the producer warpgroup on top of the consumers, the ring's exact shared memory.
  const std::vector<KernelSource> ks = op().kernels(w, p, DType::bf16);
  int ws = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    if (ks[i].file != "moe/gemm_ws_sm90.cuh") continue;
    ++ws;
    EXPECT_EQ(op().block_threads(w, p, DType::bf16, i), 384);
    const bool gated = contains(ks[i].name_expression, "true");
    EXPECT_EQ(op().dynamic_shared_bytes(w, p, DType::bf16, i),
              moe_gemm_ws_smem_bytes(128, gated ? 128 : 256, 4, gated));
    EXPECT_EQ(ks[i].name_expression,
              gated ? "ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 128, 4, true, 0, 0>"
                    : "ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 256, 4, false, 8, 0>");
  }
  EXPECT_EQ(ws, 2);
  const auto reason = [&](const char* n, std::int64_t v) {
    Params q = w;
    set(q, n, v);
    return op().invalid_reason(q, p, DType::bf16, h100).value_or("");
  };
  EXPECT_TRUE(contains(reason("warps1", 4),
                       "impl1=2 runs one consumer warpgroup per 64 rows (plus a producer "
                       "warpgroup): warps1=8"));
  EXPECT_TRUE(contains(reason("epi2", 1), "impl2=2 ignores warps_m2, prefetch2 and epi2"));
  EXPECT_TRUE(contains(reason("bk1", 128), "impl1=2 reads k-tiles of one 128-byte swizzled row"));
  EXPECT_TRUE(contains(reason("bk1", 128), "bk1=64, not 128"));
  EXPECT_TRUE(contains(reason("bn1", 256),
                       "gemm1 warp-specialised tile: more than 128 fp32 accumulators"));
  EXPECT_TRUE(contains(reason("stages1", 6), "gemm1 warp-specialised tile: shared memory above "
                                             "227 KiB"));
  EXPECT_TRUE(contains(reason("block_m", 32), "impl1=2 (warp-specialised wgmma) takes block_m 64, "
                                              "128 or 192"));
  EXPECT_TRUE(contains(reason("split2", 2), "split2=2 is the mma.sync gemm2's (impl2=0)"));
  // 64-row tiles: one consumer warpgroup, 256 threads; six stages of a 64 x 128 gemm2 fit.
  Params narrow = w;
  set(narrow, "block_m", 64);
  for (const char* n : {"warps1", "warps2"}) set(narrow, n, 4);
  set(narrow, "bn2", 128);
  set(narrow, "stages2", 6);
  EXPECT_EQ(op().invalid_reason(narrow, p, DType::bf16, h100), std::nullopt);
  const std::vector<KernelSource> kn = op().kernels(narrow, p, DType::bf16);
  for (std::size_t i = 0; i < kn.size(); ++i) {
    if (kn[i].file == "moe/gemm_ws_sm90.cuh") {
      EXPECT_EQ(op().block_threads(narrow, p, DType::bf16, i), 256);
    }
  }
}

// ---- defaults ----

TEST(MoeDefaults, ValidForManyShapes) {
  const std::vector<std::string> shapes = {
      kMixtral, kDeepSeek, "e=8,k=2,h=4096,i=14336,routing=precomputed",
      "e=64,k=8,h=2048,i=1408,routing=softmax", "e=256,k=8,h=7168,i=2048,routing=sigmoid_group,"
      "n_group=8,topk_group=4", "e=6,k=1,h=8,i=8", "e=1,k=1,h=64,i=40", "e=128,k=16,h=512,i=24",
      "e=60,k=4,h=2048,i=1408,routing=softmax", "e=64,k=8,h=2048,i=1408,routing=expert_choice",
      "e=8,k=1,h=4096,i=14336,routing=expert_choice", "e=256,k=16,h=64,i=40,routing=expert_choice",
      kKimi, kKimiGroup, kKimiPre, kQwenNext, kQwenChoice, "e=257,k=1,h=64,i=40",
      "e=512,k=16,h=64,i=40,routing=sigmoid_group,n_group=64,topk_group=64"};
  for (const std::string& shape : shapes)
    for (int t : {1, 2, 3, 16, 100, 1024, 4096, 65536})
      for (const char* arch : {"sm_80", "sm_90a"})
        for (DType dt : {DType::bf16, DType::f16}) {
          const Problem p = problem(shape, t);
          const Params d = op().default_params(p, dt, device(arch));
          EXPECT_EQ(op().invalid_reason(d, p, dt, device(arch)), std::nullopt)
              << shape << " t=" << t << " " << arch << ": " << op().params_key(d);
        }
  const Problem small = problem(kMixtral, 1), large = problem(kMixtral, 4096);
  EXPECT_EQ(op().param(op().default_params(small, DType::bf16, device("sm_90a")), "block_m"), 16);
  EXPECT_GE(op().param(op().default_params(large, DType::bf16, device("sm_90a")), "block_m"), 64);
}

TEST(MoeDefaults, FewTokensSpreadGemm2OverTheSms) {
  // sm_90a's built-in description has 132 SMs. JetMoE-sized (h = 2048) at 2 tokens: 16 column
  // blocks of 128 x 4 experts = 64 blocks, under half the SMs: 64 columns, split-k 2 (256).
  const std::string jetmoe = "e=8,k=2,h=2048,i=5632,routing=softmax_renorm";
  const DeviceInfo h = device("sm_90a");
  Params d = op().default_params(problem(jetmoe, 2), DType::bf16, h);
  EXPECT_EQ(op().param(d, "bn2"), 64);
  EXPECT_EQ(op().param(d, "split2"), 2);
  d = op().default_params(problem(jetmoe, 1), DType::bf16, h);  // 32 blocks: split-k 4
  EXPECT_EQ(op().param(d, "bn2"), 64);
  EXPECT_EQ(op().param(d, "split2"), 4);
  // 96 blocks (3 tokens) and Jamba's 128 (h = 4096, 2 tokens): the row's tiles stay.
  d = op().default_params(problem(jetmoe, 3), DType::bf16, h);
  EXPECT_EQ(op().param(d, "bn2"), 128);
  EXPECT_EQ(op().param(d, "split2"), 1);
  d = op().default_params(problem("e=16,k=2,h=4096,i=14336,routing=softmax_renorm", 2),
                          DType::bf16, h);
  EXPECT_EQ(op().param(d, "bn2"), 128);
  EXPECT_EQ(op().param(d, "split2"), 1);
  // Expert choice adds 16-bit pair outputs: never split.
  d = op().default_params(problem("e=8,k=1,h=2048,i=5632,routing=expert_choice", 1), DType::bf16,
                          h);
  EXPECT_EQ(op().param(d, "split2"), 1);
}

// ---- NVRTC ----

TEST(MoeCompile, DefaultsAndReferenceCompile) {
  std::vector<CompileJob> jobs;
  std::set<std::pair<std::string, std::string>> seen;
  const auto add = [&](const KernelSource& k, const char* arch) {
    if (seen.insert({k.name_expression, arch}).second) jobs.push_back({k, arch, {}});
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const std::vector<std::pair<std::string, DType>> sample = {
        {std::string(kMixtral) + ",t=1", DType::bf16},
        {std::string(kMixtral) + ",t=4096", DType::bf16},
        {std::string(kDeepSeek) + ",t=64", DType::f16},
        {std::string(kMixtral) + ",routing=precomputed,t=16", DType::bf16},
        {std::string(kExpertChoice) + ",t=1000", DType::f16},
        {"e=8,k=1,h=256,i=128,routing=expert_choice,t=3", DType::bf16}};
    for (const auto& [shape, dt] : sample) {
      const Problem p = op().parse_problem(shape);
      for (const KernelSource& k : op().kernels(op().default_params(p, dt, device(arch)), p, dt))
        add(k, arch);
    }
    for (const KernelSource& k : op().reference_kernels(problem(kMixtral, 1), DType::bf16))
      add(k, arch);
    if (std::string(arch) == "sm_90a") {  // one wgmma point: both GEMMs on moe_gemm_sm90_kernel
      const Problem p = problem(kMixtral, 4096);
      const Params w = op().parse_params(
          "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
          "impl1=1,bn2=256,bk2=64,warps2=8,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,"
          "impl2=1,align_chunk=4096,route_lanes=8,route_vec=4,combine_vec=8,split2=1");
      EXPECT_EQ(op().invalid_reason(w, p, DType::bf16, device(arch)), std::nullopt);
      for (const KernelSource& k : op().kernels(w, p, DType::bf16)) add(k, arch);
    }
    for (const KernelSource& k : op().reference_kernels(problem(kExpertChoice, 7), DType::f16))
      add(k, arch);
    if (std::string(arch) == "sm_90a") {  // FP8 weights: defaults at small and large t
      for (const std::string& shape : {std::string(kMixtral) + ",t=1",
                                       std::string(kMixtral) + ",t=4096",
                                       std::string(kDeepSeek) + ",t=128"}) {
        const Problem p = op().parse_problem(shape);
        const Params d = op().default_params(p, DType::e4m3, device(arch));
        EXPECT_EQ(op().invalid_reason(d, p, DType::e4m3, device(arch)), std::nullopt) << shape;
        for (const KernelSource& k : op().kernels(d, p, DType::e4m3)) add(k, arch);
      }
      for (const KernelSource& k : op().reference_kernels(problem(kMixtral, 1), DType::e4m3))
        add(k, arch);
    }
    // fuse_route: routing and alignment in one block, at the default and the narrow route.
    for (const std::string& shape : {std::string(kDeepSeek) + ",t=128",
                                     std::string(kMixtral) + ",t=16"})
      for (std::int64_t lanes : {8, 32}) {
        const Problem p = op().parse_problem(shape);
        Params f = op().default_params(p, DType::bf16, device(arch));
        f.values[op().param_index("fuse_route")] = 1;
        f.values[op().param_index("route_lanes")] = lanes;
        f.values[op().param_index("route_vec")] = 1;
        EXPECT_EQ(op().invalid_reason(f, p, DType::bf16, device(arch)), std::nullopt) << shape;
        add(op().kernels(f, p, DType::bf16)[0], arch);
      }
    // gemm2 split-k: the fp32 partial epilogue and the combine that adds the splits (k = 1).
    const Problem one = problem("e=8,k=1,h=4096,i=14336", 16);
    Params sp = op().default_params(one, DType::f16, device(arch));
    sp.values[op().param_index("split2")] = 4;
    EXPECT_EQ(op().invalid_reason(sp, one, DType::f16, device(arch)), std::nullopt);
    for (const KernelSource& k : op().kernels(sp, one, DType::f16)) add(k, arch);
  }
  const Compiler compiler(std::nullopt);
  const std::vector<CompileOutcome> outcomes = compile_parallel(compiler, jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::string what = jobs[i].arch + " " + jobs[i].source.name_expression;
    ASSERT_TRUE(outcomes[i].kernel) << what << ":\n" << outcomes[i].error;
    const KernelResources& r = outcomes[i].kernel->resources;
    std::printf("%-75s %3d regs, %5d smem, spills %d/%d\n", what.c_str(), r.registers,
                r.shared_bytes, r.spill_stores, r.spill_loads);
  }
}

// ---- past 256 experts ----

const char* const kWideShapes[] = {kKimi, kKimiGroup, kKimiPre, kQwenNext, kQwenChoice};

// Points past 256 experts (the defaults, each tunable's every value on them, and every routing
// and alignment path: fuse_route x align_chunk x route_lanes x route_vec): valid ones exist in
// every routing mode; every valid point's kernels name EMAX 512 where they keep per-expert
// arrays, and its thread counts are those the EMAX = 512 kernels allow (one-block align <= 512,
// route + align in one block <= 256); the route kernel's per-thread limit is said with its
// reason.
TEST(MoeSpace, PointsPast256ExpertsNameTheWideKernels) {
  const DeviceInfo h100 = device("sm_90a");
  for (const char* shape : kWideShapes)
    for (int t : {1, 77, 1000}) {
      const Problem p = problem(shape, t);
      const Params d = op().default_params(p, DType::bf16, h100);
      std::vector<Params> points = {d};
      for (std::size_t i = 0; i < op().tunables().size(); ++i)
        for (std::int64_t v : op().tunables()[i].values) {
          Params q = d;
          q.values[i] = v;
          points.push_back(q);
        }
      for (std::int64_t fuse : {0, 1, 2})
        for (std::int64_t chunk : {0, 4096})
          for (std::int64_t lanes : {8, 32})
            for (std::int64_t vec : {1, 4}) {
              Params q = d;
              q.values[op().param_index("fuse_route")] = fuse;
              q.values[op().param_index("align_chunk")] = chunk;
              q.values[op().param_index("route_lanes")] = lanes;
              q.values[op().param_index("route_vec")] = vec;
              points.push_back(q);
            }
      std::size_t valid = 0;
      for (const Params& q : points) {
        if (op().invalid_reason(q, p, DType::bf16, h100)) continue;
        ++valid;
        const auto ks = op().kernels(q, p, DType::bf16);
        for (std::size_t i = 0; i < ks.size(); ++i) {
          const std::string& n = ks[i].name_expression;
          const int threads = op().block_threads(q, p, DType::bf16, i);
          const bool per_expert = contains(n, "moe_route") || contains(n, "moe_align_") ||
                                  contains(n, "moe_expert_choice_scores") ||
                                  contains(n, "moe_expert_choice_combine");
          EXPECT_EQ(contains(n, "512>"), per_expert) << n;
          if (contains(n, "moe_align_kernel<")) {
            EXPECT_LE(threads, 512) << n;
          }
          if (contains(n, "moe_route_align_kernel<")) {
            EXPECT_LE(threads, 256) << n;
          }
        }
      }
      EXPECT_GT(valid, 0u) << shape << " t=" << t;
      std::printf("%s t=%d: %zu of %zu points valid\n", shape, t, valid, points.size());
    }
  // sigmoid_group at 8 lanes: 48 scores per thread at e=384, above its 32.
  const Problem g = problem(kKimiGroup, 16);
  Params q = op().default_params(g, DType::bf16, h100);
  q.values[op().param_index("route_lanes")] = 8;
  q.values[op().param_index("route_vec")] = 1;
  EXPECT_EQ(op().invalid_reason(q, g, DType::bf16, h100).value_or(""),
            "route_lanes=8 leaves 48 scores per thread at e=384; the route kernel keeps at most "
            "32 in registers (sigmoid_group keeps two per expert)");
}

// Every kernel the plans past 256 experts launch compiles for sm_80 and sm_90a: the defaults
// (16-bit; e4m3 on sm_90a) at t = 1, 77, 1000 and 5000, route + align in one block and in the
// route grid, the multi-block align path, 8 route lanes, and the reference kernels. Each plan
// then passes the device's limits on its compiled kernels (invalid_after_compile), and every
// kernel but the GEMMs keeps its static shared memory within 48 KiB.
TEST(MoeCompile, PlansPast256ExpertsCompile) {
  struct Plan {
    Params params;
    Problem problem;
    DType dtype;
    std::string arch;
    std::vector<KernelSource> kernels;
  };
  std::vector<Plan> plans;
  std::vector<CompileJob> jobs;
  std::map<std::pair<std::string, std::string>, KernelResources> resources_of;  // of each job
  const auto add = [&](const KernelSource& k, const std::string& arch) {
    if (resources_of.emplace(std::pair{k.name_expression, arch}, KernelResources{}).second)
      jobs.push_back({k, arch, {}});
  };
  const std::vector<std::string> sets = {"",
                                         "fuse_route=1,align_chunk=0",
                                         "fuse_route=2,align_chunk=0",
                                         "fuse_route=0,align_chunk=4096",
                                         "fuse_route=1,align_chunk=0,route_lanes=8,route_vec=1",
                                         "fuse_route=2,align_chunk=0,route_lanes=8,route_vec=4",
                                         "fuse_route=0,align_chunk=0,route_lanes=8,route_vec=4"};
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (const char* shape : kWideShapes)
      for (int t : {1, 77, 1000, 5000}) {
        const Problem p = problem(shape, t);
        std::vector<DType> dtypes = {DType::bf16};
        if (std::string(arch) == "sm_90a" && t == 77) dtypes.push_back(DType::e4m3);
        for (DType dt : dtypes)
          for (const std::string& set : sets) {
            const Params q = with_values(op().default_params(p, dt, dev), set);
            if (set.empty()) {
              EXPECT_EQ(op().invalid_reason(q, p, dt, dev), std::nullopt)
                  << arch << " " << shape << " t=" << t;
            } else if (op().invalid_reason(q, p, dt, dev)) {
              continue;  // a path the problem does not take (said with its reason)
            }
            Plan plan{q, p, dt, arch, op().kernels(q, p, dt)};
            for (const KernelSource& k : op().reference_kernels(p, dt)) plan.kernels.push_back(k);
            for (const KernelSource& k : plan.kernels) add(k, arch);
            plans.push_back(std::move(plan));
          }
      }
  }
  test::compile_and_check(jobs, [&](const CompileJob& job, const CompiledKernel& k) {
    const std::string& what = job.source.name_expression;
    if (!contains(what, "gemm")) {
      EXPECT_LE(k.resources.shared_bytes, 48 * 1024) << job.arch << " " << what;
    }
    resources_of[{what, job.arch}] = k.resources;
  });
  if (HasFatalFailure()) return;  // a kernel that did not compile: its plans are not judged
  for (const Plan& plan : plans) {
    const std::size_t launched = op().kernels(plan.params, plan.problem, plan.dtype).size();
    std::vector<KernelResources> resources;
    for (std::size_t i = 0; i < launched; ++i)
      resources.push_back(resources_of.at({plan.kernels[i].name_expression, plan.arch}));
    EXPECT_EQ(op().invalid_after_compile(plan.params, plan.problem, plan.dtype,
                                         device(plan.arch), resources),
              std::nullopt)
        << plan.arch << " " << op().problem_key(plan.problem) << " "
        << op().params_key(plan.params);
  }
  std::printf("%zu plans, %zu kernels compiled\n", plans.size(), jobs.size());
}

}  // namespace
}  // namespace ktune
