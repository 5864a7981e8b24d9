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

enum class TrialStatus { ok, invalid, compile_error, launch_error, timeout, wrong_result };
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

/// An open tuning database. Thread-compatible (one Store per thread); many processes may write
/// one file at once (WAL, busy timeout, BEGIN IMMEDIATE, one commit per trial).
class Store {
 public:
  enum class Mode { read_write, read_only };

  /// Opens or creates (read_write) the database at `path`. Checks application_id and
  /// user_version and throws DatabaseError with a clear message on a foreign, newer or corrupt
  /// file, or a path in a missing directory. Read-only opens never create or modify the file and
  /// also work on read-only media.
  static Store open(const std::filesystem::path& path, Mode mode);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::filesystem::path& path() const { return path_; }
  bool read_only() const { return read_only_; }
  /// True when a read-only open fell back to SQLite's immutable mode because the file sits where
  /// its -shm file cannot be created (read-only media); the file must then not change under us.
  bool immutable() const { return immutable_; }

  /// Inserts or refreshes the device row (fingerprint fields).
  void upsert_device(const DeviceInfo& device);
  std::optional<DeviceInfo> device(const std::string& device_key) const;
  std::vector<DeviceInfo> devices() const;
  /// Device-to-device copy bandwidth in bytes/s measured once per device; 0 when unknown.
  void set_copy_bandwidth(const std::string& device_key, double bytes_per_second);
  double copy_bandwidth(const std::string& device_key) const;

  /// Records the start of a sweep; returns its id.
  std::int64_t begin_sweep(const SweepRecord& sweep);

  /// Inserts one trial in its own IMMEDIATE transaction; if the trial is ok and faster than the
  /// current best for its key (same template hash), the best row is updated in the same
  /// transaction. Returns the trial id.
  /// sweep_id 0 means none; another id must name a sweep of this database (else DatabaseError).
  /// Throws InvalidArgument for a NaN, infinite or negative timing, an empty device_key, op or
  /// problem_key, or a dtype/status outside its enum; DatabaseError on a read-only store.
  std::int64_t record_trial(const TrialRecord& trial);

  /// Trials for a key with this template hash (newest last): what a resumed sweep skips.
  std::vector<TrialRecord> trials(const std::string& device_key, const std::string& op, DType dtype,
                                  const std::string& problem_key,
                                  const std::string& template_hash) const;

  /// Sets the best of a key explicitly (after re-timing the leaders), in one transaction.
  /// device_name and arch are not stored (they come from the devices row); trial_id 0 means none.
  void set_best(const BestRecord& best);
  /// device_name and arch come from the devices row; both are empty when the device is unknown.
  std::optional<BestRecord> best(const std::string& device_key, const std::string& op, DType dtype,
                                 const std::string& problem_key,
                                 const std::string& template_hash) const;
  /// Every best row of an op and dtype, all devices and template hashes: the runtime's candidates
  /// for nearest-shape and other-device matches.
  std::vector<BestRecord> bests(const std::string& op, DType dtype) const;
  /// Every best row (for `ktune db list`), optionally filtered by op.
  std::vector<BestRecord> all_bests(const std::string& op_filter = {}) const;
  std::vector<SweepRecord> sweeps() const;
  /// Every trial, optionally filtered by op (for `ktune db show/export`).
  std::vector<TrialRecord> all_trials(const std::string& op_filter = {}) const;

  /// PRAGMA integrity_check; "ok" when healthy.
  std::string integrity_check() const;

  static constexpr std::int32_t kApplicationId = 0x6b74756e;  // "ktun"
  static constexpr std::int32_t kSchemaVersion = 1;

 private:
  Store() = default;
  void require_writable(const char* what) const;

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  bool read_only_ = false;
  bool immutable_ = false;
};

/// Trials as a JSON array of objects, one per line, every TrialRecord field by name (for
/// `ktune db export`). Strings are escaped; invalid UTF-8 becomes U+FFFD.
std::string export_json(const std::vector<TrialRecord>& trials);
/// Trials as CSV: a header row of field names, then one row per trial; fields holding a comma,
/// quote or line break are quoted with doubled quotes (RFC 4180). Lines end with "\n".
std::string export_csv(const std::vector<TrialRecord>& trials);
/// One best row as a single-line JSON object.
std::string best_to_json(const BestRecord& best);

/// Where the user's database lives: $KTUNE_DB, else $XDG_DATA_HOME/ktune/ktune.db, else
/// ~/.local/share/ktune/ktune.db.
std::filesystem::path default_db_path();

/// Read-only databases under the user's: each entry of $KTUNE_DB_PATH (colon-separated files or
/// directories of *.db), then <install prefix>/share/ktune/db/*.db, then the source tree's
/// db/shipped/*.db when running from a build tree. Missing entries are skipped.
std::vector<std::filesystem::path> shipped_db_paths();

}  // namespace ktune
