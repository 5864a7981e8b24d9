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
// Additive shares tried when the space names additive groups (0: the plain kernel).
const std::vector<double> kAdditiveShares = {0.0, 0.5, 0.9};
// Sampled spaces: random points tried for a first valid point when no start is valid, and
// sampler steps before the first random point is taken (each step moves every block).
constexpr std::size_t kFirstValidTries = 100000;
constexpr std::size_t kBurnIn = 4;
// Two-block moves tried around each of the fastest points.
constexpr std::size_t kRepairMoves = 64;

// A seeded index below n, the same on every standard library.
std::size_t below(std::mt19937_64& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % n);
}

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
  for (std::size_t j = 0; j < dims; ++j) {
    std::set<std::int64_t> distinct;
    for (const Params& p : points_) distinct.insert(p.values.at(j));
    levels_.emplace_back(distinct.begin(), distinct.end());
  }
  encoded_ = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(points_.size()),
                                   static_cast<Eigen::Index>(dims));
  for (std::size_t i = 0; i < points_.size(); ++i)
    encoded_.row(static_cast<Eigen::Index>(i)) = encode(points_[i]);
  for (std::size_t i = 0; i < points_.size(); ++i) index_.emplace(points_[i], i);
  // The same Fisher-Yates draw as RandomStrategy: one order on every standard library.
  order_.resize(points_.size());
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  for (std::size_t i = order_.size(); i > 1; --i)
    std::swap(order_[i - 1], order_[below(rng_, i)]);
}

ModelStrategy::ModelStrategy(SampledSpace space, std::uint64_t seed, ModelOptions options)
    : options_(options), sampled_(true), space_(std::move(space)), rng_(seed) {
  options_.batch = std::max<std::size_t>(options_.batch, 1);
  options_.candidates = std::max<std::size_t>(options_.candidates, 1);
  const std::size_t dims = space_.values.size();
  for (const std::vector<std::int64_t>& v : space_.values) {
    std::vector<std::int64_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    levels_.push_back(std::move(sorted));
  }
  encoded_ = Eigen::MatrixXd::Zero(0, static_cast<Eigen::Index>(dims));
  // Blocks partition the tunables: the given ones (a tunable named twice stays in the first),
  // then each tunable of none alone.
  std::vector<bool> placed(dims, false);
  std::vector<std::vector<std::size_t>> blocks;
  for (const std::vector<std::size_t>& b : space_.blocks) {
    std::vector<std::size_t> kept;
    for (std::size_t j : b)
      if (j < dims && !placed[j]) {
        placed[j] = true;
        kept.push_back(j);
      }
    if (!kept.empty()) blocks.push_back(std::move(kept));
  }
  for (std::size_t j = 0; j < dims; ++j)
    if (!placed[j]) blocks.push_back({j});
  space_.blocks = std::move(blocks);
  for (const std::vector<std::size_t>& g : space_.additive) {
    groups_.emplace_back();
    for (std::size_t j : g)
      if (j < dims) groups_.back().push_back(static_cast<Eigen::Index>(j));
  }
  for (const Params& s : space_.starts)
    if (s.values.size() == dims && valid(s)) {
      chain_ = s;
      break;
    }
  for (std::size_t t = 0; !chain_ && dims > 0 && t < kFirstValidTries; ++t) {
    Params p;
    for (const std::vector<std::int64_t>& v : space_.values)
      p.values.push_back(v[below(rng_, v.size())]);
    if (valid(p)) chain_ = std::move(p);
  }
  if (chain_)
    for (std::size_t k = 0; k < kBurnIn; ++k) gibbs_step();
}

Eigen::RowVectorXd ModelStrategy::encode(const Params& p) const {
  Eigen::RowVectorXd row = Eigen::RowVectorXd::Zero(static_cast<Eigen::Index>(levels_.size()));
  for (std::size_t j = 0; j < levels_.size(); ++j) {
    const std::vector<std::int64_t>& sorted = levels_[j];
    const double steps = static_cast<double>(sorted.size() - 1);
    const auto at = std::lower_bound(sorted.begin(), sorted.end(), p.values.at(j));
    row(static_cast<Eigen::Index>(j)) =
        steps > 0 ? static_cast<double>(at - sorted.begin()) / steps : 0.0;
  }
  return row;
}

