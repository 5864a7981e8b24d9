// The Gaussian process against hand computations, and the model-based strategy's guarantees:
// valid points only, each once, failures survived, the same proposals for the same seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ktune/error.hpp"
#include "search/gp.hpp"
#include "search/model_strategy.hpp"
#include "search/space.hpp"

namespace ktune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Gp, Matern52AtKnownDistances) {
  EXPECT_DOUBLE_EQ(gp::matern52(0.0, 0.7), 1.0);
  // r = l: a = sqrt(5); (1 + sqrt5 + 5/3) e^-sqrt5
  const double a = std::sqrt(5.0);
  EXPECT_NEAR(gp::matern52(0.5, 0.5), (1.0 + a + 5.0 / 3.0) * std::exp(-a), 1e-15);
  EXPECT_NEAR(gp::matern52(1.0, 0.5), (1.0 + 2 * a + 20.0 / 3.0) * std::exp(-2 * a), 1e-15);
  EXPECT_LT(gp::matern52(10.0, 0.5), 1e-8);
}

TEST(Gp, KernelMatrixIsTheMaternOfEuclideanDistances) {
  Eigen::MatrixXd a(2, 2), b(3, 2);
  a << 0, 0, 1, 1;
  b << 0, 0, 0.3, 0.4, 1, 0;
  const Eigen::MatrixXd k = gp::kernel_matrix(a, b, 0.8);
  ASSERT_EQ(k.rows(), 2);
  ASSERT_EQ(k.cols(), 3);
  EXPECT_DOUBLE_EQ(k(0, 0), 1.0);
  EXPECT_NEAR(k(0, 1), gp::matern52(0.5, 0.8), 1e-15);               // 3-4-5
  EXPECT_NEAR(k(1, 1), gp::matern52(std::sqrt(0.49 + 0.36), 0.8), 1e-15);
  EXPECT_NEAR(k(1, 2), gp::matern52(1.0, 0.8), 1e-15);
  const Eigen::MatrixXd self = gp::kernel_matrix(b, b, 0.8);
  EXPECT_TRUE(self.isApprox(self.transpose()));
  EXPECT_TRUE((self.diagonal().array() == 1.0).all());
}

// Two points, by hand: with c = matern(1), g the noise ratio, C = [[1+g, c], [c, 1+g]], mean m
// of y, r = y - m = (-d, d), d = (y1 - y0) / 2. Then C^-1 r = (-d, d) / (1 + g - c), s2 =
// r' C^-1 r / 2 = d^2 / (1 + g - c), and at x with correlations k = (k0, k1):
// mean = m + d (k1 - k0) / (1 + g - c), var = s2 (1 - k' C^-1 k).
TEST(Gp, PosteriorMatchesAHandComputationOnTwoPoints) {
  Eigen::MatrixXd x(2, 1);
  x << 0.0, 1.0;
  Eigen::VectorXd y(2);
  y << 1.0, 3.0;
  const double l = 0.6, g = 1e-3;
  gp::GaussianProcess model(x, y, gp::Hyper{l, g, {}});
  const double c = gp::matern52(1.0, l), m = 2.0, d = 1.0;
  const double s2 = d * d / (1 + g - c);
  EXPECT_NEAR(model.prior_mean(), m, 1e-12);
  EXPECT_NEAR(model.signal_variance(), s2, 1e-9);

  Eigen::MatrixXd at(3, 1);
  at << 0.25, 0.5, 0.0;
  Eigen::VectorXd mean, var;
  model.predict(at, mean, var);
  const double det = (1 + g) * (1 + g) - c * c;
  for (int i = 0; i < 3; ++i) {
    const double k0 = gp::matern52(std::abs(at(i, 0) - 0.0), l);
    const double k1 = gp::matern52(std::abs(at(i, 0) - 1.0), l);
    const double want_mean = m + d * (k1 - k0) / (1 + g - c);
    // k' C^-1 k with C^-1 = [[1+g, -c], [-c, 1+g]] / det
    const double quad = ((1 + g) * (k0 * k0 + k1 * k1) - 2 * c * k0 * k1) / det;
    EXPECT_NEAR(mean(i), want_mean, 1e-9) << "at " << at(i, 0);
    EXPECT_NEAR(var(i), s2 * (1 - quad), 1e-9) << "at " << at(i, 0);
  }
  EXPECT_NEAR(mean(1), m, 1e-12) << "halfway between, by symmetry";
  // At a data point with little noise the posterior nearly interpolates and is nearly certain.
  EXPECT_NEAR(mean(2), 1.0, 0.01);
  EXPECT_LT(var(2), 0.01 * s2);
  // The log likelihood of the profiled model: -n/2 log(2 pi s2) - 1/2 log det C - n/2.
  const double pi = 3.14159265358979323846;
  EXPECT_NEAR(model.log_likelihood(), -std::log(2 * pi * s2) - 0.5 * std::log(det) - 1.0, 1e-9);
}

