// The SQLite tuning database. This file is the only one that includes sqlite3.h: it implements the
// RAII types of db/sqlite.hpp, the schema and its checks, Store, and the JSON/CSV exports.
#include "db/store.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>

#include "db/sqlite.hpp"
#include "ktune/error.hpp"

namespace fs = std::filesystem;

namespace ktune {
namespace {

std::string where(const std::string& label) { return "tuning database " + label + ": "; }

// What a user can do about the common failures; SQLite's own text says what happened.
const char* hint_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return ": the file is corrupt or not a SQLite database; restore a copy or move it aside";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return ": another process kept it locked for longer than the 10 s busy timeout";
    case SQLITE_READONLY:
      return ": the file or its directory is not writable";
    case SQLITE_FULL:
      return ": the disk is full";
    case SQLITE_CANTOPEN:
      return ": the file cannot be opened (missing, a directory, or no permission)";
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
        return ": the sweep_id or trial_id does not exist in this database";
      return "";
    default:
      return "";
  }
}

// "tuning database PATH: what SQLite said: what to do (during WHAT)".
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& label, const std::string& what) {
  std::string message = where(label);
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  message += hint_for(rc);
  message += " (during " + what + ")";
  throw DatabaseError(message);
}

// The start of a statement's SQL on one line, to say which one failed.
std::string sql_excerpt(std::string_view sql) {
  std::string out;
  for (const char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    if (out.size() == 48) return out + "...";
    out += space ? ' ' : c;
  }
  return out;
}

// A `file:` URI for read-only opens. Every byte outside the unreserved set is percent-encoded, so a
// path holding '?', '#' or '%' cannot smuggle in URI parameters.
std::string file_uri(const fs::path& path, bool immutable) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  static const char hex[] = "0123456789ABCDEF";
  std::string uri = "file://";
  for (const unsigned char c : absolute.string()) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (plain) {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  uri += immutable ? "?mode=ro&immutable=1" : "?mode=ro";
  return uri;
}

}  // namespace

// ---- RAII types (db/sqlite.hpp) ----

namespace db {

Connection::Connection(const fs::path& path, OpenMode mode) : label_(path.string()) {
  int flags = SQLITE_OPEN_FULLMUTEX;
  std::string name;
  if (mode == OpenMode::read_write_create) {
    // No URI flag: the name is taken literally, whatever characters it holds.
    flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    name = path.string();
  } else {
    flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    name = file_uri(path, mode == OpenMode::immutable);
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // Even a failed open may hand back a handle, which carries the message and must be closed.
    sqlite3* failed = std::exchange(db_, nullptr);
    std::string message = where(label_);
    message += failed != nullptr ? sqlite3_errmsg(failed) : sqlite3_errstr(rc);
    message += hint_for(rc);
    message += " (during open)";
    sqlite3_close_v2(failed);
    throw DatabaseError(message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), label_(std::move(other.label_)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    label_ = std::move(other.label_);
  }
  return *this;
}

Connection::~Connection() { sqlite3_close_v2(db_); }

sqlite3* Connection::release() noexcept { return std::exchange(db_, nullptr); }

void Connection::exec(const char* sql) const {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql_excerpt(sql));
}

Statement::Statement(sqlite3* db, std::string_view sql, std::string label)
    : db_(db), label_(std::move(label)) {
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), 0, &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql_excerpt(sql));
  if (stmt_ == nullptr) throw DatabaseError(where(label_) + "empty SQL statement");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

void Statement::bind(int index, std::nullptr_t) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "binding a value");
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, rc, label_, sql_excerpt(sqlite3_sql(stmt_)));
}

void Statement::run() {
  while (step()) {
  }
}

Statement& Statement::row() {
  if (!step())
    throw DatabaseError(where(label_) + sql_excerpt(sqlite3_sql(stmt_)) + ": returned no row");
  return *this;
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

int Statement::int32(int column) const {
  const std::int64_t v = sqlite3_column_int64(stmt_, column);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    const char* name = sqlite3_column_name(stmt_, column);
    throw DatabaseError(where(label_) + "column " + (name != nullptr ? name : "?") + " holds " +
                        std::to_string(v) + ", outside the range of int");
  }
  return static_cast<int>(v);
}

double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (p == nullptr) return {};
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

Transaction::Transaction(sqlite3* db, std::string label, Kind kind)
    : db_(db), label_(std::move(label)) {
  const char* sql = kind == Kind::immediate ? "BEGIN IMMEDIATE" : "BEGIN";
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, sql);
  open_ = true;
}

Transaction::~Transaction() {
  // A failed statement may already have rolled the transaction back; only roll back what is open.
  if (open_ && sqlite3_get_autocommit(db_) == 0)
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, label_, "COMMIT");
  open_ = false;
}

}  // namespace db

// ---- schema ----

