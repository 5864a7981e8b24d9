// Runtime::moe and ktune_moe on the GPU: against the double reference of the layer
// (tests/support/moe_reference) for softmax_renorm and precomputed routing, bf16 and fp16, token
// counts that are no multiple of any tile; the caller's workspace and the runtime's give the same
// y bit for bit; two threads on two streams (and on the per-thread default stream) running the
// same problem on different inputs never share scratch memory; a CUDA graph captured around
// ktune_moe replays correctly, including a problem's first call inside the capture. Skipped
// without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/core/driver.hpp"
#include "templates/moe/moe_op.hpp"
#include "tests/support/moe_gemm_reference.hpp"
#include "tests/support/moe_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

struct Shape {
  MoeRoutingMode routing = MoeRoutingMode::softmax_renorm;
  DType dtype = DType::bf16;
  int e = 8, k = 2, h = 136, i = 200, t = 33;
  bool bf16() const { return dtype == DType::bf16; }
  bool routed() const { return routing != MoeRoutingMode::precomputed; }
  std::string key() const {
    return std::string("e=") + std::to_string(e) + ",k=" + std::to_string(k) +
           ",h=" + std::to_string(h) + ",i=" + std::to_string(i) + ",t=" + std::to_string(t) +
           ",routing=" + (routed() ? "softmax_renorm" : "precomputed");
  }
  std::string tag() const { return key() + (bf16() ? " bf16" : " fp16"); }
};

/// Host inputs of a layer and the routing the reference expects.
struct Inputs {
  std::vector<std::uint16_t> x, w1, w2;
  std::vector<double> xv, w1v, w2v;
  std::vector<float> logits;  // routed
  std::vector<int> ids;       // [t, k]: the caller's (precomputed) or the reference's
  std::vector<double> weights;
  std::vector<float> weights32;  // precomputed: what the device reads
  double aux = 0;                // routed: the reference's aux loss
};

Inputs make_inputs(const Shape& s, std::mt19937& rng) {
  Inputs in;
  const std::size_t E = s.e, H = s.h, I = s.i, T = s.t;
  // y of order 1, as the op's tolerance assumes: x of unit variance, w1 ~ 1/sqrt(h), w2 ~
  // 1/sqrt(i), each token's weights summing to 1.
  test::MoeTensor x(s.bf16(), T * H, rng, -std::sqrt(3.0), std::sqrt(3.0));
  test::MoeTensor w1(s.bf16(), E * 2 * I * H, rng, -std::sqrt(3.0 / s.h), std::sqrt(3.0 / s.h));
  test::MoeTensor w2(s.bf16(), E * H * I, rng, -1.5 * std::sqrt(3.0 / s.i),
                     1.5 * std::sqrt(3.0 / s.i));
  in.x = std::move(x.bits), in.xv = std::move(x.val);
  in.w1 = std::move(w1.bits), in.w1v = std::move(w1.val);
  in.w2 = std::move(w2.bits), in.w2v = std::move(w2.val);
  if (s.routed()) {
    // Logits 0.5 apart (a shuffled ladder plus small noise): no near-tie for fp32 to resolve
    // differently from the double reference.
    std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
    std::vector<int> ladder(E);
    for (std::size_t t = 0; t < T; ++t) {
      std::iota(ladder.begin(), ladder.end(), 0);
      std::shuffle(ladder.begin(), ladder.end(), rng);
      for (std::size_t e = 0; e < E; ++e)
        in.logits.push_back(0.5f * static_cast<float>(ladder[e]) - 2.0f + noise(rng));
    }
    test::MoeRouteProblem p;
    p.tokens = s.t, p.experts = s.e, p.k = s.k, p.routing = moe_softmax_renorm;
    const test::MoeRouteResult r = test::moe_route_ref(in.logits, {}, p);
    in.ids = r.ids;
    in.weights = r.weights;
    in.aux = test::moe_aux_loss_ref(r, p);
  } else {
    const test::MoeTestRouting r = test::moe_test_routing(s.t, s.e, s.k, rng, false);
    in.ids = r.ids;
    for (int t = 0; t < s.t; ++t) {
      float sum = 0;
      for (int j = 0; j < s.k; ++j) sum += r.weights[static_cast<std::size_t>(t * s.k + j)];
      for (int j = 0; j < s.k; ++j)
        in.weights32.push_back(r.weights[static_cast<std::size_t>(t * s.k + j)] / sum);
    }
    in.weights.assign(in.weights32.begin(), in.weights32.end());
  }
  return in;
}

