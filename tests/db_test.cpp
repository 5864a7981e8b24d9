// Tests of the tuning database (db/store.cpp): schema, round trips, best selection, refusing
// foreign/old/new/altered files, read-only media, corruption, hostile schema objects, concurrent
// writers and kill -9. RELIABILITY.md rows 8-13.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"

extern char** environ;

namespace ktune {
namespace {

namespace fs = std::filesystem;
using Mode = Store::Mode;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected '" << (part) << "' in: " << (text)

/// A fresh directory, removed with everything in it (permissions restored first).
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ktune-db-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
             std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const char* name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

fs::path sibling(const fs::path& db, const char* suffix) {
  fs::path p = db;
  p += suffix;
  return p;
}

/// Raw SQL against a file, outside Store: to inspect it or to make it foreign or hostile.
void raw_exec(const fs::path& p, const char* sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  c.exec(sql);
}

std::int64_t raw_int(const fs::path& p, const std::string& sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  db::Statement s(c.get(), sql, c.label());
  return s.row().int64(0);
}

std::string raw_text(const fs::path& p, const std::string& sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  db::Statement s(c.get(), sql, c.label());
  return s.row().text(0);
}

/// The DatabaseError message `f` throws, or "" when it throws nothing.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const DatabaseError& e) {
    return e.what();
  }
  return {};
}

DeviceInfo test_device() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.memory_bytes = 85'520'809'984;
  d.l2_bytes = 52'428'800;
  d.smem_optin_per_block = 232'448;
  d.smem_per_sm = 233'472;
  d.regs_per_block = 65'536;
  d.regs_per_sm = 65'537;  // distinct from regs_per_block, so a swapped column shows
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.driver_version = 13000;
  d.nvrtc_version = 12090;
  return d;
}

TrialRecord make_trial(const std::string& problem, const std::string& params, double median,
                       TrialStatus status = TrialStatus::ok, const std::string& hash = "h1") {
  TrialRecord t;
  t.device_key = test_device().key();
  t.op = "rmsnorm";
  t.dtype = DType::bf16;
  t.problem_key = problem;
  t.params_key = params;
  t.template_hash = hash;
  t.nvrtc_version = 12090;
  t.status = status;
  t.median_us = median;
  return t;
}

bool is_timestamp(const std::string& s) {
  static const std::regex utc(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  return std::regex_match(s, utc);
}

void expect_same_device(const DeviceInfo& a, const DeviceInfo& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cc_major, b.cc_major);
  EXPECT_EQ(a.cc_minor, b.cc_minor);
  EXPECT_EQ(a.sm_count, b.sm_count);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
  EXPECT_EQ(a.l2_bytes, b.l2_bytes);
  EXPECT_EQ(a.smem_optin_per_block, b.smem_optin_per_block);
  EXPECT_EQ(a.smem_per_sm, b.smem_per_sm);
  EXPECT_EQ(a.regs_per_block, b.regs_per_block);
  EXPECT_EQ(a.regs_per_sm, b.regs_per_sm);
  EXPECT_EQ(a.max_threads_per_block, b.max_threads_per_block);
  EXPECT_EQ(a.max_threads_per_sm, b.max_threads_per_sm);
  EXPECT_EQ(a.driver_version, b.driver_version);
  EXPECT_EQ(a.nvrtc_version, b.nvrtc_version);
}

/// A database with one device, one sweep, and `trials` trials over four problem keys.
void populate(const fs::path& p, int trials) {
  Store s = Store::open(p, Mode::read_write);
  s.upsert_device(test_device());
  SweepRecord sweep;
  sweep.device_key = test_device().key();
  sweep.op = "rmsnorm";
  sweep.problem_key = "n=*";
  sweep.strategy = "exhaustive";
  const std::int64_t sweep_id = s.begin_sweep(sweep);
  for (int i = 0; i < trials; ++i) {
    TrialRecord t =
        make_trial("n=" + std::to_string(i % 4), "block=" + std::to_string(i),
                   10.0 + (i * 37) % 101, i % 9 == 4 ? TrialStatus::timeout : TrialStatus::ok);
    t.sweep_id = sweep_id;
    t.detail =
        std::string(static_cast<std::size_t>(60 + (i * 53) % 240), static_cast<char>('a' + i % 26));
    s.record_trial(t);
  }
}

// ---- schema ----

TEST(DbSchema, NewFileHasVersionIdAndWal) {
  ScratchDir dir;
  const fs::path p = dir / "new.db";
  {
    Store s = Store::open(p, Mode::read_write);
    EXPECT_FALSE(s.read_only());
    EXPECT_FALSE(s.immutable());
    EXPECT_EQ(s.path(), p);
    EXPECT_EQ(s.integrity_check(), "ok");
    EXPECT_EQ(raw_text(p, "PRAGMA journal_mode"), "wal");
  }
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(raw_int(p, "PRAGMA application_id"), Store::kApplicationId);
  EXPECT_EQ(raw_text(p, "PRAGMA journal_mode"), "wal");  // persistent in the file
  for (const char* table : {"devices", "sweeps", "trials", "best"})
    EXPECT_EQ(raw_int(p, std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                     "name = '") +
                             table + "'"),
              1)
        << table;
  EXPECT_EQ(raw_int(p,
                    "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                    "name = 'trials_by_key'"),
            1);
  // Reopening validates and changes nothing.
  EXPECT_NO_THROW(Store::open(p, Mode::read_write));
  EXPECT_NO_THROW(Store::open(p, Mode::read_only));
}

