// Tests of opening a database (db/schema.cpp): foreign, old, new and altered files (row 11),
// read-only opens and media (row 10), readers that create no files (finding 4), corruption
// (row 12) and hostile schema objects (row 13).
#include "db/schema.hpp"

#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

// ---- foreign, old, new and altered files (row 11) ----

TEST(DbRefuses, NewerAndOlderSchemaVersions) {
  ScratchDir dir;
  const fs::path p = dir / "v.db";
  populate(p, 3);
  raw_exec(p, "PRAGMA user_version = 4");
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string m = error_of([&] { Store::open(p, mode); });
    EXPECT_CONTAINS(m, p.string());
    EXPECT_CONTAINS(m, "schema version 4 is newer than this ktune supports (3)");
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
    EXPECT_EQ(r.all_trials().rows.size(), 20u);
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
  EXPECT_EQ(r.all_trials().rows.size(), 3u);
  EXPECT_THROW(r.record_trial(make_trial("n=1", "x", 1.0)), DatabaseError);
  EXPECT_FALSE(file_exists(dir / "odd "));
}

TEST(DbReadOnly, ReadOnlyDirectoryWorksForLookups) {
  ScratchDir dir;
  // What a Store leaves (rollback-journal mode), and a file an older ktune left in WAL mode.
  const fs::path p = dir / "shipped.db";
  populate(p, 12);
  const fs::path legacy = dir / "legacy.db";
  populate(legacy, 12);
  raw_exec(legacy, "PRAGMA journal_mode = WAL");
  ASSERT_EQ(header_journal_mode(p), 1);
  ASSERT_EQ(header_journal_mode(legacy), 2);
  const std::string before = read_bytes(p);
  const std::string legacy_before = read_bytes(legacy);
  const std::set<std::string> names = listing(dir.path());
  ASSERT_EQ(names, (std::set<std::string>{"legacy.db", "shipped.db"}));
  fs::permissions(dir.path(), fs::perms(0555));
  const std::string result = run_unprivileged([&]() -> std::string {
    for (const fs::path& file : {p, legacy}) {
      Store r = Store::open(file, Mode::read_only);
      // Only a WAL-mode file needs immutable=1; the other takes ordinary shared locks.
      if (r.immutable() != (file == legacy)) return "wrong open mode for " + file.string();
      auto b = r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1");
      if (!b || b->arch != "sm_90a") return "lookup failed";
      if (r.all_trials().rows.size() != 12) return "wrong trial count";
      if (r.integrity_check() != "ok") return "integrity_check failed";
    }
    return {};
  });
  fs::permissions(dir.path(), fs::perms(0755));
  if (result.rfind("skip:", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");
  EXPECT_EQ(listing(dir.path()), names);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(read_bytes(legacy), legacy_before);
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

// ---- readers create no files (finding 4) ----

/// Calls every reader once; returns how many rows they returned in all.
std::size_t read_everything(const Store& s) {
  const std::string dev = test_device().key();
  std::size_t n = 0;
  n += s.devices().rows.size();
  n += s.device(dev) ? 1 : 0;
  n += s.sweeps().rows.size();
  n += s.trials(dev, "rmsnorm", DType::bf16, "n=1", "h1").rows.size();
  n += s.best(dev, "rmsnorm", DType::bf16, "n=1", "h1") ? 1 : 0;
  n += s.bests("rmsnorm", DType::bf16).rows.size();
  n += s.all_bests().rows.size();
  n += s.all_trials().rows.size();
  (void)s.copy_bandwidth(dev);
  EXPECT_EQ(s.integrity_check(), "ok");
  EXPECT_TRUE(s.check().ok());
  return n;
}

TEST(DbReaders, ClosedDatabaseReadThroughEveryReaderCreatesNoFiles) {
  ScratchDir dir;
  const fs::path p = dir / "rest.db";
  populate(p, 10);
  // An older ktune left its files in WAL mode: a reader must not create -wal/-shm for it either.
  const fs::path legacy = dir / "legacy.db";
  populate(legacy, 10);
  raw_exec(legacy, "PRAGMA journal_mode = WAL");
  const std::set<std::string> names = listing(dir.path());
  ASSERT_EQ(names, (std::set<std::string>{"legacy.db", "rest.db"}));
  const std::string bytes = read_bytes(p), legacy_bytes = read_bytes(legacy);
  for (const fs::path& file : {p, legacy}) {
    Store r = Store::open(file, Mode::read_only);
    EXPECT_EQ(r.immutable(), file == legacy);
    EXPECT_EQ(read_everything(r), 1u + 1u + 1u + 3u + 1u + 4u + 4u + 10u) << file;
    EXPECT_EQ(listing(dir.path()), names) << "while reading " << file;
  }
  EXPECT_EQ(listing(dir.path()), names);
  EXPECT_EQ(read_bytes(p), bytes);
  EXPECT_EQ(read_bytes(legacy), legacy_bytes);
}

TEST(DbReaders, ReaderBesideAnOpenWriterSeesCommitsAndCreatesNothing) {
  ScratchDir dir;
  const fs::path p = dir / "live.db";
  populate(p, 4);
  std::optional<Store> writer(Store::open(p, Mode::read_write));
  writer->record_trial(make_trial("n=1", "while-open", 0.5));
  const std::set<std::string> names = listing(dir.path());
  ASSERT_EQ(names, (std::set<std::string>{"live.db", "live.db-shm", "live.db-wal"}));
  {
    Store r = Store::open(p, Mode::read_only);
    EXPECT_FALSE(r.immutable());  // locks: it sees the writer's commits as they come
    EXPECT_EQ(r.all_trials().rows.size(), 5u);
    EXPECT_EQ(r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1")->params_key,
              "while-open");
    writer->record_trial(make_trial("n=1", "later", 0.25));
    EXPECT_EQ(r.all_trials().rows.size(), 6u);
    EXPECT_EQ(r.best(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1")->params_key,
              "later");
    EXPECT_EQ(listing(dir.path()), names);
  }
  EXPECT_EQ(listing(dir.path()), names);  // the reader removed nothing either
  writer.reset();
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"live.db"});
  Store r = Store::open(p, Mode::read_only);
  EXPECT_EQ(r.all_trials().rows.size(), 6u);
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"live.db"});
}

