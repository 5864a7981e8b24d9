#include "db/rows.hpp"

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "ktune/error.hpp"
#include "runtime/core/types.hpp"

namespace ktune::db {
namespace {

// Failures that belong to one row (a value over the length limit, a damaged page of its record)
// rather than to the file or the connection (I/O, locks, memory).
bool row_level(int rc) {
  switch (rc & 0xff) {
    case SQLITE_TOOBIG:
    case SQLITE_CORRUPT:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
    case SQLITE_FORMAT:
      return true;
    default:
      return false;
  }
}

std::string prefix(const char* table, std::int64_t rowid) {
  return std::string(table) + " row " + std::to_string(rowid) + ": ";
}

template <class I>
const char* type_name();
template <>
const char* type_name<int>() {
  return "int";
}
template <>
const char* type_name<std::int64_t>() {
  return "int64";
}

// Checked access to the columns of one fetched row. Every failure throws BadRow naming the
// table, rowid, column and value.
class Cells {
 public:
  Cells(const Statement& row, const char* table, std::int64_t rowid)
      : s_(row.get()), table_(table), rowid_(rowid) {}

  // Non-empty text of at most kMaxKeyBytes.
  std::string key(int c) const {
    std::string v = text(c, kMaxKeyBytes);
    if (v.empty()) bad(c, "is empty");
    return v;
  }
  // Text of at most kMaxKeyBytes, possibly empty.
  std::string name(int c) const { return text(c, kMaxKeyBytes); }
  // Text bounded by SQLite's length limit only.
  std::string free_text(int c) const { return text(c, std::numeric_limits<std::size_t>::max()); }

  template <class I>
  I integer(int c) const {
    if (sqlite3_column_type(s_, c) != SQLITE_INTEGER)
      bad(c, "is " + shown(c) + ", expected an integer");
    const std::int64_t v = sqlite3_column_int64(s_, c);
    if (v < std::numeric_limits<I>::min() || v > std::numeric_limits<I>::max())
      bad(c, "is " + std::to_string(v) + ", outside the range of " + type_name<I>());
    return static_cast<I>(v);
  }

  // An integer in [lo, hi]: a count, size or version a real GPU can have.
  template <class I>
  I integer(int c, I lo, I hi) const {
    const I v = integer<I>(c);
    if (v < lo || v > hi)
      bad(c, "is " + std::to_string(v) + ", expected " + std::to_string(lo) + ".." +
                 std::to_string(hi));
    return v;
  }

  // A reference to another row; NULL means none (0).
  std::int64_t optional_id(int c) const {
    return is_null(c) ? 0 : integer<std::int64_t>(c);
  }

  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }

  // A timing, size or rate: finite and >= 0, as the writers require.
  double amount(int c) const {
    const int type = sqlite3_column_type(s_, c);
    if (type == SQLITE_NULL)
      bad(c, "is NULL (SQLite stores a NaN as NULL), expected a finite number >= 0");
    if (type != SQLITE_FLOAT && type != SQLITE_INTEGER)
      bad(c, "is " + shown(c) + ", expected a finite number >= 0");
    const double v = sqlite3_column_double(s_, c);
    if (!std::isfinite(v) || v < 0) bad(c, "is " + shown(c) + ", expected a finite number >= 0");
    return v;
  }

  // A time that must be measured: finite and > 0 (a best row's median).
  double time(int c) const {
    const double v = amount(c);
    if (!(v > 0)) bad(c, "is " + shown(c) + ", expected a measured time > 0");
    return v;
  }

  DType dtype(int c) const {
    const std::string v = text(c, kMaxKeyBytes);
    const std::optional<DType> d = parse_dtype(v);
    // Only the names the writers store: the readers' SQL filters compare them exactly.
    if (!d || v != dtype_name(*d))
      bad(c, "is " + ktune::quoted(v) + ", not one of fp32, fp16, bf16, e4m3");
    return *d;
  }

  TrialStatus status(int c) const {
    const std::string v = text(c, kMaxKeyBytes);
    const std::optional<TrialStatus> st = parse_status(v);
    if (!st)
      bad(c, "is " + ktune::quoted(v) + ", not a trial status (ok, invalid, compile_error, ...)");
    return *st;
  }

