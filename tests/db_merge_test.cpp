// db/merge.cpp: merging databases (one best per key, ties to the later sweep, every sweep and
// trial once, idempotent, order-independent, bad inputs refused with OUT untouched) and diffing.
#include "db/merge.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "tests/support/test_env.hpp"

namespace ktune::test {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "expected '" << (part) << "' in: " << (text)

DeviceInfo gpu(const std::string& name, std::int64_t memory_gib) {
  DeviceInfo d = *device_for_arch("sm_90a");
  d.name = name;
  d.memory_bytes = memory_gib << 30;
  d.driver_version = 13000;
  d.nvrtc_version = 12090;
  return d;
}

const DeviceInfo kH100 = gpu("NVIDIA H100 80GB HBM3", 80);
const DeviceInfo kH200 = gpu("NVIDIA H200", 141);

struct SweepSpec {
  DeviceInfo device;
  std::string problem;
  std::string started_at;                              // written over the sweep's own time
  std::vector<std::pair<std::string, double>> trials;  // params, median (0: a failed trial)
};

void raw_run(const fs::path& db, const std::string& sql, const std::string& a, std::int64_t b) {
  db::Connection c(db, db::OpenMode::read_write_create);
  db::Statement s(c.get(), sql, db.string());
  s.bind_all(a, b);
  s.run();
}

// Builds a database through the Store's API, then pins every timestamp (sweeps to their spec,
// trials and best rows to their sweep's, devices to a constant) so that files built at different
// moments hold the same rows for the same specs.
fs::path build(const fs::path& db, const std::vector<SweepSpec>& sweeps) {
  std::vector<std::pair<std::int64_t, std::string>> times;
  {
    Store s = Store::open(db, Store::Mode::read_write);
    for (const SweepSpec& spec : sweeps) {
      s.upsert_device(spec.device);
      SweepRecord sw;
      sw.device_key = spec.device.key();
      sw.op = "add_rmsnorm";
      sw.problem_key = spec.problem;
      sw.strategy = "exhaustive";
      sw.command_line = "ktune sweep --shape " + spec.problem;
      const std::int64_t id = s.begin_sweep(sw);
      times.emplace_back(id, spec.started_at);
      for (const auto& [params, median] : spec.trials) {
        TrialRecord t;
        t.sweep_id = id;
        t.device_key = spec.device.key();
        t.op = "add_rmsnorm";
        t.problem_key = spec.problem;
        t.params_key = params;
        t.template_hash = "h1";
        t.median_us = median;
        t.status = median > 0 ? TrialStatus::ok : TrialStatus::compile_error;
        s.record_trial(t);
      }
    }
  }
  for (const auto& [id, at] : times) {
    raw_run(db, "UPDATE sweeps SET started_at = ?1 WHERE id = ?2", at, id);
    raw_run(db, "UPDATE trials SET created_at = ?1 WHERE sweep_id = ?2", at, id);
    raw_run(db,
            "UPDATE best SET updated_at = ?1 WHERE trial_id IN "
            "(SELECT id FROM trials WHERE sweep_id = ?2)",
            at, id);
  }
  raw_run(db, "UPDATE devices SET updated_at = ?1 WHERE ?2 = 0", "2026-01-01T00:00:00Z", 0);
  return db;
}

// The canonical dump of the best rows: what "order-independent" compares.
std::string bests(const fs::path& db) {
  Store s = Store::open(db, Store::Mode::read_only);
  std::ostringstream out;
  char median[64];
  for (const BestRecord& b : s.all_bests().rows) {
    std::snprintf(median, sizeof median, "%.17g", b.median_us);
    out << "best " << b.device_key << " " << b.op << " " << dtype_name(b.dtype) << " "
        << b.problem_key << " " << b.template_hash << " " << b.params_key << " " << median << " "
        << b.updated_at << " trial " << b.trial_id << "\n";
  }
  return out.str();
}

// Everything a merge writes, ids included, one line per row in the readers' order.
std::string dump(const fs::path& db) {
  Store s = Store::open(db, Store::Mode::read_only);
  std::ostringstream out;
  char median[64];
  for (const DeviceInfo& d : s.devices().rows)
    out << "device " << d.key() << " " << d.driver_version << "\n";
  for (const SweepRecord& w : s.sweeps().rows)
    out << "sweep " << w.id << " " << w.started_at << " " << w.device_key << " " << w.problem_key
        << "\n";
  for (const TrialRecord& t : s.all_trials().rows) {
    std::snprintf(median, sizeof median, "%.17g", t.median_us);
    out << "trial " << t.id << " sweep " << t.sweep_id << " " << t.device_key << " "
        << t.problem_key << " " << t.params_key << " " << status_name(t.status) << " " << median
        << " " << t.created_at << "\n";
  }
  return out.str() + bests(db);
}

std::string bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::optional<BestRecord> best_of(const fs::path& db, const DeviceInfo& d,
                                  const std::string& problem) {
  return Store::open(db, Store::Mode::read_only)
      .best(d.key(), "add_rmsnorm", DType::bf16, problem, "h1");
}

class DbMerge : public ::testing::Test {
 protected:
  TempDir dir;
  fs::path at(const char* name) const { return dir.path() / name; }

