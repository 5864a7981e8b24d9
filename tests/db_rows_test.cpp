// Tests of row reading (db/rows.cpp): a bad row is skipped alone, with a reason naming table,
// rowid, column and value, and never disables the database (finding 5); Store::check lists
// exactly the rows a reader would skip.
#include "db/rows.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

using Key = std::pair<std::string, std::int64_t>;  // (table, rowid)

const char* const kStamp = "2026-01-01T00:00:00Z";
const std::string kBig(70u << 20, 'p');  // over SQLite's 64 MiB length limit on ktune's connections

Row device_row(const std::string& key) {
  return {{"key", key},
          {"name", std::string("GPU ") + key},
          {"cc_major", std::int64_t{9}},
          {"cc_minor", std::int64_t{0}},
          {"sm_count", std::int64_t{132}},
          {"memory_bytes", std::int64_t{80} << 30},
          {"l2_bytes", std::int64_t{50} << 20},
          {"smem_optin", std::int64_t{232448}},
          {"smem_per_sm", std::int64_t{233472}},
          {"regs_per_block", std::int64_t{65536}},
          {"regs_per_sm", std::int64_t{65536}},
          {"max_threads_per_block", std::int64_t{1024}},
          {"max_threads_per_sm", std::int64_t{2048}},
          {"driver_version", std::int64_t{13000}},
          {"nvrtc_version", std::int64_t{13000}},
          {"copy_bandwidth", 0.0},
          {"updated_at", std::string(kStamp)},
          {"memory_bandwidth", std::int64_t{3'352'320'000'000}}};
}

Row sweep_row() {
  return {{"device_key", test_device().key()}, {"op", std::string("rmsnorm")},
          {"dtype", std::string("bf16")},      {"problem_key", std::string("n=*")},
          {"strategy", std::string("random")}, {"command_line", std::string("ktune sweep")},
          {"started_at", std::string(kStamp)}};
}

Row trial_row() {
  return {{"device_key", test_device().key()},
          {"op", std::string("rmsnorm")},
          {"dtype", std::string("bf16")},
          {"problem_key", std::string("n=1")},
          {"params_key", std::string("p")},
          {"template_hash", std::string("h1")},
          {"nvrtc_version", std::int64_t{12090}},
          {"status", std::string("ok")},
          {"detail", std::string()},
          {"median_us", 9.0},
          {"min_us", 8.0},
          {"max_us", 10.0},
          {"spread_pct", 1.0},
          {"repetitions", std::int64_t{10}},
          {"registers", std::int64_t{32}},
          {"shared_bytes", std::int64_t{0}},
          {"local_bytes", std::int64_t{0}},
          {"spill_bytes", std::int64_t{0}},
          {"compile_seconds", 0.5},
          {"created_at", std::string(kStamp)}};
}

Row best_row(const std::string& problem) {
  return {{"device_key", test_device().key()}, {"op", std::string("rmsnorm")},
          {"dtype", std::string("bf16")},      {"problem_key", problem},
          {"template_hash", std::string("h1")}, {"params_key", std::string("p")},
          {"median_us", 9.0},                   {"updated_at", std::string(kStamp)}};
}

/// A database with one good row per table (written by Store) and the hostile rows of finding 5
/// (written raw, after the schema's NOT NULL constraints were removed so that NULL, which is how
/// SQLite stores a NaN, can be stored). `bad` maps each hostile row to a part of its reason.
struct Hostile {
  fs::path path;
  std::map<Key, std::string> bad;
  std::map<std::string, Key> id;  // a name per hostile row, for the per-reader expectations
};

