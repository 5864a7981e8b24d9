// The valid configurations of every fused op compile with NVRTC for sm_80 and sm_90a, as do the
// reference and verification kernels. No GPU needed. All of them (3584 kernels) took ~8 minutes
// of CI's two cores; per (op, problem, dtype, arch) every fourth valid point is compiled, the
// offset turning with each, plus whatever it takes for every value of every tunable to be
// compiled at least once there (test::covering_sample), and the default configuration.
#include <gtest/gtest.h>

#include "tests/support/test_env.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "templates/op.hpp"

namespace ktune {
namespace {

const char* const kArchs[] = {"sm_80", "sm_90a"};
const char* const kShapes[] = {"16384x4096", "16384x4095", "1x1"};
constexpr std::size_t kSampleStride = 4;


/// The shapes above with every choice of each enumerated dimension.
std::vector<Problem> problems(const Op& op) {
  std::vector<Problem> out;
  for (const char* shape : kShapes) {
    std::vector<Problem> ps{op.parse_problem(shape)};
    for (std::size_t d = 0; d < op.dims().size(); ++d) {
      if (!op.dims()[d].enumerated()) continue;
      std::vector<Problem> next;
      for (const Problem& p : ps)
        for (std::size_t c = 0; c < op.dims()[d].choices.size(); ++c) {
          Problem q = p;
          q.values[d] = static_cast<std::int64_t>(c);
          next.push_back(q);
        }
      ps = std::move(next);
    }
    out.insert(out.end(), ps.begin(), ps.end());
  }
  return out;
}

struct Job {
  CompileJob job;
  std::string what;  // op, shape, dtype, params of the first configuration that needed it
};

std::vector<Job> fused_jobs() {
  std::set<std::pair<std::string, std::string>> seen;  // (arch, name expression)
  std::vector<Job> jobs;
  const auto add = [&](const KernelSource& k, const std::string& arch, const std::string& what) {
    if (seen.insert({arch, k.name_expression}).second) jobs.push_back({{k, arch, {}}, what});
  };
  for (const char* arch : kArchs) {
    const DeviceInfo dev = *device_for_arch(arch);
    for (const char* type : {"float", "ktune::bf16", "ktune::fp16"}) {
      add({"common/check.cuh", std::string("ktune::fill_random_kernel<") + type + ">"}, arch,
          "check");
      add({"common/check.cuh", std::string("ktune::compare_kernel<") + type + ">"}, arch, "check");
    }
    std::size_t turn = 0;  // the sample's offset
    for (const Op* op : all_ops()) {
      if (op->family() != "fused") continue;
      for (DType t : op->dtypes())
        for (const Problem& p : problems(*op)) {
          const std::string where =
              std::string(op->name()) + " " + op->problem_key(p) + " " + dtype_name(t);
          for (const KernelSource& k : op->reference_kernels(p, t)) add(k, arch, where + " reference");
          std::vector<Params> valid;
          for (const Params& params : test::all_points(*op))
            if (!op->invalid_reason(params, p, t, dev)) valid.push_back(params);
          for (std::size_t i : test::covering_sample(valid, kSampleStride, turn++))
            for (const KernelSource& k : op->kernels(valid[i], p, t))
              add(k, arch, where + " " + op->params_key(valid[i]));
          const Params fallback = op->default_params(p, t, dev);
          for (const KernelSource& k : op->kernels(fallback, p, t))
            add(k, arch, where + " default " + op->params_key(fallback));
        }
    }
  }
  return jobs;
}

TEST(FusedCompile, SampledValidConfigurationsCompile) {
  const std::vector<Job> jobs = fused_jobs();
  std::vector<CompileJob> compile_jobs;
  for (const Job& j : jobs) compile_jobs.push_back(j.job);
  std::printf("compiling %zu distinct kernels\n", compile_jobs.size());

  const Compiler compiler(std::nullopt);
  const std::vector<CompileOutcome> outcomes = compile_parallel(compiler, compile_jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());

  std::map<std::string, int> spills_per_arch;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].job.source.name_expression;
    if (!o.kernel) {
      if (++failures <= 5)
        ADD_FAILURE() << expr << " for " << jobs[i].job.arch << " (" << jobs[i].what
                      << ") failed:\n"
                      << o.error;
      continue;
    }
    const KernelResources& r = o.kernel->resources;
    EXPECT_GT(r.registers, 0) << expr;
    EXPECT_LE(r.registers, 255) << expr;
    if (r.spill_stores > 0 || r.spill_loads > 0) {
      ++spills_per_arch[jobs[i].job.arch];
      std::printf("spills: %s %s: %d registers, %d bytes spill stores, %d bytes spill loads\n",
                  jobs[i].job.arch.c_str(), expr.c_str(), r.registers, r.spill_stores,
                  r.spill_loads);
    }
  }
  EXPECT_EQ(failures, 0u);
  for (const char* arch : kArchs)
    std::printf("%s: %d kernels spill\n", arch, spills_per_arch[arch]);
}

