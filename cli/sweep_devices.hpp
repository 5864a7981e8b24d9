// ktune sweep over one or several GPUs: the jobs of a plan, a miss log or token buckets run
// through tuner/multi_sweep.hpp, with their progress on stderr.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tuner/multi_sweep.hpp"
#include "tuner/sweep.hpp"

namespace ktune::cli {

/// One candidate's plain progress line (no newline): "[problem 2/13 t=4] [12/40] PARAMS: ok 3.21 us".
std::string candidate_line(const SweepProgress& p);

/// One sweep call of a run: `options` carries its op, dtype, shape and buckets (the rest comes
/// from the run's base options), for one GPU of `device_key`.
struct DeviceSweepJob {
  SweepOptions options;
  std::string device_key;
  std::string what;                       // "op dtype " before a problem key, for messages
  std::vector<std::string> problem_keys;  // the problems it sweeps, in order
};

/// Progress on stderr over every problem of a run. With one GPU the lines are a single sweep's
/// (`single` prints each candidate: a bar on a terminal). With several, each line names its GPU,
/// and a terminal keeps one status line at the bottom: the problems done and left, the time left,
/// and what each GPU is sweeping.
class SweepBoard {
 public:
  /// `prefix` starts each problem's line ("plan: "); `total` counts every problem of the run,
  /// `done` those already done (skipped).
  SweepBoard(std::string prefix, std::vector<SweepDevice> devices, bool tty, std::size_t total,
             std::size_t done, std::function<void(const SweepProgress&)> single);

  bool several() const { return devices_.size() > 1; }
  std::chrono::steady_clock::time_point start() const { return start_; }
  /// A line of its own (a skipped problem, a warning).
  void line(const std::string& text);
  void set_jobs(const std::vector<DeviceSweepJob>* jobs) { jobs_ = jobs; }

  // The runner's events and each candidate's progress.
  void started(std::size_t job, const SweepDevice& d);
  void progress(std::size_t job, int ordinal, const SweepProgress& p);
  void finished(std::size_t job, const SweepDevice& d);
  void failed(std::size_t job, const SweepDevice& d, const std::string& error, bool again);
  void dropped(const SweepDevice& d, const std::string& why);
  /// Clears the status line.
  void close();

 private:
  struct Slot {                     // what one GPU is doing
    std::string problem;            // empty: idle
    std::size_t job = 0;
    std::size_t at = 0;             // index of the job's problem being swept
    SweepProgress last;
    bool has_progress = false;
  };
  Slot& slot(int ordinal);
  void announce(std::size_t number, int ordinal, const std::string& problem);
  void count_done(std::size_t n);
  std::string eta() const;
  void clear_status();
  void draw_status();

  std::mutex mu_;
  std::string prefix_;
  std::vector<SweepDevice> devices_;
  std::vector<Slot> slots_;
  bool tty_;
  std::size_t total_, done_, swept_ = 0, announced_ = 0;
  std::vector<std::size_t> numbers_;  // per job: its first problem's number in the run, 0: none
  std::function<void(const SweepProgress&)> single_;
  const std::vector<DeviceSweepJob>* jobs_ = nullptr;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Runs `jobs` on `devices` (run_sweeps on each GPU, --jobs split between them, the time limit of
/// `base` over the whole run, measured from the board's start) with progress on `board`.
/// Outcomes in `jobs` order.
std::vector<DeviceJobOutcome> sweep_jobs(const std::vector<DeviceSweepJob>& jobs,
                                         const std::vector<SweepDevice>& devices,
                                         const SweepOptions& base, SweepBoard& board);

/// "GPU 0", or "GPUs 0, 1 and 3".
std::string gpu_list(const std::vector<SweepDevice>& devices);

}  // namespace ktune::cli
