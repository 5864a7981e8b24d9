// Shared by the flash_decode host-side tests (decode_*_test.cpp): the op, device limits, reasons
// and errors as strings, a launcher that records launches with their argument structs, runs
// with fake device addresses, the bar problems, and a double-precision model of one
// query's softmax attention over a key range and of the log-sum-exp merge the kernels do.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "templates/attention/args.h"
#include "templates/common/check_args.h"
#include "templates/decode/args.h"
#include "templates/decode/decode_op.hpp"
#include "tests/support/compile_report.hpp"
#include "tests/support/launch_recorder.hpp"
#include "tests/support/test_strings.hpp"

namespace ktune::decode_test {

using test::contains;
using test::run_error;

inline const Op& op() { return flash_decode_op(); }
inline DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }
inline std::size_t kv_split_index() {
  const std::vector<Tunable>& ts = op().tunables();
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].name == "kv_split") return i;
  return ts.size();
}

/// The bf16 default for `problem` on `dev`, which must be a point the op can run there.
inline Params checked_default(const std::string& problem, const DeviceInfo& dev) {
  const Problem p = op().parse_problem(problem);
  const Params params = op().default_params(p, DType::bf16, dev);
  EXPECT_EQ(op().invalid_reason(params, p, DType::bf16, dev), std::nullopt) << problem;
  return params;
}

/// The parameters key of checked_default's configuration.
inline std::string default_key(const std::string& problem, const DeviceInfo& dev) {
  return op().params_key(checked_default(problem, dev));
}

/// Sets KTUNE_DECODE_COST_MODEL for the scope, then restores it.
class ModelSwitch {
 public:
  explicit ModelSwitch(const char* value) {
    if (const char* v = std::getenv(kName)) old_ = v;
    setenv(kName, value, 1);
  }
  ~ModelSwitch() {
    if (old_.empty())
      unsetenv(kName);
    else
      setenv(kName, old_.c_str(), 1);
  }

 private:
  static constexpr const char* kName = "KTUNE_DECODE_COST_MODEL";
  std::string old_;
};

inline std::string problem_error(const std::string& shape) {
  return test::run_error([&] { op().parse_problem(shape); });
}

inline std::string why(const std::string& params, const std::string& problem,
                       const char* arch = "sm_90a") {
  return op()
      .invalid_reason(op().parse_params(params), op().parse_problem(problem), DType::bf16,
                      device(arch))
      .value_or("");
}

using test::RecordingLauncher;

/// Runs the op with `tensors` (its table of device pointers), the workspace at `workspace`,
/// kernel handles 0x100 and 0x200 and scalars scale and softcap; the launches are recorded.
inline RecordingLauncher<FlashDecodeArgs> run_with(const Params& params, const Problem& p,
                                                   const std::uint64_t* tensors,
                                                   std::uint64_t workspace, double scale,
                                                   const std::int64_t* layout, double softcap) {
  const KernelHandle kernels[2] = {reinterpret_cast<KernelHandle>(0x100),
                                   reinterpret_cast<KernelHandle>(0x200)};
  const double scalars[2] = {scale, softcap};
  RunArgs a;
  a.params = &params;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = kernels;
  a.workspace = workspace;
  a.layout = layout;
  RecordingLauncher<FlashDecodeArgs> l;
  op().run(a, l);
  return l;
}

/// Runs the op with tensors at 0x10000 * (i + 1) (alibi_slopes at `slopes`), the workspace at
/// 0x100000, kernel handles 0x100 and 0x200, scalars scale and softcap.
inline RecordingLauncher<FlashDecodeArgs> run(const Params& params, const Problem& p,
                                              std::uint64_t workspace = 0x100000,
                                              double scale = 0.0,
                                              const std::int64_t* layout = nullptr,
                                              double softcap = 50.0,
                                              std::uint64_t slopes = 0x60000) {
  const std::uint64_t tensors[6] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000, slopes};
  return run_with(params, p, tensors, workspace, scale, layout, softcap);
}

/// Runs a paged problem with tensors q, k_cache, v_cache, o, lse, block_table, seq_lens,
/// alibi_slopes at 0x10000 * (i + 1) (the slopes at `slopes`), scalars scale (0) and softcap.
inline RecordingLauncher<FlashDecodeArgs> run_paged(const Params& params, const Problem& p,
                                                    const std::int64_t* layout = nullptr,
                                                    std::uint64_t block_table = 0x60000,
                                                    double softcap = 50.0,
                                                    std::uint64_t slopes = 0x80000) {
  const std::uint64_t tensors[8] = {0x10000, 0x20000,     0x30000, 0x40000,
                                    0x50000, block_table, 0x70000, slopes};
  return run_with(params, p, tensors, 0x100000, 0.0, layout, softcap);
}

const char* const kBar1 = "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128";
const char* const kBar2 = "b=1,hq=64,hkv=8,nq=1,nk=32768,d=128";
// The paged bar: 64 sequences of 100..8000 keys in pages of 16.
const char* const kPagedBar = "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,page=16";

struct Partial {
  std::vector<double> o;  // normalised by its own sum; 0 when no key was seen
  double lse = -std::numeric_limits<double>::infinity();
};

/// Softmax attention of one query over keys [k0, k1) visible below `limit`, normalised.
inline Partial attend(const std::vector<double>& q, const std::vector<std::vector<double>>& k,
                      const std::vector<std::vector<double>>& v, double scale, long long k0,
                      long long k1, long long limit) {
  const std::size_t d = q.size();
  Partial p;
  p.o.assign(d, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  std::vector<double> s;
  for (long long j = k0; j < std::min(k1, limit); ++j) {
    double x = 0;
    for (std::size_t i = 0; i < d; ++i) x += q[i] * k[static_cast<std::size_t>(j)][i];
    s.push_back(x * scale);
    m = std::max(m, s.back());
  }
  if (s.empty()) return p;
  double l = 0;
  for (std::size_t n = 0; n < s.size(); ++n) {
    const double e = std::exp(s[n] - m);
    l += e;
    for (std::size_t i = 0; i < d; ++i) p.o[i] += e * v[static_cast<std::size_t>(k0) + n][i];
  }
  for (double& x : p.o) x /= l;
  p.lse = m + std::log(l);
  return p;
}

/// The merge both kernels do: weights exp(lse_i - lse) with lse = log sum_i exp(lse_i).
inline Partial merge(const std::vector<Partial>& parts, std::size_t d) {
  Partial out;
  out.o.assign(d, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (const Partial& p : parts) m = std::max(m, p.lse);
  if (std::isinf(m)) return out;
  double l = 0;
  for (const Partial& p : parts) l += std::exp(p.lse - m);
  out.lse = m + std::log(l);
  for (const Partial& p : parts)
    for (std::size_t i = 0; i < d; ++i) out.o[i] += std::exp(p.lse - out.lse) * p.o[i];
  return out;
}

}  // namespace ktune::decode_test
