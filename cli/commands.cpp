#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "db/store.hpp"
#include "search/space.hpp"

#include <unistd.h>

namespace po = boost::program_options;

namespace ktune::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"devices", "print this machine's CUDA devices and their fingerprints", cmd_devices},
      {"ops", "list the ops with their tunables and problem dimensions", cmd_ops},
      {"space", "show an op's search space for a problem (--compile: compile every point)", cmd_space},
      {"sweep", "tune an op for a problem on this GPU and store every trial", cmd_sweep},
      {"best", "show what the runtime would dispatch for a problem, and how it matched", cmd_best},
      {"db", "inspect the tuning database: list | show | export", cmd_db},
  };
  return table;
}

bool parse_options(const std::string& command, const std::string& synopsis,
                   po::options_description& desc, const Args& args, po::variables_map& vm,
                   po::positional_options_description* positional) {
  desc.add_options()("help,h", "show this help");
  po::command_line_parser parser(args);
  parser.options(desc);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: ktune " << command << " " << synopsis << "\n\n" << desc << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

DType dtype_option(const std::string& text) {
  std::optional<DType> t = parse_dtype(text);
  if (!t) throw InvalidArgument("unsupported dtype \"" + text + "\" (allowed: bf16, fp16)");
  return *t;
}

void check_dtype(const Op& op, DType t) {
  std::vector<DType> allowed = op.dtypes();
  if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) return;
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  throw InvalidArgument("dtype " + std::string(dtype_name(t)) + " is not supported by " +
                        std::string(op.name()) + " (allowed: " + list + ")");
}

std::string with_causal(const Op& op, const std::string& shape, bool causal) {
  if (!causal) return shape;
  bool has = false;
  for (const DimSpec& d : op.dims()) has = has || d.name == "causal";
  if (!has) throw InvalidArgument("--causal: " + std::string(op.name()) + " has no causal dimension");
  std::string base = shape.empty() ? op.problem_key(op.default_problem()) : shape;
  return base + ",causal=yes";
}

std::filesystem::path db_option(const po::variables_map& vm) {
  if (vm.count("db")) return vm["db"].as<std::string>();
  return default_db_path();
}

