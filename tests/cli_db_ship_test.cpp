// `ktune db ship IN OUT`: what a shipped database keeps (devices, best rows, their trials and the
// defaults' trials on their problems), that OUT is never overwritten, and that the lookup then
// reads the default's trial to decide whether a row may serve its neighbours.
#include <algorithm>

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

  void trial(Store& s, const std::string& params, double us, TrialStatus status = TrialStatus::ok) {
    TrialRecord t;
    t.device_key = h100.key();
    t.op = std::string(op.name());
    t.problem_key = problem;
    t.params_key = params;
    t.template_hash = op.template_hash();
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

}  // namespace
}  // namespace ktune
