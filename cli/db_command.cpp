#include <cstdio>
#include <fstream>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"

namespace po = boost::program_options;

namespace ktune::cli {
namespace {

Store open_existing(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw InvalidArgument("database " + path.string() + " does not exist (run ktune sweep first, or pass --db)");
  return Store::open(path, Store::Mode::read_only);
}

int db_list(const Args& args) {
  po::options_description desc("db list options");
  desc.add_options()("op", po::value<std::string>()->default_value(""), "only this op")
      ("db", po::value<std::string>(), "database")("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("db list", "[--op OP] [--db PATH] [--json]", desc, args, vm)) return 0;
  Store store = open_existing(db_option(vm));
  std::vector<BestRecord> rows = store.all_bests(vm["op"].as<std::string>());
  if (vm.count("json")) {
    Json j;
    j.begin_array();
    for (const BestRecord& b : rows) {
      j.begin_object().field("device", b.device_name).field("device_key", b.device_key).field("arch", b.arch);
      j.field("op", b.op).field("dtype", dtype_name(b.dtype)).field("problem", b.problem_key);
      j.field("params", b.params_key).field("median_us", b.median_us);
      j.field("template_hash", b.template_hash).field("updated_at", b.updated_at).end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> t = {{"device", "op", "dtype", "problem", "best", "us", "updated"}};
  for (const BestRecord& b : rows)
    t.push_back({b.device_name, b.op, dtype_name(b.dtype), b.problem_key, b.params_key,
                 fmt("%.2f", b.median_us), b.updated_at});
  std::printf("%s", table(t).c_str());
  std::printf("%zu best configurations in %s\n", rows.size(), store.path().string().c_str());
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
    throw InvalidArgument("unknown status \"" + status +
                          "\" (allowed: ok, invalid, compile_error, launch_error, timeout, wrong_result)");
  Store store = open_existing(db_option(vm));
  std::printf("devices:\n");
  for (const DeviceInfo& d : store.devices())
    std::printf("  %s (%s), copy bandwidth %.2f TB/s\n", d.name.c_str(), d.arch().c_str(),
                store.copy_bandwidth(d.key()) / 1e12);
  std::printf("sweeps:\n");
  for (const SweepRecord& s : store.sweeps())
    std::printf("  #%lld %s %s %s %s %s: %s\n", static_cast<long long>(s.id), s.started_at.c_str(),
                s.op.c_str(), dtype_name(s.dtype), s.problem_key.c_str(), s.strategy.c_str(),
                s.command_line.c_str());
  std::vector<std::vector<std::string>> t = {{"op", "dtype", "problem", "params", "status", "us", "regs", "detail"}};
  for (const TrialRecord& r : store.all_trials(vm["op"].as<std::string>())) {
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
      ("output,o", po::value<std::string>()->default_value("-"), "file (- for standard output)")
      ("db", po::value<std::string>(), "database");
  po::variables_map vm;
  if (!parse_options("db export", "[--format json|csv] [--op OP] [-o FILE] [--db PATH]", desc, args, vm))
    return 0;
  std::string format = vm["format"].as<std::string>();
  if (format != "json" && format != "csv")
    throw InvalidArgument("unknown export format \"" + format + "\" (allowed: json, csv)");
  Store store = open_existing(db_option(vm));
  std::vector<TrialRecord> trials = store.all_trials(vm["op"].as<std::string>());
  std::string text = format == "json" ? export_json(trials) : export_csv(trials);
  std::string out = vm["output"].as<std::string>();
  if (out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    std::ofstream f(out, std::ios::binary);
    if (!f) throw InvalidArgument("cannot write " + out);
    f << text;
  }
  return 0;
}

}  // namespace

int cmd_db(const Args& args) {
  static const std::vector<Command> sub = {
      {"list", "the best configuration of every (device, op, dtype, problem)", db_list},
      {"show", "devices, sweeps and every trial", db_show},
      {"export", "every trial as JSON or CSV", db_export},
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: ktune db <list|show|export> [options]\n");
    for (const Command& c : sub) std::printf("  %-7s %s\n", c.name, c.summary);
    return args.empty() ? 2 : 0;
  }
  for (const Command& c : sub)
    if (args[0] == c.name) return c.run(Args(args.begin() + 1, args.end()));
  throw UsageError{"unknown db command \"" + args[0] + "\" (allowed: list, show, export)"};
}

}  // namespace ktune::cli
