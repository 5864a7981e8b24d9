// The MoE op's run() through a recording launcher, for the host-side launch tests
// (moe_run_test.cpp, moe_ws_launch_test.cpp): fake tensor, kernel and workspace addresses.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/moe_test_support.hpp"

namespace ktune::moe_test {

/// Records each launch with a copy of its argument bytes (`as<Args>()`).
using RecordingLauncher = test::LaunchRecorder;

constexpr std::uint64_t kWorkspace = 0x100000000ull;

/// Runs with tensors at 0x10000 * (i + 1) (those in `null` passed as null), kernel handle i at
/// 0x100 + i.
inline RecordingLauncher run(const Params& params, const Problem& p, std::set<int> null = {},
                             bool reference = false, DType dtype = DType::bf16, int sm_count = 0) {
  std::uint64_t tensors[12];
  for (int i = 0; i < 12; ++i) tensors[i] = null.count(i) ? 0 : 0x10000ull * (i + 1);
  KernelHandle kernels[16];
  for (int i = 0; i < 16; ++i) kernels[i] = reinterpret_cast<KernelHandle>(0x100 + i);
  const double scaling = 2.5;
  RunArgs a;
  a.params = &params;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = &scaling;
  a.kernels = kernels;
  a.workspace = kWorkspace;
  a.dtype = dtype;
  a.sm_count = sm_count;
  return test::record_run<RecordingLauncher>(op(), a, reference);
}

inline std::vector<std::string> kernel_names(const Params& params, const Problem& p,
                                             DType dtype = DType::bf16) {
  std::vector<std::string> out;
  for (const KernelSource& k : op().kernels(params, p, dtype)) {
    const std::string& e = k.name_expression;
    out.push_back(e.substr(7, e.find('<') == std::string::npos ? std::string::npos
                                                               : e.find('<') - 7));
  }
  return out;
}

/// Every workspace pointer of a launch lies inside [kWorkspace, kWorkspace + bytes).
inline void expect_inside(const void* ptr, std::size_t bytes, std::size_t ws, const char* what) {
  const auto v = reinterpret_cast<std::uintptr_t>(ptr);
  if (v < kWorkspace) return;  // a tensor
  EXPECT_LE(v + bytes, kWorkspace + ws) << what;
}

}  // namespace ktune::moe_test
