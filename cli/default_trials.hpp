// The trial a lookup reads to judge a best row as a neighbour: the op's current default
// configuration's on the row's problem and device (kNeighbourMinGain in
// runtime/dispatch/lookup.hpp). `ktune db ship` keeps it; `ktune db defaults` lists the rows that
// lack it (they serve neighbours unjudged until it is measured).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "db/store.hpp"

namespace ktune::cli {

/// The newest ok trial of `params_key` among `trials` (newest last), or nullptr.
const TrialRecord* newest_ok(const std::vector<TrialRecord>& trials,
                             const std::string& params_key);

/// The params_key of the op's current default configuration for `row`'s problem on `device`,
/// as this ktune chooses it; nullopt when this ktune cannot read the row (an unknown op, a
/// problem it cannot parse), which lookups skip with their reason.
std::optional<std::string> current_default_key(const BestRecord& row, const DeviceInfo& device);

}  // namespace ktune::cli
