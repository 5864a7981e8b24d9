#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ktune/error.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"

namespace ktune {
namespace {

Space space_for(const std::string& op, const std::string& shape, const char* arch = "sm_90a") {
  const Op& o = get_op(op);
  return Space(o, o.parse_problem(shape), DType::bf16, *device_for_arch(arch));
}

TEST(Space, IsTheFullCartesianProduct) {
  for (const Op* op : all_ops()) {
    Space s(*op, op->default_problem(), DType::bf16, *device_for_arch("sm_90a"));
    std::size_t product = 1;
    for (const Tunable& t : op->tunables()) product *= t.values.size();
    EXPECT_EQ(s.size(), product) << op->name();
    if (!s.enumerated()) {  // MoE: walked by the staged strategy, never listed
      EXPECT_GT(product, Space::kEnumerateLimit) << op->name();
      EXPECT_TRUE(s.points().empty()) << op->name();
      continue;
    }
    EXPECT_EQ(s.points().size(), product) << op->name();
    std::set<Params> distinct;
    for (const SpacePoint& p : s.points()) distinct.insert(p.params);
    EXPECT_EQ(distinct.size(), product) << op->name();
    EXPECT_GT(s.valid_count(), 0u) << op->name();
  }
}

TEST(Space, InvalidPointsCarryReasonsAndAgreeWithTheOp) {
  Space s = space_for("add_rmsnorm", "m=1000,n=4095");
  std::size_t invalid = 0;
  for (const SpacePoint& p : s.points()) {
    std::optional<std::string> direct =
        s.op().invalid_reason(p.params, s.problem(), s.dtype(), s.device());
    EXPECT_EQ(direct.has_value(), p.invalid.has_value());
    if (p.invalid) {
      EXPECT_FALSE(p.invalid->empty());
      ++invalid;
    }
  }
  EXPECT_GT(invalid, 0u) << "n=4095 rules out every vector width above 1";
  std::size_t counted = 0;
  for (const auto& [reason, n] : s.invalid_reasons()) counted += n;
  EXPECT_EQ(counted, invalid);
  EXPECT_EQ(s.valid_count() + invalid, s.points().size());
}

TEST(Space, CheckRejectsValuesOutsideTheLists) {
  Space s = space_for("add_rmsnorm", "m=64,n=4096");
  Params p = s.valid_points().front();
  EXPECT_FALSE(s.check(p).has_value());
  p.values[0] = 12345;
  EXPECT_TRUE(s.check(p).has_value());
  p.values.pop_back();
  EXPECT_TRUE(s.check(p).has_value());
}

// Space::check relies on it: every registered op's invalid_reason() judges the parameters
// against the tunables' lists first (point_reason), with check_params()' message, for any value
// of any tunable and for a wrong count.
TEST(Space, EveryOpsInvalidReasonChecksTheParametersFirst) {
  for (const Op* op : all_ops()) {
    const Problem problem = op->default_problem();
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const DeviceInfo dev = *device_for_arch(arch);
      const Params good = op->default_params(problem, DType::bf16, dev);
      for (std::size_t i = 0; i < good.values.size(); ++i) {
        Params bad = good;
        bad.values[i] = 1234567;  // in no tunable's list
        const std::optional<std::string> expected = op->check_params(bad);
        ASSERT_TRUE(expected.has_value()) << op->name() << " " << i;
        EXPECT_EQ(op->invalid_reason(bad, problem, DType::bf16, dev), expected)
            << op->name() << ", tunable " << op->tunables()[i].name;
        EXPECT_EQ(space_for(std::string(op->name()), op->problem_key(problem), arch).check(bad),
                  expected)
            << op->name();
      }
      Params short_one = good;
      short_one.values.pop_back();
      EXPECT_EQ(op->invalid_reason(short_one, problem, DType::bf16, dev),
                op->check_params(short_one))
          << op->name();
    }
  }
}

TEST(Strategy, ExhaustiveVisitsEveryPointOnce) {
  Space s = space_for("softmax", "m=128,n=1024");
  std::vector<Params> valid = s.valid_points();
  ExhaustiveStrategy e(valid);
  std::vector<Params> seen;
  while (std::optional<Params> p = e.next()) seen.push_back(*p);
  EXPECT_EQ(seen, valid);
}

TEST(Strategy, RandomIsASeededPermutation) {
  Space s = space_for("add_rmsnorm", "m=64,n=4096");
  std::vector<Params> valid = s.valid_points();
  auto draw = [&](std::uint64_t seed) {
    RandomStrategy r(valid, seed);
    std::vector<Params> out;
    while (std::optional<Params> p = r.next()) out.push_back(*p);
    return out;
  };
  std::vector<Params> a = draw(7), b = draw(7), c = draw(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<Params>(a.begin(), a.end()), std::set<Params>(valid.begin(), valid.end()));
}

// Points measured without being proposed (the default, warm-start points) are skipped when their
// turn comes: never measured twice; the order of the others is unchanged.
TEST(Strategy, ExhaustiveAndRandomSkipObservedPoints) {
  Space s = space_for("add_rmsnorm", "m=64,n=4096");
  const std::vector<Params> valid = s.valid_points();
  ASSERT_GT(valid.size(), 10u);
  const std::set<Params> observed = {valid[0], valid[5], valid[valid.size() - 1]};
  const auto drain = [](Strategy& st) {
    std::vector<Params> out;
    for (std::vector<Params> b = st.next_batch(); !b.empty(); b = st.next_batch())
      out.insert(out.end(), b.begin(), b.end());
    return out;
  };
  std::vector<Params> expected_exhaustive;
  for (const Params& p : valid)
    if (!observed.count(p)) expected_exhaustive.push_back(p);
  ExhaustiveStrategy e(valid);
  for (const Params& p : observed) e.observe(p, 10.0);
  EXPECT_EQ(drain(e), expected_exhaustive);

  RandomStrategy plain(valid, 3);
  std::vector<Params> expected_random;
  for (const Params& p : drain(plain))
    if (!observed.count(p)) expected_random.push_back(p);
  RandomStrategy r(valid, 3);
  for (const Params& p : observed) r.observe(p, std::numeric_limits<double>::infinity());
  r.observe(Params{{-1}}, 1.0);  // not a point of the list: nothing to skip, no crash
  EXPECT_EQ(drain(r), expected_random);
}

TEST(Strategy, UnknownNameIsRejectedWithTheAllowedNames) {
  try {
    make_strategy("bayes", {}, 0);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exhaustive, random"), std::string::npos);
  }
}

// A staged search of a separable cost (outer value + each group's own cost) reaches the global
// optimum with far fewer evaluations than the product, and never proposes a point twice.
TEST(Strategy, StagedFindsTheOptimumOfASeparableCostInFewEvaluations) {
  // Tunables: 0 outer (4 values), 1-2 group A (5 x 4), 3 group B (6), 4-5 group C (3 x 3).
  const std::vector<int> sizes = {4, 5, 4, 6, 3, 3};
  std::vector<std::vector<std::int64_t>> values;
  for (int n : sizes) {
    values.emplace_back();
    for (int v = 0; v < n; ++v) values.back().push_back(v);
  }
  // Invalid points: group A's value (4, 3) and outer 2 with group B's 0 (a coupled rule).
  const auto check = [](const Params& p) -> std::optional<std::string> {
    const auto& v = p.values;
    if (v[1] == 4 && v[2] == 3) return "A";
    if (v[0] == 2 && v[3] == 0) return "B";
    return std::nullopt;
  };
  const auto cost = [](const Params& p) {
    const auto& x = p.values;
    const double outer[] = {5.0, 3.0, 1.0, 4.0};
    // Each group's best depends on the outer value, as a GEMM tile depends on block_m.
    const double a = std::abs(static_cast<double>(x[1] - x[0])) + 0.5 * static_cast<double>((x[2] + x[0]) % 4);
    const double b = std::abs(static_cast<double>(x[3] - 2 * x[0] + 1));
    const double c = static_cast<double>((x[4] * 2 + x[5]) % 5);
    return outer[x[0]] + a + b + c;
  };
  std::size_t points = 0;
  double best = 1e30;
  {
    std::vector<std::int64_t> v(sizes.size(), 0);
    for (;;) {
      if (!check(Params{v})) {
        ++points;
        best = std::min(best, cost(Params{v}));
      }
      std::size_t i = sizes.size();
      while (i > 0 && ++v[i - 1] == sizes[i - 1]) v[--i] = 0;
      if (i == 0) break;
    }
  }
  // The start (2, 0, 0, 0, 0, 0) is invalid (rule B): it is repaired, not skipped.
  StagedStrategy s(values, check, Params{{2, 0, 0, 0, 0, 0}}, {0}, {{1, 2}, {3}, {4, 5}});
  std::set<Params> seen;
  double found = 1e30;
  std::size_t evaluations = 0;
  for (std::vector<Params> batch = s.next_batch(); !batch.empty(); batch = s.next_batch()) {
    for (const Params& p : batch) {
      EXPECT_TRUE(seen.insert(p).second) << "proposed twice";
      EXPECT_FALSE(check(p).has_value()) << "not a valid point";
      s.report(p, cost(p));
      found = std::min(found, cost(p));
      ++evaluations;
    }
  }
  EXPECT_DOUBLE_EQ(found, best);
  EXPECT_LE(evaluations, 4u * (20 + 6 + 9));
  EXPECT_LT(evaluations * 10, points);
}

TEST(Strategy, StagedSurvivesFailuresAndUnrepairableOuterValues) {
  const std::vector<std::vector<std::int64_t>> values = {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}};
  // Outer value 1 has no valid point at all: it is skipped.
  const auto check = [](const Params& p) -> std::optional<std::string> {
    if (p.values[0] == 1) return "outer 1 never runs";
    return std::nullopt;
  };
  StagedStrategy s(values, check, Params{{1, 2, 2}}, {0}, {{1}, {2}});
  std::size_t n = 0;
  for (std::vector<Params> batch = s.next_batch(); !batch.empty(); batch = s.next_batch())
    for (const Params& p : batch) {
      EXPECT_NE(p.values[0], 1);
      s.report(p, std::numeric_limits<double>::infinity());  // every candidate fails
      ++n;
    }
  EXPECT_GT(n, 0u);
  EXPECT_LE(n, 18u);
}

