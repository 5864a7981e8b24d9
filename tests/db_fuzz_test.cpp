// Damaged and hostile databases through every reader: `ktune db list/show/export/check`, `ktune
// best` and the runtime's lookup. A real database (the shipped H100 one plus trials and sweeps
// written by the store) is byte-flipped and truncated 200 ways, and 50 hostile rows or schema
// changes are planted in copies of it. Every run must end (no hang), by exit (no crash), create
// nothing beside the database it reads, explain every refusal, and print no control characters.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "templates/op.hpp"
#include "tests/support/test_env.hpp"

extern char** environ;

namespace ktune {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeoutSeconds = 20.0;  // any run past this is a hang

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void spill(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

struct CliRun {
  int code = -1;          // exit status, when it exited
  int signal = 0;         // the signal that ended it, when one did
  bool hung = false;      // killed at kTimeoutSeconds
  std::string out, err;
};

/// Runs the ktune command with a private environment; output goes to files in `scratch`.
CliRun run_cli(const std::vector<std::string>& args, const fs::path& scratch) {
  const fs::path out = scratch / "stdout", err = scratch / "stderr";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv_s = {test::cli_path()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A private data and cache directory; no database reaches the command but the one named.
  std::vector<std::string> env_s = {"XDG_DATA_HOME=" + (scratch / "data").string(),
                                    "KTUNE_CACHE_DIR=" + (scratch / "cache").string(),
                                    "HOME=" + scratch.string(), "PATH=/usr/bin:/bin"};
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  CliRun r;
  if (rc != 0) {
    r.err = "posix_spawn failed";
    return r;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeoutSeconds);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.hung = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!r.hung) {
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// The first control character other than newline and tab in `s`, or -1.
int control_char(const std::string& s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return c;
  return -1;
}

/// True when some CSV cell, after an optional opening quote, starts as a spreadsheet formula
/// would (=, +, @, tab, CR, or - not followed by a digit: negative numbers are numbers).
bool csv_formula(const std::string& csv) {
  bool in_quotes = false;
  for (std::size_t i = 0; i < csv.size(); ++i) {
    const bool cell_start = !in_quotes && (i == 0 || csv[i - 1] == ',' || csv[i - 1] == '\n');
    if (cell_start) {
      const std::size_t k = csv[i] == '"' ? i + 1 : i;
      if (k < csv.size()) {
        const char c = csv[k];
        const bool digit_next =
            k + 1 < csv.size() && std::isdigit(static_cast<unsigned char>(csv[k + 1]));
        if (c == '=' || c == '+' || c == '@' || c == '\t' || c == '\r' || (c == '-' && !digit_next))
          return true;
      }
    }
    if (csv[i] == '"') in_quotes = !in_quotes;
  }
  return false;
}

// ---- the base database ----

/// A real database: the shipped H100 one, plus a sweep with trials of a fused op written by the
/// store (every table populated). Returns its bytes.
std::string base_database(const fs::path& dir) {
  const fs::path shipped = fs::path(KTUNE_SOURCE_DIR) / "db" / "shipped" / "h100.db";
  const fs::path path = dir / "base.db";
  fs::copy_file(shipped, path);
  {
    Store s = Store::open(path, Store::Mode::read_write);
    const std::vector<DeviceInfo> devices = s.devices().rows;
    if (devices.empty()) throw std::runtime_error("the shipped database has no device row");
    const DeviceInfo& device = devices.front();
    const Op& op = get_op("add_rmsnorm");
    const Problem problem = op.parse_problem("m=4096,n=4096");
    SweepRecord sweep;
    sweep.device_key = device.key();
    sweep.op = "add_rmsnorm";
    sweep.dtype = DType::bf16;
    sweep.problem_key = op.problem_key(problem);
    sweep.strategy = "exhaustive";
    sweep.command_line = "ktune sweep --op add_rmsnorm --shape m=4096,n=4096";
    const std::int64_t sweep_id = s.begin_sweep(sweep);
    int i = 0;
    for (const Params& p : test::all_points(op)) {
      if (op.check_params(p) || op.invalid_reason(p, problem, DType::bf16, device)) continue;
      TrialRecord t;
      t.sweep_id = sweep_id;
      t.device_key = device.key();
      t.op = "add_rmsnorm";
      t.dtype = DType::bf16;
      t.problem_key = sweep.problem_key;
      t.params_key = op.params_key(p);
      t.template_hash = op.template_hash();
      t.nvrtc_version = device.nvrtc_version;
      t.status = i % 7 == 3 ? TrialStatus::wrong_result : TrialStatus::ok;
      t.detail = t.status == TrialStatus::ok ? "" : "max error 0.5 at row 17";
      t.median_us = 40.0 + i;
      t.min_us = 39.0 + i;
      t.max_us = 45.0 + i;
      t.repetitions = 200;
      t.registers = 32;
      s.record_trial(t);
      if (++i == 40) break;
    }
  }
  std::string bytes = slurp(path);
  fs::remove(path);
  return bytes;
}

// ---- variants ----

struct Variant {
  std::string name;
  std::string bytes;               // the file
  bool hostile_row = false;        // a planted row or schema change (not a byte-level damage)
  bool expect_clean_check = false; // `db check` must find nothing (a harmless change)
};

std::vector<Variant> byte_variants(const std::string& base, int count) {
  std::vector<Variant> out;
  const std::size_t page = 4096;
  for (int seed = 0; seed < count; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 7919 + 17);
    const auto pick = [&](std::size_t n) {
      return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1));
    };
    Variant v;
    v.bytes = base;
    switch (seed % 4) {
      case 0: {  // one byte of the 100-byte file header
        const std::size_t at = pick(100);
        v.bytes[at] = static_cast<char>(v.bytes[at] ^ (1 + pick(255)));
        v.name = "header byte " + std::to_string(at);
        break;
      }
      case 1: {  // 1 to 16 bytes anywhere
        const std::size_t n = 1 + pick(16);
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t at = pick(v.bytes.size());
          v.bytes[at] = static_cast<char>(rng());
        }
        v.name = std::to_string(n) + " random bytes";
        break;
      }
      case 2: {  // truncated: anywhere, in the header, or at a page boundary
        std::size_t len = 0;
        switch (pick(3)) {
          case 0: len = pick(v.bytes.size()); break;
          case 1: len = pick(100); break;
          default: len = page * pick(v.bytes.size() / page); break;
        }
        v.bytes.resize(len);
        v.name = "truncated to " + std::to_string(len);
        break;
      }
      default: {  // a b-tree page header (page type, cell count, offsets) of some page
        const std::size_t pages = v.bytes.size() / page;
        const std::size_t p = 1 + pick(pages - 1);
        const std::size_t at = p * page + pick(12);
        v.bytes[at] = static_cast<char>(v.bytes[at] ^ (1 + pick(255)));
        v.name = "page " + std::to_string(p) + " header byte " + std::to_string(at % page);
        break;
      }
    }
    v.name = "flip#" + std::to_string(seed) + " " + v.name;
    out.push_back(std::move(v));
  }
  return out;
}

