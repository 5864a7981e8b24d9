// Every fused op through the public runtime API on the GPU, against the Eigen (double) reference:
// both dtypes, odd and even shapes, the default configuration and several tuned ones planted in a
// database. Skipped (with the reason) without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "db/store.hpp"
#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "search/space.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::Matrix;
using test::Vector;

std::uint16_t to_bits(DType t, double v) {
  return t == DType::bf16 ? test::float_to_bf16_bits(static_cast<float>(v))
                          : test::float_to_fp16_bits(static_cast<float>(v));
}
double from_bits(DType t, std::uint16_t b) {
  return t == DType::bf16 ? test::bf16_bits_to_float(b) : test::fp16_bits_to_float(b);
}

/// A host matrix rounded to `t`, and its copy on the device.
struct DeviceMatrix {
  Matrix host;
  DeviceBuffer dev;
  DeviceMatrix(DType t, Eigen::Index rows, Eigen::Index cols, std::mt19937& rng, bool random) {
    host = Matrix::Zero(rows, cols);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < bits.size(); ++i) {
      double v = random ? test::round_to(t, u(rng)) : std::nan("");
      if (random && v == 0.0) v = 0.25;  // never zeros
      bits[i] = random ? to_bits(t, v) : static_cast<std::uint16_t>(t == DType::bf16 ? 0x7fc0 : 0x7e00);
      host.data()[i] = v;
    }
    dev = DeviceBuffer(bits.size() * 2 + 16);
    KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), bits.data(), bits.size() * 2));
  }
  const void* ptr() const { return reinterpret_cast<const void*>(dev.get()); }
  void* mut() { return reinterpret_cast<void*>(dev.get()); }
  Matrix download(DType t) const {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(host.size()));
    KTUNE_CU(Driver::get().cuMemcpyDtoH(bits.data(), dev.get(), bits.size() * 2));
    Matrix m(host.rows(), host.cols());
    for (std::size_t i = 0; i < bits.size(); ++i) m.data()[i] = from_bits(t, bits[i]);
    return m;
  }
};

  // Element check with the op's own tolerance; every element must have been written.
void expect_close(const Matrix& out, const Matrix& ref, Tolerance tol, const std::string& what) {
  ASSERT_EQ(out.rows(), ref.rows());
  ASSERT_EQ(out.cols(), ref.cols());
  std::size_t bad = 0;
  double worst = 0;
  for (Eigen::Index i = 0; i < out.size(); ++i) {
    double o = out.data()[i], r = ref.data()[i];
    double err = std::fabs(o - r);
    if (!std::isfinite(o) || err > tol.atol + tol.rtol * std::fabs(r)) {
      if (bad++ < 3)
        ADD_FAILURE() << what << ": element " << i << " = " << o << ", reference " << r;
    }
    if (std::isfinite(err)) worst = std::max(worst, err);
  }
  EXPECT_EQ(bad, 0u) << what << " (max abs error " << worst << ")";
}


struct Case {
  std::string op;
  std::string shape;
};

class GpuFused : public ::testing::TestWithParam<std::tuple<Case, DType>> {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    device_ = query_device(0);
  }

  DeviceInfo device_;
  test::TempDir dir_;
};

