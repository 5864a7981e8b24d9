// The whole MoE op on the GPU: moe_op().kernels() compiled with NVRTC for the device, run()
// through the real CUDA launcher on a stream, against (a) a host double reference of the layer
// (routing by tests/support/moe_reference, ties to the lower expert id, or to the lower token id
// for expert choice, MLPs in double) within the op's tolerance() and (b) the op's own fp32
// reference kernels (run_reference). Every routing mode x
// dtype, T in {1, 3, 17, 1000}, E in {8, 64} x k in {1, 2, 8}, H and I not multiples of any tile,
// an expert with every token and one with none, outputs poisoned first; a CUDA graph capture
// replayed on fresh inputs equals plain launches bit for bit; two runs give the same y.
// FP8 weights (e4m3, per-channel scales; sm_89 and later): the same against the dequantised
// weights, x and y in bf16. Past 256 experts (E = 384 and 512, the kernels' EMAX = 512 forms):
// every routing mode, T = 77 and 1000, both align paths, fuse_route 1 and 2. Skipped without a
// GPU.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "templates/moe/args.h"
#include "templates/moe/moe_op.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/moe_gemm_reference.hpp"
#include "tests/support/moe_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

// Tensor indices of moe_op().tensors().
enum : std::size_t {
  kX, kLogits, kBias, kIds, kWeights, kW1, kW2, kY, kCounts, kAux, kW1Scale, kW2Scale, kTensors
};

const char* routing_name(int r) {
  static const char* names[] = {"softmax", "softmax_renorm", "sigmoid_group", "precomputed",
                                "expert_choice"};
  return names[r];
}

struct Case {
  int routing = moe_softmax_renorm;
  int e = 8, k = 2, h = 136, i = 200, t = 1;
  int n_group = 1, topk_group = 1;
  double scaling = 1.0;
  DType dtype = DType::bf16;
  bool skew = true;        // expert 0 receives every token, expert E - 1 none (where k < E)
  std::string params;      // empty: the device's default_params
  std::string set;         // tunables set on top of params (or the defaults), e.g. fuse_route=1
  bool fp8() const { return dtype == DType::e4m3; }
  /// x and y in bf16 (also under FP8 weights), else fp16.
  bool bf16() const { return dtype != DType::f16; }
  bool routed() const { return routing != moe_precomputed; }
  bool expert_choice() const { return routing == moe_expert_choice; }
  /// Entries of topk_ids / topk_weights: T * k, or E * C for expert choice.
  std::size_t pairs() const {
    return expert_choice() ? static_cast<std::size_t>(e) * moe_expert_capacity(t, k, e)
                           : static_cast<std::size_t>(t) * k;
  }
  Problem problem() const { return {{e, k, h, i, t, routing, n_group, topk_group}}; }
  std::string tag() const {
    return std::string(routing_name(routing)) + (fp8() ? " e4m3" : bf16() ? " bf16" : " fp16") +
           " e=" + std::to_string(e) + " k=" + std::to_string(k) + " h=" + std::to_string(h) +
           " i=" + std::to_string(i) + " t=" + std::to_string(t) +
           (routing == moe_sigmoid_group ? " n_group=" + std::to_string(n_group) +
                                               " topk_group=" + std::to_string(topk_group)
                                         : std::string()) +
           (params.empty() ? std::string(" default") : " " + params) +
           (set.empty() ? std::string() : " " + set);
  }
};

/// The case's configuration on `dev`: its params or the defaults, then its `set` tunables.
Params case_params(const Case& c, const DeviceInfo& dev) {
  const Op& op = moe_op();
  Params p = c.params.empty() ? op.default_params(c.problem(), c.dtype, dev)
                              : op.parse_params(c.params);
  std::size_t at = 0;
  while (at < c.set.size()) {
    std::size_t end = c.set.find(',', at);
    if (end == std::string::npos) end = c.set.size();
    const std::string item = c.set.substr(at, end - at);
    const std::size_t eq = item.find('=');
    p.values[op.param_index(item.substr(0, eq))] = std::stoll(item.substr(eq + 1));
    at = end + 1;
  }
  return p;
}

/// Host inputs of one case: bits for the device, doubles for the reference.
struct Inputs {
  std::vector<std::uint16_t> x, w1, w2;
  std::vector<double> xv, w1v, w2v;   // FP8: the dequantised weights
  std::vector<std::uint8_t> w1q, w2q;  // FP8 weights' bits
  std::vector<float> w1s, w2s;         // and their per-row scales
  std::vector<float> logits, bias;   // routed
  std::vector<int> ids;              // precomputed
  std::vector<float> weights;        // precomputed
};

void take(test::MoeTensor&& m, std::vector<std::uint16_t>& bits, std::vector<double>& val) {
  bits = std::move(m.bits);
  val = std::move(m.val);
}

Inputs make_inputs(const Case& c, std::mt19937& rng) {
  Inputs in;
  const bool b = c.bf16();
  const std::size_t E = c.e, H = c.h, I = c.i, T = c.t;
  // x of unit variance; w1 ~ 1/sqrt(H) so gate and up are O(1); w2 ~ 1/sqrt(I) so y is O(1),
  // divided by routed_scaling where the weights sum to it: tolerance()'s atol assumes y ~ 1.
  const double sx = std::sqrt(3.0), s1 = std::sqrt(3.0 / c.h),
               s2 = 1.5 * std::sqrt(3.0 / c.i) / (c.routing == moe_sigmoid_group ? c.scaling : 1.0);
  take(test::MoeTensor(b, T * H, rng, -sx, sx), in.x, in.xv);
  if (c.fp8()) {
    // Stored values uniform in +-3 (e4m3 bits), each row's scale in [0.5, 1.5] x s / 3: real
    // weights of about the 16-bit ones' spread, every row scaled differently.
    const auto fp8 = [&](std::size_t rows, std::size_t cols, double s,
                         std::vector<std::uint8_t>& bits, std::vector<float>& scales,
                         std::vector<double>& val) {
      std::uniform_real_distribution<float> stored(-3.0f, 3.0f), scale(0.5f, 1.5f);
      bits.resize(rows * cols);
      val.resize(rows * cols);
      scales.resize(rows);
      for (std::size_t r = 0; r < rows; ++r) {
        scales[r] = scale(rng) * static_cast<float>(s / 3.0);
        for (std::size_t j = 0; j < cols; ++j) {
          const std::size_t i = r * cols + j;
          bits[i] = test::float_to_e4m3_bits(stored(rng));
          val[i] = static_cast<double>(test::e4m3_bits_to_float(bits[i])) * scales[r];
        }
      }
    };
    fp8(E * 2 * I, H, s1, in.w1q, in.w1s, in.w1v);
    fp8(E * H, I, s2, in.w2q, in.w2s, in.w2v);
  } else {
    take(test::MoeTensor(b, E * 2 * I * H, rng, -s1, s1), in.w1, in.w1v);
    take(test::MoeTensor(b, E * H * I, rng, -s2, s2), in.w2, in.w2v);
  }
  if (c.routed()) {
    std::normal_distribution<float> n01(0.0f, 1.0f), nb(0.0f, 0.1f);
    in.logits.resize(T * E);
    for (float& v : in.logits) v = n01(rng);
    if (c.skew && c.e >= 3)
      for (std::size_t t = 0; t < T; ++t) {
        // 10 sigma: at +6, one of 1000 tokens x 63 other experts beats expert 0 now and then.
        in.logits[t * E] += 10.0f;
        in.logits[t * E + E - 1] -= 10.0f;
      }
    if (c.routing == moe_sigmoid_group) {
      in.bias.resize(E);
      for (float& v : in.bias) v = nb(rng);
    }
  } else {
    const test::MoeTestRouting r = test::moe_test_routing(c.t, c.e, c.k, rng, c.skew);
    in.ids = r.ids;
    in.weights = r.weights;
    // Each token's weights sum to 1, as engines' renormalised top-k do: tolerance()'s atol
    // assumes y ~ 1, and k = 8 weights of up to 1 each would make y ~ 4.
    for (std::size_t t = 0; t < T; ++t) {
      float sum = 0;
      for (int s = 0; s < c.k; ++s) sum += in.weights[t * c.k + s];
      for (int s = 0; s < c.k; ++s) in.weights[t * c.k + s] /= sum;
    }
  }
  return in;
}

template <typename X>
void upload(const DeviceBuffer& b, const std::vector<X>& v) {
  if (!v.empty()) KTUNE_CU(Driver::get().cuMemcpyHtoD(b.get(), v.data(), v.size() * sizeof(X)));
}

template <typename X>
std::vector<X> download(const DeviceBuffer& b, std::size_t n) {
  std::vector<X> v(n);
  if (n) KTUNE_CU(Driver::get().cuMemcpyDtoH(v.data(), b.get(), n * sizeof(X)));
  return v;
}

std::uint64_t addr(const DeviceBuffer& b) { return static_cast<std::uint64_t>(b.get()); }

/// What one call wrote.
struct Outputs {
  std::vector<std::uint16_t> y;
  std::vector<int> ids, counts;
  std::vector<float> weights;
  float aux = NAN;
  bool operator==(const Outputs& o) const {
    return y == o.y && ids == o.ids && counts == o.counts &&
           std::memcmp(weights.data(), o.weights.data(), weights.size() * 4) == 0 &&
           weights.size() == o.weights.size() && std::memcmp(&aux, &o.aux, 4) == 0;
  }
};

