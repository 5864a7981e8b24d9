// The trials of one problem in the database: what an earlier sweep measured (resumed, not
// measured again) and the recording of each new outcome.
#pragma once

#include <map>
#include <string>

#include "db/store.hpp"
#include "templates/op.hpp"
#include "tuner/sweep.hpp"

namespace ktune {

class TrialBook {
 public:
  /// `base` carries the key fields every record of this problem shares (sweep, device, op,
  /// dtype, problem, template hash, NVRTC version). With `force`, nothing is resumed.
  TrialBook(Store& store, const Op& op, TrialRecord base, bool force);

  /// The recorded outcome of `params_key`, marked resumed; nullptr when it must be measured.
  const TrialOutcome* known(const std::string& params_key) const;
  void record(const TrialOutcome& t, double compile_seconds);

 private:
  Store& store_;
  TrialRecord base_;
  std::map<std::string, TrialOutcome> known_;
};

}  // namespace ktune
