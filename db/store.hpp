// The tuning database: devices, sweeps, every trial, and the best configuration per
// (device, op, dtype, problem, template hash). SQLite stays behind this header: only db/*.cpp
// include sqlite3.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/types.hpp"

struct sqlite3;

namespace ktune {

// Stored by name: the order is free, but names never change.
enum class TrialStatus {
  ok,
  invalid,
  compile_error,
  compile_timeout,  // NVRTC ran past the compile time limit and was stopped
  launch_error,
  timeout,
  wrong_result
};
const char* status_name(TrialStatus s);
std::optional<TrialStatus> parse_status(std::string_view s);

/// One measured (or rejected) configuration.
struct TrialRecord {
  std::int64_t id = 0;            // assigned by the database
  std::int64_t sweep_id = 0;
  std::string device_key;         // DeviceInfo::key()
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;        // Op::problem_key
  std::string params_key;         // Op::params_key
  std::string template_hash;      // Op::template_hash
  int nvrtc_version = 0;
  TrialStatus status = TrialStatus::ok;
  std::string detail;             // reason, compile log excerpt, error text
  double median_us = 0.0;         // timings, ok trials only
  double min_us = 0.0;
  double max_us = 0.0;
  double spread_pct = 0.0;        // (p90 - p10) / median * 100
  int repetitions = 0;
  int registers = 0;              // resource usage of the (first) kernel
  int shared_bytes = 0;
  int local_bytes = 0;
  int spill_bytes = 0;
  double compile_seconds = 0.0;
  std::string created_at;         // UTC ISO-8601, set by the database
  int device_ordinal = -1;        // CUDA ordinal of the GPU it ran on; -1: not recorded (older
                                  // databases, rows not measured on a GPU)
  std::string pci_bus_id;         // that GPU's PCI bus id ("0000:1b:00.0"); empty: not recorded
};

/// The configuration the runtime dispatches for one key.
struct BestRecord {
  std::string device_key;
  std::string device_name;
  std::string arch;               // e.g. "sm_90a"
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string params_key;
  std::string template_hash;
  double median_us = 0.0;
  std::int64_t trial_id = 0;
  std::string updated_at;
};

struct SweepRecord {
  std::int64_t id = 0;
  std::string device_key;
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string strategy;
  std::string command_line;
  std::string started_at;
};

/// A row skipped alone because it could not be read (a value too long, a corrupt page) or failed
/// ktune's validation (an unknown dtype, an integer out of range, a NaN timing, an empty key).
struct RowIssue {
  std::string table;              // "devices", "sweeps", "trials" or "best"
  std::int64_t rowid = 0;         // 0 when a whole table could not be scanned (Store::check)
  std::string reason;             // one line: table, rowid, column and the bad value (truncated)
};

/// The readable rows of a query, and the rows skipped with their reasons.
template <class T>
struct Rows {
  std::vector<T> rows;
  std::vector<RowIssue> skipped;
};

/// `ktune db check`: SQLite's integrity check and ktune's validation of every row.
struct CheckReport {
  std::string integrity;          // PRAGMA integrity_check output ("ok" when healthy)
  std::size_t rows_checked = 0;
  std::vector<RowIssue> issues;   // every row that a reader would skip
  bool ok() const { return integrity == "ok" && issues.empty(); }
};

/// An open tuning database. Thread-compatible (one Store per thread); many processes may write
/// one file at once (WAL, busy timeout, BEGIN IMMEDIATE, one commit per trial). The file is in WAL
/// mode while writers have it open and back in rollback-journal mode once the last one closes, so
/// that readers never need to create -wal/-shm files.
/// Every reader validates each row alone: a row that cannot be read or fails validation is
/// skipped and reported in Rows::skipped with its reason; the other rows stay usable.
class Store {
 public:
  enum class Mode { read_write, read_only };

  /// Opens or creates (read_write) the database at `path`. Checks application_id and
  /// user_version and throws DatabaseError with a clear message on a foreign, newer or corrupt
  /// file, or a path in a missing directory. A path that is not a regular file (a FIFO, socket,
  /// device or directory), or a -wal/-shm/-journal beside it that is not one, is refused before
  /// SQLite opens anything, so nothing blocks. Read-only opens never create, modify or remove a
  /// file, beside the database included, and also work on read-only media. An empty path throws
  /// InvalidArgument.
  static Store open(const std::filesystem::path& path, Mode mode);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::filesystem::path& path() const { return path_; }
  bool read_only() const { return read_only_; }
  /// True when a read-only open uses SQLite's immutable mode: the file is in WAL mode with no log
  /// pending (written by an older ktune, or a copy), or sits where the writer's -shm cannot be
  /// used (read-only media). No locks are taken, so the file must then not change under us.
  bool immutable() const { return immutable_; }
  /// The file's schema version (PRAGMA user_version): kSchemaVersion after a read_write open.
  std::int64_t schema_version() const { return schema_version_; }

  /// Inserts or refreshes the device row (fingerprint fields).
  void upsert_device(const DeviceInfo& device);
  /// nullopt when the device is unknown or its row is invalid (then added to `skipped`).
  std::optional<DeviceInfo> device(const std::string& device_key,
                                   std::vector<RowIssue>* skipped = nullptr) const;
  Rows<DeviceInfo> devices() const;
  /// Device-to-device copy bandwidth in bytes/s measured once per device; 0 when unknown.
  void set_copy_bandwidth(const std::string& device_key, double bytes_per_second);
  double copy_bandwidth(const std::string& device_key) const;

