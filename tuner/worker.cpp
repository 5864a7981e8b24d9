// The benchmark worker: holds the CUDA context, keeps one problem's tensors and reference on the
// GPU, and verifies then times each candidate the parent sends. A fault that poisons the context
// ends the worker after it replies; the parent starts a fresh one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "templates/common/check_args.h"
#include "templates/op.hpp"
#include "tuner/protocol.hpp"
#include "tuner/queue_hold.hpp"

namespace ktune {
namespace {

// NaN bit patterns used to poison outputs before a verification run.
unsigned short nan_bits(DType t) { return t == DType::bf16 ? 0x7fc0 : 0x7e00; }

struct LoadedKernels {
  std::vector<Module> modules;
  std::vector<KernelHandle> handles;

  explicit LoadedKernels(const std::vector<WireKernel>& kernels) {
    const Driver& cu = Driver::get();
    for (const WireKernel& k : kernels) {
      modules.emplace_back(k.cubin);
      CUfunction f = modules.back().function(k.lowered_name);
      // Static shared memory counts against the same 48 KiB default, so a kernel with both
      // (MoE's GEMM) may need the limit raised for 48 KiB of dynamic memory or less.
      if (k.dynamic_shared > 0)
        KTUNE_CU(cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(k.dynamic_shared)));
      handles.push_back(f);
    }
  }
};

class Worker {
 public:
  DeviceInfo hello(int ordinal) {
    ensure_context(ordinal);
    device_ = query_device(ordinal);
    const Driver& cu = Driver::get();
    KTUNE_CU(cu.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    return device_;
  }

  double measure_copy() {
    const Driver& cu = Driver::get();
    std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30,
                                              static_cast<std::size_t>(device_.memory_bytes / 8));
    DeviceBuffer a(bytes), b(bytes);
    KTUNE_CU(cu.cuMemsetD8Async(a.get(), 1, bytes, stream_));
    std::vector<double> times;
    CUevent e0, e1;
    KTUNE_CU(cu.cuEventCreate(&e0, CU_EVENT_DEFAULT));
    KTUNE_CU(cu.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    for (int i = 0; i < 23; ++i) {
      KTUNE_CU(cu.cuEventRecord(e0, stream_));
      KTUNE_CU(cu.cuMemcpyDtoDAsync(b.get(), a.get(), bytes, stream_));
      KTUNE_CU(cu.cuEventRecord(e1, stream_));
      KTUNE_CU(cu.cuEventSynchronize(e1));
      float ms = 0;
      KTUNE_CU(cu.cuEventElapsedTime(&ms, e0, e1));
      if (i >= 3) times.push_back(ms);
    }
    cu.cuEventDestroy(e0);
    cu.cuEventDestroy(e1);
    std::sort(times.begin(), times.end());
    double ms = times[times.size() / 2];
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  }

  void set_problem(const ProblemRequest& r) {
    problem_.reset();
    auto p = std::make_unique<ProblemState>();
    p->op = &get_op(r.op);
    p->dtype = r.dtype;
    p->problem = p->op->parse_problem(r.problem_key);
    p->seed = r.seed;
    p->specs = p->op->tensors(p->problem, r.dtype);
    for (const ScalarSpec& s : p->op->scalars()) p->scalars.push_back(s.tuning_value);
    p->checks = std::make_unique<LoadedKernels>(r.checks);
    p->reference = std::make_unique<LoadedKernels>(r.reference);
    std::size_t io_bytes = 0;
    for (const TensorSpec& t : p->specs) {
      std::size_t bytes = static_cast<std::size_t>(t.elements) * dtype_size(t.dtype);
      io_bytes += bytes;
      p->buffers.emplace_back(std::max<std::size_t>(bytes, 16));
      if (t.role == TensorRole::output)
        p->refs.emplace_back(std::max<std::size_t>(static_cast<std::size_t>(t.elements) * 4, 16));
    }
    p->io_bytes = io_bytes;
    p->stats = DeviceBuffer(sizeof(CompareStats));
    fill_inputs(*p);
    // Reference: inputs, then fp32 outputs.
    std::vector<std::uint64_t> ptrs;
    std::size_t out = 0;
    for (std::size_t i = 0; i < p->specs.size(); ++i)
      ptrs.push_back(p->specs[i].role == TensorRole::input ? p->buffers[i].get()
                                                            : p->refs[out++].get());
    RunArgs args;
    args.problem = &p->problem;
    args.dtype = p->dtype;
    args.tensors = ptrs.data();
    args.scalars = p->scalars.data();
    args.kernels = p->reference->handles.data();
    DeviceBuffer ref_workspace;
    if (const std::size_t ws = p->op->reference_workspace_bytes(p->problem, p->dtype)) {
      ref_workspace = DeviceBuffer(ws);
      args.workspace = ref_workspace.get();
    }
    CudaLauncher launcher(stream_);
    p->op->run_reference(args, launcher);
    KTUNE_CU(Driver::get().cuStreamSynchronize(stream_));
    problem_ = std::move(p);
  }

  Evaluation evaluate(const EvaluateRequest& r) {
    if (!problem_) throw Error("worker: evaluate before set_problem");
    ProblemState& p = *problem_;
    const Driver& cu = Driver::get();
    Evaluation ev;
    Params params = p.op->parse_params(r.params_key);
    LoadedKernels kernels(r.kernels);
    DeviceBuffer workspace;
    std::size_t ws = p.op->workspace_bytes(params, p.problem, p.dtype);
    if (ws > 0) workspace = DeviceBuffer(ws);

    std::vector<std::uint64_t> ptrs;
    for (const DeviceBuffer& b : p.buffers) ptrs.push_back(b.get());
    RunArgs args;
    args.params = &params;
    args.problem = &p.problem;
    args.dtype = p.dtype;
    args.tensors = ptrs.data();
    args.scalars = p.scalars.data();
    args.workspace = workspace.get();
    args.kernels = kernels.handles.data();
    args.sm_count = device_.sm_count;
    CudaLauncher launcher(stream_);

    // Verify: fresh inputs (a candidate may have scribbled on them), outputs poisoned with NaN.
    fill_inputs(p);
    for (std::size_t i = 0; i < p.specs.size(); ++i) {
      if (p.specs[i].role != TensorRole::output) continue;
      const std::size_t n = static_cast<std::size_t>(p.specs[i].elements);
      if (dtype_size(p.specs[i].dtype) == 4)  // f32 NaN; an i32 of 2143289344 matches no id
        KTUNE_CU(cu.cuMemsetD32Async(p.buffers[i].get(), 0x7fc00000u, n, stream_));
      else if (dtype_size(p.specs[i].dtype) == 1)  // e4m3 NaN
        KTUNE_CU(cu.cuMemsetD8Async(p.buffers[i].get(), 0x7f, n, stream_));
      else
        KTUNE_CU(cu.cuMemsetD16Async(p.buffers[i].get(), nan_bits(p.specs[i].dtype), n, stream_));
    }
    p.op->run(args, launcher);
    KTUNE_CU(cu.cuStreamSynchronize(stream_));
    if (std::optional<std::string> wrong = verify(p)) {
      ev.status = EvalStatus::wrong_result;
      ev.detail = *wrong;
      return ev;
    }

    // Time.
    const TimingSettings& t = r.timing;
    DeviceBuffer flush;
    std::size_t flush_bytes = 0;
    if (t.flush_l2) {
      flush_bytes = static_cast<std::size_t>(std::max<std::int64_t>(device_.l2_bytes, 1 << 20)) * 2;
      flush = DeviceBuffer(flush_bytes);
    }
    constexpr int kBatch = 10;
    for (int i = 0; i < t.warmup; ++i) p.op->run(args, launcher);
    if (t.warmup_seconds > 0) {
      const auto w0 = std::chrono::steady_clock::now();
      do {
        for (int i = 0; i < kBatch; ++i) p.op->run(args, launcher);
        KTUNE_CU(cu.cuStreamSynchronize(stream_));
      } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() <
               t.warmup_seconds);
    }
    ensure_events();
    std::vector<double> times;
    double total_ms = 0;
    while (static_cast<int>(times.size()) < t.max_reps) {
      int n = std::min(kBatch, t.max_reps - static_cast<int>(times.size()));
      // The batch is enqueued behind the hold and runs back to back once it is all there: the
      // guard releases the hold at the end of the block, or when a launch of the batch throws.
      QueueHold* held = queue_hold();
      if (held) held->hold(stream_);
      {
        const HoldRelease release{held};
        for (int i = 0; i < n; ++i) {
          if (t.flush_l2)
            KTUNE_CU(cu.cuMemsetD32Async(flush.get(), static_cast<unsigned>(times.size() + i),
                                         flush_bytes / 4, stream_));
          KTUNE_CU(cu.cuEventRecord(starts_[static_cast<std::size_t>(i)], stream_));
          p.op->run(args, launcher);
          KTUNE_CU(cu.cuEventRecord(ends_[static_cast<std::size_t>(i)], stream_));
        }
      }
      KTUNE_CU(cu.cuEventSynchronize(ends_[static_cast<std::size_t>(n - 1)]));
      if (held && held->timed_out() && ++hold_timeouts_ >= kHoldTimeoutsToGiveUp) hold_.reset();
      for (int i = 0; i < n; ++i) {
        float ms = 0;
        KTUNE_CU(cu.cuEventElapsedTime(&ms, starts_[static_cast<std::size_t>(i)],
                                       ends_[static_cast<std::size_t>(i)]));
        times.push_back(ms * 1e3);
        total_ms += ms;
      }
      if (static_cast<int>(times.size()) >= t.min_reps && total_ms * 1e-3 >= t.min_seconds) break;
    }
    // A timing run must not have faulted either.
    KTUNE_CU(cu.cuStreamSynchronize(stream_));
    std::sort(times.begin(), times.end());
    auto at = [&](double q) {
      return times[std::min(times.size() - 1, static_cast<std::size_t>(q * static_cast<double>(times.size())))];
    };
    ev.repetitions = static_cast<int>(times.size());
    ev.median_us = times.size() % 2 ? times[times.size() / 2]
                                    : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
    ev.min_us = times.front();
    ev.max_us = times.back();
    ev.p10_us = at(0.1);
    ev.p90_us = at(0.9);
    return ev;
  }

