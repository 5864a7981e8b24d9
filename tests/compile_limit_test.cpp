// Compiles in a child process (`ktune __compile`) under a time limit: the same result as in
// process, errors with their log, a pathological compile stopped at the limit with no process
// left behind, and clear errors when the child cannot run. Runs without a GPU.
#include "tuner/compile_child.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// On a machine with a CUDA driver, NVRTC reuses SASS from the driver's compute cache for PTX it
// has seen before and then returns no ptxas log, so resources would read 0. These tests check
// what NVRTC reports, so they compile without that cache (set before NVRTC first runs).
const int kNoDriverCache = ::setenv("CUDA_CACHE_DISABLE", "1", 1);

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A ptxas log without its "Compile time = ..." lines, the only part that differs between runs.
std::string without_timing(const std::string& log) {
  std::string out;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (!contains(line, "Compile time =")) out += line + "\n";
    start = end + 1;
  }
  return out;
}

std::vector<std::string> child() { return {test::cli_path(), "__compile"}; }

// True when this process has no child at all, running or zombie.
bool no_children() { return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD; }

CompileJob text_job(const std::string& text, const std::string& name) {
  CompileJob job;
  job.arch = "sm_80";
  job.source.name_expression = name;
  job.source_text = text;
  return job;
}

CompileJob axpy_job() {
  return text_job(R"(
struct Args { float* y; const float* x; float a; int n; };
template <int kBlock>
__global__ void __launch_bounds__(kBlock) axpy(const __grid_constant__ Args args) {
  const int i = blockIdx.x * kBlock + threadIdx.x;
  if (i < args.n) args.y[i] = args.a * args.x[i] + args.y[i];
}
)", "axpy<128>");
}

// 2^30 macro expansions that end in a single token: NVRTC's preprocessor spends minutes on it
// (2^24 takes about 10 s on a two-core machine) while its memory stays in the hundreds of MB.
std::string pathological_source() {
  std::string s = "#define E0(x) x\n";
  for (int i = 1; i <= 30; ++i) {
    s += "#define E" + std::to_string(i) + "(x) E" + std::to_string(i - 1) + "(E" +
         std::to_string(i - 1) + "(x))\n";
  }
  return s + "__global__ void slow(int* p) { *p = E30(1); }\n";
}

TEST(CompileChild, SameKernelAsInProcess) {
  const CompileJob from_file{{"common/check.cuh", "ktune::compare_kernel<float>"}, "sm_90a", {}};
  for (const CompileJob& job : {axpy_job(), from_file}) {
    const CompiledKernel here = Compiler(std::nullopt).compile(job);
    const CompiledKernel there = compile_in_child(child(), job, 60.0);
    if (job.source_text.empty()) {
      // NVRTC names internal-linkage symbols (check.cuh's constants) after the process id, so
      // only the size of such a CUBIN matches across processes.
      EXPECT_EQ(there.cubin.size(), here.cubin.size()) << job.source.name_expression;
    } else {
      EXPECT_EQ(there.cubin, here.cubin) << job.source.name_expression;
    }
    EXPECT_EQ(there.lowered_name, here.lowered_name);
    EXPECT_EQ(without_timing(there.log), without_timing(here.log));
    EXPECT_EQ(there.resources.registers, here.resources.registers);
    EXPECT_EQ(there.resources.shared_bytes, here.resources.shared_bytes);
    EXPECT_EQ(there.resources.local_bytes, here.resources.local_bytes);
    EXPECT_EQ(there.resources.spill_stores, here.resources.spill_stores);
    EXPECT_EQ(there.resources.spill_loads, here.resources.spill_loads);
    EXPECT_GT(there.resources.registers, 0) << job.source.name_expression << "\n" << there.log;
    EXPECT_FALSE(there.from_cache);
    EXPECT_GT(there.seconds, 0.0);
  }
  EXPECT_TRUE(no_children());
}

TEST(CompileChild, CompileErrorCarriesTheLog) {
  try {
    compile_in_child(child(), text_job("__global__ void broken(int* p) { p[0] = ; }\n", "broken"),
                     60.0);
    FAIL() << "no CompileError";
  } catch (const CompileTimeout& e) {
    FAIL() << "a compile error reported as a timeout: " << e.what();
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "broken for sm_80")) << e.what();
    EXPECT_TRUE(contains(e.log(), "ktune_main.cu(1)")) << e.log();
    EXPECT_TRUE(contains(e.log(), "error")) << e.log();
  }
  EXPECT_THROW(compile_in_child(child(), text_job("__global__ void k() {}", ""), 60.0),
               InvalidArgument);
  EXPECT_TRUE(no_children());
}

