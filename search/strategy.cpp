#include "search/strategy.hpp"

#include <algorithm>

#include "ktune/error.hpp"
#include "search/model_strategy.hpp"

namespace ktune {

ExhaustiveStrategy::ExhaustiveStrategy(std::vector<Params> points) : points_(std::move(points)) {}

std::optional<Params> ExhaustiveStrategy::next() {
  while (next_ < points_.size() && observed_.count(points_[next_])) ++next_;
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
  while (next_ < points_.size() && observed_.count(points_[next_])) ++next_;
  if (next_ >= points_.size()) return std::nullopt;
  return points_[next_++];
}

SampledRandomStrategy::SampledRandomStrategy(std::vector<std::vector<std::int64_t>> values,
                                             Check check, std::uint64_t seed, std::size_t limit)
    : values_(std::move(values)), check_(std::move(check)), rng_(seed), left_(limit) {
  for (const std::vector<std::int64_t>& v : values_)
    if (v.empty()) throw InvalidArgument("SampledRandomStrategy: a tunable has no values");
}

std::optional<Params> SampledRandomStrategy::next() {
  for (std::size_t draw = 0; left_ > 0 && draw < kMaxDraws; ++draw) {
    Params p;
    p.values.reserve(values_.size());
    // Our own index draw (as RandomStrategy): a seed gives the same points everywhere.
    for (const std::vector<std::int64_t>& v : values_)
      p.values.push_back(v[static_cast<std::size_t>(rng_() % v.size())]);
    if (seen_.count(p) || check_(p)) continue;
    seen_.insert(p);
    --left_;
    return p;
  }
  return std::nullopt;
}

std::vector<Params> Strategy::next_batch() {
  std::vector<Params> out;
  while (std::optional<Params> p = next()) out.push_back(std::move(*p));
  return out;
}

StagedStrategy::StagedStrategy(std::vector<std::vector<std::int64_t>> values, Check check,
                               Params start, std::vector<std::size_t> outer,
                               std::vector<std::vector<std::size_t>> groups, Fit fit)
    : values_(std::move(values)),
      check_(std::move(check)),
      fit_(std::move(fit)),
      start_(std::move(start)),
      outer_idx_(std::move(outer)),
      groups_(std::move(groups)) {
  // The start's outer value first, then the others in odometer order.
  std::vector<std::int64_t> first;
  for (std::size_t i : outer_idx_) first.push_back(start_.values.at(i));
  outer_values_.push_back(first);
  std::vector<std::size_t> at(outer_idx_.size(), 0);
  for (;;) {
    std::vector<std::int64_t> v;
    for (std::size_t j = 0; j < outer_idx_.size(); ++j) v.push_back(values_[outer_idx_[j]][at[j]]);
    if (v != first) outer_values_.push_back(std::move(v));
    std::size_t k = outer_idx_.size();
    while (k > 0 && ++at[k - 1] == values_[outer_idx_[k - 1]].size()) at[--k] = 0;
    if (k == 0) break;
  }
}

std::vector<Params> StagedStrategy::group_points(std::size_t g, const Params& base) const {
  const std::vector<std::size_t>& idx = groups_[g];
  std::vector<Params> out;
  std::vector<std::size_t> at(idx.size(), 0);
  for (;;) {
    Params p = base;
    for (std::size_t j = 0; j < idx.size(); ++j) p.values[idx[j]] = values_[idx[j]][at[j]];
    out.push_back(std::move(p));
    std::size_t k = idx.size();
    while (k > 0 && ++at[k - 1] == values_[idx[k - 1]].size()) at[--k] = 0;
    if (k == 0) return out;
  }
}

std::optional<Params> StagedStrategy::repair(Params p) const {
  // Greedy: while the point is invalid, take the nearest change of one group that makes it
  // valid; failing that, the nearest that changes its reason (another kernel's limit is next).
  const auto distance = [&](const Params& a) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < a.values.size(); ++i) d += a.values[i] != p.values[i] ? 1 : 0;
    return d;
  };
  for (std::size_t round = 0; round < 2 * groups_.size() + 2; ++round) {
    const std::optional<std::string> why = check_(p);
    if (!why) return p;
    std::optional<Params> valid, other;
    std::size_t valid_d = 0, other_d = 0;
    for (std::size_t g = 0; g < groups_.size(); ++g)
      for (Params& q : group_points(g, p)) {
        const std::size_t d = distance(q);
        if (d == 0) continue;
        const std::optional<std::string> r = check_(q);
        if (!r && (!valid || d < valid_d)) {
          valid = q;
          valid_d = d;
        } else if (r && *r != *why && (!other || d < other_d)) {
          other = q;
          other_d = d;
        }
      }
    if (valid) return valid;
    if (!other) return std::nullopt;
    p = std::move(*other);
  }
  return std::nullopt;
}

bool StagedStrategy::begin_outer() {
  for (; outer_ < outer_values_.size(); ++outer_) {
    Params p = start_;
    for (std::size_t j = 0; j < outer_idx_.size(); ++j)
      p.values[outer_idx_[j]] = outer_values_[outer_][j];
    if (fit_) p = fit_(std::move(p));
    if (std::optional<Params> valid = repair(std::move(p))) {
      current_ = std::move(*valid);
      group_ = 0;
      return true;
    }
  }
  return false;
}

void StagedStrategy::keep_best_of_group() {
  // The fastest reported point that differs from current_ in this group only (current_ itself
  // included); when none ran, current_ stays.
  double best = std::numeric_limits<double>::infinity();
  Params chosen = current_;
  for (const Params& p : group_points(group_, current_)) {
    auto it = times_.find(p);
    if (it != times_.end() && it->second < best) {
      best = it->second;
      chosen = p;
    }
  }
  current_ = std::move(chosen);
}

