// MoE grouped GEMM and combine kernels without a GPU: the invalid reasons, NVRTC compiles of the
// default and a sample of the tunable space for sm_80 and sm_90a in both dtypes, and kernels that
// the reasons reject fail to compile with the same message (the static_asserts and the host
// function agree).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "templates/moe/gemm_args.h"
#include "tests/support/moe_gemm_reference.hpp"

namespace ktune {
namespace {

using test::MoeGemmTile;

const char* const kArchs[] = {"sm_80", "sm_90a"};
constexpr MoeGemmTile kDefault{64, 64, 64, 4, 2, 3};

/// Every point of the tunable grid, valid or not, first tunable slowest.
std::vector<MoeGemmTile> grid() {
  std::vector<MoeGemmTile> out;
  for (int bm : {16, 32, 64, 128, 256})
    for (int bn : {16, 32, 64, 128, 256})
      for (int bk : {32, 64, 128, 256})
        for (int w : {1, 2, 4, 8})
          for (int wm : {1, 2, 4, 8})
            for (int s : {2, 3, 4, 5, 6}) out.push_back({bm, bn, bk, w, wm, s});
  return out;
}

TEST(MoeGemmReasons, TableOfPoints) {
  EXPECT_EQ(kDefault.invalid_reason(true), nullptr);
  EXPECT_EQ(kDefault.invalid_reason(false), nullptr);
  EXPECT_STREQ(MoeGemmTile({48, 64, 64, 4, 2, 3}).invalid_reason(true),
               "BLOCK_M must be 16, 32, 64, 128 or 256");
  EXPECT_STREQ(MoeGemmTile({64, 64, 16, 4, 2, 3}).invalid_reason(true),
               "BLOCK_K must be 32, 64, 128 or 256");
  EXPECT_STREQ(MoeGemmTile({64, 64, 64, 4, 3, 3}).invalid_reason(true),
               "WARPS_M must divide WARPS");
  EXPECT_STREQ(MoeGemmTile({16, 64, 64, 4, 2, 3}).invalid_reason(true),
               "BLOCK_M must be a multiple of 16 * WARPS_M");
  EXPECT_STREQ(MoeGemmTile({64, 32, 64, 8, 2, 3}).invalid_reason(false),
               "BLOCK_N must be a multiple of 16 * (WARPS / WARPS_M)");
  EXPECT_STREQ(MoeGemmTile({64, 64, 64, 4, 2, 7}).invalid_reason(true),
               "STAGES must be 2 to 6");
  // 128 x 128 on 4 warps: 128 accumulators for gemm2, 256 (gate and up) for gemm1.
  EXPECT_EQ(MoeGemmTile({128, 128, 32, 4, 2, 2}).invalid_reason(false), nullptr);
  EXPECT_STREQ(MoeGemmTile({128, 128, 32, 4, 2, 2}).invalid_reason(true),
               "more than 128 fp32 accumulators per thread (GATED counts gate and up)");
  EXPECT_STREQ(MoeGemmTile({256, 128, 128, 8, 4, 4}).invalid_reason(false),
               "shared memory above 227 KiB");
  EXPECT_EQ(moe_gemm_smem_bytes(64, 64, 64, 3, true), 3u * (64 + 128) * 128);
  // The CTA order and the weights' L2 prefetch: defaults (0, 0) are today's kernel.
  EXPECT_EQ(moe_gemm_invalid_reason(128, 128, 64, 8, 2, 3, true, 8, 256), nullptr);
  EXPECT_EQ(moe_gemm_invalid_reason(16, 64, 128, 4, 1, 3, true, 0, 128), nullptr);
  EXPECT_STREQ(moe_gemm_invalid_reason(64, 64, 64, 4, 2, 3, true, 3, 0),
               "GROUP_M must be 0, 2, 4, 8, 16 or 32");
  EXPECT_STREQ(moe_gemm_invalid_reason(64, 64, 64, 4, 2, 3, false, 0, 64),
               "W_PREFETCH must be 0, 128 or 256");
  // Register cap per CTA count: two 8-warp CTAs leave 128 registers, room for 64 accumulators
  // (gemm2 128 x 128) but not for 128 (gemm1 128 x 128).
  EXPECT_EQ(moe_gemm_regs_per_thread(8, 1), 255);
  EXPECT_EQ(moe_gemm_regs_per_thread(8, 2), 128);
  EXPECT_EQ(moe_gemm_invalid_reason(128, 128, 64, 8, 2, 3, false, 8, 0, 2), nullptr);
  EXPECT_STREQ(moe_gemm_invalid_reason(128, 128, 64, 8, 2, 3, true, 8, 0, 2),
               "MIN_CTAS leaves fewer registers per thread than the accumulators plus 32");
  EXPECT_STREQ(moe_gemm_invalid_reason(64, 64, 64, 4, 2, 3, true, 0, 0, 5),
               "MIN_CTAS must be 1 to 4");
  // The epilogue through shared memory: the ring must hold BLOCK_M x (BLOCK_N + 8) elements.
  EXPECT_EQ(moe_gemm_epi_smem_bytes(128, 256), 128u * 264 * 2);
  EXPECT_EQ(moe_gemm_invalid_reason(128, 256, 64, 8, 2, 3, false, 8, 0, 1, 1), nullptr);
  EXPECT_EQ(moe_gemm_invalid_reason(16, 16, 128, 1, 1, 4, true, 0, 0, 1, 1), nullptr);
  EXPECT_STREQ(moe_gemm_invalid_reason(128, 256, 32, 8, 2, 2, false, 0, 0, 1, 1),
               "EPI=1: the ring must hold the BLOCK_M x (BLOCK_N + 8) output tile");
  EXPECT_STREQ(moe_gemm_invalid_reason(64, 64, 64, 4, 2, 3, false, 0, 0, 1, 2),
               "EPI must be 0 or 1");
  EXPECT_EQ(moe_gemm_static_smem_bytes(16), 256u);
  EXPECT_EQ(moe_gemm_static_smem_bytes(128), 1664u);

  EXPECT_EQ(moe_gemm_shape_invalid_reason(4096, 14336), nullptr);
  EXPECT_EQ(moe_gemm_shape_invalid_reason(136, 200), nullptr);
  EXPECT_STREQ(moe_gemm_shape_invalid_reason(4100, 14336), "H must be a positive multiple of 8");
  EXPECT_STREQ(moe_gemm_shape_invalid_reason(4096, 1), "I must be a positive multiple of 8");

  EXPECT_EQ(moe_combine_invalid_reason(128, 8, 4096), nullptr);
  EXPECT_STREQ(moe_combine_invalid_reason(128, 8, 4100), "H must be a multiple of VEC");
  EXPECT_STREQ(moe_combine_invalid_reason(96, 8, 4096), "THREADS must be 64, 128, 256 or 512");
  EXPECT_STREQ(moe_combine_invalid_reason(128, 3, 4096), "VEC must be 1, 2, 4 or 8");
  EXPECT_EQ(moe_combine_grid_y(4096, 128, 8), 4u);
  EXPECT_EQ(moe_combine_grid_y(136, 128, 8), 1u);
  EXPECT_EQ(moe_gemm_grid_y(200, 64), 4u);
}

TEST(MoeGemmReasons, SpaceHasValidPointsForBothGemms) {
  std::size_t valid[2] = {0, 0};
  for (const MoeGemmTile& c : grid())
    for (int gated = 0; gated < 2; ++gated)
      if (c.invalid_reason(gated != 0) == nullptr) ++valid[gated];
  std::printf("valid points of %zu: gemm2 %zu, gemm1 %zu\n", grid().size(), valid[0], valid[1]);
  EXPECT_GT(valid[0], 100u);
  EXPECT_GT(valid[1], 100u);
}

struct Job {
  CompileJob job;
  bool expect_ok = true;
  std::string reason;  // expected static_assert message when !expect_ok
  bool is_default = false;
};

std::vector<Job> jobs() {
  std::vector<Job> out;
  std::set<std::pair<std::string, std::string>> seen;
  const auto add = [&](const std::string& file, const std::string& expr, const char* arch,
                       const char* reason, bool is_default) {
    if (!seen.insert({arch, expr}).second) return;
    out.push_back({{{file, expr}, arch, {}}, reason == nullptr, reason ? reason : "", is_default});
  };
  const std::vector<MoeGemmTile> all = grid();
  for (const char* arch : kArchs) {
    for (bool bf16 : {true, false}) {
      for (bool gated : {true, false})
        add("moe/gemm.cuh", test::moe_gemm_name(bf16, kDefault, gated), arch, nullptr, true);
      add("moe/combine.cuh", test::moe_combine_name(bf16, 128, 8), arch, nullptr, true);
    }
    // A sample of the valid space: every 31st valid point per GEMM, alternating dtypes.
    for (int gated = 0; gated < 2; ++gated) {
      std::size_t i = 0;
      for (const MoeGemmTile& c : all) {
        if (c.invalid_reason(gated != 0) != nullptr) continue;
        if (i++ % 31 == 0)
          add("moe/gemm.cuh", test::moe_gemm_name(i % 2 == 0, c, gated != 0), arch, nullptr,
              false);
      }
    }
    for (int threads : {64, 512})
      for (int vec : {1, 2, 4})
        add("moe/combine.cuh", test::moe_combine_name(threads == 64, threads, vec), arch,
            nullptr, false);
  }
  // Points the reasons reject fail with the reason's static_assert (one arch suffices).
  const MoeGemmTile bad_acc{128, 128, 32, 4, 2, 2}, bad_smem{256, 128, 128, 8, 4, 4};
  add("moe/gemm.cuh", test::moe_gemm_name(true, bad_acc, true), "sm_90a",
      "more than 128 fp32 accumulators per thread", false);
  add("moe/gemm.cuh", test::moe_gemm_name(true, bad_smem, false), "sm_90a",
      "shared memory above 227 KiB", false);
  add("moe/combine.cuh", test::moe_combine_name(true, 96, 8), "sm_90a",
      "THREADS must be 64, 128, 256 or 512", false);
  // The four trailing parameters (CTA order, L2 prefetch, CTAs per SM, epilogue), both archs,
  // and their reasons.
  for (const char* arch : kArchs) {
    add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::bf16, 128, 64, 64, 4, 2, 3, true, 8, 256>",
        arch, nullptr, false);
    add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::fp16, 16, 32, 128, 2, 1, 4, false, 0, 128>",
        arch, nullptr, false);
    add("moe/gemm.cuh",
        "ktune::moe_gemm_kernel<ktune::bf16, 128, 128, 32, 8, 2, 4, false, 8, 0, 2>", arch,
        nullptr, false);
    add("moe/gemm.cuh",
        "ktune::moe_gemm_kernel<ktune::bf16, 128, 64, 64, 4, 2, 3, true, 8, 0, 1, 1>", arch,
        nullptr, false);
    add("moe/gemm.cuh",
        "ktune::moe_gemm_kernel<ktune::fp16, 128, 256, 64, 8, 2, 3, false, 8, 0, 1, 1>", arch,
        nullptr, false);
    add("moe/gemm.cuh",
        "ktune::moe_gemm_kernel<ktune::bf16, 16, 16, 128, 1, 1, 4, true, 0, 0, 1, 1>", arch,
        nullptr, false);
    // 256-element k steps (512 bytes of each weight row per slot), gemm1 and split-k gemm2.
    add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::bf16, 16, 32, 256, 2, 1, 3, true>", arch,
        nullptr, false);
    add("moe/gemm.cuh",
        "ktune::moe_gemm_kernel<ktune::fp16, 16, 64, 256, 4, 1, 3, false, 0, 0, 1, 0, true>",
        arch, nullptr, false);
  }
  add("moe/gemm.cuh",
      "ktune::moe_gemm_kernel<ktune::bf16, 128, 256, 32, 8, 2, 2, false, 0, 0, 1, 1>", "sm_90a",
      "EPI=1: the ring must hold the BLOCK_M x (BLOCK_N + 8) output tile", false);
  add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::bf16, 128, 128, 64, 8, 2, 3, true, 8, 0, 2>",
      "sm_90a", "MIN_CTAS leaves fewer registers per thread than the accumulators plus 32", false);
  add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::bf16, 64, 64, 64, 4, 2, 3, true, 3, 0>",
      "sm_90a", "GROUP_M must be 0, 2, 4, 8, 16 or 32", false);
  add("moe/gemm.cuh", "ktune::moe_gemm_kernel<ktune::bf16, 64, 64, 64, 4, 2, 3, false, 0, 64>",
      "sm_90a", "W_PREFETCH must be 0, 128 or 256", false);
  return out;
}

