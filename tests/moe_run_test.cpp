// The MoE op's launches without a GPU: run() and run_reference() through a recording launcher
// (the kernels in order per routing mode, grids from the upper bounds, every workspace pointer
// inside the workspace), split-k, counted persistent GEMMs, the fused route and align, expert
// choice, and FP8 (e4m3) weights.
#include "tests/moe_run_support.hpp"

namespace ktune {
namespace {

using namespace moe_test;

// ---- run() ----

TEST(MoeRun, KernelsInOrderPerRoutingMode) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem soft = problem(kMixtral, 4096);
  const Params ps = op().default_params(soft, DType::bf16, h100);
  EXPECT_EQ(op().param(ps, "align_chunk"), 4096);
  EXPECT_EQ(kernel_names(ps, soft),
            (std::vector<std::string>{"moe_zero_kernel", "moe_route_kernel",
                                      "moe_align_count_kernel", "moe_align_scan_kernel",
                                      "moe_align_scatter_kernel", "moe_gemm_ws_kernel",
                                      "moe_gemm_ws_kernel", "moe_combine_kernel"}));
  const Problem pre = problem(std::string(kMixtral) + ",routing=precomputed", 16);
  const Params pp = op().default_params(pre, DType::bf16, h100);
  EXPECT_EQ(kernel_names(pp, pre),
            (std::vector<std::string>{"moe_align_kernel", "moe_gemm_kernel", "moe_gemm_kernel",
                                      "moe_combine_kernel"}));
  const Problem k1 = problem("e=8,k=1,h=256,i=128", 7);
  Params p1 = op().default_params(k1, DType::bf16, h100);
  // Seven softmax-routed pairs: the default routes and aligns in one kernel.
  EXPECT_EQ(kernel_names(p1, k1),
            (std::vector<std::string>{"moe_route_align_kernel", "moe_gemm_kernel",
                                      "moe_gemm_kernel"}));
  p1.values[op().param_index("fuse_route")] = 0;
  EXPECT_EQ(kernel_names(p1, k1),
            (std::vector<std::string>{"moe_zero_kernel", "moe_route_kernel", "moe_align_kernel",
                                      "moe_gemm_kernel", "moe_gemm_kernel"}));
  const auto ks = op().kernels(ps, soft, DType::bf16);
  EXPECT_EQ(ks[1].name_expression, "ktune::moe_route_kernel<1, 128, 8, 4, 1>");
  EXPECT_EQ(ks[2].name_expression, "ktune::moe_align_count_kernel<256, 4096>");
  EXPECT_TRUE(contains(ks[5].name_expression, ", true, ")) << ks[5].name_expression;
  EXPECT_TRUE(contains(ks[6].name_expression, ", false, ")) << ks[6].name_expression;
  // The one-block align kernel takes a warp per 128 pairs, 128 to 1024 threads; the route
  // kernel 32 lanes per token from 32 experts on (one score or two per lane), else 8 lanes.
  for (const auto& [t, threads] :
       std::vector<std::pair<int, int>>{{1, 128}, {64, 128}, {65, 256}, {128, 256}, {500, 1024}}) {
    const Problem ds = problem(kDeepSeek, t);
    Params d = op().default_params(ds, DType::bf16, h100);
    d.values[op().param_index("align_chunk")] = 0;
    const auto dk = op().kernels(d, ds, DType::bf16);
    EXPECT_EQ(dk[2].name_expression, "ktune::moe_align_kernel<" + std::to_string(threads) + ">")
        << "t=" << t;
    EXPECT_EQ(op().block_threads(d, ds, DType::bf16, 2), threads) << "t=" << t;
    EXPECT_EQ(dk[1].name_expression, "ktune::moe_route_kernel<2, 128, 32, 1, 2>") << "t=" << t;
  }
}

TEST(MoeRun, LaunchesFromUpperBoundsInsideTheWorkspace) {
  const DeviceInfo h100 = device("sm_90a");
  for (const std::string& shape : {std::string(kMixtral), std::string(kDeepSeek)}) {
    for (int t : {1, 37, 5000}) {
      const Problem p = problem(shape, t);
      Params params = op().default_params(p, DType::bf16, h100);
      params.values[op().param_index("fuse_route")] = 0;  // the route and align kernels' args
      // The warp-specialised GEMMs (impl 2) encode their tensor maps through the driver at
      // launch (gpu_moe_op_test runs them); their tiles on the wgmma kernel without
      // specialisation (impl 1) take the same grid and workspace, and launch without one.
      for (const char* n : {"impl1", "impl2"})
        if (op().param(params, n) == 2) params.values[op().param_index(n)] = 1;
      ASSERT_EQ(op().invalid_reason(params, p, DType::bf16, h100), std::nullopt);
      const auto ks = op().kernels(params, p, DType::bf16);
      const std::size_t ws = op().workspace_bytes(params, p, DType::bf16);
      const int E = static_cast<int>(op().dim(p, "e")), K = static_cast<int>(op().dim(p, "k"));
      const int H = static_cast<int>(op().dim(p, "h")), I = static_cast<int>(op().dim(p, "i"));
      const int bm = static_cast<int>(op().param(params, "block_m"));
      const long long pairs = static_cast<long long>(t) * K;
      const long long max_blocks = moe_max_blocks(pairs, E, bm);
      const std::string what = shape + " t=" + std::to_string(t);

      // With every optional output: all kernels, in order.
      const RecordingLauncher all = run(params, p);
      ASSERT_EQ(all.launches.size(), ks.size()) << what;
      for (std::size_t i = 0; i < ks.size(); ++i) {
        const KernelLaunch& l = all.launches[i].launch;
        EXPECT_EQ(l.kernel, reinterpret_cast<KernelHandle>(0x100 + i)) << what;
        EXPECT_EQ(static_cast<int>(l.block[0]), op().block_threads(params, p, DType::bf16, i));
        EXPECT_EQ(l.shared_bytes, op().dynamic_shared_bytes(params, p, DType::bf16, i));
        // The first kernel waits for the caller's work; each later one is launched
        // programmatically and waits for its predecessor itself (griddep_wait).
        EXPECT_EQ(l.programmatic, i > 0) << what << " kernel " << i;
      }
      const auto z = all.launches[0].as<MoeZeroArgs>();
      EXPECT_EQ(z.count, 2 * E + 1);
      expect_inside(z.data, 8u * z.count, ws, "aux scratch");
      const auto r = all.launches[1].as<MoeRouteArgs>();
      EXPECT_EQ(r.topk_ids, reinterpret_cast<int*>(0x40000));  // the caller's outputs
      EXPECT_EQ(r.aux_loss, reinterpret_cast<float*>(0xa0000));
      EXPECT_EQ(r.aux_scratch, z.data);
      EXPECT_EQ(r.routed_scaling, shape == kDeepSeek ? 2.5f : 1.0f);
      EXPECT_EQ(r.correction_bias,
                shape == kDeepSeek ? reinterpret_cast<const float*>(0x30000) : nullptr);
      const int per_block = 128 / static_cast<int>(op().param(params, "route_lanes"));
      EXPECT_EQ(all.launches[1].launch.grid[0], static_cast<unsigned>((t + per_block - 1) / per_block));
      const std::size_t g1 = ks.size() - 3, g2 = ks.size() - 2, cb = ks.size() - 1;
      const auto al = all.launches[2].as<MoeAlignArgs>();
      EXPECT_EQ(al.expert_counts, reinterpret_cast<int*>(0x90000));
      expect_inside(al.sorted_pairs, 4u * static_cast<std::size_t>(max_blocks) * bm, ws, "sorted");
      expect_inside(al.block_expert, 4u * static_cast<std::size_t>(max_blocks), ws, "blocks");
      if (al.scratch)
        expect_inside(al.scratch, 4u * moe_align_scratch_ints(pairs, E, 4096), ws, "align");
      const auto a1 = all.launches[g1].as<MoeGemmArgs>();
      const auto a2 = all.launches[g2].as<MoeGemmArgs>();
      EXPECT_EQ(all.launches[g1].launch.grid[0], static_cast<unsigned>(max_blocks));
      EXPECT_EQ(all.launches[g1].launch.grid[1],
                moe_gemm_grid_y(I, static_cast<int>(op().param(params, "bn1"))));
      EXPECT_EQ(all.launches[g2].launch.grid[1],
                moe_gemm_grid_y(H, static_cast<int>(op().param(params, "bn2"))));
      EXPECT_EQ(a1.max_blocks, max_blocks);
      EXPECT_EQ(a1.a, reinterpret_cast<const void*>(0x10000));
      EXPECT_EQ(a1.n, I);
      EXPECT_EQ(a1.kdim, H);
      EXPECT_EQ(a2.a, a1.out);
      EXPECT_EQ(a2.n, H);
      EXPECT_EQ(a2.topk_weights, reinterpret_cast<const float*>(0x50000));
      expect_inside(a1.out, 2u * static_cast<std::size_t>(max_blocks) * bm * I, ws, "act");
      expect_inside(a2.out, 2u * static_cast<std::size_t>(pairs) * H, ws, "pair_out");
      const auto c = all.launches[cb].as<MoeCombineArgs>();
      EXPECT_EQ(c.pair_out, a2.out);
      EXPECT_EQ(c.y, reinterpret_cast<void*>(0x80000));
      EXPECT_EQ(all.launches[cb].launch.grid[0], static_cast<unsigned>(t));

      // Without the optional outputs: no zeroing, ids/weights/counts in the workspace.
      const RecordingLauncher bare = run(params, p, {3, 4, 8, 9});
      ASSERT_EQ(bare.launches.size(), ks.size() - 1) << what;
      EXPECT_EQ(bare.launches[0].launch.kernel, reinterpret_cast<KernelHandle>(0x101));
      const auto rb = bare.launches[0].as<MoeRouteArgs>();
      EXPECT_EQ(rb.aux_loss, nullptr);
      expect_inside(rb.topk_ids, 4u * pairs, ws, "ids");
      expect_inside(rb.topk_weights, 4u * pairs, ws, "weights");
      EXPECT_GE(reinterpret_cast<std::uintptr_t>(rb.topk_ids), kWorkspace);
      EXPECT_EQ(bare.launches[1].as<MoeAlignArgs>().topk_ids, rb.topk_ids);
      EXPECT_EQ(bare.launches[bare.launches.size() - 2].as<MoeGemmArgs>().topk_weights,
                rb.topk_weights);
    }
  }
}

// gemm2 split-k: a z grid of split2 CTAs per tile writing fp32 partial sums [split2, pairs, H]
// inside the workspace, and a combine that adds them, at k = 1 too.
TEST(MoeRun, SplitKLaunchesPartialSumsAndTheirCombine) {
  const DeviceInfo h100 = device("sm_90a");
  for (const std::string& shape : {std::string(kDeepSeek), std::string("e=8,k=1,h=4096,i=14336")}) {
    const Problem p = problem(shape, 16);
    Params params = op().default_params(p, DType::bf16, h100);
    params.values[op().param_index("fuse_route")] = 0;  // the aux zeroing is counted below
    const std::size_t plain_ws = op().workspace_bytes(params, p, DType::bf16);
    const std::size_t plain_kernels = op().kernels(params, p, DType::bf16).size();
    params.values[op().param_index("split2")] = 4;
    ASSERT_EQ(op().invalid_reason(params, p, DType::bf16, h100), std::nullopt) << shape;
    const auto ks = op().kernels(params, p, DType::bf16);
    const int K = static_cast<int>(op().dim(p, "k")), H = static_cast<int>(op().dim(p, "h"));
    // k = 1 gains the combine; k > 1 had one.
    EXPECT_EQ(ks.size(), plain_kernels + (K == 1 ? 1 : 0)) << shape;
    const std::string& g2_name = ks[ks.size() - 2].name_expression;
    EXPECT_TRUE(contains(g2_name, ", true>")) << g2_name;
    EXPECT_TRUE(contains(ks.back().name_expression, "moe_combine_kernel<ktune::bf16, 128, "))
        << ks.back().name_expression;
    EXPECT_TRUE(contains(ks.back().name_expression, ", true>")) << ks.back().name_expression;
    const std::size_t ws = op().workspace_bytes(params, p, DType::bf16);
    const std::size_t partial = 4u * 4u * 16u * static_cast<std::size_t>(K) * H;
    EXPECT_GE(ws, plain_ws - (K > 1 ? 2u * 16u * K * H : 0u) + partial - 256u) << shape;
    const RecordingLauncher l = run(params, p, {3, 4, 8, 9});
    ASSERT_EQ(l.launches.size(), ks.size() - 1) << shape;  // no aux zeroing
    const auto& g2 = l.launches[l.launches.size() - 2];
    const auto cb = l.launches.back().as<MoeCombineArgs>();
    EXPECT_EQ(g2.launch.grid[2], 4u);
    expect_inside(g2.as<MoeGemmArgs>().out, partial, ws, "partial sums");
    EXPECT_EQ(cb.pair_out, g2.as<MoeGemmArgs>().out);
    EXPECT_EQ(cb.splits, 4);
    EXPECT_EQ(cb.k, K);
    EXPECT_EQ(cb.y, reinterpret_cast<void*>(0x80000));
    EXPECT_EQ(l.launches.back().launch.grid[0], 16u);
  }
  // Without split-k every grid has one z layer.
  const Problem p = problem(kDeepSeek, 16);
  for (const auto& rec : run(op().default_params(p, DType::bf16, h100), p).launches)
    EXPECT_EQ(rec.launch.grid[2], 1u);
}

// fuse_route: routing and alignment as one kernel of one block for t <= 1024 and t*k <= 4096,
// left out of keys at 0, with reasons where it does not apply; its launch carries both argument
// structs, the ids only where the caller asked for them, and no aux scratch.
TEST(MoeRun, CountedPersistentGemmsZeroTheirCountersFirst) {
  // persist=2: a zero kernel first in the call clears both GEMMs' tile counters (a workspace
  // region of their own), for routed layers and expert choice alike; every other kernel as at
  // persist=0 but the GEMMs; persist=1 (a fixed stride) takes no counter. (The launches
  // themselves need the driver for the tensor maps: gpu_moe_op_test runs them.)
  const DeviceInfo h100 = device("sm_90a");
  for (const char* shape : {kMixtral, kExpertChoice}) {
    const Problem p = problem(shape, 4096);
    const Params plain = op().parse_params(
        "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
        "impl1=2,bn2=256,bk2=64,warps2=8,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,"
        "impl2=2,align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1");
    Params w = plain;
    w.values[op().param_index("persist1")] = 2;
    w.values[op().param_index("persist2")] = 2;
    ASSERT_EQ(op().invalid_reason(w, p, DType::bf16, h100), std::nullopt) << shape;
    const std::vector<std::string> names = kernel_names(w, p);
    const std::vector<std::string> plain_names = kernel_names(plain, p);
    ASSERT_EQ(names.size(), plain_names.size() + 1) << shape;
    EXPECT_EQ(names[0], "moe_zero_kernel") << shape;
    EXPECT_EQ(op().block_threads(w, p, DType::bf16, 0), kMoeZeroThreads);
    EXPECT_EQ(op().dynamic_shared_bytes(w, p, DType::bf16, 0), 0u);
    for (std::size_t i = 1; i < names.size(); ++i) {
      const bool gemm = plain_names[i - 1] == "moe_gemm_ws_kernel";
      EXPECT_EQ(names[i], gemm ? "moe_gemm_ws_dynamic_kernel" : plain_names[i - 1]) << shape;
      EXPECT_EQ(op().block_threads(w, p, DType::bf16, i),
                op().block_threads(plain, p, DType::bf16, i - 1)) << shape << " " << i;
      EXPECT_EQ(op().dynamic_shared_bytes(w, p, DType::bf16, i),
                op().dynamic_shared_bytes(plain, p, DType::bf16, i - 1)) << shape << " " << i;
    }
    EXPECT_EQ(std::count(names.begin(), names.end(), "moe_gemm_ws_dynamic_kernel"), 2) << shape;
    EXPECT_GE(op().workspace_bytes(w, p, DType::bf16),
              op().workspace_bytes(plain, p, DType::bf16) + 8) << shape;
    Params fixed = plain;
    fixed.values[op().param_index("persist1")] = 1;
    fixed.values[op().param_index("persist2")] = 1;
    EXPECT_EQ(kernel_names(fixed, p).size(), plain_names.size()) << shape;
    EXPECT_EQ(op().workspace_bytes(fixed, p, DType::bf16),
              op().workspace_bytes(plain, p, DType::bf16)) << shape;
  }
}

TEST(MoeRun, FusedRouteAndAlign) {
  const DeviceInfo h100 = device("sm_90a");
  const auto fuse = [](Params p) {
    p.values[op().param_index("fuse_route")] = 1;
    return p;
  };
  const auto reason = [&](const Params& q, const Problem& p) {
    return op().invalid_reason(q, p, DType::bf16, h100).value_or("");
  };
  // Keys: absent at 0 (databases written before it parse to 0), named at 1.
  const Problem ds = problem(kDeepSeek, 128);
  const Params plain = op().default_params(ds, DType::bf16, h100);
  EXPECT_EQ(op().param(plain, "fuse_route"), 0);
  EXPECT_FALSE(contains(op().params_key(plain), "fuse_route"));
  const Params fused = fuse(plain);
  EXPECT_TRUE(contains(op().params_key(fused), ",fuse_route=1"));
  EXPECT_EQ(op().parse_params(op().params_key(fused)), fused);
  EXPECT_EQ(op().parse_params(op().params_key(plain)), plain);
  EXPECT_EQ(reason(fused, ds), "");

  // Where it does not apply.
  const Problem pre = problem(std::string(kMixtral) + ",routing=precomputed", 16);
  EXPECT_TRUE(contains(reason(fuse(op().default_params(pre, DType::bf16, h100)), pre),
                       "fuse_route=1 has no effect with routing=precomputed"));
  const Problem ec = problem(kExpertChoice, 16);
  EXPECT_TRUE(contains(reason(fuse(op().default_params(ec, DType::bf16, h100)), ec),
                       "fuse_route=1 has no effect with routing=expert_choice"));
  // DeepSeek-like: 4096 pairs at t=512; Mixtral (k=2): 1024 tokens.
  for (const auto& [shape, t, ok] : {std::tuple{std::string(kDeepSeek), 512, true},
                                     std::tuple{std::string(kDeepSeek), 513, false},
                                     std::tuple{std::string(kMixtral), 1024, true},
                                     std::tuple{std::string(kMixtral), 1025, false}}) {
    const Problem q = problem(shape, t);
    Params f = fuse(op().default_params(q, DType::bf16, h100));
    f.values[op().param_index("align_chunk")] = 0;
    EXPECT_EQ(reason(f, q).empty(), ok) << shape << " t=" << t << ": " << reason(f, q);
    if (!ok) {
      EXPECT_TRUE(contains(reason(f, q), "at most 1024 tokens and 4096 pairs")) << reason(f, q);
    }
  }
  const Problem big = problem(kDeepSeek, 512);
  Params chunked = fuse(op().default_params(big, DType::bf16, h100));
  chunked.values[op().param_index("align_chunk")] = 4096;
  EXPECT_TRUE(contains(reason(chunked, big), "only align_chunk=0 is searched with it"));

  // Kernels: route + align as one, before the GEMMs; no aux zeroing.
  EXPECT_EQ(kernel_names(fused, ds),
            (std::vector<std::string>{"moe_route_align_kernel", "moe_gemm_kernel",
                                      "moe_gemm_kernel", "moe_combine_kernel"}));
  const auto ks = op().kernels(fused, ds, DType::bf16);
  EXPECT_EQ(ks[0].file, "moe/route_align.cuh");
  // DeepSeek's default: 32 lanes per token, 2 scores each: 1024 threads.
  EXPECT_EQ(ks[0].name_expression, "ktune::moe_route_align_kernel<2, 1024, 32, 1, 2>");
  EXPECT_EQ(op().block_threads(fused, ds, DType::bf16, 0), 1024);
  Params narrow = fused;
  narrow.values[op().param_index("route_lanes")] = 8;
  narrow.values[op().param_index("route_vec")] = 4;
  EXPECT_EQ(reason(narrow, ds), "");
  EXPECT_EQ(op().kernels(narrow, ds, DType::bf16)[0].name_expression,
            "ktune::moe_route_align_kernel<2, 1024, 8, 4, 2>");
  const Problem wide = problem("e=256,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,"
                               "topk_group=4", 16);
  Params w = fuse(op().default_params(wide, DType::bf16, h100));
  w.values[op().param_index("route_lanes")] = 8;
  w.values[op().param_index("route_vec")] = 1;
  EXPECT_EQ(reason(w, wide), "");
  EXPECT_EQ(op().kernels(w, wide, DType::bf16)[0].name_expression,
            "ktune::moe_route_align_kernel<2, 256, 8, 1, 32>");  // 32 scores per thread
  EXPECT_EQ(op().block_threads(w, wide, DType::bf16, 0), 256);

  // Launches: one block, the first kernel, both argument structs; the workspace drops the
  // routed ids and the aux scratch.
  const std::size_t ws = op().workspace_bytes(fused, ds, DType::bf16);
  EXPECT_LT(ws, op().workspace_bytes(plain, ds, DType::bf16));
  const RecordingLauncher all = run(fused, ds);
  ASSERT_EQ(all.launches.size(), ks.size());
  const KernelLaunch& l = all.launches[0].launch;
  EXPECT_EQ(l.grid[0], 1u);
  EXPECT_EQ(l.block[0], 1024u);
  EXPECT_EQ(l.shared_bytes, 0u);
  EXPECT_FALSE(l.programmatic);
  EXPECT_TRUE(all.launches[1].launch.programmatic);
  const auto ra = all.launches[0].as<MoeRouteAlignArgs>();
  EXPECT_EQ(ra.route.logits, reinterpret_cast<const float*>(0x20000));
  EXPECT_EQ(ra.route.correction_bias, reinterpret_cast<const float*>(0x30000));
  EXPECT_EQ(ra.route.topk_ids, reinterpret_cast<int*>(0x40000));  // the caller's outputs
  EXPECT_EQ(ra.route.topk_weights, reinterpret_cast<float*>(0x50000));
  EXPECT_EQ(ra.route.aux_loss, reinterpret_cast<float*>(0xa0000));
  EXPECT_EQ(ra.route.aux_scratch, nullptr);
  EXPECT_EQ(ra.route.tokens, 128);
  EXPECT_EQ(ra.route.routed_scaling, 2.5f);
  EXPECT_EQ(ra.route.n_group, 8);
  EXPECT_EQ(ra.align.topk_ids, reinterpret_cast<const int*>(0x40000));
  EXPECT_EQ(ra.align.scratch, nullptr);
  EXPECT_EQ(ra.align.pairs, 128 * 8);
  EXPECT_EQ(ra.align.expert_counts, reinterpret_cast<int*>(0x90000));
  const long long max_blocks = moe_max_blocks(128 * 8, 64, 16);
  expect_inside(ra.align.sorted_pairs, 4u * static_cast<std::size_t>(max_blocks) * 16, ws,
                "sorted");
  const auto g1 = all.launches[1].as<MoeGemmArgs>();
  EXPECT_EQ(g1.sorted_pairs, ra.align.sorted_pairs);
  EXPECT_EQ(g1.block_expert, ra.align.block_expert);
  EXPECT_EQ(g1.padded_rows, ra.align.padded_rows);
  EXPECT_EQ(all.launches[2].as<MoeGemmArgs>().topk_weights, ra.route.topk_weights);
  // Without the optional outputs: no ids anywhere but the kernel's shared memory, weights and
  // counts in the workspace.
  const RecordingLauncher bare = run(fused, ds, {3, 4, 8, 9});
  ASSERT_EQ(bare.launches.size(), ks.size());
  const auto rb = bare.launches[0].as<MoeRouteAlignArgs>();
  EXPECT_EQ(rb.route.topk_ids, nullptr);
  EXPECT_EQ(rb.align.topk_ids, nullptr);
  EXPECT_EQ(rb.route.aux_loss, nullptr);
  expect_inside(rb.route.topk_weights, 4u * 128 * 8, ws, "weights");
  EXPECT_GE(reinterpret_cast<std::uintptr_t>(rb.route.topk_weights), kWorkspace);
  expect_inside(rb.align.expert_counts, 4u * 64, ws, "counts");
  EXPECT_EQ(bare.launches[2].as<MoeGemmArgs>().topk_weights, rb.route.topk_weights);
}

// fuse_route=2: routing and alignment in the route kernel's grid, its blocks meeting at a
// barrier: a zero kernel first (the barrier count, and the aux sums when asked), then the sort
// kernel, no align kernel; keys, reasons, launches and the workspace it takes.
TEST(MoeRun, SortedInTheRouteGrid) {
  const DeviceInfo h100 = device("sm_90a");
  const auto sort = [](Params p) {
    p.values[op().param_index("fuse_route")] = 2;
    p.values[op().param_index("align_chunk")] = 0;
    return p;
  };
  const auto reason = [&](const Params& q, const Problem& p) {
    return op().invalid_reason(q, p, DType::bf16, h100).value_or("");
  };
  const Problem ds = problem(kDeepSeek, 128);
  const Params plain = op().default_params(ds, DType::bf16, h100);
  ASSERT_EQ(op().param(plain, "route_lanes"), 32);
  const Params sorted = sort(plain);
  EXPECT_TRUE(contains(op().params_key(sorted), ",fuse_route=2"));
  EXPECT_EQ(op().parse_params(op().params_key(sorted)), sorted);
  EXPECT_EQ(reason(sorted, ds), "");

  // Where it does not apply, with the reason.
  const Problem pre = problem(std::string(kMixtral) + ",routing=precomputed", 16);
  EXPECT_TRUE(contains(reason(sort(op().default_params(pre, DType::bf16, h100)), pre),
                       "fuse_route=2 has no effect with routing=precomputed"));
  const Problem ec = problem(kExpertChoice, 16);
  EXPECT_TRUE(contains(reason(sort(op().default_params(ec, DType::bf16, h100)), ec),
                       "fuse_route=2 has no effect with routing=expert_choice"));
  // 64 blocks: 4 tokens a block at 32 lanes (t <= 256), 16 at 8 lanes (t <= 1024); and at
  // most 8192 counts in the table (e=256: 32 blocks).
  const std::string wide_shape = "e=256,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,"
                                 "topk_group=4";
  for (const auto& [shape, t, lanes, ok] :
       {std::tuple{std::string(kDeepSeek), 256, 32, true},
        std::tuple{std::string(kDeepSeek), 257, 32, false},
        std::tuple{std::string(kMixtral), 1024, 8, true},
        std::tuple{std::string(kMixtral), 1025, 8, false},
        std::tuple{wide_shape, 512, 8, true},
        std::tuple{wide_shape, 513, 8, false}}) {
    const Problem q = problem(shape, t);
    Params f = sort(op().default_params(q, DType::bf16, h100));
    f.values[op().param_index("route_lanes")] = lanes;
    f.values[op().param_index("route_vec")] = 1;
    const std::string why = reason(f, q);
    EXPECT_EQ(why.empty(), ok) << shape << " t=" << t << ": " << why;
    if (!ok) {
      EXPECT_TRUE(contains(why, shape == wide_shape ? "at most 8192 (33 blocks x e=256)"
                                                    : "at most 64 blocks of"))
          << why;
    }
  }
  Params chunked = sorted;
  chunked.values[op().param_index("align_chunk")] = 4096;
  EXPECT_TRUE(contains(reason(chunked, ds), "fuse_route=2 aligns the pairs inside its route "
                                            "blocks: only align_chunk=0"));

  // Kernels: the zero kernel, the sort kernel, the GEMMs, the combine.
  EXPECT_EQ(kernel_names(sorted, ds),
            (std::vector<std::string>{"moe_zero_kernel", "moe_route_sort_kernel",
                                      "moe_gemm_kernel", "moe_gemm_kernel",
                                      "moe_combine_kernel"}));
  const auto ks = op().kernels(sorted, ds, DType::bf16);
  EXPECT_EQ(ks[1].file, "moe/route_sort.cuh");
  EXPECT_EQ(ks[1].name_expression, "ktune::moe_route_sort_kernel<2, 128, 32, 1, 2>");
  EXPECT_EQ(op().block_threads(sorted, ds, DType::bf16, 1), 128);
  EXPECT_EQ(op().dynamic_shared_bytes(sorted, ds, DType::bf16, 1), 0u);

  // Launches: the zero kernel first (not programmatic) over the barrier and the aux sums, then
  // 32 blocks of the sort kernel (programmatic), its scratch and count table in the workspace.
  const std::size_t ws = op().workspace_bytes(sorted, ds, DType::bf16);
  const RecordingLauncher all = run(sorted, ds, {}, false, DType::bf16, 132);
  ASSERT_EQ(all.launches.size(), ks.size());
  const auto z = all.launches[0].as<MoeZeroArgs>();
  EXPECT_FALSE(all.launches[0].launch.programmatic);
  EXPECT_EQ(z.count, 1 + 2 * 64);
  const KernelLaunch& l = all.launches[1].launch;
  EXPECT_TRUE(l.programmatic);
  EXPECT_EQ(l.grid[0], 32u);
  EXPECT_EQ(l.block[0], 128u);
  const auto rs = all.launches[1].as<MoeRouteSortArgs>();
  EXPECT_EQ(rs.scratch, z.data);
  expect_inside(rs.scratch, 8u * moe_sort_header(64) + 4u * 32 * 64, ws, "sort scratch");
  EXPECT_GE(reinterpret_cast<std::uintptr_t>(rs.scratch), kWorkspace);
  EXPECT_EQ(rs.route.aux_scratch, nullptr);
  EXPECT_EQ(rs.route.aux_loss, reinterpret_cast<float*>(0xa0000));
  EXPECT_EQ(rs.route.topk_ids, reinterpret_cast<int*>(0x40000));
  EXPECT_EQ(rs.route.tokens, 128);
  EXPECT_EQ(rs.align.pairs, 128 * 8);
  EXPECT_EQ(rs.align.block_m, op().param(sorted, "block_m"));
  const auto g1 = all.launches[2].as<MoeGemmArgs>();
  EXPECT_EQ(g1.sorted_pairs, rs.align.sorted_pairs);
  EXPECT_EQ(g1.block_expert, rs.align.block_expert);
  EXPECT_EQ(g1.padded_rows, rs.align.padded_rows);
  // Without the optional outputs: no ids written anywhere, the barrier alone zeroed.
  const RecordingLauncher bare = run(sorted, ds, {3, 4, 8, 9}, false, DType::bf16, 132);
  EXPECT_EQ(bare.launches[0].as<MoeZeroArgs>().count, 1);
  const auto rb = bare.launches[1].as<MoeRouteSortArgs>();
  EXPECT_EQ(rb.route.topk_ids, nullptr);
  EXPECT_EQ(rb.route.aux_loss, nullptr);
  expect_inside(rb.route.topk_weights, 4u * 128 * 8, ws, "weights");
  // The workspace: no routed ids, no aux region of its own, the scratch instead.
  EXPECT_NE(ws, op().workspace_bytes(plain, ds, DType::bf16));
  // A GPU with fewer SMs than blocks cannot hold them all: refused before any launch.
  EXPECT_THROW(run(sorted, ds, {}, false, DType::bf16, 16), InvalidArgument);
}

TEST(MoeRun, PrecomputedAndReference) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(std::string(kMixtral) + ",routing=precomputed", 3);
  const Params params = op().default_params(p, DType::bf16, h100);
  const RecordingLauncher l = run(params, p, {1, 2, 8, 9});
  ASSERT_EQ(l.launches.size(), 4u);
  EXPECT_EQ(l.launches[0].as<MoeAlignArgs>().topk_ids, reinterpret_cast<const int*>(0x40000));
  EXPECT_EQ(l.launches[0].launch.grid[0], 1u);
  EXPECT_THROW(run(params, p, {3}), InvalidArgument);