std::vector<Params> StagedStrategy::next_batch() {
  for (;;) {
    if (!started_) {
      if (!begin_outer()) return {};
      started_ = true;
      // The start itself is measured with the first group's batch (when valid and new).
    } else {
      keep_best_of_group();
      if (++group_ >= groups_.size()) {
        ++outer_;
        started_ = false;
        continue;
      }
    }
    std::vector<Params> batch;
    for (Params& p : group_points(group_, current_))
      if (!times_.count(p) && !check_(p)) batch.push_back(std::move(p));
    if (!batch.empty()) return batch;
    // Every valid point of this group was measured already: its best is kept next call.
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
  static const std::vector<std::string> names = {"exhaustive", "random", "model", "staged"};
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, std::vector<Params> points,
                                        std::uint64_t seed) {
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>(std::move(points));
  if (name == "random") return std::make_unique<RandomStrategy>(std::move(points), seed);
  if (name == "model") return std::make_unique<ModelStrategy>(std::move(points), seed);
  if (name == "staged")
    throw InvalidArgument("the staged strategy needs an op's search stages (make_staged_strategy)");
  throw InvalidArgument("unknown strategy \"" + std::string(name) +
                        "\" (allowed: exhaustive, random, model, staged)");
}

}  // namespace ktune

namespace ktune {

void check_strategy_name(const Op& op, std::string_view name) {
  if (name.empty()) name = op.default_strategy();
  if (name == "staged") {
    if (op.search_stages().empty())
      throw InvalidArgument("strategy staged: op " + std::string(op.name()) +
                            " declares no search stages (allowed for it: exhaustive, random, model)");
    return;
  }
  make_strategy(name, {}, 0);
}

std::size_t default_model_budget(std::size_t valid_points) {
  const std::size_t fifth = (valid_points + 4) / 5;
  return std::min(valid_points, std::max(kModelMinBudget, fifth));
}

std::unique_ptr<Strategy> make_space_strategy(const Space& space, std::string_view name,
                                              const Params& start, std::uint64_t seed,
                                              std::size_t budget) {
  const Op& op = space.op();
  check_strategy_name(op, name);
  if (name.empty()) name = op.default_strategy();
  if (name == "model" && !space.enumerated()) {
    SampledSpace sampled;
    for (const Tunable& t : op.tunables()) sampled.values.push_back(t.values);
    sampled.check = [&space](const Params& p) { return space.check(p); };
    const SearchStages stages = op.search_stages();
    sampled.blocks.emplace_back();
    for (const std::string& n : stages.outer) sampled.blocks.back().push_back(op.param_index(n));
    for (const std::vector<std::string>& g : stages.groups) {
      sampled.blocks.emplace_back();
      for (const std::string& n : g) sampled.blocks.back().push_back(op.param_index(n));
      // The op's time is its kernels' sum: each group's effect (with the outer tunables) adds.
      sampled.additive.push_back(sampled.blocks.front());
      sampled.additive.back().insert(sampled.additive.back().end(), sampled.blocks.back().begin(),
                                     sampled.blocks.back().end());
    }
    sampled.starts = {start};
    ModelOptions options;
    options.limit = budget > 0 ? budget : kSampledModelBudget;
    return std::make_unique<ModelStrategy>(std::move(sampled), seed, options);
  }
  if (name == "model" && space.enumerated()) {
    std::vector<Params> points = space.valid_points();
    ModelOptions options;
    options.limit = budget > 0 ? budget : default_model_budget(points.size());
    return std::make_unique<ModelStrategy>(std::move(points), seed, options);
  }
  if (name == "random" && !space.enumerated()) {
    std::vector<std::vector<std::int64_t>> values;
    for (const Tunable& t : op.tunables()) values.push_back(t.values);
    return std::make_unique<SampledRandomStrategy>(
        std::move(values), [&space](const Params& p) { return space.check(p); }, seed,
        budget > 0 ? budget : kSampledModelBudget);
  }
  if (name != "staged") {
    if (!space.enumerated())
      throw InvalidArgument("the " + std::string(op.name()) + " space has " +
                            std::to_string(space.size()) + " points, too many for the " +
                            std::string(name) + " strategy (it needs every point listed, at most " +
                            std::to_string(Space::kEnumerateLimit) +
                            "): use --strategy random, staged or model");
    return make_strategy(name, space.valid_points(), seed);
  }
  return make_staged_strategy(op, [&space](const Params& p) { return space.check(p); }, start);
}

std::unique_ptr<Strategy> make_staged_strategy(const Op& op, StagedStrategy::Check check,
                                               const Params& start) {
  check_strategy_name(op, "staged");
  const SearchStages stages = op.search_stages();
  std::vector<std::size_t> outer;
  for (const std::string& n : stages.outer) outer.push_back(op.param_index(n));
  std::vector<std::vector<std::size_t>> groups;
  for (const std::vector<std::string>& g : stages.groups) {
    groups.emplace_back();
    for (const std::string& n : g) groups.back().push_back(op.param_index(n));
  }
  std::vector<std::vector<std::int64_t>> values;
  for (const Tunable& t : op.tunables()) values.push_back(t.values);
  return std::make_unique<StagedStrategy>(std::move(values), std::move(check), start,
                                          std::move(outer), std::move(groups), stages.fit_outer);
}

}  // namespace ktune
