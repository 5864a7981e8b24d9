// Replaying recorded sweeps: each problem's universe (its recorded points valid today), the
// scores, the issue's bar for the model-based strategy on the committed H100 sweeps
// (benchmarks/replay/), and warm start, leave-one-out.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include "db/store.hpp"
#include "ktune/error.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "templates/attention/attention_op.hpp"
#include "templates/decode/decode_op.hpp"
#include "tests/support/test_env.hpp"
#include "tuner/replay.hpp"

namespace ktune {
namespace {

const std::filesystem::path kSweeps =
    std::filesystem::path(KTUNE_SOURCE_DIR) / "benchmarks/replay/h100-sweeps.db";

const StrategyScore& score_of(const std::vector<StrategyScore>& scores, const std::string& name) {
  for (const StrategyScore& s : scores)
    if (s.strategy == name) return s;
  throw std::runtime_error("no score for " + name);
}

struct Ran {
  int code = -1;
  std::string out;
};

Ran run_cli(const std::string& args) {
  Ran r;
  const std::string cmd = "'" + test::cli_path() + "' " + args + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = ::pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(Replay, LoadsEveryRecordedProblemWithItsWholeSpaceAsUniverse) {
  Store store = Store::open(kSweeps, Store::Mode::read_only);
  const ReplayData data = load_replay(store);
  EXPECT_TRUE(data.row_issues.empty());
  for (const ReplaySkip& s : data.skipped) ADD_FAILURE() << "skipped " << s.what << ": " << s.why;
  // 34 problems: attention prefill and decode, the fused add_rmsnorm and swiglu (exhaustive
  // sweeps), and 4 MoE token buckets (staged sweeps of a space too large to list).
  ASSERT_GE(data.problems.size(), 30u);
  std::set<std::string> ops;
  for (const ReplayProblem& p : data.problems) {
    ops.insert(p.op);
    EXPECT_EQ(p.median_us.size(), p.universe.size()) << p.problem_key;
    EXPECT_EQ(p.dropped, 0u) << p.problem_key;
    if (p.space.enumerated()) {
      // Exhaustive recordings: every point valid today that the recording could name is in the
      // universe, in the space's order; flash_attention's reg_split and kv_apart and
      // flash_decode's merge and tma came after the recording, so the points at reg_split=0
      // (valid for 16-bit 64-key tiles at d=128, 2 consumers), at kv_apart=1, at merge=1 and at
      // tma=1 are outside it and the coverage drops accordingly.
      std::vector<Params> named;
      for (const Params& q : p.space.valid_points())
        if ((p.op != "flash_attention" || (flash_attention_op().param(q, "reg_split") == 1 &&
                                           flash_attention_op().param(q, "kv_apart") == 0)) &&
            (p.op != "flash_decode" || (flash_decode_op().param(q, "merge") == 0 &&
                                        flash_decode_op().param(q, "tma") == 0)))
          named.push_back(q);
      EXPECT_EQ(p.universe, named) << p.problem_key;
      EXPECT_EQ(p.valid, p.space.valid_count()) << p.problem_key;
      EXPECT_EQ(p.coverage(), static_cast<double>(named.size()) /
                                  static_cast<double>(p.space.valid_count()))
          << p.problem_key;
    } else {
      EXPECT_EQ(p.op, "moe") << p.problem_key;
      EXPECT_GE(p.universe.size(), 90u) << p.problem_key;
    }
    EXPECT_GT(p.best_us, 0.0) << p.problem_key;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [params, us] : p.median_us) {
      EXPECT_FALSE(p.space.check(params)) << "an invalid point in the oracle";
      best = std::min(best, us);
    }
    EXPECT_EQ(best, p.best_us);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"add_rmsnorm", "flash_attention", "flash_decode", "moe",
                                        "swiglu"}));
}