/// Compiled and loaded kernels, shared by every test of the binary; compiles in parallel.
class Kernels {
 public:
  static Kernels& get() {
    static Kernels k;
    return k;
  }
  /// Compiles every kernel of `sources` not yet loaded, on all cores.
  void prepare(const std::vector<KernelSource>& sources, const std::string& arch) {
    std::vector<KernelSource> todo;
    for (const KernelSource& s : sources)
      if (!loaded_.count(s.name_expression) &&
          std::find(todo.begin(), todo.end(), s) == todo.end())
        todo.push_back(s);
    std::vector<CompiledKernel> built(todo.size());
    std::mutex m;
    std::size_t next = 0;
    std::vector<std::future<void>> workers;
    const unsigned n = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    for (unsigned w = 0; w < n; ++w)
      workers.push_back(std::async(std::launch::async, [&] {
        for (;;) {
          std::size_t i;
          {
            std::lock_guard<std::mutex> lock(m);
            if (next >= todo.size()) return;
            i = next++;
          }
          built[i] = compiler_.compile({todo[i], arch, {}});
        }
      }));
    for (auto& w : workers) w.get();
    for (std::size_t i = 0; i < todo.size(); ++i) {
      Loaded l;
      l.module = Module(built[i].cubin);
      l.fn = l.module.function(built[i].lowered_name);
      loaded_.emplace(todo[i].name_expression, std::move(l));
    }
  }
  /// Handles of `sources` (prepared first); raises each kernel's dynamic shared memory limit.
  std::vector<KernelHandle> handles(const std::vector<KernelSource>& sources,
                                    const std::vector<unsigned>& smem, const std::string& arch) {
    prepare(sources, arch);
    std::vector<KernelHandle> out;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      CUfunction fn = loaded_.at(sources[i].name_expression).fn;
      // Whenever there is dynamic shared memory: the GEMM's static shared memory counts
      // against the default 48 KiB too (a 49152-byte ring alone would not launch).
      if (i < smem.size() && smem[i] > 0)
        KTUNE_CU(Driver::get().cuFuncSetAttribute(
            fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem[i])));
      out.push_back(fn);
    }
    return out;
  }

 private:
  struct Loaded {
    Module module;
    CUfunction fn = nullptr;
  };
  Kernels() : compiler_(dir_.path()) {}
  test::TempDir dir_;
  Compiler compiler_;
  std::map<std::string, Loaded> loaded_;
};

