#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/row_checks.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "runtime/dispatch/lookup.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {
namespace {

Store open_existing(const DbLocation& db) {
  if (!db_exists(db))
    throw InvalidArgument("database " + db.describe() +
                          " does not exist (run ktune sweep first, or pass --db; ktune db "
                          "list --shipped lists the databases shipped with ktune)");
  return Store::open(db.path, Store::Mode::read_only);
}

// Rows a reader skipped: one line on stderr, so a listing never looks complete when it is not.
void warn_skipped(const char* command, const Store& store, const std::vector<RowIssue>& skipped) {
  if (skipped.empty()) return;
  const RowIssue& first = skipped.front();
  std::fprintf(stderr,
               "ktune %s: warning: %zu rows of %s skipped (first: %s; ktune db check lists "
               "them)\n",
               command, skipped.size(), ktune::quoted(store.path().string(), 200).c_str(),
               shown(first.reason, 300).c_str());
}

std::string best_row_name(const BestRecord& b);

/// The rows of one database: a table (with a header when `header` is set) or JSON objects.
void list_rows(Store& store, const std::string& op, bool json, Json& j, bool header) {
  Rows<BestRecord> found = store.all_bests(op);
  // Rows that no lookup can use are not listed as if they could be: they join the skipped ones.
  std::vector<BestRecord> rows;
  for (BestRecord& b : found.rows) {
    if (std::optional<std::string> why = best_reason(b))
      found.skipped.push_back({"best", 0, "best row " + best_row_name(b) + ": " + *why});
    else
      rows.push_back(std::move(b));
  }
  warn_skipped("db list", store, found.skipped);
  const std::string path = store.path().string();
  if (json) {
    for (const BestRecord& b : rows) {
      j.begin_object().field("database", path).field("device", b.device_name);
      j.field("device_key", b.device_key).field("arch", b.arch);
      j.field("op", b.op).field("dtype", dtype_name(b.dtype)).field("problem", b.problem_key);
      j.field("params", b.params_key).field("median_us", b.median_us);
      j.field("template_hash", b.template_hash).field("updated_at", b.updated_at).end_object();
    }
    return;
  }
  if (header) std::printf("%s:\n", shown(path).c_str());
  std::vector<std::vector<std::string>> t = {{"device", "op", "dtype", "problem", "best", "us", "updated"}};
  for (const BestRecord& b : rows)
    t.push_back({b.device_name, b.op, dtype_name(b.dtype), b.problem_key, b.params_key,
                 fmt("%.2f", b.median_us), b.updated_at});
  std::printf("%s", table(t).c_str());
  std::printf("%zu best configurations in %s\n", rows.size(), shown(path).c_str());
}

int db_list(const Args& args) {
  po::options_description desc("db list options");
  desc.add_options()("op", po::value<std::string>()->default_value(""), "only this op")
      ("db", po::value<std::string>(), "database")
      ("shipped", "list the read-only databases shipped with ktune (and those in "
                  "$KTUNE_DB_PATH), in the order lookups read them, instead of --db")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("db list", "[--op OP] [--db PATH | --shipped] [--json]", desc, args, vm))
    return 0;
  const std::string op = vm["op"].as<std::string>();
  if (!op.empty()) op_option(op);  // an unknown op is an error, not an empty listing
  const bool json = vm.count("json") > 0;
  Json j;
  j.begin_array();
  if (vm.count("shipped")) {
    if (vm.count("db")) throw UsageError{"--shipped and --db are exclusive: pass one"};
    const std::vector<std::filesystem::path> paths = shipped_db_paths();
    if (paths.empty() && !json)
      std::printf("no databases are shipped with this ktune (nor listed in $KTUNE_DB_PATH)\n");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (i > 0 && !json) std::printf("\n");
      // A file lookups would skip (not a ktune database, unreadable) is skipped here too, with
      // the reason, and the others are listed.
      std::optional<Store> store;
      try {
        store.emplace(Store::open(paths[i], Store::Mode::read_only));
      } catch (const DatabaseError& e) {
        std::fprintf(stderr, "ktune db list: warning: database %s is not used: %s\n",
                     ktune::quoted(paths[i].string(), 200).c_str(), shown(e.what(), 300).c_str());
        continue;
      }
      list_rows(*store, op, json, j, true);
    }
  } else {
    Store store = open_existing(db_option(vm));
    list_rows(store, op, json, j, false);
  }
  j.end_array();
  if (json) std::printf("%s\n", j.str().c_str());
  return 0;
}

