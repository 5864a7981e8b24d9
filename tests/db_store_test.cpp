// Tests of Store (db/store.cpp): schema, round trips, best selection, what the writers refuse,
// and the journal mode a writer leaves behind.
#include "db/store.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

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
    EXPECT_EQ(raw_text(p, "PRAGMA journal_mode"), "wal");  // while a writer has it open
  }
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(raw_int(p, "PRAGMA application_id"), Store::kApplicationId);
  // At rest, back to a rollback journal: readers need no -wal/-shm.
  EXPECT_EQ(raw_text(p, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(header_journal_mode(p), 1);
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
      {TrialStatus::compile_timeout, "compile_timeout"},
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
  ASSERT_EQ(s.devices().rows.size(), 1u);
  expect_same_device(s.devices().rows[0], newer);

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
  const auto sweeps = s.sweeps().rows;
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
      s.trials(device.key(), "softmax", DType::f16, sweep.problem_key, t.template_hash).rows;
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
  const auto all = s.all_trials().rows;
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
  EXPECT_EQ(s.bests("rmsnorm", DType::bf16).rows.size(), 2u);
  EXPECT_TRUE(s.bests("rmsnorm", DType::f32).rows.empty());

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
  EXPECT_EQ(s.all_bests().rows.size(), 1u);

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

  const auto got = s.trials(dev, "rmsnorm", DType::bf16, "n=1", "h1").rows;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].params_key, "first");  // newest last
  EXPECT_EQ(got[1].params_key, "second");
  EXPECT_TRUE(s.trials(dev, "rmsnorm", DType::f16, "n=1", "h1").rows.empty());
  EXPECT_EQ(s.trials(dev, "rmsnorm", DType::bf16, "n=1", "old-hash").rows.size(), 1u);

  EXPECT_EQ(s.all_trials().rows.size(), 5u);
  EXPECT_EQ(s.all_trials("softmax").rows.size(), 1u);
  EXPECT_EQ(s.all_trials("rmsnorm").rows.size(), 4u);
  EXPECT_TRUE(s.all_trials("nope").rows.empty());
  EXPECT_EQ(s.all_bests().rows.size(), 4u);  // (n=1,h1) (n=1,old-hash) (n=2,h1) (softmax n=1)
  EXPECT_EQ(s.all_bests("softmax").rows.size(), 1u);
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
  EXPECT_TRUE(s.all_trials().rows.empty());
  EXPECT_TRUE(s.all_bests().rows.empty());
}

TEST(DbStore, WritersRefuseWhatReadersWouldSkip) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  const std::string long_key(5000, 'k');
  for (std::string TrialRecord::*field :
       {&TrialRecord::device_key, &TrialRecord::op, &TrialRecord::problem_key,
        &TrialRecord::params_key, &TrialRecord::template_hash}) {
    TrialRecord t = make_trial("n=1", "p", 1.0);
    t.*field = long_key;
    try {
      s.record_trial(t);
      ADD_FAILURE() << "a 5000-byte key was recorded";
    } catch (const InvalidArgument& e) {
      EXPECT_CONTAINS(e.what(), "longer than 4096 bytes");
      EXPECT_LT(std::string(e.what()).size(), 200u) << "the key is truncated in the message";
    }
  }
  SweepRecord sweep;
  sweep.device_key = test_device().key();
  sweep.op = "rmsnorm";
  EXPECT_THROW(s.begin_sweep(sweep), InvalidArgument);  // no problem_key
  sweep.problem_key = "n=1";
  sweep.strategy = long_key;
  EXPECT_THROW(s.begin_sweep(sweep), InvalidArgument);
  BestRecord b;
  b.device_key = test_device().key();
  b.op = "rmsnorm";
  b.problem_key = long_key;
  EXPECT_THROW(s.set_best(b), InvalidArgument);
  DeviceInfo d = test_device();
  d.name = long_key;
  EXPECT_THROW(s.upsert_device(d), InvalidArgument);
  EXPECT_TRUE(s.all_trials().rows.empty());
  EXPECT_TRUE(s.sweeps().rows.empty());
  EXPECT_TRUE(s.devices().rows.empty());
  EXPECT_TRUE(s.all_bests().rows.empty());
}

// ---- journal mode: WAL while writing, rollback journal at rest (finding 4) ----

TEST(DbStore, LastWriterToCloseReturnsTheFileToRollbackJournal) {
  ScratchDir dir;
  const fs::path p = dir / "j.db";
  std::optional<Store> first(Store::open(p, Mode::read_write));
  std::optional<Store> second(Store::open(p, Mode::read_write));
  first->record_trial(make_trial("n=1", "a", 2.0));
  second->record_trial(make_trial("n=1", "b", 1.0));
  EXPECT_EQ(header_journal_mode(p), 2);
  EXPECT_TRUE(file_exists(sibling(p, "-wal")));

  // With another writer open the conversion is not possible: the file stays in WAL mode, and the
  // close does not wait for the other writer (busy timeout 0 for that statement).
  const auto start = std::chrono::steady_clock::now();
  first.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(header_journal_mode(p), 2);
  second->record_trial(make_trial("n=1", "c", 0.5));  // the other writer goes on

  second.reset();  // the last one converts
  EXPECT_EQ(header_journal_mode(p), 1);
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"j.db"});
  Store r = Store::open(p, Mode::read_only);
  EXPECT_FALSE(r.immutable());
  EXPECT_EQ(r.all_trials().rows.size(), 3u);
  EXPECT_EQ(r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1")->params_key, "c");

  // A reader holding the file does not stop a writer from closing; the file then stays in WAL
  // mode with its log, which later readers use without creating anything.
  {
    Store w = Store::open(p, Mode::read_write);
    w.record_trial(make_trial("n=2", "d", 1.0));
    EXPECT_EQ(r.all_trials().rows.size(), 4u);
  }
  EXPECT_EQ(r.all_trials().rows.size(), 4u);
}

}  // namespace
}  // namespace ktune::test