// The compile tests' sample: every stride-th point from the offset, and the first point of each
// tunable value the stride missed; nothing else.
TEST(CoveringSample, TakesTheStrideAndTheFirstPointOfEachMissingValue) {
  const auto pt = [](std::int64_t a, std::int64_t b) { return Params{{a, b}}; };
  // Values of the second tunable: 1 at every even point but 6, 2 at points 1, 3 and 5, 3 at 6.
  const std::vector<Params> points = {pt(0, 1), pt(0, 2), pt(0, 1), pt(1, 2),
                                      pt(1, 1), pt(1, 2), pt(2, 3), pt(2, 1)};
  // Stride 4 from 0 takes 0 and 4 ((0,1) and (1,1)): the first holders of second-tunable value
  // 2 (point 1) and of first-tunable value 2 (point 6, also the only 3) are added.
  EXPECT_EQ(test::covering_sample(points, 4, 0), (std::vector<std::size_t>{0, 1, 4, 6}));
  // Offset 5 starts at 5 % 4 = 1: points 1 and 5, then 0 (the first holder of the second
  // tunable's 1) and 6.
  EXPECT_EQ(test::covering_sample(points, 4, 5), (std::vector<std::size_t>{0, 1, 5, 6}));
  EXPECT_EQ(test::covering_sample(points, 1, 0).size(), points.size());
  EXPECT_TRUE(test::covering_sample({}, 3, 0).empty());
  EXPECT_THROW(test::covering_sample(points, 0, 0), std::invalid_argument);
}

// The defaults at the headline problem, with their resources: what the tuner starts from.
TEST(FusedCompile, DefaultsAt16384x4096HaveNoSpills) {
  const Compiler compiler(std::nullopt);
  std::vector<CompileJob> jobs;
  std::vector<std::string> labels;
  for (const char* arch : kArchs) {
    const DeviceInfo dev = *device_for_arch(arch);
    for (const Op* op : all_ops()) {
      if (op->family() != "fused") continue;
      const Problem p = op->default_problem();
      const Params params = op->default_params(p, DType::bf16, dev);
      for (const KernelSource& k : op->kernels(params, p, DType::bf16)) {
        jobs.push_back({k, arch, {}});
        labels.push_back(std::string(arch) + " " + std::string(op->name()) + " " +
                         op->params_key(params));
      }
    }
  }
  const std::vector<CompileOutcome> outcomes = compile_parallel(compiler, jobs, 0);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(outcomes[i].kernel) << labels[i] << ": " << outcomes[i].error;
    const KernelResources& r = outcomes[i].kernel->resources;
    std::printf("%-60s %3d registers, %4d bytes smem, spills %d/%d\n", labels[i].c_str(),
                r.registers, r.shared_bytes, r.spill_stores, r.spill_loads);
    EXPECT_EQ(r.spill_stores, 0) << labels[i];
    EXPECT_EQ(r.local_bytes, 0) << labels[i];
  }
}

}  // namespace
}  // namespace ktune
