// The tuning loop on the GPU: planted faulting, hanging, wrong and uncompilable configurations
// are survived and recorded with the right status; a re-run resumes; the best is never a
// planted one. Skipped (with the reason) without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "db/store.hpp"
#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "search/space.hpp"
#include "templates/params_over.hpp"
#include "tests/support/test_env.hpp"
#include "tuner/queue_hold.hpp"
#include "tuner/sweep.hpp"

namespace ktune {
namespace {

constexpr const char* kFault = R"(
extern "C" __global__ void planted_fault() {
  // A store to an address no allocation covers: an illegal address that poisons the context.
  *reinterpret_cast<volatile int*>(0x10ull) = 1;
}
)";

constexpr const char* kHang = R"(
extern "C" __global__ void planted_hang() {
  volatile int spin = 1;
  while (spin) __nanosleep(1000);
}
)";

// Writes nothing: outputs keep their NaN poison (an "unwritten output" bug).
constexpr const char* kWrong = R"(
extern "C" __global__ void planted_wrong() {}
)";

constexpr const char* kBroken = R"(
extern "C" __global__ void planted_broken() { this is not C++; }
)";

// 2^30 macro expansions that end in one token: minutes of NVRTC preprocessing in little memory.
std::string slow_to_compile() {
  std::string s = "#define E0(x) x\n";
  for (int i = 1; i <= 30; ++i) {
    s += "#define E" + std::to_string(i) + "(x) E" + std::to_string(i - 1) + "(E" +
         std::to_string(i - 1) + "(x))\n";
  }
  return s + "extern \"C\" __global__ void planted_slow(int* p) { *p = E30(1); }\n";
}

class Tuner : public ::testing::Test {
 protected:
  void SetUp() override { KTUNE_REQUIRE_GPU(); }

  SweepOptions options(const std::string& op, const std::string& shape) {
    SweepOptions o;
    o.op = op;
    o.shape = shape;
    o.dtype = DType::bf16;
    o.db_path = dir.path() / "tune.db";
    o.worker_command = {test::cli_path(), "__worker"};
    o.compile_command = {test::cli_path(), "__compile"};
    o.cache_dir = dir.path() / "cache";
    o.candidate_timeout_s = 5.0;
    return o;
  }

  static std::map<std::string, TrialStatus> by_key(const SweepResult& r) {
    std::map<std::string, TrialStatus> m;
    for (const TrialOutcome& t : r.trials) m[t.params_key] = t.status;
    return m;
  }

  test::TempDir dir;
};

