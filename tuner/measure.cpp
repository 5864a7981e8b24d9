#include "tuner/measure.hpp"

#include <algorithm>

#include "ktune/error.hpp"

namespace ktune {
namespace {

/// A trial whose p10-p90 spread exceeds this share of its median (%) is timed again...
constexpr double kNoisySpreadPct = 50.0;
/// ...at most this many more times.
constexpr int kNoisyRetries = 2;
/// The leaders are re-timed in this many interleaved rounds of this many seconds each...
constexpr int kRetimeRounds = 3;
constexpr double kRetimeRoundSeconds = 0.1;
/// ...each timing after this many seconds of running the candidate. A GPU at its power limit
/// runs at boost clocks for the first tenths of a second of a heavy load, then lower: on the H100
/// the Mixtral MoE layer at T=1024 drew 690 W at 1275-1560 MHz, against 1980 MHz when it
/// started (benchmarks/results/h100-stop71-2026-12-06.md, section 8). Without the warm-up the
/// same configuration's re-timed median moved 1.0 % (T=1024) and 2.8 % (T=4096) between runs
/// (8.8 % on another H100) and a configuration no faster than another won by up to 2.7 %; with
/// 0.3 s, 0.7 % and the ratio within 1.1 % (with 0.4 s rounds too: 0.4 %, and 0.02 % at 4096).
constexpr double kRetimeWarmupSeconds = 0.3;

WireKernel wire(const CompiledKernel& k, unsigned dynamic_shared) {
  return WireKernel{k.cubin, k.lowered_name, dynamic_shared};
}

const char* check_type(DType t) {
  switch (t) {
    case DType::bf16: return "ktune::bf16";
    case DType::f16: return "ktune::fp16";
    case DType::f32: return "float";
    case DType::i32: return "int";
    case DType::e4m3: return "ktune::e4m3";
  }
  return "float";
}

void to_outcome(const WorkerClient::Outcome& w, TrialOutcome& t) {
  if (w.end == WorkerEnd::timed_out) {
    t.status = TrialStatus::timeout;
    t.detail = w.detail;
  } else if (w.end == WorkerEnd::crashed) {
    t.status = TrialStatus::launch_error;
    t.detail = w.detail;
  } else {
    const Evaluation& e = w.evaluation;
    t.status = e.status == EvalStatus::ok             ? TrialStatus::ok
               : e.status == EvalStatus::wrong_result ? TrialStatus::wrong_result
                                                      : TrialStatus::launch_error;
    t.detail = e.detail;
    t.median_us = e.median_us;
    t.repetitions = e.repetitions;
    t.spread_pct = e.median_us > 0 ? (e.p90_us - e.p10_us) / e.median_us * 100.0 : 0.0;
  }
}

}  // namespace

std::vector<KernelSource> check_kernel_sources(DType dtype) {
  const std::string t = check_type(dtype);
  std::vector<KernelSource> s(kCheckKernels);
  s[kFill] = {"common/check.cuh", "ktune::fill_random_kernel<" + t + ">"};
  // Ops that take e4m3 inputs write bf16 (DType::e4m3).
  s[kCompare] = {"common/check.cuh", "ktune::compare_kernel<" +
                                         std::string(check_type(
                                             dtype == DType::e4m3 ? DType::bf16 : dtype)) +
                                         ">"};
  s[kFillF32] = {"common/check.cuh", "ktune::fill_random_kernel<float>"};
  s[kCompareF32] = {"common/check.cuh", "ktune::compare_kernel<float>"};
  s[kFillIds] = {"common/check.cuh", "ktune::fill_ids_kernel"};
  s[kCompareI32] = {"common/check.cuh", "ktune::compare_kernel<int>"};
  s[kFillPermutation] = {"common/check.cuh", "ktune::fill_permutation_kernel"};
  s[kFillUniformInt] = {"common/check.cuh", "ktune::fill_uniform_int_kernel"};
  s[kFillBf16] = {"common/check.cuh", "ktune::fill_random_kernel<ktune::bf16>"};
  return s;
}

ProblemBench::ProblemBench(const SweepOptions& o, const Op& op, Problem problem,
                           const DeviceInfo& device, WorkerClient& worker, CompilePool& pool,
                           const Compiler& compiler, const std::vector<WireKernel>& checks)
    : o_(o),
      op_(op),
      problem_(std::move(problem)),
      device_(device),
      worker_(worker),
      pool_(pool),
      compiler_(compiler) {
  const std::string arch = device_.arch();
  const std::vector<KernelSource> refs = op_.reference_kernels(problem_, o_.dtype);
  std::vector<CompileJob> jobs;
  for (const KernelSource& k : refs) jobs.push_back({k, arch, {}});
  const std::size_t first = pool_.submit(std::move(jobs));
  ProblemRequest pr;
  pr.op = std::string(op_.name());
  pr.dtype = o_.dtype;
  pr.problem_key = op_.problem_key(problem_);
  pr.seed = o_.seed + 20241121;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const CompileOutcome& c = pool_.wait(first + i);
    if (!c.kernel)
      throw Error("the reference kernel " + refs[i].name_expression +
                  (c.timed_out ? " did not compile in time: " : " failed to compile: ") + c.error);
    pr.reference.push_back(wire(*c.kernel, 0));
  }
  pr.checks = checks;
  worker_.set_problem(pr, 300.0);
  // Memory-bound problems that fit in L2 would otherwise be timed from the cache.
  timing_.flush_l2 = op_.flops(problem_, o_.dtype) == 0.0 &&
                     op_.min_bytes(problem_, o_.dtype) < 4.0 * static_cast<double>(device_.l2_bytes);
}