void json_device(Json& j, const DeviceInfo& d) {
  j.begin_object();
  j.field("name", d.name).field("key", d.key()).field("arch", d.arch());
  j.key("compute_capability").value(std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  j.field("sm_count", d.sm_count).field("memory_bytes", static_cast<long long>(d.memory_bytes));
  j.field("l2_bytes", static_cast<long long>(d.l2_bytes));
  j.field("smem_optin_per_block", d.smem_optin_per_block);
  j.field("driver_version", d.driver_version).field("nvrtc_version", d.nvrtc_version);
  j.end_object();
}

int cmd_devices(const Args& args) {
  po::options_description desc("devices options");
  desc.add_options()("json", "print JSON")("db", po::value<std::string>(), "database (unused)");
  po::variables_map vm;
  if (!parse_options("devices", "[--json]", desc, args, vm)) return 0;
  std::string why;
  std::vector<DeviceInfo> devices;
  if (Driver::available(&why)) {
    int n = device_count();
    for (int i = 0; i < n; ++i) devices.push_back(query_device(i));
    if (n == 0) why = "the CUDA driver reports no device";
  }
  if (vm.count("json")) {
    Json j;
    j.begin_object().key("devices").begin_array();
    for (const DeviceInfo& d : devices) json_device(j, d);
    j.end_array();
    j.field("nvrtc_version", Compiler::nvrtc_version());
    if (devices.empty()) j.field("reason", why);
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  if (devices.empty()) {
    std::printf("no CUDA device found: %s\n", why.c_str());
    std::printf("NVRTC %d.%d is available: `ktune space --compile` works without a GPU.\n",
                Compiler::nvrtc_version() / 1000, Compiler::nvrtc_version() % 1000 / 10);
    return 0;
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    std::printf("device %zu: %s\n", i, d.name.c_str());
    std::printf("  compute capability %d.%d (target %s), %d SMs\n", d.cc_major, d.cc_minor,
                d.arch().c_str(), d.sm_count);
    std::printf("  memory %.1f GiB, L2 %.1f MiB, shared memory per block (opt-in) %d KiB\n",
                static_cast<double>(d.memory_bytes) / (1 << 30),
                static_cast<double>(d.l2_bytes) / (1 << 20), d.smem_optin_per_block / 1024);
    std::printf("  driver %d.%d, NVRTC %d.%d\n", d.driver_version / 1000, d.driver_version % 1000 / 10,
                d.nvrtc_version / 1000, d.nvrtc_version % 1000 / 10);
    std::printf("  key %s\n", d.key().c_str());
  }
  return 0;
}

int cmd_ops(const Args& args) {
  po::options_description desc("ops options");
  desc.add_options()("json", "print JSON")("db", po::value<std::string>(), "database (unused)");
  po::variables_map vm;
  if (!parse_options("ops", "[--json]", desc, args, vm)) return 0;
  if (vm.count("json")) {
    Json j;
    j.begin_array();
    for (const Op* op : all_ops()) {
      j.begin_object().field("name", std::string(op->name())).field("summary", std::string(op->summary()));
      j.key("dims").begin_array();
      for (const DimSpec& d : op->dims()) {
        j.begin_object().field("name", d.name);
        if (d.enumerated()) {
          j.key("choices").begin_array();
          for (const std::string& c : d.choices) j.value(c);
          j.end_array();
        } else {
          j.field("min", static_cast<long long>(d.min)).field("max", static_cast<long long>(d.max));
        }
        j.end_object();
      }
      j.end_array().key("tunables").begin_array();
      for (const Tunable& t : op->tunables()) {
        j.begin_object().field("name", t.name).key("values").begin_array();
        for (std::int64_t v : t.values) j.value(static_cast<long long>(v));
        j.end_array().end_object();
      }
      j.end_array().key("dtypes").begin_array();
      for (DType t : op->dtypes()) j.value(dtype_name(t));
      j.end_array().end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  for (const Op* op : all_ops()) {
    std::printf("%s: %s\n", std::string(op->name()).c_str(), std::string(op->summary()).c_str());
    std::printf("  problem:");
    for (const DimSpec& d : op->dims()) {
      if (d.enumerated()) {
        std::string c;
        for (const std::string& s : d.choices) c += (c.empty() ? "" : "|") + s;
        std::printf(" %s=%s", d.name.c_str(), c.c_str());
      } else {
        std::printf(" %s=%lld..%lld", d.name.c_str(), static_cast<long long>(d.min),
                    static_cast<long long>(d.max));
      }
    }
    std::printf("   (default %s)\n", op->problem_key(op->default_problem()).c_str());
    std::printf("  dtypes:");
    for (DType t : op->dtypes()) std::printf(" %s", dtype_name(t));
    std::printf("\n  tunables:\n");
    for (const Tunable& t : op->tunables()) {
      std::string v;
      for (std::int64_t x : t.values) v += (v.empty() ? "" : ", ") + std::to_string(x);
      std::printf("    %-8s {%s}  %s\n", t.name.c_str(), v.c_str(), t.help.c_str());
    }
  }
  return 0;
}

int cmd_space(const Args& args) {
  po::options_description desc("space options");
  desc.add_options()
      ("op", po::value<std::string>()->required(), "op name (see ktune ops)")
      ("shape", po::value<std::string>()->default_value(""), "problem, e.g. m=16384,n=4096 (default: the op's)")
      ("dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp16")
      ("arch", po::value<std::string>(), "target without a GPU: sm_90a or sm_80 (default: this GPU, else sm_90a)")
      ("compile", "compile every valid point with NVRTC and report registers, shared memory, spills")
      ("jobs", po::value<int>()->default_value(0), "compile threads (0: number of cores)")
      ("list", "list every point with its verdict")
      ("json", "print JSON")
      ("db", po::value<std::string>(), "database (unused)");
  po::variables_map vm;
  if (!parse_options("space", "--op OP [--shape S] [--dtype T] [--arch A] [--compile]", desc, args, vm))
    return 0;
  const Op& op = get_op(vm["op"].as<std::string>());
  DType dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(op, dtype);
  std::string shape = vm["shape"].as<std::string>();
  Problem problem = shape.empty() ? op.default_problem() : op.parse_problem(shape);
  DeviceInfo device;
  std::string device_note;
  if (vm.count("arch")) {
    std::string arch = vm["arch"].as<std::string>();
    std::optional<DeviceInfo> d = device_for_arch(arch);
    if (!d) throw InvalidArgument("unknown arch \"" + arch + "\" (allowed: sm_90a, sm_80)");
    device = *d;
  } else if (Driver::available() && device_count() > 0) {
    device = query_device(0);
  } else {
    device = *device_for_arch("sm_90a");
    device_note = " (no GPU here: using sm_90a limits; --arch chooses another)";
  }
  Space space(op, problem, dtype, device);
  const std::string arch = device.arch();

  struct Row {
    std::string params;
    std::string verdict;
    KernelResources res;
    std::string error;
  };
  std::vector<Row> compiled;
  std::size_t failures = 0;
  if (vm.count("compile")) {
    std::vector<CompileJob> jobs;
    std::vector<std::pair<std::size_t, std::size_t>> owner;  // (point, kernel)
    std::vector<Params> valid = space.valid_points();
    for (std::size_t i = 0; i < valid.size(); ++i) {
      std::vector<KernelSource> ks = op.kernels(valid[i], problem, dtype);
      for (std::size_t k = 0; k < ks.size(); ++k) {
        jobs.push_back({ks[k], arch, {}});
        owner.push_back({i, k});
      }
    }
    Compiler compiler(Compiler::default_cache_dir());
    std::size_t finished = 0;
    const bool tty = isatty(fileno(stderr));
    std::vector<CompileOutcome> out = compile_parallel(compiler, jobs, vm["jobs"].as<int>(), [&](std::size_t) {
      ++finished;
      if (tty) std::fprintf(stderr, "\rcompiling %zu/%zu", finished, jobs.size());
    });
    if (tty) std::fprintf(stderr, "\n");
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      Row r;
      r.params = op.params_key(valid[owner[j].first]) +
                 (owner[j].second ? " #" + std::to_string(owner[j].second) : "");
      if (out[j].kernel) {
        r.res = out[j].kernel->resources;
        r.verdict = "ok";
      } else {
        r.verdict = "compile_error";
        r.error = out[j].error;
        ++failures;
      }
      compiled.push_back(std::move(r));
    }
  }

  if (vm.count("json")) {
    Json j;
    j.begin_object().field("op", std::string(op.name())).field("problem", op.problem_key(problem));
    j.field("dtype", dtype_name(dtype)).field("arch", arch);
    j.field("points", static_cast<long long>(space.points().size()));
    j.field("valid", static_cast<long long>(space.valid_count()));
    j.key("invalid_reasons").begin_object();
    for (const auto& [reason, n] : space.invalid_reasons()) j.field(reason, static_cast<long long>(n));
    j.end_object();
    if (vm.count("list")) {
      j.key("list").begin_array();
      for (const SpacePoint& p : space.points()) {
        j.begin_object().field("params", op.params_key(p.params));
        if (p.invalid) j.field("invalid", *p.invalid);
        j.end_object();
      }
      j.end_array();
    }
    if (vm.count("compile")) {
      j.key("compiled").begin_array();
      for (const Row& r : compiled) {
        j.begin_object().field("params", r.params).field("status", r.verdict);
        j.field("registers", r.res.registers).field("shared_bytes", r.res.shared_bytes);
        j.field("spill_bytes", r.res.spill_stores + r.res.spill_loads);
        if (!r.error.empty()) j.field("error", r.error);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return failures ? 1 : 0;
  }
  std::printf("%s %s %s on %s%s\n", std::string(op.name()).c_str(), dtype_name(dtype),
              op.problem_key(problem).c_str(), device.name.c_str(), device_note.c_str());
  std::printf("%zu points: %zu valid, %zu invalid\n", space.points().size(), space.valid_count(),
              space.points().size() - space.valid_count());
  for (const auto& [reason, n] : space.invalid_reasons()) std::printf("  %4zu invalid: %s\n", n, reason.c_str());
  if (vm.count("list"))
    for (const SpacePoint& p : space.points())
      std::printf("  %s  %s\n", op.params_key(p.params).c_str(), p.invalid ? p.invalid->c_str() : "valid");
  if (vm.count("compile")) {
    std::vector<std::vector<std::string>> rows = {{"params", "status", "regs", "smem", "spill"}};
    for (const Row& r : compiled)
      rows.push_back({r.params, r.verdict, std::to_string(r.res.registers),
                      std::to_string(r.res.shared_bytes),
                      std::to_string(r.res.spill_stores + r.res.spill_loads)});
    std::printf("\ncompiled for %s:\n%s", arch.c_str(), table(rows).c_str());
    for (const Row& r : compiled)
      if (!r.error.empty()) std::printf("\n%s: %s\n", r.params.c_str(), r.error.c_str());
    std::printf("%zu compiled, %zu failed\n", compiled.size() - failures, failures);
  }
  return failures ? 1 : 0;
}

int cmd_best(const Args& args) {
  po::options_description desc("best options");
  desc.add_options()
      ("op", po::value<std::string>()->required(), "op name")
      ("shape", po::value<std::string>()->default_value(""), "problem (default: the op's)")
      ("dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp16")
      ("causal", "causal masking (ops with a causal dimension)")
      ("db", po::value<std::string>(), "user database (default: $KTUNE_DB or the data directory)")
      ("no-shipped", "ignore the databases shipped with ktune")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("best", "--op OP [--shape S] [--dtype T] [--db PATH]", desc, args, vm)) return 0;
  const Op& op = get_op(vm["op"].as<std::string>());
  DType dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(op, dtype);
  std::string shape = with_causal(op, vm["shape"].as<std::string>(), vm.count("causal") > 0);
  Problem problem = shape.empty() ? op.default_problem() : op.parse_problem(shape);
  RuntimeOptions ro;
  ro.db_path = db_option(vm).string();
  ro.use_shipped_databases = !vm.count("no-shipped");
  Runtime runtime(ro);
  MatchInfo m = runtime.query(op.name(), op.problem_key(problem), dtype);
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("op", m.op).field("problem", m.problem).field("dtype", dtype_name(dtype));
    j.field("match", match_kind_name(m.kind)).field("params", m.params);
    j.field("tuned_problem", m.tuned_problem).field("tuned_device", m.tuned_device);
    j.field("database", m.database).field("tuned_us", m.tuned_us).end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("%s %s %s: %s\n", m.op.c_str(), dtype_name(dtype), m.problem.c_str(), m.params.c_str());
  std::printf("  match: %s", match_kind_name(m.kind));
  if (m.kind != Match::default_config)
    std::printf(" (tuned on %s, %s, %.2f us, from %s)", m.tuned_problem.c_str(),
                m.tuned_device.c_str(), m.tuned_us, m.database.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace ktune::cli