template <typename X>
void upload(const DeviceBuffer& b, const std::vector<X>& v) {
  if (!v.empty()) KTUNE_CU(Driver::get().cuMemcpyHtoD(b.get(), v.data(), v.size() * sizeof(X)));
}

template <typename X>
std::vector<X> download(CUdeviceptr p, std::size_t n) {
  std::vector<X> v(n);
  KTUNE_CU(Driver::get().cuMemcpyDtoH(v.data(), p, n * sizeof(X)));
  return v;
}

template <typename T = void>
T* ptr(const DeviceBuffer& b) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(b.get()));
}

/// One layer's device buffers (sized by the op's tensors), its MoeArgs, and what a call wrote.
class Layer {
 public:
  Layer(const Shape& s, const Inputs& in) : s_(s) {
    for (const TensorSpec& t : moe_op().tensors(moe_op().parse_problem(s.key()), s.dtype))
      buffers_.emplace(t.name,
                       DeviceBuffer(std::max<std::size_t>(
                           static_cast<std::size_t>(t.elements) * dtype_size(t.dtype), 16)));
    set(in);
    fill(args_);
    args_.routing = s.routing;
    args_.dtype = s.dtype;
  }

  /// New input values in the same buffers.
  void set(const Inputs& in) {
    upload(at("x"), in.x);
    upload(at("w1"), in.w1);
    upload(at("w2"), in.w2);
    upload(at("logits"), in.logits);
    if (!s_.routed()) {
      upload(at("topk_ids"), in.ids);
      upload(at("topk_weights"), in.weights32);
    }
  }

  const MoeArgs& args() const { return args_; }

  /// The buffers and dims of MoeArgs or ktune_moe_args (one field names in both).
  template <typename Args>
  void fill(Args& a) const {
    a.x = ptr(at("x"));
    a.w1 = ptr(at("w1"));
    a.w2 = ptr(at("w2"));
    a.y = ptr(at("y"));
    a.topk_ids = ptr<std::int32_t>(at("topk_ids"));
    a.topk_weights = ptr<float>(at("topk_weights"));
    a.expert_counts = ptr<std::int32_t>(at("expert_counts"));
    if (s_.routed()) {
      a.logits = ptr<const float>(at("logits"));
      a.aux_loss = ptr<float>(at("aux_loss"));
    }
    a.e = s_.e, a.k = s_.k, a.h = s_.h, a.i = s_.i, a.t = s_.t;
  }

  ktune_moe_args c_args(void* workspace = nullptr, std::size_t bytes = 0) const {
    ktune_moe_args c;
    ktune_moe_args_init(&c);
    fill(c);
    c.routing = s_.routed() ? KTUNE_MOE_SOFTMAX_RENORM : KTUNE_MOE_PRECOMPUTED;
    c.dtype = s_.bf16() ? KTUNE_BF16 : KTUNE_FP16;
    c.workspace = workspace, c.workspace_bytes = bytes;
    return c;
  }

  /// NaN in y, weights and aux, -7 in ids and counts (ids and weights where they are outputs).
  void poison(CUstream stream) const {
    const Driver& d = Driver::get();
    const std::size_t P = static_cast<std::size_t>(s_.t) * s_.k;
    KTUNE_CU(
        d.cuMemsetD16Async(at("y").get(), 0xffff, static_cast<std::size_t>(s_.t) * s_.h, stream));
    KTUNE_CU(
        d.cuMemsetD32Async(at("expert_counts").get(), static_cast<unsigned>(-7), s_.e, stream));
    KTUNE_CU(d.cuMemsetD32Async(at("aux_loss").get(), 0xffffffffu, 1, stream));
    if (s_.routed()) {
      KTUNE_CU(d.cuMemsetD32Async(at("topk_ids").get(), static_cast<unsigned>(-7), P, stream));
      KTUNE_CU(d.cuMemsetD32Async(at("topk_weights").get(), 0xffffffffu, P, stream));
    }
  }

  std::vector<std::uint16_t> y() const {
    return download<std::uint16_t>(at("y").get(), static_cast<std::size_t>(s_.t) * s_.h);
  }

