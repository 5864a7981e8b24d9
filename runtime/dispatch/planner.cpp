#include "runtime/dispatch/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "db/store.hpp"
#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/launcher.hpp"
#include "runtime/dispatch/miss_log.hpp"

namespace ktune {
namespace {

/// Relaxes this thread's stream-capture mode while it plans or allocates. A problem's first
/// call may come inside a stream capture (CUDA graphs); loading a module and cuMemAlloc are not
/// stream operations, and in the global and thread-local modes the driver refuses them and
/// invalidates the capture. Neither is part of the captured work: the module and the workspace
/// outlive the capture, and replays use them (the driver's documented push-pop pattern).
class RelaxedCapture {
 public:
  RelaxedCapture() { KTUNE_CU(Driver::get().cuThreadExchangeStreamCaptureMode(&mode_)); }
  ~RelaxedCapture() { Driver::get().cuThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

}  // namespace

StreamKey stream_key(Stream stream) {
  StreamKey k;
  k.stream = static_cast<CUstream>(stream);
  if (k.stream == CU_STREAM_PER_THREAD) k.thread = std::this_thread::get_id();
  return k;
}

std::optional<std::string> workspace_reason(std::string_view op, const CallerWorkspace& w,
                                            std::size_t needed, const std::string& params) {
  const std::string name(op);
  if (w.ptr == 0 && w.bytes > 0)
    return name + ": workspace is null but workspace_bytes is " + std::to_string(w.bytes) +
           ": pass both (the caller's workspace) or neither (the runtime's, one per stream)";
  if (w.ptr % kWorkspaceAlignment != 0)
    return name + ": workspace at " + address_text(w.ptr) + " is not aligned to " +
           std::to_string(kWorkspaceAlignment) + " bytes (cuMemAlloc's alignment)";
  if (w.bytes < needed)
    return name + ": workspace_bytes " + std::to_string(w.bytes) + " is smaller than the " +
           std::to_string(needed) + " bytes configuration " + params + " needs (Runtime::" +
           name + "_workspace_size() or ktune_" + name + "_workspace_size() say how many)";
  return std::nullopt;
}

const char* match_kind_name(Match m) {
  switch (m) {
    case Match::exact: return "exact";
    case Match::nearest_shape: return "nearest_shape";
    case Match::other_device: return "other_device";
    case Match::default_config: return "default";
  }
  return "?";
}

Runtime::Impl::Impl(RuntimeOptions options) : options_(std::move(options)) {
  const char* log = std::getenv("KTUNE_LOG");
  log_ = log && *log && std::string(log) != "0";
  if (const char* misses = std::getenv("KTUNE_MISS_LOG")) miss_log_ = misses;
}

int Runtime::Impl::op_index(std::string_view name) {
  const std::vector<const Op*>& ops = all_ops();
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i]->name() == name) return static_cast<int>(i);
  get_op(name);  // throws the message listing the known ops
  return -1;
}

const DeviceInfo& Runtime::Impl::device_info(int ordinal) {
  auto it = devices_.find(ordinal);
  if (it == devices_.end()) it = devices_.emplace(ordinal, query_device(ordinal)).first;
  return it->second;
}

void Runtime::Impl::log_line(const std::string& line) {
  if (log_ && logged_.insert(line).second) std::fprintf(stderr, "ktune: %s\n", line.c_str());
}

void Runtime::Impl::ensure_databases() {
  if (databases_) return;
  std::filesystem::path user = options_.db_path.empty() ? default_db_path()
                                                        : std::filesystem::path(options_.db_path);
  TuningDatabases::Sink sink;
  if (log_) sink = [this](const std::string& line) { log_line(line); };
  databases_ = std::make_unique<TuningDatabases>(
      std::move(user),
      options_.use_shipped_databases ? shipped_db_paths() : std::vector<std::filesystem::path>{},
      std::move(sink));
}

std::string Runtime::Impl::cache_in_use() const {
  const bool on = compiler_->cache_dir() && compiler_->cache_disabled_reason().empty();
  return on ? compiler_->cache_dir()->string() : std::string();
}

std::string Runtime::Impl::cache_note() const {
  if (!options_.disk_cache) return "turned off (RuntimeOptions::disk_cache is false)";
  return printable(compiler_->cache_disabled_reason());
}

void Runtime::Impl::ensure_compiler() {
  if (compiler_) return;
  std::optional<std::filesystem::path> dir;
  if (options_.disk_cache)
    dir = options_.cache_dir.empty() ? Compiler::default_cache_dir()
                                     : std::optional<std::filesystem::path>(options_.cache_dir);
  compiler_ = std::make_unique<Compiler>(dir);
  const std::string in_use = cache_in_use();
  log_line(cache_line(in_use, in_use.empty() ? cache_note() : std::string()));
}

RuntimeStatus Runtime::Impl::status() {
  std::lock_guard<std::mutex> planning(plan_mu_);
  ensure_databases();
  ensure_compiler();
  databases_->scan();
  RuntimeStatus s;
  s.databases = databases_->status();
  s.cache_dir = cache_in_use();
  if (s.cache_dir.empty()) s.cache_note = cache_note();
  return s;
}

std::string cache_line(const std::string& dir, const std::string& note) {
  if (!dir.empty()) return "compile cache: " + printable(dir);
  return "compile cache: off, kernels compile in memory: " + printable(note);
}

std::string status_report(const RuntimeStatus& status) {
  std::string out;
  for (const DatabaseStatus& d : status.databases) {
    out += database_line(d) + "\n";
    for (const std::string& e : d.errors) out += "  error: " + e + "\n";
    for (const std::string& r : d.skipped_rows) out += "  skipped " + r + "\n";
    if (d.skipped_count > d.skipped_rows.size())
      out += "  and " + std::to_string(d.skipped_count - d.skipped_rows.size()) +
             " more skipped rows, not listed\n";
  }
  out += cache_line(status.cache_dir, status.cache_note) + "\n";
  return out;
}

std::shared_ptr<LoadedKernel> Runtime::Impl::load(const CompileJob& job, unsigned dynamic_shared) {
  CUdevice dev;
  KTUNE_CU(Driver::get().cuCtxGetDevice(&dev));
  std::string key = std::to_string(dev) + "|" + job.arch + "|" + job.source.file + "|" +
                    job.source.name_expression;
  if (auto it = kernels_.find(key); it != kernels_.end())
    if (std::shared_ptr<LoadedKernel> k = it->second.lock()) return k;
  CompiledKernel c = compiler_->compile(job);
  auto k = std::make_shared<LoadedKernel>();
  k->module = Module(c.cubin);
  k->function = k->module.function(c.lowered_name);
  // Static shared memory counts against the same 48 KiB default, so a kernel with both
  // (MoE's GEMM) may need the limit raised for 48 KiB of dynamic memory or less.
  if (dynamic_shared > 0)
    KTUNE_CU(Driver::get().cuFuncSetAttribute(
        k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(dynamic_shared)));
  kernels_[key] = k;
  return k;
}

Problem Runtime::Impl::checked_problem(const Op& op, DType dtype, const std::int64_t* dims,
                                       std::size_t ndims) {
  Problem problem;
  problem.values.assign(dims, dims + ndims);
  op.check_problem(problem);
  const std::vector<DType> allowed = op.dtypes();
  if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end()) {
    std::string names;
    for (DType t : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw InvalidArgument("dtype " + std::string(dtype_name(dtype)) + " is not supported by " +
                          std::string(op.name()) + " (it takes " + names + ")");
  }
  return problem;
}

void Runtime::Impl::check_call(const Op& op, DType dtype, const std::int64_t* dims,
                               std::size_t ndims, const std::uint64_t* tensors, int ntensors,
                               const double* scalars, int nscalars) {
  if (ndims != op.dims().size())
    throw InvalidArgument(std::string(op.name()) + ": " + std::to_string(ndims) +
                          " problem values given; the op has " +
                          std::to_string(op.dims().size()) + " dims");
  // The problem's checks and tensor list, kept for the thread's last (op, dtype, problem): a
  // launch loop over one problem allocates nothing here after its first call.
  struct Last {
    const Op* op = nullptr;
    DType dtype = DType::bf16;
    std::vector<std::int64_t> dims;
    std::vector<TensorSpec> specs;
  };
  thread_local Last last;
  if (last.op != &op || last.dtype != dtype || last.dims.size() != ndims ||
      !std::equal(dims, dims + ndims, last.dims.begin())) {
    last.op = nullptr;  // until the checks pass
    const Problem problem = checked_problem(op, dtype, dims, ndims);
    last.specs = op.tensors(problem, dtype);
    last.dims.assign(dims, dims + ndims);
    last.dtype = dtype;
    last.op = &op;
  }
  const std::vector<TensorSpec>& specs = last.specs;
  // Scalars a call leaves out at the end take their omitted_value, where they have one.
  const std::vector<ScalarSpec>& declared = op.scalars();
  int required = static_cast<int>(declared.size());
  while (required > 0 && declared[static_cast<std::size_t>(required - 1)].omitted_value) --required;
  if (ntensors != static_cast<int>(specs.size()) || nscalars < required ||
      nscalars > static_cast<int>(declared.size()))
    throw InvalidArgument(std::string(op.name()) + " takes " + std::to_string(specs.size()) +
                          " tensors and " +
                          (required < static_cast<int>(declared.size())
                               ? std::to_string(required) + " to "
                               : std::string()) +
                          std::to_string(declared.size()) + " scalars");
  const auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  for (int i = 0; i < nscalars; ++i) {
    const ScalarSpec& spec = declared[static_cast<std::size_t>(i)];
    if (!std::isfinite(scalars[i]) || scalars[i] < spec.min)
      throw InvalidArgument(std::string(op.name()) + ": " + spec.name + "=" +
                            text(scalars[i]) + " is not allowed (a finite number" +
                            (std::isfinite(spec.min) ? " >= " + text(spec.min) : "") +
                            ": " + spec.help + ")");
  }
  for (int i = 0; i < ntensors; ++i)
    if (tensors[i] == 0 && !specs[static_cast<std::size_t>(i)].optional)
      throw InvalidArgument(std::string(op.name()) + ": tensor " +
                            specs[static_cast<std::size_t>(i)].name + " is a null pointer");
}

std::unique_ptr<Plan> Runtime::Impl::make_plan(const PlanKey& key) {
  const Op& op = *all_ops()[static_cast<std::size_t>(key.op)];
  auto plan = std::make_unique<Plan>();
  plan->op = &op;
  plan->dtype = static_cast<DType>(key.dtype);
  plan->problem = checked_problem(op, plan->dtype, key.dims.data(),
                                  static_cast<std::size_t>(key.ndims));
  const DeviceInfo& device = device_info(key.device);

  ensure_databases();
  ensure_compiler();

  LookupResult found = databases_->find(op, plan->dtype, plan->problem, device);
  plan->params = found.params;
  plan->info = match_info(op, plan->problem, found);

  std::vector<KernelSource> sources = op.kernels(plan->params, plan->problem, plan->dtype);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    plan->loaded.push_back(load({sources[i], device.arch(), {}},
                                op.dynamic_shared_bytes(plan->params, plan->problem, plan->dtype, i)));
    plan->kernels.push_back(plan->loaded.back()->function);
  }
  plan->alignment = op.alignment(plan->params, plan->problem, plan->dtype);
  plan->tensors = op.tensors(plan->problem, plan->dtype);
  plan->workspace_bytes = op.workspace_bytes(plan->params, plan->problem, plan->dtype);
  plan->sm_count = device.sm_count;

