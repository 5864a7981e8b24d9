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

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"exhaustive", "random"};
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, std::vector<Params> points,
                                        std::uint64_t seed) {
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>(std::move(points));
  if (name == "random") return std::make_unique<RandomStrategy>(std::move(points), seed);
  throw InvalidArgument("unknown strategy \"" + std::string(name) +
                        "\" (allowed: exhaustive, random)");
}

}  // namespace ktune
