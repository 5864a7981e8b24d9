// Several writer processes on one file while a reader looks up, and kill -9 at random moments
// (RELIABILITY.md rows 8 and 9). The writers are tests/db_writer.cpp.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "db/store.hpp"
#include "db_test_support.hpp"

extern char** environ;

namespace ktune::test {
namespace {

constexpr int kProblems = 5;  // as in db_writer.cpp

/// Starts db_writer; with `progress_fd`, its stdout (a line per committed trial) goes to a pipe
/// whose read end is returned there. Returns the pid, or -1.
pid_t spawn_writer(const fs::path& db, int writer, int count, int* progress_fd = nullptr) {
  const std::string exe = KTUNE_DB_WRITER;
  std::vector<std::string> args = {exe, db.string(), std::to_string(writer), std::to_string(count)};
  if (progress_fd != nullptr) args.push_back("--progress");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (progress_fd != nullptr) {
    if (pipe(fds) != 0) return -1;
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (progress_fd != nullptr) {
    close(fds[1]);
    if (rc != 0) close(fds[0]);
    *progress_fd = rc == 0 ? fds[0] : -1;
  }
  return rc == 0 ? pid : -1;
}

/// Reads progress lines until `lines` have arrived or the writer closed its end; the count read.
int await_progress(int fd, int lines) {
  int seen = 0;
  char c = 0;
  while (seen < lines && read(fd, &c, 1) == 1)
    if (c == '\n') ++seen;
  return seen;
}

/// Checks what every db_writer run must leave behind; returns the trial count per writer.
std::map<int, std::set<int>> check_writer_rows(const fs::path& p) {
  std::map<int, std::set<int>> seen;
  Store s = Store::open(p, Mode::read_only);
  EXPECT_EQ(s.integrity_check(), "ok");
  std::map<std::string, double> fastest;  // problem -> min median of ok trials
  for (const TrialRecord& t : s.all_trials().rows) {
    int writer = -1, i = -1;
    char tail = 0;
    if (std::sscanf(t.params_key.c_str(), "w%d-%d%c", &writer, &i, &tail) != 2) {
      ADD_FAILURE() << "malformed params_key " << t.params_key;
      continue;
    }
    EXPECT_TRUE(seen[writer].insert(i).second) << "duplicate trial " << t.params_key;
    // Every column of the row is the writer's, none half-written.
    EXPECT_EQ(t.detail, "writer " + std::to_string(writer) + " trial " + std::to_string(i));
    EXPECT_EQ(t.problem_key, "n=" + std::to_string(i % kProblems));
    EXPECT_EQ(t.template_hash, "h1");
    EXPECT_EQ(t.nvrtc_version, 13000);
    EXPECT_GT(t.sweep_id, 0);
    const TrialStatus expected = i % 7 == 3   ? TrialStatus::compile_error
                                 : i % 3 == 1 ? TrialStatus::wrong_result
                                              : TrialStatus::ok;
    EXPECT_EQ(t.status, expected) << t.params_key;
    if (t.status == TrialStatus::ok) {
      EXPECT_EQ(t.repetitions, 10);
      EXPECT_DOUBLE_EQ(t.min_us, t.median_us * 0.9);
      auto [it, fresh] = fastest.emplace(t.problem_key, t.median_us);
      if (!fresh) it->second = std::min(it->second, t.median_us);
    }
  }
  // Exactly one best per key, and it is the fastest ok trial.
  const auto bests = s.all_bests().rows;
  EXPECT_EQ(bests.size(), fastest.size());
  for (const BestRecord& b : bests) {
    EXPECT_EQ(b.median_us, fastest[b.problem_key]) << b.problem_key;
    const auto trials = s.trials(b.device_key, b.op, b.dtype, b.problem_key, b.template_hash).rows;
    const auto winner = std::find_if(trials.begin(), trials.end(),
                                     [&](const TrialRecord& t) { return t.id == b.trial_id; });
    if (winner == trials.end()) {
      ADD_FAILURE() << "best of " << b.problem_key << " names trial " << b.trial_id
                    << ", which is not among its trials";
      continue;
    }
    EXPECT_EQ(winner->params_key, b.params_key);
    EXPECT_EQ(winner->median_us, b.median_us);
    EXPECT_EQ(winner->status, TrialStatus::ok);
  }
  return seen;
}

TEST(DbConcurrency, WritersShareOneFileWhileAReaderLooksUp) {
  ScratchDir dir;
  const fs::path p = dir / "shared.db";  // created by whichever writer comes first
  constexpr int kWriters = 4, kCount = 200;
  std::map<pid_t, int> running;
  for (int w = 1; w <= kWriters; ++w) {
    const pid_t pid = spawn_writer(p, w, kCount);
    ASSERT_GT(pid, 0) << "cannot start " << KTUNE_DB_WRITER;
    running[pid] = w;
  }

  std::optional<Store> reader;
  std::map<std::string, double> last;  // a best never gets slower
  int lookups = 0;
  std::map<int, int> exit_codes;
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (waitpid(it->first, &status, WNOHANG) == it->first) {
        exit_codes[it->second] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (!reader) {
      try {
        reader.emplace(Store::open(p, Mode::read_only));
      } catch (const DatabaseError&) {
        // Not created yet, or still empty: a writer is creating it.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
    }
    for (int k = 0; k < kProblems; ++k) {
      const std::string problem = "n=" + std::to_string(k);
      auto b = reader->best(test_device().key(), "rmsnorm", DType::bf16, problem, "h1");
      ++lookups;
      if (!b) continue;
      auto [it, fresh] = last.emplace(problem, b->median_us);
      EXPECT_LE(b->median_us, it->second) << problem;
      it->second = b->median_us;
    }
  }
  for (int w = 1; w <= kWriters; ++w) EXPECT_EQ(exit_codes[w], 0) << "writer " << w;
  EXPECT_GT(lookups, 0);
  reader.reset();

  const auto seen = check_writer_rows(p);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kWriters));
  for (const auto& [writer, trials] : seen)
    EXPECT_EQ(trials.size(), static_cast<std::size_t>(kCount));
  Store s = Store::open(p, Mode::read_write);
  EXPECT_EQ(s.all_trials().rows.size(), static_cast<std::size_t>(kWriters * kCount));
  EXPECT_EQ(s.all_bests().rows.size(), static_cast<std::size_t>(kProblems));
  EXPECT_EQ(s.sweeps().rows.size(), static_cast<std::size_t>(kWriters));
  EXPECT_EQ(s.devices().rows.size(), 1u);
  EXPECT_EQ(s.integrity_check(), "ok");
}

TEST(DbConcurrency, KillNineThenResume) {
  ScratchDir dir;
  const fs::path p = dir / "killed.db";
  constexpr int kCount = 300, kWriter = 7;
  std::mt19937 rng(424242);
  // Each round lets the writer commit a random number of trials, then kills it at a random moment
  // up to 2 ms later: between commits, inside a transaction, or in the middle of a WAL write.
  std::uniform_int_distribution<int> trials_before_kill(0, 30);
  std::uniform_int_distribution<int> extra_us(0, 2000);
  int killed_mid_run = 0, read_after_kill = 0;
  std::size_t progress = 0;
  for (int round = 0; round < 8; ++round) {
    int progress_fd = -1;
    const pid_t pid = spawn_writer(p, kWriter, kCount, &progress_fd);
    ASSERT_GT(pid, 0) << "cannot start " << KTUNE_DB_WRITER;
    await_progress(progress_fd, trials_before_kill(rng));
    std::this_thread::sleep_for(std::chrono::microseconds(extra_us(rng)));
    kill(pid, SIGKILL);
    close(progress_fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!file_exists(p)) continue;  // killed before it created the file
    // A reader that comes first (db list after a crashed sweep) reads what was committed, or
    // says why not, and creates or removes nothing.
    const std::set<std::string> names = listing(dir.path());
    try {
      Store r = Store::open(p, Mode::read_only);
      if (r.all_trials().skipped.empty()) ++read_after_kill;
    } catch (const DatabaseError&) {
      // killed while creating the file: nothing committed yet
    }
    EXPECT_EQ(listing(dir.path()), names) << "a reader after kill -9 changed the directory";
    // What the next tuner does first: open read-write (recovering the log) and check.
    EXPECT_EQ(Store::open(p, Mode::read_write).integrity_check(), "ok");
    // Whatever the moment of the kill, the file is sound and holds only whole trials.
    const auto seen = check_writer_rows(p);
    if (seen.empty()) continue;
    // One commit per trial, in order: what is there is a prefix of the writer's trials.
    const std::set<int>& trials = seen.at(kWriter);
    EXPECT_EQ(*trials.rbegin() + 1, static_cast<int>(trials.size()));
    if (WIFSIGNALED(status) && trials.size() > progress && trials.size() < kCount) ++killed_mid_run;
    progress = trials.size();
  }
  EXPECT_GE(killed_mid_run, 4) << "too few rounds were killed while writing";
  EXPECT_GE(read_after_kill, 4) << "readers after kill -9 failed";

  // The resumed run skips what is there and finishes; the result is that of an undisturbed run.
  const pid_t pid = spawn_writer(p, kWriter, kCount);
  ASSERT_GT(pid, 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto seen = check_writer_rows(p);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.at(kWriter).size(), static_cast<std::size_t>(kCount));

  const fs::path clean = dir / "clean.db";
  const pid_t once = spawn_writer(clean, kWriter, kCount);
  ASSERT_GT(once, 0);
  waitpid(once, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  Store resumed = Store::open(p, Mode::read_only);
  Store undisturbed = Store::open(clean, Mode::read_only);
  const auto a = resumed.all_bests().rows;
  const auto b = undisturbed.all_bests().rows;
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].problem_key, b[i].problem_key);
    EXPECT_EQ(a[i].params_key, b[i].params_key);
    EXPECT_EQ(a[i].median_us, b[i].median_us);
  }
}

}  // namespace
}  // namespace ktune::test
