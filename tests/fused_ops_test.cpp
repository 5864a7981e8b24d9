// The fused ops' host side: keys and their parsers, validity reasons, defaults, launches.
#include <gtest/gtest.h>

#include "tests/support/test_env.hpp"

#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "templates/fused/args.h"
#include "templates/op.hpp"
#include "templates/params_over.hpp"
#include "tests/support/launch_recorder.hpp"

namespace ktune {
namespace {

DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }

/// Message of the InvalidArgument `f` throws ("" when it throws nothing).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}


class FakeLauncher final : public Launcher {
 public:
  void launch(const KernelLaunch& l) override {
    launches.push_back(l);
    const auto* bytes = static_cast<const unsigned char*>(l.args);
    args.emplace_back(bytes, bytes + l.args_size);
  }
  std::vector<KernelLaunch> launches;
  std::vector<std::vector<unsigned char>> args;  // copied: the struct lives on run()'s stack
};

template <typename T>
T args_as(const std::vector<unsigned char>& bytes) {
  EXPECT_EQ(bytes.size(), sizeof(T));
  T v{};
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

/// Runs `op` with fake device addresses 0x1000 * (i + 1) and fake kernel handles.
FakeLauncher run_fake(const Op& op, const Params& params, const Problem& problem, DType t,
                      bool reference = false) {
  const std::size_t ntensors = op.tensors(problem, t).size();
  std::vector<std::uint64_t> tensors;
  for (std::size_t i = 0; i < ntensors; ++i) tensors.push_back(0x1000 * (i + 1));
  std::vector<double> scalars;
  for (const ScalarSpec& s : op.scalars()) scalars.push_back(s.tuning_value);
  const std::size_t nkernels =
      reference ? op.reference_kernels(problem, t).size() : op.kernels(params, problem, t).size();
  std::vector<KernelHandle> handles;
  for (std::size_t i = 0; i < nkernels; ++i)
    handles.push_back(reinterpret_cast<KernelHandle>(0x100 + i));
  RunArgs a;
  a.params = &params;
  a.problem = &problem;
  a.dtype = t;
  a.tensors = tensors.data();
  a.scalars = scalars.data();
  a.kernels = handles.data();
  return test::record_run<FakeLauncher>(op, a, reference);
}

// ---- registry ----

TEST(Registry, ListsTheFusedOpsInOrder) {
  std::vector<std::string> names;
  for (const Op* op : all_ops()) names.emplace_back(op->name());
  const std::vector<std::string> fused{"add_rmsnorm", "layernorm", "bias_act", "swiglu", "softmax"};
  ASSERT_GE(names.size(), fused.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 5), fused);
  for (const std::string& n : fused) {
    ASSERT_NE(find_op(n), nullptr) << n;
    EXPECT_EQ(&get_op(n), find_op(n));
    EXPECT_EQ(find_op(n)->family(), "fused");
  }
  EXPECT_EQ(find_op("nope"), nullptr);
}

TEST(Registry, UnknownOpListsKnownOps) {
  const std::string msg = error_of([] { get_op("rmsnorm"); });
  EXPECT_NE(msg.find("unknown op \"rmsnorm\" (known ops: add_rmsnorm, layernorm, bias_act, "
                     "swiglu, softmax"),
            std::string::npos)
      << msg;
}

// ---- problems ----

TEST(ProblemKey, RoundTripsAndIsCanonical) {
  const Op& op = get_op("add_rmsnorm");
  const Problem a = op.parse_problem("m=16384,n=4096");
  const Problem b = op.parse_problem(" n=4096 , m=16384 ");
  const Problem c = op.parse_problem("16384x4096");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a.values, (std::vector<std::int64_t>{16384, 4096}));
  EXPECT_EQ(op.problem_key(a), "m=16384,n=4096");
  EXPECT_EQ(op.parse_problem(op.problem_key(a)), a);
  EXPECT_EQ(op.dim(a, "n"), 4096);
  EXPECT_EQ(op.default_problem(), a);
}

