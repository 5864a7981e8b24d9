// Combine of the MoE layer: y[t] = sum over s = 0..k-1, in slot order, of pair_out[t * k + s],
// accumulated in fp32 and rounded once. With gemm2's split-k (PARTIAL) the sum also runs over
// the splits' fp32 partial sums, split-major. Deterministic: no atomics, a fixed summation order.
#pragma once

#include "common/pdl.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"
#include "moe/args.h"
#include "moe/gemm_args.h"

namespace ktune {

/// T: bf16 or fp16. THREADS: threads per CTA. VEC: elements per 16-bit vector access (H must be
/// a multiple of VEC: moe_combine_invalid_reason). PARTIAL: pair_out holds args.splits fp32
/// partial sums [splits][T * k, H] (read 4 floats per access) instead of T rows.
///
/// Launch: grid (tokens, moe_combine_grid_y(hidden, THREADS, VEC)), THREADS threads, no shared
/// memory. Each thread sums VEC columns of one token.
template <typename T, int THREADS, int VEC, bool PARTIAL = false>
__global__ void __launch_bounds__(THREADS)
    moe_combine_kernel(const __grid_constant__ MoeCombineArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(THREADS == 64 || THREADS == 128 || THREADS == 256 || THREADS == 512,
                "THREADS must be 64, 128, 256 or 512");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC must be 1, 2, 4 or 8");

  const int token = blockIdx.x;
  const int col = (blockIdx.y * THREADS + threadIdx.x) * VEC;
  if (col >= args.hidden) return;
  const long long h = args.hidden;
  float sum[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) sum[e] = 0.f;
  if constexpr (PARTIAL) {
    constexpr int FV = VEC < 4 ? VEC : 4;  // floats per access
    const long long rows = static_cast<long long>(args.tokens) * args.k;
    const float* in = static_cast<const float*>(args.pair_out) +
                      static_cast<long long>(token) * args.k * h + col;
    for (int z = 0; z < args.splits; ++z)
      for (int s = 0; s < args.k; ++s) {
        const float* row = in + (z * rows + s) * h;
#pragma unroll
        for (int q = 0; q < VEC / FV; ++q) {
          float f[FV];
          unpack(load_vec<FV>(row + q * FV), f);
#pragma unroll
          for (int e = 0; e < FV; ++e) sum[q * FV + e] += f[e];
        }
      }
  } else {
    const T* in =
        static_cast<const T*>(args.pair_out) + static_cast<long long>(token) * args.k * h + col;
    for (int s = 0; s < args.k; ++s) {
      float f[VEC];
      unpack(load_vec<VEC>(in + s * h), f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum[e] += f[e];
    }
  }
  store_vec(static_cast<T*>(args.y) + static_cast<long long>(token) * h + col, pack<T>(sum));
}

}  // namespace ktune