TEST(DbSchema, StatusNamesRoundTrip) {
  const std::vector<std::pair<TrialStatus, std::string>> names = {
      {TrialStatus::ok, "ok"},
      {TrialStatus::invalid, "invalid"},
      {TrialStatus::compile_error, "compile_error"},
      {TrialStatus::launch_error, "launch_error"},
      {TrialStatus::timeout, "timeout"},
      {TrialStatus::wrong_result, "wrong_result"}};
  for (const auto& [status, name] : names) {
    EXPECT_EQ(status_name(status), name);
    EXPECT_EQ(parse_status(name), status);
  }
  EXPECT_FALSE(parse_status("OK"));
  EXPECT_FALSE(parse_status(""));
  EXPECT_FALSE(parse_status("okay"));
}

TEST(DbSqlite, TransactionRollsBackUnlessCommitted) {
  ScratchDir dir;
  const fs::path p = dir / "raw.db";
  db::Connection c(p, db::OpenMode::read_write_create);
  c.exec("CREATE TABLE t (v TEXT)");
  auto insert = [&](const char* value) {
    db::Statement s(c.get(), "INSERT INTO t (v) VALUES (?1)", c.label());
    s.bind(1, value);
    s.run();
  };
  auto count = [&] {
    return db::Statement(c.get(), "SELECT count(*) FROM t", c.label()).row().int64(0);
  };
  {
    db::Transaction t(c.get(), c.label());
    insert("dropped");
  }
  EXPECT_EQ(count(), 0);
  {
    db::Transaction t(c.get(), c.label());
    insert("'); DROP TABLE t; --");  // a value, never SQL
    t.commit();
  }
  EXPECT_EQ(count(), 1);
  EXPECT_EQ(db::Statement(c.get(), "SELECT v FROM t", c.label()).row().text(0),
            "'); DROP TABLE t; --");
  EXPECT_THROW(db::Statement(c.get(), "SELECT nope FROM t", c.label()), DatabaseError);
}

// ---- round trips and best selection ----

TEST(DbStore, DeviceRoundTripsAndUpdates) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const DeviceInfo d = test_device();
  EXPECT_FALSE(s.device(d.key()));
  s.upsert_device(d);
  auto back = s.device(d.key());
  ASSERT_TRUE(back);
  expect_same_device(*back, d);

  DeviceInfo newer = d;
  newer.driver_version = 13010;
  s.upsert_device(newer);
  ASSERT_EQ(s.devices().size(), 1u);
  expect_same_device(s.devices()[0], newer);

  EXPECT_EQ(s.copy_bandwidth(d.key()), 0.0);
  s.set_copy_bandwidth(d.key(), 2.75e12);
  EXPECT_EQ(s.copy_bandwidth(d.key()), 2.75e12);
  s.upsert_device(newer);  // a refresh keeps the measured bandwidth
  EXPECT_EQ(s.copy_bandwidth(d.key()), 2.75e12);
  EXPECT_EQ(s.copy_bandwidth("no such device"), 0.0);
  EXPECT_THROW(s.set_copy_bandwidth("no such device", 1e9), InvalidArgument);
  EXPECT_THROW(s.set_copy_bandwidth(d.key(), std::nan("")), InvalidArgument);
  EXPECT_EQ(raw_text(dir / "t.db", "SELECT updated_at FROM devices").size(), 20u);
  EXPECT_TRUE(is_timestamp(raw_text(dir / "t.db", "SELECT updated_at FROM devices")));
}