/// One case on the device: its buffers, the configuration's kernels, and launches.
class MoeCall {
 public:
  MoeCall(const Case& c, const DeviceInfo& dev)
      : c_(c), problem_(c.problem()), sm_count_(dev.sm_count) {
    const Op& op = moe_op();
    params_ = case_params(c, dev);
    if (auto why = op.invalid_reason(params_, problem_, c.dtype, dev))
      throw std::runtime_error(c.tag() + ": invalid configuration: " + *why);
    const std::vector<KernelSource> ks = op.kernels(params_, problem_, c.dtype);
    std::vector<unsigned> smem;
    for (std::size_t i = 0; i < ks.size(); ++i)
      smem.push_back(op.dynamic_shared_bytes(params_, problem_, c.dtype, i));
    kernels_ = Kernels::get().handles(ks, smem, dev.arch());
    ref_kernels_ = Kernels::get().handles(op.reference_kernels(problem_, c.dtype), {}, dev.arch());
    const std::size_t es = 2, ws = dtype_size(c.dtype);  // x and y; the weights
    const std::size_t E = c.e, H = c.h, I = c.i, T = c.t, P = c.pairs();
    const auto buf = [](std::size_t bytes) { return DeviceBuffer(bytes + 16); };
    x_ = buf(T * H * es);
    w1_ = buf(E * 2 * I * H * ws);
    w2_ = buf(E * H * I * ws);
    w1s_ = buf(c.fp8() ? E * 2 * I * 4 : 0);
    w2s_ = buf(c.fp8() ? E * H * 4 : 0);
    logits_ = buf(T * E * 4);
    bias_ = buf(E * 4);
    ids_ = buf(P * 4);
    weights_ = buf(P * 4);
    y_ = buf(T * H * es);
    counts_ = buf(E * 4);
    aux_ = buf(4);
    workspace_bytes_ = op.workspace_bytes(params_, problem_, c.dtype);
    workspace_ = DeviceBuffer(std::max<std::size_t>(workspace_bytes_, 256));
    ref_ids_ = buf(P * 4);
    ref_weights_ = buf(P * 4);
    ref_y_ = buf(T * H * 4);
    ref_counts_ = buf(E * 4);
    ref_aux_ = buf(4);
    KTUNE_CU(Driver::get().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    // The workspace starts as garbage: the op must not read what it did not write (the aux
    // scratch is zeroed by its own kernel).
    KTUNE_CU(Driver::get().cuMemsetD8Async(workspace_.get(), 0xa5, workspace_.size(), stream_));
  }
  ~MoeCall() {
    if (stream_) Driver::get().cuStreamDestroy(stream_);
  }
  MoeCall(const MoeCall&) = delete;
  MoeCall& operator=(const MoeCall&) = delete;

  const Case& c() const { return c_; }
  const Params& params() const { return params_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  CUstream stream() const { return stream_; }

  void upload(const Inputs& in) {
    ktune::upload(x_, in.x);
    ktune::upload(w1_, in.w1);
    ktune::upload(w2_, in.w2);
    ktune::upload(w1_, in.w1q);
    ktune::upload(w2_, in.w2q);
    ktune::upload(w1s_, in.w1s);
    ktune::upload(w2s_, in.w2s);
    ktune::upload(logits_, in.logits);
    ktune::upload(bias_, in.bias);
    if (!c_.routed()) {
      ktune::upload(ids_, in.ids);
      ktune::upload(weights_, in.weights);
    }
  }

  /// NaN in y, weights and aux; -7 in ids and counts (ids only where they are outputs).
  void poison() {
    const Driver& d = Driver::get();
    const std::size_t P = c_.pairs();
    KTUNE_CU(d.cuMemsetD16Async(y_.get(), 0xffff, static_cast<std::size_t>(c_.t) * c_.h, stream_));
    if (c_.routed()) {
      KTUNE_CU(d.cuMemsetD32Async(ids_.get(), static_cast<unsigned>(-7), P, stream_));
      KTUNE_CU(d.cuMemsetD32Async(weights_.get(), 0xffffffffu, P, stream_));
    }
    KTUNE_CU(d.cuMemsetD32Async(counts_.get(), static_cast<unsigned>(-7), c_.e, stream_));
    KTUNE_CU(d.cuMemsetD32Async(aux_.get(), 0xffffffffu, 1, stream_));
  }

  /// Enqueues the op. `all`: every optional output requested; otherwise none (routed ids,
  /// weights and counts then live in the workspace).
  void launch(bool all) {
    std::uint64_t t[kTensors] = {};
    t[kX] = addr(x_);
    if (c_.routed()) t[kLogits] = addr(logits_);
    if (c_.routing == moe_sigmoid_group) t[kBias] = addr(bias_);
    if (all || !c_.routed()) {
      t[kIds] = addr(ids_);
      t[kWeights] = addr(weights_);
    }
    t[kW1] = addr(w1_);
    t[kW2] = addr(w2_);
    if (c_.fp8()) {
      t[kW1Scale] = addr(w1s_);
      t[kW2Scale] = addr(w2s_);
    }
    t[kY] = addr(y_);
    if (all) {
      t[kCounts] = addr(counts_);
      if (c_.routed()) t[kAux] = addr(aux_);
    }
    const double scalars[] = {c_.scaling};
    RunArgs a;
    a.params = &params_;
    a.problem = &problem_;
    a.dtype = c_.dtype;
    a.tensors = t;
    a.scalars = scalars;
    a.workspace = addr(workspace_);
    a.kernels = kernels_.data();
    // Persistent GEMMs on 5 CTAs: each loops over many tiles (both row tables, the ring's phases
    // across tiles); the rest on the device's SM count.
    a.sm_count = c_.params.find("persist") != std::string::npos ? 5 : sm_count_;
    CudaLauncher launcher(stream_);
    moe_op().run(a, launcher);
  }

  Outputs outputs() {
    KTUNE_CU(Driver::get().cuStreamSynchronize(stream_));
    const std::size_t P = c_.pairs();
    Outputs o;
    o.y = download<std::uint16_t>(y_, static_cast<std::size_t>(c_.t) * c_.h);
    o.ids = download<int>(ids_, P);
    o.weights = download<float>(weights_, P);
    o.counts = download<int>(counts_, c_.e);
    o.aux = download<float>(aux_, 1)[0];
    return o;
  }

  /// The op's fp32 reference kernels: ids, weights, y, counts, aux (all float).
  struct Reference {
    std::vector<float> ids, weights, y, counts;
    float aux = NAN;
  };
  Reference reference() {
    const Driver& d = Driver::get();
    const std::size_t P = c_.pairs();
    KTUNE_CU(d.cuMemsetD32Async(ref_y_.get(), 0xffffffffu, static_cast<std::size_t>(c_.t) * c_.h,
                                stream_));
    KTUNE_CU(d.cuMemsetD32Async(ref_counts_.get(), 0xffffffffu, c_.e, stream_));
    KTUNE_CU(d.cuMemsetD32Async(ref_aux_.get(), 0xffffffffu, 1, stream_));
    std::uint64_t t[kTensors] = {};
    t[kX] = addr(x_);
    if (c_.routed()) {
      t[kLogits] = addr(logits_);
      t[kIds] = addr(ref_ids_);
      t[kWeights] = addr(ref_weights_);
      t[kAux] = addr(ref_aux_);
    } else {
      t[kIds] = addr(ids_);
      t[kWeights] = addr(weights_);
    }
    if (c_.routing == moe_sigmoid_group) t[kBias] = addr(bias_);
    t[kW1] = addr(w1_);
    t[kW2] = addr(w2_);
    if (c_.fp8()) {
      t[kW1Scale] = addr(w1s_);
      t[kW2Scale] = addr(w2s_);
    }
    t[kY] = addr(ref_y_);
    t[kCounts] = addr(ref_counts_);
    const double scalars[] = {c_.scaling};
    RunArgs a;
    a.problem = &problem_;
    a.dtype = c_.dtype;
    a.tensors = t;
    a.scalars = scalars;
    a.kernels = ref_kernels_.data();
    CudaLauncher launcher(stream_);
    const auto t0 = std::chrono::steady_clock::now();
    moe_op().run_reference(a, launcher);
    KTUNE_CU(d.cuStreamSynchronize(stream_));
    std::printf("    reference kernels %.2f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
    Reference r;
    if (c_.routed()) {
      r.ids = download<float>(ref_ids_, P);
      r.weights = download<float>(ref_weights_, P);
      r.aux = download<float>(ref_aux_, 1)[0];
    }
    r.y = download<float>(ref_y_, static_cast<std::size_t>(c_.t) * c_.h);
    r.counts = download<float>(ref_counts_, c_.e);
    return r;
  }

 private:
  Case c_;
  Problem problem_;
  Params params_;
  std::vector<KernelHandle> kernels_, ref_kernels_;
  DeviceBuffer x_, w1_, w2_, w1s_, w2s_, logits_, bias_, ids_, weights_, y_, counts_, aux_,
      workspace_;
  DeviceBuffer ref_ids_, ref_weights_, ref_y_, ref_counts_, ref_aux_;
  std::size_t workspace_bytes_ = 0;
  CUstream stream_ = nullptr;
  int sm_count_ = 0;
};

test::MoeRouteProblem route_problem(const Case& c) {
  test::MoeRouteProblem p;
  p.tokens = c.t;
  p.experts = c.e;
  p.k = c.k;
  p.routing = c.routing;
  p.n_group = c.n_group;
  p.topk_group = c.topk_group;
  p.routed_scaling = c.routing == moe_sigmoid_group ? c.scaling : 1.0;
  return p;
}

/// Host double reference of y [T, H] for the given routing (ids [T, k], weights [T, k]).
std::vector<double> layer_ref(const Case& c, const Inputs& in, const std::vector<int>& ids,
                              const std::vector<double>& weights) {
  return test::moe_layer_ref(in.xv, in.w1v, in.w2v, c.t, c.h, c.i,
                             test::moe_topk_uses(ids, weights, c.k, c.e));
}

/// check() for routing=expert_choice: each expert's chosen tokens against the double reference
/// (a difference accepted only for scores within fp32 reach of the expert's threshold, the
/// reference then following the kernels), weights, counts, aux_loss left alone, y against the
/// double layer (zero for tokens nobody chose), and the op's fp32 reference kernels, which
/// compute the scores bit for bit as the kernels do: the same tokens and weights exactly.
void check_expert_choice(MoeCall& run, const Inputs& in, const Outputs& out) {
  const Case& c = run.c();
  const int T = c.t, E = c.e, H = c.h;
  const std::string tag = c.tag();
  const test::MoeExpertChoiceResult ref = test::moe_expert_choice_ref(in.logits, T, E, c.k);
  const int C = ref.capacity;
  ASSERT_EQ(static_cast<std::size_t>(E) * C, c.pairs()) << tag;
  std::vector<int> tokens = out.ids;
  std::vector<double> weights(c.pairs());
  int bad = 0;
  for (int e = 0; e < E; ++e) {
    const auto at = [&](int i) { return static_cast<std::size_t>(e) * C + i; };
    const auto score = [&](int t) { return ref.scores[static_cast<std::size_t>(t) * E + e]; };
    const std::vector<int> mine(out.ids.begin() + at(0), out.ids.begin() + at(C));
    const std::vector<int> want(ref.tokens.begin() + at(0), ref.tokens.begin() + at(C));
    bool ok = true;  // valid ids in increasing order
    for (int i = 0; i < C; ++i)
      ok = ok && mine[i] >= 0 && mine[i] < T && (i == 0 || mine[i] > mine[i - 1]);
    if (ok && mine != want) {
      double threshold = score(want[0]);  // the lowest score the reference chose
      for (int t : want) threshold = std::min(threshold, score(t));
      std::vector<int> diff;
      std::set_symmetric_difference(mine.begin(), mine.end(), want.begin(), want.end(),
                                    std::back_inserter(diff));
      for (int t : diff) ok = ok && std::fabs(score(t) - threshold) <= 1e-5 * threshold;
      if (ok)
        std::printf("  %s: expert %d: %zu tokens accepted as near-ties\n", tag.c_str(), e,
                    diff.size());
    }
    if (!ok) {
      if (bad++ < 3)
        ADD_FAILURE() << tag << ": expert " << e << " chose other tokens than the reference";
      std::copy(want.begin(), want.end(), tokens.begin() + at(0));
      for (int i = 0; i < C; ++i) weights[at(i)] = score(want[i]);
      continue;
    }
    for (int i = 0; i < C; ++i) {
      const double w = score(mine[i]);
      weights[at(i)] = w;
      const double g = out.weights[at(i)];
      if (!(std::fabs(g - w) <= 1e-5 * w) && bad++ < 3)
        ADD_FAILURE() << tag << ": expert " << e << " slot " << i << " (token " << mine[i]
                      << ") weight " << g << ", want " << w;
    }
  }
  EXPECT_EQ(bad, 0) << tag << ": routing";
  EXPECT_EQ(out.counts, std::vector<int>(E, C)) << tag << ": expert_counts";
  EXPECT_TRUE(std::isnan(out.aux)) << tag << ": aux_loss was written (not applicable)";

  // FP8 weights: against the unquantised double layer within the quantisation's error, against
  // the reference kernels (which quantise) within the op's tolerance, as check() does.
  const Tolerance tol = c.fp8() ? Tolerance{0.1, 0.4} : moe_op().tolerance(c.dtype);
  const Tolerance ktol = moe_op().tolerance(c.dtype);
  const std::vector<double> yref = test::moe_layer_ref(
      in.xv, in.w1v, in.w2v, T, H, c.i, test::moe_expert_choice_uses(tokens, weights, E, C));
  std::vector<bool> chosen(T, false);
  for (int t : tokens) chosen[t] = true;
  test::MoeChecker cy("y " + tag);
  std::vector<double> y(out.y.size());
  int unchosen = 0, nonzero = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] = test::moe_from_bits(c.bf16(), out.y[i]);
    cy(y[i], yref[i], tol.atol + tol.rtol * std::fabs(yref[i]),
       "token " + std::to_string(i / H) + " col " + std::to_string(i % H));
    if (!chosen[i / H]) {
      unchosen += i % H == 0;
      nonzero += y[i] != 0.0;
    }
  }
  EXPECT_EQ(cy.failed, 0) << cy.failed << " of " << cy.checked << "; " << cy.first;
  EXPECT_EQ(nonzero, 0) << tag << ": y of tokens no expert chose must be 0";

  const MoeCall::Reference r = run.reference();
  int ref_bad = 0;
  for (std::size_t p = 0; p < c.pairs(); ++p)
    if (static_cast<int>(r.ids[p]) != out.ids[p] || r.weights[p] != out.weights[p]) {
      if (ref_bad++ < 3)
        ADD_FAILURE() << tag << ": reference kernel entry " << p << " token " << r.ids[p]
                      << " weight " << r.weights[p] << " vs kernels' " << out.ids[p] << " "
                      << out.weights[p];
    }
  EXPECT_EQ(ref_bad, 0) << tag << ": reference kernel selection (must be bit-identical)";
  EXPECT_EQ(r.counts, std::vector<float>(E, static_cast<float>(C))) << tag << ": reference counts";
  test::MoeChecker ck("y vs reference kernel " + tag), cd("reference kernel vs double " + tag);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const std::string where = "token " + std::to_string(i / H) + " col " + std::to_string(i % H);
    ck(y[i], r.y[i], ktol.atol + ktol.rtol * std::fabs(r.y[i]), where);
    cd(r.y[i], yref[i],
       (c.fp8() ? tol.atol + tol.rtol * std::fabs(yref[i]) : 1e-4) + 1e-4 * std::fabs(yref[i]),
       where);
  }
  EXPECT_EQ(ck.failed, 0) << ck.failed << " of " << ck.checked << "; " << ck.first;
  EXPECT_EQ(cd.failed, 0) << cd.failed << " of " << cd.checked << "; " << cd.first;
  std::printf("  %-100s ws=%zu C=%d unchosen tokens %d, y worst %.3f of tol\n", tag.c_str(),
              run.workspace_bytes(), C, unchosen, cy.worst);
}