int db_show(const Args& args) {
  po::options_description desc("db show options");
  desc.add_options()("op", po::value<std::string>()->default_value(""), "only this op")
      ("status", po::value<std::string>()->default_value(""), "only trials with this status")
      ("db", po::value<std::string>(), "database");
  po::variables_map vm;
  if (!parse_options("db show", "[--op OP] [--status S] [--db PATH]", desc, args, vm)) return 0;
  std::string status = vm["status"].as<std::string>();
  if (!status.empty() && !parse_status(status))
    throw InvalidArgument("unknown status " + ktune::quoted(status) +
                          " (allowed: ok, invalid, compile_error, compile_timeout, launch_error, timeout, wrong_result)");
  if (const std::string op = vm["op"].as<std::string>(); !op.empty()) op_option(op);
  Store store = open_existing(db_option(vm));
  Rows<DeviceInfo> devices = store.devices();
  Rows<SweepRecord> sweeps = store.sweeps();
  Rows<TrialRecord> trials = store.all_trials(vm["op"].as<std::string>());
  std::vector<RowIssue> skipped = devices.skipped;
  skipped.insert(skipped.end(), sweeps.skipped.begin(), sweeps.skipped.end());
  skipped.insert(skipped.end(), trials.skipped.begin(), trials.skipped.end());
  warn_skipped("db show", store, skipped);
  std::printf("devices:\n");
  for (const DeviceInfo& d : devices.rows)
    std::printf("  %s (%s), copy bandwidth %.2f TB/s, peak %s\n", shown(d.name).c_str(),
                d.arch().c_str(), store.copy_bandwidth(d.key()) / 1e12,
                d.memory_bandwidth > 0
                    ? (std::to_string(d.memory_bandwidth / 1'000'000'000) + " GB/s").c_str()
                    : "unknown");
  std::printf("sweeps:\n");
  for (const SweepRecord& s : sweeps.rows)
    std::printf("  #%lld %s %s %s %s %s: %s\n", static_cast<long long>(s.id), shown(s.started_at).c_str(),
                shown(s.op).c_str(), dtype_name(s.dtype), shown(s.problem_key).c_str(),
                shown(s.strategy).c_str(), shown(s.command_line, 1000).c_str());
  std::vector<std::vector<std::string>> t = {{"op", "dtype", "problem", "params", "status", "us", "regs", "detail"}};
  for (const TrialRecord& r : trials.rows) {
    if (!status.empty() && status_name(r.status) != status) continue;
    std::string detail = r.detail.substr(0, r.detail.find('\n'));
    if (detail.size() > 70) detail = detail.substr(0, 67) + "...";
    t.push_back({r.op, dtype_name(r.dtype), r.problem_key, r.params_key, status_name(r.status),
                 r.status == TrialStatus::ok ? fmt("%.2f", r.median_us) : "", std::to_string(r.registers),
                 detail});
  }
  std::printf("trials:\n%s", table(t).c_str());
  return 0;
}

int db_export(const Args& args) {
  po::options_description desc("db export options");
  desc.add_options()("format", po::value<std::string>()->default_value("json"), "json or csv")
      ("op", po::value<std::string>()->default_value(""), "only this op")
      ("output,o", po::value<std::string>()->default_value("-"),
       "file (- for standard output); replaced atomically, never the database itself")
      ("db", po::value<std::string>(), "database");
  po::variables_map vm;
  if (!parse_options("db export", "[--format json|csv] [--op OP] [-o FILE] [--db PATH]", desc, args, vm))
    return 0;
  std::string format = vm["format"].as<std::string>();
  if (format != "json" && format != "csv")
    throw InvalidArgument("unknown export format " + ktune::quoted(format) + " (allowed: json, csv)");
  if (const std::string op = vm["op"].as<std::string>(); !op.empty()) op_option(op);
  const DbLocation db = db_option(vm);
  Store store = open_existing(db);
  Rows<TrialRecord> trials = store.all_trials(vm["op"].as<std::string>());
  warn_skipped("db export", store, trials.skipped);
  std::string text = format == "json" ? export_json(trials.rows) : export_csv(trials.rows);
  std::string out = vm["output"].as<std::string>();
  if (out == "-") {
    // Checked with every other write to standard output when main returns.
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file_replacing("-o", out, text, {db.path});
  }
  return 0;
}

// A best row that no lookup can use, named by its key (the best table has no row id of its own).
std::string best_row_name(const BestRecord& b) {
  return b.op + " " + dtype_name(b.dtype) + " " + ktune::quoted(b.problem_key) + " on " +
         ktune::quoted(b.device_key);
}

int db_check(const Args& args) {
  po::options_description desc("db check options");
  desc.add_options()("db", po::value<std::string>(), "database")("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("db check", "[--db PATH] [--json]", desc, args, vm)) return 0;
  const DbLocation db = db_option(vm);
  if (!db_exists(db)) throw DatabaseError("database " + db.describe() + " does not exist");
  Store store = Store::open(db.path, Store::Mode::read_only);  // DatabaseError: exit 4

  struct Finding {
    std::string table;
    std::string reason;  // one line naming the row and the bad value
  };
  std::vector<Finding> problems;
  CheckReport report;
  try {
    report = store.check();
  } catch (const std::exception& e) {
    // Opened, but not readable to the end (a corrupt page): that is what check is for.
    report.integrity = std::string("the check stopped: ") + e.what();
  }
  for (const RowIssue& i : report.issues) problems.push_back({i.table, i.reason});
  // The op-level checks of the lookup (op known, keys parse, parameters in the op's space), on
  // rows of the current kernel code; rows of older kernel code are stale, not wrong: their
  // tunables may have changed since, and no lookup or resumed sweep uses them.
  std::size_t stale = 0;
  try {
    const Rows<TrialRecord> trials = store.all_trials();
    std::map<std::int64_t, const TrialRecord*> trial_by_id;
    for (const TrialRecord& t : trials.rows) trial_by_id.emplace(t.id, &t);
    for (const BestRecord& b : store.all_bests().rows) {
      stale += current_code(b.op, b.template_hash) ? 0 : 1;
      const auto t = trial_by_id.find(b.trial_id);
      if (std::optional<std::string> why =
              best_row_problem(b, t != trial_by_id.end() ? t->second : nullptr))
        problems.push_back({"best", "best row " + best_row_name(b) + ": " + *why});
    }
    for (const TrialRecord& t : trials.rows) {
      stale += current_code(t.op, t.template_hash) ? 0 : 1;
      if (std::optional<std::string> why = trial_reason(t))
        problems.push_back({"trials", "trials row " + std::to_string(t.id) + ": " + *why});
    }
  } catch (const std::exception& e) {
    problems.push_back({"", std::string("cannot read the rows: ") + e.what()});
  }
  const bool clean = report.integrity == "ok" && problems.empty();

  if (vm.count("json")) {
    Json j;
    j.begin_object().field("database", store.path().string()).field("integrity", report.integrity);
    j.field("rows_checked", static_cast<long long>(report.rows_checked));
    j.key("issues").begin_array();
    for (const Finding& p : problems)
      j.begin_object().field("table", p.table).field("reason", p.reason).end_object();
    j.end_array().field("stale_rows", static_cast<long long>(stale)).field("ok", clean).end_object();
    std::printf("%s\n", j.str().c_str());
    return clean ? 0 : 1;
  }
  const std::string name = shown(store.path().string());
  if (report.integrity != "ok") {
    std::size_t start = 0;
    while (start <= report.integrity.size()) {
      std::size_t end = report.integrity.find('\n', start);
      if (end == std::string::npos) end = report.integrity.size();
      std::printf("%s: integrity: %s\n", name.c_str(),
                  shown(report.integrity.substr(start, end - start), 500).c_str());
      start = end + 1;
    }
  }
  for (const Finding& p : problems)
    std::printf("%s: %s\n", name.c_str(), shown(p.reason, 500).c_str());
  if (stale > 0)
    std::printf("%s: %zu rows were tuned for older kernel code (not used; not a problem)\n",
                name.c_str(), stale);
  if (clean)
    std::printf("%s: ok (%zu rows checked, integrity ok)\n", name.c_str(), report.rows_checked);
  else
    std::printf("%s: %zu problems (%zu rows checked, integrity %s)\n", name.c_str(),
                problems.size() + (report.integrity == "ok" ? 0 : 1), report.rows_checked,
                report.integrity == "ok" ? "ok" : "failed");
  return clean ? 0 : 1;
}

// A database a sweep left with changes in its write-ahead log (killed, or copied with its -wal
// file): the readers refuse it, since a read-only open cannot apply the log. Opening it
// read-write applies it, and closing converts the file back once no other writer has it open
// (SQLite's locks make this safe beside a running sweep, which then converts it itself).
int db_recover(const Args& args) {
  po::options_description desc("db recover options");
  desc.add_options()("db", po::value<std::string>(), "database");
  po::variables_map vm;
  if (!parse_options("db recover", "[--db PATH]", desc, args, vm)) return 0;
  const DbLocation db = db_option(vm);
  if (!db_exists(db)) throw DatabaseError("database " + db.describe() + " does not exist");
  std::size_t bests = 0;
  {
    Store store = Store::open(db.path, Store::Mode::read_write);  // DatabaseError: exit 4
    bests = store.all_bests().rows.size();
  }
  std::error_code ec;
  fs::path wal = db.path;
  wal += "-wal";
  if (fs::exists(wal, ec)) {
    std::printf("%s: readable (%zu best configurations); another writer has it open (a running "
                "sweep?), which converts it when it closes\n",
                shown(db.path.string()).c_str(), bests);
    return 0;
  }
  std::printf("%s: ok, its write-ahead log is in the main file (%zu best configurations)\n",
              shown(db.path.string()).c_str(), bests);
  return 0;
}

}  // namespace

int cmd_db(const Args& args) {
  static const std::vector<Command> sub = {
      {"list", "the best configuration of every (device, op, dtype, problem)", db_list},
      {"show", "devices, sweeps and every trial", db_show},
      {"export", "every trial as JSON or CSV", db_export},
      {"check", "SQLite's integrity check and ktune's validation of every row", db_check},
      {"merge", "combine databases into one: one best per key, every sweep and trial", cmd_db_merge},
      {"diff", "best configurations added, removed and changed between two databases", cmd_db_diff},
      {"ship", "a database to ship: devices, best rows, their trials and the defaults' trials", cmd_db_ship},
      {"kernels", "the kernels each configuration compiles to (scripts/same_machine_code.py)",
       cmd_db_kernels},
      {"defaults", "best rows with no trial of their current default, as a plan to re-time",
       cmd_db_defaults},
      {"recover", "apply the write-ahead log a stopped sweep left, so readers can open the file",
       db_recover},
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: ktune db <list|show|export|check|merge|diff|ship|kernels|defaults|recover> [options]   (ktune db <command> --help)\n");
    for (const Command& c : sub) std::printf("  %-8s %s\n", c.name, c.summary);
    return args.empty() ? 2 : 0;
  }
  for (const Command& c : sub)
    if (args[0] == c.name) return c.run(Args(args.begin() + 1, args.end()));
  throw UsageError{"unknown db command " + ktune::quoted(args[0]) + " (allowed: list, show, export, check, merge, diff, ship, kernels, defaults, recover)"};
}

}  // namespace ktune::cli