namespace {

// Version 1. Any change here needs Store::kSchemaVersion bumped and required_tables() updated.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE devices (
  key TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  sm_count INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  l2_bytes INTEGER NOT NULL,
  smem_optin INTEGER NOT NULL,
  smem_per_sm INTEGER NOT NULL,
  regs_per_block INTEGER NOT NULL,
  regs_per_sm INTEGER NOT NULL,
  max_threads_per_block INTEGER NOT NULL,
  max_threads_per_sm INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version INTEGER NOT NULL,
  copy_bandwidth REAL NOT NULL DEFAULT 0,
  updated_at TEXT NOT NULL
);
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  device_key TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  problem_key TEXT NOT NULL,
  strategy TEXT NOT NULL,
  command_line TEXT NOT NULL,
  started_at TEXT NOT NULL
);
CREATE TABLE trials (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER REFERENCES sweeps(id),
  device_key TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  problem_key TEXT NOT NULL,
  params_key TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  nvrtc_version INTEGER NOT NULL,
  status TEXT NOT NULL,
  detail TEXT NOT NULL,
  median_us REAL NOT NULL,
  min_us REAL NOT NULL,
  max_us REAL NOT NULL,
  spread_pct REAL NOT NULL,
  repetitions INTEGER NOT NULL,
  registers INTEGER NOT NULL,
  shared_bytes INTEGER NOT NULL,
  local_bytes INTEGER NOT NULL,
  spill_bytes INTEGER NOT NULL,
  compile_seconds REAL NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX trials_by_key ON trials (device_key, op, dtype, problem_key, template_hash);
CREATE TABLE best (
  device_key TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  problem_key TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  params_key TEXT NOT NULL,
  median_us REAL NOT NULL,
  trial_id INTEGER REFERENCES trials(id),
  updated_at TEXT NOT NULL,
  PRIMARY KEY (device_key, op, dtype, problem_key, template_hash)
);
)sql";

struct TableSpec {
  const char* name;
  std::vector<const char*> columns;
};

// What open() requires of an existing file; extra tables and columns are tolerated.
const std::vector<TableSpec>& required_tables() {
  static const std::vector<TableSpec> tables = {
      {"devices",
       {"key", "name", "cc_major", "cc_minor", "sm_count", "memory_bytes", "l2_bytes", "smem_optin",
        "smem_per_sm", "regs_per_block", "regs_per_sm", "max_threads_per_block",
        "max_threads_per_sm", "driver_version", "nvrtc_version", "copy_bandwidth", "updated_at"}},
      {"sweeps",
       {"id", "device_key", "op", "dtype", "problem_key", "strategy", "command_line",
        "started_at"}},
      {"trials",
       {"id", "sweep_id", "device_key", "op", "dtype", "problem_key", "params_key",
        "template_hash", "nvrtc_version", "status", "detail", "median_us", "min_us", "max_us",
        "spread_pct", "repetitions", "registers", "shared_bytes", "local_bytes", "spill_bytes",
        "compile_seconds", "created_at"}},
      {"best",
       {"device_key", "op", "dtype", "problem_key", "template_hash", "params_key", "median_us",
        "trial_id", "updated_at"}},
  };
  return tables;
}

// Hardening and per-connection settings, applied before anything else runs on the connection.
// Nothing here writes the file (a foreign file is only refused after this).
void configure(const db::Connection& c, bool writable) {
  sqlite3* db = c.get();
  // A hostile file must not be able to run anything: no triggers, no views, no functions with side
  // effects from the schema, no writes to sqlite_master, no extensions.
  const std::pair<int, int> settings[] = {
      {SQLITE_DBCONFIG_DEFENSIVE, 1},      {SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0},
      {SQLITE_DBCONFIG_ENABLE_TRIGGER, 0}, {SQLITE_DBCONFIG_ENABLE_VIEW, 0},
      {SQLITE_DBCONFIG_DQS_DDL, 0},        {SQLITE_DBCONFIG_DQS_DML, 0},
      {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0},
  };
  for (const auto& [option, value] : settings) {
    const int rc = sqlite3_db_config(db, option, value, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, c.label(), "configuring the connection");
  }
  // No string in a tuning database comes near this; a hostile one cannot make us allocate more.
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
  sqlite3_busy_timeout(db, 10000);
  c.exec("PRAGMA foreign_keys = ON; PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON");
  // FULL: every trial's commit reaches the disk, so a power loss mid-sweep loses nothing committed.
  c.exec(writable ? "PRAGMA synchronous = FULL" : "PRAGMA query_only = ON");
}

struct FileState {
  std::int64_t application_id = 0;
  std::int64_t user_version = 0;
  std::vector<std::pair<std::string, std::string>> objects;  // (type, name) from sqlite_master
  bool blank() const { return application_id == 0 && user_version == 0 && objects.empty(); }
};

FileState inspect(const db::Connection& c) {
  FileState st;
  st.application_id = db::Statement(c.get(), "PRAGMA application_id", c.label()).row().int64(0);
  st.user_version = db::Statement(c.get(), "PRAGMA user_version", c.label()).row().int64(0);
  db::Statement s(c.get(), "SELECT type, name FROM sqlite_master", c.label());
  while (s.step()) st.objects.emplace_back(s.text(0), s.text(1));
  return st;
}

