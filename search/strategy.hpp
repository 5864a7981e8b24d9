// Search strategies: they only propose (next) and learn (report).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/types.hpp"

namespace ktune {

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// The next configuration to evaluate; nullopt when the strategy is done.
  virtual std::optional<Params> next() = 0;
  /// The measured median time of a proposed configuration (infinity when it failed).
  virtual void report(const Params& params, double median_us) = 0;
  virtual std::string_view name() const = 0;
};

/// Every valid point, in the space's order.
class ExhaustiveStrategy final : public Strategy {
 public:
  explicit ExhaustiveStrategy(std::vector<Params> points);
  std::optional<Params> next() override;
  void report(const Params&, double) override {}
  std::string_view name() const override { return "exhaustive"; }

 private:
  std::vector<Params> points_;
  std::size_t next_ = 0;
};

/// Valid points in a random order drawn from `seed` (sampling without replacement); the sweep's
/// budget (count and seconds) decides how many are evaluated.
class RandomStrategy final : public Strategy {
 public:
  RandomStrategy(std::vector<Params> points, std::uint64_t seed);
  std::optional<Params> next() override;
  void report(const Params&, double) override {}
  std::string_view name() const override { return "random"; }

 private:
  std::vector<Params> points_;
  std::size_t next_ = 0;
};

/// "exhaustive" or "random"; throws InvalidArgument naming the allowed names.
std::unique_ptr<Strategy> make_strategy(std::string_view name, std::vector<Params> points,
                                        std::uint64_t seed);
const std::vector<std::string>& strategy_names();

}  // namespace ktune
