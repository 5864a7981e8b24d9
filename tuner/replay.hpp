// Scoring strategies without a GPU: recorded sweeps replayed as an oracle. A problem's universe is
// the set of its recorded points that are valid today; a strategy chooses among them only, its
// "measurement" of a point is the recorded median (a failed trial: infinity), and the score is
// how many evaluations it takes to come within a tolerance of the universe's optimum. Optionally
// each run starts with warm-start points (warm_start.hpp), leave-one-out: the bests of the other
// recorded problems.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "search/model_strategy.hpp"
#include "search/space.hpp"
#include "tuner/warm_start.hpp"

namespace ktune {

/// A recorded problem: its universe and optimum.
struct ReplayProblem {
  std::string device_key;
  std::string device_name;
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string template_hash;
  Space space;                       // rebuilt from the op, the problem and the recorded device
  Params start;                      // the op's default for it (where staged begins)
  /// The universe: every recorded point valid today (the newest trial of each, ok or failed), in
  /// the space's order (first tunable slowest, each tunable's values in its declared order).
  std::vector<Params> universe;
  std::map<Params, double> median_us;  // the universe's times; infinity when its trial failed
  std::size_t valid = 0;             // valid points today when the space is enumerated, else 0
  std::size_t failed = 0;            // points of the universe whose trial failed
  std::size_t dropped = 0;           // recorded points that are not valid today
  double best_us = 0.0;              // the universe's optimum
  /// universe / valid when the space is enumerated; 0 when it is not.
  double coverage() const;
};

/// A recorded (device, op, dtype, problem, template hash) that cannot be replayed, and why.
struct ReplaySkip {
  std::string what;                  // "op dtype problem on device"
  std::string why;
};

struct ReplayData {
  std::vector<ReplayProblem> problems;
  std::vector<ReplaySkip> skipped;
  std::vector<RowIssue> row_issues;  // rows the store could not read
};

/// Every (device, op, dtype, problem, template hash) of the store's trials, optionally of one op,
/// with its universe. Recorded points invalid today, or outside today's tunables, are left out
/// (counted in `dropped`). What cannot be replayed (unknown op or device, unparseable problem key,
/// no recorded point valid today, no ok trial among them) is listed in `skipped` with the reason.
ReplayData load_replay(const Store& store, const std::string& op_filter = {});

/// The warm-start points of problem `index` of `data`, leave-one-out: select_warm_start over the
/// bests (universe optima) of the other problems, kept to points of its universe, at most `count`.
std::vector<WarmStartPoint> replay_warm_start(const ReplayData& data, std::size_t index,
                                              std::size_t count = kWarmStartCount);

/// One strategy on one problem with one seed.
struct ReplayRun {
  std::size_t problem = 0;           // index into ReplayData::problems
  std::uint64_t seed = 0;
  std::size_t evaluations = 0;       // to come within the tolerance; all it made when it never did
  std::size_t warm = 0;              // warm-start points measured first (counted in evaluations)
  bool reached = false;
};

struct StrategyScore {
  std::string strategy;
  bool warm_start = false;           // the runs began with the warm-start points
  std::vector<ReplayRun> runs;       // problem-major, then seed
  /// Over every run (problem x seed): evaluations to within the tolerance, and the same as a
  /// fraction of the problem's universe. A run that never got there counts as the whole
  /// universe.
  double median_evaluations = 0.0;
  std::size_t worst_evaluations = 0;
  double median_fraction = 0.0;
  double worst_fraction = 0.0;
  std::size_t not_reached = 0;
  /// "model", or "model+warm" with warm start.
  std::string label() const { return warm_start ? strategy + "+warm" : strategy; }
};

struct ReplayOptions {
  std::vector<std::string> strategies = {"exhaustive", "random", "model", "staged"};
  std::size_t seeds = 20;            // seeds 1..seeds
  double tolerance = 0.02;           // within 2% of the optimum
  ModelOptions model = {};           // the "model" strategy's knobs
  /// Score every strategy a second time with the warm-start points measured first.
  bool warm_start = false;
  std::size_t warm_start_count = kWarmStartCount;
};

/// Runs every strategy against every problem (then again with warm start, when asked): each
/// chooses among the problem's universe only. "staged" runs only on problems of ops that declare
/// search stages (none of its runs elsewhere). Warm-start points are measured first and observed
/// by the strategy; then each batch is evaluated in order and every point reported before the
/// next batch is asked for, as a sweep does; the run ends with the batch that reached the
/// tolerance. Throws InvalidArgument for an unknown strategy name.
std::vector<StrategyScore> replay(const ReplayData& data, const ReplayOptions& options);

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> v);

}  // namespace ktune