  /// Every output against the double reference.
  void check(const Inputs& in, const std::string& what) const {
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::string tag = s_.tag() + " " + what;
    const std::size_t P = static_cast<std::size_t>(s_.t) * s_.k;
    const std::vector<int> ids = download<int>(at("topk_ids").get(), P);
    EXPECT_EQ(ids, in.ids) << tag << ": topk_ids";
    const std::vector<float> weights = download<float>(at("topk_weights").get(), P);
    int bad = 0;
    for (std::size_t p = 0; p < P; ++p)
      bad += !(std::fabs(weights[p] - in.weights[p]) <= 1e-5 * std::fabs(in.weights[p]));
    EXPECT_EQ(bad, 0) << tag << ": topk_weights";
    std::vector<int> histogram(static_cast<std::size_t>(s_.e), 0);
    for (int id : in.ids) ++histogram[static_cast<std::size_t>(id)];
    EXPECT_EQ(download<int>(at("expert_counts").get(), static_cast<std::size_t>(s_.e)), histogram)
        << tag << ": expert_counts";
    if (s_.routed()) {
      const float aux = download<float>(at("aux_loss").get(), 1)[0];
      EXPECT_NEAR(aux, in.aux, 1e-5 * std::fabs(in.aux) + 1e-6) << tag << ": aux_loss";
    }
    const std::vector<double> ref =
        test::moe_layer_ref(in.xv, in.w1v, in.w2v, s_.t, s_.h, s_.i,
                            test::moe_topk_uses(in.ids, in.weights, s_.k, s_.e));
    const Tolerance tol = moe_op().tolerance(s_.dtype);
    test::MoeChecker c("y " + tag);
    const std::vector<std::uint16_t> y = this->y();
    for (std::size_t n = 0; n < y.size(); ++n)
      c(test::moe_from_bits(s_.bf16(), y[n]), ref[n], tol.atol + tol.rtol * std::fabs(ref[n]),
        "token " + std::to_string(n / static_cast<std::size_t>(s_.h)) + " col " +
            std::to_string(n % static_cast<std::size_t>(s_.h)));
    EXPECT_EQ(c.failed, 0) << c.failed << " of " << c.checked << "; " << c.first;
  }

 private:
  const DeviceBuffer& at(const std::string& tensor) const { return buffers_.at(tensor); }

  Shape s_;
  std::map<std::string, DeviceBuffer> buffers_;  // by the op's tensor names
  MoeArgs args_;
};

class GpuMoeRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    // Default configurations (empty databases) for both runtimes, one compile cache.
    options_.db_path = (dir().path() / "empty.db").string();
    options_.use_shipped_databases = false;
    options_.cache_dir = (dir().path() / "cache").string();
    setenv("KTUNE_CACHE_DIR", options_.cache_dir.c_str(), 1);
    ASSERT_EQ(ktune_configure(options_.db_path.c_str(), 0), KTUNE_OK) << ktune_last_error();
  }
  void TearDown() override {
    ktune_configure(nullptr, 1);
    unsetenv("KTUNE_CACHE_DIR");
  }
  static test::TempDir& dir() {
    static test::TempDir d;
    return d;
  }
  RuntimeOptions options_;
};