// An outer value whose only valid points differ from the start in two groups at once: the
// one-group repair misses them (every single-group change keeps a reason), the op's fit_outer
// moves the start there first.
TEST(Strategy, StagedFitsTheStartToAnOuterValue) {
  const std::vector<std::vector<std::int64_t>> values = {{0, 1}, {0, 1, 2}, {0, 1, 2}};
  const auto check = [](const Params& p) -> std::optional<std::string> {
    if (p.values[0] == 1 && (p.values[1] != 2 || p.values[2] != 2))
      return std::string("outer 1 takes 2 and 2");
    return std::nullopt;
  };
  const auto outer_one = [](const std::vector<Params>& got) {
    return std::count_if(got.begin(), got.end(), [](const Params& p) { return p.values[0] == 1; });
  };
  const auto run = [&](StagedStrategy s) {
    std::vector<Params> got;
    for (std::vector<Params> batch = s.next_batch(); !batch.empty(); batch = s.next_batch())
      for (const Params& p : batch) {
        EXPECT_EQ(check(p), std::nullopt);
        got.push_back(p);
        s.report(p, 1.0 + static_cast<double>(got.size()));
      }
    return got;
  };
  EXPECT_EQ(outer_one(run(StagedStrategy(values, check, Params{{0, 0, 0}}, {0}, {{1}, {2}}))), 0);
  const StagedStrategy::Fit fit = [](Params p) {
    if (p.values[0] == 1) p.values[1] = p.values[2] = 2;
    return p;
  };
  EXPECT_EQ(outer_one(run(StagedStrategy(values, check, Params{{0, 0, 0}}, {0}, {{1}, {2}}, fit))),
            1);
}

