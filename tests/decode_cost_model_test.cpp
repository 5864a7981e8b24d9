// The decode defaults' cost model (templates/decode/cost_model.hpp): its features and trees
// against the fit's own (tests/data/decode_cost_model_h100.txt, written by
// benchmarks/decode/fit_cost_model.py), where it serves, and what its defaults are.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "templates/decode/cost_model.hpp"
#include "tests/decode_test_support.hpp"

namespace ktune {
namespace {

using namespace decode_test;
using decode::cost_model_features;
using decode::cost_model_params;
using decode::cost_model_predict_h100;
using decode::cost_model_serves;

/// The H100 SXM as its database records it: 132 SMs, 3.35 TB/s.
DeviceInfo h100_sxm() {
  DeviceInfo d = device("sm_90a");
  d.memory_bandwidth = 3'352'320'000'000;
  return d;
}

decode::Shape shape(const std::string& problem) {
  return decode::kernel_shape(op().parse_problem(problem));
}
std::int64_t data_d(const std::string& problem) {
  return decode::shape_of(op().parse_problem(problem)).d;
}

TEST(DecodeCostModel, FeaturesAndPredictionsMatchTheFit) {
  std::ifstream in(std::string(KTUNE_SOURCE_DIR) + "/tests/data/decode_cost_model_h100.txt");
  ASSERT_TRUE(in) << "tests/data/decode_cost_model_h100.txt";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string problem, params;
    row >> problem >> params;
    std::vector<double> want;
    for (double v; row >> v;) want.push_back(v);
    ASSERT_FALSE(want.empty()) << line;
    const double prediction = want.back();
    want.pop_back();
    const decode::Config c = decode::config_of(op().parse_params(params));
    const std::vector<double> got = cost_model_features(shape(problem), data_d(problem), c, 132);
    ASSERT_EQ(got.size(), want.size()) << problem << " " << params;
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i])))
          << problem << " " << params << " feature " << i;
    EXPECT_NEAR(cost_model_predict_h100(got), prediction, 1e-9) << problem << " " << params;
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