std::string hex32(std::int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(static_cast<std::uint32_t>(v)));
  return buf;
}

void validate(const db::Connection& c, const FileState& st) {
  const std::string at = where(c.label());
  if (st.blank()) throw DatabaseError(at + "the file is empty, not a ktune database");
  if (st.application_id != Store::kApplicationId)
    throw DatabaseError(at + "not a ktune database (application_id is " +
                        hex32(st.application_id) + ", ktune's is " +
                        hex32(Store::kApplicationId) + "); ktune leaves it alone");
  const std::string supported = std::to_string(Store::kSchemaVersion);
  if (st.user_version > Store::kSchemaVersion)
    throw DatabaseError(at + "schema version " + std::to_string(st.user_version) +
                        " is newer than this ktune supports (" + supported +
                        "): it was written by a newer ktune; upgrade ktune or use another "
                        "database");
  if (st.user_version < Store::kSchemaVersion)
    throw DatabaseError(at + "schema version " + std::to_string(st.user_version) +
                        " is older than this ktune supports (" + supported +
                        ") and cannot be migrated; move the file aside to start a new database");
  // ktune never creates triggers or views: their presence means the file was altered. They are
  // disabled on the connection anyway; refusing makes the runtime fall back to defaults.
  for (const auto& [type, name] : st.objects)
    if (type != "table" && type != "index")
      throw DatabaseError(at + "contains a " + type + " '" + name +
                          "'; ktune databases hold no triggers or views, so the file was altered "
                          "and is not trusted");
  for (const TableSpec& table : required_tables()) {
    bool found = false;
    for (const auto& [type, name] : st.objects)
      found = found || (type == "table" && name == table.name);
    if (!found)
      throw DatabaseError(at + "has no table '" + table.name + "' (required by schema version " +
                          supported + "): the file is damaged or was not written by ktune");
    std::vector<std::string> have;
    db::Statement s(c.get(), "SELECT name FROM pragma_table_info(?1)", c.label());
    s.bind(1, table.name);
    while (s.step()) have.push_back(s.text(0));
    for (const char* column : table.columns) {
      bool present = false;
      for (const std::string& h : have) present = present || h == column;
      if (!present)
        throw DatabaseError(at + "table '" + table.name + "' lacks column '" + column +
                            "' (required by schema version " + supported +
                            "): the file is damaged or was not written by ktune");
    }
  }
}

// Reads the header fields and the schema in one read transaction: a file that another process is
// creating right now is then seen either blank or complete, never half-stamped.
FileState checked_snapshot(const db::Connection& c, bool blank_ok) {
  db::Transaction snapshot(c.get(), c.label(), db::Transaction::Kind::deferred);
  FileState st = inspect(c);
  if (!(blank_ok && st.blank())) validate(c, st);
  snapshot.commit();
  return st;
}

void use_wal(const db::Connection& c) {
  // Switching a rollback-journal file (a new one included) to WAL upgrades a read lock to an
  // exclusive one. SQLite answers SQLITE_BUSY at once, without its busy handler, when another
  // connection holds a lock at that moment (say, a second tuner creating the same file), so this
  // statement alone retries, for as long as the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(c.get(), "PRAGMA journal_mode = WAL", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        mode = text != nullptr ? text : "";
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(s);
    if ((rc & 0xff) == SQLITE_BUSY && std::chrono::steady_clock::now() < deadline) {
      const int wait_ms = std::min(1 << std::min(attempt, 5), 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      continue;
    }
    if (rc != SQLITE_OK) fail(c.get(), rc, c.label(), "PRAGMA journal_mode = WAL");
    if (mode != "wal")
      throw DatabaseError(where(c.label()) +
                          "cannot use write-ahead logging (journal mode stays '" + mode +
                          "'); keep the database on a local, writable filesystem");
    return;
  }
}

void create_schema(const db::Connection& c) {
  // Several tuners may create the same new file at once: the IMMEDIATE transaction serialises
  // them and the loser finds the schema already there.
  db::Transaction t(c.get(), c.label());
  if (!inspect(c).blank()) return;  // the caller validates what the other process made
  c.exec(kSchemaSql);
  // PRAGMA takes no bound values; these are our own constants.
  const std::string stamp = "PRAGMA application_id = " + std::to_string(Store::kApplicationId) +
                            "; PRAGMA user_version = " + std::to_string(Store::kSchemaVersion);
  c.exec(stamp.c_str());
  t.commit();
}