std::optional<std::size_t> ModelStrategy::find_or_add(const Params& p) {
  auto it = index_.find(p);
  if (it != index_.end()) return it->second;
  if (!sampled_ || p.values.size() != levels_.size() || !valid(p)) return std::nullopt;
  const std::size_t i = points_.size();
  points_.push_back(p);
  index_.emplace(p, i);
  state_.push_back(State::fresh);
  log_time_.push_back(std::numeric_limits<double>::quiet_NaN());
  // Rows double as they run out; encoded_ keeps exactly points_.size() rows.
  encoded_.conservativeResize(static_cast<Eigen::Index>(i + 1), Eigen::NoChange);
  encoded_.row(static_cast<Eigen::Index>(i)) = encode(p);
  return i;
}

void ModelStrategy::report(const Params& params, double median_us) {
  learn(params, median_us, State::reported);
}

void ModelStrategy::observe(const Params& params, double median_us) {
  learn(params, median_us, State::observed);
}

void ModelStrategy::learn(const Params& params, double median_us, State as) {
  const std::optional<std::size_t> at = find_or_add(params);
  if (!at || state_[*at] == State::reported || state_[*at] == State::observed) return;
  state_[*at] = as;
  log_time_[*at] = std::isfinite(median_us) && median_us > 0
                       ? std::log(median_us)
                       : std::numeric_limits<double>::infinity();
  reported_.push_back(*at);
}

std::vector<std::size_t> ModelStrategy::random_batch(std::size_t count) {
  std::vector<std::size_t> out;
  if (sampled_) {
    for (const Params& p : draw(count))
      if (std::optional<std::size_t> i = find_or_add(p)) out.push_back(*i);
    return out;
  }
  for (; order_at_ < order_.size() && out.size() < count; ++order_at_)
    if (state_[order_[order_at_]] == State::fresh) out.push_back(order_[order_at_]);
  return out;
}

std::vector<Params> ModelStrategy::block_moves(const Params& at, std::size_t block) const {
  // Every value combination of the block, the rest as in `at`, that is valid (`at` itself too).
  const std::vector<std::size_t>& idx = space_.blocks[block];
  std::vector<Params> out;
  std::vector<std::size_t> k(idx.size(), 0);
  for (;;) {
    Params p = at;
    for (std::size_t j = 0; j < idx.size(); ++j) p.values[idx[j]] = space_.values[idx[j]][k[j]];
    if (valid(p)) out.push_back(std::move(p));
    std::size_t d = idx.size();
    while (d > 0 && ++k[d - 1] == space_.values[idx[d - 1]].size()) k[--d] = 0;
    if (d == 0) return out;
  }
}

void ModelStrategy::gibbs_step() {
  // Each block, in a seeded random order, takes one of the value combinations that keep the
  // point valid (a Gibbs step: the point stays valid, and never needs rejecting).
  std::vector<std::size_t> order(space_.blocks.size());
  for (std::size_t b = 0; b < order.size(); ++b) order[b] = b;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(rng_, i)]);
  for (std::size_t b : order) {
    std::vector<Params> moves = block_moves(*chain_, b);
    if (moves.empty()) continue;
    // Not uniformly over the moves: first a value of one of the block's tunables (drawn among
    // those the moves take), then a move with it. Uniform moves would nearly never change a
    // tunable whose other values leave fewer choices to the rest of the block (MoE's impl,
    // whose wgmma kernels fix the warps: 3 random points in 200 were not mma.sync ones).
    const std::size_t j = space_.blocks[b][below(rng_, space_.blocks[b].size())];
    std::set<std::int64_t> taken;
    for (const Params& m : moves) taken.insert(m.values[j]);
    auto v = taken.begin();
    std::advance(v, static_cast<std::ptrdiff_t>(below(rng_, taken.size())));
    std::vector<std::size_t> with;
    for (std::size_t k = 0; k < moves.size(); ++k)
      if (moves[k].values[j] == *v) with.push_back(k);
    chain_ = std::move(moves[with[below(rng_, with.size())]]);
  }
}

std::vector<Params> ModelStrategy::draw(std::size_t count) {
  // A new point per sampler step; a small space may give few new ones, so the steps are bounded.
  std::vector<Params> out;
  if (!chain_) return out;
  std::set<Params> taken;
  for (std::size_t step = 0; out.size() < count && step < 4 * count + 16; ++step) {
    gibbs_step();
    if (!known(*chain_) && taken.insert(*chain_).second) out.push_back(*chain_);
  }
  return out;
}