// The issue's bar: within 2% of the optimum using <= 15% of the valid points (median over the
// recorded problems and seeds), and at least 2x fewer evaluations than random search. Over the
// 34 recorded problems and 20 seeds: 0.118 of each universe (median 17 evaluations, worst 71),
// random 35: 2.06x, a small margin (over the 15 attention problems alone it was 0.144 and 2.75x).
TEST(Replay, ModelStrategyMeetsTheBarOnTheRecordedSweeps) {
  Store store = Store::open(kSweeps, Store::Mode::read_only);
  const ReplayData data = load_replay(store);
  ReplayOptions o;
  o.seeds = 20;
  const std::vector<StrategyScore> scores = replay(data, o);
  ASSERT_EQ(scores.size(), 4u);
  const StrategyScore& exhaustive = score_of(scores, "exhaustive");
  const StrategyScore& random = score_of(scores, "random");
  const StrategyScore& model = score_of(scores, "model");
  for (const StrategyScore* s : {&exhaustive, &random, &model}) {
    EXPECT_EQ(s->runs.size(), data.problems.size() * o.seeds) << s->strategy;
    EXPECT_EQ(s->not_reached, 0u) << s->strategy << " covers every point, so it always gets there";
    EXPECT_GE(s->worst_evaluations, s->median_evaluations) << s->strategy;
  }
  std::size_t staged_problems = 0;  // ops with search stages: MoE
  for (const ReplayProblem& p : data.problems) staged_problems += p.op == "moe";
  EXPECT_EQ(score_of(scores, "staged").runs.size(), staged_problems * o.seeds);
  // The exhaustive order does not depend on the seed.
  for (const ReplayRun& r : exhaustive.runs)
    EXPECT_EQ(r.evaluations, exhaustive.runs[r.problem * o.seeds].evaluations);
  std::printf("replay: median/worst evaluations to 2%%: exhaustive %.1f/%zu, random %.1f/%zu, "
              "model %.1f/%zu (fraction of valid points: median %.3f, worst %.3f)\n",
              exhaustive.median_evaluations, exhaustive.worst_evaluations,
              random.median_evaluations, random.worst_evaluations, model.median_evaluations,
              model.worst_evaluations, model.median_fraction, model.worst_fraction);
  EXPECT_LE(model.median_fraction, 0.15);
  EXPECT_GE(random.median_evaluations, 2.0 * model.median_evaluations);
  // Deterministic: the same again.
  const std::vector<StrategyScore> again = replay(data, o);
  EXPECT_EQ(score_of(again, "model").median_evaluations, model.median_evaluations);
  EXPECT_EQ(score_of(again, "model").worst_evaluations, model.worst_evaluations);
}

TrialRecord trial(const Op& op, const DeviceInfo& device, const Problem& problem,
                  const std::string& params_key, double us,
                  TrialStatus status = TrialStatus::ok) {
  TrialRecord t;
  t.device_key = device.key();
  t.op = std::string(op.name());
  t.problem_key = op.problem_key(problem);
  t.params_key = params_key;
  t.template_hash = "h";
  t.status = status;
  if (status == TrialStatus::ok) t.median_us = t.min_us = t.max_us = us;
  return t;
}