sqlite3* open_writable(const fs::path& path) {
  const std::string label = path.string();
  std::error_code ec;
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw DatabaseError(where(label) + "cannot open or create it: the directory " + dir.string() +
                        " does not exist (ktune does not create it)");
  if (fs::is_directory(path, ec))
    throw DatabaseError(where(label) + "is a directory, not a database file");
  // The write-ahead log lives in <file>-wal and <file>-shm, created and removed beside the file.
  if (access(dir.c_str(), W_OK) != 0)
    throw DatabaseError(where(label) + "cannot write it: the directory " + dir.string() +
                        " is not writable (read-only media?) and SQLite needs to create " +
                        path.filename().string() +
                        "-wal and -shm there; open it read-only for lookups");
  db::Connection c(path, db::OpenMode::read_write_create);
  if (sqlite3_db_readonly(c.get(), "main") == 1)
    throw DatabaseError(where(label) + "the file is not writable; open it read-only for lookups");
  configure(c, /*writable=*/true);
  if (checked_snapshot(c, /*blank_ok=*/true).blank()) {
    use_wal(c);
    create_schema(c);
    checked_snapshot(c, /*blank_ok=*/false);
  }
  use_wal(c);
  return c.release();
}

// The first read of a WAL file needs its -shm file; this is how SQLite says it could not make one.
bool shm_unavailable(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || rc == SQLITE_IOERR_SHMOPEN ||
         rc == SQLITE_IOERR_SHMSIZE || rc == SQLITE_IOERR_SHMMAP || rc == SQLITE_IOERR_SHMLOCK;
}

int probe(sqlite3* db) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &s, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  sqlite3_finalize(s);
  return rc;
}

sqlite3* open_readable(const fs::path& path, bool* immutable) {
  const std::string label = path.string();
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw DatabaseError(where(label) + "is a directory, not a database file");
  if (!fs::exists(path, ec)) throw DatabaseError(where(label) + "no such file");
  {
    db::Connection c(path, db::OpenMode::read_only);
    configure(c, /*writable=*/false);
    if (!shm_unavailable(probe(c.get()))) {
      checked_snapshot(c, /*blank_ok=*/false);
      return c.release();
    }
  }
  // Read-only media: SQLite cannot create the -shm file a WAL reader needs. immutable=1 reads the
  // main file alone, which holds everything only when no write-ahead log has pages pending.
  fs::path wal = path;
  wal += "-wal";
  const std::uintmax_t wal_size = fs::exists(wal, ec) ? fs::file_size(wal, ec) : 0;
  if (!ec && wal_size > 0)
    throw DatabaseError(where(label) + "cannot read it: its directory is read-only, so SQLite " +
                        "cannot create " + label + "-shm, and " + wal.string() +
                        " holds changes not yet in the main file; open it read-write once where " +
                        "it is writable, or copy both files to a writable directory");
  db::Connection c(path, db::OpenMode::immutable);
  configure(c, /*writable=*/false);
  checked_snapshot(c, /*blank_ok=*/false);
  *immutable = true;
  return c.release();
}

// ---- rows ----

constexpr const char* kTrialColumns =
    "id, sweep_id, device_key, op, dtype, problem_key, params_key, template_hash, nvrtc_version, "
    "status, detail, median_us, min_us, max_us, spread_pct, repetitions, registers, shared_bytes, "
    "local_bytes, spill_bytes, compile_seconds, created_at";

constexpr const char* kBestSelect =
    "SELECT b.device_key, d.name, d.cc_major, d.cc_minor, b.op, b.dtype, b.problem_key, "
    "b.params_key, b.template_hash, b.median_us, b.trial_id, b.updated_at "
    "FROM best AS b LEFT JOIN devices AS d ON d.key = b.device_key ";

constexpr const char* kDeviceColumns =
    "key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes, smem_optin, smem_per_sm, "
    "regs_per_block, regs_per_sm, max_threads_per_block, max_threads_per_sm, driver_version, "
    "nvrtc_version";

DType read_dtype(const db::Statement& s, int column, const std::string& label) {
  const std::string name = s.text(column);
  if (auto d = parse_dtype(name)) return *d;
  throw DatabaseError(where(label) + "unknown dtype '" + name + "' in a row");
}

TrialRecord read_trial(const db::Statement& s, const std::string& label) {
  TrialRecord t;
  t.id = s.int64(0);
  t.sweep_id = s.is_null(1) ? 0 : s.int64(1);
  t.device_key = s.text(2);
  t.op = s.text(3);
  t.dtype = read_dtype(s, 4, label);
  t.problem_key = s.text(5);
  t.params_key = s.text(6);
  t.template_hash = s.text(7);
  t.nvrtc_version = s.int32(8);
  const std::string status = s.text(9);
  const auto parsed = parse_status(status);
  if (!parsed)
    throw DatabaseError(where(label) + "trial " + std::to_string(t.id) + " has unknown status '" +
                        status + "'");
  t.status = *parsed;
  t.detail = s.text(10);
  t.median_us = s.real(11);
  t.min_us = s.real(12);
  t.max_us = s.real(13);
  t.spread_pct = s.real(14);
  t.repetitions = s.int32(15);
  t.registers = s.int32(16);
  t.shared_bytes = s.int32(17);
  t.local_bytes = s.int32(18);
  t.spill_bytes = s.int32(19);
  t.compile_seconds = s.real(20);
  t.created_at = s.text(21);
  return t;
}