/// Checks one call's outputs (every optional output requested) against the host double
/// reference and the op's GPU reference.
void check(MoeCall& run, const Inputs& in, const Outputs& out) {
  const Case& c = run.c();
  if (c.expert_choice()) return check_expert_choice(run, in, out);
  const Op& op = moe_op();
  const int T = c.t, K = c.k, E = c.e, H = c.h;
  const std::size_t P = static_cast<std::size_t>(T) * K;
  const std::string tag = c.tag();

  // Routing: the kernels' ids against the double reference; a difference is accepted only as a
  // near-tie fp32 scoring cannot resolve (then the reference follows the kernels' choice).
  std::vector<int> ids(P);
  std::vector<double> weights(P);
  std::vector<bool> tie(T, false);
  test::MoeRouteResult route;
  const test::MoeRouteProblem rp = route_problem(c);
  if (c.routed()) {
    route = test::moe_route_ref(in.logits, in.bias, rp);
    int bad = 0;
    for (int t = 0; t < T; ++t) {
      std::vector<int> mine(out.ids.begin() + t * K, out.ids.begin() + (t + 1) * K);
      std::vector<double> want(route.weights.begin() + t * K, route.weights.begin() + (t + 1) * K);
      bool same = true, near = true;
      for (int s = 0; s < K; ++s) {
        const int g = mine[s], r = route.ids[static_cast<std::size_t>(t) * K + s];
        if (g == r) continue;
        same = false;
        if (g < 0 || g >= E) {
          near = false;
          continue;
        }
        const double sg = route.select[static_cast<std::size_t>(t) * E + g];
        const double sr = route.select[static_cast<std::size_t>(t) * E + r];
        if (!(std::fabs(sg - sr) <= 2e-6)) near = false;
      }
      if (!same && !near && c.routing == moe_sigmoid_group)
        for (const std::vector<int>& alt :
             test::moe_route_group_alternatives(in.logits, in.bias, rp, t, 2e-6))
          near = near || alt == mine;
      if (!same) {
        if (!near) {
          if (bad++ < 3) ADD_FAILURE() << tag << ": token " << t << " ids differ from the reference";
          std::copy(route.ids.begin() + t * K, route.ids.begin() + (t + 1) * K, ids.begin() + t * K);
          std::copy(want.begin(), want.end(), weights.begin() + t * K);
          continue;
        }
        tie[t] = true;
        std::printf("  %s: token %d accepted as a near-tie\n", tag.c_str(), t);
        want = test::moe_route_weights_for(in.logits, rp, t, mine);
      }
      for (int s = 0; s < K; ++s) {
        ids[static_cast<std::size_t>(t) * K + s] = mine[s];
        weights[static_cast<std::size_t>(t) * K + s] = want[s];
        const double g = out.weights[static_cast<std::size_t>(t) * K + s];
        if (!(std::fabs(g - want[s]) <= 1e-5 * std::fabs(want[s])) && bad++ < 3)
          ADD_FAILURE() << tag << ": token " << t << " slot " << s << " weight " << g << ", want "
                        << want[s];
      }
    }
    EXPECT_EQ(bad, 0) << tag << ": routing";
  } else {
    ids = in.ids;
    for (std::size_t p = 0; p < P; ++p) weights[p] = in.weights[p];
  }

  // Expert counts: exactly the histogram of the ids; the skewed experts as built.
  std::vector<int> hist(E, 0);
  for (int id : ids)
    if (id >= 0 && id < E) ++hist[id];
  EXPECT_EQ(out.counts, hist) << tag << ": expert_counts";
  if (c.skew && K < E && E >= 3 && c.routing != moe_sigmoid_group) {
    EXPECT_EQ(hist[0], T) << tag << ": expert 0 should receive every token";
    EXPECT_EQ(hist[E - 1], 0) << tag << ": expert E-1 should receive none";
  }

  // Aux loss against the double one, with f_e from the kernels' (accepted) choices.
  if (c.routed()) {
    double aux = 0;
    for (int e = 0; e < E; ++e) {
      double pe = 0;
      for (int t = 0; t < T; ++t) pe += route.prob[static_cast<std::size_t>(t) * E + e];
      aux += static_cast<double>(hist[e]) / static_cast<double>(P) * pe / T;
    }
    aux *= E;
    EXPECT_NEAR(out.aux, aux, 1e-5 * std::fabs(aux) + 1e-6) << tag << ": aux_loss";
  }

  // y against the double layer, within the op's tolerance; every element written. FP8 weights:
  // the double layer does not quantise x and act, so y is held to the quantisation's own error
  // there (per element 0.4 + 0.1 |y|, rms 8 % of y's), and to the op's tolerance against the
  // reference kernels, which quantise as the kernels do.
  const Tolerance tol = c.fp8() ? Tolerance{0.1, 0.4} : op.tolerance(c.dtype);
  const Tolerance ktol = op.tolerance(c.dtype);
  const std::vector<double> yref = layer_ref(c, in, ids, weights);
  test::MoeChecker cy("y " + tag);
  std::vector<double> y(out.y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] = test::moe_from_bits(c.bf16(), out.y[i]);
    cy(y[i], yref[i], tol.atol + tol.rtol * std::fabs(yref[i]),
       "token " + std::to_string(i / H) + " col " + std::to_string(i % H));
  }
  EXPECT_EQ(cy.failed, 0) << cy.failed << " of " << cy.checked << "; " << cy.first;

  // The op's fp32 reference kernels: the same routing, y within the op's tolerance of the
  // kernels' y, and within a few fp32 ulps x sqrt(terms) of the double one.
  const MoeCall::Reference r = run.reference();
  if (c.routed()) {
    int bad = 0;
    for (int t = 0; t < T; ++t)
      for (int s = 0; s < K; ++s) {
        const std::size_t p = static_cast<std::size_t>(t) * K + s;
        if (tie[t]) continue;
        if (static_cast<int>(r.ids[p]) != out.ids[p] ||
            !(std::fabs(r.weights[p] - out.weights[p]) <= 1e-5 * std::fabs(out.weights[p]))) {
          if (bad++ < 3)
            ADD_FAILURE() << tag << ": reference kernel token " << t << " slot " << s << " id "
                          << r.ids[p] << " weight " << r.weights[p] << " vs kernels' "
                          << out.ids[p] << " " << out.weights[p];
        }
      }
    EXPECT_EQ(bad, 0) << tag << ": reference kernel routing";
    EXPECT_NEAR(r.aux, out.aux, 1e-4 * std::fabs(out.aux) + 1e-6) << tag << ": reference aux";
  }
  int count_bad = 0;
  for (int e = 0; e < E; ++e) count_bad += r.counts[e] != static_cast<float>(hist[e]);
  const bool any_tie = std::find(tie.begin(), tie.end(), true) != tie.end();
  if (!any_tie) {
    EXPECT_EQ(count_bad, 0) << tag << ": reference expert_counts";
  }
  test::MoeChecker ck("y vs reference kernel " + tag), cd("reference kernel vs double " + tag);
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (tie[i / H]) continue;
    ck(y[i], r.y[i], ktol.atol + ktol.rtol * std::fabs(r.y[i]),
       "token " + std::to_string(i / H) + " col " + std::to_string(i % H));
    const double dtol = c.fp8() ? tol.atol + tol.rtol * std::fabs(yref[i]) : 1e-4;
    cd(r.y[i], yref[i], dtol + 1e-4 * std::fabs(yref[i]),
       "token " + std::to_string(i / H) + " col " + std::to_string(i % H));
  }
  EXPECT_EQ(ck.failed, 0) << ck.failed << " of " << ck.checked << "; " << ck.first;
  EXPECT_EQ(cd.failed, 0) << cd.failed << " of " << cd.checked << "; " << cd.first;
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    err2 += (y[i] - yref[i]) * (y[i] - yref[i]);
    ref2 += yref[i] * yref[i];
  }
  if (c.fp8()) {
    EXPECT_LE(err2, 0.08 * 0.08 * ref2) << tag << ": FP8 rms error above 8 % of y's";
  }
  std::printf("  %-100s ws=%zu y worst %.3f of tol, rms error %.2e of rms y %.2e\n", tag.c_str(),
              run.workspace_bytes(), cy.worst, std::sqrt(err2 / static_cast<double>(y.size())),
              std::sqrt(ref2 / static_cast<double>(y.size())));
}

/// Group parameters valid for (E, k): a few groups, some kept.
void set_groups(Case& c) {
  if (c.routing != moe_sigmoid_group) return;
  c.scaling = 2.5;
  if (c.e == 64 || c.e > 256) {  // DeepSeek-V3's 8 groups, 4 kept (48 or 64 experts a group)
    c.n_group = 8, c.topk_group = 4;
  } else if (c.k <= 4) {
    c.n_group = 4, c.topk_group = 2;
  } else {
    c.n_group = 2, c.topk_group = 2;
  }
}

