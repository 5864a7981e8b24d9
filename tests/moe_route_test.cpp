// MoE routing and alignment without a GPU: the double references on hand-worked cases (ties,
// groups, renormalisation, the aux loss, expert choice, padding and dropped ids, the layer), and
// NVRTC compiles of a sample of the route, one-block route + align, expert-choice and align
// kernels for sm_80 and sm_90a, up to 256 experts and in their EMAX = 512 forms past it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "templates/moe/args.h"
#include "tests/support/compile_report.hpp"
#include "tests/support/moe_reference.hpp"

namespace ktune {
namespace {

using test::MoeRouteProblem;

MoeRouteProblem problem(int tokens, int experts, int k, int routing) {
  MoeRouteProblem p;
  p.tokens = tokens;
  p.experts = experts;
  p.k = k;
  p.routing = routing;
  return p;
}

TEST(MoeRouteReference, SoftmaxTiesGoToTheLowerExpert) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  const auto r = test::moe_route_ref(logits, {}, problem(1, 4, 3, moe_softmax));
  EXPECT_EQ(r.ids, (std::vector<int>{1, 2, 3}));
  const double z = std::exp(-2.0) + 2.0 + std::exp(-1.0);  // sum of exp(x - 3)
  EXPECT_NEAR(r.weights[0], 1.0 / z, 1e-15);
  EXPECT_NEAR(r.weights[1], 1.0 / z, 1e-15);
  EXPECT_NEAR(r.weights[2], std::exp(-1.0) / z, 1e-15);
}

TEST(MoeRouteReference, RenormalisedWeightsSumToOne) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f, 2.0f, -1.0f};
  const auto r = test::moe_route_ref(logits, {}, problem(2, 3, 2, moe_softmax_renorm));
  EXPECT_EQ(r.ids, (std::vector<int>{2, 1, 1, 0}));
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-15);
  EXPECT_NEAR(r.weights[2], 1.0 / (1.0 + std::exp(-1.5)), 1e-15);
  EXPECT_NEAR(r.weights[2] + r.weights[3], 1.0, 1e-15);
}

// E = 8 in 4 groups of 2, 2 groups kept, k = 3. Group scores (sum of both biased scores): the
// bias lifts group 3 above group 1, so groups 0 and 3 survive although expert 2 (group 1) has the
// best unbiased score; weights use the unbiased scores.
TEST(MoeRouteReference, GroupLimitedSigmoidWithBiasAndScaling) {
  const std::vector<float> logits = {1.0f, 0.5f, 3.0f, -2.0f, 0.0f, -1.0f, 0.2f, 0.1f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f};
  MoeRouteProblem p = problem(1, 8, 3, moe_sigmoid_group);
  p.n_group = 4;
  p.topk_group = 2;
  p.routed_scaling = 2.5;
  const auto r = test::moe_route_ref(logits, bias, p);
  auto s = [](float x) { return 1.0 / (1.0 + std::exp(-static_cast<double>(x))); };
  // group scores: g0 = s(1) + s(.5) = 1.35, g1 = s(3) + s(-2) = 1.07, g2 = 0.77, g3 = 1.55 + 1.0
  ASSERT_GT(s(0.2f) + s(0.1f) + 1.0, s(1.0f) + s(0.5f));
  ASSERT_GT(s(1.0f) + s(0.5f), s(3.0f) + s(-2.0f));
  // biased: e6 = s(.2) + .5 = 1.05, e7 = 1.025, e0 = 0.731, e1 = 0.622
  EXPECT_EQ(r.ids, (std::vector<int>{6, 7, 0}));
  const double sum = s(0.2f) + s(0.1f) + s(1.0f);
  EXPECT_NEAR(r.weights[0], s(0.2f) / sum * 2.5, 1e-14);
  EXPECT_NEAR(r.weights[1], s(0.1f) / sum * 2.5, 1e-14);
  EXPECT_NEAR(r.weights[2], s(1.0f) / sum * 2.5, 1e-14);
  EXPECT_EQ(r.select[2], -std::numeric_limits<double>::infinity());  // group 1 dropped
}