BestRecord read_best(const db::Statement& s, const std::string& label) {
  BestRecord b;
  b.device_key = s.text(0);
  if (!s.is_null(2)) {  // no device row: name and arch stay empty
    b.device_name = s.text(1);
    DeviceInfo d;
    d.cc_major = s.int32(2);
    d.cc_minor = s.int32(3);
    b.arch = d.arch();
  }
  b.op = s.text(4);
  b.dtype = read_dtype(s, 5, label);
  b.problem_key = s.text(6);
  b.params_key = s.text(7);
  b.template_hash = s.text(8);
  b.median_us = s.real(9);
  b.trial_id = s.is_null(10) ? 0 : s.int64(10);
  b.updated_at = s.text(11);
  return b;
}

DeviceInfo read_device(const db::Statement& s) {
  DeviceInfo d;
  d.name = s.text(1);
  d.cc_major = s.int32(2);
  d.cc_minor = s.int32(3);
  d.sm_count = s.int32(4);
  d.memory_bytes = s.int64(5);
  d.l2_bytes = s.int64(6);
  d.smem_optin_per_block = s.int32(7);
  d.smem_per_sm = s.int32(8);
  d.regs_per_block = s.int32(9);
  d.regs_per_sm = s.int32(10);
  d.max_threads_per_block = s.int32(11);
  d.max_threads_per_sm = s.int32(12);
  d.driver_version = s.int32(13);
  d.nvrtc_version = s.int32(14);
  return d;
}

const char* checked_dtype(DType d, const char* what) {
  const char* name = dtype_name(d);
  if (!parse_dtype(name))
    throw InvalidArgument(std::string(what) + ": dtype " + std::to_string(static_cast<int>(d)) +
                          " is not one of fp32, fp16, bf16");
  return name;
}

void require_finite(double v, const char* field, const char* what) {
  if (!std::isfinite(v) || v < 0)
    throw InvalidArgument(std::string(what) + ": " + field + " is " + std::to_string(v) +
                          ", expected a finite value >= 0");
}

void require_key(const std::string& v, const char* field, const char* what) {
  if (v.empty()) throw InvalidArgument(std::string(what) + ": " + field + " is empty");
}

}  // namespace

// ---- Store ----

Store Store::open(const fs::path& path, Mode mode) {
  if (path.empty()) throw InvalidArgument("Store::open: the database path is empty");
  Store store;
  store.path_ = path;
  store.read_only_ = mode == Mode::read_only;
  store.db_ = store.read_only_ ? open_readable(path, &store.immutable_) : open_writable(path);
  return store;
}

Store::Store(Store&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      read_only_(other.read_only_),
      immutable_(other.immutable_) {}

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    read_only_ = other.read_only_;
    immutable_ = other.immutable_;
  }
  return *this;
}

// The last connection to close checkpoints the WAL into the main file and removes -wal and -shm.
Store::~Store() { sqlite3_close_v2(db_); }

void Store::require_writable(const char* what) const {
  if (db_ == nullptr) throw DatabaseError(std::string(what) + ": the store was moved from");
  if (read_only_)
    throw DatabaseError(where(path_.string()) + "opened read-only; " + what + " needs read_write");
}

void Store::upsert_device(const DeviceInfo& device) {
  require_writable("upsert_device");
  if (device.name.empty()) throw InvalidArgument("upsert_device: the device has no name");
  const std::string label = path_.string();
  db::Transaction t(db_, label);
  // copy_bandwidth is measured separately and survives a refresh.
  db::Statement s(db_, R"sql(
    INSERT INTO devices (key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes,
                         smem_optin, smem_per_sm, regs_per_block, regs_per_sm,
                         max_threads_per_block, max_threads_per_sm, driver_version,
                         nvrtc_version, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
            strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    ON CONFLICT (key) DO UPDATE SET
      name = excluded.name, cc_major = excluded.cc_major, cc_minor = excluded.cc_minor,
      sm_count = excluded.sm_count, memory_bytes = excluded.memory_bytes,
      l2_bytes = excluded.l2_bytes, smem_optin = excluded.smem_optin,
      smem_per_sm = excluded.smem_per_sm, regs_per_block = excluded.regs_per_block,
      regs_per_sm = excluded.regs_per_sm, max_threads_per_block = excluded.max_threads_per_block,
      max_threads_per_sm = excluded.max_threads_per_sm, driver_version = excluded.driver_version,
      nvrtc_version = excluded.nvrtc_version, updated_at = excluded.updated_at)sql",
                  label);
  s.bind_all(device.key(), device.name, device.cc_major, device.cc_minor, device.sm_count,
             device.memory_bytes, device.l2_bytes, device.smem_optin_per_block,
             device.smem_per_sm, device.regs_per_block, device.regs_per_sm,
             device.max_threads_per_block, device.max_threads_per_sm, device.driver_version,
             device.nvrtc_version);
  s.run();
  t.commit();
}

