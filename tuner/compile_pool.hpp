// Compiles kernels on background threads while the sweep measures: jobs are queued in batches
// (a strategy's proposals) and waited for one by one, in any order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/core/compiler.hpp"

namespace ktune {

class CompilePool {
 public:
  /// `threads` 0: the number of cores.
  CompilePool(const Compiler& compiler, int threads);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Queues `jobs` behind those already queued; returns the index of the first.
  std::size_t submit(std::vector<CompileJob> jobs);
  /// Blocks until job `i` is done. A compile error or timeout is its outcome; any other failure
  /// (the compile child cannot start) is rethrown here.
  const CompileOutcome& wait(std::size_t i);

 private:
  struct Slot {
    CompileJob job;
    CompileOutcome outcome;
    std::exception_ptr failure;
    bool done = false;
  };
  void work();

  const Compiler& compiler_;
  std::size_t max_threads_;
  std::deque<Slot> slots_;  // stable addresses as jobs are added
  std::size_t next_ = 0;    // first job not yet taken
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable queued_, finished_;
  std::vector<std::thread> threads_;
};

}  // namespace ktune
