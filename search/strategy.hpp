// Search strategies: they only propose (next) and learn (report, and observe for points measured
// without their asking).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/types.hpp"
#include "search/space.hpp"
#include "templates/op.hpp"

namespace ktune {

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// The next configuration to evaluate; nullopt when the strategy is done.
  virtual std::optional<Params> next() = 0;
  /// The measured median time of a proposed configuration (infinity when it failed).
  virtual void report(const Params& params, double median_us) = 0;
  /// The measured median time (infinity when it failed) of a configuration the strategy did not
  /// propose: the default configuration, a warm-start point. A strategy that learns takes it as
  /// a report; none proposes it afterwards. By default report().
  virtual void observe(const Params& params, double median_us) { report(params, median_us); }
  virtual std::string_view name() const = 0;
  /// The next candidates to measure together: the sweep compiles them in parallel, measures
  /// them and reports each before it asks again. Empty when the strategy is done. By default
  /// everything next() proposes, for strategies that do not learn from the reports.
  virtual std::vector<Params> next_batch();
};

/// Every valid point, in the space's order.
class ExhaustiveStrategy final : public Strategy {
 public:
  explicit ExhaustiveStrategy(std::vector<Params> points);
  std::optional<Params> next() override;
  void report(const Params&, double) override {}
  /// The point is skipped when its turn comes.
  void observe(const Params& params, double) override { observed_.insert(params); }
  std::string_view name() const override { return "exhaustive"; }

 private:
  std::vector<Params> points_;
  std::size_t next_ = 0;
  std::set<Params> observed_;
};

/// Valid points in a random order drawn from `seed` (sampling without replacement); the sweep's
/// budget (count and seconds) decides how many are evaluated.
class RandomStrategy final : public Strategy {
 public:
  RandomStrategy(std::vector<Params> points, std::uint64_t seed);
  std::optional<Params> next() override;
  void report(const Params&, double) override {}
  /// The point is skipped when its turn comes; the order of the others does not change.
  void observe(const Params& params, double) override { observed_.insert(params); }
  std::string_view name() const override { return "random"; }

 private:
  std::vector<Params> points_;
  std::size_t next_ = 0;
  std::set<Params> observed_;
};

/// Random search over a space too large to list: points drawn uniformly from the tunables'
/// values (from `seed`), those `check` rejects and those already proposed or observed skipped,
/// until `limit` proposals, or until kMaxDraws draws in a row found no new valid point.
class SampledRandomStrategy final : public Strategy {
 public:
  using Check = std::function<std::optional<std::string>(const Params&)>;
  static constexpr std::size_t kMaxDraws = std::size_t{1} << 20;
  SampledRandomStrategy(std::vector<std::vector<std::int64_t>> values, Check check,
                        std::uint64_t seed, std::size_t limit);
  std::optional<Params> next() override;
  void report(const Params&, double) override {}
  void observe(const Params& params, double) override { seen_.insert(params); }
  std::string_view name() const override { return "random"; }

 private:
  std::vector<std::vector<std::int64_t>> values_;
  Check check_;
  std::mt19937_64 rng_;
  std::size_t left_;
  std::set<Params> seen_;
};

/// For ops whose time is a sum of kernels' times (SearchStages), over a space too large to
/// enumerate: for each value of the outer tunables (the start's first), begin at the start with
/// that value, repaired into a valid point (greedily, a group at a time, fewest values changed),
/// then search each group in turn over every valid point that differs from the current one in
/// that group only, and keep the fastest. Points already reported are not proposed again.
/// Evaluations: outer values x the sum of the groups' sizes, not their product.
class StagedStrategy final : public Strategy {
 public:
  /// nullopt when a point is valid, else why not.
  using Check = std::function<std::optional<std::string>(const Params&)>;
  /// `values[i]`: tunable i's values; `outer` and `groups`: tunable indices; `start` need not be
  /// valid (every value must be one of its tunable's).
  /// `fit`, when set, adjusts each outer value's start point before the repair
  /// (SearchStages::fit_outer).
  using Fit = std::function<Params(Params)>;
  StagedStrategy(std::vector<std::vector<std::int64_t>> values, Check check, Params start,
                 std::vector<std::size_t> outer, std::vector<std::vector<std::size_t>> groups,
                 Fit fit = {});
  std::optional<Params> next() override;
  std::vector<Params> next_batch() override;
  void report(const Params& params, double median_us) override;
  std::string_view name() const override { return "staged"; }

 private:
  bool begin_outer();   // the start point of outer value outer_; false when none is left
  /// Every point that equals `at` outside group g (the group's values in odometer order).
  std::vector<Params> group_points(std::size_t g, const Params& at) const;
  std::optional<Params> repair(Params p) const;
  void keep_best_of_group();

  std::vector<std::vector<std::int64_t>> values_;
  Check check_;
  Fit fit_;
  Params start_;
  std::vector<std::size_t> outer_idx_;
  std::vector<std::vector<std::size_t>> groups_;
  std::vector<std::vector<std::int64_t>> outer_values_;
  std::size_t outer_ = 0;
  std::size_t group_ = 0;
  bool started_ = false;  // a group batch of outer_ is out
  Params current_;
  std::map<Params, double> times_;
  std::vector<Params> pending_;  // next()'s queue
};

/// "exhaustive", "random", "model" (ModelStrategy with its defaults) or "staged" (needs the
/// op's stages: see make_space_strategy);
/// throws InvalidArgument naming the allowed names.
std::unique_ptr<Strategy> make_strategy(std::string_view name, std::vector<Params> points,
                                        std::uint64_t seed);
/// Proposals of the model strategy on a space too large to list when the sweep gives no budget
/// (per problem: each MoE token bucket).
inline constexpr std::size_t kSampledModelBudget = 96;
/// The model strategy on a listed space without a budget proposes a fifth of its valid points,
/// at least kModelMinBudget (all of them when fewer): the replay of the recorded H100 sweeps
/// (benchmarks/replay) came within 2 % of the optimum in a median of 0.12 of the valid points,
/// so one budget per problem fits spaces of 60 and of 1000 points alike, and a plan mixing
/// them needs no --budget.
inline constexpr std::size_t kModelMinBudget = 16;
std::size_t default_model_budget(std::size_t valid_points);

/// The strategy for a space: "staged" walks the op's search_stages() from `start`
/// (InvalidArgument when the op declares none); "exhaustive" needs an enumerated space
/// (InvalidArgument naming its size otherwise); "random" shuffles an enumerated space's valid
/// points, or samples one too large to list (SampledRandomStrategy, stopping after `budget`
/// proposals, kSampledModelBudget when 0); "model" takes the valid points of an
/// enumerated space, or samples one too large to list (ModelStrategy over SampledSpace: blocks
/// from the op's search stages, starting at `start`); "model" stops after `budget` proposals
/// (when 0: default_model_budget of a listed space, kSampledModelBudget of a sampled one); an
/// empty name is the op's default_strategy().
std::unique_ptr<Strategy> make_space_strategy(const Space& space, std::string_view name,
                                              const Params& start, std::uint64_t seed,
                                              std::size_t budget = 0);
/// The staged strategy over `op`'s search_stages() from `start`, with `check` saying which points
/// are valid (a space's check(); replay: only the recorded points). InvalidArgument when the op
/// declares no stages.
std::unique_ptr<Strategy> make_staged_strategy(const Op& op, StagedStrategy::Check check,
                                               const Params& start);
/// Rejects what make_space_strategy would for `op` (unknown name, staged without stages).
void check_strategy_name(const Op& op, std::string_view name);
const std::vector<std::string>& strategy_names();

}  // namespace ktune