 private:
  [[noreturn]] void bad(int c, const std::string& what) const {
    const char* column = sqlite3_column_name(s_, c);
    throw BadRow{prefix(table_, rowid_) + (column != nullptr ? column : "?") + " " + what};
  }

  std::string text(int c, std::size_t max) const {
    if (sqlite3_column_type(s_, c) != SQLITE_TEXT) bad(c, "is " + shown(c) + ", expected text");
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    std::string v(p != nullptr ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s_, c)));
    if (v.size() > max)
      bad(c, "is " + ktune::quoted(v) + ", longer than the " + std::to_string(max) + "-byte limit");
    return v;
  }

  // The value as a message shows it.
  std::string shown(int c) const {
    switch (sqlite3_column_type(s_, c)) {
      case SQLITE_NULL:
        return "NULL";
      case SQLITE_INTEGER:
        return std::to_string(sqlite3_column_int64(s_, c));
      case SQLITE_FLOAT: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(s_, c));
        return buf;
      }
      case SQLITE_TEXT: {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
        return "text " + ktune::quoted(bytes_of(p, c));
      }
      default: {
        const auto* p = static_cast<const char*>(sqlite3_column_blob(s_, c));
        return "a blob " + ktune::quoted(bytes_of(p, c));
      }
    }
  }

  std::string_view bytes_of(const char* p, int c) const {
    if (p == nullptr) return {};
    return std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c)));
  }

  sqlite3_stmt* s_;
  const char* table_;
  std::int64_t rowid_;
};

DeviceRow read_device(const Statement& row, const char* table, std::int64_t rowid) {
  const Cells c(row, table, rowid);
  DeviceRow r;
  r.key = c.key(0);
  DeviceInfo& d = r.info;
  d.name = c.key(1);
  // Ranges a real GPU's fingerprint falls in: the compute capability becomes a compile target
  // ("sm_90a") and the limits feed the validity checks of `ktune best --device`.
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
  d.cc_major = c.integer<int>(2, 1, 99);
  d.cc_minor = c.integer<int>(3, 0, 9);
  d.sm_count = c.integer<int>(4, 1, 100000);
  d.memory_bytes = c.integer<std::int64_t>(5, 0, kMaxInt64);
  d.l2_bytes = c.integer<std::int64_t>(6, 0, kMaxInt64);
  d.smem_optin_per_block = c.integer<int>(7, 0, kMaxInt);
  d.smem_per_sm = c.integer<int>(8, 0, kMaxInt);
  d.regs_per_block = c.integer<int>(9, 0, kMaxInt);
  d.regs_per_sm = c.integer<int>(10, 0, kMaxInt);
  d.max_threads_per_block = c.integer<int>(11, 0, kMaxInt);
  d.max_threads_per_sm = c.integer<int>(12, 0, kMaxInt);
  d.driver_version = c.integer<int>(13, 0, kMaxInt);
  d.nvrtc_version = c.integer<int>(14, 0, kMaxInt);
  r.copy_bandwidth = c.amount(15);
  r.updated_at = c.name(16);
  // 0: unknown (rows of schema version 2, or a driver that does not report it); at most 1 PB/s.
  d.memory_bandwidth = c.integer<std::int64_t>(17, 0, 1'000'000'000'000'000);
  return r;
}

SweepRecord read_sweep(const Statement& row, const char* table, std::int64_t rowid) {
  const Cells c(row, table, rowid);
  SweepRecord r;
  r.id = c.integer<std::int64_t>(0);
  r.device_key = c.key(1);
  r.op = c.key(2);
  r.dtype = c.dtype(3);
  r.problem_key = c.key(4);
  r.strategy = c.name(5);
  r.command_line = c.free_text(6);
  r.started_at = c.name(7);
  return r;
}

TrialRecord read_trial(const Statement& row, const char* table, std::int64_t rowid) {
  const Cells c(row, table, rowid);
  TrialRecord t;
  t.id = c.integer<std::int64_t>(0);
  t.sweep_id = c.optional_id(1);
  t.device_key = c.key(2);
  t.op = c.key(3);
  t.dtype = c.dtype(4);
  t.problem_key = c.key(5);
  t.params_key = c.name(6);
  t.template_hash = c.name(7);
  t.nvrtc_version = c.integer<int>(8);
  t.status = c.status(9);
  t.detail = c.free_text(10);
  t.median_us = c.amount(11);
  t.min_us = c.amount(12);
  t.max_us = c.amount(13);
  t.spread_pct = c.amount(14);
  t.repetitions = c.integer<int>(15);
  t.registers = c.integer<int>(16);
  t.shared_bytes = c.integer<int>(17);
  t.local_bytes = c.integer<int>(18);
  t.spill_bytes = c.integer<int>(19);
  t.compile_seconds = c.amount(20);
  t.created_at = c.name(21);
  // NULL where the GPU was not recorded (rows of schema version 1).
  t.device_ordinal = c.is_null(22) ? -1 : c.integer<int>(22, 0, std::numeric_limits<int>::max());
  t.pci_bus_id = c.is_null(23) ? std::string() : c.name(23);
  return t;
}

BestRecord read_best(const Statement& row, const char* table, std::int64_t rowid) {
  const Cells c(row, table, rowid);
  BestRecord b;
  b.device_key = c.key(0);
  b.op = c.key(1);
  b.dtype = c.dtype(2);
  b.problem_key = c.key(3);
  b.template_hash = c.name(4);
  b.params_key = c.name(5);
  b.median_us = c.time(6);
  b.trial_id = c.optional_id(7);
  b.updated_at = c.name(8);
  return b;
}

}  // namespace