TEST(ProblemKey, EnumeratedDimsTakeChoiceNamesAndDefaults) {
  const Op& op = get_op("bias_act");
  const Problem p = op.parse_problem("16384x4096");
  EXPECT_EQ(op.problem_key(p), "m=16384,n=4096,act=gelu_tanh");
  const Problem q = op.parse_problem("act=silu,n=8,m=2");
  EXPECT_EQ(op.problem_key(q), "m=2,n=8,act=silu");
  EXPECT_EQ(op.dim(q, "act"), 2);
  EXPECT_EQ(op.parse_problem(op.problem_key(q)), q);
  EXPECT_EQ(op.default_problem(), p);

  const Op& ln = get_op("layernorm");
  EXPECT_EQ(ln.problem_key(ln.parse_problem("4x4095")), "m=4,n=4095,residual=no");
  EXPECT_EQ(ln.problem_key(ln.parse_problem("m=4,residual=yes,n=8")), "m=4,n=8,residual=yes");
}

TEST(ProblemKey, BadShapesSayWhatIsWrong) {
  const Op& op = get_op("add_rmsnorm");
  const auto msg = [&](const char* text) { return error_of([&] { op.parse_problem(text); }); };
  EXPECT_EQ(msg("m=0,n=4096"),
            "invalid shape \"m=0,n=4096\" for add_rmsnorm: m=0 is out of range (allowed "
            "1..2147483647)");
  EXPECT_EQ(msg("m=4,k=3"),
            "invalid shape \"m=4,k=3\" for add_rmsnorm: unknown dimension \"k\" (dimensions: m, "
            "n)");
  EXPECT_EQ(msg("m=abc,n=4"), "invalid shape \"m=abc,n=4\" for add_rmsnorm: m=\"abc\" is not an integer");
  EXPECT_EQ(msg("m=4"), "invalid shape \"m=4\" for add_rmsnorm: missing dimension n");
  EXPECT_EQ(msg("16384"), "invalid shape \"16384\" for add_rmsnorm: missing dimension n");
  EXPECT_EQ(msg("1x2x3"),
            "invalid shape \"1x2x3\" for add_rmsnorm: 3 values given, but add_rmsnorm has 2 "
            "integer dimensions (m, n)");
  EXPECT_NE(msg("m=1,n=262145").find("n=262145 is out of range (allowed 1..262144)"),
            std::string::npos);
  EXPECT_NE(msg("m=99999999999999999999,n=1").find("is out of range"), std::string::npos);
  EXPECT_NE(msg("m=1,m=2,n=3").find("dimension m is given twice"), std::string::npos);
  EXPECT_NE(msg("").find("empty shape"), std::string::npos);
  EXPECT_NE(msg("m=1,,n=2").find("empty item"), std::string::npos);
  EXPECT_NE(msg("m=1,n").find("\"n\" is not name=value"), std::string::npos);
  EXPECT_NE(msg("-1x4").find("m=-1 is out of range"), std::string::npos);
  EXPECT_NE(msg("4x4.5").find("n=\"4.5\" is not an integer"), std::string::npos);

  const Op& ba = get_op("bias_act");
  EXPECT_EQ(error_of([&] { ba.parse_problem("m=1,n=2,act=tanh"); }),
            "invalid shape \"m=1,n=2,act=tanh\" for bias_act: act=\"tanh\" is not one of "
            "gelu_tanh, gelu_erf, silu, relu");
}

