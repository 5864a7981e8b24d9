// Reading rows one at a time, each checked alone: a value SQLite refuses to return (too long, on a
// corrupt page), an integer outside its C++ type, an unknown dtype or status, a NaN or negative
// timing, an empty or absurdly long key. A bad row is skipped with its reason; the others stay
// usable. Private to db/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"

namespace ktune::db {

/// Longest op, problem, params, template, device key or name, strategy or timestamp ktune writes or
/// reads; longer values are refused on write and skipped on read. Free text (a trial's detail, a
/// sweep's command line) is bounded by SQLite's length limit only.
constexpr std::size_t kMaxKeyBytes = 4096;

/// Why a row was skipped: a one-line reason naming the table, rowid, column and value.
struct BadRow {
  std::string reason;
};

/// A devices row: the fingerprint the readers return and what only the row holds.
struct DeviceRow {
  std::string key;
  DeviceInfo info;
  double copy_bandwidth = 0.0;
  std::string updated_at;         // UTC ISO-8601, set by the database
};

/// How the rows of one table are fetched and checked.
template <class T>
struct Table {
  const char* name;     // as in RowIssue::table
  const char* columns;  // the select list of a fetch by rowid
  const char* order;    // the readers' ORDER BY
  T (*read)(const Statement& row, const char* table, std::int64_t rowid);  // throws BadRow
  bool (*less)(const T& a, const T& b);                                     // `order` in C++
};

extern const Table<DeviceRow> kDevices;  // the current schema's
/// The devices table as a file of `schema_version` holds it (before 3: no memory_bandwidth).
const Table<DeviceRow>& devices_table(std::int64_t schema_version);
extern const Table<SweepRecord> kSweeps;
extern const Table<TrialRecord> kTrials;    // the current schema's
/// The trials table as a file of `schema_version` holds it (version 1: no device columns).
const Table<TrialRecord>& trials_table(std::int64_t schema_version);
extern const Table<BestRecord> kBest;  // device_name and arch stay empty: they are not in the row

/// Keeps one read transaction open while a reader runs, so that all its rows come from one
/// snapshot; does nothing when a transaction is already open. Never throws from the destructor.
class ReadSnapshot {
 public:
  ReadSnapshot(sqlite3* db, const std::string& label);
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  ~ReadSnapshot();

 private:
  sqlite3* db_;
  bool owned_ = false;
};

using Binder = std::function<void(Statement&)>;

/// The rowids a reader visits: those matching `filter` (SQL with ?N values that `bind` binds) in
/// `order`. When that scan stops on a value it cannot read, every rowid of the table instead, with
/// `filtered` false: the caller then filters and sorts the records itself. Throws DatabaseError
/// when even that scan fails (the table itself is unreadable).
struct RowIds {
  std::vector<std::int64_t> ids;
  bool filtered = true;
};
RowIds scan_rowids(sqlite3* db, const std::string& label, const char* table,
                   const std::string& filter, const char* order, const Binder& bind);

/// Fetches rows of one table by rowid, with one prepared statement.
class RowFetcher {
 public:
  RowFetcher(sqlite3* db, const std::string& label, const char* table, const char* columns);
  /// The statement positioned on the row, or nullptr when there is no such row. Throws BadRow
  /// naming the column when SQLite cannot return a value of the row; DatabaseError when the
  /// failure is not the row's (I/O, locking).
  const Statement* fetch(std::int64_t rowid);

 private:
  sqlite3* db_;
  std::string label_;
  const char* table_;
  Statement stmt_;
};

/// The rows of `table` that match (`filter` in SQL, `keep` in C++: they must agree), in the
/// table's order, each read and checked alone; bad rows go to `skipped`.
template <class T, class Keep>
Rows<T> read_rows(sqlite3* db, const std::string& label, const Table<T>& table,
                  const std::string& filter, const Binder& bind, Keep keep) {
  ReadSnapshot snapshot(db, label);
  const RowIds ids = scan_rowids(db, label, table.name, filter, table.order, bind);
  RowFetcher fetcher(db, label, table.name, table.columns);
  Rows<T> out;
  for (const std::int64_t id : ids.ids) {
    try {
      const Statement* row = fetcher.fetch(id);
      if (row == nullptr) continue;
      T record = table.read(*row, table.name, id);
      if (ids.filtered || keep(record)) out.rows.push_back(std::move(record));
    } catch (const BadRow& bad) {
      out.skipped.push_back({table.name, id, bad.reason});
    }
  }
  if (!ids.filtered) std::stable_sort(out.rows.begin(), out.rows.end(), table.less);
  return out;
}

/// Every row of `table` (for Store::check).
template <class T>
Rows<T> read_all(sqlite3* db, const std::string& label, const Table<T>& table) {
  return read_rows(db, label, table, "1", [](Statement&) {}, [](const T&) { return true; });
}

}  // namespace ktune::db