  // With a workspace (the tuner's): route + stats, then the sampled parallel MLP (act, out);
  // the choices land in the workspace and every sampled row is written.
  const RecordingLauncher ref = run(params, p, {}, true);
  ASSERT_EQ(ref.launches.size(), 4u);
  const auto a = ref.launches[0].as<MoeReferenceArgs>();
  EXPECT_NE(a.choice_n, nullptr);
  EXPECT_EQ(a.max_choices, 2);
  const auto mlp = ref.launches[2].as<MoeRefMlpArgs>();
  EXPECT_EQ(mlp.choice_n, a.choice_n);
  EXPECT_EQ(mlp.sample_stride, 1) << "t=3: every row";
  EXPECT_EQ(ref.launches[2].launch.grid[0], 3u);
  EXPECT_EQ(ref.launches[2].launch.grid[1], (14336u + kMoeRefCols - 1) / kMoeRefCols);
  EXPECT_EQ(ref.launches[3].launch.grid[1], (4096u + kMoeRefCols - 1) / kMoeRefCols);
  const std::size_t ref_ws = op().reference_workspace_bytes(p, DType::bf16);
  for (const void* ptr : {static_cast<const void*>(mlp.choice_id), static_cast<const void*>(mlp.choice_w),
                          static_cast<const void*>(mlp.choice_n), static_cast<const void*>(mlp.act)})
    expect_inside(ptr, 4, ref_ws, "reference workspace");
  // Large t: at most 256 rows sampled, and the tuner checks exactly those rows of y.
  const Problem big = problem(kMixtral, 4096);
  const auto sampled = run(op().default_params(big, DType::bf16, h100), big, {}, true);
  ASSERT_EQ(sampled.launches.size(), 4u);
  EXPECT_EQ(sampled.launches[2].as<MoeRefMlpArgs>().sample_stride, 16);
  EXPECT_EQ(sampled.launches[2].launch.grid[0], 256u);
  for (const TensorSpec& t : op().tensors(big, DType::bf16))
    if (t.name == "y") {
      EXPECT_EQ(t.verify_stride, 16);
      EXPECT_EQ(t.row_elements, 4096);
    }
  // Without a workspace (tests that compare every row themselves): route + stats only, the
  // MLP of every token in moe_reference_kernel.
  {
    std::uint64_t tensors[10];
    for (int i = 0; i < 10; ++i) tensors[i] = 0x10000ull * (i + 1);
    KernelHandle kernels[4] = {};
    const double scaling = 1.0;
    RunArgs bare;
    bare.problem = &p;
    bare.tensors = tensors;
    bare.scalars = &scaling;
    bare.kernels = kernels;
    RecordingLauncher l0;
    op().run_reference(bare, l0);
    ASSERT_EQ(l0.launches.size(), 2u);
    EXPECT_EQ(l0.launches[0].as<MoeReferenceArgs>().choice_n, nullptr);
  }
  EXPECT_EQ(ref.launches[0].launch.grid[0], 3u);
  EXPECT_EQ(a.ids_in, reinterpret_cast<const int*>(0x40000));
  EXPECT_EQ(a.logits, nullptr);
  EXPECT_EQ(a.aux_loss, nullptr);
  EXPECT_EQ(a.y, reinterpret_cast<float*>(0x80000));
  const Problem ds = problem(kDeepSeek, 9);
  const auto b = run(op().default_params(ds, DType::bf16, h100), ds, {}, true)
                     .launches[0].as<MoeReferenceArgs>();
  EXPECT_EQ(b.topk_ids, reinterpret_cast<float*>(0x40000));
  EXPECT_EQ(b.correction_bias, reinterpret_cast<const float*>(0x30000));
  EXPECT_EQ(b.routed_scaling, 2.5f);
  EXPECT_EQ(b.n_group, 8);
}

