// The op abstraction: what the search, the tuner and the runtime know of a kernel template.
//
// An op declares its problem dimensions, its tunables, its tensors and scalars, one validity
// function with reasons, the kernels a configuration compiles to, and how to launch them.
// One serialiser (problem_key / params_key and their parsers) feeds the database, the logs
// and the CLI.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/types.hpp"

namespace ktune {

/// A problem dimension. Integer dims take a range; enumerated dims take one of `choices`
/// (stored as the index). `def` is used when a shape string leaves the dim out (nullopt: required).
/// For the lookup's fallback, a dim is either matched by distance (sizes such as rows, sequence
/// lengths or tokens: the nearest tuned value serves) or exact (a configuration tuned for one
/// value is never reused for another: head dims, expert shapes); enumerated dims are exact.
struct DimSpec {
  std::string name;
  std::int64_t min = 1;
  std::int64_t max = 1;
  std::vector<std::string> choices;  // non-empty: enumerated dimension
  std::optional<std::int64_t> def;   // default value (index for enumerated dims)
  std::string help;
  bool exact = false;                // integer dims: the lookup never crosses a different value
  // Dims matched by distance: values on either side of a boundary behave differently (decode's
  // nq <= 16 against prefill's): the lookup never serves one regime from the other.
  std::vector<std::int64_t> regimes = {};
  // False for a dim added after databases were written (mask variants, paging): at its default
  // it is left out of problem keys, so keys written before it existed still match exactly.
  bool keyed_at_default = true;
  bool enumerated() const { return !choices.empty(); }
  /// Which regime `v` is in: the number of boundaries below it.
  int regime(std::int64_t v) const {
    int r = 0;
    for (std::int64_t b : regimes) r += v > b ? 1 : 0;
    return r;
  }
  bool matched_exactly() const { return exact || enumerated(); }
};

/// A tunable parameter and the values the search may give it.
struct Tunable {
  std::string name;
  std::vector<std::int64_t> values;
  std::string help;
  /// A tunable added after databases were written: at this value it is left out of params keys
  /// and taken when a key does not name it, so the keys written before it existed still parse
  /// and mean what they meant (as DimSpec::keyed_at_default does for problem keys).
  std::optional<std::int64_t> unkeyed_value = std::nullopt;
};

enum class TensorRole { input, output };

/// How the tuner fills an input before each verification run. `uniform`: values uniform in
/// [lo, hi) (float dtypes). `distinct_ids`: int32 rows of `row` ids, distinct within a row, drawn
/// uniformly from [0, hi) (MoE's precomputed top-k expert ids; hi >= row). `permutation`: int32,
/// a random permutation of [0, first_int) over the tensor's `first_int` elements, each value once
/// (a paged KV cache's block table: every page of the pool used once, in scattered order).
/// `uniform_int`: int32 uniform in [first_int, last_int], except that element 0 is last_int and
/// element 1 first_int, so that a tensor of two or more elements always mixes values (per-sequence
/// KV lengths: the longest and the shortest are always exercised). `seq_offsets`: int32
/// cumulative row offsets of count - 1 sequences (FlashAttention's cu_seqlens): 0, then each
/// sequence's length added, the lengths drawn as uniform_int's from a fixed seed (not the
/// tuner's), so that an op sizes its packed tensors from the same values (offsets_of()).
struct Fill {
  enum class Kind { uniform, distinct_ids, permutation, uniform_int, seq_offsets };
  Kind kind = Kind::uniform;
  float lo = -2.0f;
  float hi = 2.0f;
  int row = 0;
  std::int64_t first_int = 0;  // permutation: the bound; uniform_int, seq_offsets: the lowest value
  std::int64_t last_int = 0;   // uniform_int, seq_offsets: the highest value (inclusive)
  static Fill uniform(float lo, float hi) { return {Kind::uniform, lo, hi, 0}; }
  static Fill distinct_ids(int row, int bound) {
    return {Kind::distinct_ids, 0.0f, static_cast<float>(bound), row};
  }
  static Fill permutation(std::int64_t bound) {
    return {Kind::permutation, 0.0f, 0.0f, 0, bound, bound - 1};
  }
  static Fill uniform_int(std::int64_t lo, std::int64_t hi) {
    return {Kind::uniform_int, 0.0f, 0.0f, 0, lo, hi};
  }
  static Fill seq_offsets(std::int64_t lo, std::int64_t hi) {
    return {Kind::seq_offsets, 0.0f, 0.0f, 0, lo, hi};
  }
};

/// The `count` values of a seq_offsets fill: element 0 is 0, element i + 1 is element i plus
/// fill_int_value(fixed seed, i, lo, hi) (common/check_args.h: the first sequence is the longest,
/// the second the shortest). The same on the host and on every run.
std::vector<std::int64_t> offsets_of(const Fill& fill, std::int64_t count);

/// A tensor the op reads or writes, sized for one problem.
struct TensorSpec {
  std::string name;
  TensorRole role = TensorRole::input;
  DType dtype = DType::bf16;
  std::int64_t elements = 0;
  bool optional = false;  // callers may pass null (e.g. attention's log-sum-exp)
  Fill fill = {};         // inputs: what the tuner fills them with
  // Outputs: the tuner checks rows r % verify_stride == 0 of `row_elements` elements (a large
  // layer's reference computes those rows only); 0: every element.
  std::int64_t row_elements = 0;
  std::int64_t verify_stride = 1;
  // Byte alignment a caller's pointer needs: 0 means the op's alignment() (the vector width of
  // its data tensors); tensors the kernels read or write one 4-byte word at a time say 4.
  std::size_t alignment = 0;
};

/// `specs` with alignment 4 for every tensor not of the data type `t` (the fp32 and int32 side
/// tensors of attention: lse, slopes, block tables, lengths, offsets, read or written as words).
std::vector<TensorSpec> word_aligned_side_tensors(std::vector<TensorSpec> specs, DType t);

/// How a staged search walks the space of an op whose kernels' times add up (MoE: route, align,
/// gemm1, gemm2, combine): for each value of the `outer` tunables (coupling every kernel), each
/// group in turn is searched with the others held, and its best kept. Tunable names.
struct SearchStages {
  std::vector<std::string> outer;
  std::vector<std::vector<std::string>> groups;
  /// Optional: moves a start point's group tunables to values its outer ones need, before the
  /// staged strategy repairs it (its greedy one-group repair can miss a point that needs several
  /// groups changed together, as MoE's block_m=192 does).
  std::function<Params(Params)> fit_outer;
  bool empty() const { return groups.empty(); }
};

/// A scalar argument (eps, scale...) with the value used when tuning.
struct ScalarSpec {
  std::string name;
  double tuning_value = 0.0;
  std::string help;
  /// A scalar added after callers of the generic entry (Runtime::run) were written: a call
  /// that passes only the scalars before it gets this value (attention's e4m3 scales: 1).
  std::optional<double> omitted_value = std::nullopt;
  /// The smallest value a call may pass (every value must also be finite).
  double min = -std::numeric_limits<double>::infinity();
};

/// One kernel to compile: the embedded file to compile and the NVRTC name expression.
struct KernelSource {
  std::string file;             // embedded header path, e.g. "fused/norm.cuh"
  std::string name_expression;  // e.g. "ktune::add_rmsnorm_kernel<ktune::bf16, 256, 1, 8, 1>"
  bool operator==(const KernelSource& o) const {
    return file == o.file && name_expression == o.name_expression;
  }
};

/// What ptxas reported for a compiled kernel.
struct KernelResources {
  int registers = 0;
  int shared_bytes = 0;       // static shared memory
  int local_bytes = 0;        // stack frame
  int spill_stores = 0;       // bytes
  int spill_loads = 0;        // bytes
};

/// Opaque handle of a loaded kernel (a CUfunction).
using KernelHandle = void*;

/// Geometry and arguments of one kernel launch. `args` points at the kernel's single
/// by-value argument struct of `args_size` bytes.
struct KernelLaunch {
  KernelHandle kernel = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  const void* args = nullptr;
  std::size_t args_size = 0;
  // Programmatic dependent launch (compute capability 9.0 and later): the kernel may start while
  // the previous kernel on the stream is still running, and must execute griddepcontrol.wait
  // (common/pdl.cuh) before it reads anything that kernel writes. Hides the launch gap of a
  // short second kernel (a combine); ignored where the device or the driver lacks it.
  bool programmatic = false;
  // CTAs per thread block cluster along x (compute capability 9.0 and later): 1 for none; grid[0]
  // must be a multiple of it. A kernel that names a cluster needs it (it is not ignored). Above 8
  // (non-portable; Hopper takes 16) CudaLauncher allows it on the kernel first.
  unsigned cluster = 1;
  // CTAs per cluster along y (1 for none; grid[1] must be a multiple of it): a cluster of
  // cluster x cluster_y CTAs, as one named by the kernel needs.
  unsigned cluster_y = 1;
};

/// Issues kernel launches on a stream. The runtime's implementation calls cuLaunchKernel;
/// tests use a fake that counts.
class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual void launch(const KernelLaunch& launch) = 0;
};

