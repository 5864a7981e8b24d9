#include "cli/sweep_plan.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "search/strategy.hpp"
#include "templates/op.hpp"
#include "tuner/plan.hpp"

namespace ktune::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string duration_text(double s) {
  if (s < 90) return fmt("%.0f s", s);
  if (s < 5400) return fmt("%.0f min", s / 60);
  return fmt("%.1f h", s / 3600);
}

/// Progress over the whole plan: problems done (swept or skipped) and left, and the time left
/// from the problems this run swept so far.
struct PlanClock {
  std::size_t total = 0;
  std::size_t done = 0;
  std::size_t swept = 0;
  Clock::time_point start = Clock::now();

  void starting(const std::string& what, bool tty) const {
    std::string eta = "time left known after the first problem";
    if (swept > 0)
      eta = "about " + duration_text(seconds_since(start) / static_cast<double>(swept) *
                                     static_cast<double>(total - done)) + " left";
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "plan: problem %zu/%zu: %s (%zu done, %zu left, %s)\n", done + 1, total,
                 shown(what, 300).c_str(), done, total - done, eta.c_str());
  }
};

/// The device whose rows count as done. A real sweep asks the driver (attributes only, no
/// context: the worker owns the GPU). A dry run uses the GPU when there is one, else the devices
/// the database records: a problem is then done only when every one of them has it.
std::vector<std::string> resume_devices(const SweepOptions& o, const Store* store, bool dry_run,
                                        std::string& note) {
  if (!dry_run) return {query_device(o.device).key()};
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

void json_line(Json& j, const PlanLine& l, const std::string& key, const char* state) {
  j.begin_object().field("line", static_cast<long long>(l.line)).field("op", l.op);
  j.field("dtype", dtype_name(l.dtype)).field("problem", key).field("state", state).end_object();
}

}  // namespace