TEST_F(Tuner, PlantedFailuresAreSurvivedAndRecorded) {
  // n = 4093 is prime: no tile divides it.
  SweepOptions o = options("add_rmsnorm", "m=333,n=4093");
  const Op& op = get_op(o.op);
  Problem problem = op.parse_problem(o.shape);
  // Plant in configurations evaluated early, in the middle and last (never the default, which
  // is evaluated first as the baseline).
  DeviceInfo generic = query_device(0);
  Space space(op, problem, o.dtype, generic);
  std::vector<Params> valid = space.valid_points();
  std::string def = op.params_key(op.default_params(problem, o.dtype, generic));
  std::vector<std::string> keys;
  for (const Params& p : valid)
    if (op.params_key(p) != def) keys.push_back(op.params_key(p));
  ASSERT_GE(keys.size(), 6u);
  const std::string fault_early = keys[0], wrong = keys[1], hang = keys[keys.size() / 2],
                    broken = keys[keys.size() / 2 + 1], fault_mid = keys[keys.size() / 2 + 2],
                    fault_last = keys.back();
  o.planted[fault_early] = {kFault, "planted_fault"};
  o.planted[fault_mid] = {kFault, "planted_fault"};
  o.planted[fault_last] = {kFault, "planted_fault"};
  o.planted[hang] = {kHang, "planted_hang"};
  o.planted[wrong] = {kWrong, "planted_wrong"};
  o.planted[broken] = {kBroken, "planted_broken"};

  auto t0 = std::chrono::steady_clock::now();
  SweepResult r = run_sweep(o);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, TrialStatus> status = by_key(r);
  EXPECT_EQ(status[fault_early], TrialStatus::launch_error);
  EXPECT_EQ(status[fault_mid], TrialStatus::launch_error);
  EXPECT_EQ(status[fault_last], TrialStatus::launch_error);
  EXPECT_EQ(status[hang], TrialStatus::timeout);
  EXPECT_EQ(status[wrong], TrialStatus::wrong_result);
  EXPECT_EQ(status[broken], TrialStatus::compile_error);
  // Every point of the space has a status.
  EXPECT_EQ(status.size(), space.points().size());
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->status, TrialStatus::ok);
  EXPECT_FALSE(o.planted.count(r.best->params_key)) << "a planted config was chosen";
  EXPECT_GE(r.worker_starts, 4) << "one fresh worker after each fault and the hang";
  EXPECT_LT(seconds, 120.0);

  // The database holds every trial, and the best the runtime will read.
  Store store = Store::open(o.db_path, Store::Mode::read_only);
  EXPECT_EQ(store.integrity_check(), "ok");
  std::vector<TrialRecord> rows =
      store.trials(r.device.key(), o.op, o.dtype, r.problem_key, op.template_hash()).rows;
  std::set<std::string> recorded;
  for (const TrialRecord& t : rows) recorded.insert(t.params_key);
  EXPECT_EQ(recorded.size(), space.points().size());
  std::optional<BestRecord> best =
      store.best(r.device.key(), o.op, o.dtype, r.problem_key, op.template_hash());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->params_key, r.best->params_key);

  // Re-running resumes: nothing is measured again, the best stays.
  SweepOptions again = o;
  again.planted.clear();
  SweepResult r2 = run_sweep(again);
  std::size_t resumed = 0;
  for (const TrialOutcome& t : r2.trials) resumed += t.resumed ? 1 : 0;
  EXPECT_EQ(resumed, r2.trials.size() - r2.counts[TrialStatus::invalid]);
  ASSERT_TRUE(r2.best.has_value());
  std::vector<TrialRecord> rows2 =
      Store::open(o.db_path, Store::Mode::read_only)
          .trials(r.device.key(), o.op, o.dtype, r.problem_key, op.template_hash())
          .rows;
  EXPECT_EQ(rows2.size(), rows.size()) << "a resumed sweep adds no trials";
}

TEST_F(Tuner, HangIsKilledWithinTheTimeout) {
  SweepOptions o = options("softmax", "m=7,n=1001");
  const Op& op = get_op(o.op);
  Problem problem = op.parse_problem(o.shape);
  DeviceInfo generic = query_device(0);
  std::string def = op.params_key(op.default_params(problem, o.dtype, generic));
  // With budget 2 the exhaustive strategy evaluates the default, then the first other point.
  std::string target;
  for (const Params& p : Space(op, problem, o.dtype, generic).valid_points())
    if (target.empty() && op.params_key(p) != def) target = op.params_key(p);
  ASSERT_FALSE(target.empty());
  o.planted[target] = {kHang, "planted_hang"};
  o.candidate_timeout_s = 3.0;
  o.budget = 2;  // the default counts as one
  auto t0 = std::chrono::steady_clock::now();
  SweepResult r = run_sweep(o);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(by_key(r)[target], TrialStatus::timeout);
  EXPECT_LT(seconds, 3.0 + 30.0) << "killed at the timeout, not later";
  ASSERT_TRUE(r.default_config.has_value());
  EXPECT_EQ(r.default_config->status, TrialStatus::ok);
}

