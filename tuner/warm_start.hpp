// Warm start: the configurations a sweep of a new problem measures before its strategy's own
// proposals, the best rows of the nearest tuned problems (this device first, then other devices
// of its architecture), chosen by the runtime lookup's distance and fallback rules. Also what
// `ktune replay --warm-start` measures first (leave-one-out over the recorded problems).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "search/space.hpp"

namespace ktune {

/// One configuration to measure first, and where it comes from.
struct WarmStartPoint {
  Params params;
  std::string params_key;
  std::string problem_key;   // the tuned problem it is the best of
  std::string device_key;    // where it was tuned
  bool same_device = false;  // false: another device of the same architecture
  double distance = 0.0;     // problem_distance from the problem being tuned
  double tuned_us = 0.0;     // its median on the problem it was tuned on
};

/// How many points a sweep measures first by default.
inline constexpr std::size_t kWarmStartCount = 4;

/// Up to `count` distinct configurations from the best rows `rows` for the problem of `space`
/// (its op, dtype, problem and device): rows of that op and dtype and of `template_hash` only,
/// tuned on this device (DeviceInfo::key) first, then on other devices of its architecture, each
/// tier by problem_distance (then problem and device key, for a fixed order); only problems the
/// runtime lookup could serve from (within Op::fallback_radius, no exact dim or regime crossed,
/// Op::fallback_compatible); never the problem itself on this device (on another device of the
/// architecture it is a neighbour at distance 0). A row whose configuration is not a valid
/// point of `space` (or does not parse) is passed over, so fewer than `count` may come back.
std::vector<WarmStartPoint> select_warm_start(const Space& space, const std::string& template_hash,
                                              const std::vector<BestRecord>& rows,
                                              std::size_t count = kWarmStartCount);

/// select_warm_start over the best rows `store` holds for the space's op and dtype under the op's
/// current template hash. Rows the store cannot read are added to `skipped` (when given).
std::vector<WarmStartPoint> warm_start_points(const Store& store, const Space& space,
                                              std::size_t count = kWarmStartCount,
                                              std::vector<RowIssue>* skipped = nullptr);

}  // namespace ktune
