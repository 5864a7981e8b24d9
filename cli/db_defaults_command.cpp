// `ktune db defaults`: the best rows whose problem has no trial of the op's current default
// configuration, as a plan to re-time. A lookup lets a tuned row serve a neighbouring problem
// only where the row beat the default on its own problem by kNeighbourMinGain, read from that
// trial; a row without it serves its neighbours unjudged. That happens to every row whose
// default changed after its sweep (a newer ktune with better defaults), until
// `ktune sweep --plan FILE --budget 1 --no-warm-start` (the default is measured first whatever
// the budget) adds the trial.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/default_trials.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "templates/op.hpp"

namespace po = boost::program_options;

namespace ktune::cli {
namespace {

struct Unjudged {
  const DeviceInfo* device;
  BestRecord row;
  std::string default_key;
};

}  // namespace

int cmd_db_defaults(const Args& args) {
  po::options_description desc("db defaults options");
  desc.add_options()("op", po::value<std::string>()->default_value(""), "only this op")
      ("device", po::value<std::string>()->default_value(""),
       "only the rows of this device (its name or key, as `ktune db list` shows them)")
      ("db", po::value<std::string>(), "database")
      ("check", "exit status 1 when a row is listed")("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("db defaults", "[--op OP] [--device NAME] [--db PATH] [--check] [--json]",
                     desc, args, vm))
    return 0;
  const std::string op_filter = vm["op"].as<std::string>();
  if (!op_filter.empty()) op_option(op_filter);
  const std::string device_filter = vm["device"].as<std::string>();
  const DbLocation db = db_option(vm);
  if (!db_exists(db)) throw InvalidArgument("database " + db.describe() + " does not exist");
  const Store store = Store::open(db.path, Store::Mode::read_only);

  const Rows<DeviceInfo> devices = store.devices();
  const auto wanted = [&](const DeviceInfo& d) {
    return device_filter.empty() || d.name == device_filter || d.key() == device_filter;
  };
  std::map<std::string, const DeviceInfo*> by_key;
  bool device_known = device_filter.empty();
  for (const DeviceInfo& d : devices.rows) {
    by_key.emplace(d.key(), &d);
    device_known = device_known || wanted(d);
  }
  if (!device_known) {
    std::string names;
    for (const DeviceInfo& d : devices.rows)
      names += (names.empty() ? "" : ", ") + ktune::quoted(d.name);
    throw InvalidArgument("--device " + ktune::quoted(device_filter) + " is not a device of " +
                          db.describe() + " (its devices: " + (names.empty() ? "none" : names) +
                          ")");
  }
  std::size_t current = 0, stale = 0, skipped = devices.skipped.size();
  std::vector<Unjudged> out;
  const Rows<BestRecord> bests = store.all_bests(op_filter);
  skipped += bests.skipped.size();
  for (const BestRecord& b : bests.rows) {
    const auto device = by_key.find(b.device_key);
    // No device row: lookups cannot place it either.
    if (device == by_key.end() || !wanted(*device->second)) continue;
    const Op* op = find_op(b.op);
    if (!op) continue;
    if (b.template_hash != op->template_hash()) {
      ++stale;  // tuned for other kernel code: lookups never use it; re-tune it instead
      continue;
    }
    ++current;
    const std::optional<std::string> def = current_default_key(b, *device->second);
    if (!def || *def == b.params_key) continue;
    const Rows<TrialRecord> trials =
        store.trials(b.device_key, b.op, b.dtype, b.problem_key, b.template_hash);
    skipped += trials.skipped.size();
    if (!newest_ok(trials.rows, *def)) out.push_back({device->second, b, *def});
  }

  std::stable_sort(out.begin(), out.end(), [](const Unjudged& a, const Unjudged& b) {
    return a.row.device_key < b.row.device_key;
  });
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("database", db.path.string());
    j.field("current_rows", static_cast<long long>(current))
        .field("stale_rows", static_cast<long long>(stale))
        .field("rows_skipped", static_cast<long long>(skipped));
    j.key("rows").begin_array();
    for (const Unjudged& u : out)
      j.begin_object()
          .field("device_key", u.row.device_key)
          .field("device_name", u.device->name)
          .field("op", u.row.op)
          .field("dtype", dtype_name(u.row.dtype))
          .field("problem_key", u.row.problem_key)
          .field("best_params", u.row.params_key)
          .field("default_params", u.default_key)
          .end_object();
    j.end_array().end_object();
    std::printf("%s\n", j.str().c_str());
  } else {
    // A plan file (`#` lines are comments): one line per problem, grouped by device.
    std::printf("# %zu of the %zu current best rows of %s have no trial of their problem's "
                "current default configuration:\n# lookups let them serve neighbouring problems "
                "unjudged. Re-time them on the GPU named above their lines:\n#   ktune sweep "
                "--plan THIS_FILE --budget 1 --no-warm-start --db %s\n",
                out.size(), current, shown(db.path.string()).c_str(),
                shown(db.path.string()).c_str());
    if (stale > 0)
      std::printf("# (%zu stale rows, tuned for other kernel code, are not listed: lookups never "
                  "use them)\n",
                  stale);
    std::string last_device;
    for (const Unjudged& u : out) {
      if (u.row.device_key != last_device) {
        last_device = u.row.device_key;
        std::printf("# device: %s (%s)\n", shown(u.device->name).c_str(),
                    shown(u.row.device_key).c_str());
      }
      // Keys this ktune parsed (current_default_key): plain text, printed as they are.
      std::printf("%s %s %s\n", u.row.op.c_str(), dtype_name(u.row.dtype),
                  u.row.problem_key.c_str());
    }
  }
  if (skipped > 0)
    std::fprintf(stderr, "ktune db defaults: %zu unreadable rows left out\n", skipped);
  return vm.count("check") && !out.empty() ? 1 : 0;
}

}  // namespace ktune::cli
