// The runtime's lookup policy, on databases written here: no GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "db/store.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

class Lookup : public ::testing::Test {
 protected:
  const Op& op = get_op("add_rmsnorm");
  DeviceInfo h100 = *device_for_arch("sm_90a");
  DeviceInfo other_h100 = [] {
    DeviceInfo d = *device_for_arch("sm_90a");
    d.name = "another sm_90 part";
    d.sm_count = 114;
    return d;
  }();
  DeviceInfo a100 = *device_for_arch("sm_80");
  test::TempDir dir;

  std::filesystem::path make_db(const std::string& name,
                                const std::vector<std::tuple<DeviceInfo, std::string, std::string>>& rows,
                                const std::string& hash_override = {}) {
    std::filesystem::path p = dir.path() / name;
    Store s = Store::open(p, Store::Mode::read_write);
    for (const auto& [device, problem, params] : rows) {
      s.upsert_device(device);
      BestRecord b;
      b.device_key = device.key();
      b.op = "add_rmsnorm";
      b.dtype = DType::bf16;
      b.problem_key = problem;
      b.params_key = params;
      b.template_hash = hash_override.empty() ? op.template_hash() : hash_override;
      b.median_us = 10.0;
      s.set_best(b);
    }
    return p;
  }

  // A valid configuration for these tests that differs from the default.
  std::string tuned(const Problem& p, const DeviceInfo& d, int pick = 0) {
    std::string def = op.params_key(op.default_params(p, DType::bf16, d));
    int seen = 0;
    const std::vector<Tunable>& ts = op.tunables();
    std::vector<std::size_t> idx(ts.size(), 0);
    for (;;) {
      Params params;
      for (std::size_t i = 0; i < ts.size(); ++i) params.values.push_back(ts[i].values[idx[i]]);
      if (!op.invalid_reason(params, p, DType::bf16, d) && op.params_key(params) != def && seen++ == pick)
        return op.params_key(params);
      std::size_t k = ts.size();
      while (k > 0) {
        --k;
        if (++idx[k] < ts[k].values.size()) break;
        idx[k] = 0;
        if (k == 0) return def;
      }
    }
  }

  Problem problem(const std::string& s) { return op.parse_problem(s); }
};

TEST_F(Lookup, ExactMatchWins) {
  Problem p = problem("m=16384,n=4096");
  std::string params = tuned(p, h100);
  auto db = make_db("u.db", {{h100, op.problem_key(p), params}});
  TuningDatabases dbs(db, {});
  LookupResult r = dbs.find(op, DType::bf16, p, h100);
  EXPECT_EQ(r.kind, Match::exact);
  EXPECT_EQ(op.params_key(r.params), params);
  EXPECT_EQ(r.database, db.string());
}

TEST_F(Lookup, NoDatabaseGivesTheDefault) {
  Problem p = problem("m=16384,n=4096");
  TuningDatabases dbs(dir.path() / "missing.db", {});
  LookupResult r = dbs.find(op, DType::bf16, p, h100);
  EXPECT_EQ(r.kind, Match::default_config);
  EXPECT_EQ(r.params, op.default_params(p, DType::bf16, h100));
}

TEST_F(Lookup, NearestShapeInLogSpace) {
  Problem asked = problem("m=12000,n=4096");
  std::string near = tuned(problem("m=16384,n=4096"), h100, 0);
  std::string far = tuned(problem("m=16,n=4096"), h100, 1);
  auto db = make_db("u.db", {{h100, "m=16384,n=4096", near}, {h100, "m=16,n=4096", far}});
  TuningDatabases dbs(db, {});
  LookupResult r = dbs.find(op, DType::bf16, asked, h100);
  EXPECT_EQ(r.kind, Match::nearest_shape);
  EXPECT_EQ(r.tuned_problem, "m=16384,n=4096");
  EXPECT_EQ(op.params_key(r.params), near);
}

TEST_F(Lookup, NearestSkipsConfigsInvalidForTheAskedProblem) {
  // Tuned at n=4096 with a vector width that cannot divide n=4095.
  Problem asked = problem("m=4096,n=4095");
  Problem tuned_on = problem("m=4096,n=4096");
  std::string params;
  for (int i = 0; i < 200 && params.empty(); ++i) {
    std::string k = tuned(tuned_on, h100, i);
    if (op.invalid_reason(op.parse_params(k), asked, DType::bf16, h100)) params = k;
  }
  ASSERT_FALSE(params.empty());
  auto db = make_db("u.db", {{h100, op.problem_key(tuned_on), params}});
  TuningDatabases dbs(db, {});
  LookupResult r = dbs.find(op, DType::bf16, asked, h100);
  EXPECT_EQ(r.kind, Match::default_config);
  EXPECT_FALSE(op.invalid_reason(r.params, asked, DType::bf16, h100).has_value());
}