TEST_F(Tuner, SlowCompileIsStoppedAtTheLimitAndTheSweepGoesOn) {
  SweepOptions o = options("softmax", "m=7,n=1001");
  const Op& op = get_op(o.op);
  Problem problem = op.parse_problem(o.shape);
  DeviceInfo generic = query_device(0);
  std::string def = op.params_key(op.default_params(problem, o.dtype, generic));
  // With budget 3 the exhaustive strategy evaluates the default, then the first two other points.
  std::vector<std::string> others;
  for (const Params& p : Space(op, problem, o.dtype, generic).valid_points())
    if (op.params_key(p) != def && others.size() < 2) others.push_back(op.params_key(p));
  ASSERT_EQ(others.size(), 2u);
  o.planted[others[0]] = {slow_to_compile(), "planted_slow"};
  o.compile_timeout_s = 10.0;
  o.budget = 3;
  auto t0 = std::chrono::steady_clock::now();
  SweepResult r = run_sweep(o);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, TrialStatus> status = by_key(r);
  EXPECT_EQ(status[others[0]], TrialStatus::compile_timeout);
  EXPECT_EQ(status[others[1]], TrialStatus::ok) << "the sweep went on after the timeout";
  ASSERT_TRUE(r.default_config.has_value());
  EXPECT_EQ(r.default_config->status, TrialStatus::ok);
  for (const TrialOutcome& t : r.trials) {
    if (t.params_key == others[0]) {
      EXPECT_NE(t.detail.find("within 10 s"), std::string::npos) << t.detail;
    }
  }
  EXPECT_LT(seconds, 10.0 + 60.0) << "stopped at the limit, not later";
  EXPECT_TRUE(::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) << "a child was left behind";
  Store store = Store::open(o.db_path, Store::Mode::read_only);
  bool recorded = false;
  for (const TrialRecord& t :
       store.trials(r.device.key(), o.op, o.dtype, r.problem_key, op.template_hash()).rows)
    if (t.params_key == others[0]) recorded = t.status == TrialStatus::compile_timeout;
  EXPECT_TRUE(recorded);
}

TEST_F(Tuner, VerificationKernelsCompileUnderTheSameLimit) {
  SweepOptions o = options("softmax", "m=7,n=1001");
  o.disk_cache = false;       // every kernel is compiled, none comes from the cache
  o.compile_timeout_s = 0.01;  // far too short for any compile
  try {
    run_sweep(o);
    FAIL() << "the sweep ran without its reference kernels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not compile in time"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("compile time limit"), std::string::npos) << e.what();
  }
}

TEST_F(Tuner, TimeLimitStopsEarlyAndTheNextRunResumes) {
  SweepOptions o = options("softmax", "m=64,n=1024");
  o.time_limit_s = 1e-3;  // only the default (always measured) fits
  SweepResult first = run_sweep(o);
  EXPECT_GT(first.not_measured, 0u);
  EXPECT_EQ(first.counts[TrialStatus::ok], 1u);
  o.time_limit_s = 0;
  SweepResult second = run_sweep(o);
  EXPECT_EQ(second.not_measured, 0u);
  std::size_t resumed = 0, fresh = 0;
  for (const TrialOutcome& t : second.trials) {
    if (t.status == TrialStatus::invalid) continue;
    (t.resumed ? resumed : fresh) += 1;
  }
  EXPECT_EQ(resumed, 1u) << "the default measured by the first run";
  EXPECT_EQ(fresh, second.valid_count - 1);
}

