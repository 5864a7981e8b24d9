#include "cli/row_checks.hpp"

#include "runtime/dispatch/lookup.hpp"
#include "templates/op.hpp"

namespace ktune::cli {

bool current_code(const std::string& op, const std::string& template_hash) {
  const Op* o = find_op(op);
  return o == nullptr || o->template_hash() == template_hash;
}

std::optional<std::string> best_reason(const BestRecord& b) {
  if (!current_code(b.op, b.template_hash)) return std::nullopt;
  return best_row_reason(b);
}

std::optional<std::string> best_row_problem(const BestRecord& b, const TrialRecord* own) {
  std::optional<std::string> why = best_reason(b);
  if (!why && own != nullptr) why = best_trial_mismatch(b, *own);
  return why;
}

std::optional<std::string> trial_reason(const TrialRecord& t) {
  if (!current_code(t.op, t.template_hash)) return std::nullopt;
  return keys_reason(t.op, t.dtype, t.problem_key, t.params_key);
}

RowChecks lookup_checks() { return {best_reason, trial_reason}; }

}  // namespace ktune::cli
