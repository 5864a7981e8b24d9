// Launch geometry and validity of moe_gemm_sm90_kernel (moe/gemm_sm90.cuh), shared by the kernel
// (NVRTC, nvcc) and host code (g++): no headers, plain constexpr functions, as gemm_args.h. The
// kernel static_asserts the same conditions; an op selecting the kernel would report these
// strings as the reasons of invalid points.
#pragma once

#ifndef KTUNE_MOE_HD
#if defined(__CUDACC__)
#define KTUNE_MOE_HD __host__ __device__
#else
#define KTUNE_MOE_HD
#endif
#endif

namespace ktune {

/// Threads of moe_gemm_sm90_kernel: one warpgroup (128 threads) per 64 rows of BLOCK_M.
KTUNE_MOE_HD constexpr int moe_gemm_sm90_threads(int block_m) { return block_m / 64 * 128; }

/// Dynamic shared memory of moe_gemm_sm90_kernel: STAGES ring slots of an A tile
/// [BLOCK_M, BLOCK_K] and a B tile [BLOCK_N, BLOCK_K] (two for GATED), 16-bit elements in the
/// 128-byte swizzle, plus 1024 bytes so that the kernel can start the ring on a 1024-byte
/// boundary (wgmma's swizzle atom) whatever the static shared memory before it. Above 48 KiB the
/// launcher must raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first.
KTUNE_MOE_HD constexpr unsigned moe_gemm_sm90_smem_bytes(int block_m, int block_n, int block_k,
                                                         int stages, bool gated) {
  return static_cast<unsigned>(stages * (block_m + (gated ? 2 : 1) * block_n) * block_k * 2 +
                               1024);
}

/// Static shared memory of moe_gemm_sm90_kernel: the row table (block_m * 12 + 4 bytes, as
/// moe_gemm_static_smem_bytes), rounded up to 1024 by the 1024-byte alignment of the dynamic
/// area, as ptxas reports it.
KTUNE_MOE_HD constexpr unsigned moe_gemm_sm90_static_smem_bytes(int block_m) {
  return static_cast<unsigned>((block_m * 12 + 4 + 1023) / 1024 * 1024);
}

/// fp32 accumulators per thread: each warpgroup holds m64 x BLOCK_N (twice for GATED).
KTUNE_MOE_HD constexpr int moe_gemm_sm90_acc_regs(int block_n, bool gated) {
  return (gated ? 2 : 1) * block_n / 2;
}

/// nullptr when moe_gemm_sm90_kernel<T, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED, GROUP_M>
/// compiles; otherwise why not. Static shared memory (moe_gemm_sm90_static_smem_bytes) counts
/// against the 227 KiB a block may use.
KTUNE_MOE_HD constexpr const char* moe_gemm_sm90_invalid_reason(int block_m, int block_n,
                                                                int block_k, int stages,
                                                                bool gated, int group_m = 0) {
  if (block_m != 64 && block_m != 128) return "BLOCK_M must be 64 or 128";
  if (block_n != 64 && block_n != 128 && block_n != 256) return "BLOCK_N must be 64, 128 or 256";
  if (block_k != 64) return "BLOCK_K must be 64 (one 128-byte swizzled row)";
  if (stages < 2 || stages > 6) return "STAGES must be 2 to 6";
  if (moe_gemm_sm90_acc_regs(block_n, gated) > 128)
    return "more than 128 fp32 accumulators per thread (GATED counts gate and up)";
  if (moe_gemm_sm90_smem_bytes(block_m, block_n, block_k, stages, gated) +
          moe_gemm_sm90_static_smem_bytes(block_m) >
      227u * 1024u)
    return "shared memory above 227 KiB";
  if (group_m != 0 && group_m != 2 && group_m != 4 && group_m != 8 && group_m != 16 &&
      group_m != 32)
    return "GROUP_M must be 0, 2, 4, 8, 16 or 32";
  return nullptr;
}

}  // namespace ktune
