// One database, several threads of one process each with its own Store, as `ktune sweep
// --devices` runs one sweep per GPU in one process: every trial, sweep and best row lands, none
// twice, and the file stays intact (RELIABILITY.md row 9 within a process; db_concurrency_test
// covers separate processes).
#include <atomic>
#include <map>
#include <thread>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

constexpr int kProblems = 5;  // problem keys shared by every writer

double median_of(int writer, int i) { return 1.0 + static_cast<double>((writer * 7919 + i * 104729) % 1000) / 10.0; }

TrialStatus status_of(int i) {
  if (i % 11 == 5) return TrialStatus::wrong_result;  // fast but wrong: never a best
  if (i % 7 == 3) return TrialStatus::compile_error;
  return TrialStatus::ok;
}

TEST(DbThreads, WritersInOneProcessLoseNothing) {
  ScratchDir dir;
  const fs::path p = dir / "shared.db";
  constexpr int kWriters = 4;
  const int counts[kWriters] = {60, 90, 45, 75};  // uneven: writers close while others write
  std::atomic<int> finished{0};
  std::vector<std::string> errors(kWriters + 1);

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      try {
        Store s = Store::open(p, Mode::read_write);
        s.upsert_device(test_device());
        const std::int64_t sweep_id = s.begin_sweep(test_sweep("writer " + std::to_string(w)));
        for (int i = 0; i < counts[w]; ++i) {
          TrialRecord t = make_trial("n=" + std::to_string(i % kProblems),
                                     "w" + std::to_string(w) + "-" + std::to_string(i),
                                     median_of(w, i), status_of(i));
          if (t.status == TrialStatus::wrong_result) t.median_us = 0.01;
          if (t.status == TrialStatus::compile_error) t.median_us = 0;
          t.sweep_id = sweep_id;
          t.device_ordinal = w;
          t.pci_bus_id = "0000:0" + std::to_string(w) + ":00.0";
          s.record_trial(t);
          // A key of its own, set explicitly as a sweep does after re-timing its leaders.
          if (i % 10 == 9) {
            BestRecord b;
            b.device_key = test_device().key();
            b.op = "own";
            b.problem_key = "w=" + std::to_string(w);
            b.params_key = "i=" + std::to_string(i);
            b.template_hash = "h1";
            b.median_us = static_cast<double>(i);
            s.set_best(b);
          }
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
      ++finished;
    });
  // A reader looking up while they write, until the first writer is done (so that the last
  // writer to close finds no other connection and returns the file to rollback-journal mode).
  std::thread reader([&] {
    std::size_t lookups = 0;
    while (finished == 0) {
      try {
        if (file_exists(p)) {
          Store r = Store::open(p, Mode::read_only);
          r.bests("rmsnorm", DType::bf16);
          r.all_trials();
          ++lookups;
        }
      } catch (const DatabaseError& e) {
        // The file may be there but still empty when the reader first finds it.
        if (std::string(e.what()).find("empty") == std::string::npos) {
          errors[kWriters] = e.what();
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (lookups == 0) errors[kWriters] = "the reader never looked up";
  });
  for (std::thread& t : threads) t.join();
  reader.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");

  Store s = Store::open(p, Mode::read_only);
  EXPECT_EQ(s.integrity_check(), "ok");
  const CheckReport report = s.check();
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(s.sweeps().rows.size(), static_cast<std::size_t>(kWriters));
  const Rows<TrialRecord> trials = s.all_trials();
  EXPECT_TRUE(trials.skipped.empty());
  std::map<std::string, TrialRecord> by_params;
  for (const TrialRecord& t : trials.rows)
    EXPECT_TRUE(by_params.emplace(t.params_key, t).second) << "twice: " << t.params_key;
  std::map<std::string, double> fastest;  // per problem, over ok trials
  for (int w = 0; w < kWriters; ++w)
    for (int i = 0; i < counts[w]; ++i) {
      const std::string key = "w" + std::to_string(w) + "-" + std::to_string(i);
      const auto it = by_params.find(key);
      ASSERT_NE(it, by_params.end()) << "lost: " << key;
      const TrialRecord& t = it->second;
      EXPECT_EQ(t.device_ordinal, w) << key;
      EXPECT_EQ(t.pci_bus_id, "0000:0" + std::to_string(w) + ":00.0") << key;
      EXPECT_EQ(t.status, status_of(i)) << key;
      EXPECT_EQ(t.problem_key, "n=" + std::to_string(i % kProblems)) << key;
      if (t.status != TrialStatus::ok) continue;
      EXPECT_EQ(t.median_us, median_of(w, i)) << key;
      double& f = fastest.try_emplace(t.problem_key, t.median_us).first->second;
      f = std::min(f, t.median_us);
    }
  EXPECT_EQ(by_params.size(), static_cast<std::size_t>(60 + 90 + 45 + 75));
  for (const auto& [problem, us] : fastest) {
    const auto best = s.best(test_device().key(), "rmsnorm", DType::bf16, problem, "h1");
    ASSERT_TRUE(best) << problem;
    EXPECT_EQ(best->median_us, us) << problem;
    EXPECT_EQ(by_params.at(best->params_key).status, TrialStatus::ok) << problem;
  }
  for (int w = 0; w < kWriters; ++w) {
    const auto own = s.best(test_device().key(), "own", DType::bf16, "w=" + std::to_string(w), "h1");
    ASSERT_TRUE(own) << w;
    const int last = (counts[w] - 1) / 10 * 10 + 9;
    EXPECT_EQ(own->params_key, "i=" + std::to_string(last < counts[w] ? last : last - 10)) << w;
  }
  // The last writer to close returned the file to rollback-journal mode.
  EXPECT_EQ(header_journal_mode(p), 1);
  EXPECT_FALSE(file_exists(sibling(p, "-wal")));
}

}  // namespace
}  // namespace ktune::test