TEST(MoeGemmCompile, DefaultAndSampledConfigurations) {
  const std::vector<Job> js = jobs();
  std::vector<CompileJob> batch;
  for (const Job& j : js) batch.push_back(j.job);
  std::printf("compiling %zu kernels\n", batch.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  ASSERT_EQ(outcomes.size(), js.size());
  for (std::size_t i = 0; i < js.size(); ++i) {
    const Job& j = js[i];
    const CompileOutcome& o = outcomes[i];
    const std::string what = j.job.source.name_expression + " for " + j.job.arch;
    if (!j.expect_ok) {
      EXPECT_FALSE(o.kernel.has_value()) << what << " compiled";
      EXPECT_NE(o.error.find(j.reason), std::string::npos) << what << ":\n" << o.error;
      continue;
    }
    if (!o.kernel) {
      ADD_FAILURE() << what << " failed:\n" << o.error;
      continue;
    }
    const KernelResources& r = o.kernel->resources;
    EXPECT_GT(r.registers, 0) << what;
    EXPECT_LE(r.registers, 255) << what;
    if (j.is_default || r.spill_stores > 0)
      std::printf("%s %-6s %-70s %3d registers, spills %d/%d\n",
                  j.is_default ? "default" : "spills ", j.job.arch.c_str(),
                  j.job.source.name_expression.c_str(), r.registers, r.spill_stores,
                  r.spill_loads);
    if (j.is_default) {
      EXPECT_EQ(r.spill_stores, 0) << what;
    }
  }
}

}  // namespace
}  // namespace ktune