TEST(DbReaders, LogWithoutItsIndexIsReadImmutableOnlyWhenEmpty) {
  ScratchDir work, copy;
  const fs::path p = work / "live.db";
  populate(p, 3);
  Store writer = Store::open(p, Mode::read_write);
  writer.record_trial(make_trial("n=1", "pending", 0.5));
  ASSERT_GT(fs::file_size(sibling(p, "-wal")), 0u);
  // Copied while the writer is open, without its -shm: the log holds a commit the main file lacks.
  const fs::path c = copy / "live.db";
  fs::copy_file(p, c);
  fs::copy_file(sibling(p, "-wal"), sibling(c, "-wal"));
  const std::set<std::string> names = listing(copy.path());
  const std::string m = error_of([&] { Store::open(c, Mode::read_only); });
  EXPECT_CONTAINS(m, c.string());
  EXPECT_CONTAINS(m, "-wal holds changes not yet in the main file");
  EXPECT_CONTAINS(m, "-shm");
  EXPECT_EQ(listing(copy.path()), names);  // no -shm made to read it

  // An empty log adds nothing: the main file alone is read, immutable.
  write_bytes(sibling(c, "-wal"), "");
  Store r = Store::open(c, Mode::read_only);
  EXPECT_TRUE(r.immutable());
  EXPECT_EQ(r.all_trials().rows.size(), 3u);
  EXPECT_EQ(listing(copy.path()), names);
}