TEST(DbStore, SweepAndTrialRoundTripEveryField) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const DeviceInfo device = test_device();
  s.upsert_device(device);

  SweepRecord sweep;
  sweep.device_key = device.key();
  sweep.op = "softmax";
  sweep.dtype = DType::f16;
  sweep.problem_key = "rows=4096,cols=8191";
  sweep.strategy = "random:64";
  sweep.command_line = "ktune sweep --op softmax --shape 'rows=4096, cols=8191'";
  const std::int64_t sweep_id = s.begin_sweep(sweep);
  EXPECT_GT(sweep_id, 0);
  const auto sweeps = s.sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].id, sweep_id);
  EXPECT_EQ(sweeps[0].device_key, sweep.device_key);
  EXPECT_EQ(sweeps[0].op, sweep.op);
  EXPECT_EQ(sweeps[0].dtype, sweep.dtype);
  EXPECT_EQ(sweeps[0].problem_key, sweep.problem_key);
  EXPECT_EQ(sweeps[0].strategy, sweep.strategy);
  EXPECT_EQ(sweeps[0].command_line, sweep.command_line);
  EXPECT_TRUE(is_timestamp(sweeps[0].started_at)) << sweeps[0].started_at;

  TrialRecord t;
  t.sweep_id = sweep_id;
  t.device_key = device.key();
  t.op = "softmax";
  t.dtype = DType::f16;
  t.problem_key = sweep.problem_key;
  t.params_key = "rows_per_block=4,vec=8";
  t.template_hash = "9f86d081884c7d65";
  t.nvrtc_version = 12090;
  t.status = TrialStatus::ok;
  t.detail = "it's \"fine\"\nsecond line; DROP TABLE trials; --";
  t.median_us = 12.3456789012345;
  t.min_us = 11.5;
  t.max_us = 19.25;
  t.spread_pct = 3.125;
  t.repetitions = 417;
  t.registers = 40;
  t.shared_bytes = 16384;
  t.local_bytes = 8;
  t.spill_bytes = 4;
  t.compile_seconds = 0.875;
  const std::int64_t id = s.record_trial(t);
  EXPECT_GT(id, 0);

  const auto got =
      s.trials(device.key(), "softmax", DType::f16, sweep.problem_key, t.template_hash);
  ASSERT_EQ(got.size(), 1u);
  const TrialRecord& r = got[0];
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.sweep_id, t.sweep_id);
  EXPECT_EQ(r.device_key, t.device_key);
  EXPECT_EQ(r.op, t.op);
  EXPECT_EQ(r.dtype, t.dtype);
  EXPECT_EQ(r.problem_key, t.problem_key);
  EXPECT_EQ(r.params_key, t.params_key);
  EXPECT_EQ(r.template_hash, t.template_hash);
  EXPECT_EQ(r.nvrtc_version, t.nvrtc_version);
  EXPECT_EQ(r.status, t.status);
  EXPECT_EQ(r.detail, t.detail);
  EXPECT_EQ(r.median_us, t.median_us);
  EXPECT_EQ(r.min_us, t.min_us);
  EXPECT_EQ(r.max_us, t.max_us);
  EXPECT_EQ(r.spread_pct, t.spread_pct);
  EXPECT_EQ(r.repetitions, t.repetitions);
  EXPECT_EQ(r.registers, t.registers);
  EXPECT_EQ(r.shared_bytes, t.shared_bytes);
  EXPECT_EQ(r.local_bytes, t.local_bytes);
  EXPECT_EQ(r.spill_bytes, t.spill_bytes);
  EXPECT_EQ(r.compile_seconds, t.compile_seconds);
  EXPECT_TRUE(is_timestamp(r.created_at)) << r.created_at;

  // The ok trial became the best, with the device's name and arch joined in.
  const auto b = s.best(device.key(), "softmax", DType::f16, sweep.problem_key, t.template_hash);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->device_key, device.key());
  EXPECT_EQ(b->device_name, device.name);
  EXPECT_EQ(b->arch, "sm_90a");
  EXPECT_EQ(b->op, "softmax");
  EXPECT_EQ(b->dtype, DType::f16);
  EXPECT_EQ(b->problem_key, sweep.problem_key);
  EXPECT_EQ(b->params_key, t.params_key);
  EXPECT_EQ(b->template_hash, t.template_hash);
  EXPECT_EQ(b->median_us, t.median_us);
  EXPECT_EQ(b->trial_id, id);
  EXPECT_TRUE(is_timestamp(b->updated_at)) << b->updated_at;

  // A trial without a sweep keeps sweep_id 0.
  TrialRecord loose = make_trial("n=1", "p", 5.0);
  const std::int64_t loose_id = s.record_trial(loose);
  const auto all = s.all_trials();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].id, loose_id);
  EXPECT_EQ(all[1].sweep_id, 0);
}

TEST(DbStore, BestOnlyImprovesAndOnlyOkTrialsCount) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const std::string dev = test_device().key();
  auto best = [&](const std::string& hash = "h1") {
    return s.best(dev, "rmsnorm", DType::bf16, "n=4096", hash);
  };

  // Non-ok trials never become the best, however fast.
  for (TrialStatus bad :
       {TrialStatus::invalid, TrialStatus::compile_error, TrialStatus::launch_error,
        TrialStatus::timeout, TrialStatus::wrong_result})
    s.record_trial(make_trial("n=4096", "bad", 0.001, bad));
  EXPECT_FALSE(best());

  const std::int64_t first = s.record_trial(make_trial("n=4096", "a", 20.0));
  ASSERT_TRUE(best());
  EXPECT_EQ(best()->params_key, "a");
  EXPECT_EQ(best()->trial_id, first);

  s.record_trial(make_trial("n=4096", "slower", 25.0));
  EXPECT_EQ(best()->params_key, "a");
  s.record_trial(make_trial("n=4096", "tie", 20.0));
  EXPECT_EQ(best()->params_key, "a");

  const std::int64_t faster = s.record_trial(make_trial("n=4096", "b", 15.5));
  EXPECT_EQ(best()->params_key, "b");
  EXPECT_EQ(best()->median_us, 15.5);
  EXPECT_EQ(best()->trial_id, faster);

  s.record_trial(make_trial("n=4096", "wrong-but-fast", 1.0, TrialStatus::wrong_result));
  EXPECT_EQ(best()->params_key, "b");

  // Another template hash is another key: a stale best neither blocks nor replaces it.
  s.record_trial(make_trial("n=4096", "new-template", 30.0, TrialStatus::ok, "h2"));
  EXPECT_EQ(best("h2")->params_key, "new-template");
  EXPECT_EQ(best("h1")->params_key, "b");
  EXPECT_EQ(s.bests("rmsnorm", DType::bf16).size(), 2u);
  EXPECT_TRUE(s.bests("rmsnorm", DType::f32).empty());

  // No device row: the best still reads, with name and arch empty.
  EXPECT_TRUE(best()->device_name.empty());
  EXPECT_TRUE(best()->arch.empty());
  s.upsert_device(test_device());
  EXPECT_EQ(best()->arch, "sm_90a");
}