TEST(MoeRouteReference, TiedGroupsGoToTheLowerGroup) {
  // Two groups of 2 with equal scores; one kept: group 0.
  const std::vector<float> logits = {0.5f, 0.25f, 0.25f, 0.5f};
  MoeRouteProblem p = problem(1, 4, 2, moe_sigmoid_group);
  p.n_group = 2;
  p.topk_group = 1;
  const auto r = test::moe_route_ref(logits, {}, p);
  EXPECT_EQ(r.ids, (std::vector<int>{0, 1}));
}

TEST(MoeRouteReference, AuxLossSwitchForm) {
  // T = 2, E = 2, k = 1: token 0 prefers expert 0 with p = (a, 1 - a), token 1 expert 1 with
  // p = (1 - b, b). f = (1/2, 1/2), P = ((a + 1 - b) / 2, (1 - a + b) / 2): loss = 2 * (1/2) * 1.
  const std::vector<float> logits = {1.0f, 0.0f, 0.0f, 2.0f};
  const auto p = problem(2, 2, 1, moe_softmax);
  const auto r = test::moe_route_ref(logits, {}, p);
  EXPECT_NEAR(test::moe_aux_loss_ref(r, p), 1.0, 1e-15);
  // Both tokens to expert 0: f = (1, 0), loss = 2 * P_0.
  const std::vector<float> both = {1.0f, 0.0f, 3.0f, 0.0f};
  const auto r2 = test::moe_route_ref(both, {}, p);
  const double p0 = (1.0 / (1.0 + std::exp(-1.0)) + 1.0 / (1.0 + std::exp(-3.0))) / 2.0;
  EXPECT_NEAR(test::moe_aux_loss_ref(r2, p), 2.0 * p0, 1e-15);
}

// ---- expert choice ----

TEST(MoeExpertChoiceReference, Capacity) {
  EXPECT_EQ(moe_expert_capacity(5, 2, 4), 3);      // ceil(10 / 4)
  EXPECT_EQ(moe_expert_capacity(1, 1, 64), 1);     // never 0
  EXPECT_EQ(moe_expert_capacity(3, 8, 8), 3);      // k = e: C = t
  EXPECT_EQ(moe_expert_capacity(1000, 8, 64), 125);
  EXPECT_EQ(moe_expert_capacity(65536, 16, 16), 65536);
  EXPECT_EQ(moe_expert_choice_padded(8, 3, 16), 8 * 16);
  EXPECT_EQ(moe_expert_choice_padded(4, 33, 16), 4 * 48);
}

// T = 4, E = 2, k = 1: C = 2. Token 0 scores (1/2, 1/2); tokens 1..3 (s, 1 - s) with
// s = sigmoid(1). Expert 0 takes two of the three tied tokens 1..3: the lower ids 1 and 2;
// expert 1 takes token 0 and, of the tied 1..3, token 1. Token 1 gets both experts, token 3 none.
TEST(MoeExpertChoiceReference, TiesGoToTheLowerTokenAndATokenMayGetNone) {
  const std::vector<float> logits = {0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  const auto r = test::moe_expert_choice_ref(logits, 4, 2, 1);
  const double s = 1.0 / (1.0 + std::exp(-1.0));
  ASSERT_EQ(r.capacity, 2);
  EXPECT_EQ(r.tokens, (std::vector<int>{1, 2, 0, 1}));
  ASSERT_EQ(r.weights.size(), 4u);
  EXPECT_NEAR(r.weights[0], s, 1e-15);
  EXPECT_NEAR(r.weights[1], s, 1e-15);
  EXPECT_NEAR(r.weights[2], 0.5, 1e-15);
  EXPECT_NEAR(r.weights[3], 1.0 - s, 1e-15);
  EXPECT_NEAR(r.scores[3 * 2 + 1], 1.0 - s, 1e-15);
  // Per token, in expert order; token 3 has none.
  const auto uses = test::moe_expert_choice_uses(r.tokens, r.weights, 2, r.capacity);
  ASSERT_EQ(uses.size(), 4u);
  EXPECT_EQ(uses[0].token, 0);
  EXPECT_EQ(uses[0].expert, 1);
  EXPECT_EQ(uses[1].token, 1);
  EXPECT_EQ(uses[1].expert, 0);
  EXPECT_EQ(uses[2].token, 1);
  EXPECT_EQ(uses[2].expert, 1);
  EXPECT_EQ(uses[3].token, 2);
  EXPECT_EQ(uses[3].expert, 0);
}

// T = 3, E = 2, k = 2: C = 3 = T, every expert takes every token; each token's weights are its
// whole softmax, so they sum to 1.
TEST(MoeExpertChoiceReference, CapacityEqualToTokensTakesEveryToken) {
  const std::vector<float> logits = {0.25f, -1.0f, 2.0f, 2.0f, -0.5f, 4.0f};
  const auto r = test::moe_expert_choice_ref(logits, 3, 2, 2);
  ASSERT_EQ(r.capacity, 3);
  EXPECT_EQ(r.tokens, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(r.weights[t] + r.weights[3 + t], 1.0, 1e-15);
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-1.25)), 1e-15);
  EXPECT_NEAR(r.weights[1], 0.5, 1e-15);
}