/// Everything one run of an op needs. Pointers are device addresses; `tensors` follows the
/// order of Op::tensors(), `scalars` the order of Op::scalars(), `kernels` the order of
/// Op::kernels().
struct RunArgs {
  const Params* params = nullptr;
  const Problem* problem = nullptr;
  DType dtype = DType::bf16;
  const std::uint64_t* tensors = nullptr;
  const double* scalars = nullptr;
  std::uint64_t workspace = 0;
  const KernelHandle* kernels = nullptr;
  /// Op-defined integer arguments that are not part of the problem key (e.g. attention's
  /// element strides); null means the op's default (contiguous tensors). See Op::layout_size().
  const std::int64_t* layout = nullptr;
  /// Multiprocessors of the device the call runs on (0: unknown), for grids sized to the GPU
  /// (persistent kernels) rather than to the problem.
  int sm_count = 0;
};

/// Verification tolerance: an element passes when |out - ref| <= atol + rtol * |ref|.
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};

class Op {
 public:
  virtual ~Op() = default;

  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  /// Folder under templates/ holding this op's kernels; with common/ it makes the template hash.
  virtual std::string_view family() const = 0;
  virtual const std::vector<DimSpec>& dims() const = 0;
  virtual const std::vector<Tunable>& tunables() const = 0;
  virtual const std::vector<ScalarSpec>& scalars() const = 0;
  virtual std::vector<DType> dtypes() const { return {DType::bf16, DType::f16}; }
  /// Bumped by hand when the meaning of a parameter changes; the kernel source hash covers code.
  virtual int version() const { return 1; }