// The `less` functions order as SQLite's BINARY collation does (memcmp, then length), which is
// std::string's order.
const Table<DeviceRow> kDevices = {
    "devices",
    "key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes, smem_optin, smem_per_sm, "
    "regs_per_block, regs_per_sm, max_threads_per_block, max_threads_per_sm, driver_version, "
    "nvrtc_version, copy_bandwidth, updated_at, memory_bandwidth",
    "key",
    read_device,
    [](const DeviceRow& a, const DeviceRow& b) { return a.key < b.key; },
};

// Schema versions 1 and 2 have no memory_bandwidth: it reads as unknown.
const Table<DeviceRow> kDevicesV2 = {
    "devices",
    "key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes, smem_optin, smem_per_sm, "
    "regs_per_block, regs_per_sm, max_threads_per_block, max_threads_per_sm, driver_version, "
    "nvrtc_version, copy_bandwidth, updated_at, 0",
    "key",
    read_device,
    [](const DeviceRow& a, const DeviceRow& b) { return a.key < b.key; },
};

const Table<DeviceRow>& devices_table(std::int64_t schema_version) {
  return schema_version >= 3 ? kDevices : kDevicesV2;
}

const Table<SweepRecord> kSweeps = {
    "sweeps",
    "id, device_key, op, dtype, problem_key, strategy, command_line, started_at",
    "id",
    read_sweep,
    [](const SweepRecord& a, const SweepRecord& b) { return a.id < b.id; },
};

const Table<TrialRecord> kTrials = {
    "trials",
    "id, sweep_id, device_key, op, dtype, problem_key, params_key, template_hash, nvrtc_version, "
    "status, detail, median_us, min_us, max_us, spread_pct, repetitions, registers, shared_bytes, "
    "local_bytes, spill_bytes, compile_seconds, created_at, device_ordinal, pci_bus_id",
    "id",
    read_trial,
    [](const TrialRecord& a, const TrialRecord& b) { return a.id < b.id; },
};

// Schema version 1 has no device columns: they read as not recorded.
const Table<TrialRecord> kTrialsV1 = {
    "trials",
    "id, sweep_id, device_key, op, dtype, problem_key, params_key, template_hash, nvrtc_version, "
    "status, detail, median_us, min_us, max_us, spread_pct, repetitions, registers, shared_bytes, "
    "local_bytes, spill_bytes, compile_seconds, created_at, NULL, NULL",
    "id",
    read_trial,
    [](const TrialRecord& a, const TrialRecord& b) { return a.id < b.id; },
};