TEST(DbStore, SetBestOverridesInOneRow) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const std::string dev = test_device().key();
  const std::int64_t a = s.record_trial(make_trial("n=1", "a", 10.0));
  const std::int64_t b = s.record_trial(make_trial("n=1", "b", 11.0));
  ASSERT_EQ(s.best(dev, "rmsnorm", DType::bf16, "n=1", "h1")->params_key, "a");

  // Re-timing found b faster after all: set_best replaces even with a larger median.
  BestRecord r;
  r.device_key = dev;
  r.op = "rmsnorm";
  r.dtype = DType::bf16;
  r.problem_key = "n=1";
  r.params_key = "b";
  r.template_hash = "h1";
  r.median_us = 10.5;
  r.trial_id = b;
  s.set_best(r);
  auto got = s.best(dev, "rmsnorm", DType::bf16, "n=1", "h1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->params_key, "b");
  EXPECT_EQ(got->median_us, 10.5);
  EXPECT_EQ(got->trial_id, b);
  EXPECT_EQ(s.all_bests().size(), 1u);

  // A best for a new key without a trial behind it.
  r.problem_key = "n=2";
  r.trial_id = 0;
  s.set_best(r);
  EXPECT_EQ(s.best(dev, "rmsnorm", DType::bf16, "n=2", "h1")->trial_id, 0);

  // A trial id that does not exist is refused, and nothing changes.
  r.problem_key = "n=1";
  r.params_key = "ghost";
  r.trial_id = a + b + 100;
  const std::string message = error_of([&] { s.set_best(r); });
  EXPECT_CONTAINS(message, "FOREIGN KEY");
  EXPECT_EQ(s.best(dev, "rmsnorm", DType::bf16, "n=1", "h1")->params_key, "b");
}

TEST(DbStore, TrialsFilterByKeyAndTemplateHash) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const std::string dev = test_device().key();
  s.record_trial(make_trial("n=1", "first", 3.0));
  s.record_trial(make_trial("n=1", "stale", 1.0, TrialStatus::ok, "old-hash"));
  s.record_trial(make_trial("n=2", "other-shape", 1.0));
  s.record_trial(make_trial("n=1", "second", 2.0, TrialStatus::compile_error));
  TrialRecord other_op = make_trial("n=1", "other-op", 1.0);
  other_op.op = "softmax";
  s.record_trial(other_op);

  const auto got = s.trials(dev, "rmsnorm", DType::bf16, "n=1", "h1");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].params_key, "first");  // newest last
  EXPECT_EQ(got[1].params_key, "second");
  EXPECT_TRUE(s.trials(dev, "rmsnorm", DType::f16, "n=1", "h1").empty());
  EXPECT_EQ(s.trials(dev, "rmsnorm", DType::bf16, "n=1", "old-hash").size(), 1u);

  EXPECT_EQ(s.all_trials().size(), 5u);
  EXPECT_EQ(s.all_trials("softmax").size(), 1u);
  EXPECT_EQ(s.all_trials("rmsnorm").size(), 4u);
  EXPECT_TRUE(s.all_trials("nope").empty());
  EXPECT_EQ(s.all_bests().size(), 4u);  // (n=1,h1) (n=1,old-hash) (n=2,h1) (softmax n=1)
  EXPECT_EQ(s.all_bests("softmax").size(), 1u);
}

TEST(DbStore, BadInputIsRefusedAndWritesNothing) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  TrialRecord t = make_trial("n=1", "p", std::nan(""));
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t.median_us = std::numeric_limits<double>::infinity();
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t.median_us = -1.0;
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t.median_us = 1.0;
  t.op.clear();
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t = make_trial("n=1", "p", 1.0);
  t.dtype = static_cast<DType>(42);
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t = make_trial("n=1", "p", 1.0);
  t.status = static_cast<TrialStatus>(17);
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t = make_trial("n=1", "p", 1.0);
  t.sweep_id = 999;  // no such sweep
  EXPECT_CONTAINS(error_of([&] { s.record_trial(t); }), "FOREIGN KEY");
  EXPECT_TRUE(s.all_trials().empty());
  EXPECT_TRUE(s.all_bests().empty());
  EXPECT_THROW(Store::open("", Mode::read_write), InvalidArgument);
}

// ---- exports ----