/// A case of this routing and shape with `params` (empty: the device's defaults) and the group
/// parameters valid for (E, k); H and I default to widths that are multiples of no tile.
Case make_case(int routing, int e, int k, int t, DType dt, const char* params = "", int h = 136,
               int i = 200) {
  Case c;
  c.routing = routing, c.e = e, c.k = k, c.t = t, c.dtype = dt, c.params = params;
  c.h = h, c.i = i;
  set_groups(c);
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (DType dt : {DType::bf16, DType::f16})
    for (int routing :
         {moe_softmax_renorm, moe_softmax, moe_sigmoid_group, moe_precomputed, moe_expert_choice})
      for (int e : {8, 64})
        for (int k : {1, 2, 8})
          for (int t : {1, 3, 17, 1000}) {
            Case c = make_case(routing, e, k, t, dt);
            // Plain random routing at T=17; precomputed skew needs an expert left out (k < E).
            c.skew = t != 17 && (routing != moe_precomputed || k < e);
            out.push_back(c);
          }
  // A realistic width (I=1408 as DeepSeek-like experts, H=1024), a few routing modes.
  const auto big = [&](int routing, int e, int k, int t, DType dt, const char* params = "") {
    out.push_back(make_case(routing, e, k, t, dt, params, 1024, 1408));
  };
  big(moe_softmax_renorm, 8, 2, 17, DType::bf16);
  big(moe_sigmoid_group, 64, 8, 3, DType::f16);
  big(moe_precomputed, 8, 2, 100, DType::bf16);
  big(moe_softmax, 64, 8, 1, DType::bf16);
  big(moe_expert_choice, 64, 8, 100, DType::bf16);
  // Other valid configurations: small tiles with the multi-block align path, large tiles,
  // block_m=16 with deep rings.
  const auto with = [&](int routing, int e, int k, int t, DType dt, const char* params) {
    out.push_back(make_case(routing, e, k, t, dt, params));
  };
  const char* small =
      "block_m=32,bn1=32,bk1=64,warps1=4,warps_m1=2,stages1=4,group1=0,prefetch1=0,epi1=0,impl1=0,bn2=64,bk2=32,warps2=8,"
      "warps_m2=2,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=0,align_chunk=4096,route_lanes=32,route_vec=1,combine_vec=4,split2=1";
  const char* large =
      "block_m=128,bn1=64,bk1=32,warps1=8,warps_m1=2,stages1=3,group1=8,prefetch1=256,epi1=0,impl1=0,bn2=128,bk2=64,warps2=8,"
      "warps_m2=2,stages2=3,group2=8,prefetch2=256,epi2=1,impl2=0,align_chunk=0,route_lanes=8,route_vec=4,combine_vec=8,split2=1";
  const char* deep =
      "block_m=16,bn1=64,bk1=32,warps1=4,warps_m1=1,stages1=2,group1=0,prefetch1=256,epi1=0,impl1=0,bn2=64,bk2=64,warps2=4,"
      "warps_m2=1,stages2=4,group2=0,prefetch2=0,epi2=0,impl2=0,align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  with(moe_softmax_renorm, 64, 8, 1000, DType::bf16, small);
  with(moe_sigmoid_group, 64, 8, 1000, DType::f16, small);
  with(moe_softmax_renorm, 8, 2, 1000, DType::f16, large);
  with(moe_precomputed, 8, 2, 17, DType::bf16, deep);
  // gemm2 split-k: fp32 partial sums added by the combine, which also runs at k = 1; the last
  // split of 7 k-tiles in 2 gets 3, and 1408 / 128 = 11 k-tiles in 4 splits of 3, 3, 3, 2. Then
  // 256-element k steps in both GEMMs (h = 1024: 4 k-tiles for gemm1; 1408 / 256: 6, the last
  // partial, in 2 splits of 3).
  const char* split =
      "block_m=16,bn1=64,bk1=32,warps1=4,warps_m1=1,stages1=2,group1=0,prefetch1=0,epi1=0,impl1=0,"
      "bn2=64,bk2=32,warps2=4,warps_m2=1,stages2=3,group2=0,prefetch2=0,epi2=0,impl2=0,"
      "align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=2";
  with(moe_softmax_renorm, 8, 2, 17, DType::bf16, split);
  with(moe_softmax, 8, 1, 3, DType::f16, split);
  with(moe_precomputed, 64, 8, 17, DType::f16, split);
  for (const char* params :
       {"block_m=16,bn1=64,bk1=128,warps1=4,warps_m1=1,stages1=3,group1=0,prefetch1=0,epi1=0,"
        "impl1=0,bn2=64,bk2=128,warps2=4,warps_m2=1,stages2=4,group2=0,prefetch2=0,epi2=0,"
        "impl2=0,align_chunk=0,route_lanes=32,route_vec=1,combine_vec=8,split2=4",
        "block_m=16,bn1=64,bk1=256,warps1=4,warps_m1=1,stages1=2,group1=0,prefetch1=0,epi1=0,"
        "impl1=0,bn2=64,bk2=256,warps2=4,warps_m2=1,stages2=3,group2=0,prefetch2=0,epi2=0,"
        "impl2=0,align_chunk=0,route_lanes=32,route_vec=1,combine_vec=8,split2=2"})
    big(moe_sigmoid_group, 64, 8, 100, DType::bf16, params);
  // Expert choice searches align_chunk, route_lanes and route_vec at their first value only.
  const char* ec_small =
      "block_m=32,bn1=32,bk1=64,warps1=4,warps_m1=2,stages1=4,group1=0,prefetch1=0,epi1=0,impl1=0,bn2=64,bk2=32,warps2=8,"
      "warps_m2=2,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=0,align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  const char* ec_large =
      "block_m=128,bn1=64,bk1=32,warps1=8,warps_m1=2,stages1=3,group1=8,prefetch1=256,epi1=0,impl1=0,bn2=128,bk2=64,warps2=8,"
      "warps_m2=2,stages2=3,group2=8,prefetch2=256,epi2=1,impl2=0,align_chunk=0,route_lanes=8,route_vec=1,combine_vec=8,split2=1";
  with(moe_expert_choice, 64, 8, 1000, DType::bf16, ec_small);
  with(moe_expert_choice, 8, 2, 1000, DType::f16, ec_large);
  with(moe_expert_choice, 8, 1, 17, DType::bf16, deep);
  return out;
}

/// Configurations with both GEMMs on the wgmma kernel (moe/gemm_sm90.cuh): 128-row tiles with
/// two warpgroups and 64-row tiles with one, on odd shapes and the DeepSeek-like expert count.
std::vector<Case> wgmma_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, DType dt, const char* params) {
    out.push_back(make_case(routing, e, k, t, dt, params));
  };
  const char* wide =
      "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
      "impl1=1,bn2=256,bk2=64,warps2=8,warps_m2=1,stages2=3,group2=8,prefetch2=0,epi2=0,impl2=1,"
      "align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  const char* narrow =
      "block_m=64,bn1=64,bk1=64,warps1=4,warps_m1=1,stages1=6,group1=8,prefetch1=0,epi1=0,"
      "impl1=1,bn2=128,bk2=64,warps2=4,warps_m2=1,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=1,"
      "align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide);
  with(moe_precomputed, 8, 2, 333, DType::f16, wide);
  with(moe_sigmoid_group, 64, 8, 1000, DType::bf16, narrow);
  with(moe_softmax, 8, 1, 500, DType::f16, narrow);
  return out;
}