// ---- expert choice ----

TEST(MoeExpertChoice, ProblemTensorsAndReasons) {
  const Problem p = problem(kExpertChoice, 1000);
  EXPECT_EQ(p.values[5], moe_expert_choice);
  EXPECT_EQ(op().problem_key(p),
            "e=64,k=8,h=2048,i=1408,t=1000,routing=expert_choice,n_group=1,topk_group=1");
  EXPECT_EQ(problem_error(std::string(kExpertChoice) + ",t=3"), "");
  EXPECT_TRUE(contains(problem_error(std::string(kExpertChoice) + ",t=3,n_group=2"),
                       "apply to routing=sigmoid_group only"));
  // C = ceil(1000 * 8 / 64) = 125 tokens per expert: ids and weights [E * C], expert-major.
  const auto specs = op().tensors(p, DType::bf16);
  EXPECT_EQ(specs[1].elements, 1000 * 64);  // logits in
  EXPECT_EQ(specs[2].elements, 0);
  EXPECT_EQ(specs[3].elements, 64 * 125);
  EXPECT_EQ(specs[3].role, TensorRole::output);
  EXPECT_TRUE(specs[3].optional);
  EXPECT_EQ(specs[4].elements, 64 * 125);
  EXPECT_EQ(specs[8].elements, 64);
  EXPECT_EQ(specs[9].elements, 0);  // no aux loss
  EXPECT_EQ(op().tensors(problem(kExpertChoice, 3), DType::bf16)[3].elements, 64 * 1);
  // The work done is E * C pairs; every expert's weights are touched.
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16),
                   2.0 * 64 * 125 * (2048.0 * 2 * 1408 + 1408.0 * 2048));
  EXPECT_DOUBLE_EQ(op().min_bytes(problem(kExpertChoice, 1), DType::bf16),
                   64.0 * 3 * 2048 * 1408 * 2 + 2.0 * 2048 * 2 + 64 * 4);
}