// Runs one configuration of one case through the typed API and checks it.
void run_and_check(Runtime& rt, const Op& op, const Problem& p, DType t, const std::string& what,
                   std::mt19937& rng) {
  const Eigen::Index m = op.dim(p, "m"), n = op.dim(p, "n");
  const Tolerance tol = op.tolerance(t);
  auto ok = [&](const Matrix& a, const Matrix& b, const std::string& name) {
    expect_close(a, b, tol, what + " " + name);
  };
  const std::string name(op.name());
  if (name == "add_rmsnorm") {
    DeviceMatrix x(t, m, n, rng, true), r(t, m, n, rng, true), w(t, 1, n, rng, true);
    DeviceMatrix y(t, m, n, rng, false), h(t, m, n, rng, false);
    rt.add_rmsnorm(x.ptr(), r.ptr(), w.ptr(), y.mut(), h.mut(), m, n, t, 1e-6f, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    test::NormResult ref = test::add_rmsnorm_ref(x.host, r.host, w.host.row(0).transpose(), 1e-6);
    ok(y.download(t), ref.y, "y");
    ok(h.download(t), ref.h, "h");
  } else if (name == "layernorm") {
    const bool residual = op.dim(p, "residual") != 0;
    DeviceMatrix x(t, m, n, rng, true), r(t, residual ? m : 1, n, rng, true), w(t, 1, n, rng, true),
        b(t, 1, n, rng, true);
    DeviceMatrix y(t, m, n, rng, false), h(t, m, n, rng, false);
    rt.layernorm(x.ptr(), residual ? r.ptr() : nullptr, w.ptr(), b.ptr(), y.mut(),
                 residual ? h.mut() : nullptr, m, n, t, 1e-5f, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    if (residual) {
      test::NormResult ref = test::layernorm_ref(x.host, r.host, w.host.row(0).transpose(),
                                                 b.host.row(0).transpose(), 1e-5);
      ok(y.download(t), ref.y, "y");
      ok(h.download(t), ref.h, "h");
    } else {
      ok(y.download(t),
         test::layernorm_ref(x.host, w.host.row(0).transpose(), b.host.row(0).transpose(), 1e-5), "y");
    }
  } else if (name == "bias_act") {
    Activation act = static_cast<Activation>(op.dim(p, "act"));
    DeviceMatrix x(t, m, n, rng, true), b(t, 1, n, rng, true), y(t, m, n, rng, false);
    rt.bias_act(x.ptr(), b.ptr(), y.mut(), m, n, act, t, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    ok(y.download(t), test::bias_act_ref(x.host, b.host.row(0).transpose(), act), "y");
  } else if (name == "swiglu") {
    DeviceMatrix x(t, m, 2 * n, rng, true), y(t, m, n, rng, false);
    rt.swiglu(x.ptr(), y.mut(), m, n, t, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    ok(y.download(t), test::swiglu_ref(x.host), "y");
  } else if (name == "softmax") {
    DeviceMatrix x(t, m, n, rng, true), y(t, m, n, rng, false);
    rt.softmax(x.ptr(), y.mut(), m, n, 0.7f, t, nullptr);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    ok(y.download(t), test::softmax_ref(x.host, 0.7), "y");
  } else {
    FAIL() << "no check for op " << name;
  }
}

TEST_P(GpuFused, DefaultAndTunedConfigsMatchTheReference) {
  const auto& [c, t] = GetParam();
  const Op& op = get_op(c.op);
  Problem p = op.parse_problem(c.shape);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(c.op + c.shape)) + static_cast<unsigned>(t));

  // The default configuration (an empty database, nothing shipped).
  RuntimeOptions ro;
  ro.db_path = (dir_.path() / "empty.db").string();
  ro.use_shipped_databases = false;
  ro.cache_dir = (dir_.path() / "cache").string();
  Runtime rt(ro);
  EXPECT_EQ(rt.query(c.op, c.shape, t).kind, Match::default_config);
  run_and_check(rt, op, p, t, c.op + " " + c.shape + " default", rng);

  // Several other valid configurations, each planted as the exact best of a database.
  Space space(op, p, t, device_);
  std::vector<Params> valid = space.valid_points();
  std::shuffle(valid.begin(), valid.end(), rng);
  valid.resize(std::min<std::size_t>(valid.size(), 6));
  for (const Params& params : valid) {
    std::filesystem::path db = dir_.path() / ("tuned-" + std::to_string(rng()) + ".db");
    {
      Store s = Store::open(db, Store::Mode::read_write);
      s.upsert_device(device_);
      BestRecord b;
      b.device_key = device_.key();
      b.op = c.op;
      b.dtype = t;
      b.problem_key = op.problem_key(p);
      b.params_key = op.params_key(params);
      b.template_hash = op.template_hash();
      b.median_us = 1.0;
      s.set_best(b);
    }
    ro.db_path = db.string();
    rt.configure(ro);
    MatchInfo mi = rt.query(c.op, op.problem_key(p), t);
    EXPECT_EQ(mi.kind, Match::exact);
    EXPECT_EQ(mi.params, op.params_key(params));
    run_and_check(rt, op, p, t, c.op + " " + c.shape + " " + mi.params, rng);
  }
}

const Case kCases[] = {
    {"add_rmsnorm", "m=1,n=1"},          {"add_rmsnorm", "m=3,n=7"},
    {"add_rmsnorm", "m=257,n=4095"},     {"add_rmsnorm", "m=64,n=4096"},
    {"add_rmsnorm", "m=2,n=65536"},      {"layernorm", "m=33,n=1000"},
    {"layernorm", "m=16,n=8192,residual=yes"}, {"layernorm", "m=5,n=4093,residual=yes"},
    {"bias_act", "m=7,n=3001,act=gelu_tanh"},  {"bias_act", "m=64,n=4096,act=gelu_erf"},
    {"bias_act", "m=1,n=5,act=silu"},    {"bias_act", "m=19,n=1024,act=relu"},
    {"swiglu", "m=17,n=1377"},           {"swiglu", "m=64,n=4096"},
    {"softmax", "m=100,n=4097"},         {"softmax", "m=8,n=32768"},
    {"softmax", "m=1,n=1"},
};

INSTANTIATE_TEST_SUITE_P(
    AllOps, GpuFused,
    ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values(DType::bf16, DType::f16)),
    [](const ::testing::TestParamInfo<std::tuple<Case, DType>>& param) {
      std::string s = std::get<0>(param.param).op + "_" + std::get<0>(param.param).shape + "_" +
                      dtype_name(std::get<1>(param.param));
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

class GpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override { KTUNE_REQUIRE_GPU(); }
};

TEST_F(GpuRuntime, BadPointersGetClearErrors) {
  ensure_context(0);
  DeviceBuffer buf(1 << 20);
  char* base = reinterpret_cast<char*>(buf.get());
  const char* x = base;
  const char* r = base + 4096;
  const char* w = base + 8192;
  char* y = base + 16384;
  char* h = base + 32768;
  EXPECT_EQ(ktune_add_rmsnorm(nullptr, r, w, y, h, 1, 1024, KTUNE_BF16, 1e-6f, nullptr),
            KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ktune_last_error()).find("null"), std::string::npos) << ktune_last_error();
  // n = 1024 bf16 rows: the chosen config wants vector alignment; 2 bytes off is never enough.
  ktune_match match;
  char params[128];
  ASSERT_EQ(ktune_query("add_rmsnorm", "m=1,n=1024", KTUNE_BF16, &match, params, sizeof params), KTUNE_OK);
  if (std::string(params).find("vec=1") == std::string::npos) {
    EXPECT_EQ(ktune_add_rmsnorm(x + 2, r, w, y, h, 1, 1024, KTUNE_BF16, 1e-6f, nullptr),
              KTUNE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ktune_last_error()).find("aligned"), std::string::npos) << ktune_last_error();
  }
  EXPECT_EQ(ktune_add_rmsnorm(x, r, w, y, h, 0, 1024, KTUNE_BF16, 1e-6f, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ktune_last_error()).find("m=0"), std::string::npos) << ktune_last_error();
  ktune_dtype bad_dtype;
  const int nine = 9;
  std::memcpy(&bad_dtype, &nine, sizeof bad_dtype);  // what an FFI caller could pass
  EXPECT_EQ(ktune_add_rmsnorm(x, r, w, y, h, 1, 1024, bad_dtype, 1e-6f, nullptr),
            KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ktune_add_rmsnorm(x, r, w, y, h, 1, 1024, KTUNE_BF16, 1e-6f, nullptr), KTUNE_OK);
  EXPECT_EQ(Driver::get().cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(GpuRuntime, SecondCallOnlyLaunches) {
  ensure_context(0);
  DeviceBuffer buf(64 << 20);
  char* base = reinterpret_cast<char*>(buf.get());
  const std::int64_t m = 512, n = 4096;
  const std::size_t bytes = static_cast<std::size_t>(m * n * 2);
  // First call plans; then many calls must be cheap (no compile, no database).
  ASSERT_EQ(ktune_swiglu(base, base + 2 * bytes, m, n / 2, KTUNE_BF16, nullptr), KTUNE_OK);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(ktune_swiglu(base, base + 2 * bytes, m, n / 2, KTUNE_BF16, nullptr), KTUNE_OK);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  double per_call_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 1000;
  EXPECT_LT(per_call_ms, 5.0) << "a planned call must not re-plan";
}

// A launch goes to its stream's context (torch passes the stream of a tensor's device, which need
// not be the caller's current one) and leaves the caller's current context as it was: here a
// thread with no context at all launches on a stream of the primary context.
TEST_F(GpuRuntime, LaunchesInTheStreamsContextAndRestoresTheCallers) {
  const Driver& d = Driver::get();
  ensure_context(0);
  const std::int64_t m = 3, n = 1000;
  std::mt19937 rng(7);
  DeviceMatrix x(DType::bf16, m, 2 * n, rng, true), y(DType::bf16, m, n, rng, false);
  CUstream stream = nullptr;
  KTUNE_CU(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_EQ(ktune_swiglu(x.ptr(), y.mut(), m, n, KTUNE_BF16, stream), KTUNE_OK);  // plans
  KTUNE_CU(d.cuStreamSynchronize(stream));
  CUcontext primary = nullptr;
  KTUNE_CU(d.cuCtxGetCurrent(&primary));
  std::thread caller([&] {
    CUcontext before = primary;
    KTUNE_CU(d.cuCtxGetCurrent(&before));
    EXPECT_EQ(before, nullptr) << "a new thread starts without a current context";
    EXPECT_EQ(ktune_swiglu(x.ptr(), y.mut(), m, n, KTUNE_BF16, stream), KTUNE_OK)
        << ktune_last_error();
    CUcontext after = primary;
    KTUNE_CU(d.cuCtxGetCurrent(&after));
    EXPECT_EQ(after, nullptr) << "the caller's (absent) context was not restored";
  });
  caller.join();
  KTUNE_CU(d.cuStreamSynchronize(stream));
  const Matrix got = y.download(DType::bf16), want = test::swiglu_ref(x.host);
  for (Eigen::Index r = 0; r < m; ++r)
    for (Eigen::Index c = 0; c < n; ++c)
      ASSERT_NEAR(got(r, c), want(r, c), 0.02 + 0.02 * std::abs(want(r, c))) << r << "," << c;
  KTUNE_CU(d.cuStreamDestroy(stream));
}

// Many threads planning and launching at once: distinct and shared problems, one runtime.
TEST_F(GpuRuntime, ConcurrentCallsAreSafe) {
  ensure_context(0);
  const std::int64_t m = 64, n_max = 4096;
  DeviceBuffer in(static_cast<std::size_t>(m * n_max * 2)), out(static_cast<std::size_t>(m * n_max * 2));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex mu;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      // Every thread needs the context current; the runtime keeps an existing one.
      ensure_context(0);
      for (int i = 0; i < 50; ++i) {
        const std::int64_t n = (t % 2 == 0) ? 4096 : 1024 + 64 * ((t + i) % 8);
        ktune_status s = ktune_softmax(reinterpret_cast<const void*>(in.get()),
                                       reinterpret_cast<void*>(out.get()), m, n, 1.0f, KTUNE_BF16,
                                       nullptr);
        if (s != KTUNE_OK) {
          std::lock_guard<std::mutex> lock(mu);
          if (failures++ == 0) first_error = ktune_last_error();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(Driver::get().cuCtxSynchronize(), CUDA_SUCCESS);
}

// A kernel fault inside an application: the runtime reports it, never exits. Run in a fresh
// process (the fault poisons the CUDA context).
TEST_F(GpuRuntime, FaultIsReportedNotFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ensure_context(0);
        // Device addresses nothing maps: the kernel faults asynchronously.
        const char* bogus = reinterpret_cast<const char*>(0x100000000000ull);
        char* out = const_cast<char*>(bogus);
        ktune_status first = ktune_softmax(bogus, out, 4096, 4096, 1.0f, KTUNE_BF16, nullptr);
        Driver::get().cuCtxSynchronize();
        ktune_status second = ktune_softmax(bogus, out, 4096, 4096, 1.0f, KTUNE_BF16, nullptr);
        bool reported = (first == KTUNE_ERROR_CUDA_STICKY || second == KTUNE_ERROR_CUDA_STICKY) &&
                        std::string(ktune_last_error()).find("unusable") != std::string::npos;
        std::exit(reported ? 42 : 1);
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace ktune