  // Two shards with overlapping keys on two GPUs. Shard A is faster on H100 m=64, B on H100
  // m=128; H100 m=256 ties at 7.0 (B's sweep is later); H200 m=64 only A, H200 m=128 only B.
  fs::path shard_a() {
    return build(at("a.db"), {
        {kH100, "m=64,n=4096", "2026-03-01T10:00:00Z", {{"threads=256", 10.0}, {"threads=128", 12.0}}},
        {kH100, "m=128,n=4096", "2026-03-01T10:05:00Z", {{"threads=256", 20.0}, {"threads=64", 0}}},
        {kH100, "m=256,n=4096", "2026-03-01T10:10:00Z", {{"threads=512", 7.0}}},
        {kH200, "m=64,n=4096", "2026-03-01T11:00:00Z", {{"threads=128", 9.0}}},
    });
  }
  fs::path shard_b() {
    return build(at("b.db"), {
        {kH100, "m=64,n=4096", "2026-03-02T10:00:00Z", {{"threads=512", 11.0}}},
        {kH100, "m=128,n=4096", "2026-03-02T10:05:00Z", {{"threads=1024", 16.0}}},
        {kH100, "m=256,n=4096", "2026-03-02T10:10:00Z", {{"threads=1024", 7.0}}},
        {kH200, "m=128,n=4096", "2026-03-02T11:00:00Z", {{"threads=256", 14.0}}},
    });
  }
};

TEST_F(DbMerge, OneBestPerKeyTheFasterMedianTiesToTheLaterSweep) {
  const fs::path a = shard_a(), b = shard_b(), out = at("out.db");
  const MergeReport r = merge_databases(out, {a, b});
  EXPECT_FALSE(r.output_existed);
  EXPECT_EQ(r.devices, 2u);
  EXPECT_EQ(r.sweeps, 8u);
  EXPECT_EQ(r.trials, 10u);
  EXPECT_EQ(r.trials_added, 10u);
  EXPECT_EQ(r.bests, 5u);
  EXPECT_EQ(r.bests_changed, 5u);
  EXPECT_TRUE(r.skipped.empty());

  EXPECT_EQ(best_of(out, kH100, "m=64,n=4096")->params_key, "threads=256");
  EXPECT_EQ(best_of(out, kH100, "m=128,n=4096")->params_key, "threads=1024");
  EXPECT_EQ(best_of(out, kH100, "m=256,n=4096")->params_key, "threads=1024");  // the tie
  EXPECT_EQ(best_of(out, kH200, "m=64,n=4096")->params_key, "threads=128");
  EXPECT_EQ(best_of(out, kH200, "m=128,n=4096")->params_key, "threads=256");
  const std::optional<BestRecord> tie = best_of(out, kH100, "m=256,n=4096");
  EXPECT_EQ(tie->updated_at, "2026-03-02T10:10:00Z");
  EXPECT_EQ(tie->device_name, kH100.name);

  // Every best names a trial of the output with its params and median.
  Store s = Store::open(out, Store::Mode::read_only);
  for (const BestRecord& best : s.all_bests().rows) {
    bool found = false;
    for (const TrialRecord& t : s.all_trials().rows)
      found = found || (t.id == best.trial_id && t.params_key == best.params_key &&
                        t.median_us == best.median_us && t.problem_key == best.problem_key);
    EXPECT_TRUE(found) << best.problem_key;
  }
  EXPECT_TRUE(s.check().ok());
}

TEST_F(DbMerge, TheLaterSweepWinsATieWhicheverFileItIsIn) {
  const fs::path early = build(at("early.db"), {{kH100, "m=64,n=64", "2026-01-01T00:00:00Z", {{"threads=32", 5.0}}}});
  const fs::path late = build(at("late.db"), {{kH100, "m=64,n=64", "2026-01-01T00:00:01Z", {{"threads=64", 5.0}}}});
  merge_databases(at("x.db"), {early, late});
  merge_databases(at("y.db"), {late, early});
  EXPECT_EQ(best_of(at("x.db"), kH100, "m=64,n=64")->params_key, "threads=64");
  EXPECT_EQ(best_of(at("y.db"), kH100, "m=64,n=64")->params_key, "threads=64");
}

TEST_F(DbMerge, MergingTwiceAddsNothing) {
  const fs::path a = shard_a(), out = at("out.db");
  merge_databases(out, {a});
  const std::string once = dump(out);
  const std::string file_once = bytes(out);
  const MergeReport again = merge_databases(out, {a});
  EXPECT_TRUE(again.output_existed);
  EXPECT_EQ(again.trials_added, 0u);
  EXPECT_EQ(again.bests_changed, 0u);
  EXPECT_EQ(dump(out), once);
  EXPECT_EQ(merge_databases(out, {a, a, out.parent_path() / "a.db"}).trials_added, 0u);
  EXPECT_EQ(dump(out), once);
  EXPECT_EQ(bytes(out).size(), file_once.size());
  // The merged file holds each trial of A once, and as many as A.
  EXPECT_EQ(Store::open(out, Store::Mode::read_only).all_trials().rows.size(),
            Store::open(a, Store::Mode::read_only).all_trials().rows.size());
}

TEST_F(DbMerge, TheOrderOfTheInputsDoesNotMatter) {
  const fs::path a = shard_a(), b = shard_b();
  const fs::path c = build(at("c.db"), {
      {kH100, "m=64,n=4096", "2026-03-03T09:00:00Z", {{"threads=64", 10.0}}},  // ties A, later
      {kH200, "m=128,n=4096", "2026-03-03T09:00:00Z", {{"threads=32", 30.0}}},
  });
  merge_databases(at("ab.db"), {a, b});
  merge_databases(at("ab.db"), {c});
  merge_databases(at("cba.db"), {c, b, a});
  merge_databases(at("b_then_a_then_c.db"), {b});
  merge_databases(at("b_then_a_then_c.db"), {a});
  merge_databases(at("b_then_a_then_c.db"), {c});
  const std::string expected = bests(at("ab.db"));
  EXPECT_EQ(bests(at("cba.db")), expected);
  EXPECT_EQ(bests(at("b_then_a_then_c.db")), expected);
  // Not only the best rows: every row and id.
  EXPECT_EQ(dump(at("cba.db")), dump(at("ab.db")));
  EXPECT_EQ(dump(at("b_then_a_then_c.db")), dump(at("ab.db")));
  EXPECT_EQ(best_of(at("ab.db"), kH100, "m=64,n=4096")->params_key, "threads=64");
}

TEST_F(DbMerge, AnExistingOutputTakesPartLikeAnInput) {
  const fs::path a = shard_a();
  const fs::path out = build(at("out.db"), {
      {kH100, "m=64,n=4096", "2026-02-01T00:00:00Z", {{"threads=32", 3.0}}},  // beats A's 10.0
      {kH100, "m=1,n=8", "2026-02-01T00:00:00Z", {{"threads=32", 1.0}}},       // only here
  });
  const MergeReport r = merge_databases(out, {a});
  EXPECT_TRUE(r.output_existed);
  EXPECT_EQ(r.trials, 8u);
  EXPECT_EQ(r.trials_added, 6u);
  EXPECT_EQ(r.bests_changed, 3u);  // H100 m=128, m=256 and H200 m=64 are new
  EXPECT_EQ(best_of(out, kH100, "m=64,n=4096")->params_key, "threads=32");
  EXPECT_TRUE(best_of(out, kH100, "m=1,n=8"));
}

TEST_F(DbMerge, DevicesKeepTheRowUpdatedLast) {
  DeviceInfo newer = kH100;
  newer.driver_version = 13010;  // same key, a later driver
  const fs::path a = build(at("a.db"), {{kH100, "m=8,n=8", "2026-01-01T00:00:00Z", {{"threads=32", 1.0}}}});
  const fs::path b = build(at("b.db"), {{newer, "m=8,n=8", "2026-01-02T00:00:00Z", {{"threads=32", 1.0}}}});
  raw_run(b, "UPDATE devices SET updated_at = ?1 WHERE ?2 = 0", "2026-01-02T00:00:00Z", 0);
  for (const std::vector<fs::path>& order : {std::vector<fs::path>{a, b}, {b, a}}) {
    fs::remove(at("out.db"));
    merge_databases(at("out.db"), order);
    const Rows<DeviceInfo> devices = Store::open(at("out.db"), Store::Mode::read_only).devices();
    ASSERT_EQ(devices.rows.size(), 1u);
    EXPECT_EQ(devices.rows[0].driver_version, 13010);
  }
}

TEST_F(DbMerge, BadRowsAreSkippedAndReportedNotCopied) {
  const fs::path a = shard_a();
  {
    db::Connection c(a, db::OpenMode::read_write_create);
    c.exec("UPDATE best SET dtype = 'fp64' WHERE problem_key = 'm=256,n=4096'");
    c.exec("UPDATE trials SET median_us = -1 WHERE params_key = 'threads=64'");
  }
  const MergeReport r = merge_databases(at("out.db"), {a});
  ASSERT_EQ(r.skipped.size(), 2u);
  EXPECT_EQ(r.skipped[0].source, a);
  std::string reasons = r.skipped[0].issue.reason + " | " + r.skipped[1].issue.reason;
  EXPECT_HAS(reasons, "fp64");
  EXPECT_HAS(reasons, "median_us");
  EXPECT_EQ(r.bests, 3u);
  EXPECT_EQ(r.trials, 5u);
  EXPECT_TRUE(Store::open(at("out.db"), Store::Mode::read_only).check().ok());
}

// ---- bad input: one message naming the value and what is allowed; OUT untouched ----

class DbMergeRefuses : public DbMerge {
 protected:
  // Runs the merge, which must throw E; returns the message. OUT and the directory's listing
  // are as they were.
  template <class E>
  std::string refused(const fs::path& out, const std::vector<fs::path>& inputs) {
    const bool existed = fs::exists(out);
    const std::string before = existed ? bytes(out) : "";
    const std::set<std::string> listing = names_in(dir.path());
    std::string message;
    try {
      merge_databases(out, inputs);
      ADD_FAILURE() << "merge into " << out << " did not throw";
    } catch (const E& e) {
      message = e.what();
    }
    EXPECT_EQ(fs::exists(out), existed);
    if (existed) {
      EXPECT_EQ(bytes(out), before);
    }
    EXPECT_EQ(names_in(dir.path()), listing);
    return message;
  }
};

TEST_F(DbMergeRefuses, AnInputThatDoesNotExist) {
  const fs::path a = shard_a();
  const std::string m = refused<InvalidArgument>(at("out.db"), {a, at("missing.db")});
  EXPECT_HAS(m, "missing.db");
  EXPECT_HAS(m, "does not exist (expected an existing ktune database)");
}

TEST_F(DbMergeRefuses, AFileThatIsNotAKtuneDatabase) {
  const fs::path out = shard_b();
  {
    db::Connection c(at("other.db"), db::OpenMode::read_write_create);
    c.exec("PRAGMA application_id = 1234; CREATE TABLE t (x)");
  }
  std::string m = refused<DatabaseError>(out, {at("other.db")});
  EXPECT_HAS(m, "other.db");
  EXPECT_HAS(m, "not a ktune database");
  std::ofstream(at("notes.txt")) << "not a database at all, just some text that is long enough\n";
  m = refused<DatabaseError>(out, {at("notes.txt")});
  EXPECT_HAS(m, "notes.txt");
}

TEST_F(DbMergeRefuses, AnotherSchemaVersion) {
  const fs::path a = shard_a();
  db::Connection(a, db::OpenMode::read_write_create).exec("PRAGMA user_version = 4");
  const std::string m = refused<DatabaseError>(at("out.db"), {a});
  EXPECT_HAS(m, "a.db");
  EXPECT_HAS(m, "schema version 4 is newer than this ktune supports (3)");
}

TEST_F(DbMergeRefuses, TheOutputNamedAsAnInput) {
  const fs::path a = shard_a(), b = shard_b();
  std::string m = refused<InvalidArgument>(a, {b, a});
  EXPECT_HAS(m, "a.db");
  EXPECT_HAS(m, "is the output");
  fs::create_hard_link(a, at("a-link.db"));
  m = refused<InvalidArgument>(a, {at("a-link.db")});
  EXPECT_HAS(m, "a-link.db");
  EXPECT_HAS(m, "is the output");
  m = refused<InvalidArgument>(a, {dir.path() / "." / "a.db"});
  EXPECT_HAS(m, "is the output");
}

TEST_F(DbMergeRefuses, OutputsThatCannotBeReplaced) {
  const fs::path a = shard_a();
  fs::create_symlink(a, at("link.db"));
  std::string m = refused<InvalidArgument>(at("link.db"), {shard_b()});
  EXPECT_HAS(m, "link.db");
  EXPECT_HAS(m, "symbolic link");
  fs::create_directory(at("sub"));
  m = refused<InvalidArgument>(at("sub"), {a});
  EXPECT_HAS(m, "a directory, not a regular file");
  m = refused<InvalidArgument>(at("nowhere/out.db"), {a});
  EXPECT_HAS(m, "nowhere");
  EXPECT_HAS(m, "does not exist");
  m = refused<InvalidArgument>(at("out.db"), {});
  EXPECT_HAS(m, "at least one IN");
}

TEST_F(DbMergeRefuses, AnOutputThatASweepHasOpen) {
  const fs::path a = shard_a(), out = shard_b();
  Store writer = Store::open(out, Store::Mode::read_write);  // WAL mode: -wal beside it
  const std::string m = refused<DatabaseError>(out, {a});
  EXPECT_HAS(m, "write-ahead log");
}

// ---- diff ----

TEST(DbDiff, AddedRemovedChangedWithTheSpeedup) {
  const auto row = [](const std::string& problem, const std::string& params, double median) {
    BestRecord b;
    b.device_key = kH100.key();
    b.op = "add_rmsnorm";
    b.problem_key = problem;
    b.params_key = params;
    b.template_hash = "h1";
    b.median_us = median;
    return b;
  };
  const std::vector<BestRecord> before = {row("m=1", "t=32", 10.0), row("m=2", "t=32", 4.0),
                                          row("m=3", "t=64", 8.0), row("m=4", "t=64", 2.0)};
  const std::vector<BestRecord> after = {row("m=1", "t=64", 8.0), row("m=3", "t=64", 8.0),
                                         row("m=4", "t=64", 2.5), row("m=5", "t=32", 1.0)};
  const BestDiff d = diff_bests(before, after);
  ASSERT_EQ(d.added.size(), 1u);
  EXPECT_EQ(d.added[0].after->problem_key, "m=5");
  EXPECT_FALSE(d.added[0].before);
  EXPECT_FALSE(d.added[0].speedup());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].before->problem_key, "m=2");
  ASSERT_EQ(d.changed.size(), 2u);
  EXPECT_EQ(d.changed[0].before->params_key, "t=32");
  EXPECT_EQ(d.changed[0].after->params_key, "t=64");
  EXPECT_DOUBLE_EQ(*d.changed[0].speedup(), 1.25);
  EXPECT_DOUBLE_EQ(*d.changed[1].speedup(), 0.8);  // m=4: same params, slower
  EXPECT_EQ(d.unchanged, 1u);
  EXPECT_TRUE(diff_bests(after, after).changed.empty());
}

TEST_F(DbMerge, DiffOfAShardAgainstTheMergeShowsWhatTheOtherShardBrought) {
  const fs::path a = shard_a(), b = shard_b();
  merge_databases(at("out.db"), {a, b});
  const BestDiff d = diff_bests(Store::open(a, Store::Mode::read_only).all_bests().rows,
                                Store::open(at("out.db"), Store::Mode::read_only).all_bests().rows);
  EXPECT_EQ(d.added.size(), 1u);    // H200 m=128
  EXPECT_EQ(d.removed.size(), 0u);
  EXPECT_EQ(d.changed.size(), 2u);  // H100 m=128 (faster in B), m=256 (the tie to B)
  EXPECT_EQ(d.unchanged, 2u);
}

}  // namespace
}  // namespace ktune::test