struct Hostile {
  const char* sql;
  bool harmless;  // `db check` must stay clean
};

// Each runs on its own copy of the base database through a raw connection (no ktune hardening).
const std::vector<Hostile>& hostile_statements() {
  static const std::vector<Hostile> list = {
      // devices
      {"UPDATE devices SET cc_major = 1099511627776", false},
      {"UPDATE devices SET cc_major = -1", false},
      {"UPDATE devices SET cc_minor = 100000", false},
      {"UPDATE devices SET name = char(27) || ']0;pwned' || char(7) || name", true},
      {"UPDATE devices SET sm_count = 'many'", false},
      {"UPDATE devices SET memory_bytes = 1e300", false},
      {"UPDATE devices SET copy_bandwidth = -5", false},
      {"UPDATE devices SET memory_bandwidth = -1", false},
      {"UPDATE devices SET memory_bandwidth = 'fast'", false},
      {"UPDATE devices SET name = ''", false},
      {"INSERT INTO devices SELECT key || char(10) || 'FORGED', name || char(13) || 'x', cc_major, "
       "cc_minor, sm_count, memory_bytes, l2_bytes, smem_optin, smem_per_sm, regs_per_block, "
       "regs_per_sm, max_threads_per_block, max_threads_per_sm, driver_version, nvrtc_version, "
       "copy_bandwidth, updated_at, memory_bandwidth FROM devices",
       true},
      {"UPDATE devices SET driver_version = x'0102'", false},
      // best
      {"UPDATE best SET params_key = printf('%.*c', 70000000, 'x') WHERE rowid = 1", false},
      // (block_m=192 becomes block_m=999999192: whatever the row's tile, out of the list.)
      {"UPDATE best SET params_key = replace(params_key, 'block_m=', 'block_m=999999') "
       "WHERE rowid = 2",
       false},
      {"UPDATE best SET params_key = 'block_m=-1' WHERE rowid = 3", false},
      {"UPDATE best SET params_key = '' WHERE rowid = 4", false},
      {"UPDATE best SET params_key = '=HYPERLINK(\"http://evil\",\"x\")' WHERE rowid = 5", false},
      {"UPDATE best SET params_key = char(27) || '[2J' || params_key WHERE rowid = 6", false},
      {"UPDATE best SET problem_key = replace(problem_key, 'hq=16', 'hq=0') WHERE rowid = 7",
       false},
      {"UPDATE best SET problem_key = ',,,=' WHERE rowid = 8", false},
      {"UPDATE best SET problem_key = printf('%.*c', 5000, 'b') WHERE rowid = 9", false},
      {"UPDATE best SET dtype = 'fp64' WHERE rowid = 10", false},
      {"UPDATE best SET dtype = 42 WHERE rowid = 11", false},
      {"UPDATE best SET op = 'no_such_op' WHERE rowid = 12", false},
      {"UPDATE best SET op = '' WHERE rowid = 13", false},
      {"UPDATE best SET median_us = -1 WHERE rowid = 1", false},
      {"UPDATE best SET median_us = 1e309 WHERE rowid = 2", false},
      {"UPDATE best SET median_us = 'fast' WHERE rowid = 3", false},
      {"UPDATE best SET template_hash = x'00ff' WHERE rowid = 4", false},
      {"UPDATE best SET device_key = '' WHERE rowid = 5", false},
      {"UPDATE best SET trial_id = 123456789 WHERE rowid = 6", false},
      {"INSERT INTO best SELECT device_key, op, dtype, problem_key, 'stale', params_key, "
       "median_us, NULL, updated_at FROM best",
       true},
      // trials
      {"UPDATE trials SET status = 'bogus' WHERE rowid = 1", false},
      {"UPDATE trials SET status = 'compile_timeout', median_us = 0 WHERE rowid = 2", true},
      {"UPDATE trials SET detail = printf('%.*c', 100000, 'd') || char(27) || '[31m' "
       "WHERE rowid = 3",
       true},
      {"UPDATE trials SET repetitions = 1099511627776 WHERE rowid = 4", false},
      {"UPDATE trials SET registers = 'x' WHERE rowid = 5", false},
      {"UPDATE trials SET compile_seconds = -3 WHERE rowid = 6", false},
      {"UPDATE trials SET created_at = char(27) || '[2J' WHERE rowid = 7", true},
      {"UPDATE trials SET sweep_id = 999 WHERE rowid = 8", false},
      {"UPDATE trials SET median_us = 1e309 WHERE rowid = 9", false},
      {"UPDATE trials SET params_key = '@SUM(1+1)*cmd|'' /C calc''!A0' WHERE rowid = 10", false},
      // sweeps
      {"UPDATE sweeps SET command_line = char(27) || ']0;pwned' || char(7) || 'ktune sweep'",
       true},
      {"UPDATE sweeps SET command_line = 'a' || char(10) || 'FORGED LINE'", true},
      {"UPDATE sweeps SET strategy = '=cmd|'' /C calc''!A0'", true},
      {"UPDATE sweeps SET dtype = 'int4' WHERE rowid = 1", false},
      // schema and header
      {"CREATE TRIGGER t AFTER INSERT ON trials BEGIN DELETE FROM best; END", false},
      {"CREATE VIEW v AS SELECT 1", false},
      {"PRAGMA application_id = 305419896", false},
      {"PRAGMA user_version = 99", false},
      {"DROP TABLE trials", false},
      {"CREATE TABLE extra (x); INSERT INTO extra VALUES (1), (2), (3)", true},
      {"DELETE FROM devices", true},
      {"PRAGMA journal_mode = WAL", true},
  };
  return list;
}

