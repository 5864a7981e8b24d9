// Warp and row-group reductions.
//
// A row group is a run of consecutive whole warps of a block that work on one row. Its partial
// results meet once in shared memory, behind a named barrier that only the group's warps wait
// on, so the rows of a block never wait for each other. Every thread of the group receives the
// result.
#pragma once

#include "common/types.cuh"

namespace ktune {

#if defined(__CUDACC__)

struct SumOp {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct MinOp {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return b < a ? b : a;
  }
};

__device__ __forceinline__ float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ double shfl_xor(double v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ unsigned long long shfl_xor(unsigned long long v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}

/// Butterfly reduction over aligned groups of LANES lanes; every lane gets its group's result.
/// The whole warp must take part.
template <int LANES = 32, typename V, typename Op>
__device__ __forceinline__ V warp_reduce(V v, Op op) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
                "warp_reduce: LANES must be a power of two up to 32");
#pragma unroll
  for (int mask = LANES / 2; mask > 0; mask /= 2) v = op(v, shfl_xor(v, mask));
  return v;
}

/// Waits until `threads` threads (a multiple of 32) have reached barrier `id` (0 is the one
/// __syncthreads uses; 1..15 are free for row groups).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

/// THREADS threads of a block split into ROWS row groups of THREADS / ROWS threads each.
template <int THREADS, int ROWS>
struct RowGroup {
  static constexpr int kThreads = THREADS / ROWS;  // threads per row
  static constexpr int kWarps = kThreads / 32;     // warps per row
  static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                "RowGroup: THREADS must be a power of two in 32..1024");
  static_assert(ROWS >= 1 && ROWS <= 8 && (ROWS & (ROWS - 1)) == 0,
                "RowGroup: ROWS must be 1, 2, 4 or 8");
  static_assert(kThreads % 32 == 0, "RowGroup: threads per row must be a multiple of 32");

  /// Index of this thread's row within the block.
  __device__ static int row() { return static_cast<int>(threadIdx.x) / kThreads; }
  /// Index of this thread within its row group.
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % kThreads; }

  /// Reduces `v` over the row group. `slots` points at kWarps values of shared memory owned by
  /// this row for this reduction; a kernel doing several reductions gives each its own slots.
  template <typename V, typename Op>
  __device__ static V reduce(V v, V* slots, Op op) {
    v = warp_reduce<32>(v, op);
    if constexpr (kWarps == 1) {
      return v;
    } else {
      const int lane32 = static_cast<int>(threadIdx.x) & 31;
      const int warp = (static_cast<int>(threadIdx.x) >> 5) & (kWarps - 1);
      if (lane32 == 0) slots[warp] = v;
      if constexpr (ROWS == 1) {
        // A constant id lets ptxas reserve one barrier rather than all 16.
        asm volatile("bar.sync 1, %0;" : : "n"(kThreads) : "memory");
      } else {
        named_barrier(1 + row(), kThreads);
      }
      // Each aligned group of kWarps lanes holds a full copy of the partials.
      return warp_reduce<kWarps>(slots[lane32 & (kWarps - 1)], op);
    }
  }
};

#endif  // __CUDACC__

}  // namespace ktune
