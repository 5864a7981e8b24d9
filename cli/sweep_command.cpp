#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/sweep_devices.hpp"
#include "cli/sweep_plan.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "runtime/dispatch/miss_log.hpp"
#include "search/strategy.hpp"
#include "tuner/devices.hpp"
#include "tuner/sweep.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {
namespace {

void print_progress(const SweepProgress& p, bool tty) {
  // A warm-start point says whose best it is.
  const std::string warm =
      p.warm_from.empty() ? "" : " (warm start: the best of " + shown(p.warm_from) + ")";
  if (p.phase == "retime" || !tty) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s%s\n", candidate_line(p).c_str(), warm.c_str());
    return;
  }
  // With several problems (token buckets) every line says which one: "[problem 3/13 t=4] ".
  std::string where;
  if (p.problems > 1)
    where = "[problem " + std::to_string(p.problem_index + 1) + "/" + std::to_string(p.problems) +
            " " + p.problem + "] ";
  const int width = 30;
  int filled = p.total ? static_cast<int>(width * p.done / p.total) : width;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar += std::string(static_cast<std::size_t>(width - filled), '.');
  std::fprintf(stderr, "\r\033[K%s[%s] %zu/%zu  best %.2f us  %s%s", where.c_str(), bar.c_str(),
               p.done, p.total, p.best_us, p.params.c_str(), p.warm_from.empty() ? "" : " (warm start)");
}

// "m=8192,n=4096 (this GPU, distance 0.69); ..." for a sweep's warm-start points.
std::string warm_sources(const SweepResult& r) {
  std::string out;
  for (const WarmStartPoint& w : r.warm_start) {
    const bool is_default = r.default_config && r.default_config->params_key == w.params_key;
    out += (out.empty() ? "" : "; ") + w.problem_key + " (" +
           (w.same_device ? "this GPU" : "another GPU of " + r.device.arch()) + ", distance " +
           fmt("%.2f", w.distance) + (is_default ? "; it is the default" : "") + ")";
  }
  return out;
}

double tb_per_s(const SweepResult& r, double us) { return us > 0 ? r.min_bytes / (us * 1e-6) / 1e12 : 0.0; }
double tflop_per_s(const SweepResult& r, double us) { return us > 0 ? r.flops / (us * 1e-6) / 1e12 : 0.0; }

void json_result(Json& j, const SweepResult& r, const SweepOptions& o) {
  j.begin_object().field("op", r.op).field("dtype", dtype_name(r.dtype)).field("problem", r.problem_key);
  j.field("device", r.device.name).field("strategy", r.strategy).field("sweep_id", static_cast<long long>(r.sweep_id));
  j.field("space", static_cast<long long>(r.space_size));
  if (r.space_enumerated) j.field("valid", static_cast<long long>(r.valid_count));
  else j.key("valid").null();
  j.key("counts").begin_object();
  for (const auto& [s, n] : r.counts) j.field(status_name(s), static_cast<long long>(n));
  j.end_object();
  if (r.best) {
    j.key("best").begin_object().field("params", r.best->params_key).field("median_us", r.best->median_us);
    j.field("spread_pct", r.best->spread_pct);
    if (r.flops > 0) j.field("tflops", tflop_per_s(r, r.best->median_us));
    else j.field("tb_per_s", tb_per_s(r, r.best->median_us));
    j.end_object();
  } else {
    j.key("best").null();
  }
  if (r.default_config && r.default_config->status == TrialStatus::ok) {
    j.key("default").begin_object().field("params", r.default_config->params_key);
    j.field("median_us", r.default_config->median_us).end_object();
    if (r.best) j.field("speedup_over_default", r.default_config->median_us / r.best->median_us);
  }
  if (r.stored_best) {
    j.key("stored_best").begin_object().field("params", r.stored_best->params_key);
    j.field("median_us", r.stored_best->median_us).end_object();
  }
  j.field("copy_bandwidth_tb_per_s", r.copy_bandwidth / 1e12);
  if (r.best)
    j.field("percent_of_copy_bandwidth",
            100.0 * tb_per_s(r, r.best->median_us) * 1e12 / r.copy_bandwidth);
  j.key("warm_start").begin_array();
  for (const WarmStartPoint& w : r.warm_start)
    j.begin_object().field("params", w.params_key).field("from", w.problem_key)
        .field("device", w.device_key).field("distance", w.distance).end_object();
  j.end_array();
  j.key("given").begin_array();
  for (const TrialOutcome& g : r.given) {
    j.begin_object().field("params", g.params_key).field("status", status_name(g.status));
    if (g.status == TrialStatus::ok) j.field("median_us", g.median_us);
    else j.field("detail", g.detail);
    j.end_object();
  }
  j.end_array();
  j.field("not_measured", static_cast<long long>(r.not_measured));
  j.field("seconds", r.seconds).field("database", o.db_path.string()).end_object();
}

