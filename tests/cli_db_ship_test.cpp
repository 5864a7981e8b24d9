// `ktune db ship IN OUT`: what a shipped database keeps (devices, best rows, their trials and the
// defaults' trials on their problems), that OUT is never overwritten, and that the lookup then
// reads the default's trial to decide whether a row may serve its neighbours; `ktune db
// defaults`: the rows that lack that trial, as a plan to re-time.
#include <algorithm>
#include <fstream>

#include "db/store.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "templates/op.hpp"
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

class Ship : public Cli {
 protected:
  const Op& op = get_op("add_rmsnorm");
  DeviceInfo h100;
  const std::string problem = "m=16384,n=4096";
  std::string def, tuned, other;

  Ship() {
    h100 = *device_for_arch("sm_90a");
    h100.name = "NVIDIA H100 80GB HBM3";
    def = op.params_key(op.default_params(op.parse_problem(problem), DType::bf16, h100));
    // Two valid configurations other than the default.
    for (const char* p : {"threads=128,rows=1,vec=8,regs=1", "threads=512,rows=1,vec=8,regs=1",
                          "threads=256,rows=2,vec=8,regs=1"}) {
      if (p == def) continue;
      (tuned.empty() ? tuned : other) = p;
      if (!other.empty()) break;
    }
  }

  void trial(Store& s, const std::string& params, double us, TrialStatus status = TrialStatus::ok,
             const std::string& at = {}, const std::string& hash = {}) {
    TrialRecord t;
    t.device_key = h100.key();
    t.op = std::string(op.name());
    t.problem_key = at.empty() ? problem : at;
    t.params_key = params;
    t.template_hash = hash.empty() ? op.template_hash() : hash;
    t.status = status;
    t.median_us = status == TrialStatus::ok ? us : 0.0;
    s.record_trial(t);
  }

  // A sweep's database: the default at `default_us`, the tuned point at 10 us (the best), one
  // slower point and a failed one.
  fs::path sweep_db(double default_us, const std::string& name = "sweep.db") {
    const fs::path p = dir.path() / name;
    Store s = Store::open(p, Store::Mode::read_write);
    s.upsert_device(h100);
    trial(s, def, default_us);
    trial(s, tuned, 10.0);
    trial(s, other, 30.0);
    trial(s, other, 0.0, TrialStatus::wrong_result);
    return p;
  }
};

TEST_F(Ship, KeepsTheBestRowsTheirTrialsAndTheDefaults) {
  sweep_db(10.5);
  CliRun r = ktune("db ship sweep.db shipped.db");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "1 best configurations with 1 of their trials and 1 trials of the "
                              "defaults")) << r.out;
  Store s = Store::open(dir.path() / "shipped.db", Store::Mode::read_only);
  Rows<TrialRecord> trials = s.all_trials();
  ASSERT_EQ(trials.rows.size(), 2u);
  std::vector<std::string> kept = {trials.rows[0].params_key, trials.rows[1].params_key};
  std::sort(kept.begin(), kept.end());
  std::vector<std::string> want = {def, tuned};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(kept, want);
  std::optional<BestRecord> b =
      s.best(h100.key(), std::string(op.name()), DType::bf16, problem, op.template_hash());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->params_key, tuned);
  EXPECT_EQ(b->median_us, 10.0);
  EXPECT_NE(b->trial_id, 0);
  EXPECT_TRUE(s.check().ok());
  // OUT is never overwritten.
  CliRun again = ktune("db ship sweep.db shipped.db");
  EXPECT_EQ(again.code, 2);
  EXPECT_TRUE(contains(again.err, "exists: db ship writes a new file")) << again.err;
  CliRun missing = ktune("db ship nothing.db other.db");
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(contains(missing.err, "\"nothing.db\" does not exist")) << missing.err;
  EXPECT_FALSE(fs::exists(dir.path() / "other.db"));
}

TEST_F(Ship, TheLookupReadsTheDefaultsTrialFromAShippedDatabase) {
  // 1.05x over the default at m=16384: m=12000 gets its own default, with the reason.
  sweep_db(10.5, "close.db");
  ASSERT_EQ(ktune("db ship close.db close-shipped.db").code, 0);
  CliRun r = ktune("best --op add_rmsnorm --shape m=12000,n=4096 --no-shipped --db close-shipped.db "
                   "--device '" + h100.name + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "match: default")) << r.out;
  EXPECT_TRUE(contains(r.out, "1.05x the default's speed there")) << r.out;
  // 2x over it: the neighbour serves.
  sweep_db(20.0, "far.db");
  ASSERT_EQ(ktune("db ship far.db far-shipped.db").code, 0);
  r = ktune("best --op add_rmsnorm --shape m=12000,n=4096 --no-shipped --db far-shipped.db "
            "--device '" + h100.name + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "match: nearest_shape")) << r.out;
  EXPECT_TRUE(contains(r.out, tuned)) << r.out;
}

