// Sweeps on several GPUs at once in one process, as `ktune sweep --devices` runs them: two
// run_sweeps calls at a time (each its own worker process and compile pool) into one database
// through one compile cache. On a host with one GPU both run on it (the scheduling, the shared
// database and cache are what is tested, not the speed). Skipped without a GPU.
#include "tuner/multi_sweep.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "db/store.hpp"
#include "runtime/core/device.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

TEST(MultiSweepGpu, TwoSweepsAtOnceShareOneDatabaseAndOneCache) {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  const int count = device_count();
  const DeviceInfo info = query_device(0);
  // Two slots; on a one-GPU host slot 1 sweeps on GPU 0 too.
  const std::vector<SweepDevice> slots = {{0, info.key(), info.name}, {1, info.key(), info.name}};
  const auto real = [&](int slot) { return count >= 2 ? slot : 0; };
  if (count >= 2) {
    ASSERT_EQ(query_device(1).key(), info.key()) << "GPUs 0 and 1 differ";
  }

  struct Problem {
    std::string op, shape;
  };
  const std::vector<Problem> problems = {
      {"add_rmsnorm", "m=64,n=4096"}, {"add_rmsnorm", "m=96,n=2048"}, {"softmax", "m=256,n=1024"},
      {"softmax", "m=33,n=3001"},     {"swiglu", "m=16,n=4096"},      {"layernorm", "m=64,n=1024"}};
  std::vector<DeviceJob> jobs;
  for (const Problem& p : problems) jobs.push_back({info.key(), p.op + " " + p.shape});

  // Both slots start a job before either runs one, so that the sweeps overlap.
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> started;
  std::map<int, int> swept_by;  // slot -> jobs
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    {
      std::unique_lock<std::mutex> lock(mu);
      started.insert(d.ordinal);
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return started.size() == 2; });
      ++swept_by[d.ordinal];
    }
    SweepOptions o;
    o.op = problems[job].op;
    o.shape = problems[job].shape;
    o.budget = 8;
    o.jobs = 4;
    o.device = real(d.ordinal);
    o.db_path = dir.path() / "shared.db";
    o.cache_dir = dir.path() / "cache";
    o.worker_command = {test::cli_path(), "__worker"};
    o.compile_command = {test::cli_path(), "__compile"};
    o.candidate_timeout_s = 10.0;
    return run_sweeps(o);
  };
  const std::vector<DeviceJobOutcome> out = sweep_on_devices(jobs, slots, sweep);

  std::size_t measured = 0;
  std::map<std::string, int> ordinal_of;  // problem -> the GPU that swept it
  for (std::size_t j = 0; j < out.size(); ++j) {
    ASSERT_TRUE(out[j].swept()) << jobs[j].label << ": " << (out[j].errors.empty() ? "" : out[j].errors[0]);
    ASSERT_EQ(out[j].results.size(), 1u);
    const SweepResult& r = out[j].results[0];
    EXPECT_TRUE(r.best) << jobs[j].label;
    for (const TrialOutcome& t : r.trials) measured += !t.resumed;
    ordinal_of[r.op + " " + r.problem_key] = real(out[j].device);
  }
  EXPECT_EQ(swept_by.size(), 2u) << "both slots swept";

  Store store = Store::open(dir.path() / "shared.db", Store::Mode::read_only);
  const CheckReport report = store.check();
  EXPECT_TRUE(report.ok()) << report.integrity;
  EXPECT_EQ(store.sweeps().rows.size(), problems.size());
  const Rows<TrialRecord> trials = store.all_trials();
  EXPECT_EQ(trials.rows.size(), measured) << "every trial of both sweeps is recorded once";
  for (const TrialRecord& t : trials.rows) {
    EXPECT_EQ(t.device_ordinal, ordinal_of.at(t.op + " " + t.problem_key)) << t.params_key;
    EXPECT_FALSE(t.pci_bus_id.empty());
  }
  for (const DeviceJobOutcome& o : out) {
    const SweepResult& r = o.results[0];
    const auto best = store.best(info.key(), r.op, r.dtype, r.problem_key,
                                 get_op(r.op).template_hash());
    ASSERT_TRUE(best) << r.op << " " << r.problem_key;
    EXPECT_EQ(best->params_key, r.best->params_key);
  }
}

}  // namespace
}  // namespace ktune