void print_result(const SweepResult& r, const SweepOptions& o) {
  std::printf("\n%s %s %s on %s\n", r.op.c_str(), dtype_name(r.dtype), r.problem_key.c_str(),
              shown(r.device.name).c_str());
  if (r.space_enumerated)
    std::printf("  space: %zu points, %zu valid; strategy %s; this run:", r.space_size,
                r.valid_count, r.strategy.c_str());
  else
    std::printf("  space: %zu points (walked, not listed); strategy %s; this run:", r.space_size,
                r.strategy.c_str());
  for (const auto& [s, n] : r.counts) std::printf(" %s %zu", status_name(s), n);
  std::printf("\n");
  if (!r.warm_start.empty())
    std::printf("  warm start: %zu point%s measured first, the bests of %s\n", r.warm_start.size(),
                r.warm_start.size() == 1 ? "" : "s", shown(warm_sources(r), 1000).c_str());
  else if (o.warm_start && !r.trials.empty())
    std::printf("  warm start: none (no tuned problem near enough in the database)\n");
  if (r.not_measured > 0)
    std::printf("  time limit reached: %zu candidates not measured (run again to resume)\n",
                r.not_measured);
  if (!r.best) {
    std::printf("  no configuration passed verification\n");
    return;
  }
  const bool kept = r.stored_best && r.stored_best->params_key == r.best->params_key;
  std::printf("  best:    %s%s\n", r.best->params_key.c_str(),
              kept ? "\n           (the database's earlier best, re-timed: nothing this run "
                     "measured beat it)"
                   : "");
  const double us = r.best->median_us;
  const double pct = 100.0 * tb_per_s(r, us) * 1e12 / r.copy_bandwidth;
  if (r.flops > 0)
    std::printf("           %.2f us (spread %.1f%%), %.1f TFLOP/s, %.0f%% of copy bandwidth on the "
                "minimum bytes\n", us, r.best->spread_pct, tflop_per_s(r, us), pct);
  else
    std::printf("           %.2f us (spread %.1f%%), %.3f TB/s effective, %.0f%% of copy bandwidth (%.2f TB/s)\n",
                us, r.best->spread_pct, tb_per_s(r, us), pct, r.copy_bandwidth / 1e12);
  if (r.default_config && r.default_config->status == TrialStatus::ok)
    std::printf("  default: %s\n           %.2f us; tuned is %.2fx faster\n",
                r.default_config->params_key.c_str(), r.default_config->median_us,
                r.default_config->median_us / us);
  for (const TrialOutcome& g : r.given) {
    std::printf("  given:   %s\n", g.params_key.c_str());
    if (g.status != TrialStatus::ok)
      std::printf("           %s: %s\n", status_name(g.status), shown(g.detail, 300).c_str());
    else if (r.default_config && r.default_config->status == TrialStatus::ok)
      std::printf("           %.2f us; %.2fx the default's speed\n", g.median_us,
                  r.default_config->median_us / g.median_us);
    else
      std::printf("           %.2f us\n", g.median_us);
  }
  std::printf("  %.1f s; stored in %s\n", r.seconds, shown(o.db_path.string()).c_str());
}

const char* r_unit(const std::vector<SweepResult>& rs) {
  return rs.front().flops > 0 ? "TFLOP/s" : "TB/s";
}