std::vector<Params> ModelStrategy::sampled_candidates() {
  // The random part: the pool less what became known, topped up with fresh draws (the oldest
  // give way to pool_refresh new ones at each proposal).
  std::deque<Params> kept;
  for (Params& p : pool_)
    if (!known(p)) kept.push_back(std::move(p));
  pool_ = std::move(kept);
  const std::size_t refresh = std::min(options_.pool_refresh, options_.pool);
  while (!pool_.empty() && pool_.size() + refresh > options_.pool) pool_.pop_front();
  std::set<Params> seen(pool_.begin(), pool_.end());
  for (Params& p : draw(options_.pool - pool_.size()))
    if (seen.insert(p).second) pool_.push_back(std::move(p));
  std::vector<Params> out(pool_.begin(), pool_.end());

  // The local part: neighbours of the fastest points.
  std::vector<std::size_t> finite;
  for (std::size_t i : reported_)
    if (std::isfinite(log_time_[i])) finite.push_back(i);
  std::stable_sort(finite.begin(), finite.end(),
                   [&](std::size_t a, std::size_t b) { return log_time_[a] < log_time_[b]; });
  if (finite.size() > options_.neighbourhoods) finite.resize(options_.neighbourhoods);
  for (std::size_t i : finite) {
    const Params& at = points_[i];
    for (std::size_t b = 0; b < space_.blocks.size(); ++b)
      for (Params& p : block_moves(at, b))
        if (!known(p) && seen.insert(p).second) out.push_back(std::move(p));
    // Around the fastest point, every valid change of two tunables (two of one block are
    // among the moves above already): a tile size with the pipeline depth that suits it.
    if (i == finite.front())
      for (std::size_t a = 0; a < levels_.size(); ++a)
        for (std::size_t b = a + 1; b < levels_.size(); ++b)
          for (std::int64_t va : space_.values[a])
            for (std::int64_t vb : space_.values[b]) {
              if (va == at.values[a] || vb == at.values[b]) continue;
              Params p = at;
              p.values[a] = va;
              p.values[b] = vb;
              if (!known(p) && !seen.count(p) && valid(p)) {
                seen.insert(p);
                out.push_back(std::move(p));
              }
            }
    // Two blocks at once (a wgmma tile with the pipeline settings it needs, a row tile with
    // the warps that fit it): one tunable changed where the point's other blocks rule the value
    // out, with another block's values changed as little as makes it valid.
    for (std::size_t t = 0; t < kRepairMoves && space_.blocks.size() > 1; ++t) {
      const std::size_t a = below(rng_, space_.blocks.size());
      std::size_t b = below(rng_, space_.blocks.size() - 1);
      b += b >= a ? 1 : 0;
      const std::size_t j = space_.blocks[a][below(rng_, space_.blocks[a].size())];
      Params p = at;
      p.values[j] = space_.values[j][below(rng_, space_.values[j].size())];
      if (p == at || valid(p)) continue;  // nothing new, or a one-block move (above)
      std::optional<Params> nearest;
      std::size_t nearest_d = 0;
      for (Params& q : block_moves(p, b)) {
        std::size_t d = 0;
        for (std::size_t k : space_.blocks[b]) d += q.values[k] != at.values[k] ? 1 : 0;
        if (!nearest || d < nearest_d) {
          nearest_d = d;
          nearest = std::move(q);
        }
      }
      if (nearest && !known(*nearest) && seen.insert(*nearest).second)
        out.push_back(std::move(*nearest));
    }
  }
  return out;
}

