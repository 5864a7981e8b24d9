#include "templates/fused/fused_ops.hpp"

#include <algorithm>
#include <string>

#include "ktune/error.hpp"
#include "templates/fused/args.h"

namespace ktune {
namespace {

constexpr std::int64_t kMaxRows = 2147483647;          // m: grid.x and int row indices
constexpr std::int64_t kMaxRowLength = 262144;         // n of the row ops
constexpr std::int64_t kMaxElementwiseWidth = 1 << 20;  // n of bias_act and swiglu

const char* kernel_type(DType t) {
  switch (t) {
    case DType::bf16: return "ktune::bf16";
    case DType::f16: return "ktune::fp16";
    case DType::f32: return "float";
    case DType::i32: return "int";  // not a compute type: static_reason refuses it first
    case DType::e4m3: return "ktune::e4m3";  // not a fused dtype: static_reason refuses it
  }
  return "float";
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Largest vector width (elements) of at most 16 bytes that divides n.
int widest_vec(std::int64_t n, DType t) {
  for (int vec = 8; vec > 1; vec /= 2)
    if (static_cast<std::size_t>(vec) * dtype_size(t) <= 16 && n % vec == 0) return vec;
  return 1;
}

DimSpec rows_dim() { return {"m", 1, kMaxRows, {}, std::nullopt, "rows"}; }
DimSpec width_dim(std::int64_t max, std::string help) {
  return {"n", 1, max, {}, std::nullopt, std::move(help)};
}

/// What every fused op shares: names, family, dims, tunables, scalars, dtype and value checks.
class FusedOp : public Op {
 public:
  FusedOp(std::string name, std::string summary, std::vector<DimSpec> dims,
          std::vector<Tunable> tunables, std::vector<ScalarSpec> scalars)
      : name_(std::move(name)),
        summary_(std::move(summary)),
        dims_(std::move(dims)),
        tunables_(std::move(tunables)),
        scalars_(std::move(scalars)) {}

  std::string_view name() const override { return name_; }
  std::string_view summary() const override { return summary_; }
  std::string_view family() const override { return "fused"; }
  const std::vector<DimSpec>& dims() const override { return dims_; }
  const std::vector<Tunable>& tunables() const override { return tunables_; }
  const std::vector<ScalarSpec>& scalars() const override { return scalars_; }

  Problem default_problem() const override {
    Problem p;
    for (const DimSpec& d : dims_)
      p.values.push_back(d.name == "m" ? 16384 : d.name == "n" ? 4096 : d.def.value_or(0));
    return p;
  }

 protected:
  /// Rejects parameters that are not in the space before they reach a name expression.
  void require_valid(const Params& params, const Problem& problem, DType t) const {
    if (auto why = point_reason(params, problem, t))
      throw InvalidArgument(name_ + ": " + *why);
  }

  static std::int64_t n_of(const Problem& p) { return p.values[1]; }
  static std::int64_t m_of(const Problem& p) { return p.values[0]; }

 private:
  std::string name_;
  std::string summary_;
  std::vector<DimSpec> dims_;
  std::vector<Tunable> tunables_;
  std::vector<ScalarSpec> scalars_;
};

// ---------------------------------------------------------------------------------------------
// Row ops: add_rmsnorm, layernorm, softmax (fused/norm.cuh, fused/softmax.cuh).

enum RowParam : std::size_t { kRowThreads, kRowRows, kRowVec, kRowRegs };

std::vector<Tunable> row_tunables() {
  return {
      {"threads", {32, 64, 128, 256, 512, 1024}, "threads per block"},
      {"rows", {1, 2, 4, 8}, "rows per block; threads / rows threads (whole warps) per row"},
      {"vec", {1, 2, 4, 8}, "elements per vector access (at most 16 bytes)"},
      {"regs", {0, 1}, "1: keep the row in registers between passes; 0: read it again"},
  };
}

/// Per-architecture defaults of the row ops. Should not affect results, only speed.
///
/// Few rows (m < SMs): 256-thread blocks, rows sharing a block when short, about items_target
/// vectors a thread. Many rows (m >= SMs, Hopper): the fewest whole warps a row that keep a
/// thread's slice of the row within many_items_target vectors, one row a block (two where one
/// warp takes a row), so the rows of an SM are not tied to each other's barriers; layernorm stops
/// at layernorm_threads a row while its row fits in registers. From exhaustive sweeps on the H200
/// (benchmarks/results/row-defaults-h200-2026-12-03.md, 36 problems, m = 1000-20000, n =
/// 1000-32768): the few-rows rule held 0.81-1.0 of the optimum there (layernorm 0.913, softmax
/// 0.948 on average; packing 2-4 rows into a block of 256 cost 8-14 %, and layernorm at n = 7168
/// and 8192 on 512 threads 14-19 %), this one 0.972-1.0 (0.995); on 20 problems swept after it
/// was written (n = 768-50304, m = 150-40000) 0.990, worst 0.946 (the old rule 0.927, 0.740), and
/// below m = SMs the few-rows rule stayed ahead (0.990 against 0.982 on 4 sweeps). Layernorm
/// then halves its vectors where that fills a half-filled last round (LayerNorm::many_rows_vec).
struct RowDefaults {
  int cc_major;           // first compute capability (major) this row applies to
  int block_threads;      // few rows: threads per block to aim for; short rows share a block
  int items_target;       // few rows: vectors per thread to aim for on the register path
  int max_reg_floats;     // few rows: longest slice of a row (floats a thread) kept in registers
  int reread_threads;     // threads per row when the row is read twice
  int many_items_target;  // many rows: vectors per thread to aim for; 0: the few-rows rule
  int layernorm_threads;  // many rows: layernorm's threads per row while its row fits
  int layernorm_half_vec_items;  // many rows: layernorm halves 8-wide vectors when that fills the
                                 // last round of a row with at most this many vectors a thread
};
constexpr RowDefaults kRowDefaults[] = {
    {9, 256, 2, 32, 1024, 3, 128, 8},  // Hopper
    {8, 256, 4, 32, 512, 0, 0, 0},     // Ampere, Ada: the few-rows rule at every m (not measured)
};

/// Floats of a row a thread of a `threads`-thread block keeps in registers on the many-rows
/// path: a quarter of its share of the register file (64 up to 256 threads, 16 at 1024, where
/// a thread has 64 registers), at most kRowRegisterFloats.
int row_register_floats(int threads, const DeviceInfo& device) {
  const int regs = device.regs_per_block > 0 ? device.regs_per_block : 65536;
  return std::min(kRowRegisterFloats, regs / (4 * threads));
}

template <typename Table, std::size_t N>
const Table& defaults_for(const Table (&table)[N], int cc_major) {
  for (const Table& row : table)
    if (cc_major >= row.cc_major) return row;
  return table[N - 1];
}

/// Launch geometry of one row-op configuration.
struct RowShape {
  int threads;  // per block
  int rows;     // per block
  int vec;      // elements per access
  int items;    // vectors per thread kept in registers; 0 on the re-read path
};

RowShape row_shape(const Params& p, std::int64_t n) {
  RowShape s{};
  s.threads = static_cast<int>(p.values[kRowThreads]);
  s.rows = static_cast<int>(p.values[kRowRows]);
  s.vec = static_cast<int>(p.values[kRowVec]);
  const int per_row = std::max(1, s.threads / s.rows);
  s.items = p.values[kRowRegs] ? static_cast<int>(ceil_div(ceil_div(n, s.vec), per_row)) : 0;
  return s;
}

class RowOp : public FusedOp {
 public:
  using FusedOp::FusedOp;

  std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                            DType t, const DeviceInfo& device) const override {
    if (auto why = point_reason(params, problem, t)) return why;
    const std::int64_t n = n_of(problem);
    const RowShape s = row_shape(params, n);
    const std::size_t size = dtype_size(t);
    if (static_cast<std::size_t>(s.vec) * size > 16)
      return "vec=" + std::to_string(s.vec) + " x " + std::to_string(size) + "-byte " +
             dtype_name(t) + " = " + std::to_string(s.vec * size) +
             " bytes, more than one 16-byte access";
    if (s.threads % s.rows != 0 || (s.threads / s.rows) % 32 != 0)
      return "threads=" + std::to_string(s.threads) + " / rows=" + std::to_string(s.rows) + " = " +
             std::to_string(s.threads / s.rows) +
             " threads per row, not a multiple of 32 (a row is handled by whole warps)";
    if (n % s.vec != 0)
      return "n=" + std::to_string(n) + " is not a multiple of vec=" + std::to_string(s.vec);
    if (device.max_threads_per_block > 0 && s.threads > device.max_threads_per_block)
      return "threads=" + std::to_string(s.threads) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    if (s.items * s.vec > kRowRegisterFloats)
      return "regs=1 keeps " + std::to_string(s.items) + " vectors x vec=" +
             std::to_string(s.vec) + " = " + std::to_string(s.items * s.vec) +
             " floats per thread in registers for n=" + std::to_string(n) + " with " +
             std::to_string(s.threads / s.rows) + " threads per row (limit " +
             std::to_string(kRowRegisterFloats) + "); use regs=0 or more threads per row";
    return std::nullopt;
  }

  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    const RowDefaults& d = defaults_for(kRowDefaults, device.cc_major);
    const std::int64_t n = n_of(problem);
    const int vec = widest_vec(n, t);
    const std::int64_t nv = n / vec;
    Params p;
    if (d.many_items_target > 0 && device.sm_count > 0 && m_of(problem) >= device.sm_count) {
      const int cap = many_rows_thread_cap(d);
      const auto fits = [&](int per_row) {
        return ceil_div(nv, per_row) * vec <= row_register_floats(per_row, device);
      };
      int per_row = 32;
      while (per_row < 1024 && ceil_div(nv, per_row) > d.many_items_target &&
             !(per_row >= cap && fits(per_row)))
        per_row *= 2;
      if (fits(per_row)) {
        const int rows = std::max(1, 64 / per_row);
        p.values = {per_row * rows, rows, many_rows_vec(d, problem, nv, per_row, vec), 1};
      } else {
        p.values = {d.reread_threads, 1, vec, 0};
      }
      return p;
    }
    int per_row = 32;
    while (per_row < 1024 && ceil_div(nv, per_row) > d.items_target) per_row *= 2;
    const std::int64_t items = ceil_div(nv, per_row);
    if (items * vec <= d.max_reg_floats) {
      const int rows = std::clamp(d.block_threads / per_row, 1, 8);
      p.values = {per_row * rows, rows, vec, 1};
    } else {
      p.values = {d.reread_threads, 1, vec, 0};
    }
    return p;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    require_valid(params, problem, t);
    const RowShape s = row_shape(params, n_of(problem));
    return {{file(), kernel_prefix(problem, t) + ", " + std::to_string(s.threads) + ", " +
                         std::to_string(s.rows) + ", " + std::to_string(s.vec) + ", " +
                         std::to_string(s.items) + ">"}};
  }

