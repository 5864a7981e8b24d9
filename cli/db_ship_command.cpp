// `ktune db ship IN OUT`: the database that ships with ktune, from a sweep's database: the
// devices, the best rows, and of the trials only those a lookup reads (each best row's own, and
// the op's current default configuration's on the same problem, which decides whether a row may
// serve its neighbours: kNeighbourMinGain in runtime/dispatch/lookup.hpp).
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/default_trials.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/row_checks.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "templates/op.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {
namespace {

struct ShipCounts {
  std::size_t devices = 0, bests = 0, best_trials = 0, default_trials = 0, skipped = 0;
  std::size_t without_default = 0;  // current rows with no trial of their default: unjudged
  std::size_t invalid = 0;          // best rows no lookup can use, left out
  std::string first_invalid;        // the first of them and why
};

/// Copies `t` into `out` as a trial of no sweep; returns its new id.
std::int64_t copy_trial(Store& out, TrialRecord t) {
  t.id = 0;
  t.sweep_id = 0;
  return out.record_trial(t);
}

ShipCounts ship(const Store& in, Store& out) {
  ShipCounts n;
  Rows<DeviceInfo> devices = in.devices();
  n.skipped += devices.skipped.size();
  std::map<std::string, DeviceInfo> by_key;
  for (const DeviceInfo& d : devices.rows) {
    out.upsert_device(d);
    if (const double bw = in.copy_bandwidth(d.key()); bw > 0) out.set_copy_bandwidth(d.key(), bw);
    by_key.emplace(d.key(), d);
    ++n.devices;
  }
  Rows<BestRecord> bests = in.all_bests();
  n.skipped += bests.skipped.size();
  for (BestRecord b : bests.rows) {
    Rows<TrialRecord> trials =
        in.trials(b.device_key, b.op, b.dtype, b.problem_key, b.template_hash);
    n.skipped += trials.skipped.size();
    // The row's own trial (by id; else its configuration's newest ok one).
    const TrialRecord* own = nullptr;
    for (const TrialRecord& t : trials.rows)
      if (t.id == b.trial_id) own = &t;
    // A row `ktune db check` reports is not shipped: no lookup could use it, or its timing is
    // another configuration's.
    if (std::optional<std::string> why = best_row_problem(b, own)) {
      if (n.first_invalid.empty()) n.first_invalid = b.op + " " + b.problem_key + ": " + *why;
      ++n.invalid;
      continue;
    }
    if (!own) own = newest_ok(trials.rows, b.params_key);
    // The default configuration of the row's problem on its device, as this ktune chooses it
    // (a row this ktune cannot read is shipped as it is; lookups skip it with its reason).
    const auto device = by_key.find(b.device_key);
    const std::optional<std::string> def =
        device != by_key.end() ? current_default_key(b, device->second) : std::nullopt;
    if (def && *def != b.params_key) {
      if (const TrialRecord* base = newest_ok(trials.rows, *def)) {
        copy_trial(out, *base);
        ++n.default_trials;
      } else if (const Op* op = find_op(b.op); op && b.template_hash == op->template_hash()) {
        ++n.without_default;
      }
    }
    b.trial_id = 0;
    if (own) {
      b.trial_id = copy_trial(out, *own);
      ++n.best_trials;
    }
    out.set_best(b);  // after the trials: the row as it was, whatever they did to it
    ++n.bests;
  }
  return n;
}

}  // namespace

int cmd_db_ship(const Args& args) {
  po::options_description desc("db ship options");
  desc.add_options()("databases", po::value<std::vector<std::string>>(), "IN then OUT (positional)")
      ("json", "print the summary as JSON");
  po::positional_options_description positional;
  positional.add("databases", -1);
  po::variables_map vm;
  if (!parse_options("db ship", "IN OUT [--json]", desc, args, vm, &positional)) return 0;
  const std::vector<std::string> all =
      vm.count("databases") ? vm["databases"].as<std::vector<std::string>>()
                            : std::vector<std::string>{};
  if (all.size() != 2)
    throw UsageError{"db ship takes two paths, IN (a sweep's database) and OUT (a new file); got " +
                     std::to_string(all.size())};
  const fs::path in_path = all[0], out_path = all[1];
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out_path, ec)))
    throw InvalidArgument("OUT " + ktune::quoted(out_path.string()) +
                          " exists: db ship writes a new file (remove it first)");
  if (!fs::exists(in_path, ec))
    throw InvalidArgument("IN " + ktune::quoted(in_path.string()) + " does not exist");
  const Store in = Store::open(in_path, Store::Mode::read_only);
  // Written beside OUT under a temporary name, renamed once complete: OUT is never half-written.
  fs::path tmp = out_path;
  tmp += ".ship-tmp";
  fs::remove(tmp, ec);
  ShipCounts n;
  try {
    Store out = Store::open(tmp, Store::Mode::read_write);
    n = ship(in, out);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, out_path);
  if (n.invalid > 0)
    std::fprintf(stderr,
                 "ktune db ship: warning: %zu best rows no lookup can use were left out (first: "
                 "%s; ktune db check lists them)\n",
                 n.invalid, shown(n.first_invalid, 300).c_str());
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("input", in_path.string()).field("output", out_path.string());
    j.field("devices", static_cast<long long>(n.devices)).field("best", static_cast<long long>(n.bests));
    j.field("best_trials", static_cast<long long>(n.best_trials))
        .field("default_trials", static_cast<long long>(n.default_trials))
        .field("rows_skipped", static_cast<long long>(n.skipped))
        .field("rows_without_default_trial", static_cast<long long>(n.without_default))
        .field("invalid_best_rows", static_cast<long long>(n.invalid))
        .end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("shipped %s as %s: %zu devices, %zu best configurations with %zu of their trials and "
              "%zu trials of the defaults on their problems%s\n",
              shown(in_path.string()).c_str(), shown(out_path.string()).c_str(), n.devices, n.bests,
              n.best_trials, n.default_trials,
              n.skipped ? (", " + std::to_string(n.skipped) + " unreadable rows left out").c_str() : "");
  if (n.without_default > 0)
    std::fprintf(stderr, "ktune db ship: warning: %zu best rows have no trial of their problem's current default "
                "configuration, so lookups let them serve neighbouring problems unjudged; "
                "`ktune db defaults --db %s` lists them as a plan to re-time\n",
                n.without_default, shown(in_path.string()).c_str());
  return 0;
}

}  // namespace ktune::cli