TEST(DbExport, JsonEscapesEverything) {
  TrialRecord t = make_trial("n=1", "vec=8", 1.5);
  t.id = 7;
  t.detail = std::string("say \"hi\" \\ back\nline\ttab\x01 ctrl \xff bad \xc3\xa9 ok");
  t.created_at = "2026-01-02T03:04:05Z";
  const std::string json = export_json({t});
  EXPECT_EQ(json.substr(0, 2), "[\n");
  EXPECT_EQ(json.substr(json.size() - 2), "]\n");
  EXPECT_CONTAINS(
      json,
      "\"detail\": \"say \\\"hi\\\" \\\\ back\\nline\\ttab\\u0001 ctrl \xef\xbf\xbd bad "
      "\xc3\xa9 ok\"");
  EXPECT_CONTAINS(json, "\"id\": 7, \"sweep_id\": 0, ");
  EXPECT_CONTAINS(json, "\"dtype\": \"bf16\"");
  EXPECT_CONTAINS(json, "\"status\": \"ok\"");
  EXPECT_CONTAINS(json, "\"median_us\": 1.5, ");
  EXPECT_CONTAINS(json, "\"created_at\": \"2026-01-02T03:04:05Z\"}");
  EXPECT_EQ(export_json({}), "[]\n");
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 3);  // "[", one object, "]"

  BestRecord b;
  b.device_key = "dev";
  b.arch = "sm_90a";
  b.median_us = 2.25;
  b.trial_id = 3;
  const std::string bj = best_to_json(b);
  EXPECT_EQ(bj.front(), '{');
  EXPECT_EQ(bj.back(), '}');
  EXPECT_CONTAINS(bj, "\"arch\": \"sm_90a\"");
  EXPECT_CONTAINS(bj, "\"median_us\": 2.25");
  EXPECT_CONTAINS(bj, "\"trial_id\": 3");
}

TEST(DbExport, CsvQuotesWhatNeedsIt) {
  TrialRecord t = make_trial("rows=4,cols=8", "plain", 2.5, TrialStatus::compile_error);
  t.detail = "error: \"x\" undeclared\nline 2";
  const std::string csv = export_csv({t, make_trial("n=1", "p", 1.0)});
  const std::string header =
      "id,sweep_id,device_key,op,dtype,problem_key,params_key,template_hash,nvrtc_version,status,"
      "detail,median_us,min_us,max_us,spread_pct,repetitions,registers,shared_bytes,local_bytes,"
      "spill_bytes,compile_seconds,created_at\n";
  EXPECT_EQ(csv.substr(0, header.size()), header);
  EXPECT_CONTAINS(csv, ",\"rows=4,cols=8\",plain,h1,12090,compile_error,");
  EXPECT_CONTAINS(csv, ",\"error: \"\"x\"\" undeclared\nline 2\",2.5,0,0,0,0,");
  EXPECT_EQ(export_csv({}), header);
}

// ---- foreign, old, new and altered files (row 11) ----

TEST(DbRefuses, NewerAndOlderSchemaVersions) {
  ScratchDir dir;
  const fs::path p = dir / "v.db";
  populate(p, 3);
  raw_exec(p, "PRAGMA user_version = 2");
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(p, mode); });
    EXPECT_CONTAINS(m, p.string());
    EXPECT_CONTAINS(m, "schema version 2 is newer than this ktune supports (1)");
  }
  raw_exec(p, "PRAGMA user_version = 0");
  const std::string m = error_of([&] { Store::open(p, Mode::read_write); });
  EXPECT_CONTAINS(m, "schema version 0 is older");
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), 0);  // refused, not rewritten
}

TEST(DbRefuses, ForeignApplicationId) {
  ScratchDir dir;
  const fs::path p = dir / "other.db";
  populate(p, 3);
  raw_exec(p, "PRAGMA application_id = 305419896");  // 0x12345678
  const std::string before = read_bytes(p);
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(p, mode); });
    EXPECT_CONTAINS(m, p.string());
    EXPECT_CONTAINS(m, "not a ktune database");
    EXPECT_CONTAINS(m, "0x12345678");
  }
  EXPECT_EQ(read_bytes(p), before);

  // Another application's plain SQLite file is refused and left exactly as it was (not even
  // switched to WAL).
  const fs::path q = dir / "notes.db";
  raw_exec(q, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep me')");
  const std::string notes = read_bytes(q);
  const std::string m = error_of([&] { Store::open(q, Mode::read_write); });
  EXPECT_CONTAINS(m, "not a ktune database (application_id is 0x00000000");
  EXPECT_EQ(read_bytes(q), notes);
  EXPECT_EQ(raw_text(q, "PRAGMA journal_mode"), "delete");
}

TEST(DbRefuses, MissingColumnOrTable) {
  ScratchDir dir;
  const fs::path p = dir / "col.db";
  populate(p, 3);
  raw_exec(p, "ALTER TABLE trials DROP COLUMN spill_bytes");
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(p, mode); });
    EXPECT_CONTAINS(m, p.string());
    EXPECT_CONTAINS(m, "table 'trials' lacks column 'spill_bytes'");
  }
  const fs::path q = dir / "table.db";
  populate(q, 3);
  raw_exec(q, "DROP TABLE devices");
  EXPECT_CONTAINS(error_of([&] { Store::open(q, Mode::read_only); }), "has no table 'devices'");
}

TEST(DbRefuses, NotADatabaseOrEmpty) {
  ScratchDir dir;
  const fs::path text = dir / "readme.db";
  write_bytes(text, std::string(5000, 'x'));
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(text, mode); });
    EXPECT_CONTAINS(m, text.string());
    EXPECT_CONTAINS(m, "not a database");
  }
  EXPECT_EQ(read_bytes(text), std::string(5000, 'x'));

  const fs::path empty = dir / "empty.db";
  write_bytes(empty, "");
  EXPECT_CONTAINS(error_of([&] { Store::open(empty, Mode::read_only); }), "the file is empty");
  EXPECT_NO_THROW(Store::open(empty, Mode::read_write));  // an empty file is a new database
  EXPECT_EQ(raw_int(empty, "PRAGMA application_id"), Store::kApplicationId);

  EXPECT_CONTAINS(error_of([&] { Store::open(dir.path(), Mode::read_write); }), "is a directory");
  EXPECT_CONTAINS(error_of([&] { Store::open(dir.path(), Mode::read_only); }), "is a directory");
}

