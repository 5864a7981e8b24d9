// The model-based strategy on spaces too large to list (SampledSpace): on a made-up space of 16
// tunables (about 3e12 points, a validity rule, a hidden smooth cost that is a sum of terms as an
// op's kernels' times are) it gets within 2% of the optimum in far fewer evaluations than random
// sampling, proposes only valid new points, is deterministic per seed and survives failures; on
// the real MoE space it is what `--strategy model` makes, and on a MoE-like made-up cost it is
// scored against the staged strategy (the numbers are printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "ktune/error.hpp"
#include "search/model_strategy.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"

namespace ktune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// 16 tunables in 8 pairs ("kernels"); tunable i takes kSizes[i] values 1, 2, 4, ... Valid: in
/// each pair the two value indices add up to at most the pair's limit (a tile and its stages
/// within the shared memory), and over the first tunables of all pairs to at most 14 (a
/// register budget shared by the kernels). The cost is a sum over the pairs of a bowl in the
/// pair's indices, plus a weak coupling of neighbouring pairs; its minimum, 100, lies at a valid
/// point on the limits (as optima do: the largest tile that fits).
struct MadeUp {
  static constexpr std::size_t kDims = 16;
  static constexpr int kSizes[kDims] = {6, 5, 8, 4, 6, 6, 5, 7, 8, 4, 6, 5, 7, 6, 4, 8};
  static constexpr int kLimits[kDims / 2] = {6, 9, 5, 7, 8, 8, 7, 9};
  std::vector<int> best;  // the optimum's value indices
  std::vector<double> weight;

  explicit MadeUp(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    int first_sum = 0;
    for (std::size_t k = 0; k < kDims / 2; ++k) {
      // On the pair's limit, and the first tunables' sum within 14.
      int a = std::min<int>(kSizes[2 * k] - 1, static_cast<int>(u(rng) * 3.0));
      if (first_sum + a > 14) a = 0;
      first_sum += a;
      const int b = std::min(kSizes[2 * k + 1] - 1, kLimits[k] - a);
      best.push_back(a);
      best.push_back(b);
    }
    for (std::size_t i = 0; i < kDims; ++i) weight.push_back(1.0 + 3.0 * u(rng));
  }

  static SampledSpace space() {
    SampledSpace s;
    for (std::size_t i = 0; i < kDims; ++i) {
      s.values.emplace_back();
      for (int v = 0; v < kSizes[i]; ++v) s.values.back().push_back(std::int64_t{1} << v);
    }
    s.check = [](const Params& p) -> std::optional<std::string> {
      int first_sum = 0;
      for (std::size_t k = 0; k < kDims / 2; ++k) {
        const int a = index(p, 2 * k), b = index(p, 2 * k + 1);
        if (a < 0 || b < 0) return "a value outside the lists";
        if (a + b > kLimits[k]) return "pair " + std::to_string(k) + " over its limit";
        first_sum += a;
      }
      if (first_sum > 14) return "first tunables over 14";
      return std::nullopt;
    };
    for (std::size_t k = 0; k < kDims / 2; ++k) {
      s.blocks.push_back({2 * k, 2 * k + 1});
      s.additive.push_back({2 * k, 2 * k + 1});
    }
    s.starts = {Params{std::vector<std::int64_t>(kDims, 1)}};  // every index 0: valid
    return s;
  }

  static int index(const Params& p, std::size_t i) {
    const std::int64_t v = p.values.at(i);
    for (int k = 0; k < kSizes[i]; ++k)
      if (v == std::int64_t{1} << k) return k;
    return -1;
  }

  Params optimum() const {
    Params p;
    for (std::size_t i = 0; i < kDims; ++i) p.values.push_back(std::int64_t{1} << best[i]);
    return p;
  }

