#include "cli/sweep_plan.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli/output.hpp"
#include "cli/sweep_devices.hpp"
#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "search/strategy.hpp"
#include "templates/op.hpp"
#include "tuner/plan.hpp"

namespace ktune::cli {
namespace {

using Clock = std::chrono::steady_clock;

/// GPUs of one fingerprint key, and the plan as the database holds it for that key: best rows
/// are keyed by device, so each kind sweeps what its own rows lack.
struct Kind {
  std::string key;
  std::vector<SweepDevice> devices;
  std::vector<PlanLineState> states;
  std::size_t todo = 0, done = 0;
};

/// The devices whose rows count as done for a dry run without --devices: the GPU when there is
/// one, else the devices the database records (a problem is then done only when every one of
/// them has it).
std::vector<std::string> dry_run_devices(const SweepOptions& o, const Store* store,
                                         std::string& note) {
  if (Driver::available() && device_count() > o.device) {
    const DeviceInfo d = query_device(o.device);
    note = "resume decisions for device " + std::to_string(o.device) + ", " + d.name;
    return {d.key()};
  }
  if (!store) {
    note = "the database does not exist yet: nothing to skip";
    return {};
  }
  std::vector<std::string> keys;
  std::string names;
  for (const DeviceInfo& d : store->devices().rows) {
    keys.push_back(d.key());
    names += (names.empty() ? "" : "; ") + d.name;
  }
  if (keys.empty())
    note = "the database records no device yet: nothing to skip";
  else
    note = "no GPU here: a problem counts as done when the database has it for " +
           std::string(keys.size() > 1 ? "every one of its devices (" : "its device (") + names +
           ")";
  return keys;
}

/// plan_resume over several devices: done only where done for each.
std::vector<PlanLineState> resume(const Plan& plan, const Store* store,
                                  const std::vector<std::string>& devices, bool force) {
  std::vector<PlanLineState> out;
  if (!store || devices.empty()) {
    for (const PlanLine& l : plan.lines) out.push_back({l, {}});
    return out;
  }
  out = plan_resume(plan, *store, devices.front(), force);
  for (std::size_t d = 1; d < devices.size(); ++d) {
    const std::vector<PlanLineState> other = plan_resume(plan, *store, devices[d], force);
    for (std::size_t i = 0; i < out.size(); ++i) {
      // Keep the first device's state where both agree; a key still to do on any device stays.
      PlanLineState merged{plan.lines[i], {}};
      merged.todo.buckets.clear();
      merged.todo.problem_keys.clear();
      const PlanLine& l = plan.lines[i];
      for (std::size_t k = 0; k < l.problem_keys.size(); ++k) {
        const auto is_done = [&](const PlanLineState& s) {
          for (const std::string& key : s.done)
            if (key == l.problem_keys[k]) return true;
          return false;
        };
        if (is_done(out[i]) && is_done(other[i])) {
          merged.done.push_back(l.problem_keys[k]);
        } else {
          merged.todo.problem_keys.push_back(l.problem_keys[k]);
          if (!l.buckets.empty()) merged.todo.buckets.push_back(l.buckets[k]);
        }
      }
      out[i] = std::move(merged);
    }
  }
  return out;
}

void json_line(Json& j, const PlanLine& l, const std::string& key, const char* state,
               const Kind& kind, bool name_kind) {
  j.begin_object().field("line", static_cast<long long>(l.line)).field("op", l.op);
  j.field("dtype", dtype_name(l.dtype)).field("problem", key).field("state", state);
  if (name_kind) {
    j.field("device_key", kind.key).key("gpus").begin_array();
    for (const SweepDevice& d : kind.devices) j.value(d.ordinal);
    j.end_array();
  }
  j.end_object();
}

/// "NVIDIA H100 80GB HBM3 (GPUs 0 and 2)"
std::string kind_name(const Kind& k) {
  return shown(k.devices.front().name) + " (" + gpu_list(k.devices) + ")";
}

/// Which GPUs sweep and whose rows count as done. With --devices: one kind per fingerprint key
/// among them. Without: the --device GPU (asked of the driver: attributes only, no context, the
/// worker owns the GPU), or for a dry run dry_run_devices().
std::vector<Kind> kinds_of(const PlanRun& run, const SweepOptions& base, const Plan& plan,
                           const Store* store, std::string& note) {
  std::vector<Kind> kinds;
  if (!run.devices.empty()) {
    for (const SweepDevice& d : run.devices) {
      auto k = std::find_if(kinds.begin(), kinds.end(), [&](const Kind& x) { return x.key == d.key; });
      if (k == kinds.end()) k = kinds.insert(kinds.end(), Kind{d.key, {}, {}});
      k->devices.push_back(d);
    }
    for (Kind& k : kinds) k.states = resume(plan, store, {k.key}, base.force);
    if (run.dry_run)
      note = kinds.size() > 1 ? "each kind of GPU sweeps what its own rows lack"
                              : "resume decisions for " + kind_name(kinds.front());
  } else if (!run.dry_run) {
    const DeviceInfo d = query_device(base.device);
    kinds.push_back(Kind{d.key(), {SweepDevice{base.device, d.key(), d.name}}, {}});
    kinds.front().states = resume(plan, store, {d.key()}, base.force);
  } else {
    const std::vector<std::string> keys = dry_run_devices(base, store, note);
    kinds.push_back(Kind{});
    kinds.front().states = resume(plan, store, keys, base.force);
  }
  for (Kind& k : kinds)
    for (const PlanLineState& s : k.states) {
      k.todo += s.todo.problem_keys.size();
      k.done += s.done.size();
    }
  return kinds;
}

/// The plan (the run's shard of it), every line's strategy checked before anything starts.
Plan checked_plan(const PlanRun& run, const SweepOptions& base, Shard& shard) {
  const Plan whole = load_plan(run.path);
  if (!run.shard.empty())
    shard = parse_shard(run.shard, [](const char* name) { return std::getenv(name); });
  Plan plan = shard_plan(whole, shard);
  for (const PlanLine& l : plan.lines) {
    try {
      check_strategy_name(get_op(l.op), base.strategy);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(run.path + " line " + std::to_string(l.line) + ": " + e.what() +
                            "; sweep that op's lines with another --strategy (one plan per "
                            "strategy), or leave --strategy out for each op's own");
    }
  }
  return plan;
}

/// What a run covers, for its first and last lines.
struct Scope {
  std::string slice;     // "the whole plan" or "shard I/N (...)"
  std::string per_kind;  // " for each of N kinds of GPU", or empty
  std::string note;      // how resume decisions were made (dry runs)
  std::size_t todo = 0, skipped = 0;
  bool several_kinds = false;
};

Scope scope_of(const PlanRun& run, const Shard& shard, const std::vector<Kind>& kinds,
               std::string note) {
  Scope sc;
  for (const Kind& k : kinds) {
    sc.todo += k.todo;
    sc.skipped += k.done;
  }
  sc.several_kinds = kinds.size() > 1;
  sc.slice = run.shard.empty() ? std::string("the whole plan")
                               : "shard " + std::to_string(shard.index) + "/" +
                                     std::to_string(shard.count) + " (lines k with k % " +
                                     std::to_string(shard.count) + " == " +
                                     std::to_string(shard.index) + ")";
  sc.per_kind =
      sc.several_kinds ? " for each of " + std::to_string(kinds.size()) + " kinds of GPU" : "";
  sc.note = std::move(note);
  return sc;
}

/// --dry-run: every problem of the plan, to sweep or in the database, as text or JSON.
void print_dry_run(const PlanRun& run, const SweepOptions& base, const Plan& plan,
                   const Shard& shard, const std::vector<Kind>& kinds, const Scope& sc) {
  if (run.json) {
    Json j;
    j.begin_object().field("plan", run.path).field("shard_index", static_cast<long long>(shard.index));
    j.field("shard_count", static_cast<long long>(shard.count)).field("database", base.db_path.string());
    j.key("problems").begin_array();
    for (const Kind& k : kinds)
      for (const PlanLineState& s : k.states) {
        for (const std::string& p : s.done) json_line(j, s.todo, p, "done", k, !run.devices.empty());
        for (const std::string& p : s.todo.problem_keys)
          json_line(j, s.todo, p, "todo", k, !run.devices.empty());
      }
    j.end_array().field("todo", static_cast<long long>(sc.todo));
    j.field("done", static_cast<long long>(sc.skipped)).end_object();
    std::printf("%s\n", j.str().c_str());
    return;
  }
  std::printf("plan %s, %s: %zu problems on %zu lines%s; %zu to sweep, %zu in the database\n",
              shown(run.path).c_str(), sc.slice.c_str(), plan.problems(), plan.lines.size(),
              sc.per_kind.c_str(), sc.todo, sc.skipped);
  if (!sc.note.empty()) std::printf("  (%s)\n", sc.note.c_str());
  for (const Kind& k : kinds) {
    if (sc.several_kinds)
      std::printf("%s: %zu to sweep, %zu in the database\n", kind_name(k).c_str(), k.todo, k.done);
    for (const PlanLineState& s : k.states) {
      for (const std::string& p : s.done)
        std::printf("skip   line %-4zu %s %s %s (in the database)\n", s.todo.line,
                    s.todo.op.c_str(), dtype_name(s.todo.dtype), p.c_str());
      for (const std::string& p : s.todo.problem_keys)
        std::printf("sweep  line %-4zu %s %s %s\n", s.todo.line, s.todo.op.c_str(),
                    dtype_name(s.todo.dtype), p.c_str());
    }
  }
}

/// The sweeps to run, in plan order (the problems in the database said on the board). A kind
/// with one GPU sweeps a line at a time (one worker start for a moe line's buckets); with
/// several, a problem at a time, so that the buckets spread too.
std::vector<DeviceSweepJob> plan_jobs(const Plan& plan, const std::vector<Kind>& kinds,
                                      const SweepOptions& base, bool several_kinds,
                                      SweepBoard& board) {
  std::vector<DeviceSweepJob> jobs;
  for (std::size_t i = 0; i < plan.lines.size(); ++i) {
    for (const Kind& k : kinds) {
      const PlanLineState& s = k.states[i];
      for (const std::string& p : s.done)
        board.line("plan: skipping " + s.todo.op + " " + dtype_name(s.todo.dtype) + " " + p +
                   (several_kinds ? " on " + kind_name(k) : std::string()) +
                   ": its best is in the database (--force sweeps it again)");
      if (s.todo.problem_keys.empty()) continue;
      DeviceSweepJob job;
      job.options = base;
      job.options.op = s.todo.op;
      job.options.dtype = s.todo.dtype;
      job.options.shape = s.todo.shape;
      job.options.buckets.clear();
      job.device_key = k.key;
      job.what = s.todo.op + " " + dtype_name(s.todo.dtype) + " ";
      if (k.devices.size() == 1) {
        job.options.buckets = s.todo.buckets;
        job.problem_keys = s.todo.problem_keys;
        jobs.push_back(std::move(job));
        continue;
      }
      for (std::size_t b = 0; b < s.todo.problem_keys.size(); ++b) {
        DeviceSweepJob one = job;
        if (!s.todo.buckets.empty()) one.options.buckets = {s.todo.buckets[b]};
        one.problem_keys = {s.todo.problem_keys[b]};
        jobs.push_back(std::move(one));
      }
    }
  }
  return jobs;
}

/// One problem's outcome, in plan order, whichever GPU swept it.
struct Row {
  const SweepResult* result = nullptr;  // null: failed or not swept
  const DeviceSweepJob* job = nullptr;
  std::string problem;
  int gpu = -1;
  std::string error;
};

struct Tally {
  std::vector<Row> rows;
  std::size_t swept = 0, not_swept = 0, failed = 0;
  bool all_best = true;
};

Tally tally(const std::vector<DeviceSweepJob>& jobs,
            const std::vector<DeviceJobOutcome>& outcomes) {
  Tally t;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const DeviceJobOutcome& o = outcomes[i];
    if (o.swept()) {
      for (const SweepResult& r : o.results) {
        // A result with nothing measured is a problem the time limit left out.
        if (r.not_measured > 0 && r.trials.empty()) ++t.not_swept;
        else ++t.swept;
        t.all_best = t.all_best && r.best.has_value();
        t.rows.push_back({&r, &jobs[i], r.problem_key, o.device, {}});
      }
      t.not_swept += jobs[i].problem_keys.size() - std::min(jobs[i].problem_keys.size(), o.results.size());
    } else if (!o.errors.empty()) {
      t.failed += jobs[i].problem_keys.size();
      std::string error;
      for (const std::string& e : o.errors) error += (error.empty() ? "" : "; ") + e;
      for (const std::string& p : jobs[i].problem_keys) t.rows.push_back({nullptr, &jobs[i], p, -1, error});
    } else {
      t.not_swept += jobs[i].problem_keys.size();
    }
  }
  return t;
}

/// The results: JSON, or a table (a gpu column with several GPUs) and the run's last line.
void print_plan_results(const PlanRun& run, const SweepOptions& base, const Scope& sc,
                        const Tally& t, bool several, double seconds) {
  if (run.json) {
    Json j;
    j.begin_array();
    for (const Row& row : t.rows) {
      const DeviceSweepJob& job = *row.job;
      j.begin_object().field("op", job.options.op).field("dtype", dtype_name(job.options.dtype));
      j.field("problem", row.problem);
      if (row.result && row.result->best)
        j.field("params", row.result->best->params_key).field("median_us", row.result->best->median_us);
      else
        j.key("params").null();
      if (row.result) j.field("seconds", row.result->seconds).field("gpu", row.gpu);
      else j.field("error", row.error);
      j.end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
    return;
  }
  std::vector<std::vector<std::string>> table_rows = {
      {"op", "dtype", "best us", "default us", "speedup", "problem"}};
  if (several) table_rows.front().insert(table_rows.front().begin(), "gpu");
  for (const Row& row : t.rows) {
    const SweepResult* r = row.result;
    const bool has_default =
        r && r->best && r->default_config && r->default_config->status == TrialStatus::ok;
    std::vector<std::string> cells = {
        row.job->options.op, dtype_name(row.job->options.dtype),
        !r ? "failed"
           : r->best ? fmt("%.2f", r->best->median_us) : (r->not_measured ? "not swept" : "none"),
        has_default ? fmt("%.2f", r->default_config->median_us) : "-",
        has_default ? fmt("%.2f", r->default_config->median_us / r->best->median_us) + "x" : "-",
        row.problem};
    if (several) cells.insert(cells.begin(), row.gpu >= 0 ? std::to_string(row.gpu) : "-");
    table_rows.push_back(std::move(cells));
  }
  if (several) {
    std::printf("%s", table(table_rows).c_str());
  } else {
    // One GPU: the columns as they always were.
    for (const auto& c : table_rows)
      std::printf("%-16s %-5s %12s %12s %8s  %s\n", c[0].c_str(), c[1].c_str(), c[2].c_str(),
                  c[3].c_str(), c[4].c_str(), shown(c[5]).c_str());
  }
  std::printf("plan %s, %s: %zu swept, %zu skipped (in the database), %zu not swept (time "
              "limit: run again to resume)%s in %s; stored in %s\n",
              shown(run.path).c_str(), sc.slice.c_str(), t.swept, sc.skipped, t.not_swept,
              t.failed ? (", " + std::to_string(t.failed) + " failed (above)").c_str() : "",
              duration_text(seconds).c_str(), shown(base.db_path.string()).c_str());
}

}  // namespace

int sweep_plan(const PlanRun& run, SweepOptions base) {
  // Everything is checked before anything starts: the plan, the shard, each line's strategy.
  Shard shard;
  const Plan plan = checked_plan(run, base, shard);

  std::optional<Store> store;
  std::error_code ec;
  if (std::filesystem::exists(base.db_path, ec))
    store.emplace(Store::open(base.db_path, Store::Mode::read_only));
  std::string note;
  const std::vector<Kind> kinds = kinds_of(run, base, plan, store ? &*store : nullptr, note);
  store.reset();  // the sweeps open it for writing
  const Scope sc = scope_of(run, shard, kinds, std::move(note));

  if (run.dry_run) {
    print_dry_run(run, base, plan, shard, kinds, sc);
    return 0;
  }

  std::vector<SweepDevice> devices;
  for (const Kind& k : kinds) devices.insert(devices.end(), k.devices.begin(), k.devices.end());
  const bool several = devices.size() > 1;
  std::fprintf(stderr, "plan %s, %s: %zu problems%s; %zu to sweep, %zu already in %s%s\n",
               shown(run.path).c_str(), sc.slice.c_str(), plan.problems(), sc.per_kind.c_str(),
               sc.todo, sc.skipped, shown(base.db_path.string()).c_str(),
               several ? (" (on " + gpu_list(devices) + ")").c_str() : "");
  SweepBoard board("plan: ", devices, run.tty, plan.problems() * kinds.size(), sc.skipped,
                   base.progress);
  const std::vector<DeviceSweepJob> jobs = plan_jobs(plan, kinds, base, sc.several_kinds, board);
  const std::vector<DeviceJobOutcome> outcomes = sweep_jobs(jobs, devices, base, board);
  const Tally t = tally(jobs, outcomes);
  print_plan_results(run, base, sc, t, several, seconds_since(board.start()));
  for (const Row& row : t.rows)
    if (!row.error.empty())
      std::fprintf(stderr, "ktune sweep: %s %s %s not swept: %s\n", row.job->options.op.c_str(),
                   dtype_name(row.job->options.dtype), shown(row.problem).c_str(),
                   shown(row.error, 2000).c_str());
  return t.all_best && t.not_swept + t.failed == 0 ? 0 : 1;
}

}  // namespace ktune::cli