  int block_threads(const Params& params, const Problem&, DType, std::size_t) const override {
    return static_cast<int>(params.values[kRowThreads]);
  }

  std::size_t alignment(const Params& params, const Problem&, DType t) const override {
    return static_cast<std::size_t>(params.values[kRowVec]) * dtype_size(t);
  }

 protected:
  /// Embedded file holding the kernel.
  virtual std::string file() const = 0;
  /// Many rows: threads per row the default stops at once the row fits in registers.
  virtual int many_rows_thread_cap(const RowDefaults&) const { return 1024; }
  /// Many rows, register path: the vector width for a row of nv `vec`-wide vectors on per_row
  /// threads.
  virtual int many_rows_vec(const RowDefaults&, const Problem&, std::int64_t /*nv*/,
                            int /*per_row*/, int vec) const {
    return vec;
  }
  /// Name expression up to the tunables: "ktune::softmax_kernel<ktune::bf16".
  virtual std::string kernel_prefix(const Problem& problem, DType t) const = 0;

  /// One launch of the tuned kernel over all m rows.
  static void launch_rows(const RunArgs& a, Launcher& launcher, const void* args,
                          std::size_t args_size) {
    KernelLaunch l;
    l.kernel = a.kernels[0];
    const std::int64_t rows = a.params->values[kRowRows];
    l.grid[0] = static_cast<unsigned>(ceil_div(m_of(*a.problem), rows));
    l.block[0] = static_cast<unsigned>(a.params->values[kRowThreads]);
    l.args = args;
    l.args_size = args_size;
    launcher.launch(l);
  }