// Examines where the database goes before anything starts, so that a path that cannot be used
// is reported with the variable that chose it rather than as a raw filesystem error mid-sweep.
void check_db_location(const DbLocation& db) {
  db_exists(db);
  const fs::path dir = db.path.parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::directory) return;  // whether it is writable, opening says
  if (st.type() != fs::file_type::not_found) {
    if (ec)
      throw DatabaseError("cannot examine the directory of the database " + db.describe() + ": " +
                          ec.message());
    throw InvalidArgument("database " + db.describe() + ": " + ktune::quoted(dir.string(), 200) +
                          " is not a directory");
  }
  if (!db.ktune_places_it)
    throw InvalidArgument("database " + db.describe() + ": directory " +
                          ktune::quoted(dir.string(), 200) + " does not exist");
  // ktune creates the default directory once a GPU is found; its nearest existing ancestor must
  // be a directory we can write.
  const std::string what = "cannot create the directory " + ktune::quoted(dir.string(), 200) +
                           " for the database " + db.describe() + ": ";
  for (fs::path up = dir.parent_path(); !up.empty(); up = up.parent_path()) {
    st = fs::status(up, ec);
    if (st.type() == fs::file_type::directory) {
      if (::access(up.c_str(), W_OK | X_OK) != 0)
        throw DatabaseError(what + ktune::quoted(up.string(), 200) + " is not writable (" +
                            std::strerror(errno) + "); set KTUNE_DB or pass --db");
      return;
    }
    if (st.type() != fs::file_type::not_found)
      throw DatabaseError(what + ktune::quoted(up.string(), 200) +
                          (ec ? " cannot be examined: " + ec.message() : " is not a directory"));
    if (up == up.parent_path()) return;
  }
}

/// JSON (an array when `several`, else the one object) or each result's summary; 0 when every
/// problem has a best configuration, else 1.
int print_results(const std::vector<SweepResult>& results, const SweepOptions& o, bool json,
                  bool several) {
  bool all_best = true;
  for (const SweepResult& r : results) all_best = all_best && r.best.has_value();
  if (json) {
    Json j;
    if (several) j.begin_array();
    for (const SweepResult& r : results) json_result(j, r, o);
    if (several) j.end_array();
    std::printf("%s\n", j.str().c_str());
  } else {
    for (const SweepResult& r : results) print_result(r, o);
  }
  return all_best ? 0 : 1;
}

/// One problem of a run over --devices: its options (op, dtype, shape, at most one bucket).
struct Unit {
  SweepOptions options;
  std::string what;     // "op dtype ", for messages
  std::string problem;  // its problem key
};

/// Sweeps each unit once for each kind of GPU among `devices` (GPUs with one fingerprint key
/// share that kind's units). Results in unit order, then kind order, with the GPU of each in
/// `gpus` (-1 for a unit the time limit left out, which gets a result with nothing measured).
/// A unit whose sweep failed is reported on stderr and counted in `failed`.
std::vector<SweepResult> sweep_units(const std::vector<Unit>& units,
                                     const std::vector<SweepDevice>& devices,
                                     const SweepOptions& o, bool tty, std::vector<int>& gpus,
                                     std::size_t& failed) {
  std::vector<std::string> keys;
  for (const SweepDevice& d : devices)
    if (std::find(keys.begin(), keys.end(), d.key) == keys.end()) keys.push_back(d.key);
  std::vector<DeviceSweepJob> jobs;
  for (const Unit& u : units)
    for (const std::string& k : keys) jobs.push_back({u.options, k, u.what, {u.problem}});
  std::fprintf(stderr, "%zu problem%s%s on %s\n", units.size(), units.size() == 1 ? "" : "s",
               keys.size() > 1 ? (" for each of " + std::to_string(keys.size()) +
                                  " kinds of GPU").c_str()
                               : "",
               gpu_list(devices).c_str());
  if (units.size() * keys.size() < devices.size())
    std::fprintf(stderr, "ktune sweep: fewer problems than GPUs: %zu of them stay idle\n",
                 devices.size() - units.size() * keys.size());
  SweepBoard board("", devices, tty, jobs.size(), 0, o.progress);
  const std::vector<DeviceJobOutcome> outcomes = sweep_jobs(jobs, devices, o, board);
  std::vector<SweepResult> results;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const DeviceJobOutcome& out = outcomes[i];
    for (const SweepResult& r : out.results) {
      results.push_back(r);
      gpus.push_back(out.device);
    }
    if (!out.results.empty()) continue;
    if (!out.errors.empty()) {
      ++failed;
      std::string error;
      for (const std::string& e : out.errors) error += (error.empty() ? "" : "; ") + e;
      std::fprintf(stderr, "ktune sweep: %s%s not swept: %s\n", jobs[i].what.c_str(),
                   shown(jobs[i].problem_keys.front()).c_str(), shown(error, 2000).c_str());
      continue;
    }
    // Left out by the time limit: listed as not measured, as run_sweeps lists its own.
    SweepResult r;
    r.op = jobs[i].options.op;
    r.dtype = jobs[i].options.dtype;
    r.problem_key = jobs[i].problem_keys.front();
    r.not_measured = 1;
    results.push_back(std::move(r));
    gpus.push_back(-1);
  }
  return results;
}

