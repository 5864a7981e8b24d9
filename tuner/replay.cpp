#include "tuner/replay.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>

#include "ktune/error.hpp"
#include "search/strategy.hpp"

namespace ktune {

namespace {

using Key = std::tuple<std::string, std::string, DType, std::string, std::string>;

std::string describe(const TrialRecord& t, const std::string& device_name) {
  return t.op + " " + dtype_name(t.dtype) + " " + t.problem_key + " on " +
         (device_name.empty() ? t.device_key : device_name);
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
  ReplayProblem r{device->name, first.op, first.dtype, first.problem_key, first.template_hash,
                  Space(*op, problem, first.dtype, *device), Params{}, {}, 0, 0, 0.0};
  if (!r.space.enumerated()) {
    why = "the space has " + std::to_string(r.space.size()) +
          " points, too many to list: replay needs every valid point measured";
    return std::nullopt;
  }
  r.start = op->default_params(problem, first.dtype, *device);
  // The newest trial of each point that ran (trials come in id order; keep the last).
  std::map<Params, const TrialRecord*> ran;
  std::vector<const TrialRecord*> ordered;
  for (const TrialRecord& t : trials) ordered.push_back(&t);
  std::sort(ordered.begin(), ordered.end(),
            [](const TrialRecord* a, const TrialRecord* b) { return a->id < b->id; });
  for (const TrialRecord* t : ordered) {
    if (t->status == TrialStatus::invalid) continue;
    try {
      ran[op->parse_params(t->params_key)] = t;
    } catch (const InvalidArgument&) {
      // A point outside today's tunables is no point of today's space.
    }
  }
  std::size_t missing = 0;
  double best = std::numeric_limits<double>::infinity();
  for (const Params& p : r.space.valid_points()) {
    auto it = ran.find(p);
    if (it == ran.end()) {
      ++missing;
      continue;
    }
    const bool ok = it->second->status == TrialStatus::ok;
    const double us = ok ? it->second->median_us : std::numeric_limits<double>::infinity();
    r.median_us.emplace(p, us);
    r.failed += ok ? 0 : 1;
    best = std::min(best, us);
  }
  r.valid = r.space.valid_count();
  if (missing > 0) {
    why = std::to_string(missing) + " of " + std::to_string(r.valid) +
          " valid points have no ok or failed trial";
    return std::nullopt;
  }
  if (!(best < std::numeric_limits<double>::infinity())) {
    why = "no valid point ran";
    return std::nullopt;
  }
  r.best_us = best;
  return r;
}

}  // namespace

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
  std::vector<StrategyScore> out;
  for (const std::string& name : options.strategies) {
    StrategyScore score;
    score.strategy = name;
    std::vector<double> evaluations, fractions;
    for (std::size_t pi = 0; pi < data.problems.size(); ++pi) {
      const ReplayProblem& p = data.problems[pi];
      if (name == "staged" && p.space.op().search_stages().empty()) continue;
      const double target = p.best_us * (1.0 + options.tolerance);
      for (std::uint64_t seed = 1; seed <= options.seeds; ++seed) {
        std::unique_ptr<Strategy> strategy =
            name == "model"
                ? std::make_unique<ModelStrategy>(p.space.valid_points(), seed, options.model)
                : make_space_strategy(p.space, name, p.start, seed);
        ReplayRun run{pi, seed, 0, false};
        while (!run.reached) {
          const std::vector<Params> batch = strategy->next_batch();
          if (batch.empty()) break;
          for (const Params& q : batch) {
            auto it = p.median_us.find(q);
            const double us =
                it == p.median_us.end() ? std::numeric_limits<double>::infinity() : it->second;
            if (!run.reached) ++run.evaluations;
            if (us <= target) run.reached = true;
            strategy->report(q, us);
          }
        }
        const std::size_t counted = run.reached ? run.evaluations : p.valid;
        evaluations.push_back(static_cast<double>(counted));
        fractions.push_back(static_cast<double>(counted) / static_cast<double>(p.valid));
        score.worst_evaluations = std::max(score.worst_evaluations, counted);
        score.not_reached += run.reached ? 0 : 1;
        score.runs.push_back(run);
      }
    }
    score.median_evaluations = median(evaluations);
    score.median_fraction = median(fractions);
    score.worst_fraction = fractions.empty() ? 0.0 : *std::max_element(fractions.begin(), fractions.end());
    out.push_back(std::move(score));
  }
  return out;
}

}  // namespace ktune