// An observed point is never proposed, and wins its group when it is the fastest.
TEST(Strategy, StagedLearnsFromObservedPoints) {
  const std::vector<std::vector<std::int64_t>> values = {{0, 1}, {0, 1, 2}, {0, 1}};
  const auto check = [](const Params&) -> std::optional<std::string> { return std::nullopt; };
  StagedStrategy s(values, check, Params{{0, 0, 0}}, {0}, {{1}, {2}});
  s.observe(Params{{0, 2, 0}}, 1.0);
  std::vector<Params> got;
  for (std::vector<Params> batch = s.next_batch(); !batch.empty(); batch = s.next_batch())
    for (const Params& p : batch) {
      got.push_back(p);
      s.report(p, 10.0 + static_cast<double>(p.values[1] + p.values[2]));
    }
  EXPECT_EQ(std::count(got.begin(), got.end(), Params{{0, 2, 0}}), 0);
  // Group {2} of outer 0 was searched around the observed winner of group {1}.
  EXPECT_EQ(std::count(got.begin(), got.end(), Params{{0, 2, 1}}), 1);
  EXPECT_EQ(std::count(got.begin(), got.end(), Params{{0, 0, 1}}), 0);
}

TEST(Strategy, OpsNameTheirDefaultStrategyAndStagedNeedsStages) {
  const Op& moe = get_op("moe");
  Space s(moe, moe.parse_problem("e=8,k=2,h=256,i=512,t=16"), DType::bf16, *device_for_arch("sm_90a"));
  const Params start = moe.default_params(s.problem(), DType::bf16, s.device());
  EXPECT_EQ(make_space_strategy(s, "", start, 0)->name(), "staged");
  try {
    make_space_strategy(s, "exhaustive", start, 0);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("too many for the exhaustive strategy"),
              std::string::npos)
        << e.what();
  }
  const Op& norm = get_op("add_rmsnorm");
  Space small = space_for("add_rmsnorm", "m=64,n=4096");
  EXPECT_EQ(make_space_strategy(small, "", Params{}, 0)->name(), "exhaustive");
  try {
    check_strategy_name(norm, "staged");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no search stages"), std::string::npos) << e.what();
  }
  // Every name in a staged op's groups is one of its tunables, and no tunable is in two groups.
  std::set<std::string> named;
  const SearchStages st = moe.search_stages();
  for (const std::string& n : st.outer) EXPECT_TRUE(named.insert(n).second) << n;
  for (const auto& g : st.groups)
    for (const std::string& n : g) EXPECT_TRUE(named.insert(n).second) << n;
  EXPECT_EQ(named.size(), moe.tunables().size()) << "every tunable is searched";
  for (const std::string& n : named) EXPECT_NO_THROW(moe.param_index(n)) << n;
}