/// Sweeps each problem of a miss log in turn (its op's default strategy unless --strategy), then
/// prints one line per problem. With `devices`, the problems spread over those GPUs.
int sweep_misses(const std::string& path, SweepOptions o, bool json,
                 const std::vector<SweepDevice>& devices, bool tty) {
  std::vector<std::string> skipped;
  const std::vector<MissEntry> misses = read_miss_log(path, skipped);
  for (const std::string& s : skipped)
    std::fprintf(stderr, "ktune sweep: warning: %s: %s\n", shown(path, 200).c_str(),
                 shown(s, 300).c_str());
  if (misses.empty())
    throw InvalidArgument("the miss log " + ktune::quoted(path, 200) + " lists no problem to tune");
  for (const MissEntry& m : misses) check_strategy_name(get_op(m.op), o.strategy);
  std::vector<SweepResult> results;
  std::vector<int> gpus;
  std::size_t failed = 0;
  if (!devices.empty()) {
    std::vector<Unit> units;
    for (const MissEntry& m : misses) {
      Unit u{o, m.op + " " + dtype_name(m.dtype) + " ", m.problem_key};
      u.options.op = m.op;
      u.options.dtype = m.dtype;
      u.options.shape = m.problem_key;
      u.options.buckets.clear();
      units.push_back(std::move(u));
    }
    results = sweep_units(units, devices, o, tty, gpus, failed);
  }
  for (std::size_t i = 0; devices.empty() && i < misses.size(); ++i) {
    std::fprintf(stderr, "problem %zu/%zu: %s %s %s (was %s)\n", i + 1, misses.size(),
                 misses[i].op.c_str(), dtype_name(misses[i].dtype), misses[i].problem_key.c_str(),
                 misses[i].match.c_str());
    SweepOptions one = o;
    one.op = misses[i].op;
    one.dtype = misses[i].dtype;
    one.shape = misses[i].problem_key;
    one.buckets.clear();
    results.push_back(run_sweep(one));
  }
  const int code = print_results(results, o, json, true) != 0 || failed > 0 ? 1 : 0;
  if (json) return code;
  const bool gpu_column = devices.size() > 1;
  std::printf("\n%s%-16s %-5s %12s %12s %8s  %s\n", gpu_column ? "gpu  " : "", "op", "dtype",
              "best us", "default us", "speedup", "problem");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const SweepResult& r = results[i];
    const bool has_default = r.best && r.default_config && r.default_config->status == TrialStatus::ok;
    if (gpu_column) std::printf("%-4s ", gpus[i] >= 0 ? std::to_string(gpus[i]).c_str() : "-");
    std::printf("%-16s %-5s %12s %12s %8s  %s\n", r.op.c_str(), dtype_name(r.dtype),
                r.best ? fmt("%.2f", r.best->median_us).c_str() : "none",
                has_default ? fmt("%.2f", r.default_config->median_us).c_str() : "-",
                has_default ? (fmt("%.2f", r.default_config->median_us / r.best->median_us) + "x").c_str() : "-",
                r.problem_key.c_str());
  }
  return code;
}

