// `ktune db merge` and `ktune db diff`. Merging reads every input through the readers' checks and
// writes a fresh database in a canonical order: the output is a function of the set of rows read,
// which is what makes merging idempotent and order-independent.
#include "db/merge.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "db/file.hpp"
#include "db/rows.hpp"
#include "db/schema.hpp"
#include "db/sqlite.hpp"
#include "ktune/error.hpp"

namespace fs = std::filesystem;

namespace ktune {
namespace {

// A sweep's identity across files: everything but its id.
using SweepKey = std::tuple<std::string, std::string, std::string, std::string, std::string,
                            std::string, std::string>;

SweepKey sweep_key(const SweepRecord& s) {
  return {s.started_at, s.device_key, s.op, dtype_name(s.dtype), s.problem_key, s.strategy,
          s.command_line};
}

// A trial's identity across files: everything but its ids, and its sweep's identity (or none).
// Ordered by creation time first, so that the output lists trials as they were measured.
struct TrialKey {
  std::string created_at;
  std::optional<SweepKey> sweep;
  std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, int,
             std::string, std::string, double, double, double, double, int, int, int, int, int,
             double, int, std::string>
      fields;

  bool operator<(const TrialKey& o) const {
    return std::tie(created_at, sweep, fields) < std::tie(o.created_at, o.sweep, o.fields);
  }
  bool operator==(const TrialKey& o) const {
    return std::tie(created_at, sweep, fields) == std::tie(o.created_at, o.sweep, o.fields);
  }
};

TrialKey trial_key(const TrialRecord& t, const std::optional<SweepKey>& sweep) {
  return {t.created_at,
          sweep,
          {t.device_key, t.op, dtype_name(t.dtype), t.problem_key, t.params_key, t.template_hash,
           t.nvrtc_version, status_name(t.status), t.detail, t.median_us, t.min_us, t.max_us,
           t.spread_pct, t.repetitions, t.registers, t.shared_bytes, t.local_bytes, t.spill_bytes,
           t.compile_seconds, t.device_ordinal, t.pci_bus_id}};
}

// The schema's key of the best table.
using BestKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;

BestKey best_key(const BestRecord& b) {
  return {b.op, dtype_name(b.dtype), b.device_key, b.problem_key, b.template_hash};
}

// One input's best row, with what the output needs to write it and to rank it.
struct BestCandidate {
  BestRecord row;
  std::optional<TrialKey> trial;  // the trial it names, when that trial was readable
  std::string tie_time;           // its sweep's start time, else the row's updated_at
};

// Whether `a` beats `b`: the faster median, then the later sweep, then a fixed order of what the
// output writes (params, updated_at, trial), so that exactly one candidate wins whatever the order.
bool beats(const BestCandidate& a, const BestCandidate& b) {
  if (a.row.median_us != b.row.median_us) return a.row.median_us < b.row.median_us;
  if (a.tie_time != b.tie_time) return a.tie_time > b.tie_time;
  return std::tie(a.row.params_key, a.row.updated_at, a.trial) <
         std::tie(b.row.params_key, b.row.updated_at, b.trial);
}

bool same_written(const BestCandidate& a, const BestCandidate& b) {
  return a.row.params_key == b.row.params_key && a.row.median_us == b.row.median_us &&
         a.row.updated_at == b.row.updated_at && a.trial == b.trial;
}

// The devices row kept for a key: the one updated last, then the larger fingerprint.
auto device_rank(const db::DeviceRow& d) {
  const DeviceInfo& i = d.info;
  return std::make_tuple(d.updated_at, i.name, i.cc_major, i.cc_minor, i.sm_count, i.memory_bytes,
                         i.l2_bytes, i.smem_optin_per_block, i.smem_per_sm, i.regs_per_block,
                         i.regs_per_sm, i.max_threads_per_block, i.max_threads_per_sm,
                         i.driver_version, i.nvrtc_version, d.copy_bandwidth, i.memory_bandwidth);
}

struct Merged {
  std::map<std::string, db::DeviceRow> devices;
  // The largest memory bandwidth any input knows for a key: the kept row's when it knows none
  // (a row of schema version 2 updated after the one that recorded it).
  std::map<std::string, std::int64_t> memory_bandwidths;
  std::set<SweepKey> sweeps;
  std::map<TrialKey, TrialRecord> trials;
  std::map<BestKey, BestCandidate> bests;
};

// A read-only connection to one input, closed at the end.
class Source {
 public:
  Source(const fs::path& path, const RowChecks& checks) : label_(path.string()), checks_(checks) {
    bool immutable = false;
    db_ = db::open_readable(path, &immutable);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() { sqlite3_close_v2(db_); }

  // Adds this file's readable rows to `m`; skipped rows go to `skipped`. `trials_seen` and
  // `bests_seen` receive this file's trials and best rows (the output's own, before the merge).
  void read_into(Merged& m, std::vector<SourceIssue>& skipped, std::set<TrialKey>* trials_seen,
                 std::map<BestKey, BestCandidate>* bests_seen) const {
    db::ReadSnapshot snapshot(db_, label_);
    const auto note = [&](const std::vector<RowIssue>& issues) {
      for (const RowIssue& i : issues) skipped.push_back({label_, i});
    };
    const std::int64_t version = db::schema_version(db_, label_);
    Rows<db::DeviceRow> devices = db::read_all(db_, label_, db::devices_table(version));
    Rows<SweepRecord> sweeps = db::read_all(db_, label_, db::kSweeps);
    Rows<TrialRecord> trials = db::read_all(db_, label_, db::trials_table(version));
    Rows<BestRecord> bests = db::read_all(db_, label_, db::kBest);
    note(devices.skipped);
    note(sweeps.skipped);
    note(trials.skipped);
    note(bests.skipped);

    for (db::DeviceRow& d : devices.rows) {
      std::int64_t& known = m.memory_bandwidths[d.key];
      known = std::max(known, d.info.memory_bandwidth);
      auto [it, fresh] = m.devices.emplace(d.key, d);
      if (!fresh && device_rank(it->second) < device_rank(d)) it->second = std::move(d);
    }
    std::map<std::int64_t, SweepKey> sweep_by_id;
    for (const SweepRecord& s : sweeps.rows) {
      sweep_by_id.emplace(s.id, sweep_key(s));
      m.sweeps.insert(sweep_key(s));
    }
    // A trial whose sweep is not readable keeps its measurements and loses the link.
    std::map<std::int64_t, TrialKey> trial_by_id;
    std::map<std::int64_t, const TrialRecord*> trial_rows;
    for (const TrialRecord& t : trials.rows) {
      if (checks_.trial)
        if (std::optional<std::string> why = checks_.trial(t)) {
          skipped.push_back({label_, {"trials", t.id, "trials row " + std::to_string(t.id) + ": " + *why}});
          continue;
        }
      trial_rows.emplace(t.id, &t);
      const auto sweep = sweep_by_id.find(t.sweep_id);
      const std::optional<SweepKey> sk =
          sweep == sweep_by_id.end() ? std::nullopt : std::optional<SweepKey>(sweep->second);
      TrialKey key = trial_key(t, sk);
      trial_by_id.emplace(t.id, key);
      if (trials_seen != nullptr) trials_seen->insert(key);
      m.trials.emplace(std::move(key), t);
    }
    for (BestRecord& b : bests.rows) {
      std::optional<std::string> why = checks_.best ? checks_.best(b) : std::nullopt;
      if (const auto t = trial_rows.find(b.trial_id); !why && t != trial_rows.end())
        why = best_trial_mismatch(b, *t->second);
      if (why) {
        skipped.push_back({label_, {"best", 0, "best row " + ktune::quoted(b.op + " " + b.problem_key, 200) +
                                                   ": " + *why}});
        continue;
      }
      BestCandidate c;
      c.tie_time = b.updated_at;
      if (const auto t = trial_by_id.find(b.trial_id); b.trial_id != 0 && t != trial_by_id.end()) {
        c.trial = t->second;
        if (t->second.sweep) c.tie_time = std::get<0>(*t->second.sweep);
      }
      c.row = std::move(b);
      const BestKey key = best_key(c.row);
      if (bests_seen != nullptr) bests_seen->emplace(key, c);
      auto [it, fresh] = m.bests.emplace(key, c);
      if (!fresh && beats(c, it->second)) it->second = std::move(c);
    }
  }

 private:
  std::string label_;
  const RowChecks& checks_;
  sqlite3* db_ = nullptr;
};

// Removes the temporary output and its side files unless released.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (path_.empty()) return;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path_ + suffix).c_str());
  }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// Writes the merged rows into the empty database at `path`, in the canonical order.
void write_merged(const fs::path& path, const Merged& m) {
  sqlite3* raw = db::open_writable(path);
  struct Closer {
    sqlite3* db;
    ~Closer() { db::close_writable(db); }
  } closer{raw};
  const std::string label = path.string();
  db::Transaction t(raw, label);

  db::Statement device(raw, R"sql(
    INSERT INTO devices (key, name, cc_major, cc_minor, sm_count, memory_bytes, l2_bytes,
                         smem_optin, smem_per_sm, regs_per_block, regs_per_sm,
                         max_threads_per_block, max_threads_per_sm, driver_version,
                         nvrtc_version, copy_bandwidth, updated_at, memory_bandwidth)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18))sql",
                       label);
  for (const auto& [key, d] : m.devices) {
    const DeviceInfo& i = d.info;
    device.reset();
    device.bind_all(key, i.name, i.cc_major, i.cc_minor, i.sm_count, i.memory_bytes, i.l2_bytes,
                    i.smem_optin_per_block, i.smem_per_sm, i.regs_per_block, i.regs_per_sm,
                    i.max_threads_per_block, i.max_threads_per_sm, i.driver_version,
                    i.nvrtc_version, d.copy_bandwidth, d.updated_at,
                    i.memory_bandwidth != 0 ? i.memory_bandwidth : m.memory_bandwidths.at(key));
    device.run();
  }

