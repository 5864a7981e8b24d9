// Scoring strategies without a GPU: recorded exhaustive sweeps replayed as an oracle. A
// strategy's "measurement" of a point is the recorded median (a failed trial: infinity), and
// the score is how many evaluations it takes to come within a tolerance of the sweep's optimum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "search/model_strategy.hpp"
#include "search/space.hpp"

namespace ktune {

/// A recorded problem whose trials cover every valid point of its space today.
struct ReplayProblem {
  std::string device_name;
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string template_hash;
  Space space;                       // rebuilt from the op, the problem and the recorded device
  Params start;                      // the op's default for it (where staged begins)
  std::map<Params, double> median_us;  // every valid point; infinity when its trial failed
  std::size_t valid = 0;             // valid points (= median_us.size())
  std::size_t failed = 0;            // of which failed (compile_error, wrong_result...)
  double best_us = 0.0;              // the exhaustive optimum
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

/// Every (device, op, dtype, problem, template hash) of the store's trials, optionally of one
/// op. A problem is replayed when its space is enumerated and every point valid today has a
/// recorded ok or failed trial (the newest counts); one missing point could be the optimum, so
/// there is no "nearly". Recorded points that are invalid today are ignored. What cannot be
/// replayed (unknown op or device, unparseable key, a missing point, no ok trial) is listed in
/// `skipped` with the reason.
ReplayData load_replay(const Store& store, const std::string& op_filter = {});

/// One strategy on one problem with one seed.
struct ReplayRun {
  std::size_t problem = 0;           // index into ReplayData::problems
  std::uint64_t seed = 0;
  std::size_t evaluations = 0;       // to come within the tolerance; all it made when it never did
  bool reached = false;
};

struct StrategyScore {
  std::string strategy;
  std::vector<ReplayRun> runs;       // problem-major, then seed
  /// Over every run (problem x seed): evaluations to within the tolerance, and the same as a
  /// fraction of the problem's valid points. A run that never got there counts as every
  /// valid point.
  double median_evaluations = 0.0;
  std::size_t worst_evaluations = 0;
  double median_fraction = 0.0;
  double worst_fraction = 0.0;
  std::size_t not_reached = 0;
};

struct ReplayOptions {
  std::vector<std::string> strategies = {"exhaustive", "random", "model", "staged"};
  std::size_t seeds = 20;            // seeds 1..seeds
  double tolerance = 0.02;           // within 2% of the optimum
  ModelOptions model = {};           // the "model" strategy's knobs
};

/// Runs every strategy against every problem. "staged" runs only on problems of ops that declare
/// search stages (none of its runs elsewhere). Each batch is evaluated in order and every point
/// reported before the next batch is asked for, as a sweep does; the run ends with the batch
/// that reached the tolerance. Throws InvalidArgument for an unknown strategy name.
std::vector<StrategyScore> replay(const ReplayData& data, const ReplayOptions& options);

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> v);

}  // namespace ktune