  if (!miss_log_.empty() && found.kind != Match::exact && !miss_log_failed_) {
    const MissEntry miss{plan->info.op, plan->dtype, plan->info.problem, device.key(),
                         match_kind_name(found.kind)};
    if (std::optional<std::string> why = append_line(miss_log_, miss_line(miss))) {
      // The user asked for the log: say once that it is not written, whatever KTUNE_LOG says.
      miss_log_failed_ = true;
      std::fprintf(stderr, "ktune: KTUNE_MISS_LOG=%s: not written: %s\n",
                   quoted(miss_log_, 200).c_str(), why->c_str());
    }
  }
  if (log_)
    std::fprintf(stderr, "ktune: %s %s %s on %s: %s match, %s%s%s\n", plan->info.op.c_str(),
                 dtype_name(plan->dtype), plan->info.problem.c_str(), device.name.c_str(),
                 match_kind_name(found.kind), plan->info.params.c_str(),
                 found.tuned_problem.empty() ? "" : " tuned on ",
                 found.tuned_problem.c_str());
  return plan;
}

PlanKey Runtime::Impl::key_of(int op_index, DType dtype, const std::int64_t* dims,
                              std::size_t ndims) {
  if (ndims > kMaxDims) throw InvalidArgument("too many dimensions");
  // The count is checked before the device is touched, so that an entry point that packs the
  // wrong number of dims fails on a machine without a GPU too (tests/runtime_status_test.cpp).
  const Op& op = *all_ops()[static_cast<std::size_t>(op_index)];
  if (ndims != op.dims().size())
    throw InvalidArgument(std::string(op.name()) + ": " + std::to_string(ndims) +
                          " problem values given; the op has " +
                          std::to_string(op.dims().size()) + " dims");
  PlanKey key;
  key.op = op_index;
  key.dtype = static_cast<int>(dtype);
  key.device = static_cast<int>(ensure_context(0));
  key.ndims = static_cast<int>(ndims);
  for (std::size_t i = 0; i < ndims; ++i) key.dims[i] = dims[i];
  return key;
}