TEST(MoeExpertChoice, TunablesWithoutEffectSayWhy) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kExpertChoice, 1000);
  const Params d = op().default_params(p, DType::bf16, h100);
  EXPECT_EQ(op().invalid_reason(d, p, DType::bf16, h100), std::nullopt) << op().params_key(d);
  EXPECT_EQ(op().param(d, "align_chunk"), 0);
  EXPECT_EQ(op().param(d, "route_lanes"), 8);
  EXPECT_EQ(op().param(d, "route_vec"), 1);
  Params q = d;
  q.values[op().param_index("route_vec")] = 4;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::bf16, h100).value_or(""),
                       "no effect with routing=expert_choice"));
  q = d;
  q.values[op().param_index("align_chunk")] = 4096;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::bf16, h100).value_or(""),
                       "align_chunk has no effect with routing=expert_choice"));
  q = d;
  q.values[op().param_index("split2")] = 2;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::bf16, h100).value_or(""),
                       "split2=2 with routing=expert_choice"));
  // k = 1 still combines (pair_out is [E * C, H], never y's layout): combine_vec is searched.
  const Problem k1 = problem("e=8,k=1,h=256,i=128,routing=expert_choice", 100);
  Params r = op().default_params(k1, DType::bf16, h100);
  for (std::int64_t vec : {4, 8}) {
    r.values[op().param_index("combine_vec")] = vec;
    EXPECT_EQ(op().invalid_reason(r, k1, DType::bf16, h100), std::nullopt) << vec;
  }
  // block_m pruning counts C rows per expert: t=1, k=8, e=64 gives C=1.
  const Problem one = problem(kExpertChoice, 1);
  Params b = op().default_params(one, DType::bf16, h100);
  EXPECT_EQ(op().param(b, "block_m"), 16);
  b.values[op().param_index("block_m")] = 32;
  EXPECT_TRUE(contains(op().invalid_reason(b, one, DType::bf16, h100).value_or(""),
                       "a larger block only adds padding rows"));
  const Space space(op(), p, DType::bf16, h100);
  std::size_t valid = 0;
  for (const SpacePoint& pt : space.sample(3000000, 3)) valid += pt.invalid ? 0 : 1;
  std::printf("%zu valid of 3000000 sampled points\n", valid);
  EXPECT_GT(valid, 0u);
}