  double operator()(const Params& p) const {
    double total = 0.0, coupling = 0.0;
    for (std::size_t k = 0; k < kDims / 2; ++k) {
      double q = 0.0;
      for (std::size_t i : {2 * k, 2 * k + 1}) {
        const double d = (index(p, i) - best[i]) / static_cast<double>(kSizes[i] - 1);
        q += weight[i] * d * d;
      }
      const double da = (index(p, 2 * k) - best[2 * k]) / static_cast<double>(kSizes[2 * k] - 1);
      const double db =
          (index(p, 2 * k + 1) - best[2 * k + 1]) / static_cast<double>(kSizes[2 * k + 1] - 1);
      q += 0.5 * da * db * weight[2 * k];  // inside the pair: tile and stages interact
      if (k + 1 < kDims / 2) {
        const double dn = (index(p, 2 * k + 2) - best[2 * k + 2]) /
                          static_cast<double>(kSizes[2 * k + 2] - 1);
        coupling += 0.1 * da * dn;
      }
      total += 12.5 * std::exp(q);
    }
    return total * std::exp(coupling * coupling);
  }
};

struct Trace {
  std::vector<Params> proposed;
  std::size_t reached_at = 0;  // evaluations (the start included) to within 2%; 0: never
  double best = kInf;
};

/// Measures the start first (as a sweep measures the default: observe), then every batch until
/// the strategy stops or `cap` evaluations; `fail` says which points fail.
template <class Cost, class Fail>
Trace run(Strategy& s, const Params& start, const Cost& cost, double optimum, std::size_t cap,
        const Fail& fail) {
  Trace r;
  std::size_t n = 0;
  const auto measure = [&](const Params& p, bool proposed) {
    ++n;
    const double t = fail(p, n) ? kInf : cost(p);
    if (t < r.best) r.best = t;
    if (r.reached_at == 0 && t <= optimum * 1.02) r.reached_at = n;
    if (proposed)
      s.report(p, t);
    else
      s.observe(p, t);
  };
  measure(start, false);
  for (std::vector<Params> b = s.next_batch(); !b.empty() && n < cap; b = s.next_batch())
    for (const Params& p : b) {
      r.proposed.push_back(p);
      measure(p, true);
    }
  return r;
}

const auto kNoFailures = [](const Params&, std::size_t) { return false; };

ModelStrategy made_up_strategy(std::uint64_t seed, ModelOptions o = {}) {
  if (o.limit == 0) o.limit = 200;
  return ModelStrategy(MadeUp::space(), seed, o);
}

void expect_valid_and_new(const std::vector<Params>& proposed, const SampledSpace& space,
                          const Params& start) {
  std::set<Params> seen = {start};
  for (const Params& p : proposed) {
    EXPECT_FALSE(space.check(p)) << "an invalid point: " << *space.check(p);
    EXPECT_TRUE(seen.insert(p).second) << "a point proposed twice (or the start again)";
  }
}

TEST(ModelSampled, GetsWithinTwoPercentFarSoonerThanRandomSampling) {
  const SampledSpace space = MadeUp::space();
  double product = 1.0;
  for (const auto& v : space.values) product *= static_cast<double>(v.size());
  ASSERT_GT(product, 1e12) << "too large to list";
  std::vector<double> model_evals, random_evals;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const MadeUp cost(seed);
    ASSERT_FALSE(space.check(cost.optimum()));
    const double optimum = cost(cost.optimum());
    EXPECT_NEAR(optimum, 100.0, 1e-9);
    ModelStrategy model = made_up_strategy(seed);
    const Trace m = run(model, space.starts.front(), cost, optimum, 200, kNoFailures);
    expect_valid_and_new(m.proposed, space, space.starts.front());
    // Random: the same sampler's points, never a model (every proposal an "initial" one).
    ModelOptions ro;
    ro.initial = std::numeric_limits<std::size_t>::max();
    ro.limit = 1000;
    ModelStrategy random(MadeUp::space(), seed, ro);
    const Trace r = run(random, space.starts.front(), cost, optimum, 1001, kNoFailures);
    expect_valid_and_new(r.proposed, space, space.starts.front());
    std::printf("seed %d: model within 2%% at evaluation %zu (best %.2f after %zu), random at %zu "
                "(0: never; best %.2f after %zu)\n", static_cast<int>(seed), m.reached_at, m.best,
                m.proposed.size() + 1, r.reached_at, r.best, r.proposed.size() + 1);
    model_evals.push_back(m.reached_at == 0 ? 1e9 : static_cast<double>(m.reached_at));
    random_evals.push_back(r.reached_at == 0 ? 1001.0 : static_cast<double>(r.reached_at));
  }
  std::sort(model_evals.begin(), model_evals.end());
  std::sort(random_evals.begin(), random_evals.end());
  EXPECT_LE(model_evals[1], 120.0) << "median evaluations of the model";
  EXPECT_LE(model_evals[2], 200.0) << "every seed gets there within the limit";
  EXPECT_GE(random_evals[1], 5.0 * model_evals[1]) << "random sampling, median";
}