std::vector<Variant> hostile_variants(const std::string& base, const fs::path& dir) {
  std::vector<Variant> out;
  int i = 0;
  for (const Hostile& h : hostile_statements()) {
    const fs::path path = dir / ("hostile" + std::to_string(i) + ".db");
    spill(path, base);
    {
      db::Connection c(path, db::OpenMode::read_write_create);
      c.exec(h.sql);
    }
    Variant v;
    v.name = "hostile#" + std::to_string(i) + " " + std::string(h.sql).substr(0, 60);
    v.bytes = slurp(path);
    v.hostile_row = true;
    v.expect_clean_check = h.harmless;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path.string() + suffix);
    out.push_back(std::move(v));
    ++i;
  }
  return out;
}

// ---- the checks ----

class DbFuzz : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new test::TempDir;
    base_ = new std::string(base_database(work_->path()));
  }
  static void TearDownTestSuite() {
    delete base_;
    delete work_;
  }

  /// Every reader on one variant; failures name the variant.
  void check_variant(const Variant& v, int index) {
    const fs::path dir = work_->path() / ("v" + std::to_string(index));
    const fs::path scratch = work_->path() / ("s" + std::to_string(index));
    fs::create_directories(dir);
    fs::create_directories(scratch);
    const fs::path db = dir / "x.db";
    spill(db, v.bytes);
    const std::set<std::string> before = listing(dir);
    SCOPED_TRACE(v.name);

    struct Command {
      std::vector<std::string> args;
      bool json;  // output is JSON or CSV, checked separately
    };
    const std::string p = db.string();
    const std::vector<Command> commands = {
        {{"db", "list", "--db", p}, false},
        {{"db", "show", "--db", p}, false},
        {{"db", "export", "--db", p}, true},
        {{"db", "export", "--format", "csv", "--db", p}, true},
        {{"db", "check", "--db", p}, false},
        {{"best", "--op", "flash_attention", "--shape",
          "b=8,hq=16,hkv=16,nq=1024,nk=1024,d=64", "--arch", "sm_90a", "--no-shipped", "--db", p},
         false},
        {{"best", "--op", "add_rmsnorm", "--shape", "m=4096,n=4096", "--arch", "sm_90a",
          "--no-shipped", "--db", p},
         false},
    };
    for (const Command& c : commands) {
      std::string line;
      for (const std::string& a : c.args) line += a + " ";
      SCOPED_TRACE(line);
      const CliRun r = run_cli(c.args, scratch);
      ASSERT_FALSE(r.hung) << "no answer in " << kTimeoutSeconds << " s";
      ASSERT_EQ(r.signal, 0) << "killed by signal " << r.signal << "\n" << r.err;
      EXPECT_TRUE(r.code == 0 || r.code == 1 || r.code == 4)
          << "exit " << r.code << "\n" << r.err;
      if (r.code != 0) {
        // A refusal names the file and says why, in one line or a few.
        EXPECT_NE((r.err + r.out).find("x.db"), std::string::npos)
            << "unexplained exit " << r.code << ": " << r.err << r.out;
      }
      EXPECT_EQ(control_char(r.err), -1) << "control character in stderr: " << r.err;
      if (!c.json) {
        EXPECT_EQ(control_char(r.out), -1) << "control character in stdout";
      }
      if (c.json && c.args.size() > 3 && c.args[3] == "csv") {
        EXPECT_FALSE(csv_formula(r.out)) << "a CSV cell starts a formula";
      }
      if (c.args[1] == "check" && v.expect_clean_check) {
        EXPECT_EQ(r.code, 0) << "db check flags a harmless change:\n" << r.out << r.err;
      }
      if (c.args[1] == "check" && v.hostile_row && !v.expect_clean_check) {
        EXPECT_NE(r.code, 0) << "db check misses the planted problem:\n" << r.out;
      }
      EXPECT_EQ(listing(dir), before) << "files created beside the database";
    }

    // The lookup API: never throws for a bad database, explains refusals, dispatches only valid
    // parameters, creates nothing.
    const DeviceInfo device = *device_for_arch("sm_90a");
    for (const auto& [op_name, shape] : std::vector<std::pair<std::string, std::string>>{
             {"flash_attention", "b=8,hq=16,hkv=16,nq=1024,nk=1024,d=64"},
             {"add_rmsnorm", "m=4096,n=4096"}}) {
      const Op& op = get_op(op_name);
      const Problem problem = op.parse_problem(shape);
      TuningDatabases dbs(db, {});
      LookupResult found;
      ASSERT_NO_THROW(found = dbs.find(op, DType::bf16, problem, device));
      EXPECT_FALSE(op.check_params(found.params)) << op.params_key(found.params);
      EXPECT_FALSE(op.invalid_reason(found.params, problem, DType::bf16, device))
          << op.params_key(found.params);
      for (const DatabaseStatus& s : dbs.status()) {
        if (s.state != DatabaseStatus::State::loaded) {
          EXPECT_FALSE(s.reason.empty()) << s.path << " refused without a reason";
        }
        for (const std::string& row : s.skipped_rows) EXPECT_FALSE(row.empty());
      }
    }
    EXPECT_EQ(listing(dir), before) << "files created beside the database by the lookup";
    fs::remove_all(dir);
    fs::remove_all(scratch);
  }

  static test::TempDir* work_;
  static std::string* base_;
};

