// The sweep's stages: validate the options; start the worker (the device) and open the
// database; compile the verification kernels once; then per problem (the shape, or each token
// bucket): set it up on the worker (measure.cpp), let the strategy propose batches, measure each
// candidate or resume it from the database (trials.cpp), and choose the best after re-timing the
// leaders.
#include "tuner/sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "templates/params_over.hpp"
#include "tuner/compile_child.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/devices.hpp"
#include "tuner/measure.hpp"
#include "tuner/trials.hpp"
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

}  // namespace

bool shape_names_dim(const std::string& shape, std::string_view dim) {
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = shape.find(',', at);
    const std::string item =
        shape.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const std::size_t eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == dim) return true;
    if (comma == std::string::npos) return false;
    at = comma + 1;
  }
}

std::vector<Problem> sweep_problems(const Op& op, const SweepOptions& o) {
  const std::string_view dim = op.bucket_dim();
  if (!o.buckets.empty() && dim.empty())
    throw InvalidArgument("op " + std::string(op.name()) +
                          " has no bucket dimension: give one problem with --shape");
  if (!o.buckets.empty() && shape_names_dim(o.shape, dim))
    throw InvalidArgument("the shape sets " + std::string(dim) + " and buckets are given: give "
                          "one of them");
  // A shape without the bucket dim stands for every bucket: each sets it in turn.
  std::string shape = o.shape;
  if (!o.buckets.empty() && !shape.empty())
    shape += "," + std::string(dim) + "=" + std::to_string(o.buckets.front());
  const Problem base = shape.empty() ? op.default_problem() : op.parse_problem(shape);
  op.check_problem(base);
  if (o.buckets.empty()) return {base};
  std::size_t index = op.dims().size();
  for (std::size_t i = 0; i < op.dims().size(); ++i)
    if (op.dims()[i].name == dim) index = i;
  if (index == op.dims().size())
    throw Error("op " + std::string(op.name()) + ": bucket dim " + std::string(dim) + " is not a dim");
  std::vector<Problem> out;
  for (std::int64_t v : o.buckets) {
    Problem p = base;
    p.values[index] = v;
    op.check_problem(p);  // names the value and the allowed range
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
  }
  return out;
}