// A row whose problem has no trial of the current default (its sweep ran before the default
// changed) serves neighbours unjudged: ship warns, and db defaults lists it as a plan line that
// `ktune sweep --plan` reads; once the default's trial is there, nothing is listed.
TEST_F(Ship, RowsWithoutTheirDefaultsTrialAreListedAsAPlan) {
  const fs::path db = dir.path() / "old.db";
  const std::string at = "m=8192,n=4096";
  {
    Store s = Store::open(db, Store::Mode::read_write);
    s.upsert_device(h100);
    trial(s, tuned, 10.0);  // m=16384: the best, no trial of the default
    trial(s, other, 30.0);
    trial(s, def, 9.0, TrialStatus::ok, at);  // m=8192: the default is the best
    trial(s, tuned, 12.0, TrialStatus::ok, at);
    trial(s, tuned, 5.0, TrialStatus::ok, "m=4096,n=4096", std::string(64, 'a'));  // stale code
  }
  CliRun ship = ktune("db ship old.db old-shipped.db");
  ASSERT_EQ(ship.code, 0) << ship.err;
  EXPECT_TRUE(contains(ship.err, "warning: 1 best rows have no trial of their problem's current "
                                 "default")) << ship.err;
  CliRun r = ktune("db defaults --db old.db");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "# 1 of the 2 current best rows")) << r.out;
  EXPECT_TRUE(contains(r.out, "# (1 stale rows")) << r.out;
  EXPECT_TRUE(contains(r.out, "# device: " + h100.name)) << r.out;
  EXPECT_TRUE(contains(r.out, "\nadd_rmsnorm bf16 " + problem + "\n")) << r.out;
  EXPECT_FALSE(contains(r.out, at)) << r.out;
  EXPECT_EQ(ktune("db defaults --db old.db --check").code, 1);
  CliRun json = ktune("db defaults --db old.db --json");
  EXPECT_TRUE(contains(json.out, "\"default_params\":\"" + def + "\"")) << json.out;
  // The listing is a plan the sweep reads (a dry run: no GPU needed).
  {
    std::ofstream(dir.path() / "retime.txt") << r.out;
  }
  CliRun plan = ktune("sweep --plan retime.txt --dry-run --budget 1 --no-warm-start --db dry.db");
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_TRUE(contains(plan.out, "1 problems on 1 lines")) << plan.out;
  // Another device's rows, or an unknown one.
  EXPECT_TRUE(contains(ktune("db defaults --db old.db --device '" + h100.name + "'").out,
                       "# 1 of the 2"));
  CliRun unknown = ktune("db defaults --db old.db --device 'NVIDIA B200'");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(contains(unknown.err, "--device \"NVIDIA B200\" is not a device of")) << unknown.err;
  EXPECT_TRUE(contains(unknown.err, h100.name)) << unknown.err;
  // Meanwhile the row serves its neighbours, and `ktune best` says it does so unjudged.
  CliRun near = ktune("best --op add_rmsnorm --shape m=12000,n=4096 --no-shipped --db old.db "
                      "--device '" + h100.name + "'");
  EXPECT_TRUE(contains(near.out, "match: nearest_shape")) << near.out;
  EXPECT_TRUE(contains(near.out, "unjudged: its database holds no trial of the default on " +
                                     problem)) << near.out;
  // The default measured (as `ktune sweep --plan ... --budget 1` does): nothing left to list.
  {
    Store s = Store::open(db, Store::Mode::read_write);
    trial(s, def, 12.0);
  }
  r = ktune("db defaults --db old.db --check");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "# 0 of the 2 current best rows")) << r.out;
  near = ktune("best --op add_rmsnorm --shape m=12000,n=4096 --no-shipped --db old.db --device '" +
               h100.name + "'");
  EXPECT_TRUE(contains(near.out, "match: nearest_shape")) << near.out;  // 1.2x the default there
  EXPECT_FALSE(contains(near.out, "unjudged")) << near.out;
}

}  // namespace
}  // namespace ktune