  std::map<SweepKey, std::int64_t> sweep_ids;
  db::Statement sweep(raw, R"sql(
    INSERT INTO sweeps (started_at, device_key, op, dtype, problem_key, strategy, command_line)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql",
                      label);
  for (const SweepKey& s : m.sweeps) {
    sweep.reset();
    std::apply([&](const auto&... v) { sweep.bind_all(v...); }, s);
    sweep.run();
    sweep_ids.emplace(s, sqlite3_last_insert_rowid(raw));
  }

  std::map<TrialKey, std::int64_t> trial_ids;
  db::Statement trial(raw, R"sql(
    INSERT INTO trials (sweep_id, device_key, op, dtype, problem_key, params_key, template_hash,
                        nvrtc_version, status, detail, median_us, min_us, max_us, spread_pct,
                        repetitions, registers, shared_bytes, local_bytes, spill_bytes,
                        compile_seconds, created_at, device_ordinal, pci_bus_id)
    VALUES (NULLIF(?1, 0), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19, ?20, ?21, NULLIF(?22, -1), NULLIF(?23, '')))sql",
                      label);
  for (const auto& [key, r] : m.trials) {
    const std::int64_t sweep_id = key.sweep ? sweep_ids.at(*key.sweep) : 0;
    trial.reset();
    trial.bind_all(sweep_id, r.device_key, r.op, dtype_name(r.dtype), r.problem_key, r.params_key,
                   r.template_hash, r.nvrtc_version, status_name(r.status), r.detail, r.median_us,
                   r.min_us, r.max_us, r.spread_pct, r.repetitions, r.registers, r.shared_bytes,
                   r.local_bytes, r.spill_bytes, r.compile_seconds, r.created_at,
                   r.device_ordinal, r.pci_bus_id);
    trial.run();
    trial_ids.emplace(key, sqlite3_last_insert_rowid(raw));
  }

  db::Statement best(raw, R"sql(
    INSERT INTO best (device_key, op, dtype, problem_key, template_hash, params_key, median_us,
                      trial_id, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULLIF(?8, 0), ?9))sql",
                     label);
  for (const auto& [key, c] : m.bests) {
    const BestRecord& b = c.row;
    const std::int64_t trial_id = c.trial ? trial_ids.at(*c.trial) : 0;
    best.reset();
    best.bind_all(b.device_key, b.op, dtype_name(b.dtype), b.problem_key, b.template_hash,
                  b.params_key, b.median_us, trial_id, b.updated_at);
    best.run();
  }
  t.commit();
}

