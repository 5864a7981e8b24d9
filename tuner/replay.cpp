#include "tuner/replay.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "ktune/error.hpp"
#include "search/strategy.hpp"

namespace ktune {

namespace {

using Key = std::tuple<std::string, std::string, DType, std::string, std::string>;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string describe(const TrialRecord& t, const std::string& device_name) {
  return t.op + " " + dtype_name(t.dtype) + " " + t.problem_key + " on " +
         (device_name.empty() ? t.device_key : device_name);
}

// The position of each value in its tunable's list: sorting by it gives the space's order.
std::vector<std::size_t> value_indices(const Op& op, const Params& p) {
  std::vector<std::size_t> out;
  const std::vector<Tunable>& ts = op.tunables();
  for (std::size_t i = 0; i < ts.size(); ++i)
    out.push_back(static_cast<std::size_t>(
        std::find(ts[i].values.begin(), ts[i].values.end(), p.values[i]) - ts[i].values.begin()));
  return out;
}

// The newest trial of each recorded point that ran (not recorded as invalid) and parses in
// today's tunables; `unparsed` counts the distinct points that do not.
std::map<Params, const TrialRecord*> newest_runs(const Op& op, const std::vector<TrialRecord>& trials,
                                                 std::size_t& unparsed) {
  std::vector<const TrialRecord*> ordered;
  for (const TrialRecord& t : trials) ordered.push_back(&t);
  std::sort(ordered.begin(), ordered.end(),
            [](const TrialRecord* a, const TrialRecord* b) { return a->id < b->id; });
  std::map<Params, const TrialRecord*> ran;
  std::set<std::string> outside;
  for (const TrialRecord* t : ordered) {
    if (t->status == TrialStatus::invalid) continue;
    try {
      ran[op.parse_params(t->params_key)] = t;
    } catch (const InvalidArgument&) {
      // A point outside today's tunables is no point of today's space.
      outside.insert(t->params_key);
    }
  }
  unparsed = outside.size();
  return ran;
}

// The universe of `r` from its recorded runs: the points valid today, with their times.
void fill_universe(ReplayProblem& r, const std::map<Params, const TrialRecord*>& ran,
                   std::size_t unparsed) {
  const Op& op = r.space.op();
  r.dropped = unparsed;
  r.best_us = kInf;
  for (const auto& [p, t] : ran) {
    if (r.space.check(p)) {
      ++r.dropped;
      continue;
    }
    const bool ok = t->status == TrialStatus::ok;
    const double us = ok ? t->median_us : kInf;
    r.universe.push_back(p);
    r.median_us.emplace(p, us);
    r.failed += ok ? 0 : 1;
    r.best_us = std::min(r.best_us, us);
  }
  std::sort(r.universe.begin(), r.universe.end(), [&](const Params& a, const Params& b) {
    return value_indices(op, a) < value_indices(op, b);
  });
  r.valid = r.space.enumerated() ? r.space.valid_count() : 0;
}

// One key's trials into a problem, or the reason it cannot be replayed.
std::optional<ReplayProblem> make_problem(const Store& store, const std::vector<TrialRecord>& trials,
                                          std::string& why, std::string& device_name) {
  const TrialRecord& first = trials.front();
  std::optional<DeviceInfo> device = store.device(first.device_key);
  if (device) device_name = device->name;
  const Op* op = find_op(first.op);
  if (!op) {
    why = "unknown op";
    return std::nullopt;
  }
  if (!device) {
    why = "the device is not in the devices table";
    return std::nullopt;
  }
  Problem problem;
  try {
    problem = op->parse_problem(first.problem_key);
  } catch (const InvalidArgument& e) {
    why = std::string("problem key: ") + e.what();
    return std::nullopt;
  }
  ReplayProblem r{first.device_key, device->name, first.op, first.dtype, first.problem_key,
                  first.template_hash, Space(*op, problem, first.dtype, *device), Params{},
                  {}, {}, 0, 0, 0, 0.0};
  r.start = op->default_params(problem, first.dtype, *device);
  std::size_t unparsed = 0;
  const std::map<Params, const TrialRecord*> ran = newest_runs(*op, trials, unparsed);
  fill_universe(r, ran, unparsed);
  if (r.universe.empty()) {
    why = r.dropped == 0 ? "no trial ran (every recorded point was invalid when recorded)"
                         : "none of its " + std::to_string(r.dropped) +
                               " recorded points is a valid point today";
    return std::nullopt;
  }
  if (!(r.best_us < kInf)) {
    why = "no point of its universe (" + std::to_string(r.universe.size()) + ") ran ok";
    return std::nullopt;
  }
  return r;
}

// The strategy `name` over the universe of `p` only.
std::unique_ptr<Strategy> universe_strategy(const std::string& name, const ReplayProblem& p,
                                            std::uint64_t seed, const ReplayOptions& o) {
  if (name == "model") return std::make_unique<ModelStrategy>(p.universe, seed, o.model);
  if (name != "staged") return make_strategy(name, p.universe, seed);
  const Space& space = p.space;
  const std::map<Params, double>& recorded = p.median_us;
  return make_staged_strategy(
      space.op(),
      [&space, &recorded](const Params& q) -> std::optional<std::string> {
        if (std::optional<std::string> why = space.check(q)) return why;
        if (!recorded.count(q)) return std::string("not recorded");
        return std::nullopt;
      },
      p.start);
}

// Evaluates `q` on `p`'s oracle and tells the run; true once the run has reached `target`.
bool evaluate(const ReplayProblem& p, const Params& q, double target, ReplayRun& run,
              double& us) {
  auto it = p.median_us.find(q);
  us = it == p.median_us.end() ? kInf : it->second;
  if (!run.reached) ++run.evaluations;
  if (us <= target) run.reached = true;
  return run.reached;
}

ReplayRun run_one(const ReplayProblem& p, std::size_t index, const std::string& name,
                  std::uint64_t seed, const std::vector<WarmStartPoint>& warm,
                  const ReplayOptions& o) {
  const double target = p.best_us * (1.0 + o.tolerance);
  std::unique_ptr<Strategy> strategy = universe_strategy(name, p, seed, o);
  ReplayRun run{index, seed, 0, 0, false};
  double us = 0.0;
  for (const WarmStartPoint& w : warm) {
    if (run.reached) break;
    ++run.warm;
    evaluate(p, w.params, target, run, us);
    strategy->observe(w.params, us);
  }
  while (!run.reached) {
    const std::vector<Params> batch = strategy->next_batch();
    if (batch.empty()) break;
    for (const Params& q : batch) {
      evaluate(p, q, target, run, us);
      strategy->report(q, us);
    }
  }
  return run;
}

StrategyScore score(const ReplayData& data, const std::string& name, bool warm_start,
                    const std::vector<std::vector<WarmStartPoint>>& warm, const ReplayOptions& o) {
  StrategyScore score;
  score.strategy = name;
  score.warm_start = warm_start;
  std::vector<double> evaluations, fractions;
  for (std::size_t pi = 0; pi < data.problems.size(); ++pi) {
    const ReplayProblem& p = data.problems[pi];
    if (name == "staged" && p.space.op().search_stages().empty()) continue;
    for (std::uint64_t seed = 1; seed <= o.seeds; ++seed) {
      const ReplayRun run =
          run_one(p, pi, name, seed, warm_start ? warm[pi] : std::vector<WarmStartPoint>{}, o);
      const std::size_t counted = run.reached ? run.evaluations : p.universe.size();
      evaluations.push_back(static_cast<double>(counted));
      fractions.push_back(static_cast<double>(counted) / static_cast<double>(p.universe.size()));
      score.worst_evaluations = std::max(score.worst_evaluations, counted);
      score.not_reached += run.reached ? 0 : 1;
      score.runs.push_back(run);
    }
  }
  score.median_evaluations = median(evaluations);
  score.median_fraction = median(fractions);
  score.worst_fraction = fractions.empty() ? 0.0 : *std::max_element(fractions.begin(), fractions.end());
  return score;
}

}  // namespace

double ReplayProblem::coverage() const {
  return valid > 0 ? static_cast<double>(universe.size()) / static_cast<double>(valid) : 0.0;
}

ReplayData load_replay(const Store& store, const std::string& op_filter) {
  ReplayData out;
  Rows<TrialRecord> all = store.all_trials(op_filter);
  out.row_issues = std::move(all.skipped);
  std::map<Key, std::vector<TrialRecord>> groups;
  for (TrialRecord& t : all.rows) {
    Key k{t.device_key, t.op, t.dtype, t.problem_key, t.template_hash};
    groups[k].push_back(std::move(t));
  }
  for (const auto& [key, trials] : groups) {
    std::string why, device_name;
    std::optional<ReplayProblem> p = make_problem(store, trials, why, device_name);
    if (p)
      out.problems.push_back(std::move(*p));
    else
      out.skipped.push_back({describe(trials.front(), device_name), why});
  }
  return out;
}

std::vector<WarmStartPoint> replay_warm_start(const ReplayData& data, std::size_t index,
                                              std::size_t count) {
  const ReplayProblem& p = data.problems.at(index);
  std::vector<BestRecord> bests;
  for (std::size_t i = 0; i < data.problems.size(); ++i) {
    if (i == index) continue;
    const ReplayProblem& q = data.problems[i];
    const Params* best = nullptr;
    for (const Params& x : q.universe)  // the first optimum in the space's order
      if (!best && q.median_us.at(x) == q.best_us) best = &x;
    BestRecord b;
    b.device_key = q.device_key;
    b.device_name = q.device_name;
    b.arch = q.space.device().arch();
    b.op = q.op;
    b.dtype = q.dtype;
    b.problem_key = q.problem_key;
    b.params_key = q.space.op().params_key(*best);
    b.template_hash = q.template_hash;
    b.median_us = q.best_us;
    bests.push_back(std::move(b));
  }
  // Every neighbour in order; then those this problem has a recorded time for.
  std::vector<WarmStartPoint> out;
  for (WarmStartPoint& w : select_warm_start(p.space, p.template_hash, bests,
                                             std::numeric_limits<std::size_t>::max()))
    if (out.size() < count && p.median_us.count(w.params)) out.push_back(std::move(w));
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<StrategyScore> replay(const ReplayData& data, const ReplayOptions& options) {
  const std::vector<std::string>& names = strategy_names();
  for (const std::string& s : options.strategies)
    if (std::find(names.begin(), names.end(), s) == names.end())
      throw InvalidArgument("unknown strategy " + ktune::quoted(s) + " (allowed: exhaustive, random, "
                            "model, staged)");
  std::vector<std::vector<WarmStartPoint>> warm(data.problems.size());
  if (options.warm_start)
    for (std::size_t i = 0; i < data.problems.size(); ++i)
      warm[i] = replay_warm_start(data, i, options.warm_start_count);
  std::vector<StrategyScore> out;
  for (const std::string& name : options.strategies)
    out.push_back(score(data, name, false, warm, options));
  if (options.warm_start)
    for (const std::string& name : options.strategies)
      out.push_back(score(data, name, true, warm, options));
  return out;
}

}  // namespace ktune