TEST(DbRefuses, MissingDirectoryCreatesNothing) {
  ScratchDir dir;
  const fs::path missing = dir / "no" / "such" / "dir";
  const fs::path p = missing / "ktune.db";
  const std::string m = error_of([&] { Store::open(p, Mode::read_write); });
  EXPECT_CONTAINS(m, p.string());
  EXPECT_CONTAINS(m, "directory " + missing.string() + " does not exist");
  EXPECT_FALSE(file_exists(dir / "no"));
  EXPECT_FALSE(file_exists(p));

  EXPECT_CONTAINS(error_of([&] { Store::open(p, Mode::read_only); }), "no such file");
  const fs::path absent = dir / "absent.db";
  EXPECT_CONTAINS(error_of([&] { Store::open(absent, Mode::read_only); }), "no such file");
  EXPECT_FALSE(file_exists(absent));
}

// ---- read-only opens and read-only media (row 10) ----

TEST(DbReadOnly, LookupsLeaveTheFileUnchangedAndWritesAreRefused) {
  ScratchDir dir;
  const fs::path p = dir / "ro.db";
  populate(p, 20);
  const std::string before = read_bytes(p);
  {
    Store r = Store::open(p, Mode::read_only);
    EXPECT_TRUE(r.read_only());
    EXPECT_FALSE(r.immutable());
    EXPECT_TRUE(r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1"));
    EXPECT_EQ(r.all_trials().size(), 20u);
    EXPECT_EQ(r.integrity_check(), "ok");
    const std::string m = error_of([&] { r.record_trial(make_trial("n=1", "x", 1.0)); });
    EXPECT_CONTAINS(m, "opened read-only");
    EXPECT_THROW(r.upsert_device(test_device()), DatabaseError);
    EXPECT_THROW(r.begin_sweep(SweepRecord{}), DatabaseError);
    EXPECT_THROW(r.set_copy_bandwidth(test_device().key(), 1.0), DatabaseError);
    EXPECT_THROW(r.set_best(BestRecord{}), DatabaseError);
  }
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM trials"), 20);
}

TEST(DbReadOnly, PathsWithUriCharactersOpen) {
  // Read-only opens go through a file: URI; '?', '#' and '%' in the path must stay literal.
  ScratchDir dir;
  const fs::path sub = dir.path() / "odd ?mode=rw&x #1 %41";
  fs::create_directories(sub);
  const fs::path p = sub / "a?b.db";
  populate(p, 3);
  Store r = Store::open(p, Mode::read_only);
  EXPECT_EQ(r.all_trials().size(), 3u);
  EXPECT_THROW(r.record_trial(make_trial("n=1", "x", 1.0)), DatabaseError);
  EXPECT_FALSE(file_exists(dir / "odd "));
}

/// Runs `check` where file permissions apply: in this process when it is not root, else in a
/// child that drops to nobody (root ignores permission bits). Returns "" on success, "skip: ..."
/// when no unprivileged identity is available, else what went wrong.
std::string run_unprivileged(const std::function<std::string()>& check) {
  if (geteuid() != 0) return check();
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(pipe_fds[0]);
    std::string result;
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      result = "skip: cannot drop to uid 65534";
    } else {
      try {
        result = check();
      } catch (const std::exception& e) {
        result = std::string("threw: ") + e.what();
      }
    }
    const ssize_t written = write(pipe_fds[1], result.data(), result.size());
    _exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string result;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;)
    result.append(buf, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed: " + result;
  return result;
}

