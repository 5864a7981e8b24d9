// Timing a batch of launches back to back on the GPU, whatever the host's launch rate.
//
// The worker times each run of a candidate between two events. When a run is shorter than what
// the host needs to enqueue it (two event records and the op's launches: a few microseconds, more
// while the sweep's compile pool loads every core), the GPU drains the queue and each event pair
// measures the host's launch interval instead of the kernels. QueueHold puts a one-thread kernel
// in front of a batch that waits until the host, having enqueued the whole batch, sets a flag in
// mapped pinned memory; the batch then runs from a full queue.
#pragma once

#include <cuda.h>

#include "runtime/core/driver.hpp"

namespace ktune {

class QueueHold {
 public:
  /// Loads the hold kernel (PTX, compiled by the driver) and maps a pinned flag. Throws when the
  /// driver cannot (no mapped host memory, PTX refused): the caller then times without a hold.
  QueueHold();
  ~QueueHold();
  QueueHold(const QueueHold&) = delete;
  QueueHold& operator=(const QueueHold&) = delete;

  /// Enqueues on `stream` a kernel that waits (at most `limit_ns`) for the next release().
  void hold(CUstream stream, unsigned long long limit_ns = kDefaultLimitNs);
  /// Lets the kernel of the last hold() finish (a host store; no driver call).
  void release();
  /// After the stream passed the last hold: whether its kernel gave up waiting (the host took
  /// longer than the limit to enqueue the batch, or the flag never reached the GPU).
  bool timed_out() const;

  static constexpr unsigned long long kDefaultLimitNs = 100'000'000;  // 0.1 s

 private:
  Module module_;
  CUfunction kernel_ = nullptr;
  volatile unsigned* host_ = nullptr;  // [0]: released sequence, [1]: last timed-out sequence
  CUdeviceptr device_ = 0;
  unsigned sequence_ = 0;
};

}  // namespace ktune