/// Configurations with the warp-specialised GEMMs (moe/gemm_ws_sm90.cuh, impl=2): two consumer
/// warpgroups (128-row tiles) and one (64-row), deep and shallow rings, on odd shapes (h=136,
/// i=200: no multiple of any tile; odd token counts), k = 1, 2 and 8, every gather (top-k rows,
/// expert choice's pair_token, precomputed), and each GEMM beside another kernel.
std::vector<Case> ws_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, DType dt, const std::string& params,
                        int h = 136, int i = 200) {
    out.push_back(make_case(routing, e, k, t, dt, "", h, i));
    out.back().params = params;
  };
  const std::string tail = ",align_chunk=0,route_lanes=8,route_vec=1,combine_vec=4,split2=1";
  const std::string wide =
      "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
      "impl1=2,bn2=256,bk2=64,warps2=8,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,impl2=2" +
      tail;
  const std::string narrow =
      "block_m=64,bn1=64,bk1=64,warps1=4,warps_m1=1,stages1=6,group1=8,prefetch1=0,epi1=0,"
      "impl1=2,bn2=128,bk2=64,warps2=4,warps_m2=1,stages2=3,group2=0,prefetch2=0,epi2=0,impl2=2" +
      tail;
  // gemm1 warp-specialised, gemm2 on mma.sync; and gemm1 on the wgmma kernel without
  // specialisation, gemm2 warp-specialised.
  const std::string mixed1 =
      "block_m=128,bn1=128,bk1=64,warps1=8,warps_m1=1,stages1=3,group1=8,prefetch1=0,epi1=0,"
      "impl1=2,bn2=256,bk2=64,warps2=8,warps_m2=2,stages2=3,group2=8,prefetch2=0,epi2=0,impl2=0" +
      tail;
  const std::string mixed2 =
      "block_m=64,bn1=128,bk1=64,warps1=4,warps_m1=1,stages1=4,group1=0,prefetch1=0,epi1=0,"
      "impl1=1,bn2=256,bk2=64,warps2=4,warps_m2=1,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=2" +
      tail;
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide);
  with(moe_precomputed, 8, 2, 333, DType::f16, wide);
  with(moe_expert_choice, 8, 2, 777, DType::bf16, wide);
  with(moe_sigmoid_group, 64, 8, 1001, DType::bf16, narrow);
  with(moe_softmax, 8, 1, 499, DType::f16, narrow);
  with(moe_sigmoid_group, 64, 8, 1000, DType::bf16, narrow, 1024, 1408);
  with(moe_softmax_renorm, 8, 2, 999, DType::f16, mixed1);
  with(moe_softmax_renorm, 64, 8, 513, DType::bf16, mixed2);
  // The persistent forms (a CTA per SM looping over the tiles, double-buffered row tables;
  // persist=1 in a fixed stride, 2 from a counter): both GEMMs, one, every routing mode,
  // padding-only consumers and many tiles per CTA.
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide + ",persist1=1,persist2=1");
  with(moe_expert_choice, 8, 2, 777, DType::f16, wide + ",persist1=2,persist2=2");
  with(moe_sigmoid_group, 64, 8, 1001, DType::bf16, narrow + ",persist1=2,persist2=2");
  with(moe_precomputed, 8, 2, 333, DType::bf16, narrow + ",persist1=1");
  with(moe_sigmoid_group, 64, 8, 1000, DType::f16, wide + ",persist2=2", 1024, 1408);
  with(moe_softmax_renorm, 8, 2, 4000, DType::bf16, narrow + ",persist1=2,persist2=1", 520, 392);
  // The counters' zero kernel before routing and alignment in one block, and before the
  // multi-block align path; one counted GEMM beside a fixed-stride one.
  with(moe_softmax_renorm, 8, 2, 300, DType::bf16, wide + ",persist1=2,persist2=2,fuse_route=1");
  std::string chunked = narrow + ",persist1=1,persist2=2";
  chunked.replace(chunked.find("align_chunk=0"), 13, "align_chunk=4096");
  with(moe_softmax_renorm, 64, 8, 700, DType::bf16, chunked);
  // Clusters of two sharing the weight tile (cluster=2): pairs of one expert's blocks share,
  // pairs across two experts, a column-block boundary (GROUP_M 8) or the padded grid's last
  // block load unshared; both GEMMs, one, expert choice, the layer's real widths.
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide + ",cluster1=2,cluster2=2");
  with(moe_expert_choice, 8, 2, 777, DType::f16, narrow + ",cluster1=2,cluster2=2");
  with(moe_sigmoid_group, 64, 8, 1000, DType::bf16, wide + ",cluster2=2", 1024, 1408);
  // Three consumer warpgroups (block_m=192): blocks with rows for one, two or all three
  // consumers, both GEMMs' widths, every routing mode's alignment, the layer's real widths.
  const std::string tall =
      "block_m=192,bn1=128,bk1=64,warps1=12,warps_m1=1,stages1=3,group1=0,prefetch1=0,epi1=0,"
      "impl1=2,bn2=128,bk2=64,warps2=12,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,"
      "impl2=2" + tail;
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, tall);
  with(moe_expert_choice, 8, 2, 777, DType::f16, tall);
  with(moe_sigmoid_group, 64, 8, 1000, DType::bf16, tall, 1024, 1408);
  // gemm1 on x's rows gathered into sorted order (gather1=2, a gather kernel before it), alone
  // and with both GEMMs in clusters of two along the columns sharing the act tile (cluster=3:
  // h=136 at bn2=256 and i=1408 at bn1=128 leave a pair's second column block past n); expert
  // choice in fp16 (pair_token), the layer's real widths, gemm2's pairs alone at k=1 (gemm2
  // writes y), block_m=192 in fp16.
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide + ",gather1=2");
  with(moe_softmax_renorm, 8, 2, 1000, DType::bf16, wide + ",gather1=2,cluster1=3,cluster2=3");
  with(moe_expert_choice, 8, 2, 777, DType::f16, narrow + ",gather1=2,cluster1=3,cluster2=3");
  with(moe_sigmoid_group, 64, 8, 1000, DType::bf16, wide + ",gather1=2,cluster1=3,cluster2=3",
       1024, 1408);
  with(moe_softmax, 8, 1, 499, DType::f16, narrow + ",cluster2=3");
  with(moe_softmax_renorm, 8, 2, 1000, DType::f16, tall + ",gather1=2");
  return out;
}

/// fuse_route=1 (routing and alignment in one block) on the defaults: every mode with a route
/// kernel, T in {1, 7, 128, 300}, (E, k) in {(8, 2), (64, 8)} at the default route lanes (8 and
/// 32), 8 lanes with 4-float loads at E=64, E=256 (256 threads), k=1 in fp16, and DeepSeek-like
/// widths.
std::vector<Case> fused_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, const std::string& set,
                        DType dt = DType::bf16, int h = 136, int i = 200) {
    out.push_back(make_case(routing, e, k, t, dt, "", h, i));
    out.back().set = set;
  };
  const std::string fuse = "fuse_route=1";
  for (int routing : {moe_softmax_renorm, moe_softmax, moe_sigmoid_group}) {
    for (int t : {1, 7, 128, 300}) {
      with(routing, 8, 2, t, fuse);
      with(routing, 64, 8, t, fuse);
    }
    with(routing, 64, 8, 128, fuse + ",route_lanes=8,route_vec=4");
  }
  with(moe_sigmoid_group, 256, 8, 7, fuse + ",route_lanes=8,route_vec=1");
  with(moe_softmax, 8, 1, 300, fuse, DType::f16);
  with(moe_sigmoid_group, 64, 8, 16, fuse, DType::bf16, 1024, 1408);
  with(moe_sigmoid_group, 64, 8, 128, fuse, DType::f16, 1024, 1408);
  // Past 256 experts (EMAX 512: at most 256 threads): 12 scores per lane at 32 lanes, and 64
  // per thread at 8 lanes (128 threads).
  with(moe_softmax_renorm, 384, 8, 77, fuse);
  with(moe_sigmoid_group, 384, 8, 300, fuse);
  with(moe_softmax, 512, 10, 77, fuse + ",route_lanes=8,route_vec=1");
  return out;
}

/// fuse_route=2 (routing and alignment in the route kernel's grid, its blocks meeting at a
/// barrier) on the defaults: every mode with a route kernel, T in {1, 7, 128, 250} (one to 63
/// blocks at 32 lanes), (E, k) in {(8, 2), (64, 8)}, 8 lanes with 4-float loads, E=256, k=1 in
/// fp16, 300 tokens at 8 lanes, and DeepSeek-like widths.
std::vector<Case> sorted_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, const std::string& set,
                        DType dt = DType::bf16, int h = 136, int i = 200) {
    out.push_back(make_case(routing, e, k, t, dt, "", h, i));
    out.back().set = set;
  };
  const std::string sort = "fuse_route=2,align_chunk=0,route_lanes=32";
  const std::string narrow = "fuse_route=2,align_chunk=0,route_lanes=8";
  for (int routing : {moe_softmax_renorm, moe_softmax, moe_sigmoid_group}) {
    for (int t : {1, 7, 128, 250}) {
      with(routing, 8, 2, t, sort);
      with(routing, 64, 8, t, sort);
    }
    with(routing, 64, 8, 128, narrow + ",route_vec=4");
  }
  with(moe_sigmoid_group, 256, 8, 7, narrow + ",route_vec=1");
  with(moe_softmax, 8, 1, 300, narrow, DType::f16);
  with(moe_sigmoid_group, 64, 8, 16, sort, DType::bf16, 1024, 1408);
  with(moe_sigmoid_group, 64, 8, 128, sort, DType::f16, 1024, 1408);
  // Past 256 experts (EMAX 512), where the count table holds (blocks x e <= 8192): 20 blocks
  // at e=384, 9 at e=512, and 8 lanes with 4-float loads (5 blocks).
  with(moe_softmax_renorm, 384, 8, 77, sort);
  with(moe_sigmoid_group, 512, 8, 33, sort);
  with(moe_softmax, 512, 10, 77, narrow + ",route_vec=4");
  return out;
}

