// Head dims between the kernels' tiles (flash_attention and flash_decode): a problem's d, any
// multiple of 8 up to 256, runs in the smallest tile head dim that holds it (32, 64, 96, 128,
// 256), the kernels reading zeros past d and storing only d columns (their DV argument). Here,
// without a GPU: the dims and their reasons, the kernels' name expressions (a tile's own d keeps
// the name it had), the defaults (those of the tile's d), the decode workspace (partial rows of
// the tile's width), e4m3's refusal, and NVRTC compiles of the defaults and a sample for sm_80
// and sm_90a (the wgmma ones without spills). The GPU suites (gpu_attention_test,
// gpu_decode_test) run d = 40, 80, 112 and 192 against the double reference.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "templates/attention/attention_op.hpp"
#include "templates/decode/decode_op.hpp"
#include "tests/support/compile_report.hpp"

namespace ktune {
namespace {

DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }

std::string problem_error(const Op& op, const std::string& shape) {
  try {
    op.parse_problem(shape);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

std::string replace_d(std::string shape, std::int64_t from, std::int64_t to) {
  const std::string a = "d=" + std::to_string(from);
  const std::size_t at = shape.find(a);
  EXPECT_NE(at, std::string::npos) << shape;
  return shape.replace(at, a.size(), "d=" + std::to_string(to));
}

TEST(HeadDims, MultiplesOf8UpTo256AreProblemsOthersSayWhy) {
  for (const Op* op : {&flash_attention_op(), &flash_decode_op()}) {
    for (std::int64_t d : {8, 16, 40, 72, 80, 112, 160, 192, 232, 256})
      EXPECT_EQ(problem_error(*op, "b=1,hq=8,hkv=8,nq=1,nk=300,d=" + std::to_string(d)), "")
          << op->name() << " d=" << d;
    const std::string odd = problem_error(*op, "b=1,hq=8,hkv=8,nq=1,nk=300,d=84");
    EXPECT_NE(odd.find("d=84 is not a multiple of 8"), std::string::npos) << odd;
    EXPECT_NE(problem_error(*op, "b=1,hq=8,hkv=8,nq=1,nk=300,d=264"), "") << op->name();
    EXPECT_NE(problem_error(*op, "b=1,hq=8,hkv=8,nq=1,nk=300,d=4"), "") << op->name();
  }
}

// The kernels of a d between tiles: the tile's d, then DV = d last, every argument between
// spelled out; the tile's own d keeps its name expression (no DV).
TEST(HeadDims, KernelNamesCarryTheTilesDAndTheDatas) {
  const Op& fa = flash_attention_op();
  const DeviceInfo h100 = device("sm_90a");
  const Problem p80 = fa.parse_problem("b=2,hq=8,hkv=8,nq=1000,nk=1000,d=80,causal=yes");
  const Problem p96 = fa.parse_problem("b=2,hq=8,hkv=8,nq=1000,nk=1000,d=96,causal=yes");
  for (const char* params :
       {"block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1",
        "block_m=64,block_n=64,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0"}) {
    const Params c = fa.parse_params(params);
    const std::vector<KernelSource> k80 = fa.kernels(c, p80, DType::bf16);
    const std::vector<KernelSource> k96 = fa.kernels(c, p96, DType::bf16);
    ASSERT_EQ(k80.size(), 1u);
    ASSERT_EQ(k96.size(), 1u);
    const std::string& n80 = k80[0].name_expression;
    const std::string& n96 = k96[0].name_expression;
    EXPECT_NE(n80.find("<ktune::bf16, 96, "), std::string::npos) << n80;
    EXPECT_EQ(n80.substr(n80.size() - 5), ", 80>") << n80;
    EXPECT_EQ(n96.find(", 80>"), std::string::npos) << n96;
    // The same tiles otherwise: the space, its reasons and shared memory are the tile's.
    EXPECT_EQ(fa.invalid_reason(c, p80, DType::bf16, h100),
              fa.invalid_reason(c, p96, DType::bf16, h100));
    EXPECT_EQ(fa.dynamic_shared_bytes(c, p80, DType::bf16, 0),
              fa.dynamic_shared_bytes(c, p96, DType::bf16, 0));
  }
  const Op& dec = flash_decode_op();
  const Problem d80 = dec.parse_problem("b=4,hq=32,hkv=8,nq=1,nk=3000,d=80");
  const Params split = dec.parse_params("splits=4,block_m=16,block_n=64,warps=4,stages=3");
  const std::vector<KernelSource> k = dec.kernels(split, d80, DType::f16);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 96, 16, 64, 4, 3, false, 0, false, false, "
            "false, false, 1, 80>");
  EXPECT_EQ(k[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 96, 80>");
  // Partial rows are the tile's width (the split kernel writes all 96 columns, zeros past 80).
  const Problem d96 = dec.parse_problem("b=4,hq=32,hkv=8,nq=1,nk=3000,d=96");
  EXPECT_EQ(dec.workspace_bytes(split, d80, DType::f16),
            dec.workspace_bytes(split, d96, DType::f16));
  // merge=1: the cluster size is spelled before DV.
  const Params merged = dec.parse_params("splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  const std::vector<KernelSource> m = dec.kernels(merged, d80, DType::bf16);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].name_expression.find(", false, 8, 80>"), std::string::npos)
      << m[0].name_expression;
}

// Defaults: those of the tile's d, for every regime the other tests pin (H100, H200-like, sm_80).
TEST(HeadDims, DefaultsAreTheTilesDs) {
  DeviceInfo h200 = device("sm_90a");
  h200.memory_bandwidth = 4'800'000'000'000;
  const DeviceInfo devices[] = {device("sm_80"), device("sm_90a"), h200};
  const std::pair<std::int64_t, std::int64_t> pairs[] = {{16, 32}, {40, 64}, {80, 96},
                                                         {112, 128}, {192, 256}};
  for (const DeviceInfo& dev : devices)
    for (const auto& [d, tile] : pairs) {
      for (const char* shape :
           {"b=2,hq=32,hkv=8,nq=3000,nk=3000,d=X,causal=yes", "b=8,hq=16,hkv=16,nq=300,nk=300,d=X",
            "b=1,hq=8,hkv=8,nq=200,nk=9000,d=X,page=64", "b=4,hq=32,hkv=8,nq=1,nk=5000,d=X"}) {
        std::string s = shape;
        s.replace(s.find("d=X"), 3, "d=" + std::to_string(d));
        const Problem p = flash_attention_op().parse_problem(s);
        const Problem q = flash_attention_op().parse_problem(replace_d(s, d, tile));
        const Params a = flash_attention_op().default_params(p, DType::bf16, dev);
        EXPECT_EQ(flash_attention_op().params_key(a),
                  flash_attention_op().params_key(
                      flash_attention_op().default_params(q, DType::bf16, dev)))
            << s << " " << dev.arch();
        EXPECT_EQ(flash_attention_op().invalid_reason(a, p, DType::bf16, dev), std::nullopt) << s;
      }
      // 9000 keys: past medium_spans' bound, where d=80 and d=96 share one merged point.
      const std::string s = "b=4,hq=32,hkv=8,nq=1,nk=9000,d=" + std::to_string(d);
      const Problem p = flash_decode_op().parse_problem(s);
      const Problem q = flash_decode_op().parse_problem(replace_d(s, d, tile));
      Params a = flash_decode_op().default_params(p, DType::bf16, dev);
      const Params b = flash_decode_op().default_params(q, DType::bf16, dev);
      if (d == 80 && dev.cc_major >= 9) {
        // Keys of d = 72-88 stream fewer bytes per CTA than d=96's: up to 2 CTAs per SM
        // (decode_defaults.cpp, kBetweenTilesCtasPerSm), here twice d=96's 4 splits.
        EXPECT_EQ(a.values[0], 2 * b.values[0]) << s << " " << dev.arch();
        a.values[0] = b.values[0];
      }
      EXPECT_EQ(flash_decode_op().params_key(a), flash_decode_op().params_key(b))
          << s << " " << dev.arch();
    }
}

TEST(HeadDims, E4m3TakesOnlyTheTilesOwnDs) {
  const Op& fa = flash_attention_op();
  const DeviceInfo h100 = device("sm_90a");
  const Params c = fa.parse_params(
      "block_m=128,block_n=128,warps=12,stages=4,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  const Problem p112 = fa.parse_problem("b=1,hq=8,hkv=8,nq=4096,nk=4096,d=112");
  const std::optional<std::string> why = fa.invalid_reason(c, p112, DType::e4m3, h100);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("e4m3 takes d = 128 or 256 (d=112 runs in d=128's tiles)"),
            std::string::npos)
      << *why;
  // Every reason of a d between tiles names the tiles it runs in.
  const std::optional<std::string> stages = fa.invalid_reason(
      fa.parse_params("block_m=64,block_n=64,warps=4,stages=4,q_regs=1,smem_pad=0,impl=0"),
      fa.parse_problem("b=1,hq=8,hkv=8,nq=4096,nk=4096,d=80"), DType::bf16, h100);
  ASSERT_TRUE(stages.has_value());
  EXPECT_NE(stages->find("stages=4 is for e4m3 tiles"), std::string::npos) << *stages;
  EXPECT_NE(stages->find("(d=80 runs in d=96's tiles)"), std::string::npos) << *stages;
  EXPECT_EQ(fa.invalid_reason(c, fa.parse_problem("b=1,hq=8,hkv=8,nq=4096,nk=4096,d=128"),
                              DType::e4m3, h100),
            std::nullopt);
  // d <= 32 runs in d=32's tiles, which the wgmma kernel has none of.
  const Params w = fa.parse_params(
      "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  const std::optional<std::string> small =
      fa.invalid_reason(w, fa.parse_problem("b=1,hq=8,hkv=8,nq=4096,nk=4096,d=24"), DType::bf16,
                        h100);
  ASSERT_TRUE(small.has_value());
  EXPECT_NE(small->find("d=24 runs with impl=0"), std::string::npos) << *small;
}

// NVRTC, sm_80 and sm_90a: the defaults of both ops at d between tiles (contiguous; varlen and
// paged on sm_90a, where they take the wgmma kernel), the references, and every fifteenth valid
// wgmma point of d=80: they compile, and the wgmma kernels do not spill.
TEST(HeadDims, KernelsCompile) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  const auto add = [&](const std::vector<KernelSource>& ks, const std::string& arch) {
    for (const KernelSource& k : ks)
      if (seen.insert({arch, k.name_expression}).second) jobs.push_back({k, arch, {}});
  };
  const Op& fa = flash_attention_op();
  const Op& dec = flash_decode_op();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = *device_for_arch(arch);
    for (std::int64_t d : {16, 40, 80, 112, 192}) {
      const std::string ds = ",d=" + std::to_string(d);
      std::vector<std::string> shapes = {"b=2,hq=8,hkv=2,nq=1000,nk=1000,causal=yes" + ds};
      if (dev.cc_major == 9 && d == 80)
        shapes.insert(shapes.end(), {"b=2,hq=8,hkv=2,nq=1000,nk=1000,varlen=yes" + ds,
                                     "b=2,hq=8,hkv=2,nq=1000,nk=1000,page=16" + ds});
      for (const std::string& s : shapes) {
        const Problem p = fa.parse_problem(s);
        const DType t = d % 16 == 0 ? DType::bf16 : DType::f16;
        add(fa.kernels(fa.default_params(p, t, dev), p, t), arch);
        add(fa.reference_kernels(p, t), arch);
      }
      const Problem q = dec.parse_problem("b=4,hq=32,hkv=8,nq=1,nk=5000" + ds);
      const Params split = dec.parse_params("splits=4,block_m=16,block_n=64,warps=4,stages=3");
      if (!dec.invalid_reason(split, q, DType::bf16, dev))
        add(dec.kernels(split, q, DType::bf16), arch);
    }
    if (dev.cc_major == 9) {
      const Problem p = fa.parse_problem("b=2,hq=8,hkv=2,nq=1000,nk=1000,d=80");
      const std::vector<Params> valid = Space(fa, p, DType::bf16, dev).valid_points();
      int m = 0;
      for (const Params& v : valid) {
        if (fa.params_key(v).find("impl=1") != std::string::npos && m++ % 15 == 0)
          add(fa.kernels(v, p, DType::bf16), arch);
      }
      const Problem merged = dec.parse_problem("b=1,hq=64,hkv=8,nq=1,nk=32768,d=80");
      add(dec.kernels(dec.parse_params("splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1"),
                      merged, DType::bf16),
          arch);
    }
  }
  test::compile_and_check(jobs, [](const CompileJob& job, const CompiledKernel& k) {
    const std::string& expr = job.source.name_expression;
    if (expr.find("flash_attention_sm90") != std::string::npos) {
      // No spills, and the wgmmas left to overlap (ptxas advisories C7513 / C7512 otherwise).
      EXPECT_EQ(k.resources.spill_stores, 0) << expr;
      EXPECT_EQ(k.log.find("C7513"), std::string::npos) << expr;
      EXPECT_EQ(k.log.find("C7512"), std::string::npos) << expr;
    }
  });
}

}  // namespace
}  // namespace ktune
