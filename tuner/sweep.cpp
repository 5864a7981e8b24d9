#include "tuner/sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "tuner/compile_child.hpp"
#include "tuner/worker_client.hpp"

namespace ktune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<std::string> default_worker_command() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find this executable to start the benchmark worker");
  return {std::string(buf, static_cast<std::size_t>(n)), "__worker"};
}

/// Compiles jobs on background threads; the sweep waits for each in order, so evaluation of the
/// first candidates overlaps the compilation of the rest. A compile error or timeout belongs to
/// its candidate; any other failure (the compile child cannot start) ends the sweep in wait().
class CompilePool {
 public:
  CompilePool(const Compiler& compiler, std::vector<CompileJob> jobs, int threads)
      : compiler_(compiler),
        jobs_(std::move(jobs)),
        done_(jobs_.size()),
        results_(jobs_.size()),
        failures_(jobs_.size()) {
    int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n = std::min<int>(n, static_cast<int>(std::max<std::size_t>(jobs_.size(), 1)));
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  ~CompilePool() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }
  const CompileOutcome& wait(std::size_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_[i] != 0; });
    if (failures_[i]) std::rethrow_exception(failures_[i]);
    return results_[i];
  }

 private:
  void work() {
    for (;;) {
      if (stop_) return;
      std::size_t i = next_++;
      if (i >= jobs_.size()) return;
      CompileOutcome out;
      std::exception_ptr failure;
      try {
        out.kernel = compiler_.compile(jobs_[i]);
      } catch (const CompileTimeout& e) {
        out.error = e.what();
        out.timed_out = true;
      } catch (const CompileError& e) {
        out.error = std::string(e.what()) + "\n" + e.log();
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      results_[i] = std::move(out);
      failures_[i] = failure;
      done_[i] = 1;
      cv_.notify_all();
    }
  }

  const Compiler& compiler_;
  std::vector<CompileJob> jobs_;
  std::vector<char> done_;
  std::vector<CompileOutcome> results_;
  std::vector<std::exception_ptr> failures_;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
};

WireKernel wire(const CompiledKernel& k, unsigned dynamic_shared) {
  return WireKernel{k.cubin, k.lowered_name, dynamic_shared};
}

const char* check_type(DType t) {
  switch (t) {
    case DType::bf16: return "ktune::bf16";
    case DType::f16: return "ktune::fp16";
    case DType::f32: return "float";
    case DType::i32: return "int";  // not yet filled or compared (MoE ids: see the moe op)
  }
  return "float";
}

struct Candidate {
  Params params;
  std::string key;
  std::vector<std::size_t> jobs;  // indices into the compile pool
};

}  // namespace