TEST(Gp, WeightsScaleTheInputs) {
  Eigen::MatrixXd x(3, 2);
  x << 0, 0, 1, 0, 0, 1;
  Eigen::VectorXd y(3);
  y << 0.0, 1.0, -1.0;
  Eigen::VectorXd w(2);
  w << 2.0, 0.5;
  Eigen::MatrixXd scaled = x;
  scaled.col(0) *= 2.0;
  scaled.col(1) *= 0.5;
  gp::GaussianProcess weighted(x, y, gp::Hyper{0.7, 1e-2, w});
  gp::GaussianProcess plain(scaled, y, gp::Hyper{0.7, 1e-2, {}});
  Eigen::MatrixXd at(1, 2);
  at << 0.4, 0.6;
  Eigen::MatrixXd at_scaled(1, 2);
  at_scaled << 0.8, 0.3;
  Eigen::VectorXd m1, v1, m2, v2;
  weighted.predict(at, m1, v1);
  plain.predict(at_scaled, m2, v2);
  EXPECT_NEAR(m1(0), m2(0), 1e-12);
  EXPECT_NEAR(v1(0), v2(0), 1e-12);
  EXPECT_NEAR(weighted.log_likelihood(), plain.log_likelihood(), 1e-12);
  EXPECT_THROW(gp::GaussianProcess(x, y, gp::Hyper{0.7, 1e-2, Eigen::VectorXd::Ones(3)}),
               InvalidArgument);
}

TEST(Gp, FitPicksTheLikeliestGridPointAndSurvivesDuplicatesAndConstants) {
  Eigen::MatrixXd x(6, 1);
  x << 0, 0.2, 0.4, 0.6, 0.8, 1.0;
  Eigen::VectorXd y = (x.col(0).array() * 3.0).sin().matrix();
  const std::vector<double> ls = {0.05, 0.5, 5.0}, noise = {1e-4, 1.0};
  gp::GaussianProcess best = gp::fit(x, y, ls, noise);
  for (double l : ls)
    for (double g : noise)
      EXPECT_GE(best.log_likelihood(), gp::GaussianProcess(x, y, gp::Hyper{l, g, {}}).log_likelihood());
  EXPECT_GE(gp::fit(x, y, ls, noise, {0.5, 2.0}).log_likelihood(), best.log_likelihood());
  // The same point twice with tiny noise, and every target equal: finite, no throw.
  Eigen::MatrixXd twice(3, 1);
  twice << 0.5, 0.5, 0.5;
  Eigen::VectorXd same = Eigen::VectorXd::Constant(3, 2.0);
  gp::GaussianProcess flat(twice, same, gp::Hyper{0.5, 1e-12, {}});
  Eigen::VectorXd m, v;
  flat.predict(x, m, v);
  EXPECT_TRUE(m.allFinite());
  EXPECT_TRUE(v.allFinite());
  EXPECT_NEAR(m(0), 2.0, 1e-9);
  EXPECT_THROW(gp::fit(x, y, {}, noise), InvalidArgument);
}

TEST(Gp, ExpectedImprovementLimits) {
  // No uncertainty: the plain improvement, or nothing.
  EXPECT_DOUBLE_EQ(gp::expected_improvement(1.0, 0.0, 3.0), 2.0);
  EXPECT_DOUBLE_EQ(gp::expected_improvement(3.0, 0.0, 1.0), 0.0);
  // At the best: sd * phi(0) = sd / sqrt(2 pi).
  EXPECT_NEAR(gp::expected_improvement(1.0, 0.5, 1.0), 0.5 / std::sqrt(2 * 3.14159265358979323846), 1e-12);
  // Far below the best: the improvement; far above: ~0 but never negative.
  EXPECT_NEAR(gp::expected_improvement(-10.0, 0.1, 0.0), 10.0, 1e-12);
  EXPECT_GE(gp::expected_improvement(10.0, 0.1, 0.0), 0.0);
  EXPECT_LT(gp::expected_improvement(10.0, 0.1, 0.0), 1e-12);
  // More uncertainty, more expected improvement; a lower mean, more too.
  EXPECT_LT(gp::expected_improvement(1.0, 0.1, 0.5), gp::expected_improvement(1.0, 1.0, 0.5));
  EXPECT_LT(gp::expected_improvement(1.0, 0.3, 0.5), gp::expected_improvement(0.8, 0.3, 0.5));
}