std::optional<DeviceInfo> Store::device(const std::string& device_key) const {
  db::Statement s(db_, std::string("SELECT ") + kDeviceColumns + " FROM devices WHERE key = ?1",
                  path_.string());
  s.bind(1, device_key);
  if (!s.step()) return std::nullopt;
  return read_device(s);
}

std::vector<DeviceInfo> Store::devices() const {
  db::Statement s(db_, std::string("SELECT ") + kDeviceColumns + " FROM devices ORDER BY key",
                  path_.string());
  std::vector<DeviceInfo> out;
  while (s.step()) out.push_back(read_device(s));
  return out;
}

void Store::set_copy_bandwidth(const std::string& device_key, double bytes_per_second) {
  require_writable("set_copy_bandwidth");
  require_finite(bytes_per_second, "bytes_per_second", "set_copy_bandwidth");
  const std::string label = path_.string();
  db::Transaction t(db_, label);
  db::Statement s(db_, R"sql(
    UPDATE devices SET copy_bandwidth = ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')
    WHERE key = ?1)sql",
                  label);
  s.bind_all(device_key, bytes_per_second);
  s.run();
  if (sqlite3_changes(db_) == 0)
    throw InvalidArgument("set_copy_bandwidth: device '" + device_key + "' is not in " + label +
                          "; call upsert_device first");
  t.commit();
}

double Store::copy_bandwidth(const std::string& device_key) const {
  db::Statement s(db_, "SELECT copy_bandwidth FROM devices WHERE key = ?1", path_.string());
  s.bind(1, device_key);
  return s.step() ? s.real(0) : 0.0;
}

std::int64_t Store::begin_sweep(const SweepRecord& sweep) {
  require_writable("begin_sweep");
  const char* dtype = checked_dtype(sweep.dtype, "begin_sweep");
  const std::string label = path_.string();
  db::Transaction t(db_, label);
  db::Statement s(db_, R"sql(
    INSERT INTO sweeps (device_key, op, dtype, problem_key, strategy, command_line, started_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))sql",
                  label);
  s.bind_all(sweep.device_key, sweep.op, dtype, sweep.problem_key, sweep.strategy,
             sweep.command_line);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

std::int64_t Store::record_trial(const TrialRecord& trial) {
  require_writable("record_trial");
  const char* what = "record_trial";
  const char* dtype = checked_dtype(trial.dtype, what);
  require_key(trial.device_key, "device_key", what);
  require_key(trial.op, "op", what);
  require_key(trial.problem_key, "problem_key", what);
  const std::pair<double, const char*> timings[] = {
      {trial.median_us, "median_us"},   {trial.min_us, "min_us"},
      {trial.max_us, "max_us"},         {trial.spread_pct, "spread_pct"},
      {trial.compile_seconds, "compile_seconds"},
  };
  for (const auto& [value, field] : timings) require_finite(value, field, what);
  const char* status = status_name(trial.status);
  if (!parse_status(status))
    throw InvalidArgument(std::string(what) + ": status " +
                          std::to_string(static_cast<int>(trial.status)) + " is not a TrialStatus");

  const std::string label = path_.string();
  db::Transaction t(db_, label);
  db::Statement insert(db_, R"sql(
    INSERT INTO trials (sweep_id, device_key, op, dtype, problem_key, params_key, template_hash,
                        nvrtc_version, status, detail, median_us, min_us, max_us, spread_pct,
                        repetitions, registers, shared_bytes, local_bytes, spill_bytes,
                        compile_seconds, created_at)
    VALUES (NULLIF(?1, 0), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19, ?20, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))sql",
                       label);
  insert.bind_all(trial.sweep_id, trial.device_key, trial.op, dtype, trial.problem_key,
                  trial.params_key, trial.template_hash, trial.nvrtc_version, status, trial.detail,
                  trial.median_us, trial.min_us, trial.max_us, trial.spread_pct, trial.repetitions,
                  trial.registers, trial.shared_bytes, trial.local_bytes, trial.spill_bytes,
                  trial.compile_seconds);
  insert.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  if (trial.status == TrialStatus::ok) {
    // Only a strictly faster trial replaces the best; the key includes the template hash, so rows
    // measured against an older template never compete with current ones.
    db::Statement upsert(db_, R"sql(
      INSERT INTO best (device_key, op, dtype, problem_key, template_hash, params_key, median_us,
                        trial_id, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
      ON CONFLICT (device_key, op, dtype, problem_key, template_hash) DO UPDATE SET
        params_key = excluded.params_key, median_us = excluded.median_us,
        trial_id = excluded.trial_id, updated_at = excluded.updated_at
      WHERE excluded.median_us < best.median_us)sql",
                         label);
    upsert.bind_all(trial.device_key, trial.op, dtype, trial.problem_key, trial.template_hash,
                    trial.params_key, trial.median_us, id);
    upsert.run();
  }
  t.commit();
  return id;
}