TEST_F(Lookup, OtherDeviceOfTheSameArchitectureOnly) {
  Problem p = problem("m=16384,n=4096");
  std::string params = tuned(p, h100);
  auto same_arch = make_db("a.db", {{other_h100, op.problem_key(p), params}});
  TuningDatabases a(same_arch, {});
  LookupResult r = a.find(op, DType::bf16, p, h100);
  EXPECT_EQ(r.kind, Match::other_device);
  EXPECT_EQ(r.tuned_device, other_h100.key());

  auto other_arch = make_db("b.db", {{a100, op.problem_key(p), params}});
  TuningDatabases b(other_arch, {});
  EXPECT_EQ(b.find(op, DType::bf16, p, h100).kind, Match::default_config);
}

TEST_F(Lookup, StaleTemplateHashIsNotUsed) {
  Problem p = problem("m=16384,n=4096");
  auto db = make_db("u.db", {{h100, op.problem_key(p), tuned(p, h100)}}, "0000stale");
  TuningDatabases dbs(db, {});
  EXPECT_EQ(dbs.find(op, DType::bf16, p, h100).kind, Match::default_config);
}

TEST_F(Lookup, UserDatabaseWinsOverShipped) {
  Problem p = problem("m=16384,n=4096");
  std::string mine = tuned(p, h100, 0), shipped = tuned(p, h100, 1);
  ASSERT_NE(mine, shipped);
  auto user = make_db("user.db", {{h100, op.problem_key(p), mine}});
  auto ship = make_db("ship.db", {{h100, op.problem_key(p), shipped}});
  TuningDatabases dbs(user, {ship});
  EXPECT_EQ(op.params_key(dbs.find(op, DType::bf16, p, h100).params), mine);
  // Without an entry in the user's database the shipped one is used, still as an exact match.
  TuningDatabases only_shipped(dir.path() / "none.db", {ship});
  LookupResult r = only_shipped.find(op, DType::bf16, p, h100);
  EXPECT_EQ(r.kind, Match::exact);
  EXPECT_EQ(op.params_key(r.params), shipped);
}

TEST_F(Lookup, HostileParametersAreRejected) {
  Problem p = problem("m=16384,n=4096");
  Params def = op.default_params(p, DType::bf16, h100);
  std::string first = op.tunables()[0].name;
  for (std::string bad : {first + "=-1", first + "=99999999999", first + "=abc", std::string("evil=1"),
                          std::string("'; DROP TABLE best; --"), std::string("")}) {
    test::TempDir d;
    std::filesystem::path path = d.path() / "h.db";
    {
      Store s = Store::open(path, Store::Mode::read_write);
      s.upsert_device(h100);
      BestRecord b;
      b.device_key = h100.key();
      b.op = "add_rmsnorm";
      b.dtype = DType::bf16;
      b.problem_key = op.problem_key(p);
      b.params_key = bad;
      b.template_hash = op.template_hash();
      s.set_best(b);
    }
    TuningDatabases dbs(path, {});
    LookupResult r = dbs.find(op, DType::bf16, p, h100);
    EXPECT_EQ(r.kind, Match::default_config) << bad;
    EXPECT_EQ(r.params, def) << bad;
  }
}

TEST_F(Lookup, CorruptDatabaseFallsBackToDefaults) {
  Problem p = problem("m=16384,n=4096");
  std::filesystem::path path = dir.path() / "garbage.db";
  std::ofstream(path) << std::string(8192, 'x');
  TuningDatabases dbs(path, {});
  EXPECT_EQ(dbs.find(op, DType::bf16, p, h100).kind, Match::default_config);
  EXPECT_FALSE(dbs.notes().empty());
}

TEST(ProblemDistance, EnumeratedDimsMustMatch) {
  const Op& op = get_op("bias_act");
  Problem a = op.parse_problem("m=64,n=4096,act=silu");
  Problem b = op.parse_problem("m=64,n=4096,act=relu");
  EXPECT_TRUE(std::isinf(problem_distance(op, a, b)));
  EXPECT_DOUBLE_EQ(problem_distance(op, a, a), 0.0);
  Problem c = op.parse_problem("m=128,n=4096,act=silu");
  EXPECT_NEAR(problem_distance(op, a, c), std::log(2.0), 1e-12);
}

}  // namespace
}  // namespace ktune
