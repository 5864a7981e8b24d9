// ktune best: what the runtime would dispatch for a problem, or for every problem of a plan, and
// how it matched. For this GPU through the runtime, as an application sees it; for a device
// named in the databases (--device) or a generic target (--arch) from the databases alone.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "ktune/ktune.hpp"
#include "runtime/core/device.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "tuner/plan.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {
namespace {

void warn(const char* command, const std::string& message) {
  std::fprintf(stderr, "ktune %s: warning: %s\n", command, shown(message, 600).c_str());
}

// Says which databases a lookup could not use, and fails when it is the one the user named with
// --db: an answer of "default" would hide that the database was never read. Skipped rows are
// known once the lookup ran (`after`).
void report_databases(const std::vector<DatabaseStatus>& dbs, const DbLocation& user, bool after) {
  for (const DatabaseStatus& d : dbs) {
    const bool named = user.source == "--db" && d.path == user.path.string();
    const std::string name = "database " + ktune::quoted(d.path, 200);
    if (after) {
      if (!d.skipped_rows.empty())
        warn("best", name + ": " + std::to_string(d.skipped_rows.size()) +
                         " rows skipped (first: " + d.skipped_rows.front() +
                         "; ktune db check lists them)");
      continue;
    }
    if (d.state == DatabaseStatus::State::refused) {
      if (named) throw DatabaseError(name + " cannot be used: " + d.reason);
      warn("best", name + " is not used: " + d.reason);
    } else if (d.state == DatabaseStatus::State::missing && named) {
      warn("best", name + " does not exist; answering from the other databases and the defaults");
    } else if (d.state == DatabaseStatus::State::missing && d.path != user.path.string()) {
      // A read-only database that is not there: an entry of $KTUNE_DB_PATH, mistyped?
      warn("best", name + " is not used: " + d.reason);
    }
  }
}

/// Answers lookups for one GPU: this one, through the runtime (as an application dispatches), or
/// one named by --device / --arch, from the databases alone (no GPU needed).
class Answers {
 public:
  Answers(const po::variables_map& vm, const DbLocation& db) : db_(db) {
    std::vector<fs::path> shipped;
    if (!vm.count("no-shipped")) shipped = shipped_db_paths();
    std::optional<DeviceInfo> arch_device;
    if (vm.count("arch")) arch_device = arch_option(vm["arch"].as<std::string>());
    if (vm.count("device") || arch_device) {
      dbs_ = std::make_unique<TuningDatabases>(db.path, shipped);
      report_databases(dbs_->status(), db, false);
      if (arch_device) {
        device_ = arch_device;
      } else {
        const std::string name = vm["device"].as<std::string>();
        device_ = dbs_->find_device(name);
        if (!device_) {
          std::string known;
          for (const std::string& n : dbs_->device_names())
            known += (known.empty() ? "" : ", ") + ktune::quoted(n, 100);
          throw InvalidArgument("--device " + ktune::quoted(name) +
                                " is recorded in none of the databases (recorded: " +
                                (known.empty() ? std::string("none") : known) +
                                "; --arch answers for a generic GPU)");
        }
      }
    } else {
      RuntimeOptions ro;
      ro.db_path = db.path.string();
      ro.use_shipped_databases = !vm.count("no-shipped");
      runtime_ = std::make_unique<Runtime>(ro);
      report_databases(runtime_->status().databases, db, false);
    }
  }

  MatchInfo find(const Op& op, DType dtype, const Problem& problem) {
    if (runtime_) {
      try {
        return runtime_->query(op.name(), op.problem_key(problem), dtype);
      } catch (const NoDevice& e) {
        throw NoDevice(std::string(e.what()) +
                       " (without a GPU, --device NAME or --arch A answers from the databases "
                       "alone)");
      }
    }
    return match_info(op, problem, dbs_->find(op, dtype, problem, *device_));
  }

  /// Warns of the rows the lookups skipped.
  void report_after() const {
    report_databases(runtime_ ? runtime_->status().databases : dbs_->status(), db_, true);
  }

  /// The GPU answered for when it need not be here (--device, --arch); nullopt for this one.
  const std::optional<DeviceInfo>& device() const { return device_; }

