// Sweeps spread over several GPUs. Each GPU gets a thread that takes whole jobs (a plan line, a
// token bucket, a miss-log entry) from its kind's queue, in order, and runs each through the
// caller's sweep function: in production run_sweeps with the GPU's ordinal, so every GPU has its
// own worker process and compile pool while the compile cache and the database are shared. A
// faster GPU simply takes more jobs. A job that fails on one GPU goes back to the queue for
// another GPU of the same kind.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tuner/devices.hpp"
#include "tuner/sweep.hpp"

namespace ktune {

/// One unit of work: the problems of one sweep call.
struct DeviceJob {
  std::string device_key;  // swept on one GPU with this fingerprint key (best rows are keyed by
                           // device, so GPUs of another kind get jobs of their own)
  std::string label;       // for messages, e.g. "moe bf16 e=8,k=2,h=4096,i=14336,t=64"
};

/// How one job ended.
struct DeviceJobOutcome {
  std::vector<SweepResult> results;  // the sweep function's, once it succeeded
  int device = -1;                   // ordinal of the GPU that swept it; -1: none did
  std::vector<std::string> errors;   // one line per failed attempt: "GPU 1 (NAME): what"
  bool swept() const { return device >= 0; }
};

/// What the runner reports as it goes. Each call is made with the runner's lock held, so calls
/// never overlap; they must not throw.
struct DeviceEvents {
  std::function<void(std::size_t job, const SweepDevice&)> started;
  std::function<void(std::size_t job, const SweepDevice&)> finished;
  /// `again`: the job went back to the queue for another GPU of its kind; otherwise every GPU of
  /// its kind has failed it or been dropped, and it is reported with its errors.
  std::function<void(std::size_t job, const SweepDevice&, const std::string& error, bool again)>
      failed;
  /// A GPU that failed `failures_to_drop` jobs in a row takes no more (never the last of its
  /// kind).
  std::function<void(const SweepDevice&, const std::string& why)> dropped;
};

struct DeviceRunOptions {
  int failures_to_drop = 3;   // consecutive failed jobs after which a GPU takes no more, while
                              // another GPU of its kind still does
  std::function<bool()> stop;  // asked before each job is taken (a time limit): once true, jobs
                               // not yet started stay unswept, without errors
};

/// Sweeps job `job` on `device` (run_sweeps in production, a fake in tests); throws on failure.
using SweepOnDevice =
    std::function<std::vector<SweepResult>(std::size_t job, const SweepDevice& device)>;

/// Runs every job on one GPU of its key: one thread per device, each taking the first job of its
/// key's queue (in `jobs` order) that it has not failed yet. A job that throws is retried on
/// another GPU of its key that has not tried it; once none is left it is reported with every
/// attempt's error. Returns one outcome per job, in `jobs` order, whichever GPU ran it. Throws
/// InvalidArgument, before anything runs, when a job's key has no GPU or a GPU is listed twice.
std::vector<DeviceJobOutcome> sweep_on_devices(const std::vector<DeviceJob>& jobs,
                                               const std::vector<SweepDevice>& devices,
                                               const SweepOnDevice& sweep,
                                               const DeviceEvents& events = {},
                                               const DeviceRunOptions& options = {});

}  // namespace ktune
