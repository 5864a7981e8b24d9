#include "tuner/trials.hpp"

#include "ktune/error.hpp"

namespace ktune {

TrialBook::TrialBook(Store& store, const Op& op, TrialRecord base, bool force)
    : store_(store), base_(std::move(base)) {
  if (force) return;
  // A row whose parameters are not a point of today's space (a hand-edited or hostile file) is
  // not resumed: its configuration is measured again. A compile that ran out of time is tried
  // again too, since this run may allow it longer.
  for (const TrialRecord& r : store.trials(base_.device_key, base_.op, base_.dtype,
                                           base_.problem_key, base_.template_hash)
                                  .rows) {
    if (r.status == TrialStatus::compile_timeout) continue;
    TrialOutcome t;
    try {
      t.params = op.parse_params(r.params_key);
    } catch (const InvalidArgument&) {
      continue;
    }
    t.params_key = r.params_key;
    t.status = r.status;
    t.detail = r.detail;
    t.median_us = r.median_us;
    t.spread_pct = r.spread_pct;
    t.repetitions = r.repetitions;
    t.resources.registers = r.registers;
    t.resources.shared_bytes = r.shared_bytes;
    t.resources.local_bytes = r.local_bytes;
    t.resumed = true;
    known_[r.params_key] = std::move(t);
  }
}

const TrialOutcome* TrialBook::known(const std::string& params_key) const {
  auto it = known_.find(params_key);
  return it == known_.end() ? nullptr : &it->second;
}

void TrialBook::record(const TrialOutcome& t, double compile_seconds) {
  TrialRecord r = base_;
  r.params_key = t.params_key;
  r.status = t.status;
  r.detail = t.detail.substr(0, 4000);
  r.median_us = t.median_us;
  r.spread_pct = t.spread_pct;
  r.repetitions = t.repetitions;
  r.registers = t.resources.registers;
  r.shared_bytes = t.resources.shared_bytes;
  r.local_bytes = t.resources.local_bytes;
  r.spill_bytes = t.resources.spill_stores + t.resources.spill_loads;
  r.compile_seconds = compile_seconds;
  store_.record_trial(r);
}

}  // namespace ktune