TEST(ProblemKey, CheckProblemAndDim) {
  const Op& op = get_op("bias_act");
  EXPECT_NO_THROW(op.check_problem(Problem{{1, 1, 3}}));
  EXPECT_NE(error_of([&] { op.check_problem(Problem{{1, 1}}); })
                .find("expected 3 values (m, n, act), got 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op.check_problem(Problem{{1, 1, 4}}); })
                .find("act=4 is not a choice index (allowed 0..3)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op.check_problem(Problem{{0, 1, 0}}); }).find("m=0 is out of range"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { op.dim(Problem{{1, 1, 0}}, "k"); }),
            "bias_act has no dimension \"k\" (dimensions: m, n, act)");
}

// ---- parameters ----

TEST(ParamsKey, RoundTripsAndIsCanonical) {
  const Op& op = get_op("softmax");
  const Params p = op.parse_params("vec=8,regs=1,threads=256,rows=2");
  EXPECT_EQ(p.values, (std::vector<std::int64_t>{256, 2, 8, 1}));
  EXPECT_EQ(op.params_key(p), "threads=256,rows=2,vec=8,regs=1");
  EXPECT_EQ(op.parse_params(op.params_key(p)), p);
  EXPECT_EQ(op.param(p, "vec"), 8);
  EXPECT_EQ(op.param_index("regs"), 3u);
  EXPECT_EQ(op.check_params(p), std::nullopt);

  const Op& ew = get_op("swiglu");
  const Params q = ew.parse_params("threads=128,vec=4,unroll=2");
  EXPECT_EQ(ew.params_key(q), "threads=128,vec=4,unroll=2");
}

TEST(ParamsKey, BadParamsSayWhatIsWrong) {
  const Op& op = get_op("add_rmsnorm");
  const auto msg = [&](const char* text) { return error_of([&] { op.parse_params(text); }); };
  EXPECT_EQ(msg("threads=256,rows=1,vec=3,regs=1"),
            "invalid parameters \"threads=256,rows=1,vec=3,regs=1\" for add_rmsnorm: vec=3 is not "
            "one of 1, 2, 4, 8");
  EXPECT_NE(msg("threads=256,rows=1,vec=8").find("missing parameter regs"), std::string::npos);
  EXPECT_NE(msg("threads=256,rows=1,vec=8,regs=1,tile=4")
                .find("unknown parameter \"tile\" (parameters: threads, rows, vec, regs)"),
            std::string::npos);
  EXPECT_NE(msg("threads=x,rows=1,vec=8,regs=1").find("threads=\"x\" is not one of 32, 64"),
            std::string::npos);
  EXPECT_NE(msg("threads=32,threads=64,rows=1,vec=8,regs=1").find("given twice"),
            std::string::npos);
  EXPECT_EQ(op.check_params(Params{{256, 1, 8}}),
            "expected 4 parameter values (threads, rows, vec, regs), got 3");
  EXPECT_EQ(op.check_params(Params{{256, 3, 8, 1}}), "rows=3 is not one of 1, 2, 4, 8");
  EXPECT_EQ(error_of([&] { op.param_index("tile"); }),
            "add_rmsnorm has no parameter \"tile\" (parameters: threads, rows, vec, regs)");
}

TEST(ParamsKey, ItemsOverABaseChangeOnlyWhatTheyName) {
  const Op& op = get_op("add_rmsnorm");
  const Params base = op.parse_params("threads=256,rows=1,vec=8,regs=1");
  EXPECT_EQ(op.params_key(parse_params_over(op, "vec=4", base)), "threads=256,rows=1,vec=4,regs=1");
  EXPECT_EQ(op.params_key(parse_params_over(op, " regs=0 , threads=128 ", base)),
            "threads=128,rows=1,vec=8,regs=0");
  EXPECT_EQ(parse_params_over(op, "", base), base);
  const auto msg = [&](const char* text) {
    return error_of([&] { parse_params_over(op, text, base); });
  };
  EXPECT_EQ(msg("vec=3"),
            "invalid parameters \"vec=3\" for add_rmsnorm: vec=3 is not one of 1, 2, 4, 8");
  EXPECT_NE(msg("tile=4").find("unknown parameter \"tile\" (parameters: threads, rows, vec, regs)"),
            std::string::npos);
  EXPECT_NE(msg("vec=4,vec=8").find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_params_over(op, "vec=4", Params{{256, 1, 8}}); })
                .find("the base configuration: expected 4 parameter values"),
            std::string::npos);
}
// ---- validity ----

