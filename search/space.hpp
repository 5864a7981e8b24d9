// A search space: every combination of an op's tunable values for one problem, each with the
// op's validity verdict. Shared by every strategy, the CLI and the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "templates/op.hpp"

namespace ktune {

struct SpacePoint {
  Params params;
  std::optional<std::string> invalid;  // nullopt: valid
};

class Space {
 public:
  /// Spaces up to this many points are enumerated (each with its verdict); larger ones (MoE's)
  /// are walked point by point (check()) by the staged strategy, or sampled.
  static constexpr std::size_t kEnumerateLimit = std::size_t{1} << 20;

  Space(const Op& op, Problem problem, DType dtype, DeviceInfo device);

  const Op& op() const { return *op_; }
  const Problem& problem() const { return problem_; }
  DType dtype() const { return dtype_; }
  const DeviceInfo& device() const { return device_; }

  /// Points of the cartesian product (saturating at SIZE_MAX).
  std::size_t size() const { return size_; }
  /// Whether points() holds every point (size() <= kEnumerateLimit).
  bool enumerated() const { return enumerated_; }
  /// Every point of the cartesian product, in a fixed order (first tunable varies slowest);
  /// empty when not enumerated().
  const std::vector<SpacePoint>& points() const { return points_; }
  /// `count` points drawn uniformly (with replacement) from `seed`, each with its verdict.
  std::vector<SpacePoint> sample(std::size_t count, std::uint64_t seed) const;
  std::vector<Params> valid_points() const;
  std::size_t valid_count() const;
  /// Invalid points grouped by reason, with counts.
  std::map<std::string, std::size_t> invalid_reasons() const;
  /// nullopt when `params` is a valid point of this space; otherwise why not (also for values
  /// outside the tunables' lists).
  std::optional<std::string> check(const Params& params) const;

 private:
  const Op* op_;
  Problem problem_;
  DType dtype_;
  DeviceInfo device_;
  std::vector<SpacePoint> points_;
  std::size_t size_ = 1;
  bool enumerated_ = false;
};

}  // namespace ktune
