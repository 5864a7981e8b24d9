#include "runtime/dispatch/lookup.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "ktune/error.hpp"

namespace fs = std::filesystem;

namespace ktune {

double problem_distance(const Op& op, const Problem& a, const Problem& b) {
  const std::vector<DimSpec>& dims = op.dims();
  double sum = 0.0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].matched_exactly()) {
      if (a.values[i] != b.values[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (a.values[i] == b.values[i]) continue;  // (also a 0, which has no logarithm)
    if (dims[i].regime(a.values[i]) != dims[i].regime(b.values[i]))
      return std::numeric_limits<double>::infinity();
    double d = std::log(static_cast<double>(a.values[i])) - std::log(static_cast<double>(b.values[i]));
    sum += d * d;
  }
  return std::sqrt(sum);
}

std::optional<double> fallback_distance(const Op& op, const Problem& wanted, const Problem& tuned,
                                        const DeviceInfo& device) {
  const double d = problem_distance(op, wanted, tuned);
  if (!(d <= op.fallback_radius()) || !op.fallback_compatible(wanted, tuned, device))
    return std::nullopt;
  return d;
}

const char* database_state_name(DatabaseStatus::State s) {
  switch (s) {
    case DatabaseStatus::State::loaded: return "loaded";
    case DatabaseStatus::State::missing: return "missing";
    case DatabaseStatus::State::refused: return "refused";
  }
  return "?";
}

namespace {

// Text from a database, an exception or the file system as one printable line of at most `max`
// bytes: a hostile value must neither flood a log nor drive the terminal.
std::string one_line(std::string_view s, std::size_t max = 240) {
  if (s.size() <= max) return printable(s);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return printable(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

// The message of `err` without a leading `prefix` (which repeats what the caller already says:
// the database path, or the whole value that failed to parse).
std::string message_after(const std::exception& err, const std::string& prefix) {
  std::string_view m = err.what();
  if (m.size() >= prefix.size() && m.compare(0, prefix.size(), prefix) == 0)
    m.remove_prefix(prefix.size());
  return one_line(m, 480);  // whole: a database's reason says how to fix it
}

std::string database_message(const std::exception& err, const fs::path& path) {
  return message_after(err, "tuning database " + path.string() + ": ");
}

// Nothing at all at `path` (not even a dangling symlink): a database not created yet. Whatever
// is there is for Store::open to accept or refuse; it checks the file type before SQLite opens
// anything (a FIFO would block the open forever).
bool nothing_at(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() == fs::file_type::not_found;
}

std::string op_names() {
  std::string out;
  for (const Op* op : all_ops()) {
    if (!out.empty()) out += ", ";
    out += op->name();
  }
  return out;
}

// The identity of a best row (its primary key), hashed: a hostile key may be megabytes long.
std::string best_id(const BestRecord& r) {
  std::size_t h = 0;
  const auto mix = [&](std::string_view s) {
    h ^= std::hash<std::string_view>{}(s) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (const std::string* s : {&r.device_key, &r.op, &r.problem_key, &r.template_hash}) mix(*s);
  mix(dtype_name(r.dtype));
  return "b:" + std::to_string(h);
}

std::string describe(const BestRecord& r) {
  return "best row " + ktune::quoted(r.op, 40) + " " + dtype_name(r.dtype) + " " + ktune::quoted(r.problem_key) +
         " on " + ktune::quoted(r.device_key, 80);
}

}  // namespace

std::string database_line(const DatabaseStatus& s) {
  std::string line = "database " + printable(s.path) + ": " + database_state_name(s.state);
  if (s.state == DatabaseStatus::State::missing && !s.reason.empty()) line += " (" + s.reason + ")";
  if (s.state == DatabaseStatus::State::refused) line += ": " + s.reason;
  return line;
}

std::optional<std::string> keys_reason(const std::string& op_name, DType dtype,
                                       const std::string& problem_key,
                                       const std::string& params_key) {
  const Op* op = find_op(op_name);
  if (op == nullptr) return "unknown op " + ktune::quoted(op_name) + " (ops: " + op_names() + ")";
  const std::string name(op->name());
  bool dtype_ok = false;
  std::string dtypes;
  for (DType t : op->dtypes()) {
    dtype_ok = dtype_ok || t == dtype;
    dtypes += dtypes.empty() ? "" : ", ";
    dtypes += dtype_name(t);
  }
  if (!dtype_ok)
    return std::string("dtype ") + dtype_name(dtype) + " is not one of " + name + "'s (" +
           dtypes + ")";
  try {
    op->parse_problem(problem_key);
  } catch (const InvalidArgument& e) {
    return "problem_key " + ktune::quoted(problem_key) + " is not a problem of " + name + ": " +
           message_after(e, "invalid shape \"" + problem_key + "\" for " + name + ": ");
  }
  try {
    op->parse_params(params_key);
  } catch (const InvalidArgument& e) {
    return "params_key " + ktune::quoted(params_key) + " is outside the space of " + name + ": " +
           message_after(e, "invalid parameters \"" + params_key + "\" for " + name + ": ");
  }
  return std::nullopt;
}

std::optional<std::string> best_row_reason(const BestRecord& row) {
  if (find_op(row.op) != nullptr && (!std::isfinite(row.median_us) || row.median_us < 0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", row.median_us);
    return std::string("median_us is ") + buf + ", expected a finite value >= 0";
  }
  return keys_reason(row.op, row.dtype, row.problem_key, row.params_key);
}

TuningDatabases::TuningDatabases(fs::path user, std::vector<fs::path> shipped, Sink sink)
    : sink_(std::move(sink)) {
  std::vector<fs::path> paths;
  const bool has_user = !user.empty();
  if (has_user) paths.push_back(std::move(user));
  for (auto& p : shipped) paths.push_back(std::move(p));
  for (std::size_t i = 0; i < paths.size(); ++i) {
    Entry e;
    e.path = paths[i];
    e.status.path = e.path.string();
    if (nothing_at(e.path)) {
      e.status.state = DatabaseStatus::State::missing;
      e.status.reason = has_user && i == 0 ? "not created yet; a sweep creates it" : "no such file";
    } else {
      try {
        e.store = std::make_unique<Store>(Store::open(e.path, Store::Mode::read_only));
        e.status.state = DatabaseStatus::State::loaded;
      } catch (const std::exception& err) {
        e.status.state = DatabaseStatus::State::refused;
        e.status.reason = database_message(err, e.path);
      }
    }
    if (sink_) sink_(database_line(e.status));
    dbs_.push_back(std::move(e));
  }
}

void TuningDatabases::skip_row(Entry& e, const std::string& id, const std::string& text) const {
  if (!e.seen.insert(id).second) return;
  const std::size_t n = ++e.status.skipped_count;
  if (n <= kMaxListedRows) {
    e.status.skipped_rows.push_back(text);
    if (sink_) sink_("database " + printable(e.status.path) + ": skipped " + text);
  } else if (n == kMaxListedRows + 1 && sink_) {
    sink_("database " + printable(e.status.path) + ": more than " +
          std::to_string(kMaxListedRows) + " rows skipped; the others are counted, not listed");
  }
}

void TuningDatabases::skip_rows(Entry& e, const std::vector<RowIssue>& issues) const {
  // The store's reason names the table and rowid itself ("best row 12: ...").
  for (const RowIssue& i : issues)
    skip_row(e, "r:" + i.table + ":" + std::to_string(i.rowid), one_line(i.reason));
}

void TuningDatabases::skip_best(Entry& e, const BestRecord& row, const std::string& why) const {
  skip_row(e, best_id(row), describe(row) + ": " + why);
}

void TuningDatabases::query_failed(Entry& e, const std::string& what,
                                   const std::exception& err) const {
  const std::string text = what + " failed: " + database_message(err, e.path);
  if (!e.seen.insert("e:" + text).second) return;
  e.status.errors.push_back(text);
  if (sink_) sink_("database " + printable(e.status.path) + ": " + text);
}

LookupResult TuningDatabases::find(const Op& op, DType dtype, const Problem& problem,
                                   const DeviceInfo& device) {
  const std::string hash = op.template_hash();
  const std::string key = op.problem_key(problem);
  const std::string device_key = device.key();
  const std::string arch = device.arch();
  const std::string op_name(op.name());
  const std::string what = op_name + " " + dtype_name(dtype);

  // 1. Exact: the user's database first, then the shipped ones.
  for (Entry& e : dbs_) {
    if (!e.store) continue;
    std::vector<RowIssue> issues;
    std::optional<BestRecord> b;
    try {
      b = e.store->best(device_key, op_name, dtype, key, hash, &issues);
    } catch (const std::exception& err) {
      query_failed(e, "the exact lookup of " + what, err);
      continue;
    }
    skip_rows(e, issues);
    if (!b) continue;
    if (std::optional<std::string> why = best_row_reason(*b)) {
      skip_best(e, *b, *why);
      continue;
    }
    Params p = op.parse_params(b->params_key);
    if (std::optional<std::string> why = op.invalid_reason(p, problem, dtype, device)) {
      // Measured on this device for this very problem, so it should fit: the row is bad.
      skip_best(e, *b,
                "params_key " + ktune::quoted(b->params_key) + " is invalid for the problem it was "
                "tuned on, on this device: " + one_line(*why));
      continue;
    }
    return {Match::exact, std::move(p), b->problem_key, b->device_key, e.path.string(),
            b->median_us, {}, {}};
  }

  // 2./3. Nearest problem on this device, then on another device of the same architecture.
  struct Candidate {
    double distance;
    std::size_t db;
    Params params;
    BestRecord row;
  };
  std::optional<Candidate> same, other;
  for (std::size_t i = 0; i < dbs_.size(); ++i) {
    Entry& e = dbs_[i];
    if (!e.store) continue;
    Rows<BestRecord> rows;
    try {
      rows = e.store->bests(op_name, dtype);
    } catch (const std::exception& err) {
      query_failed(e, "reading the best rows of " + what, err);
      continue;
    }
    skip_rows(e, rows.skipped);
    for (BestRecord& r : rows.rows) {
      if (r.template_hash != hash) continue;  // stale: tuned for other kernel code
      if (std::optional<std::string> why = best_row_reason(r)) {
        skip_best(e, r, *why);
        continue;
      }
      const bool this_device = r.device_key == device_key;
      if (!this_device && r.arch != arch) continue;
      const Problem tuned = op.parse_problem(r.problem_key);
      // Too far (or across an exact dim or a regime): the default serves better than a
      // configuration measured on a problem that behaves differently.
      const std::optional<double> d = fallback_distance(op, problem, tuned, device);
      if (!d) continue;
      Params p = op.parse_params(r.params_key);
      if (op.invalid_reason(p, problem, dtype, device)) {
        // Tuned for another problem (or device), it need not fit this one; that is no fault of
        // the row. But on this device it must fit the problem it was measured on.
        if (this_device)
          if (std::optional<std::string> why = op.invalid_reason(p, tuned, dtype, device))
            skip_best(e, r,
                      "params_key " + ktune::quoted(r.params_key) + " is invalid for the problem it "
                      "was tuned on, on this device: " + one_line(*why));
        continue;
      }
      std::optional<Candidate>& slot = this_device ? same : other;
      // Strictly nearer wins; on a tie the earlier database (the user's) keeps its place.
      if (!slot || *d < slot->distance) slot = Candidate{*d, i, std::move(p), std::move(r)};
    }
  }
  std::string note;
  for (auto* c : {&same, &other}) {
    if (!*c) continue;
    Candidate& x = **c;
    // The nearest neighbour serves only where it beat the default on its own problem by
    // kNeighbourMinGain; else the default serves (a farther neighbour is not asked).
    bool unjudged = false;
    const std::optional<double> gain_over_default =
        neighbour_gain(dbs_[x.db], op, dtype, x.row, device, &unjudged);
    if (gain_over_default && *gain_over_default < kNeighbourMinGain) {
      char gain[96];
      std::snprintf(gain, sizeof gain,
                    "%.2fx the default's speed there (a neighbour serves from %.2fx)",
                    *gain_over_default, kNeighbourMinGain);
      note = "the nearest tuned problem, " + x.row.problem_key + ", ran its best at " + gain;
      break;
    }
    // Another device's row serves only judged: its database must hold a trial of this device's
    // default on the row's problem. On the H100 (2026-12-05) two decode problems were served
    // unjudged H200 rows at 0.813 and 0.817 of their fastest point, where the H100's own
    // default ran 0.990 and 0.991 (the defaults differ by memory bandwidth per SM), and two MoE
    // layers 1.008-1.013x slower than the default
    // (benchmarks/results/pending-checks-h100-2026-12-05-stop61.md).
    if (unjudged && c == &other) {
      note = "the nearest tuned problem, " + x.row.problem_key + ", was tuned on another "
             "device (" + x.row.device_key + ") whose database holds no trial of this device's "
             "default there";
      break;
    }
    std::string served_note;
    if (unjudged)
      served_note = "unjudged: its database holds no trial of the default on " +
                    x.row.problem_key + " (`ktune db defaults` lists such rows to re-time)";
    return {c == &same ? Match::nearest_shape : Match::other_device, std::move(x.params),
            x.row.problem_key, x.row.device_key, dbs_[x.db].path.string(), x.row.median_us,
            std::move(served_note), {}};
  }

  // 4. The built-in default.
  LookupResult r;
  r.kind = Match::default_config;
  r.params = op.default_params(problem, dtype, device);
  r.note = std::move(note);
  if (std::string how = op.default_note(problem, dtype, device); !how.empty())
    r.note = (r.note.empty() ? "" : r.note + "; ") + how;
  // A default the problem cannot take (e4m3 with a paged cache, say) is still the answer, so
  // that the caller's run fails with the op's own reason; the note says so before any run.
  if (std::optional<std::string> why = op.invalid_reason(r.params, problem, dtype, device)) {
    r.note = (r.note.empty() ? "" : r.note + "; ") + "the built-in default cannot run it: " + *why;
    r.cannot_run = *why;
  }
  return r;
}

MatchInfo match_info(const Op& op, const Problem& problem, const LookupResult& found) {
  MatchInfo m;
  m.kind = found.kind;
  m.op = std::string(op.name());
  m.problem = op.problem_key(problem);
  m.params = op.params_key(found.params);
  m.tuned_problem = found.tuned_problem;
  m.tuned_device = found.tuned_device;
  m.database = found.database;
  m.tuned_us = found.tuned_us;
  m.note = found.note;
  m.cannot_run = found.cannot_run;
  return m;
}

std::optional<double> TuningDatabases::neighbour_gain(Entry& e, const Op& op, DType dtype,
                                                      const BestRecord& row,
                                                      const DeviceInfo& device,
                                                      bool* missing) const {
  *missing = false;
  const std::string wanted =
      op.params_key(op.default_params(op.parse_problem(row.problem_key), dtype, device));
  // The row is its problem's default: nothing beat the default there, so it gains nothing over
  // the asked problem's own default either (it served neighbours unasked until 2026-12-04,
  // when a re-timed row that had become its default served a 40-pair decode problem at 0.842 of
  // the fastest point, where that problem's own default ran 0.912).
  if (wanted == row.params_key) return 1.0;
  Rows<TrialRecord> trials;
  try {
    trials = e.store->trials(row.device_key, row.op, dtype, row.problem_key, row.template_hash);
  } catch (const std::exception& err) {
    query_failed(e, "reading the trials of " + row.problem_key, err);
    return std::nullopt;
  }
  skip_rows(e, trials.skipped);
  // Both from the sweep's trials (newest ok of each), so both were timed the same way: the
  // best row's own median may come from a later re-timing of the leaders alone.
  std::optional<double> base, tuned;
  for (const TrialRecord& t : trials.rows) {  // newest last
    if (t.status != TrialStatus::ok || !std::isfinite(t.median_us) || t.median_us <= 0) continue;
    if (t.params_key == wanted) base = t.median_us;
    if (t.params_key == row.params_key) tuned = t.median_us;
  }
  if (!base) {
    *missing = true;
    return std::nullopt;
  }
  return *base / (tuned ? *tuned : row.median_us);
}
void TuningDatabases::scan() {
  if (scanned_) return;
  scanned_ = true;
  // Stale rows (another template hash) are left alone, as lookups leave them: they were tuned
  // for another version of the space. Hashing the embedded sources is done once per op.
  std::vector<std::pair<const Op*, std::string>> hashes;
  for (const Op* op : all_ops()) hashes.emplace_back(op, op->template_hash());
  const auto current = [&](const BestRecord& r) {
    for (const auto& [op, hash] : hashes)
      if (op->name() == r.op) return r.template_hash == hash;
    return true;  // an unknown op: best_row_reason says so
  };
  for (Entry& e : dbs_) {
    if (!e.store) continue;
    try {
      skip_rows(e, e.store->devices().skipped);
    } catch (const std::exception& err) {
      query_failed(e, "reading the devices", err);
    }
    try {
      Rows<BestRecord> rows = e.store->all_bests();
      skip_rows(e, rows.skipped);
      for (const BestRecord& r : rows.rows)
        if (current(r))
          if (std::optional<std::string> why = best_row_reason(r)) skip_best(e, r, *why);
    } catch (const std::exception& err) {
      query_failed(e, "reading the best rows", err);
    }
  }
}

std::vector<DatabaseStatus> TuningDatabases::status() const {
  std::vector<DatabaseStatus> out;
  out.reserve(dbs_.size());
  for (const Entry& e : dbs_) out.push_back(e.status);
  return out;
}

std::optional<DeviceInfo> TuningDatabases::find_device(const std::string& name_or_key) const {
  // The name as typed by hand, case and surrounding blanks aside ("nvidia h200 "): the answer
  // when no database records the key or the name exactly.
  const auto folded = [](std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string wanted = folded(name_or_key);
  std::optional<DeviceInfo> loose;
  for (Entry& e : dbs_) {
    if (!e.store) continue;
    Rows<DeviceInfo> rows;
    try {
      rows = e.store->devices();
    } catch (const std::exception& err) {
      query_failed(e, "reading the devices", err);
      continue;
    }
    skip_rows(e, rows.skipped);
    for (const DeviceInfo& d : rows.rows)
      if (d.key() == name_or_key) return d;
    for (const DeviceInfo& d : rows.rows)
      if (d.name == name_or_key) return d;
    for (const DeviceInfo& d : rows.rows)
      if (!loose && !wanted.empty() && folded(d.name) == wanted) loose = d;
  }
  return loose;
}

std::vector<std::string> TuningDatabases::device_names() const {
  std::vector<std::string> names;
  for (const Entry& e : dbs_) {
    if (!e.store) continue;
    try {
      for (const DeviceInfo& d : e.store->devices().rows)
        if (std::find(names.begin(), names.end(), d.name) == names.end()) names.push_back(d.name);
    } catch (const std::exception&) {
      // reported by find_device
    }
  }
  return names;
}

}  // namespace ktune
