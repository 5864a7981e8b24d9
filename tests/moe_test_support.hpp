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
// Past 256 experts (the kernels' EMAX = 512 forms): Kimi-K2-like (384 experts) and
// Qwen3-Next-like (512) layers.
const char* const kKimi = "e=384,k=8,h=7168,i=2048,routing=softmax_renorm";
const char* const kKimiGroup =
    "e=384,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,topk_group=4";
const char* const kKimiPre = "e=384,k=8,h=7168,i=2048,routing=precomputed";
const char* const kQwenNext = "e=512,k=10,h=2048,i=512,routing=softmax";
const char* const kQwenChoice = "e=512,k=10,h=2048,i=512,routing=expert_choice";

inline Problem problem(const std::string& shape, int t) {
  return op().parse_problem(shape + ",t=" + std::to_string(t));
}

/// `q` with the tunables of `set` ("name=value,..."; empty: none) put over it.
inline Params with_values(Params q, const std::string& set) {
  std::size_t at = 0;
  while (at < set.size()) {
    std::size_t end = set.find(',', at);
    if (end == std::string::npos) end = set.size();
    const std::string item = set.substr(at, end - at);
    q.values[op().param_index(item.substr(0, item.find('=')))] =
        std::stoll(item.substr(item.find('=') + 1));
    at = end + 1;
  }
  return q;
}

}  // namespace ktune::moe_test
