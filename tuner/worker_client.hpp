// The parent's handle on a benchmark worker process: starts it, sends requests, enforces
// timeouts, and notices crashes. A dead or killed worker is restarted on the next request,
// with the device and problem set up again.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "tuner/protocol.hpp"

namespace ktune {

/// How one request ended.
enum class WorkerEnd { replied, crashed, timed_out };

class WorkerClient {
 public:
  /// `command`: the worker executable and its arguments (e.g. {"/usr/bin/ktune", "__worker"}).
  WorkerClient(std::vector<std::string> command, int device_ordinal);
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  /// Starts the worker and returns its device's fingerprint. Throws NoDevice / Error.
  const DeviceInfo& device();
  /// Device-to-device copy bandwidth in bytes/s.
  double measure_copy(double timeout_s);
  /// Sets the problem (remembered, and sent again to any restarted worker). Throws on failure.
  void set_problem(const ProblemRequest& request, double timeout_s);

  struct Outcome {
    WorkerEnd end = WorkerEnd::replied;
    Evaluation evaluation;   // when replied
    std::string detail;      // when crashed or timed out
  };
  /// Verifies and times one candidate; a crash or timeout kills the worker (restarted lazily).
  Outcome evaluate(const EvaluateRequest& request, double timeout_s);

  /// Number of worker processes started so far.
  int starts() const { return starts_; }

 private:
  void start();
  void stop(bool kill_now);
  // Sends a request and waits for the reply; returns how it ended.
  WorkerEnd request(MessageType type, const std::string& payload, double timeout_s,
                    MessageType& reply_type, std::string& reply, std::string& detail);
  void ensure_ready(double timeout_s);

  std::vector<std::string> command_;
  int ordinal_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  int starts_ = 0;
  bool problem_sent_ = false;
  std::optional<DeviceInfo> device_;
  std::optional<std::string> problem_payload_;
};

}  // namespace ktune