 private:
  /// The queue hold for timed batches (tuner/queue_hold.hpp), made at the first timing; null
  /// where the driver cannot make one, or after it timed out kHoldTimeoutsToGiveUp times (the
  /// timing is then as without it).
  QueueHold* queue_hold() {
    if (!hold_tried_) {
      hold_tried_ = true;
      try {
        hold_ = std::make_unique<QueueHold>();
      } catch (const Error&) {
        hold_.reset();
      }
    }
    return hold_.get();
  }
  struct HoldRelease {
    QueueHold* hold;
    ~HoldRelease() {
      if (hold) hold->release();
    }
  };
  static constexpr int kHoldTimeoutsToGiveUp = 3;
  std::unique_ptr<QueueHold> hold_;
  bool hold_tried_ = false;
  int hold_timeouts_ = 0;

  struct ProblemState {
    const Op* op = nullptr;
    DType dtype = DType::bf16;
    Problem problem;
    std::uint64_t seed = 0;
    std::vector<TensorSpec> specs;
    std::vector<double> scalars;
    std::vector<DeviceBuffer> buffers;  // one per tensor spec
    std::vector<DeviceBuffer> refs;     // fp32, one per output
    DeviceBuffer stats;
    std::unique_ptr<LoadedKernels> checks;     // indexed by CheckKernel
    std::unique_ptr<LoadedKernels> reference;
    std::size_t io_bytes = 0;
  };

