// What the row kernels (add_rmsnorm, layernorm, softmax) share.
//
// Template parameters of every row kernel:
//   T        bf16 or fp16 storage; arithmetic is fp32
//   THREADS  threads per block
//   ROWS     rows per block; THREADS / ROWS threads (whole warps) work on one row
//   VEC      elements per vector access (VEC * sizeof(T) <= 16 bytes); n % VEC == 0
//   ITEMS    > 0: each thread keeps ITEMS vectors of its row in registers between the passes;
//            the host picks ITEMS = ceil(n / ((THREADS / ROWS) * VEC)), at most
//            kRowRegisterFloats / VEC;
//            = 0: the second pass reads the row again from global memory (mostly from L2),
//            row_batch<THREADS>() vectors per thread at a time, which works for any n
// A thread owns the vectors lane, lane + THREADS / ROWS, ... of its row, so each load
// instruction of a warp covers one contiguous stretch of the row. On the register path every
// load of the row is issued before the first reduction.
#pragma once

#include "fused/args.h"

namespace ktune {

#if defined(__CUDACC__)

/// Vectors per thread loaded together on the re-read path (fewer at 1024 threads, where a
/// thread has only 64 registers).
template <int THREADS>
__device__ constexpr int row_batch() {
  return THREADS >= 1024 ? 2 : 4;
}

template <typename T, int VEC, int ITEMS>
__device__ __forceinline__ void check_row_kernel_params() {
  static_assert(sizeof(T) == 2, "row kernels take bf16 or fp16");
  static_assert(VEC >= 1 && (VEC & (VEC - 1)) == 0 && VEC * sizeof(T) <= 16,
                "VEC must be a power of two with VEC * sizeof(T) <= 16");
  static_assert(ITEMS >= 0 && ITEMS * VEC <= kRowRegisterFloats,
                "ITEMS * VEC must be at most kRowRegisterFloats");
}

#endif  // __CUDACC__

}  // namespace ktune