TEST(DbReadOnly, ReadOnlyDirectoryFallsBackToImmutable) {
  ScratchDir dir;
  const fs::path p = dir / "shipped.db";
  populate(p, 12);
  const std::string before = read_bytes(p);
  ASSERT_FALSE(file_exists(sibling(p, "-wal")));
  fs::permissions(dir.path(), fs::perms(0555));
  const std::string result = run_unprivileged([&]() -> std::string {
    Store r = Store::open(p, Mode::read_only);
    if (!r.immutable()) return "expected the immutable fallback";
    auto b = r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1");
    if (!b || b->arch != "sm_90a") return "lookup failed";
    if (r.all_trials().size() != 12) return "wrong trial count";
    if (r.integrity_check() != "ok") return "integrity_check failed";
    return {};
  });
  fs::permissions(dir.path(), fs::perms(0755));
  if (result.rfind("skip:", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");
  EXPECT_FALSE(file_exists(sibling(p, "-wal")));
  EXPECT_FALSE(file_exists(sibling(p, "-shm")));
  EXPECT_EQ(read_bytes(p), before);
}

TEST(DbReadOnly, WritableOpenOnReadOnlyPlacesSaysWhy) {
  ScratchDir dir;
  const fs::path p = dir / "media.db";
  populate(p, 2);
  fs::permissions(dir.path(), fs::perms(0555));
  std::string result = run_unprivileged([&]() -> std::string {
    const std::string m = error_of([&] { Store::open(p, Mode::read_write); });
    if (m.find("is not writable") == std::string::npos || m.find("read-only") == std::string::npos)
      return "unexpected message for a read-only directory: '" + m + "'";
    return {};
  });
  if (result.rfind("skip:", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");

  // A writable directory holding a file that is not writable.
  fs::permissions(dir.path(), fs::perms(0777));
  fs::permissions(p, fs::perms(0444));
  result = run_unprivileged([&]() -> std::string {
    const std::string m = error_of([&] { Store::open(p, Mode::read_write); });
    if (m.find("the file is not writable") == std::string::npos)
      return "unexpected message for a read-only file: '" + m + "'";
    return {};
  });
  fs::permissions(dir.path(), fs::perms(0755));
  EXPECT_EQ(result, "");
  EXPECT_FALSE(file_exists(sibling(p, "-wal")));
}

TEST(DbReadOnly, PendingLogOnReadOnlyMediaIsAClearError) {
  ScratchDir work, media;
  const fs::path p = work / "live.db";
  Store writer = Store::open(p, Mode::read_write);
  writer.upsert_device(test_device());
  writer.record_trial(make_trial("n=1", "a", 1.0));
  // Copied while the writer is open: the log still holds the commits.
  ASSERT_GT(fs::file_size(sibling(p, "-wal")), 0u);
  const fs::path copy = media / "live.db";
  fs::copy_file(p, copy);
  fs::copy_file(sibling(p, "-wal"), sibling(copy, "-wal"));
  fs::permissions(media.path(), fs::perms(0555));
  const std::string result = run_unprivileged([&]() -> std::string {
    const std::string m = error_of([&] { Store::open(copy, Mode::read_only); });
    if (m.find("-wal") == std::string::npos || m.find("read-only") == std::string::npos)
      return "unexpected message: '" + m + "'";
    return {};
  });
  fs::permissions(media.path(), fs::perms(0755));
  if (result.rfind("skip:", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");
}

// ---- corruption (row 12) ----

TEST(DbCorruption, FlippedAndTruncatedFilesErrorCleanly) {
  ScratchDir dir;
  const fs::path source = dir / "good.db";
  populate(source, 120);
  const std::string good = read_bytes(source);
  ASSERT_GT(good.size(), 16384u);
  const fs::path p = dir / "bad.db";
  const std::string dev = test_device().key();

  int worked = 0, refused = 0, variant = 0;
  auto exercise = [&](const std::string& bytes, const std::string& what) {
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(sibling(p, suffix));
    write_bytes(p, bytes);
    const Mode mode = variant % 2 == 0 ? Mode::read_only : Mode::read_write;
    const bool write = variant % 8 == 1;
    ++variant;
    try {
      Store s = Store::open(p, mode);
      (void)s.all_trials();
      (void)s.all_bests();
      (void)s.devices();
      (void)s.sweeps();
      (void)s.bests("rmsnorm", DType::bf16);
      (void)s.best(dev, "rmsnorm", DType::bf16, "n=2", "h1");
      (void)s.trials(dev, "rmsnorm", DType::bf16, "n=3", "h1");
      (void)s.integrity_check();
      if (write) s.record_trial(make_trial("n=2", "after", 0.5));
      ++worked;
    } catch (const DatabaseError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not a DatabaseError: " << e.what();
    }
  };

  std::mt19937 rng(20260101);
  const std::size_t size = good.size();
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < 100; ++i) offsets.push_back(i);  // every header byte
  for (std::size_t page = 0; page < size; page += 4096) {      // every b-tree page header
    const std::size_t header = page == 0 ? 100 : page;         // page 1's follows the file header
    for (std::size_t k : {0, 1, 3, 5, 7, 8, 11})
      if (header + k < size) offsets.push_back(header + k);
  }
  std::uniform_int_distribution<std::size_t> anywhere(0, size - 1);
  for (int i = 0; i < 100; ++i) offsets.push_back(anywhere(rng));
  std::uniform_int_distribution<int> nonzero(1, 255);
  for (std::size_t offset : offsets) {
    std::string bytes = good;
    bytes[offset] = static_cast<char>(bytes[offset] ^ nonzero(rng));
    exercise(bytes, "flip at " + std::to_string(offset));
  }
  std::vector<std::size_t> lengths = {0,    1,    15,       16,          99,      100,
                                      101,  511,  512,      1024,        4095,    4096,
                                      4097, 8192, size / 2, size - 4096, size - 1};
  for (int i = 0; i < 30; ++i) lengths.push_back(anywhere(rng));
  for (std::size_t length : lengths)
    exercise(good.substr(0, length), "truncate to " + std::to_string(length));

  EXPECT_GT(refused, 0);
  EXPECT_GT(worked, 0);  // flips in unused bytes are harmless
  std::printf("corruption: %d variants, %d usable, %d refused with DatabaseError\n", variant,
              worked, refused);
}

// ---- hostile schema objects (row 13) ----

constexpr const char* kEvilTrigger =
    "CREATE TRIGGER evil AFTER INSERT ON trials BEGIN "
    "UPDATE best SET params_key = 'evil'; "
    "INSERT INTO sweeps (device_key, op, dtype, problem_key, strategy, command_line, started_at) "
    "VALUES ('pwned', 'x', 'bf16', 'x', 'x', 'x', 'x'); END";

TEST(DbHostile, FileWithTriggerOrViewIsRefusedAndNothingRuns) {
  ScratchDir dir;
  const fs::path p = dir / "evil.db";
  populate(p, 5);
  raw_exec(p, kEvilTrigger);
  raw_exec(p, "CREATE TRIGGER evil_read AFTER UPDATE ON best BEGIN DELETE FROM trials; END");
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(p, mode); });
    EXPECT_CONTAINS(m, p.string());
    EXPECT_CONTAINS(m, "contains a trigger 'evil");
    EXPECT_CONTAINS(m, "not trusted");
  }
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM sweeps WHERE device_key = 'pwned'"), 0);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM best WHERE params_key = 'evil'"), 0);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM trials"), 5);

  const fs::path v = dir / "view.db";
  populate(v, 1);
  raw_exec(v, "CREATE VIEW fastest AS SELECT * FROM best");
  EXPECT_CONTAINS(error_of([&] { Store::open(v, Mode::read_only); }), "contains a view 'fastest'");
}