// A run that measures less than an earlier one (here a budget of one and nothing resumed: the
// default only) re-times the database's best beside its own and keeps whichever is faster in
// that phase: before 2026-12-02 it stored its own best unconditionally, replacing a faster
// earlier row.
TEST_F(Tuner, AShorterRunKeepsAFasterStoredBest) {
  SweepOptions o = options("softmax", "m=64,n=1024");
  const SweepResult full = run_sweep(o);
  ASSERT_TRUE(full.best && full.default_config);
  const Op& op = get_op(o.op);
  // The earlier best, made a point other than the default (the fastest such) so that the short
  // run cannot propose it.
  const TrialOutcome* other = nullptr;
  for (const TrialOutcome& t : full.trials)
    if (t.status == TrialStatus::ok && t.params_key != full.default_config->params_key &&
        (!other || t.median_us < other->median_us))
      other = &t;
  ASSERT_NE(other, nullptr);
  {
    Store store = Store::open(o.db_path, Store::Mode::read_write);
    BestRecord b;
    b.device_key = full.device.key();
    b.op = o.op;
    b.dtype = o.dtype;
    b.problem_key = full.problem_key;
    b.params_key = other->params_key;
    b.template_hash = op.template_hash();
    b.median_us = other->median_us;
    store.set_best(b);
  }
  o.budget = 1;
  o.force = true;  // measured again, not resumed: the short run holds the default alone
  const SweepResult short_run = run_sweep(o);
  ASSERT_TRUE(short_run.best && short_run.default_config && short_run.stored_best);
  EXPECT_EQ(short_run.stored_best->params_key, other->params_key);
  // Both re-timed in one phase; the faster is the best and the row.
  const double fastest =
      std::min(short_run.stored_best->median_us, short_run.default_config->median_us);
  EXPECT_EQ(short_run.best->median_us, fastest);
  Store store = Store::open(o.db_path, Store::Mode::read_only);
  const std::optional<BestRecord> row = store.best(full.device.key(), o.op, o.dtype,
                                                   full.problem_key, op.template_hash());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->params_key, short_run.best->params_key);
}

TEST_F(Tuner, EveryFusedOpTunesOnOddAndEvenShapes) {
  const char* cases[][2] = {
      {"add_rmsnorm", "m=257,n=4095"}, {"layernorm", "m=129,n=1000,residual=yes"},
      {"layernorm", "m=64,n=4096"},    {"bias_act", "m=31,n=3001,act=gelu_erf"},
      {"bias_act", "m=64,n=2048,act=relu"}, {"swiglu", "m=17,n=1377"}, {"softmax", "m=100,n=32769"},
  };
  for (const auto& c : cases) {
    for (DType t : {DType::bf16, DType::f16}) {
      SweepOptions o = options(c[0], c[1]);
      o.dtype = t;
      o.strategy = "random";
      o.budget = 6;
      o.seed = 3;
      SweepResult r = run_sweep(o);
      ASSERT_TRUE(r.best.has_value()) << c[0] << " " << c[1] << " " << dtype_name(t);
      for (const TrialOutcome& x : r.trials)
        EXPECT_TRUE(x.status == TrialStatus::ok || x.status == TrialStatus::invalid)
            << c[0] << " " << c[1] << " " << dtype_name(t) << " " << x.params_key << ": "
            << status_name(x.status) << " " << x.detail;
    }
  }
}

// A model sweep stores the points it measured, not the space's invalid points it never proposed
// (they were ~97 % of a plan's database), and so does a random one of a few points; an
// exhaustive one still records each with its reason.
TEST_F(Tuner, ModelSweepRecordsOnlyWhatItProposed) {
  SweepOptions o = options("add_rmsnorm", "m=96,n=2048");
  o.strategy = "model";
  o.budget = 8;
  SweepResult model = run_sweep(o);
  ASSERT_TRUE(model.best.has_value());
  EXPECT_EQ(model.counts[TrialStatus::invalid], 0u);
  EXPECT_LE(model.trials.size(), 8u + 1u) << "the budget and the default";
  Store store = Store::open(o.db_path, Store::Mode::read_only);
  const Rows<TrialRecord> stored = store.all_trials("add_rmsnorm");
  EXPECT_EQ(stored.rows.size(), model.trials.size());
  o.strategy = "exhaustive";
  o.budget = 0;
  o.db_path = dir.path() / "exhaustive.db";
  SweepResult all = run_sweep(o);
  EXPECT_GT(all.space_size, all.valid_count);
  EXPECT_GE(all.counts[TrialStatus::invalid], all.space_size - all.valid_count);
  // An exhaustive or random sweep of a few points likewise; without a budget they walk the
  // whole space.
  for (const char* strategy : {"exhaustive", "random"}) {
    o.strategy = strategy;
    o.budget = 3;
    o.db_path = dir.path() / (std::string(strategy) + "-few.db");
    SweepResult few = run_sweep(o);
    EXPECT_EQ(few.counts[TrialStatus::invalid], 0u) << strategy;
    EXPECT_LE(few.trials.size(), 3u + 1u) << strategy;
  }
  o.budget = 0;
  o.db_path = dir.path() / "random-all.db";
  SweepResult every = run_sweep(o);
  EXPECT_GE(every.counts[TrialStatus::invalid], every.space_size - every.valid_count);
}

