#include "search/space.hpp"

#include <limits>
#include <random>
#include <utility>

namespace ktune {

Space::Space(const Op& op, Problem problem, DType dtype, DeviceInfo device)
    : op_(&op), problem_(std::move(problem)), dtype_(dtype), device_(std::move(device)) {
  const std::vector<Tunable>& tunables = op.tunables();
  for (const Tunable& t : tunables)
    size_ = size_ > std::numeric_limits<std::size_t>::max() / t.values.size()
                ? std::numeric_limits<std::size_t>::max()
                : size_ * t.values.size();
  if (size_ > kEnumerateLimit) return;
  enumerated_ = true;
  std::vector<std::size_t> index(tunables.size(), 0);
  for (;;) {
    Params p;
    p.values.reserve(tunables.size());
    for (std::size_t i = 0; i < tunables.size(); ++i) p.values.push_back(tunables[i].values[index[i]]);
    std::optional<std::string> reason = op.invalid_reason(p, problem_, dtype_, device_);
    points_.push_back({std::move(p), std::move(reason)});
    // Odometer increment, last tunable fastest.
    std::size_t k = tunables.size();
    while (k > 0) {
      --k;
      if (++index[k] < tunables[k].values.size()) break;
      index[k] = 0;
      if (k == 0) return;
    }
    if (tunables.empty()) return;
  }
}

std::vector<Params> Space::valid_points() const {
  std::vector<Params> out;
  for (const SpacePoint& p : points_)
    if (!p.invalid) out.push_back(p.params);
  return out;
}

std::size_t Space::valid_count() const {
  std::size_t n = 0;
  for (const SpacePoint& p : points_) n += p.invalid ? 0 : 1;
  return n;
}

std::map<std::string, std::size_t> Space::invalid_reasons() const {
  std::map<std::string, std::size_t> out;
  for (const SpacePoint& p : points_)
    if (p.invalid) ++out[*p.invalid];
  return out;
}

std::vector<SpacePoint> Space::sample(std::size_t count, std::uint64_t seed) const {
  const std::vector<Tunable>& tunables = op_->tunables();
  std::mt19937_64 rng(seed);
  std::vector<SpacePoint> out;
  out.reserve(count);
  for (std::size_t n = 0; n < count; ++n) {
    Params p;
    for (const Tunable& t : tunables)
      p.values.push_back(t.values[static_cast<std::size_t>(rng() % t.values.size())]);
    std::optional<std::string> reason = op_->invalid_reason(p, problem_, dtype_, device_);
    out.push_back({std::move(p), std::move(reason)});
  }
  return out;
}

std::optional<std::string> Space::check(const Params& params) const {
  // Every op's invalid_reason starts with point_reason(): the dtype, the parameters against the
  // tunables' lists, the problem (search_test holds every registered op to it).
  return op_->invalid_reason(params, problem_, dtype_, device_);
}

}  // namespace ktune