TEST(ModelSampled, SameSeedSameProposalsAndAnotherSeedOthers) {
  const MadeUp cost(7);
  const double optimum = cost(cost.optimum());
  const Params start = MadeUp::space().starts.front();
  ModelOptions o;
  o.limit = 64;
  ModelStrategy a = made_up_strategy(3, o), b = made_up_strategy(3, o), c = made_up_strategy(4, o);
  const Trace ra = run(a, start, cost, optimum, 100, kNoFailures);
  const Trace rb = run(b, start, cost, optimum, 100, kNoFailures);
  const Trace rc = run(c, start, cost, optimum, 100, kNoFailures);
  EXPECT_EQ(ra.proposed.size(), 64u) << "stops at its limit";
  EXPECT_EQ(ra.proposed, rb.proposed);
  EXPECT_NE(ra.proposed, rc.proposed);
  EXPECT_TRUE(a.next_batch().empty());
}

TEST(ModelSampled, SurvivesFailuresAndAnAllFailingStart) {
  const SampledSpace space = MadeUp::space();
  const MadeUp cost(2);
  const double optimum = cost(cost.optimum());
  const Params start = space.starts.front();
  // A region that always fails (a kernel that does not compile), away from the optimum.
  const auto region = [&](const Params& p, std::size_t) {
    return MadeUp::index(p, 0) != cost.best[0] && MadeUp::index(p, 3) == 0;
  };
  ModelStrategy s = made_up_strategy(5);
  const Trace r = run(s, start, cost, optimum, 200, region);
  expect_valid_and_new(r.proposed, space, start);
  EXPECT_GT(r.reached_at, 0u) << "best " << r.best;

  // The first 30 measurements (the start among them) all fail: the proposals stay random until
  // two points have a time, then the model goes on to its limit and improves on the random
  // points. (Thirty failures taught as twice the slowest time mislead it, though: it ends far
  // from the optimum, about 1.5x, where without them it reaches it.)
  ModelStrategy t = made_up_strategy(5);
  const Trace late =
      run(t, start, cost, optimum, 1000, [](const Params&, std::size_t n) { return n <= 30; });
  EXPECT_EQ(late.proposed.size(), 200u);
  expect_valid_and_new(late.proposed, space, start);
  ModelStrategy u = made_up_strategy(5);
  const Trace first = run(u, start, cost, optimum, 40, [](const Params&, std::size_t n) { return n <= 30; });
  EXPECT_LT(late.best, first.best) << "learns after the failures";

  // Everything fails: the strategy goes on proposing new valid points up to its limit.
  ModelOptions o;
  o.limit = 80;
  ModelStrategy f = made_up_strategy(6, o);
  const Trace none = run(f, start, cost, optimum, 1000, [](const Params&, std::size_t) { return true; });
  EXPECT_EQ(none.proposed.size(), 80u);
  expect_valid_and_new(none.proposed, space, start);
}

TEST(ModelSampled, LearnsFromObservationsAndEncodesByTheDeclaredValues) {
  SampledSpace space = MadeUp::space();
  const MadeUp cost(3);
  ModelOptions o;
  o.limit = 40;
  ModelStrategy s(space, 8, o);
  // A valid point it never proposed (a warm start) is learnt and never proposed; an invalid one
  // or one of another length is ignored.
  s.observe(cost.optimum(), cost(cost.optimum()));
  Params invalid = cost.optimum();
  invalid.values[0] = 4096;
  s.observe(invalid, 1.0);
  s.observe(Params{{1, 2}}, 1.0);
  std::vector<Params> all;
  for (std::vector<Params> b = s.next_batch(); !b.empty(); b = s.next_batch())
    for (const Params& p : b) {
      all.push_back(p);
      s.report(p, cost(p));
    }
  EXPECT_EQ(all.size(), 40u);
  expect_valid_and_new(all, space, cost.optimum());
  // Point 0 is the observed optimum: index k of kSizes[i] values encodes as k / (kSizes[i] - 1).
  for (std::size_t i = 0; i < MadeUp::kDims; ++i)
    EXPECT_DOUBLE_EQ(s.encoded(0)(static_cast<Eigen::Index>(i)),
                     cost.best[i] / static_cast<double>(MadeUp::kSizes[i] - 1))
        << i;
}