// A database written here: one problem with every valid point (a few failed), one with points
// missing (its optimum among them), a point outside today's tunables and one invalid today. Both
// are replayed, each over its universe, the second with its coverage; the target is the
// universe's optimum; no strategy measures a point outside it.
TEST(Replay, AUniverseIsTheRecordedValidPointsFailuresIncluded) {
  test::TempDir dir;
  const std::filesystem::path path = dir.path() / "made.db";
  const DeviceInfo device = *device_for_arch("sm_90a");
  const Op& op = get_op("flash_attention");
  const Problem whole = op.parse_problem("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64,causal=no");
  const Problem holed = op.parse_problem("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=no");
  // Point i takes 100 + (37 i mod 211) us, distinct for every i: point 0 is the optimum.
  const auto us = [](std::size_t i) { return 100.0 + static_cast<double>((i * 37) % 211); };
  const auto fails = [](std::size_t i) { return i % 10 == 3; };
  const auto missing = [](std::size_t i) { return i == 0 || i == 5 || i == 9; };
  std::size_t failed = 0, holed_valid = 0;
  {
    Store store = Store::open(path, Store::Mode::read_write);
    store.upsert_device(device);
    for (const Problem& problem : {whole, holed}) {
      Space space(op, problem, DType::bf16, device);
      const std::vector<Params> valid = space.valid_points();
      ASSERT_GT(valid.size(), 72u);
      if (problem == holed) holed_valid = valid.size();
      for (std::size_t i = 0; i < valid.size(); ++i) {
        if (problem == holed && missing(i)) continue;
        failed += fails(i) && problem == whole ? 1 : 0;
        store.record_trial(trial(op, device, problem, op.params_key(valid[i]), us(i),
                                 fails(i) ? TrialStatus::compile_error : TrialStatus::ok));
      }
      if (problem != holed) continue;
      // Faster than anything, but not a point of today's space: left out.
      std::string outside = op.params_key(valid[1]);
      outside.replace(outside.find("block_m=") + 8, 2, "48");
      store.record_trial(trial(op, device, problem, outside, 1.0));
      for (const SpacePoint& p : space.points())
        if (p.invalid) {
          store.record_trial(trial(op, device, problem, op.params_key(p.params), 2.0));
          break;
        }
    }
  }
  Store store = Store::open(path, Store::Mode::read_only);
  const ReplayData data = load_replay(store);
  EXPECT_TRUE(data.skipped.empty());
  ASSERT_EQ(data.problems.size(), 2u);
  const ReplayProblem& w = data.problems[0].problem_key == op.problem_key(whole) ? data.problems[0]
                                                                                : data.problems[1];
  const ReplayProblem& h = &w == &data.problems[0] ? data.problems[1] : data.problems[0];
  EXPECT_EQ(w.failed, failed);
  EXPECT_EQ(w.best_us, 100.0);
  EXPECT_EQ(w.coverage(), 1.0);
  EXPECT_EQ(h.problem_key, op.problem_key(holed));
  EXPECT_EQ(h.valid, holed_valid);
  EXPECT_EQ(h.universe.size(), holed_valid - 3);
  EXPECT_DOUBLE_EQ(h.coverage(), static_cast<double>(holed_valid - 3) / static_cast<double>(holed_valid));
  EXPECT_EQ(h.dropped, 2u) << "the point outside the tunables and the one invalid today";
  // The universe's optimum (point 0 was not recorded), and where the exhaustive order, the
  // universe's, first comes within 2% of it.
  double holed_best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < holed_valid; ++i)
    if (!missing(i) && !fails(i)) holed_best = std::min(holed_best, us(i));
  std::size_t holed_first = 0;
  for (std::size_t i = 0, at = 0; i < holed_valid && holed_first == 0; ++i) {
    if (missing(i)) continue;
    ++at;
    if (!fails(i) && us(i) <= holed_best * 1.02) holed_first = at;
  }
  EXPECT_GT(holed_best, 100.0);
  EXPECT_EQ(h.best_us, holed_best);

  ReplayOptions o;
  o.seeds = 3;
  o.strategies = {"exhaustive", "model", "random"};
  const std::vector<StrategyScore> scores = replay(data, o);
  const std::size_t hi = &h == &data.problems[0] ? 0 : 1;
  for (const StrategyScore& s : scores) {
    EXPECT_EQ(s.not_reached, 0u) << s.strategy;
    for (const ReplayRun& r : s.runs)
      EXPECT_LE(r.evaluations, data.problems[r.problem].universe.size()) << s.strategy;
  }
  for (const ReplayRun& r : score_of(scores, "exhaustive").runs)
    EXPECT_EQ(r.evaluations, r.problem == hi ? holed_first : 1u);
  o.strategies = {"bayes"};
  EXPECT_THROW(replay(data, o), InvalidArgument);
}

// MoE's space cannot be listed: its universe is what a staged sweep recorded (valid count
// unknown), and every strategy, staged included, chooses among those points only.
TEST(Replay, ReplaysAMoeSweepThatRecordedAFewHundredPoints) {
  test::TempDir dir;
  const std::filesystem::path path = dir.path() / "moe.db";
  const DeviceInfo device = *device_for_arch("sm_90a");
  const Op& op = get_op("moe");
  const Problem problem = op.parse_problem("e=8,k=2,h=4096,i=14336,t=16");
  Space space(op, problem, DType::bf16, device);
  ASSERT_FALSE(space.enumerated());
  std::size_t recorded = 0;
  double best = std::numeric_limits<double>::infinity();
  {
    Store store = Store::open(path, Store::Mode::read_write);
    store.upsert_device(device);
    // The staged walk as a sweep makes it, whole batches, until a few hundred points.
    std::unique_ptr<Strategy> staged =
        make_space_strategy(space, "staged", op.default_params(problem, DType::bf16, device), 0);
    for (std::vector<Params> batch = staged->next_batch(); !batch.empty() && recorded < 200;
         batch = staged->next_batch())
      for (const Params& p : batch) {
        const double us = 50.0 + static_cast<double>((recorded * 53) % 97);
        best = std::min(best, us);
        store.record_trial(trial(op, device, problem, op.params_key(p), us));
        staged->report(p, us);
        ++recorded;
      }
  }
  Store store = Store::open(path, Store::Mode::read_only);
  const ReplayData data = load_replay(store);
  for (const ReplaySkip& s : data.skipped) ADD_FAILURE() << s.what << ": " << s.why;
  ASSERT_EQ(data.problems.size(), 1u);
  const ReplayProblem& p = data.problems[0];
  EXPECT_EQ(p.universe.size(), recorded);
  EXPECT_EQ(p.valid, 0u) << "not enumerable";
  EXPECT_EQ(p.coverage(), 0.0);
  EXPECT_EQ(p.best_us, best);
  ReplayOptions o;
  o.seeds = 2;
  const std::vector<StrategyScore> scores = replay(data, o);
  for (const StrategyScore& s : scores) {
    EXPECT_EQ(s.runs.size(), o.seeds) << s.strategy;
    EXPECT_EQ(s.not_reached, 0u) << s.strategy;
    EXPECT_LE(s.worst_evaluations, recorded) << s.strategy;
  }
}

