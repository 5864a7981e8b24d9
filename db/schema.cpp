#include "db/schema.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "db/file.hpp"
#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"

namespace fs = std::filesystem;

namespace ktune::db {
namespace {

// Version 3. Any change here needs Store::kSchemaVersion bumped, required_tables() updated and a
// step in migrate() that brings an older file to it.
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
  updated_at TEXT NOT NULL,
  memory_bandwidth INTEGER NOT NULL DEFAULT 0
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
  created_at TEXT NOT NULL,
  device_ordinal INTEGER,
  pci_bus_id TEXT
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

// What open() requires of an existing file of schema version `version` (1 to 3); extra tables
// and columns are tolerated.
std::vector<TableSpec> required_tables(std::int64_t version) {
  std::vector<TableSpec> tables = {
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
  // Version 2: the GPU each trial ran on (NULL in rows that version 1 wrote).
  if (version >= 2)
    for (const char* column : {"device_ordinal", "pci_bus_id"}) tables[2].columns.push_back(column);
  // Version 3: the device's peak memory bandwidth (0 in rows that version 2 wrote: unknown).
  if (version >= 3) tables[0].columns.push_back("memory_bandwidth");
  return tables;
}

// Hardening and per-connection settings, applied before anything else runs on the connection.
// Nothing here writes the file (a foreign file is only refused after this).
void configure(const Connection& c, bool writable) {
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

FileState inspect(const Connection& c) {
  FileState st;
  st.application_id = Statement(c.get(), "PRAGMA application_id", c.label()).row().int64(0);
  st.user_version = Statement(c.get(), "PRAGMA user_version", c.label()).row().int64(0);
  Statement s(c.get(), "SELECT type, name FROM sqlite_master", c.label());
  while (s.step()) st.objects.emplace_back(s.text(0), s.text(1));
  return st;
}

std::string hex32(std::int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(static_cast<std::uint32_t>(v)));
  return buf;
}

void validate(const Connection& c, const FileState& st) {
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
  if (st.user_version < Store::kOldestSchemaVersion)
    throw DatabaseError(at + "schema version " + std::to_string(st.user_version) +
                        " is older than this ktune supports (" +
                        std::to_string(Store::kOldestSchemaVersion) + " to " + supported +
                        ") and cannot be migrated; move the file aside to start a new database");
  const std::string version = std::to_string(st.user_version);
  // ktune never creates triggers or views: their presence means the file was altered. They are
  // disabled on the connection anyway; refusing makes the runtime fall back to defaults.
  for (const auto& [type, name] : st.objects)
    if (type != "table" && type != "index")
      throw DatabaseError(at + "contains a " + printable(type) + " " + ktune::quoted(name) +
                          "; ktune databases hold no triggers or views, so the file was altered "
                          "and is not trusted");
  for (const TableSpec& table : required_tables(st.user_version)) {
    bool found = false;
    for (const auto& [type, name] : st.objects)
      found = found || (type == "table" && name == table.name);
    if (!found)
      throw DatabaseError(at + "has no table '" + table.name + "' (required by schema version " +
                          version + "): the file is damaged or was not written by ktune");
    std::vector<std::string> have;
    Statement s(c.get(), "SELECT name FROM pragma_table_info(?1)", c.label());
    s.bind(1, table.name);
    while (s.step()) have.push_back(s.text(0));
    for (const char* column : table.columns) {
      bool present = false;
      for (const std::string& h : have) present = present || h == column;
      if (!present)
        throw DatabaseError(at + "table '" + table.name + "' lacks column '" + column +
                            "' (required by schema version " + version +
                            "): the file is damaged or was not written by ktune");
    }
    // The readers address every row by its rowid; a column named like it, or a WITHOUT ROWID
    // table, would make them read the wrong rows or none.
    for (const std::string& h : have)
      if (sqlite3_stricmp(h.c_str(), "rowid") == 0 || sqlite3_stricmp(h.c_str(), "oid") == 0 ||
          sqlite3_stricmp(h.c_str(), "_rowid_") == 0)
        throw DatabaseError(at + "table '" + table.name + "' has a column named " +
                            ktune::quoted(h) + ", which ktune's schema never has: the file was "
                            "altered");
    const std::string probe_sql = std::string("SELECT rowid FROM ") + table.name + " LIMIT 0";
    sqlite3_stmt* probe = nullptr;
    const int rc = sqlite3_prepare_v2(c.get(), probe_sql.c_str(), -1, &probe, nullptr);
    sqlite3_finalize(probe);
    if (rc != SQLITE_OK)
      throw DatabaseError(at + "table '" + table.name +
                          "' has no rowid (WITHOUT ROWID), which ktune's schema never uses: the "
                          "file was altered");
  }
}

// Reads the header fields and the schema in one read transaction: a file that another process is
// creating right now is then seen either blank or complete, never half-stamped.
FileState checked_snapshot(const Connection& c, bool blank_ok) {
  Transaction snapshot(c.get(), c.label(), Transaction::Kind::deferred);
  FileState st = inspect(c);
  if (!(blank_ok && st.blank())) validate(c, st);
  snapshot.commit();
  return st;
}

void use_wal(const Connection& c) {
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

void create_schema(const Connection& c) {
  // Several tuners may create the same new file at once: the IMMEDIATE transaction serialises
  // them and the loser finds the schema already there.
  Transaction t(c.get(), c.label());
  if (!inspect(c).blank()) return;  // the caller validates what the other process made
  c.exec(kSchemaSql);
  // PRAGMA takes no bound values; these are our own constants.
  const std::string stamp = "PRAGMA application_id = " + std::to_string(Store::kApplicationId) +
                            "; PRAGMA user_version = " + std::to_string(Store::kSchemaVersion);
  c.exec(stamp.c_str());
  t.commit();
}

// One migration step: runs each (column, ALTER TABLE statement) pair whose column `table` lacks
// (a tolerated extra column of that name may be there already).
void add_missing_columns(const Connection& c, const char* table,
                         std::initializer_list<std::pair<const char*, const char*>> added) {
  std::vector<std::string> have;
  Statement s(c.get(), "SELECT name FROM pragma_table_info(?1)", c.label());
  s.bind(1, table);
  while (s.step()) have.push_back(s.text(0));
  for (const auto& [column, sql] : added)
    if (std::find(have.begin(), have.end(), column) == have.end()) c.exec(sql);
}

// Brings a file of an older schema version to the current one, in one IMMEDIATE transaction:
// tuners opening the same old file at once serialise here, and the later ones find it done. A
// step only adds what the older version's readers and writers never name (nullable columns), so
// an older ktune that has the file open meanwhile keeps reading and writing it.
void migrate(const Connection& c) {
  Transaction t(c.get(), c.label());
  const FileState st = inspect(c);
  if (st.user_version >= Store::kSchemaVersion) return;
  validate(c, st);
  if (st.user_version < 2)  // 1 -> 2: the GPU each trial ran on; older rows keep NULL
    add_missing_columns(c, "trials",
                        {{"device_ordinal", "ALTER TABLE trials ADD COLUMN device_ordinal INTEGER"},
                         {"pci_bus_id", "ALTER TABLE trials ADD COLUMN pci_bus_id TEXT"}});
  if (st.user_version < 3)
    // 2 -> 3: each device's peak memory bandwidth; rows already there read 0 (unknown) until
    // their device is seen again. Older writers never name the column: the default fills it.
    add_missing_columns(c, "devices",
                        {{"memory_bandwidth",
                          "ALTER TABLE devices ADD COLUMN memory_bandwidth INTEGER NOT NULL "
                          "DEFAULT 0"}});
  // A constant of ours; PRAGMA takes no bound values.
  c.exec(("PRAGMA user_version = " + std::to_string(Store::kSchemaVersion)).c_str());
  t.commit();
}

// The first read of a WAL file needs its -shm file; this is how SQLite says it could not use one.
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

struct Peek {
  bool wal_header = false;     // bytes 18-19 of the header say write-ahead logging
  bool writer_locked = false;  // a connection holds a RESERVED or stronger lock on the file
};

// Through SQLite's own descriptor of the main file: SQLite keeps that one open while any of this
// process's connections holds a lock on the file, where closing a descriptor of ours would drop
// those locks (POSIX).
Peek peek_file(const Connection& c) {
  Peek peek;
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(c.get(), "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK ||
      file == nullptr || file->pMethods == nullptr)
    return peek;
  unsigned char header[100] = {};
  static const char magic[] = "SQLite format 3";  // 16 bytes with its NUL
  if (file->pMethods->xRead(file, header, sizeof header, 0) == SQLITE_OK &&
      std::memcmp(header, magic, sizeof magic) == 0)
    peek.wal_header = header[18] == 2 || header[19] == 2;
  int locked = 0;
  if (file->pMethods->xCheckReservedLock(file, &locked) == SQLITE_OK)
    peek.writer_locked = locked != 0;
  return peek;
}

}  // namespace

sqlite3* open_writable(const fs::path& path) {
  const std::string label = path.string();
  const std::string at = where(label);
  std::error_code ec;
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw DatabaseError(at + "cannot open or create it: the directory " + printable(dir.string()) +
                        " does not exist (ktune does not create it)");
  const DiskState disk = inspect_disk(path, /*must_exist=*/false);
  // The write-ahead log lives in <file>-wal and <file>-shm, created and removed beside the file
  // (beside the symlink's target: SQLite resolves symlinks).
  dir = disk.resolved.parent_path();
  if (dir.empty()) dir = ".";
  if (access(dir.c_str(), W_OK) != 0)
    throw DatabaseError(at + "cannot write it: the directory " + printable(dir.string()) +
                        " is not writable (read-only media?) and SQLite needs to create " +
                        printable(path.filename().string()) +
                        "-wal and -shm there; open it read-only for lookups");
  Connection c(path, OpenMode::read_write_create);
  if (sqlite3_db_readonly(c.get(), "main") == 1)
    throw DatabaseError(at + "the file is not writable; open it read-only for lookups");
  configure(c, /*writable=*/true);
  if (checked_snapshot(c, /*blank_ok=*/true).blank()) {
    use_wal(c);
    create_schema(c);
    checked_snapshot(c, /*blank_ok=*/false);
  }
  use_wal(c);
  migrate(c);
  // Switching to WAL rewrites the header; SQLite creates -wal and -shm on the next read. Do that
  // read now, so that a reader never finds a WAL-mode file without its log while a writer is open.
  if (const int rc = probe(c.get()); rc != SQLITE_OK) fail(c.get(), rc, label, "the first read");
  return c.release();
}

sqlite3* open_readable(const fs::path& path, bool* immutable) {
  const std::string label = path.string();
  // A writer switching the file between journal modes holds a lock for a moment; a reader that
  // came then would take a WAL-mode file without a log for one at rest.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    const DiskState disk = inspect_disk(path, /*must_exist=*/true);
    const fs::path wal = sibling(disk.resolved, "-wal");
    const fs::path shm = sibling(disk.resolved, "-shm");
    const bool pending = disk.wal_exists && disk.wal_size > 0;
    const auto refuse_pending = [&](const std::string& why) {
      throw DatabaseError(where(label) + "a read-only open cannot use it: " + why + ", and " +
                          printable(wal.string()) +
                          " holds changes not yet in the main file; `ktune db recover --db " +
                          printable(label) + "` applies them (it needs write access), or copy "
                          "it while no writer has it open");
    };
    // Opening reads nothing and creates nothing yet; it lets SQLite's own descriptor read the
    // header and look for a writer's lock.
    Connection c(path, OpenMode::read_only);
    const Peek peek = peek_file(c);
    // SQLite in mode=ro still creates -wal and -shm for a file in WAL mode. So: rollback-journal
    // files (what a writer leaves when it closes) and files whose writer is active (its -wal and
    // -shm are there) open with mode=ro: shared locks, consistent reads, no new files. A WAL-mode
    // file without a log to apply opens immutable: no locks and no -shm at all.
    OpenMode mode = OpenMode::read_only;
    if (!disk.wal_exists) {
      if (peek.wal_header) mode = OpenMode::immutable;
    } else if (!disk.shm_exists) {
      if (pending)
        refuse_pending("there is no " + printable(shm.string()) +
                       " (its writer stopped without closing, or it was copied without it)");
      mode = OpenMode::immutable;
    }
    const bool can_wait = std::chrono::steady_clock::now() < deadline;
    if (mode == OpenMode::immutable && peek.writer_locked && can_wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (mode == OpenMode::read_only) {
      configure(c, /*writable=*/false);
      if (!shm_unavailable(probe(c.get()))) {
        checked_snapshot(c, /*blank_ok=*/false);
        return c.release();
      }
      // The writer's -shm is there but not usable by this reader (read-only media, another
      // user's file): the main file alone holds everything only when no log has pages pending.
      if (pending)
        refuse_pending("its directory or " + printable(shm.string()) +
                       " is read-only, so SQLite cannot use the shared-memory index");
    }
    Connection fixed(path, OpenMode::immutable);
    configure(fixed, /*writable=*/false);
    checked_snapshot(fixed, /*blank_ok=*/false);
    // A writer that started meanwhile has a log the immutable view would never see.
    std::error_code ec;
    if (!disk.wal_exists && fs::exists(wal, ec) && can_wait) continue;
    *immutable = true;
    return fixed.release();
  }
}

std::int64_t schema_version(sqlite3* db, const std::string& label) {
  return Statement(db, "PRAGMA user_version", label).row().int64(0);
}

void close_writable(sqlite3* db) noexcept {
  if (db == nullptr) return;
  // Only succeeds when no other connection has the file open; never waits for one. Other writers
  // keep WAL mode and the last of them converts; readers of either mode create no files.
  sqlite3_busy_timeout(db, 0);
  sqlite3_exec(db, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
  sqlite3_close_v2(db);
}

}  // namespace ktune::db