/// ktune sweep's options.
po::options_description sweep_options() {
  po::options_description desc("sweep options");
  desc.add_options()
      ("op", po::value<std::string>()->default_value("add_rmsnorm"), "op name (see ktune ops)")
      ("shape", po::value<std::string>()->default_value(""), "problem, e.g. m=16384,n=4096 or 16384x4096 (default: the op's)")
      ("from-misses", po::value<std::string>(),
       "tune every problem a KTUNE_MISS_LOG file lists (instead of --op/--shape)")
      ("plan", po::value<std::string>(),
       "tune every problem of a plan file, in order, resuming what the database has (instead of "
       "--op/--shape; see plans/)")
      ("shard", po::value<std::string>(),
       "with --plan: run the I-th of N slices of its lines (I/N, 0-based), or auto (Slurm array, "
       "Open MPI or PMI rank variables)")
      ("dry-run", "with --plan: list the problems this run would sweep, then stop (no GPU)")
      ("tokens", po::value<std::string>(),
       "moe: token counts to tune, e.g. 1,16,128 (default: 1,2,4,...,4096 unless --shape sets t)")
      ("dtype", po::value<std::string>()->default_value("bf16"),
       "bf16, fp16, or e4m3 (flash_attention on sm_90a; moe FP8 weights, sm_89+)")
      ("causal", "causal masking (ops with a causal dimension, e.g. flash_attention)")
      ("strategy", po::value<std::string>()->default_value(""),
       "exhaustive, random, model or staged (default: the op's; staged for moe, else exhaustive)")
      ("budget", po::value<std::string>()->default_value("0"), "candidates to measure per problem, 0 to 1000000000 (0: no limit)")
      ("time-limit", po::value<std::string>()->default_value("0"), "seconds for the whole sweep, 0 to 604800 (0: no limit)")
      ("jobs", po::value<std::string>()->default_value("0"), "compile threads, 0 to 1024 (0: number of cores)")
      ("seed", po::value<std::string>()->default_value("0"), "seed of the random and model strategies and of the inputs, 0 to 2^63-1")
      ("timeout", po::value<std::string>()->default_value("20"), "seconds one candidate may take, 0.1 to 3600")
      ("compile-timeout", po::value<std::string>()->default_value("120"),
       "seconds one kernel may take to compile, 0 to 3600 (0: no limit)")
      ("device", po::value<std::string>()->default_value("0"), "CUDA device ordinal, 0 to 1023")
      ("devices", po::value<std::string>(),
       "GPUs to spread the problems over (plans, buckets, miss logs): all, or ordinals such as "
       "0,1; one worker per GPU, one database, --jobs split between them (instead of --device)")
      ("params", po::value<std::vector<std::string>>()->composing(),
       "a configuration to time beside the default, as name=value items over it (e.g. "
       "block_m=32,bn2=64); repeat for more. Without --strategy nothing else is measured")
      ("force", "measure again configurations the database already has")
      ("no-cache", "do not use the on-disk compile cache")
      ("no-warm-start", "do not measure the bests of the nearest tuned problems in the database "
                        "first")
      ("db", po::value<std::string>(), "database (default: $KTUNE_DB or the data directory)")
      ("json", "print the summary as JSON");
  return desc;
}

/// Options that exclude each other, refused before anything is created or started.
void check_option_combinations(const po::variables_map& vm) {
  if (vm.count("devices") && !vm["device"].defaulted())
    throw InvalidArgument("--device " + ktune::quoted(vm["device"].as<std::string>()) +
                          " and --devices " + ktune::quoted(vm["devices"].as<std::string>()) +
                          " both choose GPUs: give --device N for one, or --devices all|LIST "
                          "for several");
  if (vm.count("plan")) {
    for (const char* o : {"op", "shape", "tokens", "dtype", "causal", "from-misses", "params"})
      if (vm.count(o) && !vm[o].defaulted())
        throw InvalidArgument(std::string("--plan names each problem's op, dtype and shape: "
                                          "leave out --") + o);
  } else {
    for (const char* o : {"shard", "dry-run"})
      if (vm.count(o))
        throw InvalidArgument(std::string("--") + o + " applies to --plan FILE");
  }
  if (vm.count("from-misses")) {
    for (const char* o : {"op", "shape", "tokens", "dtype", "causal", "params"})
      if (vm.count(o) && !vm[o].defaulted())
        throw InvalidArgument(std::string("--from-misses names each problem's op, dtype and shape: "
                                          "leave out --") + o);
  }
}

/// What the options ask for, each value checked in the order the options are read (every
/// problem valid, the listed GPUs present, the database's place usable), nothing started yet.
struct SweepSetup {
  SweepOptions o;
  std::vector<SweepDevice> devices;  // --devices: the GPUs to spread over (empty: --device)
  DbLocation db;
};