TEST(ModelSampled, ProposesNothingWithoutAValidPoint) {
  SampledSpace space = MadeUp::space();
  space.check = [](const Params&) -> std::optional<std::string> { return "nothing runs"; };
  ModelStrategy s(space, 1);
  EXPECT_TRUE(s.next_batch().empty());
  EXPECT_FALSE(s.next());
}

Space moe_space(const std::string& shape) {
  const Op& moe = get_op("moe");
  return Space(moe, moe.parse_problem(shape), DType::bf16, *device_for_arch("sm_90a"));
}

/// Random valid points of a MoE space, from the model strategy's sampler: every proposal a
/// random one (blocks as make_space_strategy makes them).
ModelStrategy moe_random(const Space& space, const Params& start, std::uint64_t seed,
                         std::size_t batch, std::size_t limit) {
  const Op& op = space.op();
  SampledSpace sampled;
  for (const Tunable& t : op.tunables()) sampled.values.push_back(t.values);
  sampled.check = [&space](const Params& p) { return space.check(p); };
  sampled.blocks.push_back({});
  for (const std::string& n : op.search_stages().outer) sampled.blocks.back().push_back(op.param_index(n));
  for (const std::vector<std::string>& g : op.search_stages().groups) {
    sampled.blocks.emplace_back();
    for (const std::string& n : g) sampled.blocks.back().push_back(op.param_index(n));
  }
  sampled.starts = {start};
  ModelOptions o;
  o.initial = std::numeric_limits<std::size_t>::max();
  o.batch = batch;
  o.limit = limit;
  return ModelStrategy(std::move(sampled), seed, o);
}

TEST(ModelSampled, IsWhatTheModelStrategyMakesOfTheMoeSpace) {
  const Space space = moe_space("e=8,k=2,h=4096,i=14336,t=128,routing=softmax_renorm");
  ASSERT_FALSE(space.enumerated());
  const Op& op = space.op();
  const Params start = op.default_params(space.problem(), space.dtype(), space.device());
  EXPECT_NO_THROW(check_strategy_name(op, "model"));
  for (std::size_t budget : {std::size_t{0}, std::size_t{20}}) {
    std::unique_ptr<Strategy> s = make_space_strategy(space, "model", start, 1, budget);
    EXPECT_EQ(s->name(), "model");
    s->observe(start, 1000.0);
    std::set<Params> seen = {start};
    std::size_t n = 0;
    for (std::vector<Params> b = s->next_batch(); !b.empty(); b = s->next_batch())
      for (const Params& p : b) {
        EXPECT_FALSE(space.check(p)) << op.params_key(p);
        EXPECT_TRUE(seen.insert(p).second) << op.params_key(p);
        // Any smooth-looking time: bigger tiles a little faster.
        s->report(p, 1000.0 / (1.0 + 0.001 * static_cast<double>(p.values[1] + p.values[10])) +
                         static_cast<double>(n++ % 5));
      }
    EXPECT_EQ(n, budget > 0 ? budget : kSampledModelBudget);
  }
  // The strategy that needs every point listed still says so (random samples: search_test).
  EXPECT_THROW(make_space_strategy(space, "exhaustive", start, 1), InvalidArgument);
}

/// A made-up MoE time over the real MoE space: a sum of its kernels' times (route, align, the
/// two GEMMs with block_m, the combine), each a seeded bowl over its tunables' value indices with
/// interactions and a bump per value (impl is a kernel choice, not a smooth size). Nothing here
/// comes from a device: it is a landscape with MoE's structure and validity rules.
struct MoeLike {
  struct Kernel {
    std::vector<std::size_t> idx;
    double base;
    Eigen::VectorXd centre;
    Eigen::MatrixXd a;
    std::vector<std::vector<double>> bump;
  };
  const Op* op;
  std::vector<Kernel> kernels;

