// Schema version 1 files (written before each trial recorded its GPU) and version 2 files (before
// each device recorded its memory bandwidth): read as they are, brought to the current version by
// the first writer, once, however many writers open them at once; merged with current files.
#include <thread>

#include "db/merge.hpp"
#include "db_test_support.hpp"

namespace ktune::test {
namespace {

/// populate()'s database as ktune wrote it before version 2: the same tables without the device
/// columns, which version 2 appends to trials.
void make_version1(const fs::path& p, int trials) {
  populate(p, trials);
  raw_exec(p,
           "ALTER TABLE trials DROP COLUMN pci_bus_id; ALTER TABLE trials DROP COLUMN device_ordinal; "
           "ALTER TABLE devices DROP COLUMN memory_bandwidth; PRAGMA user_version = 1");
}

/// populate()'s database as ktune wrote it before version 3: devices without memory_bandwidth.
void make_version2(const fs::path& p, int trials) {
  populate(p, trials);
  raw_exec(p, "ALTER TABLE devices DROP COLUMN memory_bandwidth; PRAGMA user_version = 2");
}

/// How many columns of `table` are called `name` (0 or 1).
std::int64_t columns_named(const fs::path& p, const std::string& name,
                           const std::string& table = "trials") {
  return raw_int(p, "SELECT count(*) FROM pragma_table_info('" + table + "') WHERE name = '" +
                        name + "'");
}

TEST(DbMigration, Version1IsReadAsItIsAndLeftUnchanged) {
  ScratchDir dir;
  const fs::path p = dir / "v1.db";
  make_version1(p, 10);
  const std::string before = read_bytes(p);
  {
    Store s = Store::open(p, Mode::read_only);
    EXPECT_EQ(s.schema_version(), 1);
    const Rows<TrialRecord> trials = s.all_trials();
    EXPECT_TRUE(trials.skipped.empty());
    ASSERT_EQ(trials.rows.size(), 10u);
    for (const TrialRecord& t : trials.rows) {
      EXPECT_EQ(t.device_ordinal, -1);  // not recorded
      EXPECT_EQ(t.pci_bus_id, "");
    }
    EXPECT_EQ(s.trials(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1").rows.size(), 3u);
    const CheckReport report = s.check();
    EXPECT_TRUE(report.ok()) << report.integrity;
    EXPECT_EQ(report.rows_checked, 1u + 1u + 10u + 4u);
  }
  EXPECT_EQ(read_bytes(p), before) << "a read-only open changed a version 1 file";
  EXPECT_EQ(columns_named(p, "device_ordinal"), 0);
}

TEST(DbMigration, AWriterBringsVersion1ToVersion2AndKeepsEveryRow) {
  ScratchDir dir;
  const fs::path p = dir / "v1.db";
  make_version1(p, 10);
  for (int open = 0; open < 2; ++open) {  // the second open finds it done
    Store s = Store::open(p, Mode::read_write);
    EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
    if (open == 1) continue;
    TrialRecord t = make_trial("n=9", "block=99", 1.5);
    t.device_ordinal = 2;
    t.pci_bus_id = "0000:1b:00.0";
    s.record_trial(t);
  }
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(columns_named(p, "device_ordinal"), 1);
  EXPECT_EQ(columns_named(p, "pci_bus_id"), 1);
  Store s = Store::open(p, Mode::read_only);
  const Rows<TrialRecord> trials = s.all_trials();
  ASSERT_EQ(trials.rows.size(), 11u);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(trials.rows[i].device_ordinal, -1);
  EXPECT_EQ(trials.rows[10].device_ordinal, 2);
  EXPECT_EQ(trials.rows[10].pci_bus_id, "0000:1b:00.0");
  EXPECT_TRUE(s.check().ok());
}

TEST(DbMigration, AColumnAlreadyThereIsKept) {
  // A version 1 file may carry extra columns (they are tolerated); one named like a new column
  // is not added twice.
  ScratchDir dir;
  const fs::path p = dir / "v1.db";
  populate(p, 3);
  raw_exec(p,
           "ALTER TABLE trials DROP COLUMN pci_bus_id; ALTER TABLE devices DROP COLUMN "
           "memory_bandwidth; PRAGMA user_version = 1");
  Store::open(p, Mode::read_write);
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(columns_named(p, "device_ordinal"), 1);
  EXPECT_EQ(columns_named(p, "pci_bus_id"), 1);
}

TEST(DbMigration, WritersOpeningOneVersion1FileAtOnceMigrateItOnce) {
  ScratchDir dir;
  const fs::path p = dir / "v1.db";
  make_version1(p, 10);
  constexpr int kWriters = 4;
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      try {
        Store s = Store::open(p, Mode::read_write);
        TrialRecord t = make_trial("n=" + std::to_string(w), "writer" + std::to_string(w), 2.0);
        t.device_ordinal = w;
        s.record_trial(t);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(columns_named(p, "device_ordinal"), 1);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM trials"), 10 + kWriters);
  EXPECT_EQ(raw_int(p, "SELECT count(DISTINCT device_ordinal) FROM trials"), kWriters);
  EXPECT_TRUE(Store::open(p, Mode::read_only).check().ok());
}

TEST(DbMigration, MergeTakesVersion1AndVersion2Inputs) {
  ScratchDir dir;
  const fs::path old_file = dir / "old.db", new_file = dir / "new.db", out = dir / "out.db";
  make_version1(old_file, 5);
  {
    Store s = Store::open(new_file, Mode::read_write);
    s.upsert_device(test_device());
    TrialRecord t = make_trial("n=7", "block=7", 0.5);
    t.device_ordinal = 1;
    t.pci_bus_id = "0000:c1:00.0";
    s.record_trial(t);
  }
  const MergeReport report = merge_databases(out, {old_file, new_file});
  EXPECT_TRUE(report.skipped.empty());
  EXPECT_EQ(report.trials, 6u);
  EXPECT_EQ(raw_int(old_file, "PRAGMA user_version"), 1) << "an input is only read";
  Store s = Store::open(out, Mode::read_only);
  EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
  int recorded = 0;
  for (const TrialRecord& t : s.all_trials().rows) {
    if (t.params_key == "block=7") {
      EXPECT_EQ(t.device_ordinal, 1);
      EXPECT_EQ(t.pci_bus_id, "0000:c1:00.0");
      ++recorded;
    } else {
      EXPECT_EQ(t.device_ordinal, -1);
    }
  }
  EXPECT_EQ(recorded, 1);
  // Merging again adds nothing: the device fields are part of a trial's identity.
  EXPECT_EQ(merge_databases(out, {old_file, new_file}).trials_added, 0u);
}

TEST(DbMigration, Version2ReadsTheBandwidthAsUnknownAndAWriterAddsIt) {
  ScratchDir dir;
  const fs::path p = dir / "v2.db";
  make_version2(p, 4);
  const std::string before = read_bytes(p);
  {
    Store s = Store::open(p, Mode::read_only);
    EXPECT_EQ(s.schema_version(), 2);
    const std::optional<DeviceInfo> d = s.device(test_device().key());
    ASSERT_TRUE(d);
    EXPECT_EQ(d->memory_bandwidth, 0);  // unknown
    EXPECT_EQ(d->sm_count, test_device().sm_count);
    EXPECT_TRUE(s.check().ok());
  }
  EXPECT_EQ(read_bytes(p), before) << "a read-only open changed a version 2 file";
  {
    Store s = Store::open(p, Mode::read_write);
    EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(s.device(test_device().key())->memory_bandwidth, 0);  // still unknown
    EXPECT_EQ(s.all_trials().rows.size(), 4u);
    s.upsert_device(test_device());  // the device seen again
  }
  EXPECT_EQ(raw_int(p, "PRAGMA user_version"), 3);
  EXPECT_EQ(columns_named(p, "memory_bandwidth", "devices"), 1);
  Store s = Store::open(p, Mode::read_only);
  EXPECT_EQ(s.device(test_device().key())->memory_bandwidth, test_device().memory_bandwidth);
  EXPECT_TRUE(s.check().ok());
}

TEST(DbMigration, MergeKeepsABandwidthAVersion2RowDoesNotKnow) {
  // The kept devices row is the one updated last; when that is a version 2 row, the bandwidth
  // another input recorded is kept with it.
  ScratchDir dir;
  const fs::path old_file = dir / "old.db", new_file = dir / "new.db", out = dir / "out.db";
  populate(new_file, 2);
  raw_exec(new_file, "UPDATE devices SET updated_at = '2026-01-01T00:00:00Z'");
  make_version2(old_file, 3);
  raw_exec(old_file, "UPDATE devices SET updated_at = '2026-06-01T00:00:00Z'");
  EXPECT_TRUE(merge_databases(out, {old_file, new_file}).skipped.empty());
  Store s = Store::open(out, Mode::read_only);
  const std::optional<DeviceInfo> d = s.device(test_device().key());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->memory_bandwidth, test_device().memory_bandwidth);
  EXPECT_EQ(raw_int(old_file, "PRAGMA user_version"), 2) << "an input is only read";
}

TEST(DbMigration, AnOrdinalBelowMinusOneIsRefused) {
  ScratchDir dir;
  Store s = Store::open(dir / "t.db", Mode::read_write);
  TrialRecord t = make_trial("n=1", "p", 1.0);
  t.device_ordinal = -2;
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
  t.device_ordinal = 0;
  t.pci_bus_id = std::string(5000, 'x');
  EXPECT_THROW(s.record_trial(t), InvalidArgument);
}

}  // namespace
}  // namespace ktune::test