TEST(DbReaders, EmptyPathAndOddPathsGetOneLineMessages) {
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    try {
      Store::open("", mode);
      ADD_FAILURE() << "an empty path opened";
    } catch (const InvalidArgument& e) {
      EXPECT_CONTAINS(e.what(), "the database path is empty");
    }
  }
  ScratchDir dir;
  const fs::path odd = dir / "new\nline \x1b[31mred.db";
  const std::string m = error_of([&] { Store::open(odd, Mode::read_only); });
  EXPECT_CONTAINS(m, "no such file");
  EXPECT_CONTAINS(m, "new\\nline \\x1b[31mred.db");
  EXPECT_EQ(m.find_first_of("\n\x1b"), std::string::npos) << m;
  // A name too long for the filesystem: said so, the path cut short.
  const fs::path huge = dir.path() / std::string(5000, 'x');
  for (Mode mode : {Mode::read_write, Mode::read_only}) {
    const std::string h = error_of([&] { Store::open(huge, mode); });
    EXPECT_CONTAINS(h, "File name too long");
    EXPECT_LT(h.size(), 1000u) << h;
  }
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
    for (const char* suffix : {"-wal", "-shm", "-journal"}) fs::remove(sibling(p, suffix));
    write_bytes(p, bytes);
    const Mode mode = variant % 2 == 0 ? Mode::read_only : Mode::read_write;
    const bool write = variant % 8 == 1;
    ++variant;
    try {
      Store s = Store::open(p, mode);
      (void)s.all_trials().rows;
      (void)s.all_bests().rows;
      (void)s.devices().rows;
      (void)s.sweeps().rows;
      (void)s.bests("rmsnorm", DType::bf16).rows;
      (void)s.best(dev, "rmsnorm", DType::bf16, "n=2", "h1");
      (void)s.trials(dev, "rmsnorm", DType::bf16, "n=3", "h1").rows;
      (void)s.integrity_check();
      if (write) s.record_trial(make_trial("n=2", "after", 0.5));
      ++worked;
    } catch (const DatabaseError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not a DatabaseError: " << e.what();
    }
    if (mode == Mode::read_only) {
      EXPECT_EQ(listing(dir.path()), (std::set<std::string>{"bad.db", "good.db"}))
          << what << ": a read-only open created files";
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
    EXPECT_CONTAINS(m, "contains a trigger \"evil");
    EXPECT_CONTAINS(m, "not trusted");
  }
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM sweeps WHERE device_key = 'pwned'"), 0);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM best WHERE params_key = 'evil'"), 0);
  EXPECT_EQ(raw_int(p, "SELECT count(*) FROM trials"), 5);

  const fs::path v = dir / "view.db";
  populate(v, 1);
  raw_exec(v, "CREATE VIEW fastest AS SELECT * FROM best");
  EXPECT_CONTAINS(error_of([&] { Store::open(v, Mode::read_only); }),
                  "contains a view \"fastest\"");
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


TEST(DbHostile, TablesWithoutARealRowidAreRefused) {
  ScratchDir dir;
  const fs::path p = dir / "norowid.db";
  populate(p, 2);
  raw_exec(p,
           "DROP TABLE best; CREATE TABLE best (device_key TEXT, op TEXT, dtype TEXT, "
           "problem_key TEXT, template_hash TEXT, params_key TEXT, median_us REAL, trial_id "
           "INTEGER, updated_at TEXT, PRIMARY KEY (device_key, op, dtype, problem_key, "
           "template_hash)) WITHOUT ROWID");
  for (Mode mode : {Mode::read_write, Mode::read_only})
    EXPECT_CONTAINS(error_of([&] { Store::open(p, mode); }), "table 'best' has no rowid");
  const fs::path q = dir / "shadow.db";
  populate(q, 2);
  raw_exec(q, "ALTER TABLE trials ADD COLUMN rowid INTEGER");
  EXPECT_CONTAINS(error_of([&] { Store::open(q, Mode::read_only); }),
                  "table 'trials' has a column named \"rowid\"");
}

}  // namespace
}  // namespace ktune::test
