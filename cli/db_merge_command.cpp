// `ktune db merge` and `ktune db diff`: the commands over several databases at once.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/row_checks.hpp"
#include "db/merge.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ktune::cli {
namespace {

// The positional paths of a command, checked for count: `what` says what is expected.
std::vector<std::string> paths(const po::variables_map& vm, std::size_t min, std::size_t max,
                               const std::string& command, const std::string& what) {
  std::vector<std::string> got;
  if (vm.count("databases")) got = vm["databases"].as<std::vector<std::string>>();
  if (got.size() < min || got.size() > max)
    throw UsageError{command + " takes " + what + ", got " + std::to_string(got.size()) +
                     " path" + (got.size() == 1 ? "" : "s") + " (see ktune " + command +
                     " --help)"};
  for (const std::string& p : got)
    if (p.empty()) throw InvalidArgument(command + ": a database path is empty");
  return got;
}

void warn_skipped(const char* command, const std::string& file, std::size_t count,
                  const RowIssue& first) {
  std::fprintf(stderr,
               "ktune %s: warning: %zu rows of %s skipped (first: %s; ktune db check lists "
               "them)\n",
               command, count, ktune::quoted(file, 200).c_str(), shown(first.reason, 300).c_str());
}

Store open_input(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InvalidArgument("database " + ktune::quoted(path, 200) +
                          " does not exist (expected an existing ktune database)");
  return Store::open(path, Store::Mode::read_only);
}

std::string device_of(const BestRecord& b) {
  return b.device_name.empty() ? b.device_key : b.device_name;
}

void json_side(Json& j, const char* name, const std::optional<BestRecord>& b) {
  j.key(name);
  if (!b) {
    j.null();
    return;
  }
  j.begin_object().field("params", b->params_key).field("median_us", b->median_us);
  j.field("updated_at", b->updated_at).end_object();
}

}  // namespace

int cmd_db_merge(const Args& args) {
  po::options_description desc("db merge options");
  desc.add_options()("databases", po::value<std::vector<std::string>>(),
                     "OUT then the IN databases (positional)")("json", "print the summary as JSON");
  po::positional_options_description positional;
  positional.add("databases", -1);
  po::variables_map vm;
  if (!parse_options("db merge", "OUT IN... [--json]", desc, args, vm, &positional)) return 0;
  const std::vector<std::string> all =
      paths(vm, 2, static_cast<std::size_t>(-1), "db merge", "OUT and at least one IN");
  const fs::path out = all.front();
  const std::vector<fs::path> inputs(all.begin() + 1, all.end());
  // The rows `ktune db check` would report are skipped too: a merge copies none of them.
  const MergeReport r = merge_databases(out, inputs, lookup_checks());

  // Skipped rows per file, one warning line each.
  for (std::size_t i = 0; i < r.skipped.size();) {
    std::size_t j = i;
    while (j < r.skipped.size() && r.skipped[j].source == r.skipped[i].source) ++j;
    warn_skipped("db merge", r.skipped[i].source.string(), j - i, r.skipped[i].issue);
    i = j;
  }
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("output", out.string()).field("output_existed", r.output_existed);
    j.key("inputs").begin_array();
    for (const fs::path& in : inputs) j.value(in.string());
    j.end_array();
    j.field("devices", static_cast<long long>(r.devices))
        .field("sweeps", static_cast<long long>(r.sweeps))
        .field("trials", static_cast<long long>(r.trials))
        .field("best", static_cast<long long>(r.bests))
        .field("trials_added", static_cast<long long>(r.trials_added))
        .field("best_changed", static_cast<long long>(r.bests_changed))
        .field("rows_skipped", static_cast<long long>(r.skipped.size()))
        .end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("merged %zu database%s into %s%s: %zu devices, %zu sweeps, %zu trials (%zu new), "
              "%zu best configurations (%zu new or changed)\n",
              inputs.size(), inputs.size() == 1 ? "" : "s", shown(out.string()).c_str(),
              r.output_existed ? "" : " (created)", r.devices, r.sweeps, r.trials, r.trials_added,
              r.bests, r.bests_changed);
  return 0;
}

int cmd_db_diff(const Args& args) {
  po::options_description desc("db diff options");
  desc.add_options()("databases", po::value<std::vector<std::string>>(),
                     "A then B (positional)")("json", "print JSON");
  po::positional_options_description positional;
  positional.add("databases", -1);
  po::variables_map vm;
  if (!parse_options("db diff", "A B [--json]", desc, args, vm, &positional)) return 0;
  const std::vector<std::string> ab = paths(vm, 2, 2, "db diff", "two databases, A and B");
  Store a = open_input(ab[0]);
  Store b = open_input(ab[1]);
  const Rows<BestRecord> before = a.all_bests();
  const Rows<BestRecord> after = b.all_bests();
  if (!before.skipped.empty())
    warn_skipped("db diff", ab[0], before.skipped.size(), before.skipped.front());
  if (!after.skipped.empty())
    warn_skipped("db diff", ab[1], after.skipped.size(), after.skipped.front());
  const BestDiff d = diff_bests(before.rows, after.rows);

  const auto each = [&](const auto& f) {
    for (const auto& [kind, list] : {std::pair<const char*, const std::vector<BestChange>*>{
                                         "added", &d.added},
                                     {"removed", &d.removed},
                                     {"changed", &d.changed}})
      for (const BestChange& c : *list) f(kind, c);
  };
  if (vm.count("json")) {
    Json j;
    j.begin_object().field("a", ab[0]).field("b", ab[1]).key("changes").begin_array();
    each([&](const char* kind, const BestChange& c) {
      const BestRecord& k = c.after ? *c.after : *c.before;
      j.begin_object().field("change", kind).field("device", device_of(k));
      j.field("device_key", k.device_key).field("op", k.op).field("dtype", dtype_name(k.dtype));
      j.field("problem", k.problem_key).field("template_hash", k.template_hash);
      json_side(j, "old", c.before);
      json_side(j, "new", c.after);
      j.key("speedup");
      if (const std::optional<double> s = c.speedup())
        j.value(*s);
      else
        j.null();
      j.end_object();
    });
    j.end_array();
    j.field("added", static_cast<long long>(d.added.size()))
        .field("removed", static_cast<long long>(d.removed.size()))
        .field("changed", static_cast<long long>(d.changed.size()))
        .field("unchanged", static_cast<long long>(d.unchanged))
        .end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> t = {
      {"", "device", "op", "dtype", "problem", "old", "old us", "new", "new us", "speedup"}};
  each([&](const char* kind, const BestChange& c) {
    const BestRecord& k = c.after ? *c.after : *c.before;
    const std::optional<double> s = c.speedup();
    t.push_back({kind[0] == 'a' ? "+" : kind[0] == 'r' ? "-" : "~", device_of(k), k.op,
                 dtype_name(k.dtype), k.problem_key, c.before ? c.before->params_key : "",
                 c.before ? fmt("%.2f", c.before->median_us) : "",
                 c.after ? c.after->params_key : "", c.after ? fmt("%.2f", c.after->median_us) : "",
                 s ? fmt("%.2fx", *s) : ""});
  });
  if (t.size() > 1) std::printf("%s", table(t).c_str());
  std::printf("%zu added, %zu removed, %zu changed, %zu unchanged best configurations (%s -> %s)\n",
              d.added.size(), d.removed.size(), d.changed.size(), d.unchanged,
              shown(ab[0]).c_str(), shown(ab[1]).c_str());
  return 0;
}

}  // namespace ktune::cli