  /// Records the start of a sweep; returns its id. Throws InvalidArgument for an empty device_key,
  /// op or problem_key, or a key or strategy longer than 4096 bytes.
  std::int64_t begin_sweep(const SweepRecord& sweep);

  /// Inserts one trial in its own IMMEDIATE transaction; if the trial is ok and faster than the
  /// current best for its key (same template hash), the best row is updated in the same
  /// transaction. Returns the trial id.
  /// sweep_id 0 means none; another id must name a sweep of this database (else DatabaseError).
  /// Throws InvalidArgument for a NaN, infinite or negative timing, an empty device_key, op or
  /// problem_key, a key longer than 4096 bytes, or a dtype/status outside its enum (what a reader
  /// would skip is never written); DatabaseError on a read-only store.
  std::int64_t record_trial(const TrialRecord& trial);

  /// Trials for a key with this template hash (newest last): what a resumed sweep skips.
  Rows<TrialRecord> trials(const std::string& device_key, const std::string& op, DType dtype,
                           const std::string& problem_key, const std::string& template_hash) const;

  /// Sets the best of a key explicitly (after re-timing the leaders), in one transaction.
  /// device_name and arch are not stored (they come from the devices row); trial_id 0 means none.
  void set_best(const BestRecord& best);
  /// device_name and arch come from the devices row; both are empty when the device is unknown.
  /// nullopt when there is none or its row is invalid (then added to `skipped`).
  std::optional<BestRecord> best(const std::string& device_key, const std::string& op, DType dtype,
                                 const std::string& problem_key, const std::string& template_hash,
                                 std::vector<RowIssue>* skipped = nullptr) const;
  /// Every best row of an op and dtype, all devices and template hashes: the runtime's candidates
  /// for nearest-shape and other-device matches.
  Rows<BestRecord> bests(const std::string& op, DType dtype) const;
  /// Every best row (for `ktune db list`), optionally filtered by op.
  Rows<BestRecord> all_bests(const std::string& op_filter = {}) const;
  Rows<SweepRecord> sweeps() const;
  /// Every trial, optionally filtered by op (for `ktune db show/export`).
  Rows<TrialRecord> all_trials(const std::string& op_filter = {}) const;

  /// PRAGMA integrity_check; "ok" when healthy.
  std::string integrity_check() const;
  /// integrity_check plus every row of every table through the readers' validation. Reports
  /// rather than throws what it finds, a table that cannot be scanned included.
  CheckReport check() const;

  static constexpr std::int32_t kApplicationId = 0x6b74756e;  // "ktun"
  /// Written by this ktune. Version 2 added trials.device_ordinal and trials.pci_bus_id, version 3
  /// devices.memory_bandwidth.
  static constexpr std::int32_t kSchemaVersion = 3;
  /// The oldest version opened: read as it is, and brought to kSchemaVersion by a read_write open.
  static constexpr std::int32_t kOldestSchemaVersion = 1;

 private:
  Store() = default;
  void require_writable(const char* what) const;

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  bool read_only_ = false;
  bool immutable_ = false;
  std::int64_t schema_version_ = 0;
};

/// Trials as a JSON array of objects, one per line, every TrialRecord field by name (for
/// `ktune db export`). Strings are escaped; invalid UTF-8 becomes U+FFFD.
std::string export_json(const std::vector<TrialRecord>& trials);
/// Trials as CSV: a header row of field names, then one row per trial; fields holding a comma,
/// quote or line break are quoted with doubled quotes (RFC 4180). A text field starting with =, +,
/// -, @, tab or CR gets a leading ' so that spreadsheets do not run it as a formula; numbers stay
/// numbers. Lines end with "\n".
std::string export_csv(const std::vector<TrialRecord>& trials);
/// One best row as a single-line JSON object.
std::string best_to_json(const BestRecord& best);

/// The user's database path and where it came from, so that a message about it can name the
/// variable that chose it.
struct DbLocation {
  std::filesystem::path path;
  std::string source;             // "--db", "$KTUNE_DB", "$XDG_DATA_HOME", "$HOME" or "the password database"
  bool ktune_places_it = false;   // the default location: ktune may create its directory
  /// The path quoted and truncated, then where it came from: "/x/ktune.db" (from $XDG_DATA_HOME).
  std::string describe() const;
};

/// Where the user's database lives: $KTUNE_DB, else $XDG_DATA_HOME/ktune/ktune.db, else
/// ~/.local/share/ktune/ktune.db. An empty variable counts as unset. Throws DatabaseError when
/// there is no home directory to fall back on.
DbLocation default_db_location();
/// default_db_location().path
std::filesystem::path default_db_path();

/// Read-only databases under the user's: each entry of $KTUNE_DB_PATH (colon-separated files or
/// directories of *.db), then <install prefix>/share/ktune/db/*.db, then the source tree's
/// db/shipped/*.db when running from a build tree. Missing entries are skipped.
std::vector<std::filesystem::path> shipped_db_paths();

}  // namespace ktune