std::optional<Runtime::Impl::Dispatch> Runtime::Impl::find(const PlanKey& key,
                                                           const StreamKey* stream) const {
  auto it = plans_.find(key);
  if (it == plans_.end()) return std::nullopt;
  const Plan& p = *it->second;
  if (!stream || p.workspace_bytes == 0) return Dispatch{&p, 0};
  // Linear: a plan runs on a handful of streams.
  for (const auto& [s, buffer] : p.workspaces)
    if (s == *stream) return Dispatch{&p, buffer.get()};
  return std::nullopt;
}

Runtime::Impl::Dispatch Runtime::Impl::dispatch(const PlanKey& key, const StreamKey* stream) {
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (std::optional<Dispatch> d = find(key, stream)) return *d;
  }
  RelaxedCapture relaxed;
  std::lock_guard<std::mutex> planning(plan_mu_);
  Plan* plan = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (std::optional<Dispatch> d = find(key, stream)) return *d;
    if (auto it = plans_.find(key); it != plans_.end()) plan = it->second.get();
  }
  if (!plan) {
    std::unique_ptr<Plan> made = make_plan(key);
    std::unique_lock<std::shared_mutex> lock(mu_);
    plan = (plans_[key] = std::move(made)).get();
  }
  if (!stream || plan->workspace_bytes == 0) return {plan, 0};
  DeviceBuffer buffer(plan->workspace_bytes);
  const std::uint64_t workspace = buffer.get();
  std::unique_lock<std::shared_mutex> lock(mu_);
  plan->workspaces.emplace_back(*stream, std::move(buffer));
  return {plan, workspace};
}