  /// One block of kReferenceThreads per row.
  static void launch_reference_rows(const RunArgs& a, Launcher& launcher, const void* args,
                                    std::size_t args_size) {
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = static_cast<unsigned>(m_of(*a.problem));
    l.block[0] = kReferenceThreads;
    l.args = args;
    l.args_size = args_size;
    launcher.launch(l);
  }
};

const void* in(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}
void* out(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}

class AddRmsNorm final : public RowOp {
 public:
  AddRmsNorm()
      : RowOp("add_rmsnorm", "h = x + residual; y = h * rsqrt(mean(h^2) + eps) * weight",
              {rows_dim(), width_dim(kMaxRowLength, "row length")}, row_tunables(),
              {{"eps", 1e-6, "added to mean(h^2)", std::nullopt, 0.0}}) {}

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const std::int64_t mn = m_of(p) * n_of(p);
    return {{"x", TensorRole::input, t, mn},
            {"residual", TensorRole::input, t, mn},
            {"weight", TensorRole::input, t, n_of(p)},
            {"y", TensorRole::output, t, mn},
            {"h", TensorRole::output, t, mn}};
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const AddRmsNormArgs k{in(a, 0), in(a, 1), in(a, 2), out(a, 3), out(a, 4),
                           static_cast<int>(m_of(*a.problem)), static_cast<int>(n_of(*a.problem)),
                           static_cast<float>(a.scalars[0])};
    launch_rows(a, launcher, &k, sizeof k);
  }

