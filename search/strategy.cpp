#include "search/strategy.hpp"

#include <algorithm>

#include "ktune/error.hpp"

namespace ktune {

ExhaustiveStrategy::ExhaustiveStrategy(std::vector<Params> points) : points_(std::move(points)) {}

std::optional<Params> ExhaustiveStrategy::next() {
  if (next_ >= points_.size()) return std::nullopt;
  return points_[next_++];
}

RandomStrategy::RandomStrategy(std::vector<Params> points, std::uint64_t seed)
    : points_(std::move(points)) {
  std::mt19937_64 rng(seed);
  // Fisher-Yates with our own index draw: std::shuffle's use of the engine is not specified, and
  // a seed must give the same order on every standard library.
  for (std::size_t i = points_.size(); i > 1; --i) {
    std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(points_[i - 1], points_[j]);
  }
}

std::optional<Params> RandomStrategy::next() {
  if (next_ >= points_.size()) return std::nullopt;
  return points_[next_++];
}

std::vector<Params> Strategy::next_batch() {
  std::vector<Params> out;
  while (std::optional<Params> p = next()) out.push_back(std::move(*p));
  return out;
}

StagedStrategy::StagedStrategy(std::vector<Params> points, Params start,
                               std::vector<std::size_t> outer,
                               std::vector<std::vector<std::size_t>> groups)
    : points_(std::move(points)),
      start_(std::move(start)),
      outer_idx_(std::move(outer)),
      groups_(std::move(groups)) {
  const auto project = [&](const Params& p) {
    std::vector<std::int64_t> v;
    for (std::size_t i : outer_idx_) v.push_back(p.values.at(i));
    return v;
  };
  // The default's outer value first, then the others in the space's order.
  const std::vector<std::int64_t> first = project(start_);
  for (const Params& p : points_)
    if (project(p) == first) {
      outer_values_.push_back(first);
      break;
    }
  for (const Params& p : points_) {
    std::vector<std::int64_t> v = project(p);
    if (std::find(outer_values_.begin(), outer_values_.end(), v) == outer_values_.end())
      outer_values_.push_back(std::move(v));
  }
}

bool StagedStrategy::begin_outer() {
  while (outer_ < outer_values_.size()) {
    const std::vector<std::int64_t>& v = outer_values_[outer_];
    const Params* nearest = nullptr;
    std::size_t nearest_changes = 0;
    for (const Params& p : points_) {
      bool match = true;
      for (std::size_t j = 0; j < outer_idx_.size() && match; ++j)
        match = p.values[outer_idx_[j]] == v[j];
      if (!match) continue;
      std::size_t changes = 0;
      for (std::size_t i = 0; i < p.values.size(); ++i)
        changes += p.values[i] != start_.values.at(i) ? 1 : 0;
      if (!nearest || changes < nearest_changes) {
        nearest = &p;
        nearest_changes = changes;
      }
    }
    if (nearest) {
      current_ = *nearest;
      group_ = 0;
      return true;
    }
    ++outer_;
  }
  return false;
}

std::vector<Params> StagedStrategy::group_batch() const {
  const std::vector<std::size_t>& g = groups_[group_];
  std::vector<Params> out;
  for (const Params& p : points_) {
    bool same = true;
    for (std::size_t i = 0; i < p.values.size() && same; ++i)
      if (std::find(g.begin(), g.end(), i) == g.end()) same = p.values[i] == current_.values[i];
    if (same && !times_.count(p)) out.push_back(p);
  }
  return out;
}

void StagedStrategy::keep_best_of_group() {
  // The fastest reported point that differs from current_ in this group only (current_ itself
  // included); when none ran, current_ stays.
  const std::vector<std::size_t>& g = groups_[group_];
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [p, t] : times_) {
    bool same = true;
    for (std::size_t i = 0; i < p.values.size() && same; ++i)
      if (std::find(g.begin(), g.end(), i) == g.end()) same = p.values[i] == current_.values[i];
    if (same && t < best) {
      best = t;
      current_ = p;
    }
  }
}

std::vector<Params> StagedStrategy::next_batch() {
  for (;;) {
    if (!started_) {
      if (!begin_outer()) return {};
      started_ = true;
    } else {
      keep_best_of_group();
      if (++group_ >= groups_.size()) {
        ++outer_;
        started_ = false;
        continue;
      }
    }
    std::vector<Params> batch = group_batch();
    if (!batch.empty()) return batch;
    // Every point of this group was measured already (another outer value's start, a resumed
    // row): its best is kept on the next call.
  }
}

std::optional<Params> StagedStrategy::next() {
  if (pending_.empty()) {
    pending_ = next_batch();
    std::reverse(pending_.begin(), pending_.end());
  }
  if (pending_.empty()) return std::nullopt;
  Params p = std::move(pending_.back());
  pending_.pop_back();
  return p;
}

void StagedStrategy::report(const Params& params, double median_us) {
  times_[params] = median_us;
}

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"exhaustive", "random", "staged"};
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, std::vector<Params> points,
                                        std::uint64_t seed) {
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>(std::move(points));
  if (name == "random") return std::make_unique<RandomStrategy>(std::move(points), seed);
  if (name == "staged")
    throw InvalidArgument("the staged strategy needs an op's search stages (make_staged_strategy)");
  throw InvalidArgument("unknown strategy \"" + std::string(name) +
                        "\" (allowed: exhaustive, random, staged)");
}

}  // namespace ktune

namespace ktune {

std::unique_ptr<Strategy> make_op_strategy(const Op& op, std::string_view name,
                                           std::vector<Params> points, const Params& start,
                                           std::uint64_t seed) {
  if (name.empty()) name = op.default_strategy();
  if (name != "staged") return make_strategy(name, std::move(points), seed);
  const SearchStages stages = op.search_stages();
  if (stages.empty())
    throw InvalidArgument("strategy staged: op " + std::string(op.name()) +
                          " declares no search stages (allowed for it: exhaustive, random)");
  std::vector<std::size_t> outer;
  for (const std::string& n : stages.outer) outer.push_back(op.param_index(n));
  std::vector<std::vector<std::size_t>> groups;
  for (const std::vector<std::string>& g : stages.groups) {
    groups.emplace_back();
    for (const std::string& n : g) groups.back().push_back(op.param_index(n));
  }
  return std::make_unique<StagedStrategy>(std::move(points), start, std::move(outer),
                                          std::move(groups));
}

}  // namespace ktune
