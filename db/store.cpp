// Store: the writers (one IMMEDIATE transaction each) and the readers (every row checked alone,
// see rows.hpp). Opening and closing live in schema.cpp, the exports in export.cpp.
#include "db/store.hpp"

#include <sqlite3.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "db/rows.hpp"
#include "db/schema.hpp"
#include "db/sqlite.hpp"
#include "ktune/error.hpp"

namespace fs = std::filesystem;

namespace ktune {
namespace {

using db::kMaxKeyBytes;

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

// A best row's time: measured, so > 0 (the readers skip any other).
void require_time(double v, const char* field, const char* what) {
  if (!std::isfinite(v) || !(v > 0))
    throw InvalidArgument(std::string(what) + ": " + field + " is " + std::to_string(v) +
                          ", expected a measured time > 0");
}

// What the readers skip, the writers refuse: a row a Store wrote always reads back.
void require_short(const std::string& v, const char* field, const char* what) {
  if (v.size() > kMaxKeyBytes)
    throw InvalidArgument(std::string(what) + ": " + field + " " + ktune::quoted(v) +
                          " is longer than " + std::to_string(kMaxKeyBytes) + " bytes");
}

void require_key(const std::string& v, const char* field, const char* what) {
  if (v.empty()) throw InvalidArgument(std::string(what) + ": " + field + " is empty");
  require_short(v, field, what);
}

const db::Binder kNoValues = [](db::Statement&) {};

// The device row of `key` in a file of schema `version`, if one is there and valid; an invalid
// one goes to `skipped`.
std::optional<db::DeviceRow> find_device(sqlite3* db, const std::string& label,
                                         std::int64_t version, const std::string& key,
                                         std::vector<RowIssue>& skipped) {
  Rows<db::DeviceRow> got = db::read_rows(
      db, label, db::devices_table(version), "key = ?1", [&](db::Statement& s) { s.bind(1, key); },
      [&](const db::DeviceRow& r) { return r.key == key; });
  skipped.insert(skipped.end(), got.skipped.begin(), got.skipped.end());
  if (got.rows.empty()) return std::nullopt;
  return std::move(got.rows.front());
}

// Best rows with the name and arch of their device. A device row that is missing or invalid
// leaves both empty; an invalid one is listed once in `skipped`, the best row stays usable.
template <class Keep>
Rows<BestRecord> best_rows(sqlite3* db, const std::string& label, std::int64_t version,
                           const std::string& filter, const db::Binder& bind, Keep keep) {
  db::ReadSnapshot snapshot(db, label);
  Rows<BestRecord> out = db::read_rows(db, label, db::kBest, filter, bind, keep);
  std::map<std::string, std::optional<db::DeviceRow>> devices;
  std::vector<RowIssue> device_issues;
  for (BestRecord& b : out.rows) {
    auto it = devices.find(b.device_key);
    if (it == devices.end())
      it = devices
               .emplace(b.device_key, find_device(db, label, version, b.device_key, device_issues))
               .first;
    if (!it->second) continue;
    b.device_name = it->second->info.name;
    b.arch = it->second->info.arch();
  }
  std::set<std::int64_t> listed;  // a device row may be reached from many best rows
  for (RowIssue& issue : device_issues)
    if (listed.insert(issue.rowid).second) out.skipped.push_back(std::move(issue));
  return out;
}

}  // namespace

// ---- opening and closing ----

Store Store::open(const fs::path& path, Mode mode) {
  if (path.empty()) throw InvalidArgument("Store::open: the database path is empty");
  Store store;
  store.path_ = path;
  store.read_only_ = mode == Mode::read_only;
  store.db_ =
      store.read_only_ ? db::open_readable(path, &store.immutable_) : db::open_writable(path);
  store.schema_version_ = db::schema_version(store.db_, path.string());
  return store;
}

Store::Store(Store&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      read_only_(other.read_only_),
      immutable_(other.immutable_),
      schema_version_(other.schema_version_) {}

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    if (read_only_)
      sqlite3_close_v2(db_);
    else
      db::close_writable(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    read_only_ = other.read_only_;
    immutable_ = other.immutable_;
    schema_version_ = other.schema_version_;
  }
  return *this;
}

// The last writer to close checkpoints the log into the main file, removes -wal and -shm and
// returns the file to rollback-journal mode (close_writable).
Store::~Store() {
  if (read_only_)
    sqlite3_close_v2(db_);
  else
    db::close_writable(db_);
}

void Store::require_writable(const char* what) const {
  if (db_ == nullptr) throw DatabaseError(std::string(what) + ": the store was moved from");
  if (read_only_)
    throw DatabaseError(db::where(path_.string()) + "opened read-only; " + what +
                        " needs read_write");
}

// ---- devices ----

void Store::upsert_device(const DeviceInfo& device) {
  require_writable("upsert_device");
  if (device.name.empty()) throw InvalidArgument("upsert_device: the device has no name");
  require_short(device.key(), "key", "upsert_device");
  // The readers skip a fingerprint outside these ranges (db/rows.cpp); never write one.
  if (device.cc_major < 1 || device.cc_major > 99 || device.cc_minor < 0 || device.cc_minor > 9 ||
      device.sm_count < 1 || device.sm_count > 100000)
    throw InvalidArgument("upsert_device: compute capability " + std::to_string(device.cc_major) +
                          "." + std::to_string(device.cc_minor) + " with " +
                          std::to_string(device.sm_count) +
                          " SMs is not a GPU's (expected 1..99, 0..9 and 1..100000 SMs)");
  for (const std::int64_t v :
       {device.memory_bytes, device.l2_bytes, static_cast<std::int64_t>(device.smem_optin_per_block),
        static_cast<std::int64_t>(device.smem_per_sm), static_cast<std::int64_t>(device.regs_per_block),
        static_cast<std::int64_t>(device.regs_per_sm),
        static_cast<std::int64_t>(device.max_threads_per_block),
        static_cast<std::int64_t>(device.max_threads_per_sm),
        static_cast<std::int64_t>(device.driver_version),
        static_cast<std::int64_t>(device.nvrtc_version)})
    if (v < 0) throw InvalidArgument("upsert_device: a negative size or version in the fingerprint");
  if (device.memory_bandwidth < 0 || device.memory_bandwidth > 1'000'000'000'000'000)
    throw InvalidArgument("upsert_device: memory_bandwidth " +
                          std::to_string(device.memory_bandwidth) +
                          " bytes/s is not a GPU's (expected 0, unknown, to 1e15)");
  const std::string label = path_.string();
  db::Transaction t(db_, label);
  // copy_bandwidth is measured separately and survives a refresh.
  db::Statement s(db_, R"sql(
    INSERT INTO devices (key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes,
                         smem_optin, smem_per_sm, regs_per_block, regs_per_sm,
                         max_threads_per_block, max_threads_per_sm, driver_version,
                         nvrtc_version, memory_bandwidth, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
            strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    ON CONFLICT (key) DO UPDATE SET
      name = excluded.name, cc_major = excluded.cc_major, cc_minor = excluded.cc_minor,
      sm_count = excluded.sm_count, memory_bytes = excluded.memory_bytes,
      l2_bytes = excluded.l2_bytes, smem_optin = excluded.smem_optin,
      smem_per_sm = excluded.smem_per_sm, regs_per_block = excluded.regs_per_block,
      regs_per_sm = excluded.regs_per_sm, max_threads_per_block = excluded.max_threads_per_block,
      max_threads_per_sm = excluded.max_threads_per_sm, driver_version = excluded.driver_version,
      nvrtc_version = excluded.nvrtc_version, memory_bandwidth = excluded.memory_bandwidth,
      updated_at = excluded.updated_at)sql",
                  label);
  s.bind_all(device.key(), device.name, device.cc_major, device.cc_minor, device.sm_count,
             device.memory_bytes, device.l2_bytes, device.smem_optin_per_block,
             device.smem_per_sm, device.regs_per_block, device.regs_per_sm,
             device.max_threads_per_block, device.max_threads_per_sm, device.driver_version,
             device.nvrtc_version, device.memory_bandwidth);
  s.run();
  t.commit();
}

std::optional<DeviceInfo> Store::device(const std::string& device_key,
                                        std::vector<RowIssue>* skipped) const {
  std::vector<RowIssue> issues;
  std::optional<db::DeviceRow> row =
      find_device(db_, path_.string(), schema_version_, device_key, issues);
  if (skipped != nullptr) skipped->insert(skipped->end(), issues.begin(), issues.end());
  if (!row) return std::nullopt;
  return std::move(row->info);
}

Rows<DeviceInfo> Store::devices() const {
  Rows<db::DeviceRow> got =
      db::read_all(db_, path_.string(), db::devices_table(schema_version_));
  Rows<DeviceInfo> out;
  out.skipped = std::move(got.skipped);
  for (db::DeviceRow& r : got.rows) out.rows.push_back(std::move(r.info));
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
    throw InvalidArgument("set_copy_bandwidth: device " + ktune::quoted(device_key) +
                          " is not in " + printable(label) + "; call upsert_device first");
  t.commit();
}

double Store::copy_bandwidth(const std::string& device_key) const {
  std::vector<RowIssue> ignored;  // an invalid row reads as unknown: the sweep measures again
  const std::optional<db::DeviceRow> row =
      find_device(db_, path_.string(), schema_version_, device_key, ignored);
  return row ? row->copy_bandwidth : 0.0;
}

// ---- sweeps and trials ----

std::int64_t Store::begin_sweep(const SweepRecord& sweep) {
  require_writable("begin_sweep");
  const char* what = "begin_sweep";
  const char* dtype = checked_dtype(sweep.dtype, what);
  require_key(sweep.device_key, "device_key", what);
  require_key(sweep.op, "op", what);
  require_key(sweep.problem_key, "problem_key", what);
  require_short(sweep.strategy, "strategy", what);
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
  require_short(trial.params_key, "params_key", what);
  require_short(trial.template_hash, "template_hash", what);
  const std::pair<double, const char*> timings[] = {
      {trial.median_us, "median_us"},   {trial.min_us, "min_us"},
      {trial.max_us, "max_us"},         {trial.spread_pct, "spread_pct"},
      {trial.compile_seconds, "compile_seconds"},
  };
  for (const auto& [value, field] : timings) require_finite(value, field, what);
  // An ok trial becomes a best row when it is the fastest, so it carries a measured time.
  if (trial.status == TrialStatus::ok) require_time(trial.median_us, "median_us of an ok trial", what);
  const char* status = status_name(trial.status);
  if (!parse_status(status))
    throw InvalidArgument(std::string(what) + ": status " +
                          std::to_string(static_cast<int>(trial.status)) + " is not a TrialStatus");
  if (trial.device_ordinal < -1)
    throw InvalidArgument(std::string(what) + ": device_ordinal is " +
                          std::to_string(trial.device_ordinal) + ", expected -1 (not recorded) or "
                          "an ordinal >= 0");
  require_short(trial.pci_bus_id, "pci_bus_id", what);

  const std::string label = path_.string();
  db::Transaction t(db_, label);
  db::Statement insert(db_, R"sql(
    INSERT INTO trials (sweep_id, device_key, op, dtype, problem_key, params_key, template_hash,
                        nvrtc_version, status, detail, median_us, min_us, max_us, spread_pct,
                        repetitions, registers, shared_bytes, local_bytes, spill_bytes,
                        compile_seconds, created_at, device_ordinal, pci_bus_id)
    VALUES (NULLIF(?1, 0), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19, ?20, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), NULLIF(?21, -1), NULLIF(?22, '')))sql",
                       label);
  insert.bind_all(trial.sweep_id, trial.device_key, trial.op, dtype, trial.problem_key,
                  trial.params_key, trial.template_hash, trial.nvrtc_version, status, trial.detail,
                  trial.median_us, trial.min_us, trial.max_us, trial.spread_pct, trial.repetitions,
                  trial.registers, trial.shared_bytes, trial.local_bytes, trial.spill_bytes,
                  trial.compile_seconds, trial.device_ordinal, trial.pci_bus_id);
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

Rows<TrialRecord> Store::trials(const std::string& device_key, const std::string& op,
                                DType dtype, const std::string& problem_key,
                                const std::string& template_hash) const {
  const std::string dtype_text = dtype_name(dtype);
  return db::read_rows(
      db_, path_.string(), db::trials_table(schema_version_),
      "device_key = ?1 AND op = ?2 AND dtype = ?3 AND problem_key = ?4 AND template_hash = ?5",
      [&](db::Statement& s) {
        s.bind_all(device_key, op, dtype_text, problem_key, template_hash);
      },
      [&](const TrialRecord& t) {
        return t.device_key == device_key && t.op == op && t.dtype == dtype &&
               t.problem_key == problem_key && t.template_hash == template_hash;
      });
}

Rows<SweepRecord> Store::sweeps() const { return db::read_all(db_, path_.string(), db::kSweeps); }

Rows<TrialRecord> Store::all_trials(const std::string& op_filter) const {
  return db::read_rows(
      db_, path_.string(), db::trials_table(schema_version_), "?1 = '' OR op = ?1",
      [&](db::Statement& s) { s.bind(1, op_filter); },
      [&](const TrialRecord& t) { return op_filter.empty() || t.op == op_filter; });
}

// ---- best ----

void Store::set_best(const BestRecord& record) {
  require_writable("set_best");
  const char* what = "set_best";
  const char* dtype = checked_dtype(record.dtype, what);
  require_key(record.device_key, "device_key", what);
  require_key(record.op, "op", what);
  require_key(record.problem_key, "problem_key", what);
  require_short(record.params_key, "params_key", what);
  require_short(record.template_hash, "template_hash", what);
  require_time(record.median_us, "median_us", what);
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
                                      const std::string& template_hash,
                                      std::vector<RowIssue>* skipped) const {
  const std::string dtype_text = dtype_name(dtype);
  Rows<BestRecord> got = best_rows(
      db_, path_.string(), schema_version_,
      "device_key = ?1 AND op = ?2 AND dtype = ?3 AND problem_key = ?4 AND template_hash = ?5",
      [&](db::Statement& s) {
        s.bind_all(device_key, op, dtype_text, problem_key, template_hash);
      },
      [&](const BestRecord& b) {
        return b.device_key == device_key && b.op == op && b.dtype == dtype &&
               b.problem_key == problem_key && b.template_hash == template_hash;
      });
  if (skipped != nullptr) skipped->insert(skipped->end(), got.skipped.begin(), got.skipped.end());
  if (got.rows.empty()) return std::nullopt;
  return std::move(got.rows.front());
}

Rows<BestRecord> Store::bests(const std::string& op, DType dtype) const {
  const std::string dtype_text = dtype_name(dtype);
  return best_rows(
      db_, path_.string(), schema_version_, "op = ?1 AND dtype = ?2",
      [&](db::Statement& s) { s.bind_all(op, dtype_text); },
      [&](const BestRecord& b) { return b.op == op && b.dtype == dtype; });
}

Rows<BestRecord> Store::all_bests(const std::string& op_filter) const {
  return best_rows(
      db_, path_.string(), schema_version_, "?1 = '' OR op = ?1", [&](db::Statement& s) { s.bind(1, op_filter); },
      [&](const BestRecord& b) { return op_filter.empty() || b.op == op_filter; });
}

// ---- checks ----

std::string Store::integrity_check() const {
  db::Statement s(db_, "PRAGMA integrity_check", path_.string());
  std::string out;
  while (s.step()) {
    if (!out.empty()) out += '\n';
    out += s.text(0);
  }
  return out;
}

CheckReport Store::check() const {
  CheckReport r;
  const std::string label = path_.string();
  try {
    r.integrity = integrity_check();
  } catch (const DatabaseError& e) {
    r.integrity = e.what();  // a file too damaged to check is reported, not thrown
  }
  // Every table in full, each row through the readers' checks. A table that cannot be scanned at
  // all is one issue (rowid 0) rather than an exception, so the report covers the others too.
  const auto add = [&](const char* table, const auto& read) {
    try {
      const auto rows = read();
      r.rows_checked += rows.rows.size() + rows.skipped.size();
      r.issues.insert(r.issues.end(), rows.skipped.begin(), rows.skipped.end());
    } catch (const DatabaseError& e) {
      r.issues.push_back({table, 0, std::string(table) + ": cannot be scanned: " + e.what()});
    }
  };
  add(db::kDevices.name,
      [&] { return db::read_all(db_, label, db::devices_table(schema_version_)); });
  add(db::kSweeps.name, [&] { return db::read_all(db_, label, db::kSweeps); });
  add(db::kTrials.name,
      [&] { return db::read_all(db_, label, db::trials_table(schema_version_)); });
  add(db::kBest.name, [&] { return db::read_all(db_, label, db::kBest); });
  // References that point nowhere (a trial's sweep_id, a best row's trial_id): SQLite enforces
  // them on our writes, but a file edited by hand or by another program may hold them.
  try {
    db::Statement fk(db_, "PRAGMA foreign_key_check", label);
    while (fk.step())
      r.issues.push_back({fk.text(0), fk.int64(1),
                          fk.text(0) + " row " + std::to_string(fk.int64(1)) + ": refers to a " +
                              fk.text(2) + " row that does not exist"});
  } catch (const DatabaseError& e) {
    r.issues.push_back({"", 0, std::string("foreign key check failed: ") + e.what()});
  }
  return r;
}

// ---- statuses ----

const char* status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::ok: return "ok";
    case TrialStatus::invalid: return "invalid";
    case TrialStatus::compile_error: return "compile_error";
    case TrialStatus::compile_timeout: return "compile_timeout";
    case TrialStatus::launch_error: return "launch_error";
    case TrialStatus::timeout: return "timeout";
    case TrialStatus::wrong_result: return "wrong_result";
  }
  return "?";
}

std::optional<TrialStatus> parse_status(std::string_view s) {
  for (TrialStatus t : {TrialStatus::ok, TrialStatus::invalid, TrialStatus::compile_error,
                        TrialStatus::compile_timeout, TrialStatus::launch_error,
                        TrialStatus::timeout, TrialStatus::wrong_result})
    if (s == status_name(t)) return t;
  return std::nullopt;
}

}  // namespace ktune
