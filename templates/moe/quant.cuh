// Per-row e4m3 quantisation of the FP8 MoE layer's GEMM inputs (MoeQuantArgs): x [T, H] before
// gemm1 and act [max_padded, I] between gemm1 and gemm2. One block per row: a pass of 16-byte
// loads finds the row's largest magnitude (bf16 values, 8 per load), the block agrees on it,
// and a second pass (the row again, from L1/L2) writes e4m3 values of in / scale in 8-byte
// stores, scale = moe_quant_scale(amax): the power of two that puts the largest value in e4m3's
// top binade (moe/args.h says why a power of two).
//
// Launched programmatically like every kernel of the op after its first: it waits for its
// predecessor before reading, and lets the next kernel be scheduled once its loads are done.
#pragma once

#include "common/pdl.cuh"
#include "common/reduce.cuh"
#include "common/types.cuh"
#include "moe/args.h"

namespace ktune {

#if defined(__CUDACC__)

__global__ void __launch_bounds__(kMoeQuantThreads)
    moe_quant_rows_kernel(const __grid_constant__ MoeQuantArgs args) {
  griddep_wait();
  const int r = static_cast<int>(blockIdx.x);
  bool skip = r >= args.rows;
  if (!skip && args.padded_rows != nullptr)
    skip = r >= *args.padded_rows || args.sorted_pairs[r] >= args.pairs;
  if (skip) {
    griddep_launch_dependents();
    return;
  }
  const int vecs = args.n / 8;
  const uint4* in = reinterpret_cast<const uint4*>(static_cast<const bf16*>(args.in) +
                                                   static_cast<long long>(r) * args.n);
  float amax = 0.0f;
  for (int v = static_cast<int>(threadIdx.x); v < vecs; v += kMoeQuantThreads) {
    const uint4 q = in[v];
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // |bf16| as fp32: the high and low halves, sign bits cleared.
      amax = fmaxf(amax, __uint_as_float((w[i] << 16) & 0x7fff0000u));
      amax = fmaxf(amax, __uint_as_float(w[i] & 0x7fff0000u));
    }
  }
  __shared__ float s_max[kMoeQuantThreads / 32];
  amax = warp_reduce(amax, MaxOp());
  if (threadIdx.x % 32 == 0) s_max[threadIdx.x / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kMoeQuantThreads / 32; ++w) amax = fmaxf(amax, s_max[w]);
  // An all-zero row stores zeros with scale 1 (no division by zero).
  const float scale = moe_quant_scale(amax);
  const float inv = 1.0f / scale;  // exact: a power of two
  if (threadIdx.x == 0) args.scale[r] = scale;
  uint2* out = reinterpret_cast<uint2*>(static_cast<e4m3*>(args.out) +
                                        static_cast<long long>(r) * args.n);
  for (int v = static_cast<int>(threadIdx.x); v < vecs; v += kMoeQuantThreads) {
    const uint4 q = in[v];
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
    float f[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16) * inv;
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u) * inv;
    }
    out[v] = make_uint2(pack4_e4m3(f[0], f[1], f[2], f[3]), pack4_e4m3(f[4], f[5], f[6], f[7]));
  }
  griddep_launch_dependents();
}

#endif  // __CUDACC__

}  // namespace ktune