TEST(InvalidReason, RowOpsNameTheValues) {
  const Op& op = get_op("add_rmsnorm");
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = op.parse_problem("16384x4096");
  const auto why = [&](const char* params, const Problem& prob, DType t = DType::bf16) {
    return op.invalid_reason(op.parse_params(params), prob, t, h100).value_or("");
  };
  EXPECT_EQ(why("threads=256,rows=1,vec=8,regs=1", p), "");
  EXPECT_EQ(why("threads=64,rows=4,vec=8,regs=0", p),
            "threads=64 / rows=4 = 16 threads per row, not a multiple of 32 (a row is handled by "
            "whole warps)");
  EXPECT_EQ(why("threads=256,rows=1,vec=2,regs=0", op.parse_problem("16384x4095")),
            "n=4095 is not a multiple of vec=2");
  EXPECT_EQ(why("threads=256,rows=1,vec=8,regs=0", p, DType::f32).substr(0, 40),
            "fp32 is not supported by add_rmsnorm (dt");
  EXPECT_EQ(why("threads=32,rows=1,vec=8,regs=1", p),
            "regs=1 keeps 16 vectors x vec=8 = 128 floats per thread in registers for n=4096 with "
            "32 threads per row (limit 64); use regs=0 or more threads per row");
  EXPECT_EQ(why("threads=32,rows=1,vec=8,regs=0", p), "");
  EXPECT_EQ(why("threads=1024,rows=1,vec=8,regs=1", op.parse_problem("8x65536")), "");
  EXPECT_NE(why("threads=512,rows=1,vec=8,regs=1", op.parse_problem("8x65536")), "");
  EXPECT_NE(why("threads=1024,rows=1,vec=8,regs=1", op.parse_problem("8x65537")), "");
  EXPECT_NE(why("threads=256,rows=1,vec=8,regs=1", Problem{{0, 4096}}).find("m=0 is out of range"),
            std::string::npos);
  EXPECT_EQ(op.invalid_reason(Params{{256, 1, 3, 1}}, p, DType::bf16, h100),
            "vec=3 is not one of 1, 2, 4, 8");
}

TEST(InvalidReason, ElementwiseDtypeAndDivisibility) {
  // Only fp32 could make vec * size exceed 16 bytes, and the fused ops reject fp32 first.
  const Op& op = get_op("swiglu");
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = op.parse_problem("4x4096");
  const std::string why =
      op.invalid_reason(op.parse_params("threads=256,vec=8,unroll=1"), p, DType::f32, h100)
          .value_or("");
  EXPECT_NE(why.find("fp32 is not supported"), std::string::npos) << why;
  EXPECT_EQ(op.invalid_reason(op.parse_params("threads=256,vec=8,unroll=1"), p, DType::f16, h100),
            std::nullopt);
  EXPECT_EQ(op.invalid_reason(op.parse_params("threads=256,vec=4,unroll=4"),
                              op.parse_problem("4x4098"), DType::bf16, h100),
            "n=4098 is not a multiple of vec=4");
}

TEST(InvalidReason, AfterCompileChecksRegistersAndSharedMemory) {
  const Op& op = get_op("softmax");
  const DeviceInfo h100 = device("sm_90a");
  const Problem p = op.default_problem();
  const Params params = op.parse_params("threads=1024,rows=1,vec=8,regs=0");
  KernelResources r;
  r.registers = 64;
  EXPECT_EQ(op.invalid_after_compile(params, p, DType::bf16, h100, {r}), std::nullopt);
  r.spill_stores = 24;
  r.spill_loads = 40;
  EXPECT_EQ(op.invalid_after_compile(params, p, DType::bf16, h100, {r}), std::nullopt);
  r.registers = 65;
  const std::string why = op.invalid_after_compile(params, p, DType::bf16, h100, {r}).value_or("");
  EXPECT_NE(why.find("needs 65 registers x 1024 threads = 73728 registers per block (device "
                     "allows 65536)"),
            std::string::npos)
      << why;
  r.registers = 32;
  r.shared_bytes = 300 * 1024;
  EXPECT_NE(op.invalid_after_compile(params, p, DType::bf16, h100, {r})
                .value_or("")
                .find("bytes of shared memory per block"),
            std::string::npos);
}

// ---- defaults ----