Space attention_space(const std::string& shape) {
  const Op& op = get_op("flash_attention");
  return Space(op, op.parse_problem(shape), DType::bf16, *device_for_arch("sm_90a"));
}

// A smooth made-up time over the encoded point, with some points failing.
double fake_time(const ModelStrategy& s, std::size_t i, bool with_failures) {
  const Eigen::VectorXd e = s.encoded(i);
  if (with_failures && e.size() > 1 && e(1) > 0.9) return kInf;
  double t = 100.0;
  for (Eigen::Index j = 0; j < e.size(); ++j)
    t *= 1.0 + 0.3 * (e(j) - 0.3 * static_cast<double>(j % 3)) * (e(j) - 0.3 * static_cast<double>(j % 3));
  return t;
}

// Runs a strategy to the end the way a sweep does; returns the proposals in order.
std::vector<Params> run_all(ModelStrategy& s, const std::vector<Params>& points,
                            bool with_failures, bool all_fail = false) {
  std::map<Params, std::size_t> index;
  for (std::size_t i = 0; i < points.size(); ++i) index[points[i]] = i;
  std::vector<Params> proposed;
  for (std::vector<Params> batch = s.next_batch(); !batch.empty(); batch = s.next_batch()) {
    EXPECT_LE(batch.size(), 8u);
    for (const Params& p : batch) {
      proposed.push_back(p);
      auto it = index.find(p);
      if (it == index.end()) {
        ADD_FAILURE() << "proposed a point outside the valid list";
        return proposed;
      }
      s.report(p, all_fail ? kInf : fake_time(s, it->second, with_failures));
    }
  }
  return proposed;
}

TEST(ModelStrategy, ProposesEveryValidPointOnceAndNothingElse) {
  Space space = attention_space("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=yes");
  const std::vector<Params> valid = space.valid_points();
  ASSERT_GT(valid.size(), 50u);
  ModelStrategy s(valid, 3);
  const std::vector<Params> got = run_all(s, valid, true);
  EXPECT_EQ(got.size(), valid.size());
  EXPECT_EQ(std::set<Params>(got.begin(), got.end()), std::set<Params>(valid.begin(), valid.end()));
  for (const Params& p : got) EXPECT_FALSE(space.check(p)) << "invalid point proposed";
  EXPECT_TRUE(s.next_batch().empty());
  EXPECT_FALSE(s.next());
}

