// Measuring one problem: the worker holds its inputs and reference; candidates are compiled
// through the shared pool (queued a batch at a time), verified and timed; the leaders are
// re-timed back to back before the best is chosen.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "templates/op.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/sweep.hpp"
#include "tuner/worker_client.hpp"

namespace ktune {

/// The common/check.cuh kernels for `dtype`, in CheckKernel order.
std::vector<KernelSource> check_kernel_sources(DType dtype);

class ProblemBench {
 public:
  /// Compiles the op's reference kernels and sets the problem on the worker (fresh inputs, the
  /// reference run once).
  ProblemBench(const SweepOptions& o, const Op& op, Problem problem, const DeviceInfo& device,
               WorkerClient& worker, CompilePool& pool, const Compiler& compiler,
               const std::vector<WireKernel>& checks);

  /// Queues the compiles of the candidates not queued yet, in order.
  void queue(const std::vector<Params>& candidates);
  /// Waits for a queued candidate's kernels, then verifies and times it on the worker.
  TrialOutcome measure(const Params& params, double& compile_seconds);
  /// Re-times `leaders` back to back with longer timings (a leader resumed from the database is
  /// compiled again: normally a cache hit) and updates their medians.
  void retime(const std::vector<TrialOutcome*>& leaders);

 private:
  const SweepOptions& o_;
  const Op& op_;
  Problem problem_;
  DeviceInfo device_;
  WorkerClient& worker_;
  CompilePool& pool_;
  const Compiler& compiler_;
  TimingSettings timing_;
  std::map<std::string, std::vector<std::size_t>> jobs_;  // params key -> pool indices
  std::map<std::string, EvaluateRequest> requests_;       // measured ok, for re-timing
};

}  // namespace ktune