 private:
  DbLocation db_;
  std::unique_ptr<TuningDatabases> dbs_;
  std::unique_ptr<Runtime> runtime_;
  std::optional<DeviceInfo> device_;
};

/// The problem --op, --shape, --dtype and --causal ask for.
struct Asked {
  const Op* op = nullptr;
  DType dtype = DType::bf16;
  Problem problem;
};

Asked asked_problem(const po::variables_map& vm) {
  Asked a;
  a.op = &op_option(vm["op"].as<std::string>());
  a.dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(*a.op, a.dtype);
  std::string shape = with_causal(*a.op, vm["shape"].as<std::string>(), vm.count("causal") > 0);
  a.problem = shape.empty() ? a.op->default_problem() : a.op->parse_problem(shape);
  return a;
}

// A problem no configuration runs (the lookup gave the default, which cannot run it: e4m3 at a
// head dim it does not take, or on sm_80): one message and exit status 2, as for a bad shape,
// after the answer itself.
int cannot_run(const MatchInfo& m, const std::optional<DeviceInfo>& device) {
  if (m.cannot_run.empty()) return 0;
  std::fprintf(stderr, "ktune best: no configuration of %s runs %s on %s: %s\n", m.op.c_str(),
               shown(m.problem).c_str(), device ? shown(device->name).c_str() : "this GPU",
               shown(m.cannot_run, 400).c_str());
  return 2;
}

int best_one(const po::variables_map& vm, const Asked& asked, Answers& answers) {
  const Op& op = *asked.op;
  const DType dtype = asked.dtype;
  const Problem& problem = asked.problem;
  const MatchInfo m = answers.find(op, dtype, problem);
  answers.report_after();
  const std::optional<DeviceInfo>& device = answers.device();

  // Scratch the configuration needs (a caller-provided workspace, e.g. for CUDA graphs).
  const std::size_t workspace = op.workspace_bytes(op.parse_params(m.params), problem, dtype);
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("op", m.op).field("problem", m.problem);
    j.field("dtype", dtype_name(dtype));
    if (device)
      j.field("device", device->name).field("device_key", device->key())
          .field("arch", device->arch());
    j.field("match", match_kind_name(m.kind)).field("params", m.params);
    j.field("tuned_problem", m.tuned_problem).field("tuned_device", m.tuned_device);
    j.field("database", m.database).field("tuned_us", m.tuned_us);
    if (!m.note.empty()) j.field("note", m.note);
    if (!m.cannot_run.empty()) j.field("cannot_run", m.cannot_run);
    j.field("workspace_bytes", static_cast<long long>(workspace)).end_object();
    std::printf("%s\n", j.str().c_str());
    return cannot_run(m, device);
  }
  std::printf("%s %s %s: %s\n", m.op.c_str(), dtype_name(dtype), shown(m.problem).c_str(),
              shown(m.params, 1000).c_str());
  if (device) std::printf("  for: %s (%s)\n", shown(device->name).c_str(), device->arch().c_str());
  std::printf("  match: %s", match_kind_name(m.kind));
  if (m.kind != Match::default_config)
    std::printf(" (tuned on %s, %s, %.2f us, from %s)", shown(m.tuned_problem).c_str(),
                shown(m.tuned_device).c_str(), m.tuned_us, shown(m.database).c_str());
  if (!m.note.empty()) std::printf(" (%s)", shown(m.note, 400).c_str());
  std::printf("\n");
  if (workspace > 0) std::printf("  workspace: %zu bytes\n", workspace);
  return cannot_run(m, device);
}

