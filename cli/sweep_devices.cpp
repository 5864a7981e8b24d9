#include "cli/sweep_devices.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli/output.hpp"
#include "tuner/devices.hpp"

namespace ktune::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t terminal_width() {
  winsize w{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 120;
}

std::string cut(const std::string& s, std::size_t max) {
  return s.size() <= max ? s : s.substr(0, max - 3) + "...";
}

}  // namespace

std::string candidate_line(const SweepProgress& p) {
  // With several problems (token buckets) every line says which one: "[problem 3/13 t=4] ".
  std::string where;
  if (p.problems > 1)
    where = "[problem " + std::to_string(p.problem_index + 1) + "/" + std::to_string(p.problems) +
            " " + p.problem + "] ";
  if (p.phase == "retime") return where + "re-timing " + p.params + ": " + fmt("%.2f", p.median_us) + " us";
  std::string line = where + "[" + std::to_string(p.done) + "/" + std::to_string(p.total) + "] " +
                     p.params + ": " + status_name(p.status);
  if (p.status == TrialStatus::ok) line += " " + fmt("%.2f", p.median_us) + " us";
  if (p.phase == "resume") line += " (in the database)";
  return line;
}

std::string gpu_list(const std::vector<SweepDevice>& devices) {
  std::string out = devices.size() > 1 ? "GPUs " : "GPU ";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i > 0) out += i + 1 == devices.size() ? " and " : ", ";
    out += std::to_string(devices[i].ordinal);
  }
  return out;
}

SweepBoard::SweepBoard(std::string prefix, std::vector<SweepDevice> devices, bool tty,
                       std::size_t total, std::size_t done,
                       std::function<void(const SweepProgress&)> single)
    : prefix_(std::move(prefix)),
      devices_(std::move(devices)),
      slots_(devices_.size()),
      tty_(tty),
      total_(total),
      done_(done),
      announced_(done),
      single_(std::move(single)) {}

SweepBoard::Slot& SweepBoard::slot(int ordinal) {
  for (std::size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].ordinal == ordinal) return slots_[i];
  return slots_.front();  // every ordinal the runner reports is one of ours
}

std::string SweepBoard::eta() const {
  if (swept_ == 0) return "time left known after the first problem";
  return "about " +
         duration_text(seconds_since(start_) / static_cast<double>(swept_) *
                       static_cast<double>(total_ - std::min(done_, total_))) +
         " left";
}

void SweepBoard::clear_status() {
  if (tty_) std::fprintf(stderr, "\r\033[K");
}

void SweepBoard::draw_status() {
  if (!tty_ || !several()) return;
  std::string s = std::to_string(done_) + "/" + std::to_string(total_) + " done, " +
                  std::to_string(total_ - std::min(done_, total_)) + " left, " + eta();
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const Slot& sl = slots_[i];
    s += " | GPU " + std::to_string(devices_[i].ordinal) + ": ";
    if (sl.problem.empty()) {
      s += "idle";
      continue;
    }
    s += cut(sl.problem, 40);
    if (sl.has_progress) {
      s += " " + std::to_string(sl.last.done) + "/" + std::to_string(sl.last.total);
      if (sl.last.best_us > 0) s += " best " + fmt("%.2f", sl.last.best_us) + " us";
    }
  }
  std::fprintf(stderr, "\r\033[K%s", shown(cut(s, terminal_width() - 1), 4096).c_str());
}

void SweepBoard::announce(std::size_t number, int ordinal, const std::string& problem) {
  clear_status();
  std::fprintf(stderr, "%sproblem %zu/%zu%s: %s (%zu done, %zu left, %s)\n", prefix_.c_str(),
               number, total_, several() ? (" on GPU " + std::to_string(ordinal)).c_str() : "",
               shown(problem, 300).c_str(), done_, total_ - std::min(done_, total_),
               eta().c_str());
  draw_status();
}

void SweepBoard::count_done(std::size_t n) {
  done_ += n;
  swept_ += n;
}

void SweepBoard::line(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  clear_status();
  std::fprintf(stderr, "%s\n", text.c_str());
  draw_status();
}

void SweepBoard::started(std::size_t job, const SweepDevice& d) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slot(d.ordinal);
  s = Slot{};
  s.job = job;
  s.problem = jobs_ ? (*jobs_)[job].what + (*jobs_)[job].problem_keys.front() : std::string();
  // A job tried again on another GPU keeps its number.
  if (numbers_.size() <= job) numbers_.resize(job + 1, 0);
  if (numbers_[job] == 0) numbers_[job] = ++announced_;
  announce(numbers_[job], d.ordinal, s.problem);
}

