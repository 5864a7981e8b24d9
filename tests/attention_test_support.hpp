// Shared by the flash attention op's host-side tests (attention_ops_test.cpp,
// attention_space_test.cpp, attention_run_test.cpp): the op, device limits, reasons and errors
// as strings, a launcher that records launches with their argument structs, a run with fake
// device addresses, the multi-head problem most tests start from.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "search/space.hpp"
#include "templates/attention/args.h"
#include "templates/attention/args_sm90.h"
#include "templates/attention/attention_op.hpp"
#include "tests/support/launch_recorder.hpp"
#include "tests/support/test_strings.hpp"

namespace ktune::attention_test {

using test::contains;
using test::run_error;

inline const Op& op() { return flash_attention_op(); }
inline DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }

inline std::string problem_error(const char* shape) {
  return test::run_error([&] { op().parse_problem(shape); });
}

/// Records launches with their FlashAttentionArgs.
using RecordingLauncher = test::RecordingLauncher<FlashAttentionArgs>;

/// Runs the op (or its reference) with tensors at 0x10000 * (i + 1), one fake kernel handle.
inline RecordingLauncher run(const Params& params, const Problem& p, double scale = 0.0,
                             const std::int64_t* layout = nullptr, bool reference = false,
                             double softcap = 50.0, std::uint64_t slopes = 0x60000,
                             std::uint64_t cu_q = 0x70000, std::uint64_t cu_k = 0x80000) {
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, slopes,  cu_q,    cu_k};
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {scale, softcap};
  RunArgs a;
  a.params = &params;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = &kernel;
  a.layout = layout;
  return test::record_run<RecordingLauncher>(op(), a, reference);
}

const char* const kMha = "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128";

}  // namespace ktune::attention_test