// On a space too large to list the random strategy samples: distinct valid points, as many as
// the budget, the same for the same seed, never an observed point. (About 1 point in 10^4-10^5
// of the MoE product is valid: each sampled point costs ~0.1 s of draws, so the counts are small.)
TEST(Strategy, RandomSamplesASpaceTooLargeToList) {
  const Op& moe = get_op("moe");
  Space s(moe, moe.parse_problem("e=8,k=2,h=4096,i=14336,t=64"), DType::bf16,
          *device_for_arch("sm_90a"));
  ASSERT_FALSE(s.enumerated());
  const Params start = moe.default_params(s.problem(), DType::bf16, s.device());
  const auto drain = [](Strategy& st) {
    std::vector<Params> out;
    while (std::optional<Params> p = st.next()) out.push_back(std::move(*p));
    return out;
  };
  std::unique_ptr<Strategy> a = make_space_strategy(s, "random", start, 7, 6);
  EXPECT_EQ(a->name(), "random");
  a->observe(start, 1.0);
  const std::vector<Params> got = drain(*a);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(std::set<Params>(got.begin(), got.end()).size(), got.size()) << "no repeats";
  for (const Params& p : got) {
    EXPECT_FALSE(s.check(p)) << moe.params_key(p) << ": " << *s.check(p);
    EXPECT_NE(p, start) << "observed";
  }
  std::unique_ptr<Strategy> b = make_space_strategy(s, "random", start, 7, 6);
  b->observe(start, 1.0);
  EXPECT_EQ(drain(*b), got) << "a seed gives the same points";
  std::unique_ptr<Strategy> c = make_space_strategy(s, "random", start, 8, 6);
  EXPECT_NE(drain(*c), got);
  // A space with no valid point: the strategy ends (after its draws) instead of spinning.
  SampledRandomStrategy none(
      {{1, 2}, {3}}, [](const Params&) { return std::optional<std::string>("no"); }, 1, 10);
  EXPECT_FALSE(none.next());
  // Fewer valid points than the budget: each once, then done.
  SampledRandomStrategy few(
      {{1, 2, 3}, {4, 5}},
      [](const Params& p) {
        return p.values[0] == 2 ? std::optional<std::string>() : std::optional<std::string>("odd");
      },
      1, 10);
  EXPECT_EQ(drain(few).size(), 2u);
}

