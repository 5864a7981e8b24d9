#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <type_traits>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "db/store.hpp"
#include "search/space.hpp"
#include "tuner/compile_child.hpp"

#include <unistd.h>

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"devices", "print this machine's CUDA devices and their fingerprints", cmd_devices},
      {"ops", "list the ops with their tunables and problem dimensions", cmd_ops},
      {"space", "show an op's search space for a problem (--compile: compile every point)", cmd_space},
      {"sweep", "tune an op for a problem on this GPU and store every trial", cmd_sweep},
      {"best", "show what the runtime would dispatch for a problem, and how it matched", cmd_best},
      {"db", "inspect the tuning database: list | show | export | check", cmd_db},
      {"replay", "score the search strategies on recorded exhaustive sweeps (no GPU)", cmd_replay},
  };
  return table;
}

namespace {

// A token no option took: say which, and where it belongs when it looks like a problem shape.
[[noreturn]] void stray_argument(const std::string& command, const po::options_description& desc,
                                 const std::string& token) {
  std::string hint = "see ktune " + command + " --help";
  const bool shape_like =
      token.find('=') != std::string::npos ||
      (!token.empty() && std::isdigit(static_cast<unsigned char>(token[0])) &&
       token.find('x') != std::string::npos);
  if (shape_like && desc.find_nothrow("shape", false))
    hint = "a problem is given with --shape, e.g. --shape " + ktune::quoted(token);
  throw UsageError{"unexpected argument " + ktune::quoted(token) + " (" + hint + ")"};
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.15g", v);
  return b;
}
std::string number_text(long long v) { return std::to_string(v); }

// The one conversion and check behind every numeric option: the whole text is the number (no
// "20s", no leading blank), finite, within [min, max]; one message style for all of them.
template <class T>
T numeric_option(const po::variables_map& vm, const std::string& name, T min, T max) {
  const std::string text = vm[name].as<std::string>();
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  bool ok = !text.empty() && ec == std::errc() && ptr == end && v >= min && v <= max;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(v);
  if (!ok)
    throw InvalidArgument("--" + name + " " + ktune::quoted(text) + " is not allowed: expected " +
                          (std::is_floating_point_v<T> ? "a number" : "an integer") + " from " +
                          number_text(min) + " to " + number_text(max));
  return v;
}

}  // namespace

bool parse_options(const std::string& command, const std::string& synopsis,
                   po::options_description& desc, const Args& args, po::variables_map& vm,
                   po::positional_options_description* positional) {
  desc.add_options()("help,h", "show this help");
  po::command_line_parser parser(args);
  // No guessing: --d must not quietly mean --db (or --device, once a command has both).
  parser.options(desc).style(po::command_line_style::default_style &
                             ~po::command_line_style::allow_guessing);
  if (positional) parser.positional(*positional);
  po::parsed_options parsed = parser.run();
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << "usage: ktune " << command << " " << synopsis << "\n\n" << desc << "\n";
    return false;
  }
  // Without this, `ktune space --op softmax m=64,n=64` answers for the default problem.
  for (const po::option& o : parsed.options)
    if (o.position_key != -1 && o.string_key.empty())
      stray_argument(command, desc, o.value.empty() ? std::string() : o.value.front());
  po::notify(vm);
  return true;
}

double number_option(const po::variables_map& vm, const std::string& name, double min, double max) {
  return numeric_option(vm, name, min, max);
}

long long integer_option(const po::variables_map& vm, const std::string& name, long long min,
                         long long max) {
  return numeric_option(vm, name, min, max);
}

