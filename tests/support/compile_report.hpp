#pragma once
// NVRTC compile tests' common loop: compile every job (no cache), require each to compile,
// print a line per kernel (target, name expression, registers, spill stores), then hand each
// compiled kernel to the test's own checks.

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"

namespace ktune::test {

inline void compile_and_check(
    const std::vector<CompileJob>& jobs,
    const std::function<void(const CompileJob&, const CompiledKernel&)>& check) {
  std::printf("compiling %zu kernels\n", jobs.size());
  const std::vector<CompileOutcome> out = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(out.size(), jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(out[i].kernel) << expr << " for " << jobs[i].arch << ":\n" << out[i].error;
    const KernelResources& r = out[i].kernel->resources;
    std::printf("%-6s %-120s %3d registers, spills %d\n", jobs[i].arch.c_str(), expr.c_str(),
                r.registers, r.spill_stores);
    check(jobs[i], *out[i].kernel);
  }
}

}  // namespace ktune::test