std::vector<TrialRecord> Store::trials(const std::string& device_key, const std::string& op,
                                       DType dtype, const std::string& problem_key,
                                       const std::string& template_hash) const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  std::string("SELECT ") + kTrialColumns +
                      " FROM trials WHERE device_key = ?1 AND op = ?2 AND dtype = ?3 AND "
                      "problem_key = ?4 AND template_hash = ?5 ORDER BY id",
                  label);
  s.bind_all(device_key, op, dtype_name(dtype), problem_key, template_hash);
  std::vector<TrialRecord> out;
  while (s.step()) out.push_back(read_trial(s, label));
  return out;
}

void Store::set_best(const BestRecord& record) {
  require_writable("set_best");
  const char* what = "set_best";
  const char* dtype = checked_dtype(record.dtype, what);
  require_key(record.device_key, "device_key", what);
  require_key(record.op, "op", what);
  require_key(record.problem_key, "problem_key", what);
  require_finite(record.median_us, "median_us", what);
  const std::string label = path_.string();
  db::Transaction t(db_, label);
  db::Statement s(db_, R"sql(
    INSERT INTO best (device_key, op, dtype, problem_key, template_hash, params_key, median_us,
                      trial_id, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULLIF(?8, 0), strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    ON CONFLICT (device_key, op, dtype, problem_key, template_hash) DO UPDATE SET
      params_key = excluded.params_key, median_us = excluded.median_us,
      trial_id = excluded.trial_id, updated_at = excluded.updated_at)sql",
                  label);
  s.bind_all(record.device_key, record.op, dtype, record.problem_key, record.template_hash,
             record.params_key, record.median_us, record.trial_id);
  s.run();
  t.commit();
}

std::optional<BestRecord> Store::best(const std::string& device_key, const std::string& op,
                                      DType dtype, const std::string& problem_key,
                                      const std::string& template_hash) const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  std::string(kBestSelect) +
                      "WHERE b.device_key = ?1 AND b.op = ?2 AND b.dtype = ?3 AND "
                      "b.problem_key = ?4 AND b.template_hash = ?5",
                  label);
  s.bind_all(device_key, op, dtype_name(dtype), problem_key, template_hash);
  if (!s.step()) return std::nullopt;
  return read_best(s, label);
}

std::vector<BestRecord> Store::bests(const std::string& op, DType dtype) const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  std::string(kBestSelect) +
                      "WHERE b.op = ?1 AND b.dtype = ?2 "
                      "ORDER BY b.device_key, b.problem_key, b.template_hash",
                  label);
  s.bind_all(op, dtype_name(dtype));
  std::vector<BestRecord> out;
  while (s.step()) out.push_back(read_best(s, label));
  return out;
}

std::vector<BestRecord> Store::all_bests(const std::string& op_filter) const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  std::string(kBestSelect) +
                      "WHERE ?1 = '' OR b.op = ?1 "
                      "ORDER BY b.op, b.dtype, b.device_key, b.problem_key, b.template_hash",
                  label);
  s.bind(1, op_filter);
  std::vector<BestRecord> out;
  while (s.step()) out.push_back(read_best(s, label));
  return out;
}

std::vector<SweepRecord> Store::sweeps() const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  "SELECT id, device_key, op, dtype, problem_key, strategy, command_line, "
                  "started_at FROM sweeps ORDER BY id",
                  label);
  std::vector<SweepRecord> out;
  while (s.step()) {
    SweepRecord r;
    r.id = s.int64(0);
    r.device_key = s.text(1);
    r.op = s.text(2);
    r.dtype = read_dtype(s, 3, label);
    r.problem_key = s.text(4);
    r.strategy = s.text(5);
    r.command_line = s.text(6);
    r.started_at = s.text(7);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TrialRecord> Store::all_trials(const std::string& op_filter) const {
  const std::string label = path_.string();
  db::Statement s(db_,
                  std::string("SELECT ") + kTrialColumns +
                      " FROM trials WHERE ?1 = '' OR op = ?1 ORDER BY id",
                  label);
  s.bind(1, op_filter);
  std::vector<TrialRecord> out;
  while (s.step()) out.push_back(read_trial(s, label));
  return out;
}

std::string Store::integrity_check() const {
  db::Statement s(db_, "PRAGMA integrity_check", path_.string());
  std::string out;
  while (s.step()) {
    if (!out.empty()) out += '\n';
    out += s.text(0);
  }
  return out;
}

// ---- statuses ----

const char* status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::ok: return "ok";
    case TrialStatus::invalid: return "invalid";
    case TrialStatus::compile_error: return "compile_error";
    case TrialStatus::launch_error: return "launch_error";
    case TrialStatus::timeout: return "timeout";
    case TrialStatus::wrong_result: return "wrong_result";
  }
  return "?";
}