test::TempDir* DbFuzz::work_ = nullptr;
std::string* DbFuzz::base_ = nullptr;

TEST_F(DbFuzz, TheBaseDatabaseIsCleanAndMatches) {
  Variant v{"base", *base_, false, true};
  check_variant(v, 0);
  // The undamaged database answers exactly for a problem it holds.
  const fs::path db = work_->path() / "clean.db";
  spill(db, *base_);
  TuningDatabases dbs(db, {});
  DeviceInfo h100 = Store::open(db, Store::Mode::read_only).devices().rows.at(0);
  const Op& op = get_op("flash_attention");
  LookupResult r = dbs.find(op, DType::bf16,
                            op.parse_problem("b=8,hq=16,hkv=16,nq=1024,nk=1024,d=64"), h100);
  EXPECT_EQ(r.kind, Match::exact);
}

TEST_F(DbFuzz, ByteFlippedAndTruncatedCopies) {
  const std::vector<Variant> variants = byte_variants(*base_, 200);
  ASSERT_EQ(variants.size(), 200u);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    check_variant(variants[i], static_cast<int>(1000 + i));
    if (HasFatalFailure()) return;
  }
}

TEST_F(DbFuzz, HostileRowsAndSchemas) {
  const std::vector<Variant> variants = hostile_variants(*base_, work_->path());
  ASSERT_GE(variants.size(), 50u);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    check_variant(variants[i], static_cast<int>(2000 + i));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ktune