std::vector<long long> integer_list_option(const po::variables_map& vm, const std::string& name,
                                           long long min, long long max) {
  const std::string text = vm[name].as<std::string>();
  std::vector<long long> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    long long v = 0;
    const char* end = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(item.data(), end, v);
    if (item.empty() || ec != std::errc() || ptr != end || v < min || v > max)
      throw InvalidArgument("--" + name + " " + ktune::quoted(text) + " is not allowed: " +
                            ktune::quoted(item) + " is not an integer from " + number_text(min) +
                            " to " + number_text(max) + " (a comma-separated list)");
    out.push_back(v);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

const Op& op_option(const std::string& text) {
  if (const Op* op = find_op(text)) return *op;
  std::string known;
  for (const Op* op : all_ops()) known += (known.empty() ? "" : ", ") + std::string(op->name());
  throw InvalidArgument("unknown op " + ktune::quoted(text) + " (known ops: " + known + ")");
}

DType dtype_option(const std::string& text) {
  std::optional<DType> t = parse_dtype(text);
  if (!t)
    throw InvalidArgument("unsupported dtype " + ktune::quoted(text) +
                          " (allowed: bf16, fp16, e4m3)");
  return *t;
}

DeviceInfo arch_option(const std::string& text) {
  std::optional<DeviceInfo> d = device_for_arch(text);
  if (!d) throw InvalidArgument("unknown arch " + ktune::quoted(text) + " (allowed: sm_90a, sm_80)");
  return *d;
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

DbLocation db_option(const po::variables_map& vm) {
  if (vm.count("db")) {
    const std::string path = vm["db"].as<std::string>();
    if (path.empty())
      throw InvalidArgument("--db \"\": the database path is empty (name a file, or leave --db out "
                            "for $KTUNE_DB or the data directory)");
    return {path, "--db", false};
  }
  return default_db_location();
}

bool db_exists(const DbLocation& db) {
  std::error_code ec;
  const fs::file_status st = fs::status(db.path, ec);
  if (st.type() == fs::file_type::not_found) return false;
  if (ec)
    throw DatabaseError("cannot examine the database " + db.describe() + ": " + ec.message());
  return true;
}

void json_device(Json& j, const DeviceInfo& d) {
  j.begin_object();
  j.field("name", d.name).field("key", d.key()).field("arch", d.arch());
  j.key("compute_capability").value(std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  j.field("sm_count", d.sm_count).field("memory_bytes", static_cast<long long>(d.memory_bytes));
  j.field("l2_bytes", static_cast<long long>(d.l2_bytes));
  j.field("memory_bandwidth", static_cast<long long>(d.memory_bandwidth));  // bytes/s, 0 unknown
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
    std::printf("no CUDA device found: %s\n", shown(why, 1000).c_str());
    std::printf("NVRTC %d.%d is available: `ktune space --compile` works without a GPU.\n",
                Compiler::nvrtc_version() / 1000, Compiler::nvrtc_version() % 1000 / 10);
    return 0;
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    std::printf("device %zu: %s\n", i, shown(d.name).c_str());
    std::printf("  compute capability %d.%d (target %s), %d SMs\n", d.cc_major, d.cc_minor,
                d.arch().c_str(), d.sm_count);
    std::printf("  memory %.1f GiB, L2 %.1f MiB, shared memory per block (opt-in) %d KiB\n",
                static_cast<double>(d.memory_bytes) / (1 << 30),
                static_cast<double>(d.l2_bytes) / (1 << 20), d.smem_optin_per_block / 1024);
    if (d.memory_bandwidth > 0)
      std::printf("  peak memory bandwidth %.2f TB/s (%.1f GB/s per SM)\n",
                  static_cast<double>(d.memory_bandwidth) / 1e12,
                  static_cast<double>(d.memory_bandwidth) / 1e9 / d.sm_count);
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
        j.field("lookup", d.matched_exactly() ? "exact" : "nearest");
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
        std::printf(" %s=%lld..%lld%s", d.name.c_str(), static_cast<long long>(d.min),
                    static_cast<long long>(d.max), d.exact ? " (exact)" : "");
      }
    }
    std::printf("   (default %s)\n", op->problem_key(op->default_problem()).c_str());
    std::string same;
    for (const DimSpec& d : op->dims())
      if (d.matched_exactly()) same += (same.empty() ? "" : ", ") + d.name;
    std::printf("  lookup: the nearest tuned problem%s%s, up to a factor %.3g away (log distance)",
                same.empty() ? "" : " with the same ", same.c_str(), std::exp(op->fallback_radius()));
    for (const DimSpec& d : op->dims())
      for (std::int64_t b : d.regimes)
        std::printf(", never across %s=%lld|%lld", d.name.c_str(), static_cast<long long>(b),
                    static_cast<long long>(b + 1));
    std::printf("; else the built-in default\n");
    std::printf("  sweep: %s strategy", std::string(op->default_strategy()).c_str());
    if (!op->bucket_dim().empty()) {
      std::string list;
      for (std::int64_t v : op->default_buckets()) list += (list.empty() ? "" : ",") + std::to_string(v);
      std::printf("; one problem per %s in {%s} unless --shape sets it (--tokens to choose)",
                  std::string(op->bucket_dim()).c_str(), list.c_str());
    }
    if (!op->search_stages().empty()) {
      std::string groups;
      const SearchStages st = op->search_stages();
      for (const auto& g : st.groups) {
        std::string names;
        for (const std::string& n : g) names += (names.empty() ? "" : " ") + n;
        groups += (groups.empty() ? "" : " | ") + names;
      }
      std::string outer;
      for (const std::string& n : st.outer) outer += (outer.empty() ? "" : " ") + n;
      std::printf("\n  staged search: for each %s, one group at a time: %s", outer.c_str(), groups.c_str());
    }
    std::printf("\n  dtypes:");
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

namespace {

/// The device whose limits judge the points: --arch, else GPU 0, else sm_90a (`note` says so).
DeviceInfo space_device(const po::variables_map& vm, std::string& note) {
  if (vm.count("arch")) return arch_option(vm["arch"].as<std::string>());
  if (Driver::available() && device_count() > 0) return query_device(0);
  note = " (no GPU here: using sm_90a limits; --arch chooses another)";
  return *device_for_arch("sm_90a");
}

/// A space too large to list (MoE's), described by a fixed-seed sample of its points.
struct SpaceSample {
  std::vector<SpacePoint> points;
  std::size_t valid = 0;
  std::map<std::string, std::size_t> reasons;
};

SpaceSample sample_of(const Space& space) {
  constexpr std::size_t kSample = 100000;
  SpaceSample s;
  if (space.enumerated()) return s;
  s.points = space.sample(kSample, 1);
  for (const SpacePoint& p : s.points) {
    if (p.invalid) ++s.reasons[*p.invalid];
    else ++s.valid;
  }
  return s;
}

/// One compiled kernel of a valid point (" #k" after the params for a point's k-th kernel).
struct CompiledKernel {
  std::string params;
  std::string verdict;
  KernelResources res;
  std::string error;
};

/// --compile: every valid point's kernels (a sampled space: its first valid points), in parallel.
std::vector<CompiledKernel> compile_points(const Space& space, const SpaceSample& sample,
                                           const std::string& arch, int jobs_option,
                                           double compile_timeout) {
  constexpr std::size_t kSampleCompiles = 64;
  const Op& op = space.op();
  std::vector<CompileJob> jobs;
  std::vector<std::pair<std::size_t, std::size_t>> owner;  // (point, kernel)
  std::vector<Params> valid = space.valid_points();
  for (const SpacePoint& p : sample.points)
    if (!p.invalid && valid.size() < kSampleCompiles &&
        std::find(valid.begin(), valid.end(), p.params) == valid.end())
      valid.push_back(p.params);
  for (std::size_t i = 0; i < valid.size(); ++i) {
    std::vector<KernelSource> ks = op.kernels(valid[i], space.problem(), space.dtype());
    for (std::size_t k = 0; k < ks.size(); ++k) {
      jobs.push_back({ks[k], arch, {}});
      owner.push_back({i, k});
    }
  }
  // Each compile in a child process past the time limit is stopped (compile_timeout).
  Compiler compiler(Compiler::default_cache_dir(),
                    compile_timeout > 0 ? child_builder(default_compile_command(), compile_timeout)
                                        : Compiler::Builder());
  if (!compiler.cache_disabled_reason().empty())
    std::fprintf(stderr, "ktune space: warning: %s; kernels compile in memory\n",
                 shown(compiler.cache_disabled_reason(), 500).c_str());
  std::size_t finished = 0;
  const bool tty = isatty(fileno(stderr));
  std::vector<CompileOutcome> out = compile_parallel(compiler, jobs, jobs_option, [&](std::size_t) {
    ++finished;
    if (tty) std::fprintf(stderr, "\rcompiling %zu/%zu", finished, jobs.size());
  });
  if (tty) std::fprintf(stderr, "\n");
  std::vector<CompiledKernel> compiled;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    CompiledKernel r;
    r.params = op.params_key(valid[owner[j].first]) +
               (owner[j].second ? " #" + std::to_string(owner[j].second) : "");
    if (out[j].kernel) {
      r.res = out[j].kernel->resources;
      r.verdict = "ok";
    } else {
      r.verdict = out[j].timed_out ? "compile_timeout" : "compile_error";
      r.error = out[j].error;
    }
    compiled.push_back(std::move(r));
  }
  return compiled;
}

/// What `ktune space` shows: the space, its sample, the listing and the compiles asked for.
struct SpaceReport {
  const Space& space;
  const SpaceSample& sample;
  bool list = false;
  bool compile = false;
  const std::vector<CompiledKernel>& compiled;
  std::size_t failures = 0;
};

void print_space_json(const SpaceReport& r) {
  const Space& space = r.space;
  const Op& op = space.op();
  Json j;
  j.begin_object().field("op", std::string(op.name())).field("problem", op.problem_key(space.problem()));
  j.field("dtype", dtype_name(space.dtype())).field("arch", space.device().arch());
  j.field("points", static_cast<long long>(space.size()));
  if (space.enumerated()) {
    j.field("valid", static_cast<long long>(space.valid_count()));
    j.key("invalid_reasons").begin_object();
    for (const auto& [reason, n] : space.invalid_reasons()) j.field(reason, static_cast<long long>(n));
    j.end_object();
  } else {
    j.key("sample").begin_object().field("points", static_cast<long long>(r.sample.points.size()));
    j.field("valid", static_cast<long long>(r.sample.valid));
    j.key("invalid_reasons").begin_object();
    for (const auto& [reason, n] : r.sample.reasons) j.field(reason, static_cast<long long>(n));
    j.end_object().end_object();
  }
  if (r.list) {
    j.key("list").begin_array();
    for (const SpacePoint& p : space.points()) {
      j.begin_object().field("params", op.params_key(p.params));
      if (p.invalid) j.field("invalid", *p.invalid);
      j.end_object();
    }
    j.end_array();
  }
  if (r.compile) {
    j.key("compiled").begin_array();
    for (const CompiledKernel& c : r.compiled) {
      j.begin_object().field("params", c.params).field("status", c.verdict);
      j.field("registers", c.res.registers).field("shared_bytes", c.res.shared_bytes);
      j.field("spill_bytes", c.res.spill_stores + c.res.spill_loads);
      if (!c.error.empty()) j.field("error", c.error);
      j.end_object();
    }
    j.end_array();
  }
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_space_text(const SpaceReport& r, const std::string& device_note) {
  const Space& space = r.space;
  const Op& op = space.op();
  std::printf("%s %s %s on %s%s\n", std::string(op.name()).c_str(), dtype_name(space.dtype()),
              op.problem_key(space.problem()).c_str(), shown(space.device().name).c_str(),
              device_note.c_str());
  if (space.enumerated()) {
    std::printf("%zu points: %zu valid, %zu invalid\n", space.points().size(), space.valid_count(),
                space.points().size() - space.valid_count());
    for (const auto& [reason, n] : space.invalid_reasons())
      std::printf("  %4zu invalid: %s\n", n, reason.c_str());
  } else {
    const SpaceSample& s = r.sample;
    std::printf("%zu points, too many to list; a fixed-seed sample of %zu: %zu valid, %zu invalid\n",
                space.size(), s.points.size(), s.valid, s.points.size() - s.valid);
    for (const auto& [reason, n] : s.reasons) std::printf("  %6zu invalid: %s\n", n, reason.c_str());
    // A uniform sample of a product of lists lands mostly on combinations that contradict each
    // other; that says nothing of how many configurations run.
    if (!op.search_stages().empty())
      std::printf("  (most of the product is combinations one tunable rules out for another; "
                  "`ktune sweep` searches the valid points group by group, see `ktune ops`)\n");
  }
  if (r.list)
    for (const SpacePoint& p : space.points())
      std::printf("  %s  %s\n", op.params_key(p.params).c_str(), p.invalid ? p.invalid->c_str() : "valid");
  if (r.compile) {
    std::vector<std::vector<std::string>> rows = {{"params", "status", "regs", "smem", "spill"}};
    for (const CompiledKernel& c : r.compiled)
      rows.push_back({c.params, c.verdict, std::to_string(c.res.registers),
                      std::to_string(c.res.shared_bytes),
                      std::to_string(c.res.spill_stores + c.res.spill_loads)});
    std::printf("\ncompiled for %s:\n%s", space.device().arch().c_str(), table(rows).c_str());
    for (const CompiledKernel& c : r.compiled)
      if (!c.error.empty()) std::printf("\n%s: %s\n", c.params.c_str(), c.error.c_str());
    std::printf("%zu compiled, %zu failed\n", r.compiled.size() - r.failures, r.failures);
  }
}

}  // namespace

int cmd_space(const Args& args) {
  po::options_description desc("space options");
  desc.add_options()
      ("op", po::value<std::string>()->required(), "op name (see ktune ops)")
      ("shape", po::value<std::string>()->default_value(""), "problem, e.g. m=16384,n=4096 (default: the op's)")
      ("dtype", po::value<std::string>()->default_value("bf16"),
       "bf16, fp16, or e4m3 (flash_attention on sm_90a; moe FP8 weights, sm_89+)")
      ("arch", po::value<std::string>(), "target without a GPU: sm_90a or sm_80 (default: this GPU, else sm_90a)")
      ("compile", "compile every valid point with NVRTC and report registers, shared memory, spills")
      ("jobs", po::value<std::string>()->default_value("0"), "compile threads, 0 to 1024 (0: number of cores)")
      ("compile-timeout", po::value<std::string>()->default_value("120"),
       "seconds one kernel may take to compile, 0 to 3600 (0: no limit)")
      ("list", "list every point with its verdict")
      ("json", "print JSON")
      ("db", po::value<std::string>(), "database (unused)");
  po::variables_map vm;
  if (!parse_options("space", "--op OP [--shape S] [--dtype T] [--arch A] [--compile]", desc, args, vm))
    return 0;
  const Op& op = op_option(vm["op"].as<std::string>());
  DType dtype = dtype_option(vm["dtype"].as<std::string>());
  check_dtype(op, dtype);
  std::string shape = vm["shape"].as<std::string>();
  Problem problem = shape.empty() ? op.default_problem() : op.parse_problem(shape);
  const int jobs_option = static_cast<int>(integer_option(vm, "jobs", 0, 1024));
  const double compile_timeout = number_option(vm, "compile-timeout", 0, 3600);
  std::string device_note;
  const DeviceInfo device = space_device(vm, device_note);
  Space space(op, problem, dtype, device);
  if (!space.enumerated() && vm.count("list"))
    throw InvalidArgument("the " + std::string(op.name()) + " space has " +
                          std::to_string(space.size()) + " points, too many to list (at most " +
                          std::to_string(Space::kEnumerateLimit) + "); sweeps walk it with the "
                          "staged strategy");
  const SpaceSample sample = sample_of(space);
  std::vector<CompiledKernel> compiled;
  if (vm.count("compile"))
    compiled = compile_points(space, sample, device.arch(), jobs_option, compile_timeout);
  SpaceReport report{space, sample, vm.count("list") > 0, vm.count("compile") > 0, compiled};
  for (const CompiledKernel& c : compiled) report.failures += c.verdict == "ok" ? 0 : 1;
  if (vm.count("json"))
    print_space_json(report);
  else
    print_space_text(report, device_note);
  return report.failures ? 1 : 0;
}

}  // namespace ktune::cli