int sweep_plan(const PlanRun& run, SweepOptions base) {
  // Everything is checked before anything starts: the plan, the shard, each line's strategy.
  const Plan whole = load_plan(run.path);
  Shard shard;
  if (!run.shard.empty())
    shard = parse_shard(run.shard, [](const char* name) { return std::getenv(name); });
  const Plan plan = shard_plan(whole, shard);
  for (const PlanLine& l : plan.lines) check_strategy_name(get_op(l.op), base.strategy);

  std::optional<Store> store;
  std::error_code ec;
  if (std::filesystem::exists(base.db_path, ec))
    store.emplace(Store::open(base.db_path, Store::Mode::read_only));
  std::string note;
  const std::vector<std::string> devices =
      resume_devices(base, store ? &*store : nullptr, run.dry_run, note);
  const std::vector<PlanLineState> states =
      resume(plan, store ? &*store : nullptr, devices, base.force);
  store.reset();  // the sweeps open it for writing

  std::size_t todo = 0, skipped = 0;
  for (const PlanLineState& s : states) {
    todo += s.todo.problem_keys.size();
    skipped += s.done.size();
  }
  const std::string slice = run.shard.empty()
                                ? std::string("the whole plan")
                                : "shard " + std::to_string(shard.index) + "/" +
                                      std::to_string(shard.count) + " (lines k with k % " +
                                      std::to_string(shard.count) + " == " +
                                      std::to_string(shard.index) + ")";

  if (run.dry_run) {
    if (run.json) {
      Json j;
      j.begin_object().field("plan", run.path).field("shard_index", static_cast<long long>(shard.index));
      j.field("shard_count", static_cast<long long>(shard.count)).field("database", base.db_path.string());
      j.key("problems").begin_array();
      for (const PlanLineState& s : states) {
        for (const std::string& k : s.done) json_line(j, s.todo, k, "done");
        for (const std::string& k : s.todo.problem_keys) json_line(j, s.todo, k, "todo");
      }
      j.end_array().field("todo", static_cast<long long>(todo));
      j.field("done", static_cast<long long>(skipped)).end_object();
      std::printf("%s\n", j.str().c_str());
      return 0;
    }
    std::printf("plan %s, %s: %zu problems on %zu lines; %zu to sweep, %zu in the database\n",
                shown(run.path).c_str(), slice.c_str(), plan.problems(), plan.lines.size(), todo,
                skipped);
    if (!note.empty()) std::printf("  (%s)\n", note.c_str());
    for (const PlanLineState& s : states) {
      for (const std::string& k : s.done)
        std::printf("skip   line %-4zu %s %s %s (in the database)\n", s.todo.line,
                    s.todo.op.c_str(), dtype_name(s.todo.dtype), k.c_str());
      for (const std::string& k : s.todo.problem_keys)
        std::printf("sweep  line %-4zu %s %s %s\n", s.todo.line, s.todo.op.c_str(),
                    dtype_name(s.todo.dtype), k.c_str());
    }
    return 0;
  }

  std::fprintf(stderr, "plan %s, %s: %zu problems; %zu to sweep, %zu already in %s\n",
               shown(run.path).c_str(), slice.c_str(), plan.problems(), todo, skipped,
               shown(base.db_path.string()).c_str());
  PlanClock clock;
  clock.total = plan.problems();
  std::vector<SweepResult> results;
  std::size_t not_swept = 0;        // lines the time limit left out
  std::size_t unswept_results = 0;  // problems of a line the time limit stopped
  bool all_best = true;
  for (const PlanLineState& s : states) {
    for (const std::string& k : s.done) {
      if (run.tty) std::fprintf(stderr, "\r\033[K");
      std::fprintf(stderr, "plan: skipping %s %s %s: its best is in the database (--force sweeps "
                   "it again)\n", s.todo.op.c_str(), dtype_name(s.todo.dtype), k.c_str());
      ++clock.done;
    }
    if (s.todo.problem_keys.empty()) continue;
    SweepOptions o = base;
    o.op = s.todo.op;
    o.dtype = s.todo.dtype;
    o.shape = s.todo.shape;
    o.buckets = s.todo.buckets;
    if (base.time_limit_s > 0) {
      o.time_limit_s = base.time_limit_s - seconds_since(clock.start);
      if (o.time_limit_s <= 0) {
        not_swept += s.todo.problem_keys.size();
        continue;
      }
    }
    // A new bucket of a moe line means the one before it finished.
    std::size_t at = 0;
    const auto inner = base.progress;
    o.progress = [&](const SweepProgress& p) {
      if (p.problem_index != at) {
        clock.done += p.problem_index - at;
        clock.swept += p.problem_index - at;
        at = p.problem_index;
        clock.starting(s.todo.op + " " + dtype_name(s.todo.dtype) + " " + p.problem, run.tty);
      }
      if (inner) inner(p);
    };
    clock.starting(s.todo.op + " " + dtype_name(s.todo.dtype) + " " + s.todo.problem_keys.front(),
                   run.tty);
    std::vector<SweepResult> line = run_sweeps(o);
    clock.done += s.todo.problem_keys.size() - at;
    clock.swept += s.todo.problem_keys.size() - at;
    for (SweepResult& r : line) {
      if (r.not_measured > 0 && r.trials.empty()) ++unswept_results;
      all_best = all_best && r.best.has_value();
      results.push_back(std::move(r));
    }
  }
  if (run.tty) std::fprintf(stderr, "\r\033[K");

  if (run.json) {
    Json j;
    j.begin_array();
    for (const SweepResult& r : results) {
      j.begin_object().field("op", r.op).field("dtype", dtype_name(r.dtype)).field("problem", r.problem_key);
      if (r.best) j.field("params", r.best->params_key).field("median_us", r.best->median_us);
      else j.key("params").null();
      j.field("seconds", r.seconds).end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%-16s %-5s %12s %12s %8s  %s\n", "op", "dtype", "best us", "default us",
                "speedup", "problem");
    for (const SweepResult& r : results) {
      const bool has_default =
          r.best && r.default_config && r.default_config->status == TrialStatus::ok;
      std::printf("%-16s %-5s %12s %12s %8s  %s\n", r.op.c_str(), dtype_name(r.dtype),
                  r.best ? fmt("%.2f", r.best->median_us).c_str()
                         : (r.not_measured ? "not swept" : "none"),
                  has_default ? fmt("%.2f", r.default_config->median_us).c_str() : "-",
                  has_default
                      ? (fmt("%.2f", r.default_config->median_us / r.best->median_us) + "x").c_str()
                      : "-",
                  r.problem_key.c_str());
    }
    std::printf("plan %s, %s: %zu swept, %zu skipped (in the database), %zu not swept (time "
                "limit: run again to resume) in %s; stored in %s\n",
                shown(run.path).c_str(), slice.c_str(), results.size() - unswept_results, skipped,
                not_swept + unswept_results, duration_text(seconds_since(clock.start)).c_str(),
                shown(base.db_path.string()).c_str());
  }
  return all_best && not_swept + unswept_results == 0 ? 0 : 1;
}

}  // namespace ktune::cli