std::vector<std::size_t> ModelStrategy::choose(const Eigen::MatrixXd& candidates,
                                               std::size_t count) {
  double worst = -std::numeric_limits<double>::infinity();
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i : reported_)
    if (std::isfinite(log_time_[i])) {
      worst = std::max(worst, log_time_[i]);
      best = std::min(best, log_time_[i]);
    }
  const Eigen::Index dims = encoded_.cols();
  const std::size_t n = reported_.size();
  Eigen::MatrixXd x(static_cast<Eigen::Index>(n + count), dims);
  Eigen::VectorXd y(static_cast<Eigen::Index>(n + count));
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = reported_[k];
    x.row(static_cast<Eigen::Index>(k)) = encoded_.row(static_cast<Eigen::Index>(i));
    y(static_cast<Eigen::Index>(k)) =
        std::isfinite(log_time_[i]) ? log_time_[i] : worst + kFailurePenalty;
  }
  const auto rows = [](std::size_t r) { return static_cast<Eigen::Index>(r); };
  gp::GaussianProcess model =
      gp::fit(x.topRows(rows(n)), y.head(rows(n)), kLengthScales, kNoises,
              options_.relevance ? kRelevance : std::vector<double>{}, groups_, kAdditiveShares);

  // The candidates' correlations with the data, computed once: each believed pick adds a column.
  const gp::Hyper h = model.hyper();
  const Eigen::MatrixXd weighted =
      h.weights.size() != 0 ? Eigen::MatrixXd(candidates * h.weights.asDiagonal()) : candidates;
  Eigen::MatrixXd k(candidates.rows(), rows(n + count));
  k.leftCols(rows(n)) = model.correlations(candidates);
  std::vector<bool> taken(static_cast<std::size_t>(candidates.rows()), false);
  std::vector<std::size_t> picks;
  std::size_t believed = n;
  while (picks.size() < count && picks.size() < taken.size()) {
    Eigen::VectorXd mean, variance;
    model.predict_from(k.leftCols(rows(believed)), mean, variance);
    std::size_t chosen = 0;
    double chosen_ei = -1.0;
    for (std::size_t c = 0; c < taken.size(); ++c) {
      if (taken[c]) continue;
      const double ei =
          gp::expected_improvement(mean(rows(c)), std::sqrt(variance(rows(c))), best);
      if (ei > chosen_ei) {
        chosen_ei = ei;
        chosen = c;
      }
    }
    if (picks.empty() && options_.stop_ei > 0 && chosen_ei < options_.stop_ei) {
      stopped_ = true;
      return {};
    }
    picks.push_back(chosen);
    taken[chosen] = true;
    // Kriging believer: the pick joins the data at its predicted log time, which leaves the
    // mean as it was and shrinks the variance around it.
    x.row(rows(believed)) = candidates.row(rows(chosen));
    y(rows(believed)) = mean(rows(chosen));
    ++believed;
    if (picks.size() < count && picks.size() < taken.size()) {
      model = gp::GaussianProcess(x.topRows(rows(believed)), y.head(rows(believed)), h);
      k.col(rows(believed - 1)) = gp::correlation(weighted, weighted.row(rows(chosen)), h);
    }
  }
  return picks;
}

std::vector<std::size_t> ModelStrategy::model_batch(std::size_t count) {
  if (sampled_) {
    const std::vector<Params> pool = sampled_candidates();
    Eigen::MatrixXd cx(static_cast<Eigen::Index>(pool.size()), encoded_.cols());
    for (std::size_t k = 0; k < pool.size(); ++k)
      cx.row(static_cast<Eigen::Index>(k)) = encode(pool[k]);
    std::vector<std::size_t> out;
    for (std::size_t k : choose(cx, count))
      if (std::optional<std::size_t> i = find_or_add(pool[k])) out.push_back(*i);
    return out;
  }
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < points_.size(); ++i)
    if (state_[i] == State::fresh) candidates.push_back(i);
  if (candidates.size() > options_.candidates) {
    // A seeded partial shuffle, then back in list order so ties break the same way.
    for (std::size_t k = 0; k < options_.candidates; ++k) {
      const std::size_t j = k + below(rng_, candidates.size() - k);
      std::swap(candidates[k], candidates[j]);
    }
    candidates.resize(options_.candidates);
    std::sort(candidates.begin(), candidates.end());
  }
  Eigen::MatrixXd cx(static_cast<Eigen::Index>(candidates.size()), encoded_.cols());
  for (std::size_t k = 0; k < candidates.size(); ++k)
    cx.row(static_cast<Eigen::Index>(k)) = encoded_.row(static_cast<Eigen::Index>(candidates[k]));
  std::vector<std::size_t> out;
  for (std::size_t k : choose(cx, count)) out.push_back(candidates[k]);
  return out;
}

std::vector<Params> ModelStrategy::next_batch() {
  if (stopped_) return {};
  std::size_t room = std::numeric_limits<std::size_t>::max();
  if (options_.limit > 0) {
    if (proposed_ >= options_.limit) return {};
    room = options_.limit - proposed_;
  }
  std::size_t known = 0, finite = 0;
  // Observed points are not among the initial random ones.
  for (std::size_t i = 0; i < points_.size(); ++i)
    known += state_[i] == State::proposed || state_[i] == State::reported ? 1 : 0;
  for (std::size_t i : reported_) finite += std::isfinite(log_time_[i]) ? 1 : 0;
  std::vector<std::size_t> picks;
  if (known < options_.initial)  // a sampled space draws them a batch at a time
    picks = random_batch(
        std::min(options_.initial - known, sampled_ ? std::min(options_.batch, room) : room));
  else if (finite < 2)
    picks = random_batch(std::min(options_.batch, room));
  else
    picks = model_batch(std::min(options_.batch, room));
  std::vector<Params> out;
  for (std::size_t i : picks) {
    state_[i] = State::proposed;
    out.push_back(points_[i]);
  }
  proposed_ += out.size();
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