SweepSetup setup_of(const po::variables_map& vm, const Op& op, const Args& args) {
  SweepSetup setup;
  SweepOptions& o = setup.o;
  o.op = std::string(op.name());
  o.dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(op, o.dtype);
  o.shape = with_causal(op, vm["shape"].as<std::string>(), vm.count("causal") > 0);
  const std::string_view bucket_dim = op.bucket_dim();
  if (vm.count("tokens")) {
    if (bucket_dim.empty())
      throw InvalidArgument("--tokens applies to ops with token buckets (moe); " +
                            std::string(op.name()) + " takes one problem: use --shape");
    if (shape_names_dim(o.shape, bucket_dim))
      throw InvalidArgument("--tokens and --shape both set " + std::string(bucket_dim) +
                            ": give one of them");
    // The bucket dim's own range, so that the message names the limit the problem has.
    std::int64_t lo = 1, hi = std::int64_t{1} << 31;
    for (const DimSpec& d : op.dims())
      if (d.name == bucket_dim) lo = d.min, hi = d.max;
    for (long long t : integer_list_option(vm, "tokens", lo, hi)) o.buckets.push_back(t);
  } else if (!bucket_dim.empty() && !shape_names_dim(o.shape, bucket_dim)) {
    o.buckets = op.default_buckets();
  }
  sweep_problems(op, o);  // every problem valid before anything starts
  o.strategy = vm["strategy"].as<std::string>();
  {
    const std::vector<std::string>& names = strategy_names();
    if (!o.strategy.empty() && std::find(names.begin(), names.end(), o.strategy) == names.end())
      throw InvalidArgument("unknown strategy " + ktune::quoted(o.strategy) +
                            " (allowed: exhaustive, random, model, staged)");
    // With --plan or --from-misses --op is not given: each problem's own op is checked where
    // it is read (a plan line names its line).
    const bool one_op = vm.count("plan") == 0 && vm.count("from-misses") == 0;
    if (one_op && o.strategy == "staged" && op.search_stages().empty())
      throw InvalidArgument("strategy staged: op " + std::string(op.name()) +
                            " declares no search stages (allowed for it: exhaustive, random, model)");
  }
  if (vm.count("params")) {
    o.params = vm["params"].as<std::vector<std::string>>();
    check_given_params(op, o.params);
  }
  o.budget = static_cast<std::size_t>(integer_option(vm, "budget", 0, 1000000000));
  o.time_limit_s = number_option(vm, "time-limit", 0, 604800);
  o.jobs = static_cast<int>(integer_option(vm, "jobs", 0, 1024));
  o.seed = static_cast<std::uint64_t>(
      integer_option(vm, "seed", 0, std::numeric_limits<long long>::max()));
  o.candidate_timeout_s = number_option(vm, "timeout", 0.1, 3600);
  o.compile_timeout_s = number_option(vm, "compile-timeout", 0, 3600);
  o.device = static_cast<int>(integer_option(vm, "device", 0, 1023));
  // The listed GPUs must exist (driver attributes only: no context yet).
  if (vm.count("devices")) setup.devices = find_devices(vm["devices"].as<std::string>());
  o.force = vm.count("force") > 0;
  o.warm_start = vm.count("no-warm-start") == 0;
  o.disk_cache = vm.count("no-cache") == 0;
  const DbLocation& db = setup.db = db_option(vm);
  check_db_location(db);
  o.db_path = db.path;
  // The default location is ours to create (once a GPU is found); a path the user gave, with
  // --db or $KTUNE_DB, must already have its directory.
  o.create_db_directory = db.ktune_places_it;
  for (const std::string& a : args) o.command_line += (o.command_line.empty() ? "ktune sweep " : " ") + a;
  if (args.empty()) o.command_line = "ktune sweep";
  return setup;
}

/// One line per bucket: what the runtime now dispatches, against the built-in default.
void print_buckets(const std::vector<SweepResult>& results, const Op& op, const SweepOptions& o,
                   const std::vector<SweepDevice>& devices, const std::vector<int>& gpus,
                   double wall_seconds) {
  const std::string_view bucket_dim = op.bucket_dim();
  const bool gpu_column = devices.size() > 1;
  double seconds = 0;
  std::printf("\n%s%-10s %12s %10s %9s %12s %8s  %s\n", gpu_column ? "gpu  " : "",
              std::string(bucket_dim).c_str(), "best us", r_unit(results), "% copy",
              "default us", "speedup", "best params");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const SweepResult& r = results[i];
    seconds += r.seconds;
    if (gpu_column) std::printf("%-4s ", gpus[i] >= 0 ? std::to_string(gpus[i]).c_str() : "-");
    const std::string t = std::to_string(op.dim(op.parse_problem(r.problem_key), bucket_dim));
    if (!r.best) {
      std::printf("%-10s %12s\n", t.c_str(), r.not_measured ? "not measured" : "none passed");
      continue;
    }
    const double us = r.best->median_us;
    const bool has_default = r.default_config && r.default_config->status == TrialStatus::ok;
    std::printf("%-10s %12.2f %10.1f %9.1f %12s %8s  %s\n", t.c_str(), us,
                r.flops > 0 ? tflop_per_s(r, us) : tb_per_s(r, us),
                100.0 * tb_per_s(r, us) * 1e12 / r.copy_bandwidth,
                has_default ? fmt("%.2f", r.default_config->median_us).c_str() : "-",
                has_default ? (fmt("%.2f", r.default_config->median_us / us) + "x").c_str() : "-",
                r.best->params_key.c_str());
  }
  std::printf("%zu problems in %.1f s; stored in %s\n", results.size(),
              devices.empty() ? seconds : wall_seconds, shown(o.db_path.string()).c_str());
}

}  // namespace