TEST(MoeExpertChoice, KernelsLaunchesAndWorkspace) {
  const DeviceInfo h100 = device("sm_90a");
  for (const std::string& shape :
       {std::string(kExpertChoice), std::string("e=8,k=1,h=136,i=200,routing=expert_choice")}) {
    for (int t : {1, 17, 1000}) {
      const Problem p = problem(shape, t);
      const std::string what = shape + " t=" + std::to_string(t);
      const Params params = op().default_params(p, DType::bf16, h100);
      EXPECT_EQ(kernel_names(params, p),
                (std::vector<std::string>{"moe_expert_choice_scores_kernel",
                                          "moe_expert_choice_select_kernel", "moe_gemm_kernel",
                                          "moe_gemm_kernel", "moe_expert_choice_combine_kernel"}))
          << what;
      const auto ks = op().kernels(params, p, DType::bf16);
      EXPECT_EQ(ks[1].name_expression, "ktune::moe_expert_choice_select_kernel<1024>");
      const int E = static_cast<int>(op().dim(p, "e")), K = static_cast<int>(op().dim(p, "k"));
      const int H = static_cast<int>(op().dim(p, "h")), I = static_cast<int>(op().dim(p, "i"));
      const int bm = static_cast<int>(op().param(params, "block_m"));
      const int C = moe_expert_capacity(t, K, E);
      const long long rows = moe_expert_choice_padded(E, C, bm);
      const std::size_t ws = op().workspace_bytes(params, p, DType::bf16);

      const RecordingLauncher all = run(params, p);
      ASSERT_EQ(all.launches.size(), 5u) << what;
      for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(all.launches[i].launch.kernel, reinterpret_cast<KernelHandle>(0x100 + i));
        EXPECT_EQ(static_cast<int>(all.launches[i].launch.block[0]),
                  op().block_threads(params, p, DType::bf16, i));
        EXPECT_EQ(all.launches[i].launch.shared_bytes,
                  op().dynamic_shared_bytes(params, p, DType::bf16, i));
      }
      const auto sc = all.launches[0].as<MoeExpertChoiceArgs>();
      const auto se = all.launches[1].as<MoeExpertChoiceArgs>();
      EXPECT_EQ(all.launches[0].launch.grid[0], static_cast<unsigned>((t + 31) / 32));
      EXPECT_EQ(all.launches[1].launch.grid[0], static_cast<unsigned>(E));
      EXPECT_EQ(std::memcmp(&sc, &se, sizeof sc), 0);  // one argument struct for both
      EXPECT_EQ(se.logits, reinterpret_cast<const float*>(0x20000));
      EXPECT_EQ(se.pair_token, reinterpret_cast<int*>(0x40000));  // the caller's outputs
      EXPECT_EQ(se.pair_weight, reinterpret_cast<float*>(0x50000));
      EXPECT_EQ(se.expert_counts, reinterpret_cast<int*>(0x90000));
      EXPECT_EQ(se.tokens, t);
      EXPECT_EQ(se.experts, E);
      EXPECT_EQ(se.capacity, C);
      EXPECT_EQ(se.block_m, bm);
      expect_inside(se.scores, 4u * static_cast<std::size_t>(E) * t, ws, "scores");
      expect_inside(se.sorted_pairs, 4u * static_cast<std::size_t>(rows), ws, "sorted");
      expect_inside(se.block_expert, 4u * static_cast<std::size_t>(rows / bm), ws, "blocks");
      expect_inside(se.padded_rows, 4u, ws, "padded_rows");
      const auto g1 = all.launches[2].as<MoeGemmArgs>();
      const auto g2 = all.launches[3].as<MoeGemmArgs>();
      EXPECT_EQ(all.launches[2].launch.grid[0], static_cast<unsigned>(rows / bm));
      EXPECT_EQ(all.launches[3].launch.grid[0], static_cast<unsigned>(rows / bm));
      EXPECT_EQ(all.launches[2].launch.grid[1],
                moe_gemm_grid_y(I, static_cast<int>(op().param(params, "bn1"))));
      EXPECT_EQ(all.launches[3].launch.grid[1],
                moe_gemm_grid_y(H, static_cast<int>(op().param(params, "bn2"))));
      EXPECT_EQ(g1.a, reinterpret_cast<const void*>(0x10000));
      EXPECT_EQ(g1.pair_token, se.pair_token);  // x gathered through the chosen tokens
      EXPECT_EQ(g1.pairs, E * C);
      EXPECT_EQ(g1.sorted_pairs, se.sorted_pairs);
      EXPECT_EQ(g1.block_expert, se.block_expert);
      EXPECT_EQ(g1.padded_rows, se.padded_rows);
      EXPECT_EQ(g1.max_blocks, rows / bm);
      expect_inside(g1.out, 2u * static_cast<std::size_t>(rows) * I, ws, "act");
      EXPECT_EQ(g2.a, g1.out);
      EXPECT_EQ(g2.pair_token, nullptr);
      EXPECT_EQ(g2.topk_weights, se.pair_weight);
      EXPECT_EQ(g2.n, H);
      EXPECT_GE(reinterpret_cast<std::uintptr_t>(g2.out), kWorkspace);  // never y, even at k=1
      expect_inside(g2.out, 2u * static_cast<std::size_t>(E) * C * H, ws, "pair_out");
      const auto cb = all.launches[4].as<MoeExpertChoiceCombineArgs>();
      EXPECT_EQ(cb.pair_out, g2.out);
      EXPECT_EQ(cb.pair_token, se.pair_token);
      EXPECT_EQ(cb.y, reinterpret_cast<void*>(0x80000));
      EXPECT_EQ(cb.capacity, C);
      EXPECT_EQ(all.launches[4].launch.grid[0], static_cast<unsigned>(t));
      EXPECT_EQ(all.launches[4].launch.grid[1],
                moe_combine_grid_y(H, 128, static_cast<int>(op().param(params, "combine_vec"))));

      // Without the optional outputs: tokens and weights in the workspace, no counts.
      const RecordingLauncher bare = run(params, p, {3, 4, 8, 9});
      ASSERT_EQ(bare.launches.size(), 5u) << what;
      const auto b = bare.launches[1].as<MoeExpertChoiceArgs>();
      expect_inside(b.pair_token, 4u * static_cast<std::size_t>(E) * C, ws, "tokens");
      expect_inside(b.pair_weight, 4u * static_cast<std::size_t>(E) * C, ws, "weights");
      EXPECT_GE(reinterpret_cast<std::uintptr_t>(b.pair_token), kWorkspace);
      EXPECT_EQ(b.expert_counts, nullptr);
      EXPECT_EQ(bare.launches[2].as<MoeGemmArgs>().pair_token, b.pair_token);
      EXPECT_EQ(bare.launches[3].as<MoeGemmArgs>().topk_weights, b.pair_weight);
      EXPECT_EQ(bare.launches[4].as<MoeExpertChoiceCombineArgs>().pair_token, b.pair_token);
    }
  }
}

