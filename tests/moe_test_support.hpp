// Shared by the MoE op's host-side tests (moe_op_test.cpp, moe_run_test.cpp): the op, device
// limits, a problem's reason as a string, the two layers of the issue and expert choice's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "templates/moe/gemm_sm90_args.h"
#include "templates/moe/args.h"
#include "templates/moe/gather_rows.cuh"
#include "templates/moe/gemm_args.h"
#include "templates/moe/gemm_ws_args.h"
#include "templates/moe/moe_op.hpp"
#include "templates/moe/reference.cuh"
#include "templates/moe/reference_mlp.cuh"
#include "templates/moe/zero.cuh"
#include "tests/support/launch_recorder.hpp"
#include "tests/support/test_strings.hpp"

namespace ktune::moe_test {

using test::contains;

inline const Op& op() { return moe_op(); }
inline DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }

inline std::string problem_error(const std::string& shape) {
  return test::run_error([&] { op().check_problem(op().parse_problem(shape)); });
}

const char* const kMixtral = "e=8,k=2,h=4096,i=14336";
const char* const kDeepSeek = "e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=3";
const char* const kExpertChoice = "e=64,k=8,h=2048,i=1408,routing=expert_choice";

inline Problem problem(const std::string& shape, int t) {
  return op().parse_problem(shape + ",t=" + std::to_string(t));
}

}  // namespace ktune::moe_test