  MoeLike(const Op& o, std::uint64_t seed) : op(&o) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<double> normal(0.0, 1.0);
    const auto ix = [&](std::vector<std::string> names) {
      std::vector<std::size_t> out;
      for (const std::string& n : names) out.push_back(o.param_index(n));
      return out;
    };
    const std::vector<std::pair<std::vector<std::size_t>, double>> defs = {
        {ix({"route_lanes", "route_vec"}), 30},
        {ix({"align_chunk"}), 25},
        {ix({"block_m", "impl1", "bn1", "bk1", "warps1", "warps_m1", "stages1", "group1",
             "prefetch1", "epi1"}), 450},
        {ix({"block_m", "impl2", "bn2", "bk2", "warps2", "warps_m2", "stages2", "group2",
             "prefetch2", "epi2", "split2"}), 450},
        {ix({"combine_vec"}), 40}};
    for (const auto& [idx, base] : defs) {
      Kernel k{idx, base, Eigen::VectorXd(idx.size()), {}, {}};
      const auto d = static_cast<Eigen::Index>(idx.size());
      for (Eigen::Index i = 0; i < d; ++i) k.centre(i) = u(rng);
      Eigen::MatrixXd b(d, d);
      for (Eigen::Index i = 0; i < d; ++i)
        for (Eigen::Index j = 0; j < d; ++j) b(i, j) = 0.25 * normal(rng);
      k.a = b * b.transpose() / static_cast<double>(d);
      for (Eigen::Index i = 0; i < d; ++i) k.a(i, i) += 0.05 + 0.4 * u(rng);
      for (std::size_t t : idx) {
        const Tunable& tun = o.tunables()[t];
        std::vector<double> bump(tun.values.size());
        for (double& x : bump)
          x = tun.name.rfind("impl", 0) == 0 ? 0.25 * u(rng) : 0.05 * std::abs(normal(rng));
        k.bump.push_back(bump);
      }
      kernels.push_back(std::move(k));
    }
  }

  std::size_t index(const Params& p, std::size_t t) const {
    const std::vector<std::int64_t>& v = op->tunables()[t].values;
    return static_cast<std::size_t>(std::find(v.begin(), v.end(), p.values[t]) - v.begin());
  }
  double kernel(const Params& p, const Kernel& k) const {
    Eigen::VectorXd e(k.idx.size());
    double bumps = 0.0;
    for (std::size_t i = 0; i < k.idx.size(); ++i) {
      const std::size_t n = op->tunables()[k.idx[i]].values.size();
      const std::size_t at = index(p, k.idx[i]);
      e(static_cast<Eigen::Index>(i)) =
          (n > 1 ? static_cast<double>(at) / static_cast<double>(n - 1) : 0.0) -
          k.centre(static_cast<Eigen::Index>(i));
      bumps += k.bump[i][at];
    }
    return k.base * std::exp(e.dot(k.a * e) + bumps);
  }
  double operator()(const Params& p) const {
    double t = 0.0;
    for (const Kernel& k : kernels) t += kernel(p, k);
    return t;
  }

  /// The exact optimum: given block_m, the kernels' tunables and validity rules are disjoint
  /// (true of MoE with k = 2), so each kernel is minimised alone over its own values.
  double optimum(const Space& space) const {
    const Params start = op->default_params(space.problem(), space.dtype(), space.device());
    ModelStrategy draws = moe_random(space, start, 99, 4000, 0);
    std::map<std::int64_t, Params> by_block_m = {{start.values[0], start}};
    for (const Params& p : draws.next_batch()) by_block_m.emplace(p.values[0], p);
    double best = kInf;
    for (const auto& [block_m, base] : by_block_m) {
      Params at = base;
      for (const Kernel& k : kernels) {
        std::vector<std::size_t> own;
        for (std::size_t t : k.idx)
          if (t != 0) own.push_back(t);
        std::vector<std::size_t> odo(own.size(), 0);
        double kb = kInf;
        Params chosen = at;
        for (;;) {
          Params p = at;
          for (std::size_t i = 0; i < own.size(); ++i)
            p.values[own[i]] = op->tunables()[own[i]].values[odo[i]];
          if (!space.check(p) && kernel(p, k) < kb) {
            kb = kernel(p, k);
            chosen = p;
          }
          std::size_t d = own.size();
          while (d > 0 && ++odo[d - 1] == op->tunables()[own[d - 1]].values.size()) odo[--d] = 0;
          if (d == 0) break;
        }
        at = chosen;
      }
      EXPECT_FALSE(space.check(at)) << "the kernels' optima compose into a valid point";
      best = std::min(best, (*this)(at));
    }
    return best;
  }
};