TEST(MoeExpertChoice, ReferenceSelectsFirst) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kExpertChoice, 9);
  const auto ks = op().reference_kernels(p, DType::bf16);
  ASSERT_EQ(ks.size(), op().reference_kernels(problem(kMixtral, 9), DType::bf16).size() + 1);
  EXPECT_EQ(ks.back().name_expression, "ktune::moe_reference_expert_choice_kernel");
  const RecordingLauncher ref = run(op().default_params(p, DType::bf16, h100), p, {}, true);
  ASSERT_GE(ref.launches.size(), 3u);
  EXPECT_EQ(ref.launches[0].launch.kernel, reinterpret_cast<KernelHandle>(0x100 + ks.size() - 1));
  EXPECT_EQ(ref.launches[0].launch.grid[0], 64u);  // one block per expert
  EXPECT_EQ(ref.launches[1].launch.kernel, reinterpret_cast<KernelHandle>(0x100));
  EXPECT_EQ(ref.launches[1].launch.grid[0], 9u);   // then one per token
  const auto a = ref.launches[0].as<MoeReferenceArgs>();
  EXPECT_EQ(a.routing, moe_expert_choice);
  EXPECT_EQ(a.logits, reinterpret_cast<const float*>(0x20000));
  EXPECT_EQ(a.topk_ids, reinterpret_cast<float*>(0x40000));
  EXPECT_EQ(a.topk_weights, reinterpret_cast<float*>(0x50000));
  EXPECT_EQ(a.aux_loss, nullptr);
  EXPECT_EQ(a.correction_bias, nullptr);
}

// ---- FP8 (e4m3) weights ----

// e4m3: w1 and w2 in FP8 with per-channel scales, x and y in bf16; the space keeps the mma.sync
// and warp-specialised GEMMs with e4m3-sized tiles and says why for the rest.
TEST(MoeFp8, TensorsSpaceAndReasons) {
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = problem(kMixtral, 64);
  const auto specs = op().tensors(p, DType::e4m3);
  ASSERT_EQ(specs.size(), 12u);
  EXPECT_EQ(specs[0].dtype, DType::bf16);  // x
  EXPECT_EQ(specs[5].dtype, DType::e4m3);  // w1
  EXPECT_EQ(specs[6].dtype, DType::e4m3);  // w2
  EXPECT_EQ(specs[7].dtype, DType::bf16);  // y
  EXPECT_EQ(specs[10].name, "w1_scale");
  EXPECT_EQ(specs[10].elements, 8LL * 2 * 14336);
  EXPECT_FALSE(specs[10].optional);
  EXPECT_EQ(specs[11].name, "w2_scale");
  EXPECT_EQ(specs[11].elements, 8LL * 4096);
  const auto bf = op().tensors(p, DType::bf16);
  EXPECT_EQ(bf[10].elements, 0);  // unused with 16-bit weights
  EXPECT_TRUE(bf[10].optional);

  const Params d = op().default_params(p, DType::e4m3, h100);
  EXPECT_EQ(op().invalid_reason(d, p, DType::e4m3, h100), std::nullopt);
  EXPECT_EQ(op().param(d, "impl1"), 0);
  EXPECT_EQ(op().param(d, "bk1"), 2 * op().param(op().default_params(p, DType::bf16, h100), "bk1"));
  const auto with = [&](const char* name, std::int64_t v) {
    Params q = d;
    q.values[op().param_index(name)] = v;
    return op().invalid_reason(q, p, DType::e4m3, h100).value_or("");
  };
  EXPECT_TRUE(contains(with("impl2", 1), "the cp.async wgmma kernel takes bf16 and fp16"))
      << with("impl2", 1);
  {
    // Many rows per expert: the default takes the warp-specialised kernel, whose k-tiles are
    // one 128-byte row: 128 e4m3 elements.
    const Problem big = problem(kMixtral, 4096);
    Params ws = op().default_params(big, DType::e4m3, h100);
    EXPECT_EQ(op().param(ws, "impl1"), 2);
    EXPECT_EQ(op().param(ws, "impl2"), 2);
    EXPECT_EQ(op().param(ws, "bk1"), 128);
    EXPECT_EQ(op().invalid_reason(ws, big, DType::e4m3, h100), std::nullopt);
    EXPECT_EQ(op().param(ws, "bn1"), 64);  // gemm1's second accumulator set (fp32 promotion)
    Params wide = ws;
    wide.values[op().param_index("bn1")] = 128;
    EXPECT_TRUE(contains(op().invalid_reason(wide, big, DType::e4m3, h100).value_or(""),
                         "bn1 at most 64, not 128"));
    ws.values[op().param_index("bk1")] = 64;
    EXPECT_TRUE(contains(op().invalid_reason(ws, big, DType::e4m3, h100).value_or(""),
                         "bk1=128, not 64"));
  }
  EXPECT_TRUE(contains(with("bk1", 32), "e4m3 tiles take BLOCK_K 64, 128 or 256"))
      << with("bk1", 32);
  EXPECT_TRUE(contains(op().invalid_reason(d, p, DType::e4m3, device("sm_80")).value_or(""),
                       "dtype e4m3 needs FP8 tensor cores (compute capability 8.9 or later)"));
  const Problem odd = op().parse_problem("e=8,k=2,h=4104,i=1000,t=5");
  EXPECT_TRUE(contains(op().invalid_reason(op().default_params(odd, DType::e4m3, h100), odd,
                                           DType::e4m3, h100).value_or(""),
                       "H must be a positive multiple of 16 (e4m3)"));
  // Every default valid over shapes and token counts; the space has valid points.
  for (const std::string& shape : {std::string(kMixtral), std::string(kDeepSeek),
                                    std::string(kExpertChoice), std::string("e=4,k=1,h=64,i=48")})
    for (int t : {1, 16, 128, 1000, 4096}) {
      const Problem q = problem(shape, t);
      EXPECT_EQ(op().invalid_reason(op().default_params(q, DType::e4m3, h100), q, DType::e4m3,
                                    h100),
                std::nullopt)
          << shape << " t=" << t;
    }
  // A sample of the space (too large to list) has valid points, none on the cp.async wgmma
  // kernel, each with e4m3's k steps (the warp-specialised point is the default above).
  const Space space(op(), problem(kDeepSeek, 1024), DType::e4m3, h100);
  std::size_t valid = 0;
  for (const SpacePoint& pt : space.sample(300000, 11)) {
    if (pt.invalid) continue;
    ++valid;
    for (const char* n : {"1", "2"}) {
      const auto impl = op().param(pt.params, std::string("impl") + n);
      EXPECT_NE(impl, 1);
      EXPECT_GE(op().param(pt.params, std::string("bk") + n), impl == 2 ? 128 : 64);
      EXPECT_EQ(op().param(pt.params, std::string("persist") + n), 0);  // 16-bit only
    }
  }
  EXPECT_GT(valid, 0u);
}

