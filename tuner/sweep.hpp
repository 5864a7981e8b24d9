// A sweep: one op, dtype and problem on one device. The parent proposes (strategy), compiles in
// parallel (NVRTC, cached), has the worker verify and time each candidate, and records every
// trial in the database; the best configuration lands there for the runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "runtime/core/types.hpp"
#include "templates/op.hpp"
#include "tuner/warm_start.hpp"

namespace ktune {

/// A kernel planted in place of a configuration's own (tests: faulting, hanging, wrong or
/// uncompilable code under a real configuration's name).
struct PlantedKernel {
  std::string source_text;
  std::string name_expression;
};

struct SweepProgress {
  std::string problem;        // the problem key being tuned
  std::size_t problem_index = 0;  // 0-based, of `problems` (token buckets: one per bucket)
  std::size_t problems = 1;
  std::size_t done = 0;       // candidates finished (any status)
  std::size_t total = 0;      // candidates known so far (a staged search adds a batch at a time)
  std::string params;         // the candidate just finished
  TrialStatus status = TrialStatus::ok;
  double median_us = 0.0;
  double best_us = 0.0;       // best so far (0: none)
  std::string phase;          // "compile", "evaluate", "resume", "retime"
  std::string warm_from;      // a warm-start point: the tuned problem it is the best of
};

struct SweepOptions {
  std::string op;
  DType dtype = DType::bf16;
  std::string shape;                      // empty: the op's default problem
  std::vector<std::int64_t> buckets;      // values of op.bucket_dim(): one problem per value
                                          // (MoE token buckets); empty: the shape alone
  std::string strategy;                   // empty: the op's default_strategy()
  std::size_t budget = 0;                 // candidates to evaluate; 0: no limit
  double time_limit_s = 0.0;              // 0: no limit
  int jobs = 0;                           // compile threads; 0: number of cores
  std::uint64_t seed = 0;                 // strategy seed and input seed
  bool force = false;                     // measure again what the database already has
  /// Before the strategy's proposals, measure the bests of the nearest tuned problems
  /// (warm_start.hpp); they count in the budget.
  bool warm_start = true;
  std::size_t warm_start_count = kWarmStartCount;  // at most this many such points
  /// Configurations to measure beside the default (`ktune sweep --params`), each name=value
  /// items over the problem's default (templates/params_over.hpp); measured whatever the budget
  /// and the time limit, and re-timed beside the default. One invalid for a problem is not
  /// measured there (SweepResult::given gives the reason). With `strategy` empty nothing else
  /// is measured; with a strategy its search follows them.
  std::vector<std::string> params;
  std::filesystem::path db_path;          // required
  bool create_db_directory = false;       // create db_path's directory once a device is found
  int device = 0;
  double candidate_timeout_s = 20.0;      // verification + timing of one candidate
  double compile_timeout_s = 120.0;       // NVRTC time per kernel, in a child process (past it:
                                          // compile_timeout); 0: no limit, compiled in this process
  int retime_top = 3;                     // leaders re-timed before the best is chosen
  std::string command_line;
  std::vector<std::string> worker_command;  // default: this executable with "__worker"
  std::vector<std::string> compile_command;  // default: this executable with "__compile"
  std::optional<std::filesystem::path> cache_dir;  // default: Compiler::default_cache_dir()
  bool disk_cache = true;
  std::map<std::string, PlantedKernel> planted;     // params key -> kernel (tests)
  std::function<void(const SweepProgress&)> progress;
  std::function<void(const std::string&)> warn;   // one-line warnings (compile cache not used)
};

struct TrialOutcome {
  Params params;
  std::string params_key;
  TrialStatus status = TrialStatus::ok;
  std::string detail;
  double median_us = 0.0;
  double spread_pct = 0.0;
  int repetitions = 0;
  KernelResources resources;
  bool resumed = false;  // taken from the database, not measured in this run
};

struct SweepResult {
  DeviceInfo device;
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string strategy;
  std::int64_t sweep_id = 0;
  std::size_t space_size = 0;
  std::size_t valid_count = 0;            // 0 when the space is too large to enumerate
  bool space_enumerated = true;
  std::vector<TrialOutcome> trials;      // this run's and resumed ones
  std::vector<WarmStartPoint> warm_start;  // measured (or resumed) before the strategy's points
  std::vector<TrialOutcome> given;         // one for each of SweepOptions::params, in order:
                                           // as re-timed in the final phase, or invalid with
                                           // the reason
  std::optional<TrialOutcome> best;
  std::optional<TrialOutcome> default_config;
  // The database's best before this run, where this run did not propose it: re-timed beside the
  // leaders (median_us is then this run's time), so a shorter run cannot replace it with a
  // slower point. best is this outcome when it won again.
  std::optional<TrialOutcome> stored_best;
  double copy_bandwidth = 0.0;           // bytes/s, measured once per device
  double min_bytes = 0.0;
  double flops = 0.0;
  double seconds = 0.0;
  double compile_seconds = 0.0;          // wall time of the compile phase
  int worker_starts = 0;
  std::size_t not_measured = 0;          // candidates left when the time limit was reached
  std::map<TrialStatus, std::size_t> counts;
};

/// The problems a sweep tunes: the shape (the op's default when empty), or, with buckets, the
/// shape (which then need not set the bucket dim) with the bucket dim set to each value.
/// Throws InvalidArgument naming a bad shape or value.
std::vector<Problem> sweep_problems(const Op& op, const SweepOptions& options);
/// True when a "name=value,..." shape sets `dim`.
bool shape_names_dim(const std::string& shape, std::string_view dim);

/// Throws InvalidArgument where a `ktune sweep --params` text names a tunable `op` lacks or a
/// value outside its list (whether a point suits a problem is known per problem, on the device).
void check_given_params(const Op& op, const std::vector<std::string>& texts);

/// Runs a sweep of every problem (the shape, or one per bucket value), sharing one worker, one
/// compile pool and one database. Throws InvalidArgument for bad options, NoDevice without a
/// GPU, DatabaseError.
std::vector<SweepResult> run_sweeps(const SweepOptions& options);
/// run_sweeps for options without buckets: the one result.
SweepResult run_sweep(const SweepOptions& options);

}  // namespace ktune
