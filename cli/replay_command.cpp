// ktune replay: scores the search strategies against recorded sweeps, no GPU needed.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "search/strategy.hpp"
#include "tuner/replay.hpp"

namespace po = boost::program_options;

namespace ktune::cli {
namespace {

std::vector<std::string> strategy_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// The median evaluations of one strategy on one problem (over its seeds); "-" when not run.
std::string problem_median(const StrategyScore& s, std::size_t problem) {
  std::vector<double> v;
  for (const ReplayRun& r : s.runs)
    if (r.problem == problem) v.push_back(static_cast<double>(r.evaluations));
  return v.empty() ? "-" : fmt("%.1f", median(v));
}

// "119 (99% of 120)": the universe and its coverage of the valid points; "340" alone where the
// space cannot be enumerated.
std::string universe_cell(const ReplayProblem& p) {
  if (p.valid == 0) return std::to_string(p.universe.size());
  return std::to_string(p.universe.size()) + " (" + fmt("%.0f", 100.0 * p.coverage()) + "% of " +
         std::to_string(p.valid) + ")";
}

void print_json(const ReplayData& data, const std::vector<StrategyScore>& scores,
                const ReplayOptions& o) {
  Json j;
  j.begin_object().field("seeds", static_cast<long long>(o.seeds)).field("tolerance", o.tolerance);
  j.field("warm_start", o.warm_start);
  j.key("problems").begin_array();
  for (std::size_t i = 0; i < data.problems.size(); ++i) {
    const ReplayProblem& p = data.problems[i];
    j.begin_object().field("device", p.device_name).field("op", p.op);
    j.field("dtype", dtype_name(p.dtype)).field("problem", p.problem_key);
    j.field("universe", static_cast<long long>(p.universe.size()));
    if (p.valid > 0) j.field("valid", static_cast<long long>(p.valid)).field("coverage", p.coverage());
    else j.key("valid").null().key("coverage").null();
    j.field("failed", static_cast<long long>(p.failed));
    j.field("dropped", static_cast<long long>(p.dropped)).field("best_us", p.best_us);
    if (o.warm_start) {
      j.key("warm_start").begin_array();
      for (const WarmStartPoint& w : replay_warm_start(data, i, o.warm_start_count))
        j.begin_object().field("params", w.params_key).field("from", w.problem_key)
            .field("distance", w.distance).end_object();
      j.end_array();
    }
    j.end_object();
  }
  j.end_array().key("skipped").begin_array();
  for (const ReplaySkip& s : data.skipped)
    j.begin_object().field("what", s.what).field("why", s.why).end_object();
  j.end_array().key("strategies").begin_array();
  for (const StrategyScore& s : scores) {
    j.begin_object().field("strategy", s.strategy).field("warm_start", s.warm_start);
    j.field("runs", static_cast<long long>(s.runs.size()));
    j.field("median_evaluations", s.median_evaluations);
    j.field("worst_evaluations", static_cast<long long>(s.worst_evaluations));
    j.field("median_fraction", s.median_fraction).field("worst_fraction", s.worst_fraction);
    j.field("not_reached", static_cast<long long>(s.not_reached));
    j.key("runs_detail").begin_array();
    for (const ReplayRun& r : s.runs) {
      j.begin_object().field("problem", static_cast<long long>(r.problem));
      j.field("seed", static_cast<long long>(r.seed));
      j.field("evaluations", static_cast<long long>(r.evaluations));
      j.field("warm", static_cast<long long>(r.warm)).field("reached", r.reached);
      j.end_object();
    }
    j.end_array().end_object();
  }
  j.end_array().end_object();
  std::printf("%s\n", j.str().c_str());
}

// Where each problem's warm-start points come from.
void print_warm_sources(const ReplayData& data, const ReplayOptions& o) {
  std::printf("\nwarm start (leave-one-out: the bests of the other recorded problems, nearest "
              "first):\n");
  for (std::size_t i = 0; i < data.problems.size(); ++i) {
    const std::vector<WarmStartPoint> warm = replay_warm_start(data, i, o.warm_start_count);
    std::string from;
    for (const WarmStartPoint& w : warm)
      from += (from.empty() ? "" : "; ") + w.problem_key + " (" + fmt("%.2f", w.distance) + ")";
    std::printf("  %s: %zu point%s%s%s\n", shown(data.problems[i].problem_key).c_str(), warm.size(),
                warm.size() == 1 ? "" : "s", warm.empty() ? "" : " from ", shown(from, 600).c_str());
  }
}

void print_text(const std::string& db, const ReplayData& data,
                const std::vector<StrategyScore>& scores, const ReplayOptions& o) {
  std::printf("replay: %zu recorded problems of %s, %zu seeds, within %s%% of each universe's "
              "optimum\n",
              data.problems.size(), shown(db).c_str(), o.seeds, fmt("%g", o.tolerance * 100).c_str());
  for (const ReplaySkip& s : data.skipped)
    std::printf("  skipped %s: %s\n", shown(s.what).c_str(), shown(s.why).c_str());
  std::vector<std::vector<std::string>> t = {
      {"op", "dtype", "problem", "universe (coverage of valid)", "failed", "best us"}};
  for (const StrategyScore& s : scores) t.front().push_back(s.label());
  for (std::size_t i = 0; i < data.problems.size(); ++i) {
    const ReplayProblem& p = data.problems[i];
    t.push_back({p.op, dtype_name(p.dtype), p.problem_key, universe_cell(p),
                 std::to_string(p.failed), fmt("%.2f", p.best_us)});
    for (const StrategyScore& s : scores) t.back().push_back(problem_median(s, i));
  }
  std::printf("\nmedian evaluations over seeds, per problem:\n%s", table(t).c_str());
  if (o.warm_start) print_warm_sources(data, o);
  std::vector<std::vector<std::string>> u = {{"strategy", "runs", "median evals", "worst evals",
                                              "median fraction", "worst fraction", "not reached"}};
  const StrategyScore* random = nullptr;
  const StrategyScore* model = nullptr;
  for (const StrategyScore& s : scores) {
    if (s.runs.empty()) {
      u.push_back({s.label(), "0", "-", "-", "-", "-", "-"});
      continue;
    }
    if (s.strategy == "random" && !s.warm_start) random = &s;
    if (s.strategy == "model" && !s.warm_start) model = &s;
    u.push_back({s.label(), std::to_string(s.runs.size()), fmt("%.1f", s.median_evaluations),
                 std::to_string(s.worst_evaluations), fmt("%.3f", s.median_fraction),
                 fmt("%.3f", s.worst_fraction), std::to_string(s.not_reached)});
  }
  std::printf("\nevaluations to within %s%% of the optimum, over problems and seeds (fractions of "
              "each universe):\n%s",
              fmt("%g", o.tolerance * 100).c_str(), table(u).c_str());
  if (random && model && model->median_evaluations > 0)
    std::printf("model: %s x fewer evaluations than random (medians)\n",
                fmt("%.2f", random->median_evaluations / model->median_evaluations).c_str());
  for (const StrategyScore& w : scores) {
    if (!w.warm_start || w.runs.empty()) continue;
    for (const StrategyScore& c : scores)
      if (!c.warm_start && c.strategy == w.strategy)
        std::printf("warm start: %s median %s -> %s evaluations, worst %zu -> %zu\n",
                    w.strategy.c_str(), fmt("%.1f", c.median_evaluations).c_str(),
                    fmt("%.1f", w.median_evaluations).c_str(), c.worst_evaluations,
                    w.worst_evaluations);
  }
}

}  // namespace

int cmd_replay(const Args& args) {
  po::options_description desc("replay options");
  desc.add_options()
      ("db", po::value<std::string>(), "database of recorded sweeps (default: $KTUNE_DB or the data directory)")
      ("op", po::value<std::string>()->default_value(""), "only this op's problems")
      ("strategy", po::value<std::string>()->default_value("exhaustive,random,model,staged"),
       "comma-separated strategies (staged runs only on ops with search stages)")
      ("seeds", po::value<std::string>()->default_value("20"), "seeds per strategy and problem, 1 to 1000")
      ("within", po::value<std::string>()->default_value("2"), "percent above the optimum that counts as found, 0 to 100")
      ("warm-start", "score each strategy again, starting from the bests of the nearest other "
                     "recorded problems (leave-one-out)")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("replay", "[--db PATH] [--op OP] [--strategy LIST] [--seeds N] [--within PCT] "
                               "[--warm-start] [--json]",
                     desc, args, vm))
    return 0;
  ReplayOptions o;
  o.strategies = strategy_list(vm["strategy"].as<std::string>());
  o.seeds = static_cast<std::size_t>(integer_option(vm, "seeds", 1, 1000));
  o.tolerance = number_option(vm, "within", 0, 100) / 100.0;
  o.warm_start = vm.count("warm-start") > 0;
  const std::string op_filter = vm["op"].as<std::string>();
  if (!op_filter.empty()) op_option(op_filter);
  {
    const std::vector<std::string>& names = strategy_names();
    for (const std::string& s : o.strategies)
      if (std::find(names.begin(), names.end(), s) == names.end())
        throw InvalidArgument("--strategy: unknown strategy " + ktune::quoted(s) +
                              " (allowed: exhaustive, random, model, staged)");
  }
  const DbLocation db = db_option(vm);
  if (!db_exists(db)) throw InvalidArgument("database " + db.describe() + " does not exist");
  Store store = Store::open(db.path, Store::Mode::read_only);
  ReplayData data = load_replay(store, op_filter);
  if (!data.row_issues.empty())
    std::fprintf(stderr, "ktune replay: warning: %zu rows of %s skipped (ktune db check lists them)\n",
                 data.row_issues.size(), ktune::quoted(store.path().string(), 200).c_str());
  if (data.problems.empty())
    throw Error("no recorded problem of " + ktune::quoted(store.path().string(), 200) +
                " can be replayed" +
                (data.skipped.empty() ? std::string(" (no trials)")
                                      : " (" + std::to_string(data.skipped.size()) +
                                            " skipped; first: " + data.skipped.front().what + ": " +
                                            data.skipped.front().why + ")"));
  const std::vector<StrategyScore> scores = replay(data, o);
  if (vm.count("json"))
    print_json(data, scores, o);
  else
    print_text(store.path().string(), data, scores, o);
  return 0;
}

}  // namespace ktune::cli
