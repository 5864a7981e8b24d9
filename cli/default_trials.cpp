#include "cli/default_trials.hpp"

#include <exception>

#include "templates/op.hpp"

namespace ktune::cli {

const TrialRecord* newest_ok(const std::vector<TrialRecord>& trials,
                             const std::string& params_key) {
  const TrialRecord* found = nullptr;
  for (const TrialRecord& t : trials)
    if (t.params_key == params_key && t.status == TrialStatus::ok) found = &t;
  return found;
}

std::optional<std::string> current_default_key(const BestRecord& row, const DeviceInfo& device) {
  const Op* op = find_op(row.op);
  if (!op) return std::nullopt;
  try {
    return op->params_key(
        op->default_params(op->parse_problem(row.problem_key), row.dtype, device));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ktune::cli
