// Helpers shared by the db_*_test.cpp files (one db_test binary): scratch directories, raw SQL
// against a file outside Store (to inspect it or make it foreign or hostile), sample records, and
// running a check in a child process (dropped privileges, or a deadline against hangs).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"

namespace ktune::test {

namespace fs = std::filesystem;
using Mode = Store::Mode;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected '" << (part) << "' in: " << (text)

/// A fresh directory, removed with everything in it (permissions restored first).
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const char* name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& p);
void write_bytes(const fs::path& p, const std::string& bytes);
bool file_exists(const fs::path& p);
fs::path sibling(const fs::path& db, const char* suffix);
/// The names in a directory, sorted.
std::set<std::string> listing(const fs::path& dir);
/// Bytes 18-19 of a SQLite header: 1 for a rollback journal, 2 for write-ahead logging.
int header_journal_mode(const fs::path& db);

/// Raw SQL against a file, outside Store.
void raw_exec(const fs::path& p, const char* sql);
std::int64_t raw_int(const fs::path& p, const std::string& sql);
std::string raw_text(const fs::path& p, const std::string& sql);

/// A value for raw_insert.
using Value = std::variant<std::nullptr_t, std::int64_t, double, std::string>;
using Row = std::vector<std::pair<std::string, Value>>;
/// Inserts one row with every value bound; returns its rowid.
std::int64_t raw_insert(const db::Connection& c, const std::string& table, const Row& row);
/// `row` with the named columns replaced (or added).
Row with(Row row, const Row& changes);

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

DeviceInfo test_device();
TrialRecord make_trial(const std::string& problem, const std::string& params, double median,
                       TrialStatus status = TrialStatus::ok, const std::string& hash = "h1");
bool is_timestamp(const std::string& s);
void expect_same_device(const DeviceInfo& a, const DeviceInfo& b);
/// A sweep record of test_device() for op "rmsnorm" and problem "n=*".
SweepRecord test_sweep(const std::string& strategy = "exhaustive");
/// A database with one device, one sweep, and `trials` trials over four problem keys; closed.
void populate(const fs::path& p, int trials);

/// Runs `check` where file permissions apply: in this process when it is not root, else in a
/// child that drops to nobody (root ignores permission bits). Returns "" on success, "skip: ..."
/// when no unprivileged identity is available, else what went wrong.
std::string run_unprivileged(const std::function<std::string()>& check);

/// Runs `f` in a child process and returns what it returned, or nullopt when it did not finish
/// within `limit` (the child is then killed): a hang fails a test instead of stopping the suite.
std::optional<std::string> run_with_deadline(const std::function<std::string()>& f,
                                             std::chrono::milliseconds limit);

}  // namespace ktune::test