// ktune sweep --params: the given points (items over the default) are verified and measured
// beside the default whatever the budget, re-timed with it, and nothing else runs without a
// strategy; one invalid for the problem is reported with its reason; with a strategy the search
// follows them.
TEST_F(Tuner, GivenPointsAreMeasuredBesideTheDefault) {
  // n = 1002: vec=4 and vec=8 do not divide a row (invalid), vec=2 and 1 do.
  SweepOptions o = options("add_rmsnorm", "m=96,n=1002");
  o.params = {"vec=1", "vec=4", "vec=1", "threads=64,vec=2"};
  o.budget = 1;  // the given points are measured anyway
  SweepResult r = run_sweep(o);
  EXPECT_EQ(r.strategy, "given");
  const Op& op = get_op("add_rmsnorm");
  const Params def = op.default_params(op.parse_problem("m=96,n=1002"), DType::bf16, r.device);
  ASSERT_EQ(r.given.size(), 4u);  // one for each text, in order
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(r.given[i].params_key, op.params_key(parse_params_over(op, o.params[i], def))) << i;
  EXPECT_EQ(r.given[0].status, TrialStatus::ok);
  EXPECT_EQ(r.given[1].status, TrialStatus::invalid);
  EXPECT_EQ(r.given[1].detail, "n=1002 is not a multiple of vec=4");
  EXPECT_EQ(r.given[2].status, TrialStatus::ok);
  EXPECT_EQ(r.given[2].median_us, r.given[0].median_us);  // measured once
  EXPECT_EQ(r.given[3].status, TrialStatus::ok);
  ASSERT_TRUE(r.default_config.has_value());
  std::set<std::string> measured;
  for (const TrialOutcome& t : r.trials) measured.insert(t.params_key);
  EXPECT_EQ(measured, (std::set<std::string>{r.default_config->params_key, r.given[0].params_key,
                                             r.given[3].params_key}));
  // With a strategy, its search follows the given points.
  o.strategy = "random";
  o.budget = 6;
  o.db_path = dir.path() / "searched.db";
  SweepResult searched = run_sweep(o);
  EXPECT_EQ(searched.given.size(), 4u);
  EXPECT_GT(searched.trials.size(), 3u);
}

// MoE through the tuner: every routing mode's inputs are filled as the op declares (scaled
// weights, int32 ids distinct per token for precomputed routing), int outputs (ids, counts)
// compared exactly, and the staged strategy walks each token bucket into its own best row.
TEST_F(Tuner, MoeBucketsTuneEveryRoutingMode) {
  const char* shapes[] = {"e=8,k=2,h=136,i=200,routing=softmax_renorm",
                          "e=8,k=2,h=136,i=200,routing=softmax",
                          "e=64,k=8,h=256,i=136,routing=sigmoid_group,n_group=8,topk_group=4",
                          "e=8,k=2,h=136,i=200,routing=precomputed"};
  for (const char* shape : shapes) {
    for (DType t : {DType::bf16, DType::f16}) {
      SweepOptions o = options("moe", shape);
      o.dtype = t;
      o.buckets = {1, 17, 300};
      o.budget = 8;
      std::vector<SweepResult> rs = run_sweeps(o);
      ASSERT_EQ(rs.size(), 3u);
      for (const SweepResult& r : rs) {
        EXPECT_EQ(r.strategy, "staged");
        ASSERT_TRUE(r.best.has_value()) << shape << " " << r.problem_key;
        for (const TrialOutcome& x : r.trials)
          EXPECT_TRUE(x.status == TrialStatus::ok)
              << shape << " " << dtype_name(t) << " " << r.problem_key << " " << x.params_key
              << ": " << status_name(x.status) << " " << x.detail;
      }
    }
  }
  // One best row per bucket, each under its own problem key.
  Store store = Store::open(dir.path() / "tune.db", Store::Mode::read_only);
  std::set<std::string> keys;
  for (const BestRecord& b : store.all_bests("moe").rows) keys.insert(b.problem_key);
  EXPECT_EQ(keys.size(), 4u * 3u);
}