/// Past 256 experts (the kernels' EMAX = 512 forms) on the defaults: Kimi-K2-like (384
/// experts, k=8: softmax_renorm, sigmoid_group with 8 groups of 48, precomputed) and
/// Qwen3-Next-like (512, k=10: softmax in fp16, expert choice) routings at h=136, i=200, T = 77
/// and 1000 (a multiple of no tile); at T = 1000 the one-block align kernel (512 threads) and
/// the multi-block path (align_chunk=4096: 8000 and 10000 pairs, two and three chunks), 20000
/// precomputed pairs (five chunks), and 8 route lanes with 4-float loads (64 scores a thread).
std::vector<Case> wide_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, const std::string& set = "",
                        DType dt = DType::bf16) {
    out.push_back(make_case(routing, e, k, t, dt));
    out.back().set = set;
  };
  for (int t : {77, 1000}) {
    with(moe_softmax_renorm, 384, 8, t);
    with(moe_softmax, 512, 10, t, "", DType::f16);
    with(moe_sigmoid_group, 384, 8, t);
    with(moe_precomputed, 384, 8, t);
    with(moe_expert_choice, 512, 10, t);
  }
  with(moe_softmax_renorm, 384, 8, 1000, "align_chunk=0");
  with(moe_softmax, 512, 10, 1000, "align_chunk=4096");
  with(moe_sigmoid_group, 384, 8, 1000, "align_chunk=4096");
  with(moe_precomputed, 512, 8, 2500, "align_chunk=4096");
  with(moe_softmax_renorm, 512, 10, 77, "fuse_route=0,route_lanes=8,route_vec=4");
  return out;
}

/// FP8 weights (dtype e4m3): every routing mode, H and I multiples of 16 but of no tile, the
/// defaults and planted mma.sync configurations (e4m3 k steps of 64 to 256, block_m 16 to 128,
/// the shared-memory epilogue, split-k, the multi-block align path).
std::vector<Case> fp8_cases() {
  std::vector<Case> out;
  const auto with = [&](int routing, int e, int k, int t, const std::string& params = "",
                        int h = 144, int i = 208) {
    out.push_back(make_case(routing, e, k, t, DType::e4m3, "", h, i));
    out.back().params = params;
  };
  for (int t : {1, 17, 1000}) with(moe_softmax_renorm, 8, 2, t);
  with(moe_sigmoid_group, 64, 8, 3);
  with(moe_sigmoid_group, 64, 8, 1000);
  with(moe_precomputed, 8, 2, 100);
  with(moe_softmax, 64, 8, 1);
  with(moe_softmax, 8, 1, 33);
  with(moe_expert_choice, 64, 8, 100);
  with(moe_sigmoid_group, 64, 8, 17, "", 1024, 1408);
  with(moe_softmax_renorm, 8, 2, 17, "", 4096, 1024);
  const std::string tail = ",route_lanes=8,route_vec=1,combine_vec=4";
  with(moe_softmax_renorm, 64, 8, 1000,
       "block_m=32,bn1=32,bk1=64,warps1=4,warps_m1=2,stages1=4,group1=0,prefetch1=0,epi1=0,"
       "impl1=0,bn2=64,bk2=128,warps2=8,warps_m2=2,stages2=2,group2=0,prefetch2=0,epi2=0,"
       "impl2=0,align_chunk=4096,split2=1" + tail);
  with(moe_softmax_renorm, 8, 2, 1000,
       "block_m=128,bn1=64,bk1=128,warps1=8,warps_m1=2,stages1=3,group1=8,prefetch1=256,epi1=1,"
       "impl1=0,bn2=128,bk2=128,warps2=8,warps_m2=2,stages2=3,group2=8,prefetch2=256,epi2=1,"
       "impl2=0,align_chunk=0,split2=1" + tail);
  with(moe_sigmoid_group, 64, 8, 100,
       "block_m=16,bn1=64,bk1=256,warps1=4,warps_m1=1,stages1=2,group1=0,prefetch1=0,epi1=0,"
       "impl1=0,bn2=64,bk2=64,warps2=4,warps_m2=1,stages2=3,group2=0,prefetch2=0,epi2=0,"
       "impl2=0,align_chunk=0,split2=2" + tail, 1024, 1408);
  with(moe_precomputed, 64, 8, 17,
       "block_m=16,bn1=64,bk1=128,warps1=4,warps_m1=1,stages1=6,group1=0,prefetch1=0,epi1=0,"
       "impl1=0,bn2=64,bk2=256,warps2=4,warps_m2=1,stages2=4,group2=0,prefetch2=0,epi2=0,"
       "impl2=0,align_chunk=0,split2=2" + tail, 1024, 1408);
  // The warp-specialised GEMMs on e4m3 (k-tiles of 128), alone and beside mma.sync ones; h and
  // i multiples of 16 but of no tile (partial last k-tiles and column blocks).
  const std::string ws1 = "impl1=2,bk1=128,warps_m1=1,prefetch1=0,epi1=0,";
  const std::string ws2 = "impl2=2,bk2=128,warps_m2=1,prefetch2=0,epi2=0,";
  const std::string end = "align_chunk=0,split2=1" + tail;
  const std::string wide = "block_m=128,bn1=64,warps1=8,stages1=4,group1=0," + ws1 +
                           "bn2=256,warps2=8,stages2=4,group2=8," + ws2 + end;
  const std::string narrow = "block_m=64,bn1=64,warps1=4,stages1=6,group1=8," + ws1 +
                             "bn2=128,warps2=4,stages2=3,group2=0," + ws2 + end;
  const std::string mixed1 = "block_m=128,bn1=64,warps1=8,stages1=3,group1=8," + ws1 +
                             "bn2=256,bk2=128,warps2=8,warps_m2=2,stages2=3,group2=8,"
                             "prefetch2=0,epi2=0,impl2=0," + end;
  const std::string mixed2 = "block_m=64,bn1=64,bk1=128,warps1=4,warps_m1=1,stages1=4,group1=0,"
                             "prefetch1=0,epi1=0,impl1=0,bn2=128,warps2=4,stages2=4,group2=0," +
                             ws2 + end;
  with(moe_softmax_renorm, 8, 2, 1000, wide, 272, 400);
  with(moe_expert_choice, 8, 2, 777, wide, 272, 400);
  with(moe_sigmoid_group, 64, 8, 1001, narrow, 272, 400);
  with(moe_precomputed, 8, 2, 333, mixed1, 1040, 400);
  with(moe_softmax, 8, 1, 499, mixed2);
  with(moe_softmax_renorm, 8, 2, 300, wide, 4096, 1024);  // Mixtral's reduction length, h
  // Past 256 experts (EMAX 512) on the defaults; expert choice's reference keeps the largest
  // act value of up to e = 512 choices a token.
  with(moe_softmax_renorm, 384, 8, 77);
  with(moe_expert_choice, 512, 10, 77);
  return out;
}

TEST(MoeOpCases, Fp8ConfigurationsAreValidFromSm89) {
  for (const Case& c : fp8_cases()) {
    const Problem p = c.problem();
    for (const char* arch : {"sm_90a", "sm_80"}) {
      const DeviceInfo dev = *device_for_arch(arch);
      const Params params = case_params(c, dev);
      const std::optional<std::string> why = moe_op().invalid_reason(params, p, c.dtype, dev);
      if (std::string(arch) == "sm_90a")
        EXPECT_EQ(why, std::nullopt) << c.tag();
      else
        EXPECT_NE(why.value_or("").find("compute capability 8.9"), std::string::npos) << c.tag();
    }
  }
}

TEST(MoeOpCases, WgmmaConfigurationsAreValidOnSm90aOnly) {
  std::vector<Case> cases = wgmma_cases();
  for (const Case& c : ws_cases()) cases.push_back(c);
  for (const Case& c : cases) {
    const Problem p = c.problem();
    const Params params = moe_op().parse_params(c.params);
    EXPECT_EQ(moe_op().invalid_reason(params, p, c.dtype, *device_for_arch("sm_90a")),
              std::nullopt)
        << c.tag();
    EXPECT_NE(moe_op()
                  .invalid_reason(params, p, c.dtype, *device_for_arch("sm_80"))
                  .value_or("")
                  .find("needs an sm_90a device"),
              std::string::npos)
        << c.tag();
  }
}

// Without a GPU too: every case's configuration is valid on both built-in devices.
TEST(MoeOpCases, EveryConfigurationIsValid) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const DeviceInfo dev = *device_for_arch(arch);
    std::vector<Case> cases = all_cases();
    for (const Case& c : fused_cases()) cases.push_back(c);
    for (const Case& c : sorted_cases()) cases.push_back(c);
    for (const Case& c : wide_cases()) cases.push_back(c);
    for (const Case& c : cases) {
      const Problem p = c.problem();
      EXPECT_EQ(moe_op().problem_reason(p), std::nullopt) << c.tag();
      const Params params = case_params(c, dev);
      EXPECT_EQ(moe_op().invalid_reason(params, p, c.dtype, dev), std::nullopt)
          << arch << " " << c.tag();
    }
  }
}

/// cases, or those whose tag contains $KTUNE_MOE_OP_CASE (to run one under compute-sanitizer).
std::vector<Case> selected(std::vector<Case> cases) {
  if (const char* only = std::getenv("KTUNE_MOE_OP_CASE"))
    cases.erase(std::remove_if(
                    cases.begin(), cases.end(),
                    [&](const Case& c) { return c.tag().find(only) == std::string::npos; }),
                cases.end());
  return cases;
}

class GpuMoeOp : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
  }
  DeviceInfo device_;
};