void Runtime::Impl::run(int op_index, DType dtype, const std::int64_t* dims, int ndims,
                        const std::uint64_t* tensors, int ntensors, const double* scalars,
                        int nscalars, Stream stream, const std::int64_t* layout,
                        const CallerWorkspace* workspace) {
  if (ndims < 0 || ntensors < 0 || nscalars < 0 || ntensors > static_cast<int>(kMaxTensors) ||
      static_cast<std::size_t>(ndims) > kMaxDims)
    throw InvalidArgument("negative counts, or too many dimensions or tensors");
  // Everything that needs no device first, so that a bad call fails with its own reason on a
  // machine without a GPU too.
  check_call(*all_ops()[static_cast<std::size_t>(op_index)], dtype, dims,
             static_cast<std::size_t>(ndims), tensors, ntensors, scalars, nscalars);
  const StreamContext context(static_cast<CUstream>(stream));
  const PlanKey key = key_of(op_index, dtype, dims, static_cast<std::size_t>(ndims));
  const StreamKey own = stream_key(stream);
  const Dispatch d = dispatch(key, workspace ? nullptr : &own);
  const Plan& p = *d.plan;
  const std::vector<ScalarSpec>& declared = p.op->scalars();
  double all_scalars[kMaxScalars];
  if (declared.size() > kMaxScalars)
    throw InvalidArgument(std::string(p.op->name()) + ": more scalars than the runtime passes");
  for (std::size_t i = 0; i < declared.size(); ++i)
    all_scalars[i] = static_cast<int>(i) < nscalars ? scalars[i] : *declared[i].omitted_value;
  for (int i = 0; i < ntensors; ++i) {
    const std::uint64_t ptr = tensors[i];
    if (ptr == 0) continue;  // an optional tensor left out (check_call refused the others)
    const TensorSpec& spec = p.tensors[static_cast<std::size_t>(i)];
    const std::size_t need = spec.alignment != 0 ? spec.alignment : p.alignment;
    if (ptr % need != 0)
      throw InvalidArgument(std::string(p.op->name()) + ": tensor " + spec.name + " at " +
                            address_text(ptr) + " is not aligned to " + std::to_string(need) +
                            " bytes, which configuration " + p.info.params + " requires");
  }
  RunArgs args;
  args.params = &p.params;
  args.problem = &p.problem;
  args.dtype = p.dtype;
  args.tensors = tensors;
  args.scalars = all_scalars;
  args.workspace = d.workspace;
  if (workspace) {
    if (auto why = workspace_reason(p.op->name(), *workspace, p.workspace_bytes, p.info.params))
      throw InvalidArgument(*why);
    args.workspace = workspace->ptr;
  }
  args.kernels = p.kernels.data();
  args.layout = layout;
  args.sm_count = p.sm_count;
  CudaLauncher launcher(static_cast<CUstream>(stream));
  p.op->run(args, launcher);
}