// Without --budget the model strategy stops on a listed space after a fifth of its valid points
// (at least kModelMinBudget), so that a plan of many problems needs no budget per line; a budget
// given replaces it.
TEST(Strategy, ModelOnAListedSpaceStopsAtItsDefaultBudget) {
  EXPECT_EQ(default_model_budget(0), 0u);
  EXPECT_EQ(default_model_budget(10), 10u);
  EXPECT_EQ(default_model_budget(60), kModelMinBudget);
  EXPECT_EQ(default_model_budget(136), 28u);
  EXPECT_EQ(default_model_budget(1000), 200u);
  Space s = space_for("add_rmsnorm", "m=2048,n=4096");
  const std::size_t valid = s.valid_points().size();
  ASSERT_GT(valid, kModelMinBudget);
  const auto proposals = [&](std::size_t budget) {
    std::unique_ptr<Strategy> st = make_space_strategy(s, "model", Params{}, 3, budget);
    std::set<Params> seen;
    std::size_t n = 0;
    for (std::vector<Params> batch = st->next_batch(); !batch.empty(); batch = st->next_batch())
      for (const Params& p : batch) {
        EXPECT_FALSE(s.check(p).has_value());
        EXPECT_TRUE(seen.insert(p).second) << "proposed twice";
        st->report(p, 1.0 + static_cast<double>(n++ % 5));
      }
    return n;
  };
  EXPECT_EQ(proposals(0), default_model_budget(valid));
  EXPECT_EQ(proposals(5), 5u);
}

// The staged walk of a real MoE space stays small: hundreds of candidates, not the product.
TEST(Strategy, StagedMoeSweepIsSmall) {
  const Op& moe = get_op("moe");
  for (const char* shape : {"e=8,k=2,h=4096,i=14336,t=1", "e=8,k=2,h=4096,i=14336,t=4096",
                            "e=64,k=8,h=2048,i=1408,t=1024,routing=sigmoid_group,n_group=8,topk_group=4"}) {
    Space s(moe, moe.parse_problem(shape), DType::bf16, *device_for_arch("sm_90a"));
    const Params start = moe.default_params(s.problem(), DType::bf16, s.device());
    std::unique_ptr<Strategy> st = make_space_strategy(s, "", start, 0);
    std::size_t n = 0;
    std::set<std::int64_t> block_m;
    for (std::vector<Params> batch = st->next_batch(); !batch.empty(); batch = st->next_batch())
      for (const Params& p : batch) {
        EXPECT_FALSE(s.check(p).has_value()) << shape;
        block_m.insert(p.values[0]);
        st->report(p, static_cast<double>(n++ % 7) + 1.0);
      }
    std::printf("%s: %zu candidates, block_m values %zu, of %zu points\n", shape, n,
                block_m.size(), s.size());
    EXPECT_GT(n, 10u) << shape;
    EXPECT_LT(n, 1000u) << shape;
  }
}

}  // namespace
}  // namespace ktune