// The quantisation kernels run before each GEMM, which read their e4m3 rows and scales; the
// combine and the reference take bf16 x and y.
TEST(MoeFp8, KernelsAndLaunches) {
  const DeviceInfo h100 = device("sm_90a");
  for (const std::string& shape : {std::string(kDeepSeek), std::string(kExpertChoice)}) {
    const bool ec = shape == kExpertChoice;
    const int t = 37;
    const Problem p = problem(shape, t);
    const Params d = op().default_params(p, DType::e4m3, h100);
    const auto names = kernel_names(d, p, DType::e4m3);
    const auto at = [&](const char* name) {
      return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) -
                                      names.begin());
    };
    const std::size_t g1 = at("moe_gemm_kernel");
    ASSERT_LT(g1 + 2, names.size());
    EXPECT_EQ(names[g1 - 1], "moe_quant_rows_kernel");
    EXPECT_EQ(names[g1 + 1], "moe_quant_rows_kernel");
    EXPECT_EQ(names[g1 + 2], "moe_gemm_kernel");
    const auto ks = op().kernels(d, p, DType::e4m3);
    EXPECT_TRUE(contains(ks[g1].name_expression, "moe_gemm_kernel<ktune::e4m3, "));
    EXPECT_TRUE(contains(ks.back().name_expression, "<ktune::bf16, ")) << ks.back().name_expression;
    EXPECT_EQ(op().reference_kernels(p, DType::e4m3)[0].name_expression,
              "ktune::moe_reference_kernel<ktune::bf16, ktune::e4m3>");

    const std::size_t ws = op().workspace_bytes(d, p, DType::e4m3);
    const RecordingLauncher l = run(d, p, {}, false, DType::e4m3);
    ASSERT_EQ(l.launches.size(), ks.size()) << shape;
    const int E = static_cast<int>(op().dim(p, "e")), H = static_cast<int>(op().dim(p, "h"));
    const int I = static_cast<int>(op().dim(p, "i"));
    const auto qx = l.launches[g1 - 1].as<MoeQuantArgs>();
    const auto a1 = l.launches[g1].as<MoeGemmArgs>();
    const auto qa = l.launches[g1 + 1].as<MoeQuantArgs>();
    const auto a2 = l.launches[g1 + 2].as<MoeGemmArgs>();
    EXPECT_EQ(qx.in, reinterpret_cast<const void*>(0x10000));  // x
    EXPECT_EQ(qx.rows, t);
    EXPECT_EQ(qx.n, H);
    EXPECT_EQ(qx.padded_rows, nullptr);
    EXPECT_EQ(l.launches[g1 - 1].launch.grid[0], static_cast<unsigned>(t));
    expect_inside(qx.out, static_cast<std::size_t>(t) * H, ws, "xq");
    expect_inside(qx.scale, 4u * t, ws, "xs");
    EXPECT_EQ(a1.a, qx.out);
    EXPECT_EQ(a1.a_scale, qx.scale);
    EXPECT_EQ(a1.w_scale, reinterpret_cast<const float*>(0xb0000));  // w1_scale
    EXPECT_EQ(qa.in, a1.out);
    EXPECT_EQ(qa.n, I);
    EXPECT_EQ(qa.padded_rows, a1.padded_rows);
    EXPECT_EQ(qa.sorted_pairs, a1.sorted_pairs);
    EXPECT_EQ(qa.pairs, a1.pairs);
    EXPECT_EQ(l.launches[g1 + 1].launch.grid[0], static_cast<unsigned>(qa.rows));
    expect_inside(qa.out, static_cast<std::size_t>(qa.rows) * I, ws, "actq");
    expect_inside(qa.scale, 4u * qa.rows, ws, "acts");
    expect_inside(a1.out, 2u * static_cast<std::size_t>(qa.rows) * I, ws, "act");
    EXPECT_EQ(a2.a, qa.out);
    EXPECT_EQ(a2.a_scale, qa.scale);
    EXPECT_EQ(a2.w_scale, reinterpret_cast<const float*>(0xc0000));  // w2_scale
    EXPECT_EQ(op().block_threads(d, p, DType::e4m3, g1 - 1), kMoeQuantThreads);
    if (!ec) {
      EXPECT_GE(qa.rows, t * 8);
    }
    (void)E;
    // Without the scales: one clear message.
    try {
      run(d, p, {10}, false, DType::e4m3);
      ADD_FAILURE() << "no w1_scale accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "moe: dtype e4m3 needs w1_scale")) << e.what();
    }
    // The reference dequantises with the same scales.
    const RecordingLauncher r = run(d, p, {}, true, DType::e4m3);
    const auto ra = r.launches[ec ? 1 : 0].as<MoeReferenceArgs>();
    EXPECT_EQ(ra.w1_scale, reinterpret_cast<const float*>(0xb0000));
    EXPECT_EQ(ra.w2_scale, reinterpret_cast<const float*>(0xc0000));
  }
}

// ---- past 256 experts ----

/// The problem's non-GEMM kernels' name expressions (routing, alignment, combines) at the
/// default configuration with `set` (tunable=value pairs) on top, on the H100.
std::vector<std::string> plan_names(const std::string& shape, int t, const std::string& set) {
  const Problem p = problem(shape, t);
  Params q = op().default_params(p, DType::bf16, device("sm_90a"));
  std::size_t at = 0;
  while (at < set.size()) {
    std::size_t end = set.find(',', at);
    if (end == std::string::npos) end = set.size();
    const std::string item = set.substr(at, end - at);
    const std::size_t eq = item.find('=');
    q.values[op().param_index(item.substr(0, eq))] = std::stoll(item.substr(eq + 1));
    at = end + 1;
  }
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, device("sm_90a")), std::nullopt)
      << shape << " t=" << t << " " << set;
  std::vector<std::string> out;
  for (const KernelSource& k : op().kernels(q, p, DType::bf16))
    if (!contains(k.name_expression, "gemm") && !contains(k.name_expression, "moe_zero_kernel") &&
        !contains(k.name_expression, "moe_combine_kernel"))
      out.push_back(k.name_expression);
  return out;
}

// Up to 256 experts every kernel keeps the name expression (and so the kernel) the shipped
// databases were tuned with: no EMAX argument, its default 256. Past 256 the same kernels take
// EMAX 512 (the expert-choice scores and reference stats kernels their `_wide` forms).
TEST(MoeWide, NameExpressionsUpTo256ExpertsAreUnchanged) {
  const std::string ds256 =
      "e=256,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,topk_group=4";
  const std::string sep = "fuse_route=0,align_chunk=0,route_lanes=32,route_vec=1";
  const std::string chunked = "fuse_route=0,align_chunk=4096,route_lanes=32,route_vec=1";
  const std::string one = "fuse_route=1,align_chunk=0,route_lanes=32,route_vec=1";
  const std::string grid = "fuse_route=2,align_chunk=0,route_lanes=32,route_vec=1";
  // e = 8 (Mixtral), 4-float loads at 8 lanes: one item.
  const std::string narrow = "fuse_route=0,align_chunk=0,route_lanes=8,route_vec=4";
  EXPECT_EQ(plan_names(kMixtral, 100, narrow),
            (std::vector<std::string>{"ktune::moe_route_kernel<1, 128, 8, 4, 1>",
                                      "ktune::moe_align_kernel<128>"}));
  EXPECT_EQ(plan_names(kMixtral, 16, "fuse_route=1,align_chunk=0,route_lanes=8,route_vec=4"),
            (std::vector<std::string>{"ktune::moe_route_align_kernel<1, 1024, 8, 4, 1>"}));
  EXPECT_EQ(plan_names(kMixtral, 4096, "fuse_route=0,align_chunk=4096,route_lanes=8,route_vec=4"),
            (std::vector<std::string>{"ktune::moe_route_kernel<1, 128, 8, 4, 1>",
                                      "ktune::moe_align_count_kernel<256, 4096>",
                                      "ktune::moe_align_scan_kernel<256, 4096>",
                                      "ktune::moe_align_scatter_kernel<256, 4096>"}));
  // e = 256 (DeepSeek-V3): 8 scores per lane at 32 lanes.
  EXPECT_EQ(plan_names(ds256, 1000, sep),
            (std::vector<std::string>{"ktune::moe_route_kernel<2, 128, 32, 1, 8>",
                                      "ktune::moe_align_kernel<1024>"}));
  EXPECT_EQ(plan_names(ds256, 1000, chunked),
            (std::vector<std::string>{"ktune::moe_route_kernel<2, 128, 32, 1, 8>",
                                      "ktune::moe_align_count_kernel<256, 4096>",
                                      "ktune::moe_align_scan_kernel<256, 4096>",
                                      "ktune::moe_align_scatter_kernel<256, 4096>"}));
  EXPECT_EQ(plan_names(ds256, 16, one),
            (std::vector<std::string>{"ktune::moe_route_align_kernel<2, 1024, 32, 1, 8>"}));
  EXPECT_EQ(plan_names(ds256, 16, grid),
            (std::vector<std::string>{"ktune::moe_route_sort_kernel<2, 128, 32, 1, 8>"}));
  EXPECT_EQ(plan_names("e=256,k=8,h=7168,i=2048,routing=expert_choice", 100, ""),
            (std::vector<std::string>{"ktune::moe_expert_choice_scores_kernel",
                                      "ktune::moe_expert_choice_select_kernel<1024>",
                                      "ktune::moe_expert_choice_combine_kernel<ktune::bf16, 128, "
                                      "8>"}));
  for (const char* shape : {kMixtral, "e=256,k=8,h=7168,i=2048,routing=expert_choice"}) {
    std::vector<std::string> ref;
    for (const KernelSource& k : op().reference_kernels(problem(shape, 7), DType::bf16))
      ref.push_back(k.name_expression);
    ref.resize(4);
    EXPECT_EQ(ref, (std::vector<std::string>{
                       "ktune::moe_reference_kernel<ktune::bf16, ktune::bf16>",
                       "ktune::moe_reference_stats_kernel",
                       "ktune::moe_reference_act_kernel<ktune::bf16, ktune::bf16>",
                       "ktune::moe_reference_out_kernel<ktune::bf16>"}))
        << shape;
  }

  // Past 256: the same configurations name EMAX 512; the one-block align kernel at most 512
  // threads (8000 pairs would take 1024 up to 256 experts), route + align in one block 256.
  const std::string ds384 =
      "e=384,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,topk_group=4";
  EXPECT_EQ(plan_names(ds384, 1000, sep),
            (std::vector<std::string>{"ktune::moe_route_kernel<2, 128, 32, 1, 12, 512>",
                                      "ktune::moe_align_kernel<512, 512>"}));
  EXPECT_EQ(plan_names(ds384, 1000, chunked),
            (std::vector<std::string>{"ktune::moe_route_kernel<2, 128, 32, 1, 12, 512>",
                                      "ktune::moe_align_count_kernel<256, 4096, 512>",
                                      "ktune::moe_align_scan_kernel<256, 4096, 512>",
                                      "ktune::moe_align_scatter_kernel<256, 4096, 512>"}));
  EXPECT_EQ(plan_names(ds384, 16, one),
            (std::vector<std::string>{"ktune::moe_route_align_kernel<2, 256, 32, 1, 12, 512>"}));
  EXPECT_EQ(plan_names(ds384, 16, grid),
            (std::vector<std::string>{"ktune::moe_route_sort_kernel<2, 128, 32, 1, 12, 512>"}));
  EXPECT_EQ(plan_names("e=257,k=2,h=64,i=64", 3, sep),
            (std::vector<std::string>{"ktune::moe_route_kernel<1, 128, 32, 1, 9, 512>",
                                      "ktune::moe_align_kernel<128, 512>"}));
  EXPECT_EQ(plan_names(kQwenChoice, 100, ""),
            (std::vector<std::string>{"ktune::moe_expert_choice_scores_wide_kernel<512>",
                                      "ktune::moe_expert_choice_select_kernel<1024>",
                                      "ktune::moe_expert_choice_combine_kernel<ktune::bf16, 128, "
                                      "8, 512>"}));
  std::vector<std::string> ref;
  for (const KernelSource& k : op().reference_kernels(problem(kQwenChoice, 7), DType::e4m3))
    ref.push_back(k.name_expression);
  EXPECT_EQ(ref, (std::vector<std::string>{
                     "ktune::moe_reference_kernel<ktune::bf16, ktune::e4m3, 512>",
                     "ktune::moe_reference_stats_wide_kernel<512>",
                     "ktune::moe_reference_act_kernel<ktune::bf16, ktune::e4m3>",
                     "ktune::moe_reference_out_kernel<ktune::e4m3, 512>",
                     "ktune::moe_reference_expert_choice_kernel"}));
}