std::string named(const char* role, const fs::path& p) {
  return std::string(role) + " " + ktune::quoted(p.string(), 200);
}

// Whether two paths name one file (links included); false when either cannot be examined.
bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

void sync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data went through SQLite's own syncs already
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::optional<std::string> best_trial_mismatch(const BestRecord& best, const TrialRecord& trial) {
  const auto differs = [&](const char* what, const std::string& row, const std::string& of_trial)
      -> std::optional<std::string> {
    if (row == of_trial) return std::nullopt;
    return std::string("its trial ") + std::to_string(trial.id) + " is of another " + what + " (" +
           ktune::quoted(of_trial, 120) + ", the row says " + ktune::quoted(row, 120) + ")";
  };
  if (auto w = differs("device", best.device_key, trial.device_key)) return w;
  if (auto w = differs("op", best.op, trial.op)) return w;
  if (auto w = differs("dtype", dtype_name(best.dtype), dtype_name(trial.dtype))) return w;
  if (auto w = differs("problem", best.problem_key, trial.problem_key)) return w;
  if (auto w = differs("configuration", best.params_key, trial.params_key)) return w;
  if (auto w = differs("kernel code", best.template_hash, trial.template_hash)) return w;
  return std::nullopt;
}

MergeReport merge_databases(const fs::path& out, const std::vector<fs::path>& inputs,
                            const RowChecks& checks) {
  if (out.empty()) throw InvalidArgument("db merge: the output path is empty");
  if (inputs.empty())
    throw InvalidArgument("db merge: no input databases (expected OUT IN..., at least one IN)");
  const std::string out_name = named("output", out);

  struct stat st {};
  bool out_exists = false;
  if (::lstat(out.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw InvalidArgument(out_name + " is a symbolic link; name the database file itself (the "
                                       "merge replaces the file at that path)");
    if (!S_ISREG(st.st_mode))
      throw InvalidArgument(out_name + " is " + db::file_kind(st.st_mode) +
                            ", not a regular file (expected a ktune database or a new name)");
    // A file its owner made read-only is not replaced by a merge (which renames a new file over
    // it, as root could), whoever runs it.
    if ((st.st_mode & S_IWUSR) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw InvalidArgument(out_name + " is read-only (mode " + mode +
                            "); make it writable to merge into it, or name a new output");
    }
    out_exists = true;
  } else if (errno != ENOENT) {
    throw InvalidArgument("cannot examine " + out_name + ": " + std::strerror(errno));
  }
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InvalidArgument(out_name + ": the directory " + ktune::quoted(dir.string(), 200) +
                          " does not exist (ktune does not create it)");
  for (const fs::path& in : inputs) {
    if (in.empty()) throw InvalidArgument("db merge: an input path is empty");
    if (!fs::exists(in, ec))
      throw InvalidArgument(named("input", in) +
                            " does not exist (expected an existing ktune database)");
    if (same_file(in, out) || in.lexically_normal() == out.lexically_normal())
      throw InvalidArgument(named("input", in) + " is the output " + ktune::quoted(out.string(), 200) +
                            "; an existing output already takes part in the merge, so name it "
                            "only as OUT");
  }
  if (out_exists && fs::exists(db::sibling(out, "-wal"), ec))
    throw DatabaseError(db::where(out.string()) +
                        "has a write-ahead log beside it: a sweep has it open or stopped without "
                        "closing; merge into it once no sweep writes it (`ktune db recover --db " +
                        out.string() + "` applies the log a stopped sweep left)");

  // Every file is opened and checked before anything is written.
  MergeReport report;
  report.output_existed = out_exists;
  Merged merged;
  std::set<TrialKey> out_trials;
  std::map<BestKey, BestCandidate> out_bests;
  if (out_exists) Source(out, checks).read_into(merged, report.skipped, &out_trials, &out_bests);
  for (const fs::path& in : inputs)
    Source(in, checks).read_into(merged, report.skipped, nullptr, nullptr);

  mode_t mode = 0;
  if (out_exists) {
    mode = st.st_mode & 0777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  std::string temp_name = (dir / ("." + out.filename().string() + ".merge-XXXXXX")).string();
  const int fd = ::mkostemp(temp_name.data(), O_CLOEXEC);
  if (fd < 0)
    throw DatabaseError("cannot write " + out_name + ": cannot create a temporary file in " +
                        ktune::quoted(dir.string(), 200) + ": " + std::strerror(errno));
  TempFile temp(temp_name);
  const bool chmod_failed = ::fchmod(fd, mode) != 0;
  const int chmod_errno = errno;
  ::close(fd);
  if (chmod_failed)
    throw DatabaseError("cannot write " + out_name + ": cannot set the mode of " +
                        ktune::quoted(temp_name, 200) + ": " + std::strerror(chmod_errno));

  write_merged(temp_name, merged);
  sync_path(temp_name, O_RDONLY);
  if (::rename(temp_name.c_str(), out.c_str()) != 0)
    throw DatabaseError("cannot write " + out_name + ": cannot rename " +
                        ktune::quoted(temp_name, 200) + " over it: " + std::strerror(errno));
  temp.release();
  sync_path(dir, O_RDONLY | O_DIRECTORY);

  report.devices = merged.devices.size();
  report.sweeps = merged.sweeps.size();
  report.trials = merged.trials.size();
  report.bests = merged.bests.size();
  for (const auto& [key, r] : merged.trials) report.trials_added += out_trials.count(key) == 0;
  for (const auto& [key, c] : merged.bests) {
    const auto before = out_bests.find(key);
    report.bests_changed += before == out_bests.end() || !same_written(before->second, c);
  }
  return report;
}

std::optional<double> BestChange::speedup() const {
  if (!before || !after || !(after->median_us > 0)) return std::nullopt;
  return before->median_us / after->median_us;
}

BestDiff diff_bests(const std::vector<BestRecord>& before, const std::vector<BestRecord>& after) {
  std::map<BestKey, BestChange> keys;
  for (const BestRecord& b : before) keys[best_key(b)].before = b;
  for (const BestRecord& a : after) keys[best_key(a)].after = a;
  BestDiff diff;
  for (auto& [key, change] : keys) {
    if (!change.before) {
      diff.added.push_back(std::move(change));
    } else if (!change.after) {
      diff.removed.push_back(std::move(change));
    } else if (change.before->params_key != change.after->params_key ||
               change.before->median_us != change.after->median_us) {
      diff.changed.push_back(std::move(change));
    } else {
      ++diff.unchanged;
    }
  }
  return diff;
}

}  // namespace ktune
