// Argument structs of the fused kernels: one struct per kernel, passed by value as the kernel's
// only parameter. Shared by the host (g++, which fills them) and NVRTC (which reads them), so
// they hold only fixed-size plain types. Pointers are device addresses; rows are contiguous
// (row stride = n elements, 2n for the swiglu input). Outputs must not alias inputs.
//
// The tuned kernels read and write T (ktune::bf16 or ktune::fp16); the reference kernels take the
// same structs with every output pointer pointing at float.
#pragma once

#ifndef __CUDACC_RTC__
static_assert(sizeof(void*) == 8, "ktune kernel arguments assume 64-bit pointers");
#include "ktune/dtype.hpp"  // Activation, shared with the public API
#endif

namespace ktune {

/// Threads per block of every reference kernel.
constexpr int kReferenceThreads = 256;
/// Row kernels: most floats per thread the register path may hold (ITEMS * VEC).
constexpr int kRowRegisterFloats = 64;

#ifdef __CUDACC_RTC__
/// bias_act activations, in the order of the op's `act` dimension (host code: ktune/dtype.hpp).
enum class Activation : int { gelu_tanh = 0, gelu_erf = 1, silu = 2, relu = 3 };
#endif

/// h = x + residual; y = h * rsqrt(mean(h^2) + eps) * weight.
struct AddRmsNormArgs {
  const void* x;         // [m, n]
  const void* residual;  // [m, n]
  const void* weight;    // [n]
  void* y;               // [m, n]
  void* h;               // [m, n]
  int m;                 // rows
  int n;                 // row length
  float eps;
};

/// h = x (+ residual); y = (h - mean) * rsqrt(var + eps) * weight + bias.
struct LayerNormArgs {
  const void* x;         // [m, n]
  const void* residual;  // [m, n]; read only by the residual kernels
  const void* weight;    // [n]
  const void* bias;      // [n]
  void* y;               // [m, n]
  void* h;               // [m, n]; written only by the residual kernels
  int m;
  int n;
  float eps;
};

/// y = softmax(scale * x) along each row.
struct SoftmaxArgs {
  const void* x;  // [m, n]
  void* y;        // [m, n]
  int m;
  int n;
  float scale;
};

/// y = act(x + bias).
struct BiasActArgs {
  const void* x;     // [m, n]
  const void* bias;  // [n]
  void* y;           // [m, n]
  int m;
  int n;
  int col_shift;     // log2 of the threads of a block that share a row (tuned kernels only)
};

/// y = silu(a) * b where a = x[:, :n] and b = x[:, n:].
struct SwigluArgs {
  const void* x;  // [m, 2n]
  void* y;        // [m, n]
  int m;
  int n;          // output row length
  int col_shift;  // log2 of the threads of a block that share a row (tuned kernels only)
};

}  // namespace ktune