SweepResult run_sweep(const SweepOptions& o) {
  const Clock::time_point t0 = Clock::now();

  // ---- validate everything before touching the GPU or the database ----
  const Op& op = get_op(o.op);
  {
    std::vector<DType> allowed = op.dtypes();
    if (std::find(allowed.begin(), allowed.end(), o.dtype) == allowed.end()) {
      std::string list;
      for (DType t : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(t));
      throw InvalidArgument("dtype " + std::string(dtype_name(o.dtype)) + " is not supported by " +
                            std::string(op.name()) + " (allowed: " + list + ")");
    }
  }
  Problem problem = o.shape.empty() ? op.default_problem() : op.parse_problem(o.shape);
  op.check_problem(problem);
  if (o.db_path.empty()) throw InvalidArgument("no database path given");
  const std::filesystem::path db_dir = o.db_path.parent_path();
  if (!o.create_db_directory && !db_dir.empty() && !std::filesystem::is_directory(db_dir))
    throw InvalidArgument("database path " + o.db_path.string() + ": directory " + db_dir.string() +
                          " does not exist");
  make_strategy(o.strategy, {}, 0);  // rejects an unknown strategy name before any work
  if (!(o.compile_timeout_s >= 0) || !std::isfinite(o.compile_timeout_s))
    throw InvalidArgument("compile time limit " + std::to_string(o.compile_timeout_s) +
                          " s is not allowed: expected a finite number of seconds, 0 for none");

  // ---- device (through the worker: the parent never creates a CUDA context) ----
  WorkerClient worker(o.worker_command.empty() ? default_worker_command() : o.worker_command,
                      o.device);
  const DeviceInfo device = worker.device();
  const std::string arch = device.arch();

  if (o.create_db_directory && !db_dir.empty()) std::filesystem::create_directories(db_dir);
  Store store = Store::open(o.db_path, Store::Mode::read_write);
  store.upsert_device(device);
  const std::string device_key = device.key();

  SweepResult res;
  res.device = device;
  res.op = std::string(op.name());
  res.dtype = o.dtype;
  res.problem_key = op.problem_key(problem);
  res.strategy = o.strategy;
  res.min_bytes = op.min_bytes(problem, o.dtype);
  res.flops = op.flops(problem, o.dtype);
  res.copy_bandwidth = store.copy_bandwidth(device_key);
  if (res.copy_bandwidth <= 0) {
    res.copy_bandwidth = worker.measure_copy(120.0);
    store.set_copy_bandwidth(device_key, res.copy_bandwidth);
  }

  SweepRecord sr;
  sr.device_key = device_key;
  sr.op = res.op;
  sr.dtype = o.dtype;
  sr.problem_key = res.problem_key;
  sr.strategy = o.strategy;
  sr.command_line = o.command_line;
  res.sweep_id = store.begin_sweep(sr);

  const std::string template_hash = op.template_hash();
  Space space(op, problem, o.dtype, device);
  res.space_size = space.points().size();
  res.valid_count = space.valid_count();

  // What the database already holds for this key (resume).
  std::map<std::string, TrialRecord> known;
  // A row whose parameters are not a point of today's space (a hand-edited or hostile file) is
  // not resumed: its configuration is measured again. A compile that ran out of time is tried
  // again too, since this run may allow it longer.
  for (TrialRecord& t : store.trials(device_key, res.op, o.dtype, res.problem_key, template_hash).rows) {
    if (t.status == TrialStatus::compile_timeout) continue;
    try {
      op.parse_params(t.params_key);
    } catch (const InvalidArgument&) {
      continue;
    }
    known[t.params_key] = std::move(t);
  }

  TrialRecord base;
  base.sweep_id = res.sweep_id;
  base.device_key = device_key;
  base.op = res.op;
  base.dtype = o.dtype;
  base.problem_key = res.problem_key;
  base.template_hash = template_hash;
  base.nvrtc_version = device.nvrtc_version;

  auto record = [&](const TrialOutcome& t, double compile_s) {
    TrialRecord r = base;
    r.params_key = t.params_key;
    r.status = t.status;
    r.detail = t.detail.substr(0, 4000);
    r.median_us = t.median_us;
    r.spread_pct = t.spread_pct;
    r.repetitions = t.repetitions;
    r.registers = t.resources.registers;
    r.shared_bytes = t.resources.shared_bytes;
    r.local_bytes = t.resources.local_bytes;
    r.spill_bytes = t.resources.spill_stores + t.resources.spill_loads;
    r.compile_seconds = compile_s;
    store.record_trial(r);
  };
  auto from_record = [&](const TrialRecord& r) {
    TrialOutcome t;
    t.params = op.parse_params(r.params_key);
    t.params_key = r.params_key;
    t.status = r.status;
    t.detail = r.detail;
    t.median_us = r.median_us;
    t.spread_pct = r.spread_pct;
    t.repetitions = r.repetitions;
    t.resources.registers = r.registers;
    t.resources.shared_bytes = r.shared_bytes;
    t.resources.local_bytes = r.local_bytes;
    t.resumed = true;
    return t;
  };

  // Every invalid point gets its status and reason.
  for (const SpacePoint& p : space.points()) {
    if (!p.invalid) continue;
    std::string key = op.params_key(p.params);
    TrialOutcome t;
    t.params = p.params;
    t.params_key = key;
    t.status = TrialStatus::invalid;
    t.detail = *p.invalid;
    if (!known.count(key) || o.force) record(t, 0.0);
    res.trials.push_back(t);
  }

  // Candidates: the default configuration first (it is the speedup baseline), then the strategy's.
  const Params default_params = op.default_params(problem, o.dtype, device);
  std::vector<Params> valid = space.valid_points();
  std::unique_ptr<Strategy> strategy = make_strategy(o.strategy, valid, o.seed);
  std::vector<Params> order;
  order.push_back(default_params);
  while (std::optional<Params> p = strategy->next())
    if (*p != default_params) order.push_back(*p);

  std::vector<Candidate> candidates;
  std::vector<CompileJob> jobs;
  std::size_t fresh = 0;
  for (const Params& p : order) {
    std::string key = op.params_key(p);
    auto it = known.find(key);
    if (it != known.end() && !o.force) {
      res.trials.push_back(from_record(it->second));
      continue;
    }
    if (o.budget > 0 && fresh >= o.budget && p != default_params) continue;
    ++fresh;
    Candidate c{p, key, {}};
    std::vector<KernelSource> ks = op.kernels(p, problem, o.dtype);
    for (std::size_t k = 0; k < ks.size(); ++k) {
      CompileJob job{ks[k], arch, {}};
      auto planted = o.planted.find(key);
      if (k == 0 && planted != o.planted.end()) {
        job.source.name_expression = planted->second.name_expression;
        job.source_text = planted->second.source_text;
      }
      c.jobs.push_back(jobs.size());
      jobs.push_back(std::move(job));
    }
    candidates.push_back(std::move(c));
  }

  // Verification kernels go first in the pool: the worker needs them before any candidate.
  std::vector<KernelSource> ref_sources = op.reference_kernels(problem, o.dtype);
  std::vector<CompileJob> all_jobs;
  for (const KernelSource& k : ref_sources) all_jobs.push_back({k, arch, {}});
  all_jobs.push_back({{"common/check.cuh", std::string("ktune::fill_random_kernel<") +
                                               check_type(o.dtype) + ">"}, arch, {}});
  all_jobs.push_back({{"common/check.cuh", std::string("ktune::compare_kernel<") +
                                               check_type(o.dtype) + ">"}, arch, {}});
  all_jobs.push_back({{"common/check.cuh", "ktune::compare_kernel<float>"}, arch, {}});
  const std::size_t offset = all_jobs.size();
  for (CompileJob& j : jobs) all_jobs.push_back(std::move(j));

  // Past the time limit a compile is stopped (its child process is killed): compile_timeout.
  Compiler compiler(o.disk_cache ? (o.cache_dir ? o.cache_dir : Compiler::default_cache_dir())
                                 : std::nullopt,
                    o.compile_timeout_s > 0
                        ? child_builder(o.compile_command.empty() ? default_compile_command()
                                                                  : o.compile_command,
                                        o.compile_timeout_s)
                        : Compiler::Builder());
  if (o.disk_cache && o.warn && !compiler.cache_disabled_reason().empty())
    o.warn(compiler.cache_disabled_reason() + "; kernels compile in memory");
  const Clock::time_point compile_t0 = Clock::now();
  CompilePool pool(compiler, all_jobs, o.jobs);

  ProblemRequest pr;
  pr.op = res.op;
  pr.dtype = o.dtype;
  pr.problem_key = res.problem_key;
  pr.seed = o.seed + 20241121;
  for (std::size_t i = 0; i < ref_sources.size(); ++i) {
    const CompileOutcome& c = pool.wait(i);
    if (!c.kernel)
      throw Error("the reference kernel " + ref_sources[i].name_expression +
                  (c.timed_out ? " did not compile in time: " : " failed to compile: ") + c.error);
    pr.reference.push_back(wire(*c.kernel, 0));
  }
  for (std::size_t i = ref_sources.size(); i < offset; ++i) {
    const CompileOutcome& c = pool.wait(i);
    if (!c.kernel)
      throw Error(std::string(c.timed_out ? "a verification kernel did not compile in time: "
                                          : "a verification kernel failed to compile: ") +
                  c.error);
    const std::size_t k = i - ref_sources.size();
    (k == 0 ? pr.fill : k == 1 ? pr.compare : pr.compare_f32) = wire(*c.kernel, 0);
  }
  worker.set_problem(pr, 300.0);

  TimingSettings timing;
  // Memory-bound problems that fit in L2 would otherwise be timed from the cache.
  timing.flush_l2 = res.flops == 0.0 && res.min_bytes < 4.0 * static_cast<double>(device.l2_bytes);

  auto to_outcome = [](const WorkerClient::Outcome& w, TrialOutcome& t) {
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
  };

  double best_us = 0.0;
  std::size_t done = 0;
  std::map<std::string, EvaluateRequest> requests;  // kept for re-timing the leaders
  for (const Candidate& c : candidates) {
    if (o.time_limit_s > 0 && seconds_since(t0) > o.time_limit_s && c.params != default_params) {
      res.not_measured = candidates.size() - done;
      break;
    }
    TrialOutcome t;
    t.params = c.params;
    t.params_key = c.key;
    EvaluateRequest req;
    req.params_key = c.key;
    req.timing = timing;
    std::vector<KernelResources> resources;
    double compile_s = 0.0;
    std::string compile_error;
    bool compile_timed_out = false;
    for (std::size_t k = 0; k < c.jobs.size(); ++k) {
      const CompileOutcome& co = pool.wait(offset + c.jobs[k]);
      if (!co.kernel) {
        compile_error = co.error;
        compile_timed_out = co.timed_out;
        if (co.timed_out) compile_s += o.compile_timeout_s;  // the time it was given
        break;
      }
      compile_s += co.kernel->seconds;
      resources.push_back(co.kernel->resources);
      req.kernels.push_back(wire(*co.kernel, op.dynamic_shared_bytes(c.params, problem, o.dtype, k)));
    }
    if (!resources.empty()) t.resources = resources.front();
    if (!compile_error.empty()) {
      t.status = compile_timed_out ? TrialStatus::compile_timeout : TrialStatus::compile_error;
      t.detail = compile_error;
    } else if (std::optional<std::string> why =
                   op.invalid_after_compile(c.params, problem, o.dtype, device, resources)) {
      t.status = TrialStatus::invalid;  // rejected from its resources: never launched
      t.detail = *why;
    } else {
      to_outcome(worker.evaluate(req, o.candidate_timeout_s), t);
      if (t.status == TrialStatus::ok) requests[c.key] = req;
    }
    record(t, compile_s);
    strategy->report(c.params, t.status == TrialStatus::ok ? t.median_us
                                                           : std::numeric_limits<double>::infinity());
    if (t.status == TrialStatus::ok && (best_us == 0.0 || t.median_us < best_us)) best_us = t.median_us;
    res.trials.push_back(t);
    ++done;
    if (o.progress) {
      SweepProgress pg;
      pg.done = done;
      pg.total = candidates.size();
      pg.params = c.key;
      pg.status = t.status;
      pg.median_us = t.median_us;
      pg.best_us = best_us;
      pg.phase = "evaluate";
      o.progress(pg);
    }
  }
  res.compile_seconds = seconds_since(compile_t0);

  // ---- choose: re-time the leaders back to back, so noise cannot pick the winner ----
  std::vector<TrialOutcome*> ok;
  for (TrialOutcome& t : res.trials)
    if (t.status == TrialStatus::ok) ok.push_back(&t);
  std::sort(ok.begin(), ok.end(),
            [](const TrialOutcome* a, const TrialOutcome* b) { return a->median_us < b->median_us; });
  std::vector<TrialOutcome*> leaders(ok.begin(), ok.begin() + std::min<std::size_t>(ok.size(),
                                                       static_cast<std::size_t>(std::max(o.retime_top, 1))));
  if (leaders.size() > 1) {
    TimingSettings longer = timing;
    longer.min_seconds = 0.25;
    longer.min_reps = 50;
    for (TrialOutcome* t : leaders) {
      EvaluateRequest req;
      auto it = requests.find(t->params_key);
      if (it != requests.end()) {
        req = it->second;
      } else {  // resumed from the database: compile (a cache hit, normally) again
        req.params_key = t->params_key;
        std::vector<KernelSource> ks = op.kernels(t->params, problem, o.dtype);
        try {
          for (std::size_t k = 0; k < ks.size(); ++k)
            req.kernels.push_back(wire(compiler.compile({ks[k], arch, {}}),
                                       op.dynamic_shared_bytes(t->params, problem, o.dtype, k)));
        } catch (const CompileError&) {
          continue;  // (a timeout included) it keeps the time recorded when it was measured
        }
      }
      req.timing = longer;
      WorkerClient::Outcome w = worker.evaluate(req, o.candidate_timeout_s);
      if (w.end == WorkerEnd::replied && w.evaluation.status == EvalStatus::ok) {
        t->median_us = w.evaluation.median_us;
        t->repetitions = w.evaluation.repetitions;
        t->spread_pct = w.evaluation.median_us > 0
                            ? (w.evaluation.p90_us - w.evaluation.p10_us) / w.evaluation.median_us * 100.0
                            : 0.0;
      }
      if (o.progress) {
        SweepProgress pg;
        pg.phase = "retime";
        pg.params = t->params_key;
        pg.median_us = t->median_us;
        o.progress(pg);
      }
    }
    std::sort(leaders.begin(), leaders.end(), [](const TrialOutcome* a, const TrialOutcome* b) {
      return a->median_us < b->median_us;
    });
  }
  if (!leaders.empty()) {
    res.best = *leaders.front();
    BestRecord b;
    b.device_key = device_key;
    b.op = res.op;
    b.dtype = o.dtype;
    b.problem_key = res.problem_key;
    b.params_key = res.best->params_key;
    b.template_hash = template_hash;
    b.median_us = res.best->median_us;
    store.set_best(b);
  }
  std::string default_key = op.params_key(default_params);
  for (const TrialOutcome& t : res.trials) {
    if (t.params_key == default_key) res.default_config = t;
    ++res.counts[t.status];
  }
  res.worker_starts = worker.starts();
  res.seconds = seconds_since(t0);
  return res;
}

}  // namespace ktune