// Warm start, leave-one-out, on the committed sweeps: each problem's points are the bests of
// the other recorded problems the lookup could serve it from, nearest first, each a point of
// its universe; measured first, they bring the model's median far down.
TEST(Replay, WarmStartFromTheOtherRecordedProblems) {
  Store store = Store::open(kSweeps, Store::Mode::read_only);
  const ReplayData data = load_replay(store);
  std::size_t with_points = 0;
  for (std::size_t i = 0; i < data.problems.size(); ++i) {
    const ReplayProblem& p = data.problems[i];
    const std::vector<WarmStartPoint> warm = replay_warm_start(data, i);
    EXPECT_LE(warm.size(), kWarmStartCount);
    with_points += warm.empty() ? 0 : 1;
    for (std::size_t k = 0; k < warm.size(); ++k) {
      EXPECT_NE(warm[k].problem_key, p.problem_key);
      EXPECT_TRUE(p.median_us.count(warm[k].params)) << "not a point of the universe";
      EXPECT_LE(warm[k].distance, p.space.op().fallback_radius());
      if (k > 0) {
        EXPECT_LE(warm[k - 1].distance, warm[k].distance);
      }
      // It is the best of the problem it comes from.
      for (const ReplayProblem& q : data.problems) {
        if (q.problem_key == warm[k].problem_key) {
          EXPECT_EQ(q.median_us.at(warm[k].params), q.best_us);
        }
      }
    }
  }
  EXPECT_GE(with_points, data.problems.size() / 2);
  ReplayOptions o;
  o.seeds = 20;
  o.strategies = {"model", "random"};
  o.warm_start = true;
  const std::vector<StrategyScore> scores = replay(data, o);
  ASSERT_EQ(scores.size(), 4u);
  const StrategyScore& cold = scores[0];
  const StrategyScore& warm = scores[2];
  ASSERT_EQ(warm.label(), "model+warm");
  EXPECT_EQ(cold.label(), "model");
  EXPECT_EQ(warm.not_reached, 0u);
  std::size_t warm_evaluations = 0;
  for (const ReplayRun& r : warm.runs) warm_evaluations += r.warm;
  EXPECT_GT(warm_evaluations, 0u);
  std::printf("replay: model median/worst evaluations to 2%%: %.1f/%zu cold, %.1f/%zu with warm "
              "start; random %.1f/%zu cold, %.1f/%zu warm\n",
              cold.median_evaluations, cold.worst_evaluations, warm.median_evaluations,
              warm.worst_evaluations, scores[1].median_evaluations, scores[1].worst_evaluations,
              scores[3].median_evaluations, scores[3].worst_evaluations);
  EXPECT_LT(warm.median_evaluations, cold.median_evaluations / 2);
}

TEST(Replay, TheCommandPrintsTheScores) {
  const Ran r = run_cli("replay --db '" + kSweeps.string() + "' --seeds 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" recorded problems of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128,causal=yes"), std::string::npos);
  for (const char* s : {"\nexhaustive ", "\nrandom ", "\nmodel ", "\nstaged "})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " in\n" << r.out;
  EXPECT_NE(r.out.find("x fewer evaluations than random"), std::string::npos) << r.out;
  // The recorded attention sweeps predate reg_split and kv_apart: 120 of today's 148 valid
  // points.
  EXPECT_NE(r.out.find("120 (81% of 148)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("128 (100% of 128)"), std::string::npos) << r.out;
  const Ran warm = run_cli("replay --db '" + kSweeps.string() + "' --seeds 2 --strategy model --warm-start");
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("\nmodel+warm "), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find("warm start: model median "), std::string::npos) << warm.out;
  const Ran json = run_cli("replay --db '" + kSweeps.string() + "' --seeds 2 --strategy model --json");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(json.out.rfind("{\"seeds\":2", 0), 0u) << json.out.substr(0, 200);
  EXPECT_NE(json.out.find("\"strategy\":\"model\""), std::string::npos);
  const Ran bad = run_cli("replay --db '" + kSweeps.string() + "' --strategy bayes");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown strategy \"bayes\""), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace ktune