// T = 6, E = 3, k = 1: C = 2. Each pair of tokens strongly prefers one expert, so each expert's
// top two are tokens no other expert picks: every token is chosen exactly once.
TEST(MoeExpertChoiceReference, ExpertsWithTopTokensNobodyElsePicks) {
  const std::vector<float> logits = {4.0f, 0.0f, 0.0f, 3.0f,  0.5f, 0.0f,
                                     0.0f, 4.0f, 0.0f, 0.5f,  3.0f, 0.0f,
                                     0.0f, 0.0f, 4.0f, -1.0f, 0.0f, 3.5f};
  const auto r = test::moe_expert_choice_ref(logits, 6, 3, 1);
  ASSERT_EQ(r.capacity, 2);
  EXPECT_EQ(r.tokens, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  const double z0 = std::exp(4.0) + 2.0;
  EXPECT_NEAR(r.weights[0], std::exp(4.0) / z0, 1e-15);
  const double z5 = std::exp(-1.0) + 1.0 + std::exp(3.5);
  EXPECT_NEAR(r.weights[5], std::exp(3.5) / z5, 1e-15);
}

// The layer on a hand-sized case: H = 2, I = 1, E = 2. Expert 0: gate = x0, up = x1, w2 = (1, 2);
// expert 1: gate = x1, up = x0, w2 = (3, 0.5). Token 0 is used by both, token 1 by none.
TEST(MoeLayerReference, SumsUsesAndLeavesUnchosenTokensZero) {
  const std::vector<double> x = {1.0, 2.0, 0.5, -1.0};
  const std::vector<double> w1 = {1.0, 0.0, 0.0, 1.0,   // expert 0: gate row, up row
                                  0.0, 1.0, 1.0, 0.0};  // expert 1
  const std::vector<double> w2 = {1.0, 2.0, 3.0, 0.5};
  const auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
  const std::vector<test::MoeUse> uses = {{0, 0, 0.25}, {0, 1, 0.5}};
  const std::vector<double> y = test::moe_layer_ref(x, w1, w2, 2, 2, 1, uses);
  const double a0 = silu(1.0) * 2.0, a1 = silu(2.0) * 1.0;
  EXPECT_NEAR(y[0], 0.25 * a0 * 1.0 + 0.5 * a1 * 3.0, 1e-15);
  EXPECT_NEAR(y[1], 0.25 * a0 * 2.0 + 0.5 * a1 * 0.5, 1e-15);
  EXPECT_EQ(y[2], 0.0);
  EXPECT_EQ(y[3], 0.0);
  // Top-k uses: pair p is token p / k; ids outside 0..E-1 are dropped.
  const auto topk = test::moe_topk_uses({1, 0, 7, 1}, {0.5, 0.25, 1.0, 0.75}, 2, 2);
  ASSERT_EQ(topk.size(), 3u);
  EXPECT_EQ(topk[2].token, 1);
  EXPECT_EQ(topk[2].expert, 1);
  EXPECT_EQ(topk[2].weight, 0.75);
}

TEST(MoeAlignReference, PaddingCountsAndDroppedIds) {
  // 3 tokens, k = 2, E = 4, block_m = 4: pairs 0..5 with an out-of-range id (pair 4) dropped.
  const std::vector<int> ids = {2, 0, 2, 2, 7, 0};
  const auto r = test::moe_align_ref(ids, 4, 4);
  const int pad = 6;
  EXPECT_EQ(r.expert_counts, (std::vector<int>{2, 0, 3, 0}));
  EXPECT_EQ(r.padded_rows, 8);
  ASSERT_EQ(r.sorted_pairs.size(), static_cast<std::size_t>(moe_max_padded(6, 4, 4)));
  EXPECT_EQ(r.sorted_pairs.size(), 20u);  // 6 + 4 * 3 rounded up to 4
  const std::vector<int> head = {1, 5, pad, pad, 0, 2, 3, pad};
  EXPECT_EQ(std::vector<int>(r.sorted_pairs.begin(), r.sorted_pairs.begin() + 8), head);
  for (std::size_t i = 8; i < r.sorted_pairs.size(); ++i) EXPECT_EQ(r.sorted_pairs[i], pad);
  EXPECT_EQ(r.block_expert, (std::vector<int>{0, 2, -1, -1, -1}));
}

TEST(MoeAlignReference, OneExpertTakesEverything) {
  const std::vector<int> ids(10, 3);
  const auto r = test::moe_align_ref(ids, 5, 8);
  EXPECT_EQ(r.expert_counts, (std::vector<int>{0, 0, 0, 10, 0}));
  EXPECT_EQ(r.padded_rows, 16);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(r.sorted_pairs[i], i);
  EXPECT_EQ(r.block_expert[0], 3);
  EXPECT_EQ(r.block_expert[1], 3);
  EXPECT_EQ(r.block_expert[2], -1);
}

// ---- NVRTC: a sample of every kernel's template space ----

/// The EMAX argument the op names for `experts`: none up to 256 (the default), ", 512" past it.
std::string emax(int experts) {
  return moe_emax(experts) == kMoeEmax ? "" : ", " + std::to_string(moe_emax(experts));
}

std::string route_kernel(int routing, int threads, int lanes, int vec, int experts) {
  const int items = (experts + lanes * vec - 1) / (lanes * vec);
  return "ktune::moe_route_kernel<" + std::to_string(routing) + ", " + std::to_string(threads) +
         ", " + std::to_string(lanes) + ", " + std::to_string(vec) + ", " + std::to_string(items) +
         emax(experts) + ">";
}

/// The one-block route + align kernel at the op's geometry (moe_route_align_threads).
std::string route_align_kernel(int routing, int lanes, int vec, int experts) {
  const int items = (experts + lanes * vec - 1) / (lanes * vec);
  return "ktune::moe_route_align_kernel<" + std::to_string(routing) + ", " +
         std::to_string(moe_route_align_threads(items * vec, experts)) + ", " +
         std::to_string(lanes) + ", " + std::to_string(vec) + ", " + std::to_string(items) +
         emax(experts) + ">";
}

/// The route kernel's grid sorting its own pairs at the op's 128 threads.
std::string route_sort_kernel(int routing, int lanes, int vec, int experts) {
  const int items = (experts + lanes * vec - 1) / (lanes * vec);
  return "ktune::moe_route_sort_kernel<" + std::to_string(routing) + ", 128, " +
         std::to_string(lanes) + ", " + std::to_string(vec) + ", " + std::to_string(items) +
         emax(experts) + ">";
}

std::vector<KernelSource> sample_kernels() {
  std::vector<KernelSource> out;
  for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group}) {
    // (threads, lanes, vec, experts): one warp per token and sub-warp groups, every vector
    // width, E from 8 to 256 (ITEMS from 1 to 16).
    const int configs[][4] = {{128, 32, 4, 256}, {256, 32, 1, 64}, {128, 8, 2, 64},
                              {64, 4, 4, 8},     {128, 16, 4, 160}, {128, 4, 4, 256}};
    for (const auto& c : configs) {
      // moe_sigmoid_group: at most 32 scores per thread, so E = 256 needs 8 lanes or more.
      const int lanes = routing == moe_sigmoid_group && c[3] > 32 * c[1] ? 8 : c[1];
      out.push_back({"moe/route.cuh", route_kernel(routing, c[0], lanes, c[2], c[3])});
    }
    // One block, routing then alignment: the op's route_lanes and route_vec, E from 8 to 256
    // (1024 threads down to 256).
    const int fused[][3] = {{32, 1, 64}, {8, 1, 64}, {8, 4, 64}, {8, 1, 8}, {32, 4, 256},
                            {8, 1, 256}, {8, 4, 160}};
    for (const auto& f : fused)
      out.push_back({"moe/route_align.cuh", route_align_kernel(routing, f[0], f[1], f[2])});
    // The route kernel's grid aligning its own pairs (fuse_route=2, 128 threads): 4 tokens a
    // block at 32 lanes (E=64: 2 scores each), 16 at 8 lanes (E=64 in 4-float loads; and
    // DeepSeek-V3's E=256, 32 scores each, for sigmoid_group).
    const std::string sort = "ktune::moe_route_sort_kernel<" + std::to_string(routing) + ", 128, ";
    out.push_back({"moe/route_sort.cuh", sort + "32, 1, 2>"});
    out.push_back({"moe/route_sort.cuh",
                   sort + (routing == moe_sigmoid_group ? "8, 1, 32>" : "8, 4, 2>")});
  }
  for (int threads : {128, 256, 1024})
    out.push_back({"moe/align.cuh", "ktune::moe_align_kernel<" + std::to_string(threads) + ">"});
  out.push_back({"moe/expert_choice.cuh", "ktune::moe_expert_choice_scores_kernel"});
  for (int threads : {128, 512, 1024})
    out.push_back({"moe/expert_choice.cuh",
                   "ktune::moe_expert_choice_select_kernel<" + std::to_string(threads) + ">"});
  for (const char* tv : {"ktune::bf16, 128, 8", "ktune::fp16, 128, 4", "ktune::bf16, 64, 1",
                         "ktune::fp16, 512, 2"})
    out.push_back({"moe/expert_choice.cuh",
                   std::string("ktune::moe_expert_choice_combine_kernel<") + tv + ">"});
  for (const char* tc : {"256, 4096", "1024, 16384", "128, 1024"})
    for (const char* k : {"count", "scan", "scatter"})
      out.push_back({"moe/align.cuh", std::string("ktune::moe_align_") + k + "_kernel<" + tc + ">"});
  return out;
}