TEST(DecodeCostModel, WalksTheOpsSpace) {
  const std::vector<Tunable>& ts = op().tunables();
  const auto& values = decode::cost_model_values();
  ASSERT_EQ(values.size(), ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(values[i], ts[i].values) << ts[i].name;
}

TEST(DecodeCostModel, ServesTheH100ClassInsideItsDomainOnly) {
  const DeviceInfo h100 = h100_sxm();
  EXPECT_TRUE(cost_model_serves(shape("b=16,hq=32,hkv=8,nq=1,nk=4096,d=128"), h100));
  EXPECT_TRUE(cost_model_serves(shape("b=1,hq=64,hkv=8,nq=1,nk=32768,d=128"), h100));
  // Paged, varlen, a mask variant, keys or pairs or rows past the sweeps: the rules.
  for (const char* p : {"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,page=16",
                        "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,varlen=yes",
                        "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,window=1024",
                        "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,softcap=yes",
                        "b=1,hq=32,hkv=8,nq=1,nk=262144,d=128", "b=1,hq=32,hkv=8,nq=1,nk=100,d=128",
                        "b=256,hq=32,hkv=8,nq=1,nk=4096,d=128", "b=1,hq=64,hkv=1,nq=8,nk=4096,d=64",
                        // Each bound inside, pairs x keys (512 x 100000) past every sweep.
                        "b=64,hq=32,hkv=8,nq=1,nk=100000,d=128"})
    EXPECT_FALSE(cost_model_serves(shape(p), h100)) << p;
  const decode::Shape s = shape("b=16,hq=32,hkv=8,nq=1,nk=4096,d=128");
  DeviceInfo other = h100;
  other.memory_bandwidth = 4'800'000'000'000;  // the H200's memory per SM
  EXPECT_FALSE(cost_model_serves(s, other));
  other = h100;
  other.memory_bandwidth = 0;  // unknown (a generic --arch sm_90a)
  EXPECT_FALSE(cost_model_serves(s, other));
  other = h100;
  other.sm_count = 114;  // the H100 PCIe
  EXPECT_FALSE(cost_model_serves(s, other));
  EXPECT_FALSE(cost_model_serves(s, device("sm_80")));
  // The lookup's note says where the model chose (ktune best, KTUNE_LOG).
  const Problem served = op().parse_problem("b=16,hq=32,hkv=8,nq=1,nk=4096,d=128");
  EXPECT_TRUE(contains(op().default_note(served, DType::bf16, h100), "cost model"));
  EXPECT_EQ(op().default_note(op().parse_problem("b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,page=16"),
                              DType::bf16, h100),
            "");
  ModelSwitch off("0");
  EXPECT_FALSE(cost_model_serves(s, h100));
  EXPECT_EQ(op().default_note(served, DType::bf16, h100), "");
}

TEST(DecodeCostModel, DefaultsAreValidAndNeverPredictedSlowerThanTheRules) {
  const DeviceInfo h100 = h100_sxm();
  std::mt19937 rng(20261207);
  const std::int64_t ds[] = {32, 64, 80, 96, 112, 128, 192, 256};
  const std::int64_t groups[] = {1, 2, 4, 5, 7, 8, 16, 64};
  int changed = 0, served = 0;
  for (int i = 0; i < 60; ++i) {
    const std::int64_t hkv = std::int64_t{1} << (rng() % 4);
    const std::int64_t group = groups[rng() % std::size(groups)];
    const std::int64_t nq = 1 + rng() % 4;
    if (group * nq > 355) continue;
    const std::string problem =
        "b=" + std::to_string(1 + rng() % 32) + ",hq=" + std::to_string(hkv * group) +
        ",hkv=" + std::to_string(hkv) + ",nq=" + std::to_string(nq) +
        ",nk=" + std::to_string(200 + rng() % 30000) + ",d=" + std::to_string(ds[rng() % 8]) +
        (rng() % 2 ? ",causal=yes" : "");
    const Problem p = op().parse_problem(problem);
    const decode::Shape s = decode::kernel_shape(p);
    Params rules;
    {
      ModelSwitch off("0");
      rules = op().default_params(p, DType::bf16, h100);
    }
    const Params chosen = checked_default(problem, h100);
    if (!cost_model_serves(s, h100)) {
      EXPECT_EQ(chosen, rules) << problem;
      continue;
    }
    ++served;
    const auto predict = [&](const Params& q) {
      return cost_model_predict_h100(
          cost_model_features(s, data_d(problem), decode::config_of(q), h100.sm_count));
    };
    if (chosen == rules) continue;
    ++changed;
    EXPECT_LT(predict(chosen), predict(rules) - decode::kCostModelMargin) << problem;
  }
  EXPECT_GE(served, 30);
  EXPECT_GE(changed, 5);  // the model does change defaults (2026-12-07: most of these)
}

TEST(DecodeCostModel, PicksThePointOfLeastPredictedTime) {
  const DeviceInfo h100 = h100_sxm();
  const auto& values = decode::cost_model_values();
  for (const char* problem : {"b=1,hq=32,hkv=8,nq=4,nk=988,d=128", "b=36,hq=8,hkv=1,nq=1,nk=929,d=256",
                              "b=3,hq=32,hkv=32,nq=3,nk=1395,d=80", "b=6,hq=71,hkv=1,nq=3,nk=14075,d=64"}) {
    const Problem p = op().parse_problem(problem);
    const decode::Shape s = decode::kernel_shape(p);
    ASSERT_TRUE(cost_model_serves(s, h100)) << problem;
    const auto predict = [&](const Params& q) {
      return cost_model_predict_h100(
          cost_model_features(s, data_d(problem), decode::config_of(q), h100.sm_count));
    };
    // Every valid point of the space, walked here without the search's shortcuts.
    double least = std::numeric_limits<double>::infinity();
    int points = 0;
    for (std::int64_t a : values[0])
      for (std::int64_t b : values[1])
        for (std::int64_t c : values[2])
          for (std::int64_t d : values[3])
            for (std::int64_t e : values[4])
              for (std::int64_t f : values[5])
                for (std::int64_t g : values[6])
                  for (std::int64_t h : values[7]) {
                    const Params q{{a, b, c, d, e, f, g, h}};
                    if (op().invalid_reason(q, p, DType::bf16, h100)) continue;
                    least = std::min(least, predict(q));
                    ++points;
                  }
    EXPECT_GT(points, 50) << problem;
    Params rules;
    {
      ModelSwitch off("0");
      rules = checked_default(problem, h100);
    }
    const Params chosen = checked_default(problem, h100);
    if (chosen == rules)
      EXPECT_LE(predict(rules) - least, decode::kCostModelMargin) << problem;
    else
      EXPECT_EQ(predict(chosen), least) << problem;
  }
}

TEST(DecodeCostModel, KeepsTheRulesWhereItDoesNotServe) {
  const DeviceInfo h100 = h100_sxm();
  for (const char* problem : {"b=6,hq=32,hkv=8,nq=1,nk=7000,d=128,page=16",
                              "b=1,hq=32,hkv=8,nq=1,nk=262144,d=128"}) {
    Params rules;
    {
      ModelSwitch off("0");
      rules = checked_default(problem, h100);
    }
    EXPECT_EQ(checked_default(problem, h100), rules) << problem;
  }
}

}  // namespace
}  // namespace ktune