TEST_F(GpuMoeRuntime, BothApisMatchTheReferenceAndEachOther) {
  Runtime rt(options_);
  std::mt19937 rng(2027);
  for (MoeRoutingMode routing : {MoeRoutingMode::softmax_renorm, MoeRoutingMode::precomputed})
    for (DType dtype : {DType::bf16, DType::f16})
      for (int t : {1, 33, 1000}) {
        Shape s;
        s.routing = routing, s.dtype = dtype, s.t = t;
        SCOPED_TRACE(s.tag());
        const Inputs in = make_inputs(s, rng);
        Layer layer(s, in);

        // C++, the runtime's workspace.
        layer.poison(nullptr);
        rt.moe(layer.args(), nullptr);
        layer.check(in, "Runtime::moe");
        const std::vector<std::uint16_t> y = layer.y();

        // The size the lookup's configuration needs, and a caller workspace of exactly that.
        const std::size_t bytes = rt.moe_workspace_size(layer.args());
        const MatchInfo how = rt.query("moe", s.key(), dtype);
        const Problem problem = moe_op().parse_problem(s.key());
        EXPECT_EQ(bytes,
                  moe_op().workspace_bytes(moe_op().parse_params(how.params), problem, dtype));
        DeviceBuffer workspace(bytes);
        KTUNE_CU(Driver::get().cuMemsetD8Async(workspace.get(), 0xa5, bytes, nullptr));
        MoeArgs caller = layer.args();
        caller.workspace = ptr(workspace), caller.workspace_bytes = bytes;
        layer.poison(nullptr);
        rt.moe(caller, nullptr);
        layer.check(in, "Runtime::moe, caller workspace");
        EXPECT_EQ(layer.y(), y) << "the caller's workspace and the runtime's give different y";

        // C, both workspaces.
        std::size_t c_bytes = 0;
        ktune_moe_args c = layer.c_args();
        ASSERT_EQ(ktune_moe_workspace_size(&c, &c_bytes), KTUNE_OK) << ktune_last_error();
        EXPECT_EQ(c_bytes, bytes);
        layer.poison(nullptr);
        ASSERT_EQ(ktune_moe(&c, nullptr), KTUNE_OK) << ktune_last_error();
        layer.check(in, "ktune_moe");
        EXPECT_EQ(layer.y(), y) << "ktune_moe and Runtime::moe give different y";
        c = layer.c_args(ptr(workspace), bytes);
        layer.poison(nullptr);
        ASSERT_EQ(ktune_moe(&c, nullptr), KTUNE_OK) << ktune_last_error();
        EXPECT_EQ(layer.y(), y) << "ktune_moe with a caller workspace";

        // Too small a workspace: both sizes named, nothing launched.
        c = layer.c_args(ptr(workspace), bytes - 256);
        EXPECT_EQ(ktune_moe(&c, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
        const std::string message = ktune_last_error();
        EXPECT_NE(message.find("workspace_bytes " + std::to_string(bytes - 256) +
                               " is smaller than the " + std::to_string(bytes) + " bytes"),
                  std::string::npos)
            << message;
      }
}

/// Runs `rounds` x `per_round` calls of one layer on `stream`, copying y after each into a
/// history on the device (no host synchronisation inside a round, so that the two threads'
/// kernels overlap), and counts the ys that differ from `want`.
int repeat(Runtime& rt, const Layer& layer, const Shape& s, CUstream stream,
           const std::vector<std::uint16_t>& want, int rounds, int per_round) {
  const Driver& d = Driver::get();
  const std::size_t n = static_cast<std::size_t>(s.t) * s.h;
  DeviceBuffer history(n * 2 * static_cast<std::size_t>(per_round));
  int wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < per_round; ++c) {
      layer.poison(stream);
      rt.moe(layer.args(), stream);
      KTUNE_CU(d.cuMemcpyDtoDAsync(history.get() + n * 2 * static_cast<std::size_t>(c),
                                   reinterpret_cast<CUdeviceptr>(layer.args().y), n * 2, stream));
    }
    KTUNE_CU(d.cuStreamSynchronize(stream));
    const std::vector<std::uint16_t> all =
        download<std::uint16_t>(history.get(), n * static_cast<std::size_t>(per_round));
    for (int c = 0; c < per_round; ++c)
      wrong +=
          !std::equal(want.begin(), want.end(), all.begin() + static_cast<std::ptrdiff_t>(n) * c);
  }
  return wrong;
}