TEST(MoeRouteCompile, SampleCompilesForSm80AndSm90a) {
  std::vector<CompileJob> jobs;
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const KernelSource& k : sample_kernels()) jobs.push_back({k, arch, {}});
  const Compiler compiler(std::nullopt);
  const std::vector<CompileOutcome> outcomes = compile_parallel(compiler, jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::string what = jobs[i].arch + " " + jobs[i].source.name_expression;
    ASSERT_TRUE(outcomes[i].kernel) << what << ":\n" << outcomes[i].error;
    const KernelResources& r = outcomes[i].kernel->resources;
    std::printf("%-58s %3d registers, %5d bytes smem, spills %d/%d\n", what.c_str(), r.registers,
                r.shared_bytes, r.spill_stores, r.spill_loads);
    EXPECT_EQ(r.spill_stores, 0) << what;
    EXPECT_EQ(r.local_bytes, 0) << what;
  }
}

/// Past 256 experts, the EMAX = 512 forms at the op's geometries: the route kernel, the
/// one-block route + align kernel and the route grid's sort at 128 threads (32 lanes with 1- and
/// 4-float loads; softmax modes also at 8 lanes, 48 and 64 scores per thread), every routing
/// mode; the one-block align kernel at the op's thread counts (at most 512 there), the
/// multi-block path, expert choice's scores and combine.
std::vector<KernelSource> wide_sample_kernels() {
  std::vector<KernelSource> out;
  for (int routing : {moe_softmax, moe_softmax_renorm, moe_sigmoid_group}) {
    // (lanes, vec, experts); sigmoid_group keeps at most 32 scores per thread: 32 lanes only.
    std::vector<std::array<int, 3>> geometries = {{32, 1, 384}, {32, 4, 512}};
    if (routing != moe_sigmoid_group)
      geometries.insert(geometries.end(), {{8, 4, 384}, {8, 1, 512}});
    for (const auto& [lanes, vec, e] : geometries) {
      out.push_back({"moe/route.cuh", route_kernel(routing, 128, lanes, vec, e)});
      out.push_back({"moe/route_align.cuh", route_align_kernel(routing, lanes, vec, e)});
      out.push_back({"moe/route_sort.cuh", route_sort_kernel(routing, lanes, vec, e)});
    }
  }
  for (int threads : {128, 256, 512})
    out.push_back(
        {"moe/align.cuh", "ktune::moe_align_kernel<" + std::to_string(threads) + ", 512>"});
  for (const char* chunk : {"1024", "4096"})
    for (const char* k : {"count", "scan", "scatter"})
      out.push_back({"moe/align.cuh", std::string("ktune::moe_align_") + k + "_kernel<256, " +
                                          chunk + ", 512>"});
  out.push_back({"moe/expert_choice.cuh", "ktune::moe_expert_choice_scores_wide_kernel<512>"});
  for (const char* tv : {"ktune::bf16, 128, 8", "ktune::fp16, 128, 4"})
    out.push_back({"moe/expert_choice.cuh",
                   std::string("ktune::moe_expert_choice_combine_kernel<") + tv + ", 512>"});
  return out;
}