MatchInfo Runtime::Impl::query(std::string_view op_name, std::string_view shape, DType dtype) {
  int index = op_index(op_name);
  const Op& op = *all_ops()[static_cast<std::size_t>(index)];
  Problem problem = op.parse_problem(shape);
  checked_problem(op, dtype, problem.values.data(), problem.values.size());  // before the device
  return dispatch(key_of(index, dtype, problem.values.data(), problem.values.size()), nullptr)
      .plan->info;
}

std::size_t Runtime::Impl::workspace_size(int op_index, DType dtype, const std::int64_t* dims,
                                          int ndims) {
  if (ndims < 0) throw InvalidArgument("negative dimension count");
  const Op& op = *all_ops()[static_cast<std::size_t>(op_index)];
  if (static_cast<std::size_t>(ndims) == op.dims().size())  // else key_of says what is wrong
    checked_problem(op, dtype, dims, static_cast<std::size_t>(ndims));  // before the device
  return dispatch(key_of(op_index, dtype, dims, static_cast<std::size_t>(ndims)), nullptr)
      .plan->workspace_bytes;
}

void Runtime::Impl::reset() {
  std::lock_guard<std::mutex> planning(plan_mu_);
  std::unique_lock<std::shared_mutex> lock(mu_);
  plans_.clear();
  kernels_.clear();
  databases_.reset();
}

void Runtime::Impl::configure(RuntimeOptions options) {
  std::lock_guard<std::mutex> planning(plan_mu_);
  std::unique_lock<std::shared_mutex> lock(mu_);
  plans_.clear();
  kernels_.clear();
  databases_.reset();
  compiler_.reset();
  options_ = std::move(options);
}

}  // namespace ktune