  std::vector<KernelSource> reference_kernels(const Problem&, DType t) const override {
    return {{"fused/reference.cuh",
             std::string("ktune::add_rmsnorm_reference_kernel<") + kernel_type(t) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const AddRmsNormArgs k{in(a, 0), in(a, 1), in(a, 2), out(a, 3), out(a, 4),
                           static_cast<int>(m_of(*a.problem)), static_cast<int>(n_of(*a.problem)),
                           static_cast<float>(a.scalars[0])};
    launch_reference_rows(a, launcher, &k, sizeof k);
  }

 protected:
  std::string file() const override { return "fused/norm.cuh"; }
  std::string kernel_prefix(const Problem&, DType t) const override {
    return std::string("ktune::add_rmsnorm_kernel<") + kernel_type(t);
  }
};

class LayerNorm final : public RowOp {
 public:
  LayerNorm()
      : RowOp("layernorm",
              "h = x (+ residual); y = (h - mean) * rsqrt(var + eps) * weight + bias",
              {rows_dim(), width_dim(kMaxRowLength, "row length"),
               {"residual", 0, 1, {"no", "yes"}, 0, "add a residual first and write h"}},
              row_tunables(), {{"eps", 1e-5, "added to the variance", std::nullopt, 0.0}}) {}

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const std::int64_t mn = m_of(p) * n_of(p);
    std::vector<TensorSpec> ts{{"x", TensorRole::input, t, mn}};
    if (residual(p)) ts.push_back({"residual", TensorRole::input, t, mn});
    ts.push_back({"weight", TensorRole::input, t, n_of(p)});
    ts.push_back({"bias", TensorRole::input, t, n_of(p)});
    ts.push_back({"y", TensorRole::output, t, mn});
    if (residual(p)) ts.push_back({"h", TensorRole::output, t, mn});
    return ts;
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const LayerNormArgs k = make_args(a);
    launch_rows(a, launcher, &k, sizeof k);
  }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    return {{"fused/reference.cuh", std::string("ktune::layernorm_reference_kernel<") +
                                        kernel_type(t) + (residual(p) ? ", true>" : ", false>")}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const LayerNormArgs k = make_args(a);
    launch_reference_rows(a, launcher, &k, sizeof k);
  }

 protected:
  std::string file() const override { return "fused/norm.cuh"; }
  int many_rows_thread_cap(const RowDefaults& d) const override { return d.layernorm_threads; }
  /// 4-wide vectors where 8-wide ones leave the last round of a row half-filled and 4-wide ones
  /// fill it within layernorm_half_vec_items vectors a thread, with two or more warps a row and
  /// no residual (n = 1280 on 64 threads, 2560 and 3584 on 128). H200 sweeps
  /// (benchmarks/results/row-defaults-h200-2026-12-03.md, "vector width"): there the 8-wide form
  /// took 1.026-1.057x the time of the 4-wide one on 8 of 10 sweeps (1.006x and 0.995x at 200
  /// and 600 rows). With a residual (two rows streamed in, one out) 4-wide vectors took
  /// 1.00-1.03x the 8-wide time on 3 sweeps, on one warp a row (n = 384, 640) 1.00-1.04x on 3;
  /// at n = 6656 on 128 threads, where the 4-wide form needs 13 vectors a thread, 1.06-1.09x.
  /// add_rmsnorm and softmax gain nothing from 4-wide vectors on the same widths (the 8-wide
  /// form at 0.985-1.006x their time). On 7 layernorm problems swept after this rule: 0.999 of
  /// the optimum, worst 0.990 (0.984 and 0.959 with 8-wide vectors).
  int many_rows_vec(const RowDefaults& d, const Problem& p, std::int64_t nv, int per_row,
                    int vec) const override {
    const bool part_filled = nv % per_row != 0;
    const bool half_fills =
        (2 * nv) % per_row == 0 && 2 * nv / per_row <= d.layernorm_half_vec_items;
    return vec == 8 && per_row >= 64 && !residual(p) && part_filled && half_fills ? 4 : vec;
  }
  std::string kernel_prefix(const Problem& p, DType t) const override {
    return std::string("ktune::layernorm_kernel<") + kernel_type(t) +
           (residual(p) ? ", true" : ", false");
  }

 private:
  static bool residual(const Problem& p) { return p.values[2] != 0; }

  static LayerNormArgs make_args(const RunArgs& a) {
    const bool res = residual(*a.problem);
    LayerNormArgs k{};
    std::size_t i = 0;
    k.x = in(a, i++);
    k.residual = res ? in(a, i++) : nullptr;
    k.weight = in(a, i++);
    k.bias = in(a, i++);
    k.y = out(a, i++);
    k.h = res ? out(a, i++) : nullptr;
    k.m = static_cast<int>(m_of(*a.problem));
    k.n = static_cast<int>(n_of(*a.problem));
    k.eps = static_cast<float>(a.scalars[0]);
    return k;
  }
};

class Softmax final : public RowOp {
 public:
  Softmax()
      : RowOp("softmax", "y = softmax(scale * x) along each row",
              {rows_dim(), width_dim(kMaxRowLength, "row length")}, row_tunables(),
              {{"scale", 1.0, "multiplies x before the softmax"}}) {}

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const std::int64_t mn = m_of(p) * n_of(p);
    return {{"x", TensorRole::input, t, mn}, {"y", TensorRole::output, t, mn}};
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const SoftmaxArgs k{in(a, 0), out(a, 1), static_cast<int>(m_of(*a.problem)),
                        static_cast<int>(n_of(*a.problem)), static_cast<float>(a.scalars[0])};
    launch_rows(a, launcher, &k, sizeof k);
  }

