#include <gtest/gtest.h>

#include <set>

#include "ktune/error.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"

namespace ktune {
namespace {

Space space_for(const std::string& op, const std::string& shape, const char* arch = "sm_90a") {
  const Op& o = get_op(op);
  return Space(o, o.parse_problem(shape), DType::bf16, *device_for_arch(arch));
}

TEST(Space, IsTheFullCartesianProduct) {
  for (const Op* op : all_ops()) {
    Space s(*op, op->default_problem(), DType::bf16, *device_for_arch("sm_90a"));
    std::size_t product = 1;
    for (const Tunable& t : op->tunables()) product *= t.values.size();
    EXPECT_EQ(s.points().size(), product) << op->name();
    std::set<Params> distinct;
    for (const SpacePoint& p : s.points()) distinct.insert(p.params);
    EXPECT_EQ(distinct.size(), product) << op->name();
    EXPECT_GT(s.valid_count(), 0u) << op->name();
  }
}

TEST(Space, InvalidPointsCarryReasonsAndAgreeWithTheOp) {
  Space s = space_for("add_rmsnorm", "m=1000,n=4095");
  std::size_t invalid = 0;
  for (const SpacePoint& p : s.points()) {
    std::optional<std::string> direct =
        s.op().invalid_reason(p.params, s.problem(), s.dtype(), s.device());
    EXPECT_EQ(direct.has_value(), p.invalid.has_value());
    if (p.invalid) {
      EXPECT_FALSE(p.invalid->empty());
      ++invalid;
    }
  }
  EXPECT_GT(invalid, 0u) << "n=4095 rules out every vector width above 1";
  std::size_t counted = 0;
  for (const auto& [reason, n] : s.invalid_reasons()) counted += n;
  EXPECT_EQ(counted, invalid);
  EXPECT_EQ(s.valid_count() + invalid, s.points().size());
}

TEST(Space, CheckRejectsValuesOutsideTheLists) {
  Space s = space_for("add_rmsnorm", "m=64,n=4096");
  Params p = s.valid_points().front();
  EXPECT_FALSE(s.check(p).has_value());
  p.values[0] = 12345;
  EXPECT_TRUE(s.check(p).has_value());
  p.values.pop_back();
  EXPECT_TRUE(s.check(p).has_value());
}

TEST(Strategy, ExhaustiveVisitsEveryPointOnce) {
  Space s = space_for("softmax", "m=128,n=1024");
  std::vector<Params> valid = s.valid_points();
  ExhaustiveStrategy e(valid);
  std::vector<Params> seen;
  while (std::optional<Params> p = e.next()) seen.push_back(*p);
  EXPECT_EQ(seen, valid);
}

TEST(Strategy, RandomIsASeededPermutation) {
  Space s = space_for("add_rmsnorm", "m=64,n=4096");
  std::vector<Params> valid = s.valid_points();
  auto draw = [&](std::uint64_t seed) {
    RandomStrategy r(valid, seed);
    std::vector<Params> out;
    while (std::optional<Params> p = r.next()) out.push_back(*p);
    return out;
  };
  std::vector<Params> a = draw(7), b = draw(7), c = draw(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<Params>(a.begin(), a.end()), std::set<Params>(valid.begin(), valid.end()));
}

TEST(Strategy, UnknownNameIsRejectedWithTheAllowedNames) {
  try {
    make_strategy("bayes", {}, 0);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exhaustive, random"), std::string::npos);
  }
}

}  // namespace
}  // namespace ktune