// Every problem of a plan, one line each, then how many matched each way. With --require-exact
// the exit status is 1 unless all are exact: a check that a database covers a model's shapes.
int best_plan(const po::variables_map& vm, const Plan& plan, Answers& answers) {
  const std::string path = vm["plan"].as<std::string>();
  // Every answer first: a lookup that fails (no GPU here) prints nothing half-way.
  std::vector<std::pair<DType, MatchInfo>> found;
  for (const PlanLine& line : plan.lines) {
    const Op& op = op_option(line.op);
    for (const std::string& key : line.problem_keys)
      found.emplace_back(line.dtype, answers.find(op, line.dtype, op.parse_problem(key)));
  }
  answers.report_after();
  std::map<Match, std::size_t> counts;
  for (const auto& [dtype, m] : found) ++counts[m.kind];
  const std::size_t problems = found.size(), exact = counts[Match::exact];
  const std::optional<DeviceInfo>& device = answers.device();
  const std::string target = device ? device->name + " (" + device->arch() + ")" : "this GPU";
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("plan", path).key("problems").begin_array();
    for (const auto& [dtype, m] : found) {
      j.begin_object().field("op", m.op).field("dtype", dtype_name(dtype));
      j.field("problem", m.problem).field("match", match_kind_name(m.kind));
      j.field("params", m.params).field("tuned_us", m.tuned_us);
      if (!m.cannot_run.empty()) j.field("cannot_run", m.cannot_run);
      j.end_object();
    }
    j.end_array().field("target", target).key("counts").begin_object();
    for (Match k : {Match::exact, Match::nearest_shape, Match::other_device, Match::default_config})
      j.field(match_kind_name(k), static_cast<long long>(counts[k]));
    j.end_object().end_object();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%-14s %-16s %-6s %s\n", "match", "op", "dtype", "problem");
    for (const auto& [dtype, m] : found)
      std::printf("%-14s %-16s %-6s %s\n", match_kind_name(m.kind), m.op.c_str(),
                  dtype_name(dtype), shown(m.problem).c_str());
    std::printf("plan %s for %s: %zu problems: %zu exact, %zu nearest_shape, %zu other_device, "
                "%zu default\n",
                shown(path).c_str(), shown(target).c_str(), problems, exact,
                counts[Match::nearest_shape], counts[Match::other_device],
                counts[Match::default_config]);
  }
  std::size_t unrunnable = 0;
  for (const auto& [dtype, m] : found)
    if (!m.cannot_run.empty() && unrunnable++ == 0)
      std::fprintf(stderr, "ktune best: no configuration of %s runs %s %s on %s: %s\n",
                   m.op.c_str(), dtype_name(dtype), shown(m.problem).c_str(),
                   shown(target).c_str(), shown(m.cannot_run, 400).c_str());
  if (unrunnable > 0) {
    std::fprintf(stderr, "ktune best: %zu of %zu problems of %s cannot run on %s\n", unrunnable,
                 problems, shown(path).c_str(), shown(target).c_str());
    return 2;
  }
  if (vm.count("require-exact") && exact != problems) {
    std::fprintf(stderr,
                 "ktune best: %zu of %zu problems of %s are not tuned for %s (--require-exact)\n",
                 problems - exact, problems, shown(path).c_str(), shown(target).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int cmd_best(const Args& args) {
  po::options_description desc("best options");
  desc.add_options()
      ("op", po::value<std::string>(), "op name")
      ("shape", po::value<std::string>()->default_value(""), "problem (default: the op's)")
      ("dtype", po::value<std::string>()->default_value("bf16"),
       "bf16, fp16, or e4m3 (flash_attention on sm_90a; moe FP8 weights, sm_89+)")
      ("causal", "causal masking (ops with a causal dimension)")
      ("plan", po::value<std::string>(),
       "answer for every problem of a plan file (see plans/) instead of --op/--shape")
      ("require-exact", "with --plan: exit with status 1 unless every problem matches exactly")
      ("device", po::value<std::string>(),
       "answer for this GPU: a device name or key recorded in the databases (no GPU needed)")
      ("arch", po::value<std::string>(),
       "answer for a generic GPU of this target: sm_90a or sm_80 (no GPU needed)")
      ("db", po::value<std::string>(), "user database (default: $KTUNE_DB or the data directory)")
      ("no-shipped", "ignore the databases shipped with ktune")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("best",
                     "(--op OP [--shape S] [--dtype T] | --plan FILE [--require-exact]) "
                     "[--device NAME | --arch A] [--db PATH]",
                     desc, args, vm))
    return 0;
  if (vm.count("device") && vm.count("arch"))
    throw UsageError{"--device and --arch exclude each other (see ktune best --help)"};
  const bool plan = vm.count("plan") > 0;
  if (plan == (vm.count("op") > 0))
    throw UsageError{plan ? "--plan and --op exclude each other (see ktune best --help)"
                          : "the option '--op' is required but missing (or --plan FILE)"};
  if (plan && (!vm["shape"].as<std::string>().empty() || vm.count("causal") ||
               !vm["dtype"].defaulted()))
    throw UsageError{"--shape, --dtype and --causal are the plan's own with --plan (each line "
                     "names its op, dtype and problem)"};
  if (!plan && vm.count("require-exact"))
    throw UsageError{"--require-exact goes with --plan (see ktune best --help)"};
  // The question first, so that a bad op or plan is named before any database is opened.
  std::optional<Asked> asked;
  std::optional<Plan> lines;
  if (plan)
    lines = load_plan(vm["plan"].as<std::string>());
  else
    asked = asked_problem(vm);
  if (vm.count("arch")) arch_option(vm["arch"].as<std::string>());
  const DbLocation db = db_option(vm);
  db_exists(db);  // a path that cannot be examined is reported with where it came from
  Answers answers(vm, db);
  return plan ? best_plan(vm, *lines, answers) : best_one(vm, *asked, answers);
}

}  // namespace ktune::cli