  std::vector<KernelSource> reference_kernels(const Problem&, DType t) const override {
    return {{"fused/reference.cuh",
             std::string("ktune::softmax_reference_kernel<") + kernel_type(t) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const SoftmaxArgs k{in(a, 0), out(a, 1), static_cast<int>(m_of(*a.problem)),
                        static_cast<int>(n_of(*a.problem)), static_cast<float>(a.scalars[0])};
    launch_reference_rows(a, launcher, &k, sizeof k);
  }

 protected:
  std::string file() const override { return "fused/softmax.cuh"; }
  std::string kernel_prefix(const Problem&, DType t) const override {
    return std::string("ktune::softmax_kernel<") + kernel_type(t);
  }
};

// ---------------------------------------------------------------------------------------------
// Elementwise ops: bias_act, swiglu (fused/elementwise.cuh).

enum ElementwiseParam : std::size_t { kEwThreads, kEwVec, kEwUnroll };

std::vector<Tunable> elementwise_tunables() {
  return {
      {"threads", {64, 128, 256, 512, 1024}, "threads per block"},
      {"vec", {1, 2, 4, 8}, "elements per vector access (at most 16 bytes)"},
      {"unroll", {1, 2, 4}, "rows per thread: independent vector loads in flight per thread"},
  };
}

/// Per-architecture defaults of the elementwise ops. Should not affect results, only speed.
/// The default halves `unroll` (down to 1) while the grid has fewer than min_blocks_per_sm blocks
/// an SM: a few rows (decode: m = 1..300) in few blocks run at a few SMs' bandwidth, not the
/// GPU's. Exhaustive sweeps on the H200 (2026-12-02, benchmarks/fused/NOTES.md): the fixed
/// {256 threads, unroll 4} ran at 0.92 of the optimum (worst 0.82, at m <= 64); this rule at
/// 0.986 on the shapes it was read from and on held-out ones, 0.975 (worst 0.93) on a check set
/// swept after it was written.
struct ElementwiseDefaults {
  int cc_major;           // first compute capability (major) this row applies to
  int threads;            // threads per block
  int unroll;             // rows per thread: 16-byte loads in flight per thread and input
  int min_blocks_per_sm;  // unroll halves while the grid is smaller than this many blocks an SM
};
constexpr ElementwiseDefaults kElementwiseDefaults[] = {
    {9, 256, 2, 2},  // Hopper: read from exhaustive H200 sweeps, m = 1..8192
    {8, 256, 2, 2},  // Ampere, Ada: the same filling rule, not measured there
};

/// Launch geometry of one elementwise configuration (see fused/elementwise.cuh).
struct ElementwiseShape {
  int threads;
  int vec;
  int col_shift;        // log2 of the column threads of a block
  unsigned grid_x;      // row blocks
  unsigned grid_y;      // column blocks
};

ElementwiseShape elementwise_shape(const Params& p, std::int64_t m, std::int64_t n) {
  ElementwiseShape s{};
  s.threads = static_cast<int>(p.values[kEwThreads]);
  s.vec = static_cast<int>(p.values[kEwVec]);
  const std::int64_t unroll = p.values[kEwUnroll];
  const std::int64_t nv = std::max<std::int64_t>(1, n / s.vec);
  std::int64_t cols = 1;
  while (cols < s.threads && cols < nv) cols *= 2;
  while ((std::int64_t{1} << s.col_shift) < cols) ++s.col_shift;
  const std::int64_t rows_per_block = s.threads / cols * unroll;
  s.grid_x = static_cast<unsigned>(ceil_div(m, rows_per_block));
  s.grid_y = static_cast<unsigned>(ceil_div(nv, cols));
  return s;
}

class ElementwiseOp : public FusedOp {
 public:
  using FusedOp::FusedOp;

  std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                            DType t, const DeviceInfo& device) const override {
    if (auto why = point_reason(params, problem, t)) return why;
    const std::int64_t n = n_of(problem);
    const std::int64_t vec = params.values[kEwVec];
    const std::int64_t threads = params.values[kEwThreads];
    const std::size_t size = dtype_size(t);
    if (static_cast<std::size_t>(vec) * size > 16)
      return "vec=" + std::to_string(vec) + " x " + std::to_string(size) + "-byte " +
             dtype_name(t) + " = " + std::to_string(static_cast<std::size_t>(vec) * size) +
             " bytes, more than one 16-byte access";
    if (n % vec != 0)
      return "n=" + std::to_string(n) + " is not a multiple of vec=" + std::to_string(vec);
    if (device.max_threads_per_block > 0 && threads > device.max_threads_per_block)
      return "threads=" + std::to_string(threads) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    return std::nullopt;
  }

  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    const ElementwiseDefaults& d = defaults_for(kElementwiseDefaults, device.cc_major);
    Params p;
    p.values = {d.threads, widest_vec(n_of(problem), t), d.unroll};
    const std::int64_t enough = std::int64_t{d.min_blocks_per_sm} * std::max(device.sm_count, 1);
    while (p.values[kEwUnroll] > 1) {
      const ElementwiseShape s = elementwise_shape(p, m_of(problem), n_of(problem));
      if (std::int64_t{s.grid_x} * s.grid_y >= enough) break;
      p.values[kEwUnroll] /= 2;
    }
    return p;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    require_valid(params, problem, t);
    return {{"fused/elementwise.cuh",
             kernel_prefix(problem, t) + ", " + std::to_string(params.values[kEwThreads]) + ", " +
                 std::to_string(params.values[kEwVec]) + ", " +
                 std::to_string(params.values[kEwUnroll]) + ">"}};
  }