// Prints evaluations to within 2% of the optimum on the MoE-like cost for the model (the sweep's
// defaults: budget kSampledModelBudget), the staged strategy and random sampling; asserts only
// what must hold whatever the numbers (valid, new points; the model's best no worse than
// staged's in the median). KTUNE_MOE_BENCH_SEEDS=N scores N seeds per bucket (default 5: with
// one, the median of two runs is one run's noise; when block_m=192 joined the space seed 1 gave
// the model 1.0075 against staged's 1.0069, and seeds 1-3 1.0023 against 1.0155; with the
// defaults of 2026-12-02 as the start, seeds 1-3 gave 1.0075 against 1.0073, seeds 1-5 1.0032
// against 1.0073).
TEST(ModelSampled, MoeLikeCostAgainstStagedAndRandom) {
  const Op& op = get_op("moe");
  const char* env = std::getenv("KTUNE_MOE_BENCH_SEEDS");
  const int seeds = env ? std::max(1, std::atoi(env)) : 5;
  std::vector<double> ratio_model, ratio_staged;
  std::printf("%-6s %-5s %-5s %10s %10s %12s %10s %10s %12s %10s %12s\n", "t", "seed", "opt",
              "model@2%", "model best", "model n", "staged@2%", "staged n", "staged best",
              "random@2%", "random best");
  for (int t : {16, 1024}) {
    const Space space =
        moe_space("e=8,k=2,h=4096,i=14336,routing=softmax_renorm,t=" + std::to_string(t));
    const Params start = op.default_params(space.problem(), space.dtype(), space.device());
    for (int seed = 1; seed <= seeds; ++seed) {
      const MoeLike cost(op, 1000 + 7 * static_cast<std::uint64_t>(seed) + static_cast<std::uint64_t>(t));
      const double optimum = cost.optimum(space);
      std::unique_ptr<Strategy> model = make_space_strategy(space, "model", start, seed, 0);
      const Trace m = run(*model, start, cost, optimum, 100000, kNoFailures);
      std::unique_ptr<Strategy> staged = make_space_strategy(space, "staged", start, seed, 0);
      const Trace s = run(*staged, start, cost, optimum, 100000, kNoFailures);
      ModelStrategy random = moe_random(space, start, static_cast<std::uint64_t>(seed), 8, 1000);
      const Trace r = run(random, start, cost, optimum, 100000, kNoFailures);
      for (const Trace* x : {&m, &s, &r}) {
        std::set<Params> seen = {start};
        for (const Params& p : x->proposed) {
          EXPECT_FALSE(space.check(p));
          EXPECT_TRUE(seen.insert(p).second);
        }
      }
      const auto at = [](const Trace& x) {
        return x.reached_at > 0 ? std::to_string(x.reached_at) : std::string("never");
      };
      std::printf("%-6d %-5d %-5.0f %10s %10.4f %12zu %10s %10zu %12.4f %10s %12.4f\n", t, seed,
                  optimum, at(m).c_str(), m.best / optimum, m.proposed.size() + 1, at(s).c_str(),
                  s.proposed.size() + 1, s.best / optimum, at(r).c_str(), r.best / optimum);
      ratio_model.push_back(m.best / optimum);
      ratio_staged.push_back(s.best / optimum);
    }
  }
  std::sort(ratio_model.begin(), ratio_model.end());
  std::sort(ratio_staged.begin(), ratio_staged.end());
  EXPECT_LE(ratio_model[ratio_model.size() / 2], ratio_staged[ratio_staged.size() / 2] + 1e-9);
}

}  // namespace
}  // namespace ktune
