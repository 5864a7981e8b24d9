#include "tuner/warm_start.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "runtime/dispatch/lookup.hpp"

namespace ktune {

namespace {

// A tuned problem the lookup could serve the wanted one from, with its distance; false for a
// row of another op, dtype or kernel code, a device of another architecture, the problem itself
// on this device, or a problem the op does not allow as a fallback.
bool neighbour(const Space& space, const std::string& template_hash, const BestRecord& row,
               WarmStartPoint& out) {
  const Op& op = space.op();
  const DeviceInfo& device = space.device();
  if (row.op != op.name() || row.dtype != space.dtype() || row.template_hash != template_hash)
    return false;
  out.same_device = row.device_key == device.key();
  if (!out.same_device && (row.arch.empty() || row.arch != device.arch())) return false;
  // A row the readers would refuse (an unparseable key, a NaN timing) is no neighbour.
  if (best_row_reason(row)) return false;
  const Problem tuned = op.parse_problem(row.problem_key);
  // The problem's own row on this device (an earlier or interrupted sweep of it) is no
  // neighbour; tuned on another GPU of the architecture, it is the nearest there is.
  if (out.same_device && tuned == space.problem()) return false;
  // The lookup's own rule: within the radius, no exact dim or regime crossed, compatible by the
  // op's rules.
  const std::optional<double> distance = fallback_distance(op, space.problem(), tuned, device);
  if (!distance) return false;
  out.distance = *distance;
  out.params = op.parse_params(row.params_key);
  out.params_key = op.params_key(out.params);
  out.problem_key = op.problem_key(tuned);  // canonical: printable, comparable
  out.device_key = row.device_key;
  out.tuned_us = row.median_us;
  return true;
}

}  // namespace

std::vector<WarmStartPoint> select_warm_start(const Space& space, const std::string& template_hash,
                                              const std::vector<BestRecord>& rows,
                                              std::size_t count) {
  std::vector<WarmStartPoint> near;
  for (const BestRecord& row : rows) {
    WarmStartPoint p;
    if (neighbour(space, template_hash, row, p)) near.push_back(std::move(p));
  }
  std::sort(near.begin(), near.end(), [](const WarmStartPoint& a, const WarmStartPoint& b) {
    return std::make_tuple(!a.same_device, a.distance, a.problem_key, a.device_key) <
           std::make_tuple(!b.same_device, b.distance, b.problem_key, b.device_key);
  });
  std::vector<WarmStartPoint> out;
  std::set<Params> taken;
  for (WarmStartPoint& p : near) {
    if (out.size() >= count) break;
    // Tuned for another problem, a configuration need not fit this one: passed over.
    if (taken.count(p.params) || space.check(p.params)) continue;
    taken.insert(p.params);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<WarmStartPoint> warm_start_points(const Store& store, const Space& space,
                                              std::size_t count, std::vector<RowIssue>* skipped) {
  if (count == 0) return {};
  const Op& op = space.op();
  Rows<BestRecord> rows = store.bests(std::string(op.name()), space.dtype());
  if (skipped) skipped->insert(skipped->end(), rows.skipped.begin(), rows.skipped.end());
  return select_warm_start(space, op.template_hash(), rows.rows, count);
}

}  // namespace ktune
