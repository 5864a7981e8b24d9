// Kernels compiled and loaded once per GPU test binary (the tests that launch an op's kernels
// themselves rather than through the runtime).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/core/driver.hpp"
#include "templates/op.hpp"

namespace ktune::test {

/// The binary's compile cache: a temporary directory, removed at exit.
const std::filesystem::path& kernel_cache_dir();

/// `source` compiled for `dev` (once per name expression for the whole binary) and loaded;
/// dynamic_smem > 0 raises the function's dynamic shared memory limit to it.
CUfunction load_kernel(const KernelSource& source, const DeviceInfo& dev, unsigned dynamic_smem);

/// Fills `values` (sized by the caller) with fresh random numbers in [-2, 2) that `t` holds
/// exactly, never 0, and returns them on the device as 16-bit `t`.
DeviceBuffer upload_random(DType t, std::vector<double>& values, std::mt19937& rng);
/// `values` rounded to `t` in place (bf16, fp16 or e4m3) and uploaded.
DeviceBuffer upload_values(DType t, std::vector<double>& values);

/// `s` with every character that is not a letter or a digit made '_': a gtest parameter name.
std::string param_name(std::string s);

/// An attention op's outputs on the device: o (16-bit) and lse (fp32), poisoned with NaN before
/// a run so that an element the kernel does not write fails the comparison.
struct PoisonedOutputs {
  DeviceBuffer o, lse;
  std::size_t o_elements, lse_elements;

  PoisonedOutputs(std::size_t o_count, std::size_t lse_count);
  /// Quiet NaN of `t` in o and of fp32 in lse; synchronises the context.
  void poison(DType t);
  std::vector<std::uint16_t> o_bits() const;
  std::vector<float> lse_values() const;
  void* o_ptr() const { return reinterpret_cast<void*>(o.get()); }
  float* lse_ptr() const { return reinterpret_cast<float*>(lse.get()); }
};

/// Counts elements outside atol + rtol * |ref| (NaN never passes, an infinite reference must be
/// matched exactly) and fails the test at destruction if there was any; the first three are
/// reported with `where`: a string, or a callable that makes one only then.
struct Checker {
  Tolerance tol;
  std::string what;
  std::size_t bad = 0;
  double worst = 0;

  template <typename Where>
  void operator()(double out, double ref, const Where& where) {
    const double err = std::fabs(out - ref);
    const bool ok = std::isinf(ref) ? out == ref : err <= tol.atol + tol.rtol * std::fabs(ref);
    if (std::isfinite(err) && err > worst) worst = err;
    if (ok || bad++ >= 3) return;
    if constexpr (std::is_invocable_v<const Where&>)
      ADD_FAILURE() << what << ": " << where() << " = " << out << ", reference " << ref;
    else
      ADD_FAILURE() << what << ": " << where << " = " << out << ", reference " << ref;
  }
  ~Checker() { EXPECT_EQ(bad, 0u) << what << " (max abs error " << worst << ")"; }
};

}  // namespace ktune::test