  /// The problem `ktune sweep` uses when none is given.
  virtual Problem default_problem() const = 0;
  /// Tensors of one problem, inputs first.
  virtual std::vector<TensorSpec> tensors(const Problem& p, DType t) const = 0;
  virtual std::size_t workspace_bytes(const Params&, const Problem&, DType) const { return 0; }
  /// Number of int64 values RunArgs::layout holds when given (0: the op takes none).
  virtual std::size_t layout_size() const { return 0; }
  /// Byte alignment every tensor pointer must have for this configuration (vector width).
  virtual std::size_t alignment(const Params&, const Problem&, DType t) const {
    return dtype_size(t);
  }

  /// nullopt when `params` may run `problem` on `device`; otherwise why not.
  virtual std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                                    DType t, const DeviceInfo& device) const = 0;
  /// Second check once the kernels are compiled: registers and shared memory against the device.
  virtual std::optional<std::string> invalid_after_compile(
      const Params& params, const Problem& problem, DType t, const DeviceInfo& device,
      const std::vector<KernelResources>& resources) const;

  /// The kernels a configuration compiles to, in the order run() receives their handles.
  virtual std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                            DType t) const = 0;
  /// Threads per block of kernels()[i] (for the register check).
  virtual int block_threads(const Params& params, const Problem& problem, DType t,
                            std::size_t kernel_index) const = 0;
  /// Dynamic shared memory of kernels()[i]; the launcher raises the kernel's limit to it (the
  /// default 48 KiB also covers the kernel's static shared memory).
  virtual unsigned dynamic_shared_bytes(const Params&, const Problem&, DType, std::size_t) const {
    return 0;
  }
  /// Enqueues the op. Must not allocate: it runs on the runtime's hot path.
  virtual void run(const RunArgs& args, Launcher& launcher) const = 0;

  /// Reference kernels: a simple fp32 implementation writing every output as float.
  virtual std::vector<KernelSource> reference_kernels(const Problem& problem, DType t) const = 0;
  /// Enqueues the reference. `args.tensors` holds the inputs then fp32 outputs; args.workspace
  /// holds reference_workspace_bytes() (or is 0: the op then computes every output row).
  virtual void run_reference(const RunArgs& args, Launcher& launcher) const = 0;
  virtual std::size_t reference_workspace_bytes(const Problem&, DType) const { return 0; }
  virtual Tolerance tolerance(DType t) const;
  /// The tolerance for one problem (outputs whose scale depends on the problem); by default
  /// tolerance(t).
  virtual Tolerance tolerance(const Problem&, DType t) const { return tolerance(t); }
  /// Groups for the staged strategy (empty: the op has none). An op whose space is too large to
  /// measure whole declares them and names "staged" its default strategy.
  virtual SearchStages search_stages() const { return {}; }
  virtual std::string_view default_strategy() const { return "exhaustive"; }
  /// The farthest (problem_distance: log-space) a tuned problem may be for the lookup to serve
  /// its configuration to another problem; beyond it the built-in default wins. ln 4: a factor 4
  /// in one dim, or 2 in four.
  virtual double fallback_radius() const { return 1.3863; }  // ln 4, rounded up
  /// Whether the configuration tuned on `tuned` may serve `wanted` on `device` as a nearest
  /// neighbour, beyond the distance: false when the op's own rules put the two in regimes that
  /// want different tiles (flash_attention: a grid short enough for 64-row tiles and one that
  /// is not), so that the default, which follows the regime, serves instead.
  virtual bool fallback_compatible(const Problem& wanted, const Problem& tuned,
                                   const DeviceInfo& device) const {
    (void)wanted, (void)tuned, (void)device;
    return true;
  }
  /// The dim `ktune sweep` tunes over a list of values in one command (MoE: "t", the token
  /// buckets), and its default list; empty name: none.
  virtual std::string_view bucket_dim() const { return {}; }
  virtual std::vector<std::int64_t> default_buckets() const { return {}; }

  /// Bytes that must move through device memory (each input read once, each output written once).
  virtual double min_bytes(const Problem& p, DType t) const;
  /// Floating-point operations (0 for memory-bound ops).
  virtual double flops(const Problem&, DType) const { return 0.0; }

  /// The built-in configuration for this device: always valid, always runs.
  virtual Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const = 0;
  /// How default_params chose, where a lookup's note should say more than "the built-in
  /// default" (flash_decode: where the H100's cost model ranked the space); empty otherwise.
  virtual std::string default_note(const Problem& problem, DType t, const DeviceInfo& device) const {
    (void)problem, (void)t, (void)device;
    return {};
  }

  // ---- one serialiser for problems and parameters (implemented once in op.cpp) ----

  /// "m=16384,n=4096" in declared order; enumerated dims print their choice name.
  std::string problem_key(const Problem& p) const;
  /// Accepts "m=16384,n=4096" (any order, defaults fill the rest) or "16384x4096"
  /// (integer dims in order). Throws InvalidArgument naming the bad value and what is allowed.
  Problem parse_problem(std::string_view text) const;
  /// Checks every value against the dims' ranges, then problem_reason(); throws InvalidArgument.
  void check_problem(const Problem& p) const;
  /// Why (dtype, params, problem) is not even a point to judge: a dtype outside dtypes(),
  /// parameters outside the tunables' lists, or a problem check_problem() rejects; else nullopt.
  /// The common start of every op's invalid_reason().
  std::optional<std::string> point_reason(const Params& params, const Problem& problem,
                                          DType t) const;
  /// Constraints between dimensions or on allowed values beyond a range (e.g. head dims the
  /// template supports, hq a multiple of hkv); nullopt when the problem is fine.
  virtual std::optional<std::string> problem_reason(const Problem&) const { return std::nullopt; }
  /// Value of a dim by name (throws if the op has no such dim).
  std::int64_t dim(const Problem& p, std::string_view name) const;

  /// "threads=256,rows=1,vec=8" in declared order.
  std::string params_key(const Params& p) const;
  /// Parses and checks against the tunables' value lists; throws InvalidArgument.
  Params parse_params(std::string_view text) const;
  /// nullopt when every value is one of its tunable's values; otherwise why not.
  std::optional<std::string> check_params(const Params& p) const;
  std::int64_t param(const Params& p, std::string_view name) const;
  std::size_t param_index(std::string_view name) const;

  /// The embedded files the op's kernels are compiled from: those under family()/ and every
  /// embedded file they include, transitively; sorted by path.
  std::vector<std::string_view> source_files() const;
  /// Hash of source_files() (paths and text) plus name() and version(): tuned rows of another
  /// hash were measured on other kernel code and are stale.
  std::string template_hash() const;
};

/// Why a device cannot run the mma.sync + cp.async kernels (compute capability below 8.0), or
/// nullopt (also for an unknown capability, 0).
std::optional<std::string> needs_sm80_reason(const DeviceInfo& device);

/// Every op ktune knows, in a fixed order.
const std::vector<const Op*>& all_ops();
/// nullptr when unknown.
const Op* find_op(std::string_view name);
/// Throws InvalidArgument listing the known ops.
const Op& get_op(std::string_view name);

}  // namespace ktune
