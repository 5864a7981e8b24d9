// The MoE op's launches of its warp-specialised GEMMs without a GPU: their tensor maps are
// encoded by the driver, so ctest runs this test over the stub driver of
// tests/support/stub_driver.c (tests/CMakeLists.txt); moe_run_test.cpp checks the other
// launches (moe_op_test compiles kernels with NVRTC, which the stub would break).
#include "runtime/core/driver.hpp"
#include "tests/moe_run_support.hpp"

namespace ktune {
namespace {

using namespace moe_test;

// gather1=2: moe_gather_rows_kernel between the alignment (or expert choice's select) and gemm1,
// a block per row of the upper bound, writing x's rows in sorted order into the workspace, which
// gemm1 then reads; cluster1/cluster2=3: the GEMMs' grid y rounded up to even, in clusters of
// (1, 2), the act map's box half the rows (the weights' box unchanged). The warp-specialised
// GEMMs encode tensor maps: ctest runs this binary over the stub driver (tests/CMakeLists.txt).
TEST(MoeWsLaunch, SortedGatherBeforeGemm1AndColumnClusters) {
  if (!Driver::available()) GTEST_SKIP() << "no driver to encode tensor maps (ctest's stub)";
  const DeviceInfo h100 = device("sm_90a");
  const std::string wide =
      "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
      "impl1=2,bn2=256,bk2=64,warps2=8,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,"
      "impl2=2,align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  // i = 1408: 11 column blocks of gemm1 (an odd grid y); h = 2048: 8 of gemm2.
  for (const char* shape : {"e=8,k=2,h=2048,i=1408", kExpertChoice}) {
    const Problem p = problem(shape, 1000);
    const Params plain = op().parse_params(wide);
    const Params g = op().parse_params(wide + ",gather1=2");
    const Params c3 = op().parse_params(wide + ",gather1=2,cluster1=3,cluster2=3");
    for (const Params* q : {&plain, &g, &c3})
      ASSERT_EQ(op().invalid_reason(*q, p, DType::bf16, h100), std::nullopt)
          << shape << ": " << *op().invalid_reason(*q, p, DType::bf16, h100);
    const bool ec = std::string(shape) == kExpertChoice;
    const int E = static_cast<int>(op().dim(p, "e")), K = static_cast<int>(op().dim(p, "k"));
    const int H = static_cast<int>(op().dim(p, "h")), I = static_cast<int>(op().dim(p, "i"));
    const long long rows = ec ? moe_expert_choice_padded(E, moe_expert_capacity(1000, K, E), 128)
                              : moe_max_padded(1000LL * K, E, 128);
    const std::size_t ws = op().workspace_bytes(g, p, DType::bf16);
    EXPECT_EQ(ws, op().workspace_bytes(plain, p, DType::bf16) +
                      (static_cast<std::size_t>(rows) * H * 2 + 255) / 256 * 256) << shape;
    const std::vector<std::string> names = kernel_names(g, p);
    std::vector<std::string> want = kernel_names(plain, p);
    const auto gemm1 = std::find(want.begin(), want.end(), "moe_gemm_ws_kernel");
    ASSERT_NE(gemm1, want.end());
    const auto at = static_cast<std::size_t>(gemm1 - want.begin());
    want.insert(gemm1, "moe_gather_rows_kernel");
    EXPECT_EQ(names, want) << shape;
    EXPECT_EQ(names[at - 1], ec ? "moe_expert_choice_select_kernel" : "moe_align_kernel");

    const RecordingLauncher plain_run = run(plain, p);
    const RecordingLauncher all = run(g, p);
    ASSERT_EQ(all.launches.size(), names.size()) << shape;
    const KernelLaunch& gl = all.launches[at].launch;
    EXPECT_EQ(gl.kernel, reinterpret_cast<KernelHandle>(0x100 + at));
    EXPECT_EQ(gl.grid[0], static_cast<unsigned>(rows)) << shape;
    EXPECT_EQ(gl.grid[1], 1u);
    EXPECT_EQ(gl.block[0], static_cast<unsigned>(kMoeGatherThreads));
    EXPECT_EQ(gl.shared_bytes, 0u);
    EXPECT_TRUE(gl.programmatic);
    const auto ga = all.launches[at].as<MoeGatherRowsArgs>();
    const auto w1 = all.launches[at + 1].as<MoeGemmWsArgs>();
    const auto w2 = all.launches[at + 2].as<MoeGemmWsArgs>();
    const auto p1 = plain_run.launches[at].as<MoeGemmWsArgs>();
    EXPECT_EQ(ga.x, reinterpret_cast<const void*>(0x10000));
    EXPECT_EQ(ga.sorted_pairs, w1.base.sorted_pairs);
    EXPECT_EQ(ga.padded_rows, w1.base.padded_rows);
    EXPECT_EQ(ga.pair_token, ec ? w1.base.pair_token : nullptr);
    if (ec) {
      EXPECT_NE(ga.pair_token, nullptr);
    }
    EXPECT_EQ(ga.pairs, ec ? E * moe_expert_capacity(1000, K, E) : 1000 * K);
    EXPECT_EQ(ga.k, K);
    EXPECT_EQ(ga.h, H);
    EXPECT_EQ(ga.rows, rows);
    expect_inside(ga.out, 2u * static_cast<std::size_t>(rows) * H, ws, "x_sorted");
    EXPECT_GE(reinterpret_cast<std::uintptr_t>(ga.out), kWorkspace);  // not a tensor
    // gemm1 reads the sorted rows (its map: a box of block_m rows), writes act as before.
    EXPECT_EQ(w1.base.a, ga.out);
    const std::size_t xs_bytes = (static_cast<std::size_t>(rows) * H * 2 + 255) / 256 * 256;
    EXPECT_EQ(w1.base.out, static_cast<char*>(p1.base.out) + xs_bytes);  // act after x_sorted
    EXPECT_NE(std::memcmp(&w1.a_map, &p1.a_map, sizeof w1.a_map), 0);
    EXPECT_EQ(std::memcmp(&w1.w_map, &p1.w_map, sizeof w1.w_map), 0);
    const auto x0 = reinterpret_cast<std::uintptr_t>(ga.out);
    const auto a0 = reinterpret_cast<std::uintptr_t>(w1.base.out);
    EXPECT_TRUE(x0 + 2u * rows * H <= a0 || a0 + 2u * rows * I <= x0) << "x_sorted and act";
    for (std::size_t i = 0; i < all.launches.size(); ++i) {
      const KernelLaunch& l = all.launches[i].launch;
      EXPECT_EQ(l.cluster, 1u);
      EXPECT_EQ(l.cluster_y, 1u);
      EXPECT_EQ(static_cast<int>(l.block[0]), op().block_threads(g, p, DType::bf16, i));
      EXPECT_EQ(l.shared_bytes, op().dynamic_shared_bytes(g, p, DType::bf16, i));
      // Every kernel after the plain run's one before gemm1 as in the plain run, shifted.
      const std::size_t j = i < at ? i : i - 1;
      if (i == at) continue;
      EXPECT_EQ(l.grid[0], plain_run.launches[j].launch.grid[0]) << shape << " " << i;
      EXPECT_EQ(l.grid[1], plain_run.launches[j].launch.grid[1]) << shape << " " << i;
    }

    // Clusters of two along y: the grids' y rounded up to even, cluster (1, 2); the act box
    // half the rows, the weight box as before.
    const RecordingLauncher cr = run(c3, p);
    ASSERT_EQ(cr.launches.size(), names.size()) << shape;
    const unsigned gy1 = moe_gemm_grid_y(I, 128), gy2 = moe_gemm_grid_y(H, 256);
    if (!ec) {
      EXPECT_EQ(gy1 % 2, 1u);  // 11 column blocks: one pair past n
    }
    const std::vector<std::pair<std::size_t, unsigned>> gemms = {{at + 1, gy1}, {at + 2, gy2}};
    for (const auto& [i, gy] : gemms) {
      const KernelLaunch& l = cr.launches[i].launch;
      EXPECT_EQ(l.grid[0], all.launches[i].launch.grid[0]) << shape << " " << i;
      EXPECT_EQ(l.grid[1], (gy + 1) / 2 * 2) << shape << " " << i;
      EXPECT_EQ(l.cluster, 1u);
      EXPECT_EQ(l.cluster_y, 2u);
      EXPECT_TRUE(l.programmatic);
    }
    const auto c1 = cr.launches[at + 1].as<MoeGemmWsArgs>();
    const auto c2 = cr.launches[at + 2].as<MoeGemmWsArgs>();
    EXPECT_NE(std::memcmp(&c1.a_map, &w1.a_map, sizeof c1.a_map), 0);
    EXPECT_EQ(std::memcmp(&c1.w_map, &w1.w_map, sizeof c1.w_map), 0);
    EXPECT_NE(std::memcmp(&c2.a_map, &w2.a_map, sizeof c2.a_map), 0);
    EXPECT_EQ(std::memcmp(&c2.w_map, &w2.w_map, sizeof c2.w_map), 0);
    EXPECT_EQ(std::memcmp(&c1.base, &w1.base, sizeof c1.base), 0);
    EXPECT_EQ(cr.launches[at].as<MoeGatherRowsArgs>().out, ga.out);
  }
}

}  // namespace
}  // namespace ktune