  // Each input as its spec says: uniform values of its own dtype, distinct int32 ids, an int32
  // permutation, int32 values in a range or int32 sequence offsets (copied from the host).
  void fill_inputs(ProblemState& p) {
    CudaLauncher launcher(stream_);
    for (std::size_t i = 0; i < p.specs.size(); ++i) {
      const TensorSpec& spec = p.specs[i];
      if (spec.role != TensorRole::input || spec.elements == 0) continue;
      const unsigned long long seed = p.seed * 1000003ULL + i;
      if (spec.fill.kind == Fill::Kind::distinct_ids) {
        if (spec.dtype != DType::i32 || spec.fill.row <= 0 || spec.elements % spec.fill.row != 0 ||
            spec.fill.hi < static_cast<float>(spec.fill.row))
          throw Error("worker: input " + spec.name + " cannot hold rows of " +
                      std::to_string(spec.fill.row) + " distinct ids");
        FillIdsArgs a{};
        a.data = reinterpret_cast<int*>(p.buffers[i].get());
        a.rows = static_cast<unsigned long long>(spec.elements / spec.fill.row);
        a.row = spec.fill.row;
        a.bound = static_cast<int>(spec.fill.hi);
        a.seed = seed;
        launch_1d(launcher, p.checks->handles[kFillIds], a.rows, &a, sizeof a);
        continue;
      }
      if (spec.fill.kind == Fill::Kind::seq_offsets) {
        // A few int32 per sequence, the same every run (the op sized its tensors from them).
        const std::vector<std::int64_t> v = offsets_of(spec.fill, spec.elements);
        if (spec.dtype != DType::i32 || spec.fill.first_int < 0 || v.back() > 2147483647)
          throw Error("worker: input " + spec.name + " (" + dtype_name(spec.dtype) +
                      ") cannot hold int32 offsets of lengths in [" +
                      std::to_string(spec.fill.first_int) + ", " +
                      std::to_string(spec.fill.last_int) + "]");
        const std::vector<int> offsets(v.begin(), v.end());
        // A plain copy is not ordered with stream_ (non-blocking): let its work finish first.
        KTUNE_CU(Driver::get().cuStreamSynchronize(stream_));
        KTUNE_CU(Driver::get().cuMemcpyHtoD(p.buffers[i].get(), offsets.data(),
                                            offsets.size() * sizeof(int)));
        continue;
      }
      if (spec.fill.kind == Fill::Kind::permutation || spec.fill.kind == Fill::Kind::uniform_int) {
        const bool perm = spec.fill.kind == Fill::Kind::permutation;
        constexpr std::int64_t kIntMax = 2147483647;
        const bool fits = perm ? spec.fill.first_int == spec.elements && spec.elements <= kIntMax
                               : spec.fill.first_int <= spec.fill.last_int &&
                                     spec.fill.first_int >= -kIntMax - 1 &&
                                     spec.fill.last_int <= kIntMax;
        if (spec.dtype != DType::i32 || !fits)
          throw Error("worker: input " + spec.name + " (" + dtype_name(spec.dtype) + ", " +
                      std::to_string(spec.elements) + " elements) cannot hold " +
                      (perm ? "a permutation of [0, " + std::to_string(spec.fill.first_int) + ")"
                            : "int32 values in [" + std::to_string(spec.fill.first_int) + ", " +
                                  std::to_string(spec.fill.last_int) + "]"));
        FillIntArgs a{};
        a.data = reinterpret_cast<int*>(p.buffers[i].get());
        a.count = static_cast<unsigned long long>(spec.elements);
        a.seed = seed;
        a.lo = spec.fill.first_int;
        a.hi = spec.fill.last_int;
        launch_1d(launcher, p.checks->handles[perm ? kFillPermutation : kFillUniformInt], a.count,
                  &a, sizeof a);
        continue;
      }
      // bf16 inputs of an e4m3 op (FP8 weights, bf16 activations) have their own fill.
      const bool bf16_fill = spec.dtype == DType::bf16 && p.dtype == DType::e4m3;
      if (spec.dtype != p.dtype && spec.dtype != DType::f32 && !bf16_fill)
        throw Error("worker: input " + spec.name + " of dtype " + dtype_name(spec.dtype) +
                    " has no uniform fill (op dtype " + dtype_name(p.dtype) + ", f32, or bf16 "
                    "beside e4m3)");
      FillArgs a{};
      a.data = reinterpret_cast<void*>(p.buffers[i].get());
      a.count = static_cast<unsigned long long>(spec.elements);
      a.seed = seed;
      a.lo = spec.fill.lo;
      a.hi = spec.fill.hi;
      launch_1d(launcher,
                p.checks->handles[spec.dtype == DType::f32 ? kFillF32
                                  : bf16_fill                ? kFillBf16
                                                             : kFill],
                a.count, &a, sizeof a);
    }
  }

