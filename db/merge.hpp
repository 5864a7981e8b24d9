// Combining tuning databases (`ktune db merge`) and comparing their best rows (`ktune db diff`).
// The sweeps of a sharded tuning run land in one database per shard; merging them gives one
// database as if a single tuner had measured everything.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "db/store.hpp"

namespace ktune {

/// A row of one input that a reader skipped (see Store's readers), and the file it is in.
struct SourceIssue {
  std::filesystem::path source;
  RowIssue issue;
};

/// What a merge wrote.
struct MergeReport {
  std::size_t devices = 0;         // rows of each table in the output
  std::size_t sweeps = 0;
  std::size_t trials = 0;
  std::size_t bests = 0;
  std::size_t trials_added = 0;    // trials the output did not hold before
  std::size_t bests_changed = 0;   // best rows that are new or differ from the output's before
  bool output_existed = false;
  std::vector<SourceIssue> skipped;
};

/// Checks of rows that need the ops, which db/ does not know: each says why a row can serve no
/// lookup (an unknown op, keys that do not parse, parameters outside the op's space), or nullopt.
/// `ktune db merge` passes the checks of `ktune db check` (runtime/dispatch/lookup.hpp), so a
/// merge copies no row that check would report. Either may be empty.
struct RowChecks {
  std::function<std::optional<std::string>(const BestRecord&)> best;
  std::function<std::optional<std::string>(const TrialRecord&)> trial;
};

/// Why a best row does not match the trial it names (another device, op, dtype, problem,
/// configuration or kernel code), or nullopt: such a row's timing is not its configuration's,
/// and no reader may trust it.
std::optional<std::string> best_trial_mismatch(const BestRecord& best, const TrialRecord& trial);

/// Merges the databases `inputs` into `out`. `out` is created when absent; when it exists its rows
/// take part like an input's. Every row is read and validated as Store's readers do (a bad row is
/// skipped and reported, never copied), then through `checks`, and every best row against the
/// trial it names (best_trial_mismatch). The output holds:
///   - one devices row per key: the one updated last (ties: the larger fingerprint, so that the
///     choice never depends on the order of the inputs), with its copy bandwidth;
///   - every distinct sweep (same device, op, dtype, problem, strategy, command line and start
///     time: the same sweep) and every distinct trial (the same fields and the same sweep: the same
///     trial), each once, with new ids;
///   - one best row per (device, op, dtype, problem, template hash): the smaller median wins; on a
///     tie the later sweep, by the start time recorded for the sweep of the row's trial (the row's
///     own updated_at when it has no readable trial or the trial no sweep); then the smaller
///     params key, so that the result is a function of the set of rows.
/// Rows are written in a canonical order (new ids included), so merging is idempotent (merging an
/// input twice adds nothing) and independent of the order of the inputs.
/// The output is written to a temporary file beside `out` and renamed over it at the end: on any
/// failure `out` is left as it was. Throws InvalidArgument for no inputs, an input that does not
/// exist, `out` naming an input (the same file by any path), a symbolic link or non-regular `out`,
/// or a missing directory; DatabaseError for a file that is not a ktune database of this schema
/// version, or an `out` that a writer has open (its -wal file is there).
MergeReport merge_databases(const std::filesystem::path& out,
                            const std::vector<std::filesystem::path>& inputs,
                            const RowChecks& checks = {});

/// One key's best row in two databases.
struct BestChange {
  std::optional<BestRecord> before;  // absent: the row was added
  std::optional<BestRecord> after;   // absent: the row was removed
  /// before's median over after's (above 1: the new row is faster); nullopt unless both rows are
  /// there and after's median is above 0.
  std::optional<double> speedup() const;
};

/// What changed from `before` to `after`, per (device, op, dtype, problem, template hash), in the
/// readers' order (op, dtype, device, problem, template hash).
struct BestDiff {
  std::vector<BestChange> added;
  std::vector<BestChange> removed;
  std::vector<BestChange> changed;   // params or median differ
  std::size_t unchanged = 0;
};

BestDiff diff_bests(const std::vector<BestRecord>& before, const std::vector<BestRecord>& after);

}  // namespace ktune
