// Argument structs of the verification kernels in check.cuh; shared by host and NVRTC code.
// (Written by the tuner's author: the worker fills these; keep the layout in sync.)
#pragma once

namespace ktune {

/// Deterministic uniform values in [lo, hi) from (seed, index): never zeros, same on every run.
struct FillRandomArgs {
  void* data;
  unsigned long long n;
  unsigned long long seed;
  float lo;
  float hi;
};

/// Accumulated by compare_kernel; zero it before a launch.
struct CompareStats {
  unsigned long long bad;        // |out - ref| > atol + rtol * |ref|, or not finite
  unsigned long long nonfinite;  // NaN or Inf in out where ref is finite
  float max_abs_err;             // over finite elements
  float max_abs_ref;
  double sum_sq_err;
  double sum_sq_ref;
};

struct CompareArgs {
  const void* out;               // candidate output, element type = the kernel's T
  const float* ref;              // fp32 reference
  unsigned long long n;
  float rtol;
  float atol;
  CompareStats* stats;
};

}  // namespace ktune
