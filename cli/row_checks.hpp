// The op-level checks of `ktune db check`, shared by the commands that read or copy rows (list,
// merge, ship), so that none of them lists or copies a row that check reports.
#pragma once

#include <optional>
#include <string>

#include "db/merge.hpp"
#include "db/store.hpp"

namespace ktune::cli {

/// Whether a row of `op` was tuned for the op's current kernel code (true for an unknown op,
/// whose rows are checked, and reported, as such). Rows of older code are stale, not wrong: their
/// tunables may have changed since, and no lookup or resumed sweep uses them.
bool current_code(const std::string& op, const std::string& template_hash);

/// Why a best row of the current kernel code can serve no lookup (best_row_reason), or nullopt.
std::optional<std::string> best_reason(const BestRecord& b);

/// best_reason, then, where the row's trial `own` is known, best_trial_mismatch: all `ktune db
/// check` says of a best row. `ktune db ship` leaves out the rows it names.
std::optional<std::string> best_row_problem(const BestRecord& b, const TrialRecord* own);

/// The same for a trial row (keys_reason).
std::optional<std::string> trial_reason(const TrialRecord& t);

/// Both, for merge_databases.
RowChecks lookup_checks();

}  // namespace ktune::cli