// The EMAX = 512 kernels compile for sm_80 and sm_90a within 48 KiB of static shared memory
// (their per-expert arrays doubled; the thread limits that keep the per-warp arrays in it),
// without spills but one: the route grid's sort at 12 and 16 scores per lane (32 lanes, 1-float
// loads: e=384 and 512) spills 4 bytes on sm_90a at 72-80 registers, ptxas's choice (its PTX
// has no local array, and its EMAX = 256 form at 12 scores spills the same).
TEST(MoeRouteCompile, WideExpertSampleCompilesForSm80AndSm90a) {
  EXPECT_EQ(moe_emax(256), 256);
  EXPECT_EQ(moe_emax(257), 512);
  EXPECT_EQ(moe_emax(512), 512);
  // The one-block route + align kernel: 256 threads at most past 256 experts (fewer where the
  // scores per thread ask it), as many as before up to 256.
  EXPECT_EQ(moe_route_align_threads(2, 64), 1024);
  EXPECT_EQ(moe_route_align_threads(8, 256), 1024);
  EXPECT_EQ(moe_route_align_threads(12, 384), 256);
  EXPECT_EQ(moe_route_align_threads(64, 512), 128);
  EXPECT_EQ(moe_ec_score_tokens(256), kMoeEcScoreTokens);
  EXPECT_EQ(moe_ec_score_tokens(512), 16);
  std::vector<CompileJob> jobs;
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const KernelSource& k : wide_sample_kernels()) jobs.push_back({k, arch, {}});
  test::compile_and_check(jobs, [](const CompileJob& job, const CompiledKernel& k) {
    const std::string what = job.arch + " " + job.source.name_expression;
    EXPECT_NE(what.find("512>"), std::string::npos) << what;
    const KernelResources& r = k.resources;
    EXPECT_LE(r.shared_bytes, 48 * 1024) << what;
    const bool sort_one_float = what.find("moe_route_sort_kernel") != std::string::npos &&
                                what.find(", 32, 1, ") != std::string::npos;
    EXPECT_LE(r.spill_stores, sort_one_float ? 4 : 0) << what;
    EXPECT_LE(r.local_bytes, sort_one_float ? 8 : 0) << what;
  });
}