TEST_F(GpuMoeRuntime, TwoThreadsOnTwoStreamsNeverShareScratch) {
  Runtime rt(options_);
  Shape s;
  s.h = 1024, s.i = 1408, s.t = 257;  // kernels long enough to overlap
  std::mt19937 rng(99);
  const Inputs a = make_inputs(s, rng), b = make_inputs(s, rng);
  Layer la(s, a), lb(s, b);
  // Each layer alone first: its y, checked once against the reference.
  rt.moe(la.args(), nullptr);
  la.check(a, "alone");
  rt.moe(lb.args(), nullptr);
  lb.check(b, "alone");
  const std::vector<std::uint16_t> ya = la.y(), yb = lb.y();
  ASSERT_NE(ya, yb);

  for (const bool per_thread : {false, true}) {
    SCOPED_TRACE(per_thread ? "CU_STREAM_PER_THREAD" : "two created streams");
    std::atomic<int> wrong_a{0}, wrong_b{0};
    std::string error_a, error_b;
    const auto worker = [&](const Layer& layer, const std::vector<std::uint16_t>& want,
                            std::atomic<int>& wrong, std::string& error) {
      try {
        ensure_context(0);
        CUstream stream = CU_STREAM_PER_THREAD;
        if (!per_thread) KTUNE_CU(Driver::get().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        wrong = repeat(rt, layer, s, stream, want, 8, 32);
        if (!per_thread) KTUNE_CU(Driver::get().cuStreamDestroy(stream));
      } catch (const std::exception& e) {
        error = e.what();
      }
    };
    std::thread ta(worker, std::cref(la), std::cref(ya), std::ref(wrong_a), std::ref(error_a));
    std::thread tb(worker, std::cref(lb), std::cref(yb), std::ref(wrong_b), std::ref(error_b));
    ta.join();
    tb.join();
    EXPECT_EQ(error_a, "");
    EXPECT_EQ(error_b, "");
    EXPECT_EQ(wrong_a.load(), 0) << "of 256 calls on thread a";
    EXPECT_EQ(wrong_b.load(), 0) << "of 256 calls on thread b";
  }
}

/// Captures `call` on `stream` into a graph (global mode: the strictest), instantiates it.
template <typename Call>
cudaGraphExec_t capture(cudaStream_t stream, Call call) {
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const ktune_status status = call();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  EXPECT_EQ(status, KTUNE_OK) << ktune_last_error();
  EXPECT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  if (end == cudaSuccess && status == KTUNE_OK) {
    EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  }
  if (graph) cudaGraphDestroy(graph);
  return exec;
}

/// Replays `exec` twice on fresh inputs; each replay must equal a plain call and the reference.
void replay(cudaGraphExec_t exec, cudaStream_t stream, Layer& layer, const Shape& s,
            std::mt19937& rng, const std::string& what) {
  ASSERT_NE(exec, nullptr) << what;
  for (int r = 0; r < 2; ++r) {
    const Inputs in = make_inputs(s, rng);
    layer.set(in);
    layer.poison(stream);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess) << what;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
    layer.check(in, what + ", replay " + std::to_string(r));
    const std::vector<std::uint16_t> graphed = layer.y();
    layer.poison(stream);
    ktune_moe_args plain = layer.c_args();
    ASSERT_EQ(ktune_moe(&plain, stream), KTUNE_OK) << ktune_last_error();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(layer.y(), graphed) << what << ": replay " << r << " differs from a plain call";
  }
  cudaGraphExecDestroy(exec);
}

TEST_F(GpuMoeRuntime, GraphCaptureReplays) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::mt19937 rng(5);
  for (MoeRoutingMode routing : {MoeRoutingMode::softmax_renorm, MoeRoutingMode::precomputed}) {
    Shape s;
    s.routing = routing, s.t = 45;
    SCOPED_TRACE(s.tag());
    Layer layer(s, make_inputs(s, rng));
    std::size_t bytes = 0;
    ktune_moe_args probe = layer.c_args();
    ASSERT_EQ(ktune_moe_workspace_size(&probe, &bytes), KTUNE_OK) << ktune_last_error();
    DeviceBuffer workspace(bytes);

    // A planned problem, the caller's workspace: the documented form.
    ktune_moe_args c = layer.c_args(ptr(workspace), bytes);
    ASSERT_EQ(ktune_moe(&c, reinterpret_cast<ktune_stream>(stream)), KTUNE_OK)
        << ktune_last_error();
    replay(capture(stream, [&] { return ktune_moe(&c, reinterpret_cast<ktune_stream>(stream)); }),
           stream, layer, s, rng, "planned, caller workspace");

    // The problem's first call inside the capture: planning (compile or cache load, module
    // load) happens during the capture.
    ASSERT_EQ(ktune_reset(), KTUNE_OK);
    replay(capture(stream, [&] { return ktune_moe(&c, reinterpret_cast<ktune_stream>(stream)); }),
           stream, layer, s, rng, "first call in the capture, caller workspace");

    // ... and with the runtime's workspace, allocated during the capture for this stream.
    ASSERT_EQ(ktune_reset(), KTUNE_OK);
    ktune_moe_args own = layer.c_args();
    replay(capture(stream, [&] { return ktune_moe(&own, reinterpret_cast<ktune_stream>(stream)); }),
           stream, layer, s, rng, "first call in the capture, runtime workspace");
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ktune
