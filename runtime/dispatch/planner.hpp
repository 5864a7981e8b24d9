// Runtime::Impl: plans each (device, op, dtype, problem) once -- lookup, compile or cache load,
// module load -- and launches planned problems without allocating, querying or compiling.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "templates/op.hpp"

namespace ktune {

constexpr std::size_t kMaxDims = 8;
constexpr std::size_t kMaxTensors = 16;

/// Fixed-size key of a plan: hashing it allocates nothing.
struct PlanKey {
  int op = 0;
  int dtype = 0;
  int device = 0;
  int ndims = 0;
  std::array<std::int64_t, kMaxDims> dims{};
  bool operator==(const PlanKey& o) const {
    return op == o.op && dtype == o.dtype && device == o.device && ndims == o.ndims && dims == o.dims;
  }
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const noexcept {
    std::uint64_t h = 1469598103934665603ULL;
    auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    mix(static_cast<std::uint64_t>(k.op));
    mix(static_cast<std::uint64_t>(k.dtype));
    mix(static_cast<std::uint64_t>(k.device));
    for (int i = 0; i < k.ndims; ++i) mix(static_cast<std::uint64_t>(k.dims[static_cast<std::size_t>(i)]));
    return static_cast<std::size_t>(h);
  }
};

/// A loaded kernel shared by every plan that uses the same instantiation.
struct LoadedKernel {
  Module module;
  CUfunction function = nullptr;
};

struct Plan {
  const Op* op = nullptr;
  DType dtype = DType::bf16;
  Problem problem;
  Params params;
  std::vector<std::shared_ptr<LoadedKernel>> loaded;
  std::vector<KernelHandle> kernels;
  std::size_t alignment = 1;
  std::vector<TensorSpec> tensors;
  std::unique_ptr<DeviceBuffer> workspace;
  MatchInfo info;
};

class Runtime::Impl {
 public:
  explicit Impl(RuntimeOptions options);

  /// The hot path. `tensors` follows op.tensors(problem) order; `scalars` op.scalars().
  /// `layout` (null: contiguous) holds op.layout_size() values.
  void run(int op_index, DType dtype, const std::int64_t* dims, int ndims,
           const std::uint64_t* tensors, int ntensors, const double* scalars, int nscalars,
           Stream stream, const std::int64_t* layout = nullptr);
  MatchInfo query(std::string_view op, std::string_view shape, DType dtype);
  /// Opens the databases and the compile cache if not yet and reports them; no CUDA call.
  RuntimeStatus status();
  void reset();
  void configure(RuntimeOptions options);

  /// Index of an op in all_ops() (throws InvalidArgument for an unknown name).
  static int op_index(std::string_view name);

 private:
  const Plan& plan(const PlanKey& key);
  std::unique_ptr<Plan> make_plan(const PlanKey& key);
  const DeviceInfo& device_info(int ordinal);
  // Both under plan_mu_; they log what they find (KTUNE_LOG).
  void ensure_databases();
  void ensure_compiler();
  std::string cache_in_use() const;  // the cache directory, or "" when compiling in memory
  std::string cache_note() const;
  void log_line(const std::string& line);
  std::shared_ptr<LoadedKernel> load(const CompileJob& job, unsigned dynamic_shared);

  RuntimeOptions options_;
  std::shared_mutex mu_;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans_;
  // Guarded by plan_mu_ (planning is serialised; launches are not).
  std::mutex plan_mu_;
  std::unique_ptr<TuningDatabases> databases_;
  std::unique_ptr<Compiler> compiler_;
  std::map<int, DeviceInfo> devices_;
  std::map<std::string, std::weak_ptr<LoadedKernel>> kernels_;
  bool log_ = false;
  // Lines already logged, so that each fact is logged once per runtime, resets included.
  std::unordered_set<std::string> logged_;
};

/// "compile cache: DIR", or "compile cache: off, kernels compile in memory: WHY".
std::string cache_line(const std::string& dir, const std::string& note);

/// RuntimeStatus as text (ktune_runtime_report): one line per database, its errors and skipped
/// rows indented under it, then the compile cache. Every line ends with a newline.
std::string status_report(const RuntimeStatus& status);

}  // namespace ktune
