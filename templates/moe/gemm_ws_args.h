// Arguments, launch geometry and validity of the warp-specialised grouped GEMM
// moe_gemm_ws_kernel (moe/gemm_ws_sm90.cuh), shared by the kernel (NVRTC, nvcc) and host code
// (g++): MoeGemmArgs plus the tensor maps through which the copy engine reads the weight tiles
// and the A rows, and plain constexpr functions. Included as "moe/..." by kernels (NVRTC's
// embedded names, nvcc -I templates) and as "templates/moe/..." by host code.
//
// Tensor maps (encoded on the host, runtime/core/tensor_map.hpp; every box 128 bytes wide (64
// 16-bit elements, 128 e4m3; "64" below) in the 128-byte swizzle, the layout wgmma reads):
//   gemm1  a_map: x [rows, H] (2-D {H, rows}), box 64 x 1: one gathered row per copy
//          w_map: w1 [E, 2I, H] as 4-D {H, I, 2, E} (dim 2: gate 0, up 1), box 64 x BLOCK_N,
//                 so that a box past row I of either half reads zeros, not the other half
//   gemm2  a_map: act [max_padded, I] (2-D {I, max_padded}), box 64 x BLOCK_M: a block's rows
//          w_map: w2 [E, H, I] as 3-D {I, H, E}, box 64 x BLOCK_N
#pragma once

#if defined(__CUDACC__)
#include "common/tma.cuh"
#include "moe/args.h"
#include "moe/gemm_sm90_args.h"
#else
#include "templates/common/tma.cuh"
#include "templates/moe/args.h"
#include "templates/moe/gemm_sm90_args.h"
#endif

#ifndef KTUNE_MOE_HD
#if defined(__CUDACC__)
#define KTUNE_MOE_HD __host__ __device__
#else
#define KTUNE_MOE_HD
#endif
#endif

namespace ktune {

struct MoeGemmWsArgs {
  tma::TensorMap a_map;  // gemm1: x rows (box 64 x 1); gemm2: act (box 64 x BLOCK_M)
  tma::TensorMap w_map;  // gemm1: w1 as {H, I, 2, E}; gemm2: w2 as {I, H, E}; box 64 x BLOCK_N
  MoeGemmArgs base;
};

/// How gemm1's producer gathers the x rows of a block (GATHER, a template argument).
enum MoeWsGather : int {
  moe_ws_gather_cp_async = 0,  // the producer warpgroup's 128 threads, 16-byte cp.async each,
                               // completion on the slot's barrier (cp.async.mbarrier.arrive)
  moe_ws_gather_tma = 1,       // one 128-byte TMA box per row, issued by the producer's warp 0
  moe_ws_gather_sorted = 2,    // none: args.a holds the rows already gathered in sorted order
                               // ([max_blocks * BLOCK_M][H], a_map's box 64 x BLOCK_M), one box
                               // a k-tile as gemm2's act (the op's gather1=2: the rows
                               // gathered by moe_gather_rows_kernel, moe/gather_rows.cuh)
};

/// Consumer warpgroups of moe_gemm_ws_kernel: one per 64 rows of BLOCK_M (1 to 3).
KTUNE_MOE_HD constexpr int moe_gemm_ws_consumers(int block_m) { return block_m / 64; }

/// Threads of moe_gemm_ws_kernel: the producer warpgroup and one consumer warpgroup per 64 rows.
KTUNE_MOE_HD constexpr int moe_gemm_ws_threads(int block_m) { return 128 + block_m * 2; }

/// Bytes of one ring slot: the A tile [BLOCK_M][64] and the weight tile [NB * BLOCK_N][64].
KTUNE_MOE_HD constexpr unsigned moe_gemm_ws_stage_bytes(int block_m, int block_n, bool gated) {
  return static_cast<unsigned>((block_m + (gated ? 2 : 1) * block_n) * 128);
}

/// Dynamic shared memory of moe_gemm_ws_kernel: STAGES ring slots, a "full" and an "empty"
/// barrier per slot, and 1024 bytes so that the ring can start on the swizzle atom.
KTUNE_MOE_HD constexpr unsigned moe_gemm_ws_smem_bytes(int block_m, int block_n, int stages,
                                                       bool gated) {
  return static_cast<unsigned>(stages) * moe_gemm_ws_stage_bytes(block_m, block_n, gated) +
         16u * static_cast<unsigned>(stages) + 1024u;
}

/// Its static shared memory (the row table) and accumulators per consumer thread are those of
/// moe_gemm_sm90_kernel: moe_gemm_sm90_static_smem_bytes, moe_gemm_sm90_acc_regs.

/// nullptr when moe_gemm_ws_kernel<T, BLOCK_M, BLOCK_N, STAGES, GATED, GROUP_M, GATHER>
/// compiles; otherwise why not (its static_asserts, in the same words).
KTUNE_MOE_HD constexpr const char* moe_gemm_ws_invalid_reason(int block_m, int block_n,
                                                              int stages, bool gated,
                                                              int group_m = 0, int gather = 0) {
  if (block_m != 64 && block_m != 128 && block_m != 192)
    return "BLOCK_M must be 64, 128 or 192 (one consumer warpgroup per 64 rows)";
  if (block_n != 64 && block_n != 128 && block_n != 256) return "BLOCK_N must be 64, 128 or 256";
  if (block_m == 192 && block_n > 128)
    return "BLOCK_M 192 (512 threads: 128 registers a thread at launch) takes BLOCK_N at most "
           "128 (one wgmma's accumulators and operands need more than 128 registers at 256)";
  if (stages < 2 || stages > 8) return "STAGES must be 2 to 8";
  if (moe_gemm_sm90_acc_regs(block_n, gated) > 128)
    return "more than 128 fp32 accumulators per consumer thread (GATED counts gate and up)";
  if (moe_gemm_ws_smem_bytes(block_m, block_n, stages, gated) +
          moe_gemm_sm90_static_smem_bytes(block_m) >
      227u * 1024u)
    return "shared memory above 227 KiB";
  if (group_m != 0 && group_m != 2 && group_m != 4 && group_m != 8 && group_m != 16 &&
      group_m != 32)
    return "GROUP_M must be 0, 2, 4, 8, 16 or 32";
  if (gather != moe_ws_gather_cp_async && gather != moe_ws_gather_tma &&
      gather != moe_ws_gather_sorted)
    return "GATHER must be 0 (cp.async), 1 (a TMA box per row) or 2 (rows already sorted)";
  return nullptr;
}

}  // namespace ktune