// Template parameters outside the allowed values are refused at compile time, with the reason.
TEST(MoeRouteCompile, InvalidTemplateParametersAreRefused) {
  const Compiler compiler(std::nullopt);
  const struct {
    const char* file;
    const char* expr;
    const char* reason;
  } bad[] = {
      {"moe/route.cuh", "ktune::moe_route_kernel<3, 128, 32, 4, 2>", "ROUTING must be"},
      {"moe/route.cuh", "ktune::moe_route_kernel<0, 128, 2, 4, 2>", "LANES"},
      {"moe/route.cuh", "ktune::moe_route_kernel<0, 128, 32, 8, 2>", "VEC must be"},
      {"moe/route.cuh", "ktune::moe_route_kernel<0, 128, 4, 4, 32>", "ITEMS * VEC"},
      {"moe/route.cuh", "ktune::moe_route_kernel<2, 512, 8, 4, 8>",
       "THREADS * ITEMS * VEC must be at most 8192"},
      {"moe/route.cuh", "ktune::moe_route_kernel<2, 128, 4, 4, 16>", "at most 32 (E <= 32 * LANES)"},
      {"moe/route_align.cuh", "ktune::moe_route_align_kernel<1, 64, 8, 1, 1>",
       "THREADS must be at least 128"},
      {"moe/route_align.cuh", "ktune::moe_route_align_kernel<0, 1024, 8, 4, 4>",
       "registers at 1024 threads"},
      {"moe/route_align.cuh", "ktune::moe_route_align_kernel<3, 1024, 8, 1, 1>",
       "ROUTING must be"},
      {"moe/align.cuh", "ktune::moe_align_kernel<64>", "THREADS must be"},
      {"moe/align.cuh", "ktune::moe_align_count_kernel<256, 1000>", "CHUNK must be"},
      {"moe/expert_choice.cuh", "ktune::moe_expert_choice_select_kernel<64>",
       "THREADS must be a power of two in 128..1024"},
      {"moe/expert_choice.cuh", "ktune::moe_expert_choice_combine_kernel<ktune::bf16, 128, 3>",
       "VEC must be"},
      {"moe/expert_choice.cuh", "ktune::moe_expert_choice_combine_kernel<float, 128, 4>",
       "T must be bf16 or fp16"},
      // EMAX: 256 or 512, and at 512 the thread counts whose per-warp arrays fit.
      {"moe/route.cuh", "ktune::moe_route_kernel<0, 128, 32, 1, 12, 384>",
       "EMAX must be 256 or 512"},
      {"moe/align.cuh", "ktune::moe_align_kernel<1024, 512>", "at EMAX 512 at most 512 threads"},
      {"moe/align.cuh", "ktune::moe_align_scatter_kernel<1024, 4096, 512>",
       "at EMAX 512 at most 512 threads"},
      {"moe/route_align.cuh", "ktune::moe_route_align_kernel<1, 512, 32, 1, 12, 512>",
       "at EMAX 512 THREADS must be at most 256"},
      {"moe/expert_choice.cuh", "ktune::moe_expert_choice_scores_wide_kernel<256>",
       "E <= 256 runs moe_expert_choice_scores_kernel"},
      {"moe/expert_choice.cuh",
       "ktune::moe_expert_choice_combine_kernel<ktune::bf16, 128, 4, 300>",
       "EMAX must be 256 or 512"},
  };
  for (const auto& b : bad) {
    try {
      compiler.compile({{b.file, b.expr}, "sm_90a", {}});
      ADD_FAILURE() << b.expr << " compiled";
    } catch (const CompileError& e) {
      const std::string text = std::string(e.what()) + "\n" + e.log();
      EXPECT_NE(text.find(b.reason), std::string::npos) << b.expr << ": " << text;
    }
  }
}

}  // namespace
}  // namespace ktune
