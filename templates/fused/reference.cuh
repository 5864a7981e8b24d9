// Reference kernels for verifying the tuned fused kernels on the GPU: plain, obviously correct
// code with no tunables. Inputs are T; every output is float. Sums are accumulated in double.
//
// Row ops run one block of kReferenceThreads threads per row (grid = m). Elementwise ops run a
// grid-stride loop over the m * n outputs with blocks of kReferenceThreads threads (any grid).
#pragma once

#include "common/types.cuh"
#include "fused/args.h"

namespace ktune {

#if defined(__CUDACC__)

/// Sum of `v` over the block; every thread gets the result. `slots`: kReferenceThreads doubles.
__device__ inline double reference_block_sum(double v, double* slots) {
  slots[threadIdx.x] = v;
  __syncthreads();
  for (int half = kReferenceThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) slots[threadIdx.x] += slots[threadIdx.x + half];
    __syncthreads();
  }
  const double total = slots[0];
  __syncthreads();  // slots may be reused right away
  return total;
}

/// Maximum of `v` over the block; every thread gets the result.
__device__ inline double reference_block_max(double v, double* slots) {
  slots[threadIdx.x] = v;
  __syncthreads();
  for (int half = kReferenceThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      slots[threadIdx.x] = fmax(slots[threadIdx.x], slots[threadIdx.x + half]);
    __syncthreads();
  }
  const double total = slots[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void __launch_bounds__(kReferenceThreads)
    add_rmsnorm_reference_kernel(const AddRmsNormArgs args) {
  __shared__ double slots[kReferenceThreads];
  const long long row = blockIdx.x;
  const int n = args.n;
  const T* x = static_cast<const T*>(args.x) + row * n;
  const T* r = static_cast<const T*>(args.residual) + row * n;
  const T* w = static_cast<const T*>(args.weight);
  float* y = static_cast<float*>(args.y) + row * n;
  float* h = static_cast<float*>(args.h) + row * n;

  double ss = 0.0;
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
    const float hi = to_float(x[i]) + to_float(r[i]);
    h[i] = hi;
    ss += static_cast<double>(hi) * hi;
  }
  ss = reference_block_sum(ss, slots);
  const double inv = 1.0 / sqrt(ss / n + static_cast<double>(args.eps));
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
    const float hi = to_float(x[i]) + to_float(r[i]);
    y[i] = static_cast<float>(hi * inv * to_float(w[i]));
  }
}

template <typename T, bool RESIDUAL>
__global__ void __launch_bounds__(kReferenceThreads)
    layernorm_reference_kernel(const LayerNormArgs args) {
  __shared__ double slots[kReferenceThreads];
  const long long row = blockIdx.x;
  const int n = args.n;
  const T* x = static_cast<const T*>(args.x) + row * n;
  const T* r = RESIDUAL ? static_cast<const T*>(args.residual) + row * n : nullptr;
  const T* w = static_cast<const T*>(args.weight);
  const T* b = static_cast<const T*>(args.bias);
  float* y = static_cast<float*>(args.y) + row * n;
  float* h = RESIDUAL ? static_cast<float*>(args.h) + row * n : nullptr;

  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
    float hi = to_float(x[i]);
    if (RESIDUAL) {
      hi += to_float(r[i]);
      h[i] = hi;
    }
    s += hi;
  }
  const double mean = reference_block_sum(s, slots) / n;
  double ss = 0.0;
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
    const float hi = RESIDUAL ? to_float(x[i]) + to_float(r[i]) : to_float(x[i]);
    ss += (hi - mean) * (hi - mean);
  }
  const double rstd = 1.0 / sqrt(reference_block_sum(ss, slots) / n + args.eps);
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
    const float hi = RESIDUAL ? to_float(x[i]) + to_float(r[i]) : to_float(x[i]);
    y[i] = static_cast<float>((hi - mean) * rstd * to_float(w[i]) + to_float(b[i]));
  }
}

template <typename T>
__global__ void __launch_bounds__(kReferenceThreads) softmax_reference_kernel(const SoftmaxArgs args) {
  __shared__ double slots[kReferenceThreads];
  const long long row = blockIdx.x;
  const int n = args.n;
  const T* x = static_cast<const T*>(args.x) + row * n;
  float* y = static_cast<float*>(args.y) + row * n;
  const double scale = args.scale;

  double m = __longlong_as_double(0xfff0000000000000LL);  // -inf
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) m = fmax(m, scale * to_float(x[i]));
  m = reference_block_max(m, slots);
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += kReferenceThreads) s += exp(scale * to_float(x[i]) - m);
  s = reference_block_sum(s, slots);
  for (int i = threadIdx.x; i < n; i += kReferenceThreads)
    y[i] = static_cast<float>(exp(scale * to_float(x[i]) - m) / s);
}

template <Activation A>
__device__ inline double reference_activate(double x) {
  if (A == Activation::gelu_tanh)
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if (A == Activation::gelu_erf) return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
  if (A == Activation::silu) return x / (1.0 + exp(-x));
  return x > 0.0 ? x : 0.0;
}

template <typename T, Activation A>
__global__ void __launch_bounds__(kReferenceThreads) bias_act_reference_kernel(const BiasActArgs args) {
  const T* x = static_cast<const T*>(args.x);
  const T* b = static_cast<const T*>(args.bias);
  float* y = static_cast<float*>(args.y);
  const long long total = static_cast<long long>(args.m) * args.n;
  for (long long i = blockIdx.x * static_cast<long long>(kReferenceThreads) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * kReferenceThreads) {
    const float v = to_float(x[i]) + to_float(b[i % args.n]);
    y[i] = static_cast<float>(reference_activate<A>(v));
  }
}

template <typename T>
__global__ void __launch_bounds__(kReferenceThreads) swiglu_reference_kernel(const SwigluArgs args) {
  const T* x = static_cast<const T*>(args.x);
  float* y = static_cast<float*>(args.y);
  const long long n = args.n;
  const long long total = args.m * n;
  for (long long i = blockIdx.x * static_cast<long long>(kReferenceThreads) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * kReferenceThreads) {
    const long long row = i / n, col = i % n;
    const double a = to_float(x[row * 2 * n + col]);
    const double b = to_float(x[row * 2 * n + n + col]);
    y[i] = static_cast<float>(a / (1.0 + exp(-a)) * b);
  }
}

#endif  // __CUDACC__

}  // namespace ktune