void SweepBoard::progress(std::size_t job, int ordinal, const SweepProgress& p) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slot(ordinal);
  if (p.problem_index > s.at) {
    // The next problem of a job that sweeps several (a plan line's buckets on one GPU): the one
    // before it finished.
    count_done(p.problem_index - s.at);
    s.at = p.problem_index;
    s.problem = (jobs_ ? (*jobs_)[job].what : std::string()) + p.problem;
    announce(++announced_, ordinal, s.problem);
  }
  s.last = p;
  s.has_progress = true;
  if (!several()) {
    if (single_) single_(p);
    return;
  }
  if (tty_) {
    draw_status();
    return;
  }
  // A warm-start point says whose best it is, as a single sweep's lines do.
  const std::string warm =
      p.warm_from.empty() ? "" : " (warm start: the best of " + p.warm_from + ")";
  std::fprintf(stderr, "GPU %d: %s\n", ordinal, shown(candidate_line(p) + warm, 1000).c_str());
}

void SweepBoard::finished(std::size_t job, const SweepDevice& d) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slot(d.ordinal);
  const std::size_t problems = jobs_ ? (*jobs_)[job].problem_keys.size() : 1;
  // Problems a time limit left at the end of the job count as done too (not measured).
  count_done(problems - std::min(problems, s.at));
  announced_ += problems - std::min(problems, s.at + 1);
  s = Slot{};
  draw_status();
}

void SweepBoard::failed(std::size_t job, const SweepDevice& d, const std::string& error,
                        bool again) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slot(d.ordinal);
  const std::size_t problems = jobs_ ? (*jobs_)[job].problem_keys.size() : 1;
  clear_status();
  std::fprintf(stderr, "%sproblem %zu/%zu%s: %s failed: %s%s\n", prefix_.c_str(),
               numbers_.size() > job ? numbers_[job] : 0, total_,
               several() ? (" on GPU " + std::to_string(d.ordinal)).c_str() : "",
               shown(s.problem, 300).c_str(), shown(error, 1000).c_str(),
               again ? "; another GPU of its kind tries it" : "");
  if (!again) {
    done_ += problems - std::min(problems, s.at);
    announced_ += problems - std::min(problems, s.at + 1);
  }
  s = Slot{};
  draw_status();
}

void SweepBoard::dropped(const SweepDevice& d, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  clear_status();
  std::fprintf(stderr, "GPU %d (%s) takes no more problems: %s\n", d.ordinal,
               shown(d.name).c_str(), shown(why, 1000).c_str());
  draw_status();
}

void SweepBoard::close() {
  std::lock_guard<std::mutex> lock(mu_);
  clear_status();
}

std::vector<DeviceJobOutcome> sweep_jobs(const std::vector<DeviceSweepJob>& jobs,
                                         const std::vector<SweepDevice>& devices,
                                         const SweepOptions& base, SweepBoard& board) {
  board.set_jobs(&jobs);
  std::vector<DeviceJob> queue;
  for (const DeviceSweepJob& j : jobs)
    queue.push_back({j.device_key, j.what + (j.problem_keys.empty() ? "" : j.problem_keys.front())});
  const int threads = compile_threads_per_device(base.jobs, devices.size());
  const auto left = [&] { return base.time_limit_s - seconds_since(board.start()); };

  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    SweepOptions o = jobs[job].options;
    o.device = d.ordinal;
    o.jobs = threads;
    if (base.time_limit_s > 0) {
      o.time_limit_s = left();
      if (o.time_limit_s <= 0) return std::vector<SweepResult>();  // not swept: the time is up
    }
    o.progress = [&board, job, ordinal = d.ordinal](const SweepProgress& p) {
      board.progress(job, ordinal, p);
    };
    o.warn = [&board](const std::string& w) {
      board.line("ktune sweep: warning: " + shown(w, 500));
    };
    return run_sweeps(o);
  };
  DeviceEvents events;
  events.started = [&](std::size_t job, const SweepDevice& d) { board.started(job, d); };
  events.finished = [&](std::size_t job, const SweepDevice& d) { board.finished(job, d); };
  events.failed = [&](std::size_t job, const SweepDevice& d, const std::string& error,
                      bool again) { board.failed(job, d, error, again); };
  events.dropped = [&](const SweepDevice& d, const std::string& why) { board.dropped(d, why); };
  DeviceRunOptions options;
  if (base.time_limit_s > 0) options.stop = [&] { return left() <= 0; };
  std::vector<DeviceJobOutcome> out = sweep_on_devices(queue, devices, sweep, events, options);
  board.close();
  return out;
}

}  // namespace ktune::cli