// The worker's timing runs each batch behind a QueueHold: events around tiny work enqueued 2 ms
// apart measure the host's 2 ms without it, the work's microseconds with it.
class QueueHoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    KTUNE_CU(cu().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    events_.resize(kItems + 1);
    for (CUevent& e : events_) KTUNE_CU(cu().cuEventCreate(&e, CU_EVENT_DEFAULT));
  }
  void TearDown() override {
    for (CUevent e : events_)
      if (e) cu().cuEventDestroy(e);
    if (stream_) cu().cuStreamDestroy(stream_);
  }
  static const Driver& cu() { return Driver::get(); }

  // Median microseconds between consecutive events around kItems 4-byte memsets, the host
  // sleeping 2 ms after enqueuing each.
  double median_gap_us(QueueHold* hold) {
    DeviceBuffer buf(16);
    if (hold) hold->hold(stream_);
    for (int i = 0; i < kItems; ++i) {
      KTUNE_CU(cu().cuEventRecord(events_[static_cast<std::size_t>(i)], stream_));
      KTUNE_CU(cu().cuMemsetD32Async(buf.get(), static_cast<unsigned>(i), 4, stream_));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    KTUNE_CU(cu().cuEventRecord(events_.back(), stream_));
    if (hold) hold->release();
    KTUNE_CU(cu().cuEventSynchronize(events_.back()));
    std::vector<double> gaps;
    for (int i = 0; i < kItems; ++i) {
      float ms = 0;
      KTUNE_CU(cu().cuEventElapsedTime(&ms, events_[static_cast<std::size_t>(i)],
                                       events_[static_cast<std::size_t>(i) + 1]));
      gaps.push_back(ms * 1e3);
    }
    std::sort(gaps.begin(), gaps.end());
    return gaps[gaps.size() / 2];
  }

  static constexpr int kItems = 10;
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
};

TEST_F(QueueHoldTest, ABatchRunsBackToBackWhateverTheHostLaunchRate) {
  EXPECT_GT(median_gap_us(nullptr), 1000.0) << "without a hold the GPU waits for the host";
  QueueHold hold;
  const double held = median_gap_us(&hold);
  EXPECT_FALSE(hold.timed_out());
  EXPECT_LT(held, 200.0) << "the batch ran at the host's rate behind the hold";
  // A second batch behind the same hold (the next sequence number).
  EXPECT_LT(median_gap_us(&hold), 200.0);
  EXPECT_FALSE(hold.timed_out());
}

TEST_F(QueueHoldTest, AHoldNeverReleasedEndsAtItsLimit) {
  QueueHold hold;
  const auto start = std::chrono::steady_clock::now();
  hold.hold(stream_, 20'000'000);  // 20 ms
  KTUNE_CU(cu().cuStreamSynchronize(stream_));
  const double waited_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(hold.timed_out());
  EXPECT_GE(waited_ms, 15.0);
  EXPECT_LT(waited_ms, 2000.0);
  // The next hold is released as usual.
  hold.hold(stream_);
  hold.release();
  KTUNE_CU(cu().cuStreamSynchronize(stream_));
  EXPECT_FALSE(hold.timed_out());
}

}  // namespace
}  // namespace ktune