/// Runs every case against both references: optional outputs on and off (the same y), twice
/// (the same bits).
void run_cases(const std::vector<Case>& all, const DeviceInfo& device) {
  const std::vector<Case> cases = selected(all);
  if (cases.empty()) GTEST_SKIP() << "no case matches KTUNE_MOE_OP_CASE";
  {
    // Compile everything up front, on all cores.
    std::vector<KernelSource> sources;
    for (const Case& c : cases) {
      const Problem p = c.problem();
      const Params params = case_params(c, device);
      for (const KernelSource& k : moe_op().kernels(params, p, c.dtype)) sources.push_back(k);
      for (const KernelSource& k : moe_op().reference_kernels(p, c.dtype)) sources.push_back(k);
    }
    Kernels::get().prepare(sources, device.arch());
  }
  std::mt19937 rng(2026);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag());
    // Progress, a line per step: a hang names its case and step.
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    std::printf("  case %s\n", c.tag().c_str());
    std::fflush(stdout);
    MoeCall run(c, device);
    const Inputs in = make_inputs(c, rng);
    run.upload(in);
    run.poison();
    run.launch(true);
    const Outputs out = run.outputs();
    std::printf("    op done at %.2f s\n", since());
    std::fflush(stdout);
    check(run, in, out);
    std::printf("    checked at %.2f s\n", since());
    std::fflush(stdout);
    // Without the optional outputs (routing results in the workspace), and again: the same y.
    run.poison();
    run.launch(false);
    const Outputs bare = run.outputs();
    EXPECT_EQ(bare.y, out.y) << c.tag() << ": y without the optional outputs differs";
    run.poison();
    run.launch(true);
    const Outputs again = run.outputs();
    EXPECT_TRUE(again == out) << c.tag() << ": a second run differs (not deterministic)";
  }
}

TEST_F(GpuMoeOp, EveryRoutingModeDtypeAndShapeAgainstBothReferences) {
  run_cases(all_cases(), device_);
}

// Both GEMMs on the wgmma kernel (impl1 = impl2 = 1, sm_90a): the whole layer against both
// references, odd h and i, skewed routing (an expert with every token, one with none).
TEST_F(GpuMoeOp, WgmmaGemmsAgainstBothReferences) {
  if (device_.arch() != "sm_90a")
    GTEST_SKIP() << "the wgmma GEMM needs sm_90a; the device is " << device_.arch();
  run_cases(wgmma_cases(), device_);
}

TEST_F(GpuMoeOp, Fp8WeightsAgainstBothReferences) {
  if (device_.cc_major * 10 + device_.cc_minor < 89)
    GTEST_SKIP() << "e4m3 tensor cores need compute capability 8.9; the device is "
                 << device_.arch();
  run_cases(fp8_cases(), device_);
}

TEST_F(GpuMoeOp, WarpSpecialisedGemmsAgainstBothReferences) {
  if (device_.arch() != "sm_90a")
    GTEST_SKIP() << "the warp-specialised GEMM needs sm_90a; the device is " << device_.arch();
  run_cases(ws_cases(), device_);
}

TEST_F(GpuMoeOp, FusedRouteAlignAgainstBothReferences) { run_cases(fused_cases(), device_); }

TEST_F(GpuMoeOp, PastTwoFiftySixExpertsAgainstBothReferences) {
  run_cases(wide_cases(), device_);
}

/// Each case (whose `set` holds `from`) against the same case with `to` in its place, on the same
/// inputs: every output (y, ids, weights, counts, aux loss) bit for bit, with and without the
/// optional outputs.
void expect_same_outputs(const std::vector<Case>& all, const std::string& from,
                         const std::string& to, const DeviceInfo& device, unsigned seed) {
  const std::vector<Case> cases = selected(all);
  if (cases.empty()) GTEST_SKIP() << "no case matches KTUNE_MOE_OP_CASE";
  std::mt19937 rng(seed);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag());
    Case other = c;
    other.set.replace(other.set.find(from), from.size(), to);
    MoeCall a_run(c, device), b_run(other, device);
    const Inputs in = make_inputs(c, rng);
    a_run.upload(in);
    b_run.upload(in);
    for (bool all_outputs : {true, false}) {
      a_run.poison();
      b_run.poison();
      a_run.launch(all_outputs);
      b_run.launch(all_outputs);
      const Outputs a = a_run.outputs(), b = b_run.outputs();
      EXPECT_TRUE(a == b) << c.tag() << (all_outputs ? "" : " without the optional outputs")
                          << ": differs from " << to;
    }
  }
}

// fuse_route=1 against the same configuration at fuse_route=0.
TEST_F(GpuMoeOp, FusedRouteAlignEqualsSeparateKernels) {
  expect_same_outputs(fused_cases(), "fuse_route=1", "fuse_route=0", device_, 2027);
}

// fuse_route=2 against the same configuration at fuse_route=0 (the route kernel, then the
// one-block align kernel): the same layout, so every output bit for bit.
TEST_F(GpuMoeOp, SortInTheRouteGridEqualsSeparateKernels) {
  expect_same_outputs(sorted_cases(), "fuse_route=2", "fuse_route=0", device_, 2029);
}

/// The driver's graph entry points (not in ktune's Driver table: the runtime does not use them).
struct GraphApi {
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*destroy)(CUgraph) = nullptr;
  std::string missing;
  GraphApi() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    const auto sym = [&](auto& fn, const char* name) {
      void* p = lib ? dlsym(lib, name) : nullptr;
      if (!p) missing += std::string(name) + " ";
      std::memcpy(&fn, &p, sizeof p);
    };
    sym(begin, "cuStreamBeginCapture_v2");
    sym(end, "cuStreamEndCapture");
    sym(instantiate, "cuGraphInstantiateWithFlags");
    sym(launch, "cuGraphLaunch");
    sym(exec_destroy, "cuGraphExecDestroy");
    sym(destroy, "cuGraphDestroy");
  }
};

TEST_F(GpuMoeOp, GraphCaptureReplaysBitForBitOnFreshInputs) {
  const GraphApi g;
  ASSERT_TRUE(g.missing.empty()) << "driver lacks " << g.missing;
  std::vector<Case> cases;
  for (int routing : {moe_softmax_renorm, moe_sigmoid_group, moe_precomputed}) {
    Case c;
    c.routing = routing, c.e = 64, c.k = 8, c.t = 17;
    set_groups(c);
    cases.push_back(c);
  }
  {
    Case c;  // expert choice: scores, select, gathered gemm1, gemm2, combine in expert order
    c.routing = moe_expert_choice, c.e = 64, c.k = 8, c.t = 17;
    cases.push_back(c);
    c.e = 8, c.k = 2, c.t = 1000, c.dtype = DType::f16;
    cases.push_back(c);
  }
  {
    Case c;  // routing and alignment in one block
    c.routing = moe_sigmoid_group, c.e = 64, c.k = 8, c.t = 17, c.set = "fuse_route=1";
    set_groups(c);
    cases.push_back(c);
    // ... and in the route kernel's grid: its barrier zeroed again at every replay
    c.t = 128, c.set = "fuse_route=2,align_chunk=0";
    cases.push_back(c);
  }
  {
    Case c;  // multi-block align path, fp16
    c.routing = moe_softmax_renorm, c.e = 64, c.k = 8, c.t = 1000, c.dtype = DType::f16;
    c.params =
        "block_m=32,bn1=32,bk1=64,warps1=4,warps_m1=2,stages1=4,group1=0,prefetch1=0,epi1=0,impl1=0,bn2=64,bk2=32,warps2=8,"
        "warps_m2=2,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=0,align_chunk=4096,route_lanes=32,route_vec=1,combine_vec=4,split2=1";
    cases.push_back(c);
  }
  if (device_.arch() == "sm_90a") {
    // Both GEMMs warp-specialised: their tensor maps are encoded at capture and replayed.
    const std::vector<Case> ws = ws_cases();
    cases.push_back(ws[0]);
    cases.push_back(ws[2]);
    // Persistent GEMMs, in a fixed stride and from counters (zeroed by the call's first kernel,
    // inside the graph, so that every replay takes every tile again).
    cases.push_back(ws[8]);
    cases.push_back(ws[9]);
    cases.push_back(ws[16]);  // clusters of two (cluster launches captured)
    cases.push_back(ws[23]);  // the sorted gather, then clusters of two along y
    // FP8 weights: the quantisation kernels between the GEMMs replay too.
    const std::vector<Case> fp8 = fp8_cases();
    cases.push_back(fp8[3]);
    cases.push_back(fp8[8]);
  }
  std::mt19937 rng(77);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag());
    MoeCall run(c, device_);
    run.upload(make_inputs(c, rng));
    run.poison();
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    KTUNE_CU(g.begin(run.stream(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    run.launch(true);
    KTUNE_CU(g.end(run.stream(), &graph));
    KTUNE_CU(g.instantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      const Inputs in = make_inputs(c, rng);  // fresh values in the same buffers
      run.upload(in);
      run.poison();
      KTUNE_CU(g.launch(exec, run.stream()));
      const Outputs graphed = run.outputs();
      run.poison();
      run.launch(true);
      const Outputs plain = run.outputs();
      EXPECT_TRUE(graphed == plain) << c.tag() << ": replay " << replay
                                    << " differs from a plain launch";
      check(run, in, graphed);
    }
    KTUNE_CU(g.exec_destroy(exec));
    KTUNE_CU(g.destroy(graph));
  }
}

}  // namespace
}  // namespace ktune