TEST(ModelStrategy, FindsTheOptimumOfASmoothFunctionEarly) {
  Space space = attention_space("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelStrategy probe(valid, 1);
  std::size_t best = 0;
  for (std::size_t i = 1; i < valid.size(); ++i)
    if (fake_time(probe, i, false) < fake_time(probe, best, false)) best = i;
  ModelStrategy s(valid, 1);
  const std::vector<Params> got = run_all(s, valid, false);
  const std::size_t at = static_cast<std::size_t>(
      std::find(got.begin(), got.end(), valid[best]) - got.begin());
  EXPECT_LT(at, valid.size() / 3) << "the optimum of a smooth bowl came at proposal " << at + 1;
}

TEST(ModelStrategy, SurvivesEveryPointFailing) {
  Space space = attention_space("b=8,hq=16,hkv=16,nq=1024,nk=1024,d=64,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelStrategy s(valid, 5);
  const std::vector<Params> got = run_all(s, valid, false, true);
  EXPECT_EQ(std::set<Params>(got.begin(), got.end()).size(), valid.size());
  // Some failures among finite times: still every point once.
  ModelStrategy t(valid, 5);
  const std::vector<Params> mixed = run_all(t, valid, true);
  EXPECT_EQ(std::set<Params>(mixed.begin(), mixed.end()).size(), mixed.size());
  EXPECT_EQ(mixed.size(), valid.size());
}

TEST(ModelStrategy, SameSeedSameProposals) {
  Space space = attention_space("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelStrategy a(valid, 11), b(valid, 11), c(valid, 12);
  const std::vector<Params> ga = run_all(a, valid, true), gb = run_all(b, valid, true),
                            gc = run_all(c, valid, true);
  EXPECT_EQ(ga, gb);
  EXPECT_NE(ga, gc);
}

TEST(ModelStrategy, LearnsFromReportsItDidNotAskForAndIgnoresStrangers) {
  Space space = attention_space("b=4,hq=16,hkv=16,nq=2048,nk=2048,d=64,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelStrategy s(valid, 2);
  // A sweep reports the default configuration first; it is never proposed again.
  s.report(valid[7], 50.0);
  s.report(Params{{-1, -1}}, 1.0);  // not a point of the list: ignored, no crash
  const std::vector<Params> got = run_all(s, valid, true);
  EXPECT_EQ(got.size(), valid.size() - 1);
  EXPECT_EQ(std::count(got.begin(), got.end(), valid[7]), 0);
}

TEST(ModelStrategy, EncodesValueIndicesIntoTheUnitInterval) {
  std::vector<Params> pts = {Params{{16, 0}}, Params{{64, 1}}, Params{{32, 0}}, Params{{128, 1}}};
  ModelStrategy s(pts, 0);
  EXPECT_DOUBLE_EQ(s.encoded(0)(0), 0.0);
  EXPECT_DOUBLE_EQ(s.encoded(2)(0), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.encoded(1)(0), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.encoded(3)(0), 1.0);
  EXPECT_DOUBLE_EQ(s.encoded(1)(1), 1.0);
  EXPECT_DOUBLE_EQ(s.encoded(2)(1), 0.0);
  ModelStrategy empty(std::vector<Params>{}, 0);
  EXPECT_TRUE(empty.next_batch().empty());
}

TEST(ModelStrategy, StopsWhenNothingIsExpectedToImprove) {
  Space space = attention_space("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelOptions o;
  o.stop_ei = 0.05;  // a 5% expected gain or stop: far before the end on a smooth bowl
  ModelStrategy s(valid, 4, o);
  const std::vector<Params> got = run_all(s, valid, false);
  EXPECT_GE(got.size(), o.initial);
  EXPECT_LT(got.size(), valid.size());
}

// Observed points (the default, warm-start points) are data for the model, are never proposed,
// and leave the random start as it was.
TEST(ModelStrategy, LearnsFromObservedPointsAndNeverProposesThem) {
  Space space = attention_space("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64,causal=no");
  const std::vector<Params> valid = space.valid_points();
  ModelStrategy probe(valid, 1);
  std::vector<std::size_t> by_time(valid.size());
  for (std::size_t i = 0; i < valid.size(); ++i) by_time[i] = i;
  std::sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) {
    return fake_time(probe, a, false) < fake_time(probe, b, false);
  });
  // Every third point but the 12 fastest is observed; the model alone (no random start) must
  // then go straight for the fast region it has not seen.
  std::set<std::size_t> observed;
  for (std::size_t r = 12; r < by_time.size(); r += 3) observed.insert(by_time[r]);
  ModelOptions o;
  o.initial = 0;
  ModelStrategy s(valid, 1, o);
  for (std::size_t i : observed) s.observe(valid[i], fake_time(probe, i, false));
  const std::vector<Params> first = s.next_batch();
  ASSERT_EQ(first.size(), o.batch);
  std::set<Params> fastest;
  for (std::size_t r = 0; r < 12; ++r) fastest.insert(valid[by_time[r]]);
  std::size_t hits = 0;
  for (const Params& p : first) hits += fastest.count(p);
  EXPECT_GE(hits, o.batch / 2) << "the first model batch ignored the observations";
  // Without them, the same strategy's first batch is random: far fewer of the 12 fastest.
  ModelStrategy blind(valid, 1, o);
  std::size_t blind_hits = 0;
  for (const Params& p : blind.next_batch()) blind_hits += fastest.count(p);
  EXPECT_LT(blind_hits, hits);

  // With the default options: `initial` random points still come first, and no observed point
  // is ever proposed.
  ModelStrategy t(valid, 2);
  for (std::size_t i : observed) t.observe(valid[i], fake_time(probe, i, false));
  EXPECT_EQ(t.next_batch().size(), ModelOptions{}.initial);
  ModelStrategy u(valid, 2);
  for (std::size_t i : observed) u.observe(valid[i], fake_time(probe, i, false));
  const std::vector<Params> got = run_all(u, valid, false);
  EXPECT_EQ(got.size(), valid.size() - observed.size());
  for (std::size_t i : observed) EXPECT_EQ(std::count(got.begin(), got.end(), valid[i]), 0);
}

}  // namespace
}  // namespace ktune
