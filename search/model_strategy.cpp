#include "search/model_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "search/gp.hpp"

namespace ktune {

namespace {

// Encoded distances run from 0 to sqrt(tunables); the grid spans a kernel that forgets a
// neighbour one value step away (0.1) up to one nearly flat over the whole space (2.5). Noise as a fraction of the signal
// variance: timing noise of ~1% is ~1e-4 against a spread of log times of ~0.1-0.5, failures
// taught as a penalty are a step the smooth kernel can only fit with more.
const std::vector<double> kLengthScales = {0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5};
const std::vector<double> kNoises = {1e-4, 1e-3, 1e-2, 5e-2, 0.2};
// Multiples tried for each tunable's weight. No 0: with a dozen points, dropping a tunable fits
// the likelihood but loses the region of the optimum (replay: the median rose from 18 to 24).
const std::vector<double> kRelevance = {0.25, 0.5, 2.0, 4.0};
const double kFailurePenalty = std::log(2.0);  // a failure reads as twice the slowest time

}  // namespace

ModelStrategy::ModelStrategy(std::vector<Params> points, std::uint64_t seed, ModelOptions options)
    : points_(std::move(points)),
      options_(options),
      state_(points_.size(), State::fresh),
      log_time_(points_.size(), std::numeric_limits<double>::quiet_NaN()),
      rng_(seed) {
  options_.batch = std::max<std::size_t>(options_.batch, 1);
  options_.candidates = std::max<std::size_t>(options_.candidates, 1);
  const std::size_t dims = points_.empty() ? 0 : points_.front().values.size();
  encoded_ = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(points_.size()),
                                   static_cast<Eigen::Index>(dims));
  for (std::size_t j = 0; j < dims; ++j) {
    std::set<std::int64_t> distinct;
    for (const Params& p : points_) distinct.insert(p.values.at(j));
    const std::vector<std::int64_t> sorted(distinct.begin(), distinct.end());
    const double steps = static_cast<double>(sorted.size() - 1);
    for (std::size_t i = 0; i < points_.size(); ++i) {
      const auto at = std::lower_bound(sorted.begin(), sorted.end(), points_[i].values[j]);
      encoded_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
          steps > 0 ? static_cast<double>(at - sorted.begin()) / steps : 0.0;
    }
  }
  for (std::size_t i = 0; i < points_.size(); ++i) index_.emplace(points_[i], i);
  // The same Fisher-Yates draw as RandomStrategy: one order on every standard library.
  order_.resize(points_.size());
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  for (std::size_t i = order_.size(); i > 1; --i)
    std::swap(order_[i - 1], order_[static_cast<std::size_t>(rng_() % i)]);
}

void ModelStrategy::report(const Params& params, double median_us) {
  auto it = index_.find(params);
  if (it == index_.end() || state_[it->second] == State::reported) return;
  state_[it->second] = State::reported;
  log_time_[it->second] = std::isfinite(median_us) && median_us > 0
                              ? std::log(median_us)
                              : std::numeric_limits<double>::infinity();
  reported_.push_back(it->second);
}

std::vector<std::size_t> ModelStrategy::random_batch(std::size_t count) {
  std::vector<std::size_t> out;
  for (; order_at_ < order_.size() && out.size() < count; ++order_at_)
    if (state_[order_[order_at_]] == State::fresh) out.push_back(order_[order_at_]);
  return out;
}

std::vector<std::size_t> ModelStrategy::model_batch() {
  double worst = -std::numeric_limits<double>::infinity();
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i : reported_)
    if (std::isfinite(log_time_[i])) {
      worst = std::max(worst, log_time_[i]);
      best = std::min(best, log_time_[i]);
    }
  const Eigen::Index dims = encoded_.cols();
  const std::size_t n = reported_.size();
  Eigen::MatrixXd x(static_cast<Eigen::Index>(n + options_.batch), dims);
  Eigen::VectorXd y(static_cast<Eigen::Index>(n + options_.batch));
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = reported_[k];
    x.row(static_cast<Eigen::Index>(k)) = encoded_.row(static_cast<Eigen::Index>(i));
    y(static_cast<Eigen::Index>(k)) =
        std::isfinite(log_time_[i]) ? log_time_[i] : worst + kFailurePenalty;
  }
  const auto rows = [](std::size_t count) { return static_cast<Eigen::Index>(count); };
  gp::GaussianProcess model =
      gp::fit(x.topRows(rows(n)), y.head(rows(n)), kLengthScales, kNoises,
              options_.relevance ? kRelevance : std::vector<double>{});

  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < points_.size(); ++i)
    if (state_[i] == State::fresh) candidates.push_back(i);
  if (candidates.size() > options_.candidates) {
    // A seeded partial shuffle, then back in list order so ties break the same way.
    for (std::size_t k = 0; k < options_.candidates; ++k) {
      const std::size_t j = k + static_cast<std::size_t>(rng_() % (candidates.size() - k));
      std::swap(candidates[k], candidates[j]);
    }
    candidates.resize(options_.candidates);
    std::sort(candidates.begin(), candidates.end());
  }

  std::vector<std::size_t> picks;
  std::size_t believed = n;
  while (picks.size() < options_.batch && !candidates.empty()) {
    Eigen::MatrixXd cx(rows(candidates.size()), dims);
    for (std::size_t k = 0; k < candidates.size(); ++k)
      cx.row(rows(k)) = encoded_.row(rows(candidates[k]));
    Eigen::VectorXd mean, variance;
    model.predict(cx, mean, variance);
    std::size_t chosen = 0;
    double chosen_ei = -1.0;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const double ei =
          gp::expected_improvement(mean(rows(k)), std::sqrt(variance(rows(k))), best);
      if (ei > chosen_ei) {
        chosen_ei = ei;
        chosen = k;
      }
    }
    if (picks.empty() && options_.stop_ei > 0 && chosen_ei < options_.stop_ei) {
      stopped_ = true;
      return {};
    }
    picks.push_back(candidates[chosen]);
    // Kriging believer: the pick joins the data at its predicted log time, which leaves the
    // mean as it was and shrinks the variance around it.
    x.row(rows(believed)) = cx.row(rows(chosen));
    y(rows(believed)) = mean(rows(chosen));
    ++believed;
    candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(chosen));
    if (picks.size() < options_.batch && !candidates.empty())
      model = gp::GaussianProcess(x.topRows(rows(believed)), y.head(rows(believed)), model.hyper());
  }
  return picks;
}

std::vector<Params> ModelStrategy::next_batch() {
  if (stopped_) return {};
  std::size_t known = 0, finite = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) known += state_[i] != State::fresh ? 1 : 0;
  for (std::size_t i : reported_) finite += std::isfinite(log_time_[i]) ? 1 : 0;
  std::vector<std::size_t> picks;
  if (known < options_.initial)
    picks = random_batch(options_.initial - known);
  else if (finite < 2)
    picks = random_batch(options_.batch);
  else
    picks = model_batch();
  std::vector<Params> out;
  for (std::size_t i : picks) {
    state_[i] = State::proposed;
    out.push_back(points_[i]);
  }
  return out;
}

std::optional<Params> ModelStrategy::next() {
  if (pending_.empty())
    for (Params& p : next_batch()) pending_.push_back(std::move(p));
  if (pending_.empty()) return std::nullopt;
  Params p = std::move(pending_.front());
  pending_.pop_front();
  return p;
}

}  // namespace ktune
