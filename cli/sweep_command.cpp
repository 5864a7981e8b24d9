#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "tuner/sweep.hpp"

namespace po = boost::program_options;

namespace ktune::cli {
namespace {

void print_progress(const SweepProgress& p, bool tty) {
  if (p.phase == "retime") {
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "re-timing %s: %.2f us\n", p.params.c_str(), p.median_us);
    return;
  }
  if (tty) {
    const int width = 30;
    int filled = p.total ? static_cast<int>(width * p.done / p.total) : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar += std::string(static_cast<std::size_t>(width - filled), '.');
    std::fprintf(stderr, "\r\033[K[%s] %zu/%zu  best %.2f us  %s", bar.c_str(), p.done, p.total,
                 p.best_us, p.params.c_str());
    if (p.done == p.total) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "[%zu/%zu] %s: %s", p.done, p.total, p.params.c_str(), status_name(p.status));
    if (p.status == TrialStatus::ok) std::fprintf(stderr, " %.2f us", p.median_us);
    std::fprintf(stderr, "\n");
  }
}

}  // namespace

int cmd_sweep(const Args& args) {
  po::options_description desc("sweep options");
  desc.add_options()
      ("op", po::value<std::string>()->default_value("add_rmsnorm"), "op name (see ktune ops)")
      ("shape", po::value<std::string>()->default_value(""), "problem, e.g. m=16384,n=4096 or 16384x4096 (default: the op's)")
      ("dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp16")
      ("causal", "causal masking (ops with a causal dimension, e.g. flash_attention)")
      ("strategy", po::value<std::string>()->default_value("exhaustive"), "exhaustive or random")
      ("budget", po::value<long long>()->default_value(0), "candidates to measure (0: no limit)")
      ("time-limit", po::value<double>()->default_value(0), "seconds (0: no limit)")
      ("jobs", po::value<int>()->default_value(0), "compile threads (0: number of cores)")
      ("seed", po::value<long long>()->default_value(0), "seed of the random strategy and of the inputs")
      ("timeout", po::value<double>()->default_value(20), "seconds one candidate may take")
      ("device", po::value<int>()->default_value(0), "CUDA device ordinal")
      ("force", "measure again configurations the database already has")
      ("no-cache", "do not use the on-disk compile cache")
      ("db", po::value<std::string>(), "database (default: $KTUNE_DB or the data directory)")
      ("json", "print the summary as JSON");
  po::variables_map vm;
  if (!parse_options("sweep", "[--op OP] [--shape S] [--dtype T] [--strategy exhaustive|random] "
                              "[--budget N] [--time-limit S] [--jobs N] [--db PATH] [--force]",
                     desc, args, vm))
    return 0;

  // Validate before anything is created or started.
  const Op& op = get_op(vm["op"].as<std::string>());
  SweepOptions o;
  o.op = std::string(op.name());
  o.dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(op, o.dtype);
  o.shape = with_causal(op, vm["shape"].as<std::string>(), vm.count("causal") > 0);
  if (!o.shape.empty()) op.parse_problem(o.shape);
  o.strategy = vm["strategy"].as<std::string>();
  if (o.strategy != "exhaustive" && o.strategy != "random")
    throw InvalidArgument("unknown strategy \"" + o.strategy + "\" (allowed: exhaustive, random)");
  long long budget = vm["budget"].as<long long>();
  if (budget < 0) throw InvalidArgument("--budget " + std::to_string(budget) + " must be >= 0");
  o.budget = static_cast<std::size_t>(budget);
  o.time_limit_s = vm["time-limit"].as<double>();
  if (o.time_limit_s < 0) throw InvalidArgument("--time-limit must be >= 0");
  o.jobs = vm["jobs"].as<int>();
  if (o.jobs < 0) throw InvalidArgument("--jobs " + std::to_string(o.jobs) + " must be >= 0");
  o.seed = static_cast<std::uint64_t>(vm["seed"].as<long long>());
  o.candidate_timeout_s = vm["timeout"].as<double>();
  if (o.candidate_timeout_s <= 0) throw InvalidArgument("--timeout must be > 0");
  o.device = vm["device"].as<int>();
  o.force = vm.count("force") > 0;
  o.disk_cache = vm.count("no-cache") == 0;
  o.db_path = db_option(vm);
  // The default location is ours to create (once a GPU is found); a path the user gave must
  // already have its directory.
  o.create_db_directory = !vm.count("db") && !std::getenv("KTUNE_DB");
  for (const std::string& a : args) o.command_line += (o.command_line.empty() ? "ktune sweep " : " ") + a;
  if (args.empty()) o.command_line = "ktune sweep";
  const bool tty = isatty(fileno(stderr));
  const bool json = vm.count("json") > 0;
  o.progress = [&](const SweepProgress& p) { print_progress(p, tty); };

  SweepResult r = run_sweep(o);

  auto tbs = [&](double us) { return us > 0 ? r.min_bytes / (us * 1e-6) / 1e12 : 0.0; };
  auto tflops = [&](double us) { return us > 0 ? r.flops / (us * 1e-6) / 1e12 : 0.0; };
  if (json) {
    Json j;
    j.begin_object().field("op", r.op).field("dtype", dtype_name(r.dtype)).field("problem", r.problem_key);
    j.field("device", r.device.name).field("strategy", r.strategy).field("sweep_id", static_cast<long long>(r.sweep_id));
    j.field("space", static_cast<long long>(r.space_size)).field("valid", static_cast<long long>(r.valid_count));
    j.key("counts").begin_object();
    for (const auto& [s, n] : r.counts) j.field(status_name(s), static_cast<long long>(n));
    j.end_object();
    if (r.best) {
      j.key("best").begin_object().field("params", r.best->params_key).field("median_us", r.best->median_us);
      j.field("spread_pct", r.best->spread_pct);
      if (r.flops > 0) j.field("tflops", tflops(r.best->median_us));
      else j.field("tb_per_s", tbs(r.best->median_us));
      j.end_object();
    } else {
      j.key("best").null();
    }
    if (r.default_config && r.default_config->status == TrialStatus::ok) {
      j.key("default").begin_object().field("params", r.default_config->params_key);
      j.field("median_us", r.default_config->median_us).end_object();
      if (r.best) j.field("speedup_over_default", r.default_config->median_us / r.best->median_us);
    }
    j.field("copy_bandwidth_tb_per_s", r.copy_bandwidth / 1e12);
    if (r.best && r.flops == 0)
      j.field("percent_of_copy_bandwidth", 100.0 * tbs(r.best->median_us) * 1e12 / r.copy_bandwidth);
    j.field("not_measured", static_cast<long long>(r.not_measured));
    j.field("seconds", r.seconds).field("database", o.db_path.string()).end_object();
    std::printf("%s\n", j.str().c_str());
    return r.best ? 0 : 1;
  }

  std::printf("\n%s %s %s on %s\n", r.op.c_str(), dtype_name(r.dtype), r.problem_key.c_str(),
              r.device.name.c_str());
  std::printf("  space: %zu points, %zu valid; this run:", r.space_size, r.valid_count);
  for (const auto& [s, n] : r.counts) std::printf(" %s %zu", status_name(s), n);
  std::printf("\n");
  if (r.not_measured > 0)
    std::printf("  time limit reached: %zu candidates not measured (run again to resume)\n",
                r.not_measured);
  if (!r.best) {
    std::printf("  no configuration passed verification\n");
    return 1;
  }
  std::printf("  best:    %s\n", r.best->params_key.c_str());
  if (r.flops > 0)
    std::printf("           %.2f us (spread %.1f%%), %.1f TFLOP/s\n", r.best->median_us,
                r.best->spread_pct, tflops(r.best->median_us));
  else
    std::printf("           %.2f us (spread %.1f%%), %.3f TB/s effective, %.0f%% of copy bandwidth (%.2f TB/s)\n",
                r.best->median_us, r.best->spread_pct, tbs(r.best->median_us),
                100.0 * tbs(r.best->median_us) * 1e12 / r.copy_bandwidth, r.copy_bandwidth / 1e12);
  if (r.default_config && r.default_config->status == TrialStatus::ok)
    std::printf("  default: %s\n           %.2f us; tuned is %.2fx faster\n",
                r.default_config->params_key.c_str(), r.default_config->median_us,
                r.default_config->median_us / r.best->median_us);
  std::printf("  %.1f s in all; stored in %s\n", r.seconds, o.db_path.string().c_str());
  return 0;
}

}  // namespace ktune::cli