Hostile make_hostile(const fs::path& p) {
  Hostile h{p, {}, {}};
  {
    Store s = Store::open(p, Mode::read_write);
    s.upsert_device(test_device());
    s.begin_sweep(test_sweep());
    s.record_trial(make_trial("n=1", "good", 5.0));  // also the good best row
  }
  raw_exec(p,
           "PRAGMA writable_schema = ON; "
           "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'; "
           "PRAGMA writable_schema = OFF");
  db::Connection c(p, db::OpenMode::read_write_create);
  const auto add = [&](const char* name, const char* table, const Row& row,
                       const std::string& reason) {
    const Key key{table, raw_insert(c, table, row)};
    h.bad[key] = std::string(table) + " row " + std::to_string(key.second) + ": " + reason;
    h.id[name] = key;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  add("D_cc", "devices", with(device_row("big-cc"), {{"cc_major", std::int64_t{1} << 40}}),
      "cc_major is 1099511627776, outside the range of int");
  add("D_text", "devices", with(device_row("text-sm"), {{"sm_count", std::string("many")}}),
      "sm_count is text \"many\", expected an integer");
  add("S_dtype", "sweeps", with(sweep_row(), {{"dtype", std::string("fp64")}}),
      "dtype is \"fp64\", not one of fp32, fp16, bf16");
  add("S_op", "sweeps", with(sweep_row(), {{"op", std::string()}}), "op is empty");
  // Same key as the good trial, so that trials(key) meets them too.
  add("T_status", "trials", with(trial_row(), {{"status", std::string("bogus")}}),
      "status is \"bogus\", not a trial status");
  add("T_nan", "trials", with(trial_row(), {{"median_us", nan}}), "median_us is NULL");
  add("T_null", "trials", with(trial_row(), {{"spread_pct", nullptr}}), "spread_pct is NULL");
  add("T_negative", "trials", with(trial_row(), {{"min_us", -1.0}}),
      "min_us is -1, expected a finite number >= 0");
  add("T_inf", "trials", with(trial_row(), {{"max_us", inf}}),  // what 1e309 becomes
      "max_us is inf, expected a finite number >= 0");
  add("T_big", "trials", with(trial_row(), {{"params_key", kBig}}),
      "params_key cannot be read: string or blob too big");
  add("T_text", "trials", with(trial_row(), {{"registers", std::string("abc")}}),
      "registers is text \"abc\", expected an integer");
  add("T_blob", "trials", trial_row(), "created_at is a blob \"\\x00\\xff\", expected text");
  {
    // A TEXT column turns a bound number into text; only a blob keeps its type there.
    const std::string sql = "UPDATE trials SET created_at = x'00ff' WHERE rowid = " +
                            std::to_string(h.id["T_blob"].second);
    c.exec(sql.c_str());
  }
  // The GPU a trial ran on (schema version 2): NULL is "not recorded", anything else is checked.
  add("T_ordinal", "trials", with(trial_row(), {{"device_ordinal", std::int64_t{-3}}}),
      "device_ordinal is -3, expected 0..2147483647");
  add("T_pci", "trials", with(trial_row(), {{"pci_bus_id", std::string(5000, 'b')}}),
      "pci_bus_id is \"bbbb");
  // Other keys: only the unfiltered readers meet these.
  add("T_long", "trials", with(trial_row(), {{"problem_key", std::string(5000, 'n')}}),
      "problem_key is \"nnnn");
  add("T_op", "trials", with(trial_row(), {{"op", std::string()}}), "op is empty");
  add("T_dtype", "trials", with(trial_row(), {{"dtype", std::string("fp64")}}),
      "dtype is \"fp64\"");
  add("B_nan", "best", with(best_row("n=2"), {{"median_us", nan}}), "median_us is NULL");
  add("B_long", "best", with(best_row("n=3"), {{"params_key", std::string(5000, 'q')}}),
      "params_key is \"qqqq");
  add("B_negative", "best", with(best_row("n=5"), {{"median_us", -1.0}}), "median_us is -1");
  add("B_dtype", "best", with(best_row("n=4"), {{"dtype", std::string("fp64")}}),
      "dtype is \"fp64\"");
  // A valid best row on the invalid device: usable, with name and arch unknown.
  raw_insert(c, "best", with(best_row("n=6"), {{"device_key", std::string("big-cc")}}));
  return h;
}

/// Checks that `skipped` lists exactly the hostile rows `names`, each with its reason.
void expect_skipped(const Hostile& h, const std::vector<RowIssue>& skipped,
                    const std::vector<std::string>& names, const std::string& reader) {
  std::set<Key> want, got;
  for (const std::string& n : names) want.insert(h.id.at(n));
  for (const RowIssue& issue : skipped) {
    const Key key{issue.table, issue.rowid};
    EXPECT_TRUE(got.insert(key).second) << reader << ": listed twice: " << issue.reason;
    const auto bad = h.bad.find(key);
    if (bad == h.bad.end()) {
      ADD_FAILURE() << reader << ": skipped a good row: " << issue.reason;
      continue;
    }
    EXPECT_CONTAINS(issue.reason, bad->second) << " (" << reader << ")";
    EXPECT_EQ(issue.reason.find('\n'), std::string::npos);
    EXPECT_LT(issue.reason.size(), 300u) << "values are truncated: " << issue.reason.substr(0, 300);
  }
  EXPECT_EQ(got, want) << reader;
}

TEST(DbRows, EachBadRowIsSkippedAloneWithItsReason) {
  ScratchDir dir;
  const Hostile h = make_hostile(dir / "hostile.db");
  const std::string dev = test_device().key();
  for (Mode mode : {Mode::read_only, Mode::read_write}) {
    SCOPED_TRACE(mode == Mode::read_only ? "read_only" : "read_write");
    Store s = Store::open(h.path, mode);

    const Rows<DeviceInfo> devices = s.devices();
    ASSERT_EQ(devices.rows.size(), 1u);
    EXPECT_EQ(devices.rows[0].name, test_device().name);
    expect_skipped(h, devices.skipped, {"D_cc", "D_text"}, "devices");
    std::vector<RowIssue> skipped;
    EXPECT_TRUE(s.device(dev, &skipped));
    EXPECT_TRUE(skipped.empty());
    EXPECT_FALSE(s.device("big-cc", &skipped));
    expect_skipped(h, skipped, {"D_cc"}, "device");

    const Rows<SweepRecord> sweeps = s.sweeps();
    ASSERT_EQ(sweeps.rows.size(), 1u);
    expect_skipped(h, sweeps.skipped, {"S_dtype", "S_op"}, "sweeps");

    const Rows<TrialRecord> trials = s.trials(dev, "rmsnorm", DType::bf16, "n=1", "h1");
    ASSERT_EQ(trials.rows.size(), 1u);
    EXPECT_EQ(trials.rows[0].params_key, "good");
    expect_skipped(h, trials.skipped,
                   {"T_status", "T_nan", "T_null", "T_negative", "T_inf", "T_big", "T_text",
                    "T_blob", "T_ordinal", "T_pci"},
                   "trials");
    const Rows<TrialRecord> all = s.all_trials();
    ASSERT_EQ(all.rows.size(), 1u);
    expect_skipped(h, all.skipped,
                   {"T_status", "T_nan", "T_null", "T_negative", "T_inf", "T_big", "T_text",
                    "T_blob", "T_ordinal", "T_pci", "T_long", "T_op", "T_dtype"},
                   "all_trials");
    expect_skipped(h, s.all_trials("rmsnorm").skipped,
                   {"T_status", "T_nan", "T_null", "T_negative", "T_inf", "T_big", "T_text",
                    "T_blob", "T_ordinal", "T_pci", "T_long", "T_dtype"},
                   "all_trials(rmsnorm)");

    skipped.clear();
    const auto good = s.best(dev, "rmsnorm", DType::bf16, "n=1", "h1", &skipped);
    ASSERT_TRUE(good);
    EXPECT_EQ(good->params_key, "good");
    EXPECT_EQ(good->arch, "sm_90a");
    EXPECT_TRUE(skipped.empty());
    EXPECT_FALSE(s.best(dev, "rmsnorm", DType::bf16, "n=2", "h1", &skipped));
    expect_skipped(h, skipped, {"B_nan"}, "best(n=2)");
    skipped.clear();
    const auto on_bad_device = s.best("big-cc", "rmsnorm", DType::bf16, "n=6", "h1", &skipped);
    ASSERT_TRUE(on_bad_device);
    EXPECT_EQ(on_bad_device->device_name, "");
    EXPECT_EQ(on_bad_device->arch, "");
    expect_skipped(h, skipped, {"D_cc"}, "best(big-cc)");

    const Rows<BestRecord> bests = s.bests("rmsnorm", DType::bf16);
    ASSERT_EQ(bests.rows.size(), 2u);
    EXPECT_EQ(bests.rows[0].params_key, "good");  // ordered by device key: "NVIDIA..." < "big-cc"
    EXPECT_EQ(bests.rows[1].device_key, "big-cc");
    expect_skipped(h, bests.skipped, {"B_nan", "B_long", "B_negative", "D_cc"}, "bests");
    const Rows<BestRecord> all_bests = s.all_bests();
    ASSERT_EQ(all_bests.rows.size(), 2u);
    expect_skipped(h, all_bests.skipped, {"B_nan", "B_long", "B_negative", "B_dtype", "D_cc"},
                   "all_bests");

    const CheckReport report = s.check();
    EXPECT_EQ(report.integrity, "ok");
    EXPECT_FALSE(report.ok());
    EXPECT_EQ(report.rows_checked, 3u + 3u + 14u + 6u);
    std::vector<std::string> every;
    for (const auto& [name, key] : h.id) every.push_back(name);
    expect_skipped(h, report.issues, every, "check");
  }
}

TEST(DbRows, UnreadableValueInAFilteredColumnFallsBackToOneRowAtATime) {
  // The op of one row exceeds the length limit: a scan filtering on op stops there, so the reader
  // lists every rowid, fetches each row alone, and filters and orders in C++.
  ScratchDir dir;
  const fs::path p = dir / "bigop.db";
  populate(p, 8);
  std::int64_t big = 0;
  {
    db::Connection c(p, db::OpenMode::read_write_create);
    big = raw_insert(c, "trials", with(trial_row(), {{"op", kBig}}));
    raw_insert(c, "trials", with(trial_row(), {{"params_key", std::string("after")}}));
  }
  Store s = Store::open(p, Mode::read_only);
  const Rows<TrialRecord> got = s.all_trials("rmsnorm");
  ASSERT_EQ(got.rows.size(), 9u);
  for (std::size_t i = 1; i < got.rows.size(); ++i) EXPECT_LT(got.rows[i - 1].id, got.rows[i].id);
  EXPECT_EQ(got.rows.back().params_key, "after");
  ASSERT_EQ(got.skipped.size(), 1u);
  EXPECT_EQ(got.skipped[0].rowid, big);
  EXPECT_CONTAINS(got.skipped[0].reason, "trials row " + std::to_string(big) +
                                             ": op cannot be read: string or blob too big");
  EXPECT_EQ(s.all_trials().rows.size(), 9u);
  EXPECT_EQ(s.trials(test_device().key(), "rmsnorm", DType::bf16, "n=1", "h1").rows.size(), 3u);
  const CheckReport report = s.check();
  ASSERT_EQ(report.issues.size(), 1u);
  EXPECT_EQ(report.issues[0].rowid, big);
}

TEST(DbRows, CorruptOverflowPageSkipsOnlyItsRow) {
  ScratchDir dir;
  const fs::path p = dir / "overflow.db";
  populate(p, 4);
  std::int64_t long_row = 0;
  {
    Store s = Store::open(p, Mode::read_write);
    TrialRecord t = make_trial("n=1", "long-detail", 3.0);
    t.detail = std::string(20000, 'Z');  // spills onto overflow pages
    long_row = s.record_trial(t);
    s.record_trial(make_trial("n=2", "after", 4.0));
  }
  // Point the first overflow page of the detail somewhere past the end of the file.
  std::string bytes = read_bytes(p);
  const std::size_t page = 4096;
  bool broken = false;
  for (std::size_t at = page; at + page <= bytes.size() && !broken; at += page) {
    if (bytes.compare(at + 4, page - 4, std::string(page - 4, 'Z')) != 0) continue;
    bytes.replace(at, 4, "\x7f\xff\xff\xff");
    broken = true;
  }
  ASSERT_TRUE(broken) << "no overflow page found";
  write_bytes(p, bytes);

  Store s = Store::open(p, Mode::read_only);
  const Rows<TrialRecord> got = s.all_trials();
  EXPECT_EQ(got.rows.size(), 5u);
  ASSERT_EQ(got.skipped.size(), 1u);
  EXPECT_EQ(got.skipped[0].rowid, long_row);
  EXPECT_CONTAINS(got.skipped[0].reason, "trials row " + std::to_string(long_row) +
                                             ": detail cannot be read");
  EXPECT_TRUE(s.best(test_device().key(), "rmsnorm", DType::bf16, "n=2", "h1"));
  const CheckReport report = s.check();
  EXPECT_NE(report.integrity, "ok");
  ASSERT_EQ(report.issues.size(), 1u);
  EXPECT_EQ(report.issues[0].rowid, long_row);
}

}  // namespace
}  // namespace ktune::test