std::optional<TrialStatus> parse_status(std::string_view s) {
  for (TrialStatus t : {TrialStatus::ok, TrialStatus::invalid, TrialStatus::compile_error,
                        TrialStatus::launch_error, TrialStatus::timeout, TrialStatus::wrong_result})
    if (s == status_name(t)) return t;
  return std::nullopt;
}

// ---- exports ----

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

void append_number(std::string& out, double v, const char* non_finite) {
  if (!std::isfinite(v)) {
    out += non_finite;
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

struct JsonWriter {
  std::string& out;
  bool first = true;

  void key(const char* name) {
    out += first ? "{\"" : ", \"";
    first = false;
    out += name;
    out += "\": ";
  }
  void operator()(const char* name, std::int64_t v) {
    key(name);
    out += std::to_string(v);
  }
  void operator()(const char* name, int v) { (*this)(name, static_cast<std::int64_t>(v)); }
  void operator()(const char* name, double v) {
    key(name);
    append_number(out, v, "null");
  }
  void operator()(const char* name, std::string_view v) {
    key(name);
    out += '"';
    for (std::size_t i = 0; i < v.size();) {
      const auto c = static_cast<unsigned char>(v[i]);
      if (c >= 0x80) {
        const std::size_t n = utf8_length(v, i);
        if (n == 0) {
          out += "\xef\xbf\xbd";  // U+FFFD keeps the output valid UTF-8
          ++i;
        } else {
          out.append(v.substr(i, n));
          i += n;
        }
        continue;
      }
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
    }
    out += '"';
  }
  void close() { out += first ? "{}" : "}"; }
};

struct CsvWriter {
  std::string& out;
  bool header;
  bool first = true;

  void separator() {
    if (!first) out += ',';
    first = false;
  }
  void operator()(const char* name, std::int64_t v) {
    separator();
    out += header ? name : std::to_string(v);
  }
  void operator()(const char* name, int v) { (*this)(name, static_cast<std::int64_t>(v)); }
  void operator()(const char* name, double v) {
    separator();
    if (header)
      out += name;
    else
      append_number(out, v, "");
  }
  void operator()(const char* name, std::string_view v) {
    separator();
    if (header) {
      out += name;
      return;
    }
    if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
      out += v;
      return;
    }
    out += '"';
    for (char c : v) {
      if (c == '"') out += '"';
      out += c;
    }
    out += '"';
  }
};

// The one list of exported trial fields, in order, shared by JSON and CSV.
template <class Visit>
void visit_trial(const TrialRecord& t, Visit&& v) {
  v("id", t.id);
  v("sweep_id", t.sweep_id);
  v("device_key", std::string_view(t.device_key));
  v("op", std::string_view(t.op));
  v("dtype", std::string_view(dtype_name(t.dtype)));
  v("problem_key", std::string_view(t.problem_key));
  v("params_key", std::string_view(t.params_key));
  v("template_hash", std::string_view(t.template_hash));
  v("nvrtc_version", t.nvrtc_version);
  v("status", std::string_view(status_name(t.status)));
  v("detail", std::string_view(t.detail));
  v("median_us", t.median_us);
  v("min_us", t.min_us);
  v("max_us", t.max_us);
  v("spread_pct", t.spread_pct);
  v("repetitions", t.repetitions);
  v("registers", t.registers);
  v("shared_bytes", t.shared_bytes);
  v("local_bytes", t.local_bytes);
  v("spill_bytes", t.spill_bytes);
  v("compile_seconds", t.compile_seconds);
  v("created_at", std::string_view(t.created_at));
}

}  // namespace

std::string export_json(const std::vector<TrialRecord>& trials) {
  if (trials.empty()) return "[]\n";
  std::string out = "[\n";
  for (std::size_t i = 0; i < trials.size(); ++i) {
    out += "  ";
    JsonWriter w{out};
    visit_trial(trials[i], w);
    w.close();
    out += i + 1 < trials.size() ? ",\n" : "\n";
  }
  out += "]\n";
  return out;
}

std::string export_csv(const std::vector<TrialRecord>& trials) {
  std::string out;
  CsvWriter head{out, true};
  visit_trial(TrialRecord{}, head);
  out += '\n';
  for (const TrialRecord& t : trials) {
    CsvWriter row{out, false};
    visit_trial(t, row);
    out += '\n';
  }
  return out;
}

std::string best_to_json(const BestRecord& b) {
  std::string out;
  JsonWriter w{out};
  w("device_key", std::string_view(b.device_key));
  w("device_name", std::string_view(b.device_name));
  w("arch", std::string_view(b.arch));
  w("op", std::string_view(b.op));
  w("dtype", std::string_view(dtype_name(b.dtype)));
  w("problem_key", std::string_view(b.problem_key));
  w("params_key", std::string_view(b.params_key));
  w("template_hash", std::string_view(b.template_hash));
  w("median_us", b.median_us);
  w("trial_id", b.trial_id);
  w("updated_at", std::string_view(b.updated_at));
  w.close();
  return out;
}

}  // namespace ktune