void ProblemBench::queue(const std::vector<Params>& candidates) {
  const std::string arch = device_.arch();
  for (const Params& p : candidates) {
    const std::string key = op_.params_key(p);
    if (jobs_.count(key)) continue;
    std::vector<CompileJob> jobs;
    const std::vector<KernelSource> ks = op_.kernels(p, problem_, o_.dtype);
    for (std::size_t k = 0; k < ks.size(); ++k) {
      CompileJob job{ks[k], arch, {}};
      auto planted = o_.planted.find(key);
      if (k == 0 && planted != o_.planted.end()) {
        job.source.name_expression = planted->second.name_expression;
        job.source_text = planted->second.source_text;
      }
      jobs.push_back(std::move(job));
    }
    const std::size_t n = jobs.size();
    const std::size_t first = pool_.submit(std::move(jobs));
    std::vector<std::size_t>& idx = jobs_[key];
    for (std::size_t i = 0; i < n; ++i) idx.push_back(first + i);
  }
}

TrialOutcome ProblemBench::measure(const Params& params, double& compile_seconds) {
  TrialOutcome t;
  t.params = params;
  t.params_key = op_.params_key(params);
  if (!jobs_.count(t.params_key)) queue({params});
  const std::vector<std::size_t>& jobs = jobs_.at(t.params_key);
  EvaluateRequest req;
  req.params_key = t.params_key;
  req.timing = timing_;
  std::vector<KernelResources> resources;
  compile_seconds = 0.0;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const CompileOutcome& co = pool_.wait(jobs[k]);
    if (!co.kernel) {
      t.status = co.timed_out ? TrialStatus::compile_timeout : TrialStatus::compile_error;
      t.detail = co.error;
      if (co.timed_out) compile_seconds += o_.compile_timeout_s;  // the time it was given
      return t;
    }
    compile_seconds += co.kernel->seconds;
    resources.push_back(co.kernel->resources);
    req.kernels.push_back(
        wire(*co.kernel, op_.dynamic_shared_bytes(params, problem_, o_.dtype, k)));
  }
  if (!resources.empty()) t.resources = resources.front();
  if (std::optional<std::string> why =
          op_.invalid_after_compile(params, problem_, o_.dtype, device_, resources)) {
    t.status = TrialStatus::invalid;  // rejected from its resources: never launched
    t.detail = *why;
    return t;
  }
  to_outcome(worker_.evaluate(req, o_.candidate_timeout_s), t);
  // A noisy measurement is taken again, up to kNoisyRetries times, and the lowest median kept:
  // host gaps (a launch thread starved by the compile pool) and a shared GPU only ever add
  // time. On the H100 a 15 us decode point once came back at 22.4 us with a p10-p90 spread of
  // 192 %, where it had measured 15.1 us (16 %) in the run before.
  for (int again = 0; again < kNoisyRetries && t.status == TrialStatus::ok &&
                      t.spread_pct > kNoisySpreadPct;
       ++again) {
    TrialOutcome r = t;
    to_outcome(worker_.evaluate(req, o_.candidate_timeout_s), r);
    if (r.status != TrialStatus::ok) break;  // it measured once; a later failure is not a result
    t.detail = "timed " + std::to_string(again + 2) + " times (p10-p90 spread above " +
               std::to_string(static_cast<int>(kNoisySpreadPct)) + " % of the median)";
    if (r.median_us < t.median_us) {
      t.median_us = r.median_us;
      t.repetitions = r.repetitions;
      t.spread_pct = r.spread_pct;
    } else if (r.spread_pct <= kNoisySpreadPct) {
      break;  // a quiet run confirms the first median
    }
  }
  if (t.status == TrialStatus::ok) requests_[t.params_key] = std::move(req);
  return t;
}

