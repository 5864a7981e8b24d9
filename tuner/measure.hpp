// Measuring one problem: the worker holds its inputs and reference; candidates are compiled
// through the shared pool (queued a batch at a time), verified and timed; the leaders are
// re-timed in interleaved rounds before the best is chosen.
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

/// The order in which round `round` (0-based) re-times `leaders` leaders: forward in even
/// rounds, backward in odd ones (A B C, C B A, A B C).
std::vector<std::size_t> retime_order(std::size_t leaders, int round);
/// The median of one leader's per-round medians (the mean of the middle two for an even count;
/// 0 for none).
double median_of_rounds(std::vector<double> medians);

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
  /// Re-times `leaders` in interleaved rounds (a leader resumed from the database is compiled
  /// again: normally a cache hit) and sets each one's median to the median of its rounds.
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