TEST(Defaults, ValidForEveryShapeDtypeAndArch) {
  const std::vector<std::int64_t> ms{1, 3, 16384};
  const std::vector<std::int64_t> ns{1, 2, 7, 8, 96, 4095, 4096, 8192, 16384, 65536, 262144};
  for (const Op* op : all_ops()) {
    if (op->family() != "fused") continue;
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const DeviceInfo dev = device(arch);
      for (DType t : op->dtypes())
        for (std::int64_t m : ms)
          for (std::int64_t n : ns) {
            Problem p = op->default_problem();
            p.values[0] = m;
            p.values[1] = n;
            const Params d = op->default_params(p, t, dev);
            EXPECT_EQ(op->invalid_reason(d, p, t, dev), std::nullopt)
                << op->name() << " " << op->problem_key(p) << " " << dtype_name(t) << " " << arch
                << ": " << op->params_key(d);
          }
    }
  }
}

TEST(Defaults, PickWideVectorsAndRegistersAt4096) {
  const DeviceInfo h100 = device("sm_90a");
  const Op& op = get_op("add_rmsnorm");
  const Params d = op.default_params(op.default_problem(), DType::bf16, h100);
  EXPECT_EQ(op.param(d, "vec"), 8);
  EXPECT_EQ(op.param(d, "regs"), 1);
  const Params odd = op.default_params(op.parse_problem("16x4095"), DType::bf16, h100);
  EXPECT_EQ(op.param(odd, "vec"), 1);
  const Params longrow = op.default_params(op.parse_problem("16x262144"), DType::bf16, h100);
  EXPECT_EQ(op.param(longrow, "regs"), 0);
}