int cmd_sweep(const Args& args) {
  po::options_description desc = sweep_options();
  po::variables_map vm;
  if (!parse_options("sweep", "[--op OP] [--shape S] [--tokens LIST] [--from-misses FILE] "
                              "[--plan FILE [--shard I/N|auto] [--dry-run]] [--dtype T] "
                              "[--strategy exhaustive|random|model|staged] "
                              "[--budget N] [--time-limit S] [--jobs N] [--timeout S] "
                              "[--compile-timeout S] [--device N | --devices all|LIST] "
                              "[--db PATH] [--params P]... [--force] [--no-warm-start]",
                     desc, args, vm))
    return 0;
  check_option_combinations(vm);
  const Op& op = op_option(vm["op"].as<std::string>());
  SweepSetup setup = setup_of(vm, op, args);
  SweepOptions& o = setup.o;
  const std::vector<SweepDevice>& devices = setup.devices;
  const DbLocation& db = setup.db;
  const bool tty = isatty(fileno(stderr));
  const bool json = vm.count("json") > 0;
  o.progress = [&](const SweepProgress& p) { print_progress(p, tty); };
  o.warn = [&](const std::string& w) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "ktune sweep: warning: %s\n", shown(w, 500).c_str());
  };

  const std::string_view bucket_dim = op.bucket_dim();
  std::vector<SweepResult> results;
  std::vector<int> gpus;      // with --devices: the GPU of each result (-1: none)
  std::size_t failed = 0;     // with --devices: problems whose sweep failed (reported)
  double wall_seconds = 0.0;  // with --devices: the run's wall time (GPUs sweep at once)
  try {
    if (vm.count("plan")) {
      PlanRun run;
      run.path = vm["plan"].as<std::string>();
      if (vm.count("shard")) run.shard = vm["shard"].as<std::string>();
      run.dry_run = vm.count("dry-run") > 0;
      run.json = json;
      run.tty = tty;
      run.devices = devices;
      return sweep_plan(run, o);
    }
    if (vm.count("from-misses"))
      return sweep_misses(vm["from-misses"].as<std::string>(), o, json, devices, tty);
    if (devices.empty()) {
      results = run_sweeps(o);
    } else {
      // Each bucket (or the one problem) is a unit of its own, so that buckets spread.
      std::vector<Unit> units;
      for (const Problem& p : sweep_problems(op, o)) {
        Unit u{o, std::string(op.name()) + " " + dtype_name(o.dtype) + " ", op.problem_key(p)};
        if (!o.buckets.empty()) u.options.buckets = {op.dim(p, bucket_dim)};
        units.push_back(std::move(u));
      }
      const auto start = std::chrono::steady_clock::now();
      results = sweep_units(units, devices, o, tty, gpus, failed);
      wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } catch (const fs::filesystem_error& e) {
    throw Error("cannot use " + ktune::quoted(e.path1().string(), 200) + ": " + e.code().message() +
                " (the database is " + db.describe() + ")");
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (results.empty()) return 1;  // --devices: every problem failed (reported above)
  const int code =
      print_results(results, o, json, !o.buckets.empty() || results.size() > 1) != 0 || failed > 0
          ? 1
          : 0;
  if (json) return code;
  if (results.size() > 1 && !bucket_dim.empty())
    print_buckets(results, op, o, devices, gpus, wall_seconds);
  return code;
}

}  // namespace ktune::cli