// Past 256 experts: every launch's block is the plan's thread count (the align kernel at most
// 512 threads, route + align in one block at most 256: their per-warp arrays of 512 experts in
// shared memory), the grids follow the upper bounds, and every per-expert region (counts, aux
// scratch, the multi-block align's and the route grid's scratch, expert choice's scores) lies
// inside the workspace at its size for e.
TEST(MoeWide, LaunchesAndWorkspacePast256Experts) {
  const DeviceInfo h100 = device("sm_90a");
  const std::vector<std::pair<std::string, std::string>> plans = {
      {kKimi, "fuse_route=0,align_chunk=0"},
      {kKimi, "fuse_route=0,align_chunk=4096"},
      {kKimiGroup, "fuse_route=0,align_chunk=0"},
      {kKimiGroup, "fuse_route=1,align_chunk=0"},
      {kKimiGroup, "fuse_route=2,align_chunk=0"},
      {kQwenNext, "fuse_route=1,align_chunk=0,route_lanes=8,route_vec=1"},
      {kQwenNext, "fuse_route=2,align_chunk=0,route_lanes=8,route_vec=4"},
      {kKimiPre, "align_chunk=0"},
      {kKimiPre, "align_chunk=4096"},
      {kQwenChoice, ""}};
  for (const auto& [shape, set] : plans)
    for (int t : {1, 77, 1000, 5000}) {
      const Problem p = problem(shape, t);
      Params q = op().default_params(p, DType::bf16, h100);
      for (const char* n : {"impl1", "impl2"})  // tensor maps need the driver (see above)
        if (op().param(q, n) == 2) q.values[op().param_index(n)] = 1;
      q = with_values(q, set);
      const std::string what = shape + " t=" + std::to_string(t) + " " + set;
      if (const auto why = op().invalid_reason(q, p, DType::bf16, h100)) {
        // fuse_route past its token bounds, one chunk of pairs: said, as at any e.
        EXPECT_TRUE(contains(*why, "fuse_route=") || contains(*why, "align_chunk=")) << what
                                                                                    << *why;
        continue;
      }
      const int E = static_cast<int>(op().dim(p, "e"));
      const int K = static_cast<int>(op().dim(p, "k"));
      const auto ks = op().kernels(q, p, DType::bf16);
      const std::size_t ws = op().workspace_bytes(q, p, DType::bf16);
      const RecordingLauncher all = run(q, p, {}, false, DType::bf16, 132);
      ASSERT_EQ(all.launches.size(), ks.size()) << what;
      for (std::size_t i = 0; i < ks.size(); ++i) {
        const KernelLaunch& l = all.launches[i].launch;
        const std::string& name = ks[i].name_expression;
        EXPECT_EQ(static_cast<int>(l.block[0]), op().block_threads(q, p, DType::bf16, i))
            << what << " " << name;
        if (contains(name, "moe_align_kernel<")) {
          EXPECT_LE(l.block[0], 512u) << what;
          const auto al = all.launches[i].as<MoeAlignArgs>();
          EXPECT_EQ(al.experts, E);
          expect_inside(al.expert_counts, 4u * E, ws, "counts");
        }
        if (contains(name, "moe_align_count_kernel")) {
          const auto al = all.launches[i].as<MoeAlignArgs>();
          expect_inside(al.scratch, 4u * moe_align_scratch_ints(al.pairs, E, 4096), ws,
                        "align scratch");
        }
        if (contains(name, "moe_route_kernel")) {
          const auto r = all.launches[i].as<MoeRouteArgs>();
          EXPECT_EQ(r.experts, E);
          expect_inside(r.aux_scratch, 8u * (2 * E + 1), ws, "aux scratch");
        }
        if (contains(name, "moe_route_align_kernel")) {
          EXPECT_LE(l.block[0], 256u) << what;
          EXPECT_EQ(l.grid[0], 1u);
        }
        if (contains(name, "moe_route_sort_kernel")) {
          const auto rs = all.launches[i].as<MoeRouteSortArgs>();
          expect_inside(rs.scratch, 8u * moe_sort_header(E) + 4u * l.grid[0] * E, ws,
                        "sort scratch");
          EXPECT_LE(static_cast<long long>(l.grid[0]) * E, kMoeSortMaxTable) << what;
        }
        if (contains(name, "moe_expert_choice_scores_wide_kernel")) {
          EXPECT_EQ(l.grid[0], static_cast<unsigned>((t + 15) / 16)) << what;
          const auto ec = all.launches[i].as<MoeExpertChoiceArgs>();
          expect_inside(ec.scores, 4u * static_cast<std::size_t>(E) * t, ws, "scores");
          expect_inside(ec.sorted_pairs,
                        4u * static_cast<std::size_t>(moe_expert_choice_padded(
                                 E, ec.capacity, static_cast<int>(op().param(q, "block_m")))),
                        ws, "sorted");
        }
        if (contains(name, "moe_expert_choice_select_kernel")) {
          EXPECT_EQ(l.grid[0], static_cast<unsigned>(E));
        }
        if (contains(name, "moe_expert_choice_combine_kernel")) {
          EXPECT_TRUE(contains(name, ", 512>")) << name;
          EXPECT_EQ(all.launches[i].as<MoeExpertChoiceCombineArgs>().experts, E);
        }
      }
      // The reference: its kernels' EMAX and, with expert choice, up to e choices per token in
      // its workspace.
      const RecordingLauncher ref = run(q, p, {}, true);
      const std::size_t ref_ws = op().reference_workspace_bytes(p, DType::bf16);
      const auto ra = ref.launches[shape == kQwenChoice ? 1 : 0].as<MoeReferenceArgs>();
      EXPECT_EQ(ra.experts, E);
      EXPECT_EQ(ra.max_choices, shape == kQwenChoice ? E : K) << what;
      expect_inside(ra.choice_id, 4u * static_cast<std::size_t>(t) * ra.max_choices, ref_ws,
                    "reference choices");
    }
}

}  // namespace
}  // namespace ktune