namespace {

void validate(const Op& op, const SweepOptions& o) {
  const std::vector<DType> allowed = op.dtypes();
  if (std::find(allowed.begin(), allowed.end(), o.dtype) == allowed.end()) {
    std::string list;
    for (DType t : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw InvalidArgument("dtype " + std::string(dtype_name(o.dtype)) + " is not supported by " +
                          std::string(op.name()) + " (allowed: " + list + ")");
  }
  if (o.db_path.empty()) throw InvalidArgument("no database path given");
  const std::filesystem::path db_dir = o.db_path.parent_path();
  if (!o.create_db_directory && !db_dir.empty() && !std::filesystem::is_directory(db_dir))
    throw InvalidArgument("database path " + o.db_path.string() + ": directory " + db_dir.string() +
                          " does not exist");
  // Rejects an unknown strategy name, or staged for an op without stages, before any work.
  check_strategy_name(op, o.strategy);
  check_given_params(op, o.params);
  if (!(o.compile_timeout_s >= 0) || !std::isfinite(o.compile_timeout_s))
    throw InvalidArgument("compile time limit " + std::to_string(o.compile_timeout_s) +
                          " s is not allowed: expected a finite number of seconds, 0 for none");
}

/// What every problem of one sweep shares.
struct Session {
  const SweepOptions& o;
  const Op& op;
  WorkerClient& worker;
  const DeviceInfo& device;
  Store& store;
  const Compiler& compiler;
  CompilePool& pool;
  std::vector<WireKernel> checks;
  double copy_bandwidth = 0.0;
  Clock::time_point t0;
};

/// Every invalid point with its status and reason, where the strategy walks the whole space
/// (exhaustive or random, without a budget below the valid points). The staged and model
/// searches, and any of a smaller budget, measure a few valid points: recording the rest would
/// be most of the database (a model sweep of one attention problem proposed ~28 of 120 valid
/// points among ~12 000 invalid ones; 50 random sweeps of 3 points each wrote 665 000 invalid
/// rows; an exhaustive sweep of one decode problem with --budget 1, ~4 000), and `ktune space`
/// lists them with their reasons.
void record_invalid_points(const Op& op, const Space& space, std::size_t budget, TrialBook& book,
                           SweepResult& res) {
  if (res.strategy == "staged" || res.strategy == "model" || res.strategy == "given") return;
  if (budget > 0 && budget < space.valid_count()) return;
  for (const SpacePoint& p : space.points()) {
    if (!p.invalid) continue;
    TrialOutcome t;
    t.params = p.params;
    t.params_key = op.params_key(p.params);
    t.status = TrialStatus::invalid;
    t.detail = *p.invalid;
    if (!book.known(t.params_key)) book.record(t, 0.0);
    res.trials.push_back(std::move(t));
  }
}

/// One problem's measuring: where the candidates go and what has been counted so far.
struct Batches {
  Session& s;
  Strategy& strategy;
  ProblemBench& bench;
  TrialBook& book;
  SweepResult& res;
  std::size_t index = 0;   // of the sweep's problems
  std::size_t count = 1;
  double best_us = 0.0;
  std::size_t done = 0;    // candidates finished
  std::size_t known = 0;   // candidates queued so far
  std::size_t fresh = 0;   // of which not in the database: what the budget counts
};

bool among(const std::vector<Params>& list, const Params& p) {
  return std::find(list.begin(), list.end(), p) != list.end();
}

/// The candidates of `batch` to measure: those the budget still allows (a point the database
/// has costs nothing), less `skip`; `forced` are measured whatever the budget.
std::vector<Params> within_budget(Batches& b, const std::vector<Params>& batch,
                                  const std::vector<Params>& forced, const Params* skip) {
  std::vector<Params> todo;
  for (const Params& p : batch) {
    if (skip && p == *skip) continue;
    if (!b.book.known(b.s.op.params_key(p))) {
      if (b.s.o.budget > 0 && b.fresh >= b.s.o.budget && !among(forced, p)) continue;
      ++b.fresh;
    }
    todo.push_back(p);
  }
  return todo;
}

/// One candidate measured, or resumed from the database; then told to the strategy (observed
/// when it did not propose it), shown as progress and kept in the result.
void evaluate(Batches& b, const Params& p, bool proposed, const WarmStartPoint* warm) {
  const Op& op = b.s.op;
  TrialOutcome t;
  if (const TrialOutcome* r = b.book.known(op.params_key(p))) {
    t = *r;
  } else {
    double compile_s = 0.0;
    t = b.bench.measure(p, compile_s);
    b.book.record(t, compile_s);
  }
  const double us =
      t.status == TrialStatus::ok ? t.median_us : std::numeric_limits<double>::infinity();
  if (proposed)
    b.strategy.report(p, us);
  else
    b.strategy.observe(p, us);
  if (t.status == TrialStatus::ok && (b.best_us == 0.0 || t.median_us < b.best_us))
    b.best_us = t.median_us;
  ++b.done;
  if (warm) b.res.warm_start.push_back(*warm);
  if (b.s.o.progress) {
    SweepProgress pg;
    pg.problem = b.res.problem_key;
    pg.problem_index = b.index;
    pg.problems = b.count;
    pg.done = b.done;
    pg.total = b.known;
    pg.params = t.params_key;
    pg.status = t.status;
    pg.median_us = t.median_us;
    pg.best_us = b.best_us;
    pg.phase = t.resumed ? "resume" : "evaluate";
    if (warm) pg.warm_from = warm->problem_key;
    b.s.o.progress(pg);
  }
  b.res.trials.push_back(std::move(t));
}

/// Evaluates `todo` in order (compiled in the background); false once the time limit stops it
/// (what is left counts as not measured). `warm`: the warm-start points, matched by params.
bool evaluate_all(Batches& b, const std::vector<Params>& todo, bool proposed,
                  const std::vector<Params>& forced, const std::vector<WarmStartPoint>& warm) {
  b.known += todo.size();
  b.bench.queue(todo);
  for (const Params& p : todo) {
    if (b.s.o.time_limit_s > 0 && seconds_since(b.s.t0) > b.s.o.time_limit_s &&
        !among(forced, p)) {
      b.res.not_measured += b.known - b.done;
      return false;
    }
    const WarmStartPoint* w = nullptr;
    for (const WarmStartPoint& x : warm)
      if (x.params == p) w = &x;
    evaluate(b, p, proposed, w);
  }
  return true;
}

/// The default configuration first (the speedup baseline, measured whatever the budget and the
/// time limit) and the given points (SweepOptions::params, likewise), then the warm-start points,
/// all observed by the strategy; then, unless points were given without a strategy, the
/// strategy's batches, each reported before it is asked again; within the budget and the time
/// limit.
void measure_batches(Batches& b, const Params& default_params, const std::vector<Params>& given,
                     const std::vector<WarmStartPoint>& warm) {
  std::vector<Params> forced = {default_params};
  for (const Params& p : given)
    if (!among(forced, p)) forced.push_back(p);
  std::vector<Params> first = forced;
  for (const WarmStartPoint& w : warm)
    if (!among(first, w.params)) first.push_back(w.params);
  if (!evaluate_all(b, within_budget(b, first, forced, nullptr), false, forced, warm)) return;
  if (b.res.strategy == "given") return;  // the default and the given points alone
  for (;;) {
    const std::vector<Params> batch = b.strategy.next_batch();
    if (batch.empty()) return;
    if (!evaluate_all(b, within_budget(b, batch, {}, &default_params), true, {}, {})) return;
    if (b.s.o.budget > 0 && b.fresh >= b.s.o.budget) return;
  }
}

/// SweepOptions::params over this problem's default (templates/params_over.hpp), one for each
/// text, with the reason where the point is invalid for the problem on this device.
struct GivenPoint {
  Params params;
  std::optional<std::string> invalid;
};

std::vector<GivenPoint> given_points(Session& s, const Problem& problem,
                                     const Params& default_params) {
  std::vector<GivenPoint> out;
  for (const std::string& text : s.o.params) {
    GivenPoint g{parse_params_over(s.op, text, default_params), std::nullopt};
    g.invalid = s.op.invalid_reason(g.params, problem, s.o.dtype, s.device);
    out.push_back(std::move(g));
  }
  return out;
}

/// The outcomes of the given points, one for each, in order: a measured point's trial (as
/// re-timed), an invalid one's reason.
std::vector<TrialOutcome> given_outcomes(const Op& op, const std::vector<GivenPoint>& given,
                                         const std::vector<TrialOutcome>& trials) {
  std::vector<TrialOutcome> out;
  for (const GivenPoint& g : given) {
    TrialOutcome t;
    t.params = g.params;
    t.params_key = op.params_key(g.params);
    if (g.invalid) {
      t.status = TrialStatus::invalid;
      t.detail = *g.invalid;
    } else {
      const auto x = std::find_if(trials.begin(), trials.end(), [&](const TrialOutcome& y) {
        return y.params_key == t.params_key;
      });
      // Given points are measured whatever the budget and the time limit: always found.
      if (x == trials.end()) throw Error("given point " + t.params_key + " was not measured");
      t = *x;
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// The warm-start points of this problem (none when turned off): the bests of the nearest tuned
/// problems in the sweep's database, up to the count besides the default (measured first anyway;
/// kept, so that it is shown as a neighbour's best too). Rows it cannot read are a warning, not a
/// failure.
std::vector<WarmStartPoint> warm_start_of(Session& s, const Space& space,
                                          const Params& default_params) {
  if (!s.o.warm_start || s.o.warm_start_count == 0) return {};
  std::vector<RowIssue> skipped;
  std::vector<WarmStartPoint> out;
  std::size_t others = 0;
  for (WarmStartPoint& w :
       warm_start_points(s.store, space, s.o.warm_start_count + 1, &skipped)) {
    const bool is_default = w.params == default_params;
    if (!is_default && others == s.o.warm_start_count) continue;
    others += is_default ? 0 : 1;
    out.push_back(std::move(w));
  }
  if (!skipped.empty() && s.o.warn)
    s.o.warn("warm start: " + std::to_string(skipped.size()) + " best rows of " +
             s.store.path().string() + " could not be read (ktune db check lists them)");
  return out;
}

/// The best row the database holds for this problem (same device, op, dtype and kernel code)
/// when this run did not propose its configuration (a budget, a time limit, another strategy),
/// as a resumed outcome; nullopt when there is none or it is no longer a valid point.
std::optional<TrialOutcome> stored_best(Session& s, const TrialRecord& base,
                                        const Problem& problem, const SweepResult& res) {
  const std::optional<BestRecord> row =
      s.store.best(base.device_key, base.op, base.dtype, base.problem_key, base.template_hash);
  if (!row) return std::nullopt;
  for (const TrialOutcome& t : res.trials)
    if (t.params_key == row->params_key) return std::nullopt;  // a candidate already
  TrialOutcome t;
  try {
    t.params = s.op.parse_params(row->params_key);
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
  if (s.op.invalid_reason(t.params, problem, base.dtype, s.device)) return std::nullopt;
  t.params_key = row->params_key;
  t.median_us = row->median_us;
  t.resumed = true;
  return t;
}

/// Re-times the leaders in interleaved rounds, so noise cannot pick the winner, and stores the
/// best. The database's earlier best is re-timed beside them: a run that measures less than an
/// earlier one never replaces a faster stored best with its own (res.stored_best).
void choose_best(Session& s, ProblemBench& bench, const TrialRecord& base, const Problem& problem,
                 const std::string& default_key, const std::vector<Params>& given,
                 SweepResult& res) {
  std::vector<TrialOutcome*> ok;
  TrialOutcome* default_trial = nullptr;
  for (TrialOutcome& t : res.trials) {
    if (t.status != TrialStatus::ok) continue;
    ok.push_back(&t);
    if (t.params_key == default_key) default_trial = &t;
  }
  const auto faster = [](const TrialOutcome* a, const TrialOutcome* b) {
    return a->median_us < b->median_us;
  };
  std::sort(ok.begin(), ok.end(), faster);
  ok.resize(std::min<std::size_t>(ok.size(), static_cast<std::size_t>(std::max(s.o.retime_top, 1))));
  // The default is re-timed beside the leaders: "tuned vs default" then compares two times of
  // the same phase (clocks drift over a long sweep), and the best is never slower than the
  // default it replaces.
  if (default_trial && std::find(ok.begin(), ok.end(), default_trial) == ok.end())
    ok.push_back(default_trial);
  // The given points too (ktune sweep --params): their times then compare with the default's.
  for (const Params& p : given) {
    const std::string key = s.op.params_key(p);
    for (TrialOutcome& t : res.trials)
      if (t.params_key == key && t.status == TrialStatus::ok &&
          std::find(ok.begin(), ok.end(), &t) == ok.end()) {
        ok.push_back(&t);
        break;
      }
  }
  res.stored_best = stored_best(s, base, problem, res);
  if (res.stored_best) {
    if (ok.empty()) return;  // nothing of this run passed: the stored row stays as it is
    ok.push_back(&*res.stored_best);
  }
  if (ok.size() > 1) {
    bench.retime(ok);
    std::sort(ok.begin(), ok.end(), faster);
  }
  if (ok.empty()) return;
  res.best = *ok.front();
  BestRecord b;
  b.device_key = base.device_key;
  b.op = res.op;
  b.dtype = res.dtype;
  b.problem_key = res.problem_key;
  b.params_key = res.best->params_key;
  b.template_hash = base.template_hash;
  b.median_us = res.best->median_us;
  s.store.set_best(b);
}

SweepResult sweep_problem(Session& s, const Problem& problem, std::size_t index,
                          std::size_t count) {
  const SweepOptions& o = s.o;
  const Op& op = s.op;
  const Clock::time_point start = Clock::now();
  SweepResult res;
  res.device = s.device;
  res.op = std::string(op.name());
  res.dtype = o.dtype;
  res.problem_key = op.problem_key(problem);
  // "given": only the default and SweepOptions::params were measured (no search).
  res.strategy = !o.strategy.empty()  ? o.strategy
                 : !o.params.empty() ? std::string("given")
                                     : std::string(op.default_strategy());
  res.min_bytes = op.min_bytes(problem, o.dtype);
  res.flops = op.flops(problem, o.dtype);
  res.copy_bandwidth = s.copy_bandwidth;

  SweepRecord sr;
  sr.device_key = s.device.key();
  sr.op = res.op;
  sr.dtype = o.dtype;
  sr.problem_key = res.problem_key;
  sr.strategy = res.strategy;
  sr.command_line = o.command_line;
  res.sweep_id = s.store.begin_sweep(sr);

  TrialRecord base;
  base.sweep_id = res.sweep_id;
  base.device_key = sr.device_key;
  base.op = res.op;
  base.dtype = o.dtype;
  base.problem_key = res.problem_key;
  base.template_hash = op.template_hash();
  base.nvrtc_version = s.device.nvrtc_version;
  base.device_ordinal = o.device;  // the GPU each trial runs on (--devices spreads problems)
  base.pci_bus_id = pci_bus_id(o.device);
  TrialBook book(s.store, op, base, o.force);

  const Space space(op, problem, o.dtype, s.device);
  res.space_size = space.size();
  res.space_enumerated = space.enumerated();
  res.valid_count = space.valid_count();
  record_invalid_points(op, space, o.budget, book, res);

  ProblemBench bench(o, op, problem, s.device, s.worker, s.pool, s.compiler, s.checks);
  const Params default_params = op.default_params(problem, o.dtype, s.device);
  std::unique_ptr<Strategy> strategy =
      make_space_strategy(space, o.strategy, default_params, o.seed, o.budget);
  Batches batches{s, *strategy, bench, book, res, index, count};
  const std::vector<GivenPoint> given = given_points(s, problem, default_params);
  std::vector<Params> measured_given;
  for (const GivenPoint& g : given)
    if (!g.invalid && !among(measured_given, g.params)) measured_given.push_back(g.params);
  measure_batches(batches, default_params, measured_given,
                  warm_start_of(s, space, default_params));
  const std::string default_key = op.params_key(default_params);
  choose_best(s, bench, base, problem, default_key, measured_given, res);
  res.given = given_outcomes(op, given, res.trials);

  for (const TrialOutcome& t : res.trials) {
    if (t.params_key == default_key) res.default_config = t;
    ++res.counts[t.status];
  }
  res.compile_seconds = seconds_since(start);
  res.worker_starts = s.worker.starts();
  res.seconds = seconds_since(start);
  return res;
}

}  // namespace

void check_given_params(const Op& op, const std::vector<std::string>& texts) {
  // Each problem's default is the base later; any base of listed values finds the same errors.
  Params any;
  for (const Tunable& t : op.tunables()) any.values.push_back(t.values.front());
  for (const std::string& text : texts) parse_params_over(op, text, any);
}

std::vector<SweepResult> run_sweeps(const SweepOptions& o) {
  const Clock::time_point t0 = Clock::now();

  // ---- validate everything before touching the GPU or the database ----
  const Op& op = get_op(o.op);
  validate(op, o);
  const std::vector<Problem> problems = sweep_problems(op, o);

  // ---- device (through the worker: the parent never creates a CUDA context) ----
  WorkerClient worker(o.worker_command.empty() ? default_worker_command() : o.worker_command,
                      o.device);
  const DeviceInfo device = worker.device();

  const std::filesystem::path db_dir = o.db_path.parent_path();
  if (o.create_db_directory && !db_dir.empty()) std::filesystem::create_directories(db_dir);
  Store store = Store::open(o.db_path, Store::Mode::read_write);
  store.upsert_device(device);
  double copy_bandwidth = store.copy_bandwidth(device.key());
  if (copy_bandwidth <= 0) {
    copy_bandwidth = worker.measure_copy(120.0);
    store.set_copy_bandwidth(device.key(), copy_bandwidth);
  }

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
  CompilePool pool(compiler, o.jobs);

  // The verification kernels, once for every problem.
  Session s{o, op, worker, device, store, compiler, pool, {}, copy_bandwidth, t0};
  {
    const std::vector<KernelSource> sources = check_kernel_sources(o.dtype);
    std::vector<CompileJob> jobs;
    for (const KernelSource& k : sources) jobs.push_back({k, device.arch(), {}});
    const std::size_t first = pool.submit(std::move(jobs));
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const CompileOutcome& c = pool.wait(first + i);
      if (!c.kernel)
        throw Error(std::string(c.timed_out ? "a verification kernel did not compile in time: "
                                            : "a verification kernel failed to compile: ") +
                    c.error);
      s.checks.push_back(WireKernel{c.kernel->cubin, c.kernel->lowered_name, 0});
    }
  }

  std::vector<SweepResult> results;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    results.push_back(sweep_problem(s, problems[i], i, problems.size()));
    if (o.time_limit_s > 0 && seconds_since(t0) > o.time_limit_s) {
      // The problems left are reported as not measured at all (run again to resume).
      for (std::size_t j = i + 1; j < problems.size(); ++j) {
        SweepResult r;
        r.device = device;
        r.op = std::string(op.name());
        r.dtype = o.dtype;
        r.problem_key = op.problem_key(problems[j]);
        r.strategy = results.back().strategy;
        r.copy_bandwidth = copy_bandwidth;
        r.min_bytes = op.min_bytes(problems[j], o.dtype);
        r.flops = op.flops(problems[j], o.dtype);
        r.not_measured = 1;
        results.push_back(std::move(r));
      }
      break;
    }
  }
  return results;
}

SweepResult run_sweep(const SweepOptions& o) {
  if (!o.buckets.empty())
    throw InvalidArgument("run_sweep tunes one problem; use run_sweeps for buckets");
  return run_sweeps(o).front();
}

}  // namespace ktune