  // nullopt when every output matches the reference within the op's tolerance.
  std::optional<std::string> verify(ProblemState& p) {
    const Driver& cu = Driver::get();
    CudaLauncher launcher(stream_);
    const Tolerance tol = p.op->tolerance(p.problem, p.dtype);
    std::size_t out = 0;
    for (std::size_t i = 0; i < p.specs.size(); ++i) {
      if (p.specs[i].role != TensorRole::output) continue;
      const CompareStats zero{};
      KTUNE_CU(cu.cuMemcpyHtoD(p.stats.get(), &zero, sizeof zero));
      const DType t = p.specs[i].dtype;
      const bool exact = t == DType::i32;  // ids and counts: equal or wrong
      CompareArgs a{};
      a.out = reinterpret_cast<const void*>(p.buffers[i].get());
      a.ref = reinterpret_cast<const float*>(p.refs[out++].get());
      a.count = static_cast<unsigned long long>(p.specs[i].elements);
      a.rtol = exact ? 0.0f : static_cast<float>(tol.rtol);
      a.atol = exact ? 0.0f : static_cast<float>(tol.atol);
      a.stats = reinterpret_cast<CompareStats*>(p.stats.get());
      if (p.specs[i].row_elements > 0 && p.specs[i].verify_stride > 1) {
        a.row = static_cast<unsigned long long>(p.specs[i].row_elements);
        a.row_stride = static_cast<unsigned long long>(p.specs[i].verify_stride);
      }
      const CheckKernel compare = t == DType::f32 ? kCompareF32 : exact ? kCompareI32 : kCompare;
      launch_1d(launcher, p.checks->handles[compare], a.count, &a, sizeof a);
      CompareStats s{};
      KTUNE_CU(cu.cuStreamSynchronize(stream_));
      KTUNE_CU(cu.cuMemcpyDtoH(&s, p.stats.get(), sizeof s));
      if (s.bad > 0 || s.nonfinite > 0) {
        char buf[512];
        double rel = s.sum_sq_ref > 0 ? std::sqrt(s.sum_sq_err / s.sum_sq_ref) : 0.0;
        std::snprintf(buf, sizeof buf,
                      "output %s: %llu of %lld elements outside tolerance (rtol %g, atol %g), "
                      "%llu not finite, max abs error %g, relative L2 error %.3g",
                      p.specs[i].name.c_str(), s.bad, static_cast<long long>(p.specs[i].elements),
                      exact ? 0.0 : tol.rtol, exact ? 0.0 : tol.atol, s.nonfinite, static_cast<double>(s.max_abs_err), rel);
        return std::string(buf);
      }
    }
    return std::nullopt;
  }