TEST(CompileChild, PathologicalCompileIsStoppedAtTheLimit) {
  test::TempDir dir;
  const Compiler compiler(dir.path() / "cache", child_builder(child(), 2.0));
  ASSERT_TRUE(compiler.cache_dir().has_value()) << compiler.cache_disabled_reason();
  const CompileJob slow = text_job(pathological_source(), "slow");
  const Clock::time_point t0 = Clock::now();
  try {
    compiler.compile(slow);
    FAIL() << "the pathological compile finished";
  } catch (const CompileTimeout& e) {
    EXPECT_TRUE(contains(e.what(), "slow for sm_80")) << e.what();
    EXPECT_TRUE(contains(e.what(), "within 2 s")) << e.what();
  }
  const double seconds = seconds_since(t0);
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 2.0 + 3.0) << "stopped at the limit, not later";
  EXPECT_TRUE(no_children()) << "the child was killed and reaped";
  EXPECT_FALSE(fs::exists(dir.path() / "cache" / (compiler.cache_key(slow) + ".cubin")));

  // The lock is released and the next compile works, through the cache afterwards.
  EXPECT_FALSE(compiler.compile(axpy_job()).from_cache);
  EXPECT_TRUE(compiler.compile(axpy_job()).from_cache);
  // A batch reports the timeout as such.
  const Compiler quick(std::nullopt, child_builder(child(), 0.5));
  const std::vector<CompileOutcome> out = compile_parallel(quick, {slow}, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].kernel.has_value());
  EXPECT_TRUE(out[0].timed_out) << out[0].error;
  EXPECT_TRUE(no_children());
}

TEST(CompileChild, ChildThatCannotRunIsAClearError) {
  const std::string missing = "/nonexistent/ktune-missing";
  try {
    compile_in_child({missing, "__compile"}, axpy_job(), 60.0);
    FAIL() << "no error";
  } catch (const CompileError& e) {
    FAIL() << "a missing child reported as a compile error: " << e.what();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "cannot start the compile child")) << e.what();
    EXPECT_TRUE(contains(e.what(), missing)) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file")) << e.what();
  }
  // Something that is not a ktune binary.
  try {
    compile_in_child({"/bin/sh", "-c", "exit 7"}, axpy_job(), 60.0);
    FAIL() << "no error";
  } catch (const CompileError& e) {
    FAIL() << "a broken child reported as a compile error: " << e.what();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "exited with status 7 without a reply")) << e.what();
  }
  EXPECT_THROW(compile_in_child({}, axpy_job(), 60.0), InvalidArgument);
  EXPECT_TRUE(no_children());
}

TEST(CompileChild, CrashOfTheChildIsACompileErrorOfThatJob) {
  // What NVRTC crashing on one input looks like from the parent.
  try {
    compile_in_child({"/bin/sh", "-c", "kill -SEGV $$"}, axpy_job(), 60.0);
    FAIL() << "no error";
  } catch (const CompileTimeout& e) {
    FAIL() << e.what();
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "killed by signal 11")) << e.what();
    EXPECT_TRUE(contains(e.what(), "axpy<128> for sm_80")) << e.what();
  }
  EXPECT_TRUE(no_children());
}

// The driver's compute cache would hand NVRTC SASS without a ptxas log (resources all 0).
TEST(CompileChild, ChildCompilesWithoutTheDriverCache) {
  ::setenv("CUDA_CACHE_DISABLE", "0", 1);
  try {
    compile_in_child({"/bin/sh", "-c", "[ \"$CUDA_CACHE_DISABLE\" = 1 ] && exit 7; exit 8"},
                     axpy_job(), 60.0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "exited with status 7")) << e.what();
  }
  ::setenv("CUDA_CACHE_DISABLE", "1", 1);
}

TEST(CompileChild, LimitMustBeAPositiveNumberOfSeconds) {
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THROW(compile_in_child(child(), axpy_job(), bad), InvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ktune