  int block_threads(const Params& params, const Problem&, DType, std::size_t) const override {
    return static_cast<int>(params.values[kEwThreads]);
  }

  std::size_t alignment(const Params& params, const Problem&, DType t) const override {
    return static_cast<std::size_t>(params.values[kEwVec]) * dtype_size(t);
  }

 protected:
  /// Name expression up to the tunables: "ktune::swiglu_kernel<ktune::bf16".
  virtual std::string kernel_prefix(const Problem& problem, DType t) const = 0;

  static void launch_tiles(const RunArgs& a, Launcher& launcher, const ElementwiseShape& s,
                           const void* args, std::size_t args_size) {
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = s.grid_x;
    l.grid[1] = s.grid_y;
    l.block[0] = static_cast<unsigned>(s.threads);
    l.args = args;
    l.args_size = args_size;
    launcher.launch(l);
  }

  /// Grid-stride reference: enough blocks to cover m * n, at most 65535.
  static void launch_reference(const RunArgs& a, Launcher& launcher, const void* args,
                               std::size_t args_size) {
    KernelLaunch l;
    l.kernel = a.kernels[0];
    const std::int64_t total = m_of(*a.problem) * n_of(*a.problem);
    l.grid[0] = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(total, kReferenceThreads),
                                                             65535));
    l.block[0] = kReferenceThreads;
    l.args = args;
    l.args_size = args_size;
    launcher.launch(l);
  }
};