const Table<TrialRecord>& trials_table(std::int64_t schema_version) {
  return schema_version >= 2 ? kTrials : kTrialsV1;
}

const Table<BestRecord> kBest = {
    "best",
    "device_key, op, dtype, problem_key, template_hash, params_key, median_us, trial_id, "
    "updated_at",
    "op, dtype, device_key, problem_key, template_hash",
    read_best,
    [](const BestRecord& a, const BestRecord& b) {
      const auto key = [](const BestRecord& r) {
        return std::make_tuple(std::string_view(r.op), std::string_view(dtype_name(r.dtype)),
                               std::string_view(r.device_key), std::string_view(r.problem_key),
                               std::string_view(r.template_hash));
      };
      return key(a) < key(b);
    },
};

ReadSnapshot::ReadSnapshot(sqlite3* db, const std::string& label) : db_(db) {
  if (db_ == nullptr) throw DatabaseError(where(label) + "the store was moved from");
  if (sqlite3_get_autocommit(db_) == 0) return;
  const int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label, "BEGIN");
  owned_ = true;
}

ReadSnapshot::~ReadSnapshot() {
  // Nothing was written: ending the read transaction either way is the same.
  if (owned_ && sqlite3_get_autocommit(db_) == 0)
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

RowIds scan_rowids(sqlite3* db, const std::string& label, const char* table,
                   const std::string& filter, const char* order, const Binder& bind) {
  RowIds out;
  {
    // Only the filter's and the order's columns are read here, never a whole row.
    const std::string sql =
        std::string("SELECT rowid FROM ") + table + " WHERE " + filter + " ORDER BY " + order;
    Statement s(db, sql, label);
    bind(s);
    for (;;) {
      const int rc = sqlite3_step(s.get());
      if (rc == SQLITE_ROW) {
        out.ids.push_back(sqlite3_column_int64(s.get(), 0));
        continue;
      }
      if (rc == SQLITE_DONE) return out;
      if (!row_level(rc)) fail(db, rc, label, sql_excerpt(sqlite3_sql(s.get())));
      break;
    }
  }
  // A value in a filtered or ordered column cannot be read. The table b-tree's keys alone (NOT
  // INDEXED: no index entry, no record payload) still list every row.
  out.ids.clear();
  out.filtered = false;
  Statement all(db, std::string("SELECT rowid FROM ") + table + " NOT INDEXED", label);
  while (all.step()) out.ids.push_back(all.int64(0));
  return out;
}

RowFetcher::RowFetcher(sqlite3* db, const std::string& label, const char* table,
                       const char* columns)
    : db_(db),
      label_(label),
      table_(table),
      stmt_(db, std::string("SELECT ") + columns + " FROM " + table + " WHERE rowid = ?1", label) {}

const Statement* RowFetcher::fetch(std::int64_t rowid) {
  stmt_.reset();
  stmt_.bind(1, rowid);
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return &stmt_;
  if (rc == SQLITE_DONE) return nullptr;
  if (!row_level(rc)) fail(db_, rc, label_, sql_excerpt(sqlite3_sql(stmt_.get())));
  const std::string message = sqlite3_errmsg(db_);
  const bool too_big = (rc & 0xff) == SQLITE_TOOBIG;
  stmt_.reset();
  // Name the column: fetch each alone until one fails.
  const int columns = sqlite3_column_count(stmt_.get());
  for (int i = 0; i < columns; ++i) {
    const std::string column = sqlite3_column_name(stmt_.get(), i);
    Statement one(db_, "SELECT " + column + " FROM " + table_ + " WHERE rowid = ?1", label_);
    one.bind(1, rowid);
    const int r = sqlite3_step(one.get());
    if (r == SQLITE_ROW || r == SQLITE_DONE) continue;
    throw BadRow{prefix(table_, rowid) + column + " cannot be read: " + sqlite3_errmsg(db_) +
                 (too_big ? " (over ktune's 64 MiB limit)" : "")};
  }
  throw BadRow{prefix(table_, rowid) + "the row cannot be read: " + message};
}

}  // namespace ktune::db