TEST(Defaults, ManyRowsTakeFewWarpsARowOnHopper) {
  // From m = SMs on sm_90a: one row a block (two where one warp takes a row), the fewest warps
  // that keep a thread within 3 vectors, layernorm at 128 threads while its row fits in
  // registers, and at most 16 floats a thread at 1024 threads (64 registers a thread).
  const DeviceInfo h100 = device("sm_90a");
  const auto shape = [](const char* name, const char* problem, const DeviceInfo& dev) {
    const Op& op = get_op(name);
    const Params d = op.default_params(op.parse_problem(problem), DType::bf16, dev);
    return std::vector<std::int64_t>{op.param(d, "threads"), op.param(d, "rows"),
                                     op.param(d, "vec"), op.param(d, "regs")};
  };
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(shape("layernorm", "m=20000,n=8192", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=600,n=6144,residual=yes", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=2000,n=768", h100), (V{64, 2, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=9000,n=1000", h100), (V{64, 1, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=5000,n=12288", h100), (V{512, 1, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=1000,n=16384", h100), (V{1024, 1, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=1000,n=32768", h100), (V{1024, 1, 8, 0}));
  EXPECT_EQ(shape("add_rmsnorm", "m=9000,n=2880", h100), (V{128, 1, 8, 1}));
  // layernorm halves its vectors where 8-wide ones leave the last round half-filled and 4-wide
  // ones fill it within 8 vectors a thread (1280 on 64 threads, 3584 on 128), not where that
  // takes more (6656: 13 on 128), not where the round is nearly full (2880), not with a
  // residual, not on one warp a row (640), and not for the other row ops.
  EXPECT_EQ(shape("layernorm", "m=3000,n=1280", h100), (V{64, 1, 4, 1}));
  EXPECT_EQ(shape("layernorm", "m=40000,n=3584", h100), (V{128, 1, 4, 1}));
  EXPECT_EQ(shape("layernorm", "m=40000,n=3584,residual=yes", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=7000,n=640", h100), (V{64, 2, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=3000,n=6656", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=9000,n=2880", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=3000,n=2560", h100), (V{128, 1, 8, 1}));
  EXPECT_EQ(shape("add_rmsnorm", "m=3000,n=1280", h100), (V{64, 1, 8, 1}));
  // Fewer rows than SMs keep 256-thread blocks of about 2 vectors a thread.
  EXPECT_EQ(shape("layernorm", "m=131,n=2880", h100), (V{256, 1, 8, 1}));
  EXPECT_EQ(shape("softmax", "m=100,n=1000", h100), (V{256, 4, 8, 1}));
  EXPECT_EQ(shape("layernorm", "m=132,n=2880", h100), (V{128, 1, 8, 1}));
  // Ampere keeps the few-rows rule at every m (not measured there).
  EXPECT_EQ(shape("layernorm", "m=20000,n=8192", device("sm_80")), (V{256, 1, 8, 1}));
}

TEST(Defaults, ElementwiseRowsPerThreadShrinkUntilTheGridFillsTheSms) {
  // Few rows (decode) must still spread over the SMs: unroll halves while the grid has fewer
  // than two blocks an SM (sm_90a's built-in description: 132 SMs).
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_GT(h100.sm_count, 0);
  for (const char* name : {"swiglu", "bias_act"}) {
    const Op& op = get_op(name);
    Problem p = op.default_problem();
    p.values[1] = 2816;  // 352 16-byte vectors: two column blocks of 256 threads
    p.values[0] = 16;
    EXPECT_EQ(op.param(op.default_params(p, DType::bf16, h100), "unroll"), 1) << name;
    p.values[0] = 300;  // 150 row blocks x 2 column blocks = 300 at unroll 2: enough
    EXPECT_EQ(op.param(op.default_params(p, DType::bf16, h100), "unroll"), 2) << name;
    p.values[0] = 16384;
    const Params big = op.default_params(p, DType::bf16, h100);
    EXPECT_EQ(op.param(big, "unroll"), 2) << name;
    EXPECT_EQ(op.param(big, "vec"), 8) << name;
    EXPECT_EQ(op.param(big, "threads"), 256) << name;
  }
}

TEST(Space, EveryOpHasValidPointsAtItsDefaultProblem) {
  for (const Op* op : all_ops()) {
    if (op->family() != "fused") continue;
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const DeviceInfo dev = device(arch);
      std::size_t valid = 0, invalid = 0;
      for (const Params& p : test::all_points(*op)) {
        const auto why = op->invalid_reason(p, op->default_problem(), DType::bf16, dev);
        if (why) {
          EXPECT_FALSE(why->empty());
          ++invalid;
        } else {
          ++valid;
        }
      }
      EXPECT_GE(valid, 1u) << op->name();
      EXPECT_GE(invalid + valid, 36u) << op->name();
    }
  }
}

// ---- kernels and launches ----

TEST(Kernels, NameExpressionsFollowTheParameters) {
  const Op& rms = get_op("add_rmsnorm");
  const Problem p = rms.default_problem();
  EXPECT_EQ(rms.kernels(rms.parse_params("threads=256,rows=1,vec=8,regs=1"), p, DType::bf16),
            (std::vector<KernelSource>{
                {"fused/norm.cuh", "ktune::add_rmsnorm_kernel<ktune::bf16, 256, 1, 8, 2>"}}));
  EXPECT_EQ(rms.kernels(rms.parse_params("threads=512,rows=4,vec=4,regs=0"), p, DType::f16)[0]
                .name_expression,
            "ktune::add_rmsnorm_kernel<ktune::fp16, 512, 4, 4, 0>");
  const Op& ln = get_op("layernorm");
  EXPECT_EQ(ln.kernels(ln.parse_params("threads=128,rows=1,vec=8,regs=1"),
                       ln.parse_problem("m=2,n=4096,residual=yes"), DType::bf16)[0]
                .name_expression,
            "ktune::layernorm_kernel<ktune::bf16, true, 128, 1, 8, 4>");
  const Op& ba = get_op("bias_act");
  EXPECT_EQ(ba.kernels(ba.parse_params("threads=256,vec=8,unroll=4"),
                       ba.parse_problem("m=2,n=4096,act=gelu_erf"), DType::bf16)[0],
            (KernelSource{"fused/elementwise.cuh",
                          "ktune::bias_act_kernel<ktune::bf16, ktune::Activation::gelu_erf, 256, "
                          "8, 4>"}));
  EXPECT_EQ(ba.reference_kernels(ba.parse_problem("m=2,n=4,act=relu"), DType::f16)[0]
                .name_expression,
            "ktune::bias_act_reference_kernel<ktune::fp16, ktune::Activation::relu>");
  // Parameters outside the space never reach a name expression.
  EXPECT_THROW(rms.kernels(Params{{256, 1, 3, 1}}, p, DType::bf16), InvalidArgument);
}

TEST(Run, RowOpLaunchesOneKernelOverAllRows) {
  const Op& op = get_op("add_rmsnorm");
  const Problem p = op.parse_problem("1001x4096");
  const Params params = op.parse_params("threads=512,rows=4,vec=8,regs=1");
  const FakeLauncher l = run_fake(op, params, p, DType::bf16);
  ASSERT_EQ(l.launches.size(), op.kernels(params, p, DType::bf16).size());
  EXPECT_EQ(l.launches[0].grid[0], 251u);  // ceil(1001 / 4)
  EXPECT_EQ(l.launches[0].grid[1], 1u);
  EXPECT_EQ(l.launches[0].block[0], 512u);
  EXPECT_EQ(l.launches[0].kernel, reinterpret_cast<KernelHandle>(0x100));
  const auto a = args_as<AddRmsNormArgs>(l.args[0]);
  EXPECT_EQ(a.x, reinterpret_cast<const void*>(0x1000));
  EXPECT_EQ(a.residual, reinterpret_cast<const void*>(0x2000));
  EXPECT_EQ(a.weight, reinterpret_cast<const void*>(0x3000));
  EXPECT_EQ(a.y, reinterpret_cast<void*>(0x4000));
  EXPECT_EQ(a.h, reinterpret_cast<void*>(0x5000));
  EXPECT_EQ(a.m, 1001);
  EXPECT_EQ(a.n, 4096);
  EXPECT_FLOAT_EQ(a.eps, 1e-6f);

  const FakeLauncher r = run_fake(op, params, p, DType::bf16, true);
  ASSERT_EQ(r.launches.size(), 1u);
  EXPECT_EQ(r.launches[0].grid[0], 1001u);
  EXPECT_EQ(r.launches[0].block[0], static_cast<unsigned>(kReferenceThreads));
}

TEST(Run, LayerNormPassesResidualOnlyWhenAsked) {
  const Op& op = get_op("layernorm");
  const Params params = op.parse_params("threads=256,rows=1,vec=8,regs=1");
  const Problem plain = op.parse_problem("m=5,n=4096");
  const auto a = args_as<LayerNormArgs>(run_fake(op, params, plain, DType::f16).args[0]);
  EXPECT_EQ(a.residual, nullptr);
  EXPECT_EQ(a.h, nullptr);
  EXPECT_EQ(a.weight, reinterpret_cast<const void*>(0x2000));
  EXPECT_EQ(a.y, reinterpret_cast<void*>(0x4000));
  const Problem res = op.parse_problem("m=5,n=4096,residual=yes");
  ASSERT_EQ(op.tensors(res, DType::f16).size(), 6u);
  const auto b = args_as<LayerNormArgs>(run_fake(op, params, res, DType::f16).args[0]);
  EXPECT_EQ(b.residual, reinterpret_cast<const void*>(0x2000));
  EXPECT_EQ(b.bias, reinterpret_cast<const void*>(0x4000));
  EXPECT_EQ(b.h, reinterpret_cast<void*>(0x6000));
  EXPECT_FLOAT_EQ(b.eps, 1e-5f);
}

TEST(Run, ElementwiseGridCoversRowsAndColumns) {
  const Op& op = get_op("bias_act");
  // n=4096, vec=8: 512 vectors per row; 256 threads all on columns; 2 column blocks.
  const Problem p = op.parse_problem("m=1000,n=4096,act=silu");
  const Params params = op.parse_params("threads=256,vec=8,unroll=4");
  FakeLauncher l = run_fake(op, params, p, DType::bf16);
  ASSERT_EQ(l.launches.size(), 1u);
  EXPECT_EQ(l.launches[0].grid[0], 250u);
  EXPECT_EQ(l.launches[0].grid[1], 2u);
  EXPECT_EQ(l.launches[0].block[0], 256u);
  auto a = args_as<BiasActArgs>(l.args[0]);
  EXPECT_EQ(a.col_shift, 8);
  EXPECT_EQ(a.bias, reinterpret_cast<const void*>(0x2000));
  // n=7, vec=1: 8 column threads, 32 row threads per block, 2 rows each.
  l = run_fake(op, op.parse_params("threads=256,vec=1,unroll=2"), op.parse_problem("100x7"),
               DType::bf16);
  a = args_as<BiasActArgs>(l.args[0]);
  EXPECT_EQ(a.col_shift, 3);
  EXPECT_EQ(l.launches[0].grid[0], 2u);  // ceil(100 / 64)
  EXPECT_EQ(l.launches[0].grid[1], 1u);

  const Op& sw = get_op("swiglu");
  l = run_fake(sw, sw.parse_params("threads=128,vec=8,unroll=1"), sw.parse_problem("3x65536"),
               DType::f16);
  EXPECT_EQ(l.launches[0].grid[0], 3u);
  EXPECT_EQ(l.launches[0].grid[1], 64u);  // 8192 vectors / 128
  const auto s = args_as<SwigluArgs>(l.args[0]);
  EXPECT_EQ(s.n, 65536);
  EXPECT_EQ(s.y, reinterpret_cast<void*>(0x2000));

  l = run_fake(sw, sw.parse_params("threads=128,vec=8,unroll=1"), sw.parse_problem("3x65536"),
               DType::f16, true);
  EXPECT_EQ(l.launches[0].grid[0], 768u);  // 3 * 65536 / 256
  EXPECT_EQ(l.launches[0].block[0], static_cast<unsigned>(kReferenceThreads));
}

TEST(Run, EveryValidPointLaunchesItsKernels) {
  for (const Op* op : all_ops()) {
    if (op->family() != "fused") continue;
    const DeviceInfo dev = device("sm_90a");
    for (const char* shape : {"16384x4096", "3x4095", "1x1"}) {
      const Problem p = op->parse_problem(shape);
      for (const Params& params : test::all_points(*op)) {
        if (op->invalid_reason(params, p, DType::bf16, dev)) continue;
        const FakeLauncher l = run_fake(*op, params, p, DType::bf16);
        ASSERT_EQ(l.launches.size(), op->kernels(params, p, DType::bf16).size());
        for (const KernelLaunch& k : l.launches) {
          EXPECT_EQ(k.block[0], static_cast<unsigned>(op->block_threads(params, p, DType::bf16, 0)));
          EXPECT_GE(k.grid[0], 1u);
          EXPECT_GE(k.grid[1], 1u);
          EXPECT_LE(k.grid[1], 65535u);
          EXPECT_NE(k.args, nullptr);
        }
      }
    }
  }
}

// ---- the rest of the interface ----

TEST(Op, TensorsBytesAlignmentTolerance) {
  const Op& op = get_op("add_rmsnorm");
  const Problem p = op.default_problem();
  const double mn = 16384.0 * 4096.0;
  EXPECT_DOUBLE_EQ(op.min_bytes(p, DType::bf16), (4 * mn + 4096) * 2);
  const Op& sw = get_op("swiglu");
  EXPECT_DOUBLE_EQ(sw.min_bytes(p, DType::f16), 3 * mn * 2);
  EXPECT_EQ(op.alignment(op.parse_params("threads=256,rows=1,vec=4,regs=1"), p, DType::bf16), 8u);
  EXPECT_DOUBLE_EQ(op.tolerance(DType::bf16).rtol, 1.6e-2);
  EXPECT_DOUBLE_EQ(op.tolerance(DType::f16).atol, 2e-3);
  EXPECT_DOUBLE_EQ(op.tolerance(DType::f32).rtol, 1e-5);
  ASSERT_EQ(op.scalars().size(), 1u);
  EXPECT_EQ(op.scalars()[0].name, "eps");
  EXPECT_DOUBLE_EQ(get_op("softmax").scalars()[0].tuning_value, 1.0);
  EXPECT_EQ(op.dtypes(), (std::vector<DType>{DType::bf16, DType::f16}));
}

TEST(Op, TemplateHashIsStableAndPerOp) {
  std::set<std::string> hashes;
  for (const Op* op : all_ops()) {
    const std::string h = op->template_hash();
    EXPECT_EQ(h.size(), 64u);
    EXPECT_EQ(h, op->template_hash());
    hashes.insert(h);
  }
  EXPECT_EQ(hashes.size(), all_ops().size());
}

}  // namespace
}  // namespace ktune