static_assert(static_cast<int>(Activation::gelu_tanh) == 0 &&
                  static_cast<int>(Activation::gelu_erf) == 1 &&
                  static_cast<int>(Activation::silu) == 2 && static_cast<int>(Activation::relu) == 3,
              "activation_names() lists ktune::Activation in order");

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names{"gelu_tanh", "gelu_erf", "silu", "relu"};
  return names;
}

class BiasAct final : public ElementwiseOp {
 public:
  BiasAct()
      : ElementwiseOp("bias_act", "y = act(x + bias)",
                      {rows_dim(), width_dim(kMaxElementwiseWidth, "row length"),
                       {"act", 0, 3, activation_names(), 0, "activation"}},
                      elementwise_tunables(), {}) {}

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const std::int64_t mn = m_of(p) * n_of(p);
    return {{"x", TensorRole::input, t, mn},
            {"bias", TensorRole::input, t, n_of(p)},
            {"y", TensorRole::output, t, mn}};
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const ElementwiseShape s = elementwise_shape(*a.params, m_of(*a.problem), n_of(*a.problem));
    const BiasActArgs k{in(a, 0), in(a, 1), out(a, 2), static_cast<int>(m_of(*a.problem)),
                        static_cast<int>(n_of(*a.problem)), s.col_shift};
    launch_tiles(a, launcher, s, &k, sizeof k);
  }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    return {{"fused/reference.cuh", std::string("ktune::bias_act_reference_kernel<") +
                                        kernel_type(t) + ", " + activation(p) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const BiasActArgs k{in(a, 0), in(a, 1), out(a, 2), static_cast<int>(m_of(*a.problem)),
                        static_cast<int>(n_of(*a.problem)), 0};
    launch_reference(a, launcher, &k, sizeof k);
  }

 protected:
  std::string kernel_prefix(const Problem& p, DType t) const override {
    return std::string("ktune::bias_act_kernel<") + kernel_type(t) + ", " + activation(p);
  }

 private:
  static std::string activation(const Problem& p) {
    return "ktune::Activation::" + activation_names().at(static_cast<std::size_t>(p.values[2]));
  }
};

