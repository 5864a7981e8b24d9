// The model-based strategy: a Gaussian-process surrogate of log time over the valid points,
// expected improvement, batches of proposals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "search/strategy.hpp"

namespace ktune {

/// Knobs of ModelStrategy; the defaults are what `--strategy model` uses.
struct ModelOptions {
  std::size_t initial = 8;        // random points measured before the first model
  std::size_t batch = 8;          // points per proposal: the compile pool works on them together
  std::size_t candidates = 2048;  // listed spaces: points scored per proposal (a seeded sample
                                  // when more remain)
  /// Stop once no remaining point's expected improvement of log time reaches this (about the
  /// relative gain expected); 0: never stop, propose every valid point eventually.
  double stop_ei = 0.0;
  /// Fit a weight per tunable (gp::fit's relevance search) on top of the length-scale grid.
  bool relevance = true;
  /// Points proposed in all, then next_batch() returns nothing; 0: no limit (a listed space
  /// ends when every point was proposed, a sampled one never does).
  std::size_t limit = 0;
  // Sampled spaces (SampledSpace) only:
  std::size_t pool = 1024;          // random valid points among the candidates of a proposal
  std::size_t pool_refresh = 128;   // of which drawn afresh at each proposal (the oldest go)
  std::size_t neighbourhoods = 4;   // best measured points whose neighbours are candidates too
};

/// A space too large to list (MoE's billions of points), as ModelStrategy samples it.
struct SampledSpace {
  std::vector<std::vector<std::int64_t>> values;  // tunable i's declared values
  std::function<std::optional<std::string>(const Params&)> check;  // nullopt: a valid point
  /// Tunables that change together when a point is sampled or moved to a neighbour (an op's
  /// SearchStages: the outer tunables, then each group); a tunable of no block moves alone. A
  /// block's values are enumerated whole: keep blocks to a few hundred combinations.
  std::vector<std::vector<std::size_t>> blocks;
  /// Sets of tunables whose effects add up (an op's kernels, whose times add up: each stage
  /// group with the outer tunables): the model's kernel gets an additive part over them
  /// (gp::Hyper::additive), its share fitted. Empty: one kernel over all tunables.
  std::vector<std::vector<std::size_t>> additive;
  std::vector<Params> starts;  // valid points to begin from (the op's default); invalid ignored
};

/// Proposes valid points in batches: first `initial` random ones (seeded), then, from a
/// Gaussian process (Matern 5/2, constant mean, hyperparameters from a small grid by marginal
/// likelihood) fitted to the log times reported so far, the points of highest expected
/// improvement over the best. A batch is chosen one point at a time, each believed to take its
/// predicted time (kriging believer), so that the batch spreads out instead of repeating one
/// region. A failed point (reported as infinity) is taught as twice the slowest time measured;
/// while fewer than two points have a finite time the proposals stay random. Only points of the
/// list are proposed, each at most once. A point of the list measured without being proposed
/// (observe(): the default configuration, warm-start points) is learnt from like a report and
/// never proposed, but is not one of the `initial` random points (warm-start points sit near one
/// another; the random points still spread over the space: replay's worst run 58 -> 38
/// evaluations). Reports of points outside the list are ignored. The same seed and reports give the same proposals.
///
/// Encoding: tunable i of a point becomes the index of its value among the distinct values
/// tunable i takes over the points, sorted and scaled to [0, 1]. Every tunable of ktune's ops is
/// ordered (tile sizes, counts, depths: mostly powers of two, which the index spaces evenly, as
/// a log would) or a flag (impl, pingpong, q_regs), for which one-hot would be the same two
/// points at another distance; so there is no one-hot.
///
/// A space too large to list (SampledSpace) is searched from candidates gathered at each
/// proposal instead of the list: `pool` random valid points from a block Gibbs sampler (each
/// block in turn takes one of the value combinations that keep the point valid, a value of one
/// of its tunables first, so that a space with one valid point in a thousand needs no
/// rejection and rare kernels still come up), `pool_refresh` of them new each time; and the
/// neighbours of the `neighbourhoods` fastest points: every valid point that differs in one
/// block (the staged strategy's moves), every valid change of two tunables of the fastest, and
/// changes of one tunable that another block's values are repaired to admit (fewest changed).
/// The random proposals are the sampler's. Tunable i is encoded by the index of its value among
/// its declared values, so that encodings stay fixed as the candidates change; with `additive`
/// groups the kernel is a fitted mix of the Matern over all tunables and the mean of those over
/// each group. Every proposal is valid (the space's check) and new; a report or observation of
/// a valid point it never proposed is learnt from. Set `limit` (or the sweep's budget): the
/// space never runs out.
class ModelStrategy final : public Strategy {
 public:
  ModelStrategy(std::vector<Params> points, std::uint64_t seed, ModelOptions options = {});
  /// Searches a space too large to list; proposes nothing when no valid point is found (the
  /// starts are invalid and random points rarely are valid).
  ModelStrategy(SampledSpace space, std::uint64_t seed, ModelOptions options = {});
  std::optional<Params> next() override;
  std::vector<Params> next_batch() override;
  void report(const Params& params, double median_us) override;
  void observe(const Params& params, double median_us) override;
  std::string_view name() const override { return "model"; }

  /// The encoded point i of the list (for tests; a sampled space's points in the order they
  /// were proposed or reported).
  Eigen::VectorXd encoded(std::size_t i) const { return encoded_.row(static_cast<Eigen::Index>(i)); }

 private:
  enum class State : unsigned char { fresh, proposed, reported, observed };
  void learn(const Params& params, double median_us, State as);
  Eigen::RowVectorXd encode(const Params& p) const;
  /// The index of a point of the list; a sampled space adds a valid point it has not seen.
  std::optional<std::size_t> find_or_add(const Params& p);
  std::vector<std::size_t> random_batch(std::size_t count);
  std::vector<std::size_t> model_batch(std::size_t count);
  /// Up to `count` positions of rows of `candidates`, by expected improvement.
  std::vector<std::size_t> choose(const Eigen::MatrixXd& candidates, std::size_t count);
  // Sampled spaces.
  bool valid(const Params& p) const { return !space_.check(p); }
  bool known(const Params& p) const { return index_.count(p) != 0; }
  std::vector<Params> block_moves(const Params& at, std::size_t block) const;
  void gibbs_step();                  // every block of chain_ in a random order
  std::vector<Params> draw(std::size_t count);  // new random valid points from the chain
  std::vector<Params> sampled_candidates();

  std::vector<Params> points_;
  ModelOptions options_;
  std::vector<std::vector<std::int64_t>> levels_;  // tunable i's values, sorted, for encoding
  Eigen::MatrixXd encoded_;           // one row per point
  bool sampled_ = false;              // points_ grows as points are proposed and reported
  SampledSpace space_;
  std::optional<Params> chain_;       // the sampler's state: a valid point
  std::deque<Params> pool_;           // random valid points drawn, oldest first
  std::vector<std::vector<Eigen::Index>> groups_;  // the model's additive groups
  std::size_t proposed_ = 0;          // for options_.limit
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