std::vector<std::size_t> retime_order(std::size_t leaders, int round) {
  std::vector<std::size_t> order(leaders);
  for (std::size_t i = 0; i < leaders; ++i) order[i] = round % 2 ? leaders - 1 - i : i;
  return order;
}

double median_of_rounds(std::vector<double> medians) {
  if (medians.empty()) return 0.0;
  std::sort(medians.begin(), medians.end());
  const std::size_t n = medians.size();
  return n % 2 ? medians[n / 2] : 0.5 * (medians[n / 2 - 1] + medians[n / 2]);
}

void ProblemBench::retime(const std::vector<TrialOutcome*>& leaders) {
  TimingSettings round_timing = timing_;
  round_timing.min_seconds = kRetimeRoundSeconds;
  round_timing.warmup_seconds = kRetimeWarmupSeconds;
  round_timing.min_reps = 30;
  const std::string arch = device_.arch();
  // Each leader's request (a leader that cannot be compiled again keeps its recorded time).
  std::vector<TrialOutcome*> timed;
  std::vector<EvaluateRequest> reqs;
  for (TrialOutcome* t : leaders) {
    EvaluateRequest req;
    auto it = requests_.find(t->params_key);
    if (it != requests_.end()) {
      req = it->second;
    } else {  // resumed from the database: compile (a cache hit, normally) again
      req.params_key = t->params_key;
      const std::vector<KernelSource> ks = op_.kernels(t->params, problem_, o_.dtype);
      try {
        for (std::size_t k = 0; k < ks.size(); ++k)
          req.kernels.push_back(wire(compiler_.compile({ks[k], arch, {}}),
                                     op_.dynamic_shared_bytes(t->params, problem_, o_.dtype, k)));
      } catch (const CompileError&) {
        continue;  // (a timeout included) it keeps the time recorded when it was measured
      }
    }
    req.timing = round_timing;
    timed.push_back(t);
    reqs.push_back(std::move(req));
  }
  // Interleaved rounds (A B C, C B A, A B C): a drift of the clocks or of the power state over
  // the re-timing shifts every leader alike instead of favouring the one timed in a quiet spell.
  std::vector<std::vector<double>> medians(timed.size()), spreads(timed.size());
  std::vector<int> reps(timed.size(), 0);
  for (int round = 0; round < kRetimeRounds; ++round) {
    for (std::size_t i : retime_order(timed.size(), round)) {
      const WorkerClient::Outcome w = worker_.evaluate(reqs[i], o_.candidate_timeout_s);
      if (w.end != WorkerEnd::replied || w.evaluation.status != EvalStatus::ok) continue;
      const Evaluation& e = w.evaluation;
      medians[i].push_back(e.median_us);
      spreads[i].push_back(e.median_us > 0 ? (e.p90_us - e.p10_us) / e.median_us * 100.0 : 0.0);
      reps[i] += e.repetitions;
    }
  }
  for (std::size_t i = 0; i < timed.size(); ++i) {
    TrialOutcome* t = timed[i];
    if (!medians[i].empty()) {
      t->median_us = median_of_rounds(medians[i]);
      t->repetitions = reps[i];
      t->spread_pct = median_of_rounds(spreads[i]);
    }
    if (o_.progress) {
      SweepProgress pg;
      pg.phase = "retime";
      pg.problem = op_.problem_key(problem_);
      pg.params = t->params_key;
      pg.median_us = t->median_us;
      o_.progress(pg);
    }
  }
}

}  // namespace ktune
