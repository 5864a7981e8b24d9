// The model-based strategy: a Gaussian-process surrogate of log time over the valid points,
// expected improvement, batches of proposals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "search/strategy.hpp"

namespace ktune {

/// Knobs of ModelStrategy; the defaults are what `--strategy model` uses.
struct ModelOptions {
  std::size_t initial = 8;        // random points measured before the first model
  std::size_t batch = 8;          // points per proposal: the compile pool works on them together
  std::size_t candidates = 2048;  // points scored per proposal (a seeded sample when more remain)
  /// Stop once no remaining point's expected improvement of log time reaches this (about the
  /// relative gain expected); 0: never stop, propose every valid point eventually.
  double stop_ei = 0.0;
  /// Fit a weight per tunable (gp::fit's relevance search) on top of the length-scale grid.
  bool relevance = true;
};

/// Proposes valid points in batches: first `initial` random ones (seeded), then, from a
/// Gaussian process (Matern 5/2, constant mean, hyperparameters from a small grid by marginal
/// likelihood) fitted to the log times reported so far, the points of highest expected
/// improvement over the best. A batch is chosen one point at a time, each believed to take its
/// predicted time (kriging believer), so that the batch spreads out instead of repeating one
/// region. A failed point (reported as infinity) is taught as twice the slowest time measured;
/// while fewer than two points have a finite time the proposals stay random. Only points of the
/// list are proposed, each at most once; reports of other points are ignored. The same seed and
/// reports give the same proposals.
///
/// Encoding: tunable i of a point becomes the index of its value among the distinct values
/// tunable i takes over the points, sorted and scaled to [0, 1]. Every tunable of ktune's ops is
/// ordered (tile sizes, counts, depths: mostly powers of two, which the index spaces evenly, as
/// a log would) or a flag (impl, pingpong, q_regs), for which one-hot would be the same two
/// points at another distance; so there is no one-hot.
class ModelStrategy final : public Strategy {
 public:
  ModelStrategy(std::vector<Params> points, std::uint64_t seed, ModelOptions options = {});
  std::optional<Params> next() override;
  std::vector<Params> next_batch() override;
  void report(const Params& params, double median_us) override;
  std::string_view name() const override { return "model"; }

  /// The encoded point i of the list (for tests).
  Eigen::VectorXd encoded(std::size_t i) const { return encoded_.row(static_cast<Eigen::Index>(i)); }

 private:
  enum class State : unsigned char { fresh, proposed, reported };
  std::vector<std::size_t> random_batch(std::size_t count);
  std::vector<std::size_t> model_batch();

  std::vector<Params> points_;
  ModelOptions options_;
  Eigen::MatrixXd encoded_;           // one row per point
  std::map<Params, std::size_t> index_;
  std::vector<State> state_;
  std::vector<double> log_time_;      // reported points: log(median_us), infinity when failed
  std::vector<std::size_t> reported_; // in report order
  std::vector<std::size_t> order_;    // a seeded permutation for the random proposals
  std::size_t order_at_ = 0;
  std::mt19937_64 rng_;
  bool stopped_ = false;
  std::deque<Params> pending_;        // next()'s queue
};

}  // namespace ktune
