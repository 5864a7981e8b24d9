// Runtime::Impl: plans each (device, op, dtype, problem) once -- lookup, compile or cache load,
// module load -- and launches planned problems without allocating, querying or compiling.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ktune/ktune.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/dispatch/lookup.hpp"
#include "templates/op.hpp"

namespace ktune {

constexpr std::size_t kMaxDims = 16;
constexpr std::size_t kMaxTensors = 16;
constexpr std::size_t kMaxScalars = 8;
/// Alignment a caller's workspace must have (cuMemAlloc gives 256): ops lay their regions out
/// at 256-byte offsets from its start.
constexpr std::size_t kWorkspaceAlignment = 256;

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

/// What a runtime-owned workspace belongs to: a stream. CU_STREAM_PER_THREAD is another stream
/// on every thread, so it is told apart by thread as well.
struct StreamKey {
  CUstream stream = nullptr;
  std::thread::id thread;  // CU_STREAM_PER_THREAD only; otherwise the default id
  bool operator==(const StreamKey& o) const { return stream == o.stream && thread == o.thread; }
};
StreamKey stream_key(Stream stream);

/// A workspace the caller passes (the form for CUDA graph capture).
struct CallerWorkspace {
  std::uint64_t ptr = 0;
  std::size_t bytes = 0;
  bool given() const { return ptr != 0 || bytes != 0; }
};

/// Why `w` cannot serve as `op`'s workspace: a size without a pointer, a misaligned pointer, or
/// (when `needed` > 0) fewer bytes than configuration `params` needs; nullopt when it can.
/// Builds a string only when it fails (the hot path calls it).
std::optional<std::string> workspace_reason(std::string_view op, const CallerWorkspace& w,
                                            std::size_t needed, const std::string& params);

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
  std::size_t workspace_bytes = 0;  // op.workspace_bytes() of this configuration
  int sm_count = 0;                 // the device's multiprocessors (RunArgs::sm_count)
  /// The runtime's workspaces, one per stream this plan ran on without a caller workspace,
  /// allocated at the first such call there and freed with the plan: two streams never share
  /// scratch memory. Read under Runtime::Impl::mu_ shared, appended under it exclusive.
  std::vector<std::pair<StreamKey, DeviceBuffer>> workspaces;
  MatchInfo info;
};

class Runtime::Impl {
 public:
  explicit Impl(RuntimeOptions options);

  /// The hot path. `tensors` follows op.tensors(problem) order; `scalars` op.scalars().
  /// `layout` (null: contiguous) holds op.layout_size() values. `workspace` null: the
  /// runtime's workspace for `stream` (allocated at the plan's first call on it).
  void run(int op_index, DType dtype, const std::int64_t* dims, int ndims,
           const std::uint64_t* tensors, int ntensors, const double* scalars, int nscalars,
           Stream stream, const std::int64_t* layout = nullptr,
           const CallerWorkspace* workspace = nullptr);
  /// Workspace bytes of the configuration the lookup picks for the problem (plans it).
  std::size_t workspace_size(int op_index, DType dtype, const std::int64_t* dims, int ndims);
  MatchInfo query(std::string_view op, std::string_view shape, DType dtype);
  /// Opens the databases and the compile cache if not yet and reports them; no CUDA call.
  RuntimeStatus status();
  void reset();
  void configure(RuntimeOptions options);

  /// Index of an op in all_ops() (throws InvalidArgument for an unknown name).
  static int op_index(std::string_view name);

 private:
  /// A planned problem and the runtime workspace of one call (0 when none is wanted or needed).
  struct Dispatch {
    const Plan* plan = nullptr;
    std::uint64_t workspace = 0;
  };
  /// The plan of `key` and, when `stream` is set and the plan needs a workspace, the stream's:
  /// one shared lock once both exist; otherwise plans and allocates under plan_mu_.
  Dispatch dispatch(const PlanKey& key, const StreamKey* stream);
  /// Both already there; under mu_.
  std::optional<Dispatch> find(const PlanKey& key, const StreamKey* stream) const;
  static PlanKey key_of(int op_index, DType dtype, const std::int64_t* dims, std::size_t ndims);
  /// The problem of `dims`, checked against the op's dims and dtypes; throws InvalidArgument.
  static Problem checked_problem(const Op& op, DType dtype, const std::int64_t* dims,
                                 std::size_t ndims);
  /// A call's arguments as far as they can be checked without a device: the problem, the dtype,
  /// the numbers of tensors and scalars, every scalar finite and in its range, no required
  /// tensor null. Throws InvalidArgument.
  static void check_call(const Op& op, DType dtype, const std::int64_t* dims, std::size_t ndims,
                         const std::uint64_t* tensors, int ntensors, const double* scalars,
                         int nscalars);
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
  std::string miss_log_;        // KTUNE_MISS_LOG: where non-exact plans are appended
  bool miss_log_failed_ = false;  // said once, then quiet
  // Lines already logged, so that each fact is logged once per runtime, resets included.
  std::unordered_set<std::string> logged_;
};

/// "compile cache: DIR", or "compile cache: off, kernels compile in memory: WHY".
std::string cache_line(const std::string& dir, const std::string& note);

/// RuntimeStatus as text (ktune_runtime_report): one line per database, its errors and skipped
/// rows indented under it, then the compile cache. Every line ends with a newline.
std::string status_report(const RuntimeStatus& status);

}  // namespace ktune