class Swiglu final : public ElementwiseOp {
 public:
  Swiglu()
      : ElementwiseOp("swiglu", "y = silu(a) * b where x = [a | b] along each row",
                      {rows_dim(), width_dim(kMaxElementwiseWidth, "output row length")},
                      elementwise_tunables(), {}) {}

  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const std::int64_t mn = m_of(p) * n_of(p);
    return {{"x", TensorRole::input, t, 2 * mn}, {"y", TensorRole::output, t, mn}};
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const ElementwiseShape s = elementwise_shape(*a.params, m_of(*a.problem), n_of(*a.problem));
    const SwigluArgs k{in(a, 0), out(a, 1), static_cast<int>(m_of(*a.problem)),
                       static_cast<int>(n_of(*a.problem)), s.col_shift};
    launch_tiles(a, launcher, s, &k, sizeof k);
  }

  std::vector<KernelSource> reference_kernels(const Problem&, DType t) const override {
    return {{"fused/reference.cuh",
             std::string("ktune::swiglu_reference_kernel<") + kernel_type(t) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const SwigluArgs k{in(a, 0), out(a, 1), static_cast<int>(m_of(*a.problem)),
                       static_cast<int>(n_of(*a.problem)), 0};
    launch_reference(a, launcher, &k, sizeof k);
  }

 protected:
  std::string kernel_prefix(const Problem&, DType t) const override {
    return std::string("ktune::swiglu_kernel<") + kernel_type(t);
  }
};

}  // namespace

std::vector<const Op*> fused_ops() {
  static const AddRmsNorm add_rmsnorm;
  static const LayerNorm layernorm;
  static const BiasAct bias_act;
  static const Swiglu swiglu;
  static const Softmax softmax;
  return {&add_rmsnorm, &layernorm, &bias_act, &swiglu, &softmax};
}

}  // namespace ktune