TEST(DbHostile, TriggerPlantedAfterOpenDoesNotFire) {
  ScratchDir dir;
  const fs::path p = dir / "late.db";
  populate(p, 2);
  Store s = Store::open(p, Mode::read_write);
  raw_exec(p, kEvilTrigger);  // another process alters the schema under an open store
  s.record_trial(make_trial("n=0", "mine", 0.5));
  EXPECT_EQ(s.best(test_device().key(), "rmsnorm", DType::bf16, "n=0", "h1")->params_key, "mine");
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM sweeps WHERE device_key = 'pwned'"), 0);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM best WHERE params_key = 'evil'"), 0);
}

// ---- paths ----

/// Sets environment variables for one test and restores them after.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const std::string& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i])
        setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      else
        unsetenv(names_[i].c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(DbPaths, DefaultPathFollowsTheEnvironment) {
  EnvGuard guard({"KTUNE_DB", "XDG_DATA_HOME", "HOME"});
  setenv("KTUNE_DB", "/data/mine.db", 1);
  setenv("XDG_DATA_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_db_path(), fs::path("/data/mine.db"));
  unsetenv("KTUNE_DB");
  EXPECT_EQ(default_db_path(), fs::path("/xdg/ktune/ktune.db"));
  setenv("XDG_DATA_HOME", "relative/dir", 1);  // invalid per the XDG spec: ignored
  EXPECT_EQ(default_db_path(), fs::path("/home/u/.local/share/ktune/ktune.db"));
  setenv("XDG_DATA_HOME", "", 1);
  setenv("KTUNE_DB", "", 1);  // empty means unset
  EXPECT_EQ(default_db_path(), fs::path("/home/u/.local/share/ktune/ktune.db"));
  unsetenv("HOME");
  EXPECT_FALSE(default_db_path().empty());  // from the password database
}

TEST(DbPaths, ShippedPathsAreFilesThenSortedDirectories) {
  EnvGuard guard({"KTUNE_DB_PATH"});
  ScratchDir dir;
  const fs::path shipped = dir / "shipped";
  fs::create_directories(shipped / "nested.db");  // a directory, not a database
  for (const char* name : {"b_h100.db", "a_a100.db", "notes.txt", "b_h100.db-wal"})
    write_bytes(shipped / name, "x");
  const fs::path single = dir / "single.sqlite";
  write_bytes(single, "x");

  unsetenv("KTUNE_DB_PATH");
  const auto baseline = shipped_db_paths();  // install and source-tree directories only

  const std::string list = single.string() + ":" + shipped.string() +
                           "::" + (dir / "missing").string() + ":" + shipped.string();
  setenv("KTUNE_DB_PATH", list.c_str(), 1);
  const auto paths = shipped_db_paths();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_EQ(paths[0], single);
  EXPECT_EQ(paths[1], shipped / "a_a100.db");
  EXPECT_EQ(paths[2], shipped / "b_h100.db");
  EXPECT_EQ(std::vector<fs::path>(paths.begin() + 3, paths.end()), baseline);
}

// ---- concurrency and kill -9 (rows 8 and 9) ----

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
  for (const TrialRecord& t : s.all_trials()) {
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
  const auto bests = s.all_bests();
  EXPECT_EQ(bests.size(), fastest.size());
  for (const BestRecord& b : bests) {
    EXPECT_EQ(b.median_us, fastest[b.problem_key]) << b.problem_key;
    const auto trials = s.trials(b.device_key, b.op, b.dtype, b.problem_key, b.template_hash);
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
  EXPECT_EQ(s.all_trials().size(), static_cast<std::size_t>(kWriters * kCount));
  EXPECT_EQ(s.all_bests().size(), static_cast<std::size_t>(kProblems));
  EXPECT_EQ(s.sweeps().size(), static_cast<std::size_t>(kWriters));
  EXPECT_EQ(s.devices().size(), 1u);
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
  int killed_mid_run = 0;
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
  const auto a = resumed.all_bests();
  const auto b = undisturbed.all_bests();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].problem_key, b[i].problem_key);
    EXPECT_EQ(a[i].params_key, b[i].params_key);
    EXPECT_EQ(a[i].median_us, b[i].median_us);
  }
}

}  // namespace
}  // namespace ktune