  static void launch_1d(Launcher& launcher, KernelHandle k, unsigned long long n, const void* args,
                        std::size_t size) {
    KernelLaunch l;
    l.kernel = k;
    unsigned long long blocks = std::min<unsigned long long>((n + kCheckThreads - 1) / kCheckThreads, 65535ULL * 8);
    l.grid[0] = static_cast<unsigned>(std::max<unsigned long long>(blocks, 1));
    l.block[0] = kCheckThreads;
    l.args = args;
    l.args_size = size;
    launcher.launch(l);
  }

  void ensure_events() {
    const Driver& cu = Driver::get();
    while (starts_.size() < 10) {
      CUevent a, b;
      KTUNE_CU(cu.cuEventCreate(&a, CU_EVENT_DEFAULT));
      KTUNE_CU(cu.cuEventCreate(&b, CU_EVENT_DEFAULT));
      starts_.push_back(a);
      ends_.push_back(b);
    }
  }

  DeviceInfo device_;
  CUstream stream_ = nullptr;
  std::unique_ptr<ProblemState> problem_;
  std::vector<CUevent> starts_, ends_;
};

void reply_error(int fd, const std::string& message) {
  Encoder e;
  e.str(message);
  write_frame(fd, MessageType::reply_error, e.bytes());
}

}  // namespace

int worker_main(int in_fd, int out_fd) {
  Worker worker;
  MessageType type;
  std::string payload;
  while (read_frame(in_fd, type, payload)) {
    Decoder d(payload);
    try {
      switch (type) {
        case MessageType::hello: {
          DeviceInfo info = worker.hello(static_cast<int>(d.i64()));
          Encoder e;
          encode(e, info);
          write_frame(out_fd, MessageType::reply_ok, e.bytes());
          break;
        }
        case MessageType::measure_copy: {
          Encoder e;
          e.f64(worker.measure_copy());
          write_frame(out_fd, MessageType::reply_ok, e.bytes());
          break;
        }
        case MessageType::set_problem: {
          worker.set_problem(decode_problem(d));
          write_frame(out_fd, MessageType::reply_ok, {});
          break;
        }
        case MessageType::evaluate: {
          EvaluateRequest r = decode_evaluate(d);
          Evaluation ev;
          try {
            ev = worker.evaluate(r);
          } catch (const CudaError& err) {
            ev.status = EvalStatus::launch_error;
            ev.detail = err.what();
            ev.worker_exits = err.sticky();
          }
          Encoder e;
          encode(e, ev);
          write_frame(out_fd, MessageType::reply_ok, e.bytes());
          if (ev.worker_exits) return 3;
          break;
        }
        case MessageType::shutdown:
          return 0;
        default:
          reply_error(out_fd, "worker: unknown request");
      }
    } catch (const CudaError& err) {
      reply_error(out_fd, err.what());
      if (err.sticky()) return 3;
    } catch (const std::exception& err) {
      reply_error(out_fd, err.what());
    }
  }
  return 0;
}

}  // namespace ktune
