// Launch geometry and validity of the MoE grouped GEMMs and the combine, shared by the kernels
// (NVRTC, nvcc) and host code (g++): no headers, so that it resolves from any include root;
// plain constexpr functions. The kernels static_assert the same conditions; the op description
// reports these strings as the reasons of invalid points.
#pragma once

#ifndef KTUNE_MOE_HD
#if defined(__CUDACC__)
#define KTUNE_MOE_HD __host__ __device__
#else
#define KTUNE_MOE_HD
#endif
#endif

namespace ktune {

/// Dynamic shared memory of moe_gemm_kernel: STAGES ring slots of an A tile [BLOCK_M, BLOCK_K]
/// and a B tile [BLOCK_N, BLOCK_K] (two for GATED: gate and up rows), elements of `eb` bytes
/// (2: bf16/fp16, 1: e4m3), rows of BLOCK_K * eb bytes (XOR-swizzled, no padding). Above 48 KiB
/// the launcher must raise the kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first.
KTUNE_MOE_HD constexpr unsigned moe_gemm_smem_bytes(int block_m, int block_n, int block_k,
                                                    int stages, bool gated, int eb = 2) {
  return static_cast<unsigned>(stages * (block_m + (gated ? 2 : 1) * block_n) * block_k * eb);
}

/// Bytes of the staged output tile of moe_gemm_kernel's EPI=1 epilogue (rows of block_n + 8
/// 16-bit elements), which reuses the ring: it must not exceed moe_gemm_smem_bytes(...).
KTUNE_MOE_HD constexpr unsigned moe_gemm_epi_smem_bytes(int block_m, int block_n) {
  return static_cast<unsigned>(block_m * (block_n + 8) * 2);
}

/// Static shared memory of moe_gemm_kernel: per row of the block its source row, its
/// destination row and its routing weight (e4m3: and its dequantisation scale), plus the
/// block's live-row count, rounded up to the 128-byte alignment of the dynamic area that follows
/// (what ptxas reports for gemm2; gemm1 drops the unused weights, so for it this is an upper
/// bound).
KTUNE_MOE_HD constexpr unsigned moe_gemm_static_smem_bytes(int block_m, int eb = 2) {
  return static_cast<unsigned>((block_m * (eb == 1 ? 16 : 12) + 4 + 127) / 128 * 128);
}

/// fp32 accumulator registers per thread: (GATED ? 2 : 1) * BLOCK_M * BLOCK_N / threads.
KTUNE_MOE_HD constexpr int moe_gemm_acc_regs(int block_m, int block_n, int warps, bool gated) {
  return (gated ? 2 : 1) * block_m * block_n / (warps * 32);
}

/// Registers per thread that __launch_bounds__(warps * 32, min_ctas) leaves (the register file
/// holds 64 Ki 32-bit registers per SM; at most 255 per thread).
KTUNE_MOE_HD constexpr int moe_gemm_regs_per_thread(int warps, int min_ctas) {
  return 65536 / (min_ctas * warps * 32) < 255 ? 65536 / (min_ctas * warps * 32) : 255;
}

/// nullptr when moe_gemm_kernel<T, BLOCK_M, BLOCK_N, BLOCK_K, WARPS, WARPS_M, STAGES, GATED,
/// GROUP_M, W_PREFETCH, MIN_CTAS, EPI> compiles; otherwise why not (the kernel's static_asserts).
/// Whether it also fits in registers without spilling only ptxas tells. group_m, w_prefetch,
/// min_ctas and epi default to the kernel's defaults (launch order, no L2 prefetch, no register
/// cap, stores from the fragments); eb is T's size (1: e4m3).
KTUNE_MOE_HD constexpr const char* moe_gemm_invalid_reason(int block_m, int block_n, int block_k,
                                                           int warps, int warps_m, int stages,
                                                           bool gated, int group_m = 0,
                                                           int w_prefetch = 0,
                                                           int min_ctas = 1, int epi = 0,
                                                           int eb = 2) {
  if (block_m != 16 && block_m != 32 && block_m != 64 && block_m != 128 && block_m != 256)
    return "BLOCK_M must be 16, 32, 64, 128 or 256";
  if (block_n != 16 && block_n != 32 && block_n != 64 && block_n != 128 && block_n != 256)
    return "BLOCK_N must be 16, 32, 64, 128 or 256";
  if (block_k != 32 && block_k != 64 && block_k != 128 && block_k != 256)
    return "BLOCK_K must be 32, 64, 128 or 256";
  if (eb == 1 && block_k < 64)
    return "e4m3 tiles take BLOCK_K 64, 128 or 256 (rows of at least 64 bytes)";
  if (warps != 1 && warps != 2 && warps != 4 && warps != 8) return "WARPS must be 1, 2, 4 or 8";
  if (warps_m < 1 || warps % warps_m != 0) return "WARPS_M must divide WARPS";
  if (block_m % (16 * warps_m) != 0) return "BLOCK_M must be a multiple of 16 * WARPS_M";
  if (block_n % (16 * (warps / warps_m)) != 0)
    return "BLOCK_N must be a multiple of 16 * (WARPS / WARPS_M)";
  if (stages < 2 || stages > 6) return "STAGES must be 2 to 6";
  if (moe_gemm_acc_regs(block_m, block_n, warps, gated) > 128)
    return "more than 128 fp32 accumulators per thread (GATED counts gate and up)";
  if (moe_gemm_smem_bytes(block_m, block_n, block_k, stages, gated, eb) +
          moe_gemm_static_smem_bytes(block_m, eb) >
      227u * 1024u)
    return "shared memory above 227 KiB";
  if (group_m != 0 && group_m != 2 && group_m != 4 && group_m != 8 && group_m != 16 &&
      group_m != 32)
    return "GROUP_M must be 0, 2, 4, 8, 16 or 32";
  if (w_prefetch != 0 && w_prefetch != 128 && w_prefetch != 256)
    return "W_PREFETCH must be 0, 128 or 256";
  if (min_ctas < 1 || min_ctas > 4) return "MIN_CTAS must be 1 to 4";
  if (moe_gemm_regs_per_thread(warps, min_ctas) <
      moe_gemm_acc_regs(block_m, block_n, warps, gated) + 32)
    return "MIN_CTAS leaves fewer registers per thread than the accumulators plus 32";
  if (epi != 0 && epi != 1) return "EPI must be 0 or 1";
  if (epi == 1 && moe_gemm_epi_smem_bytes(block_m, block_n) >
                      moe_gemm_smem_bytes(block_m, block_n, block_k, stages, gated, eb))
    return "EPI=1: the ring must hold the BLOCK_M x (BLOCK_N + 8) output tile";
  return nullptr;
}

/// nullptr when the layer's sizes suit the GEMMs (any tile): every row of x, w1, act and w2
/// starts 16-byte aligned and tiles are cut at whole 16-byte chunks (8 elements of 16 bits, 16
/// of e4m3: eb = 1).
KTUNE_MOE_HD constexpr const char* moe_gemm_shape_invalid_reason(long long hidden,
                                                                 long long inter, int eb = 2) {
  if (eb == 1 && (hidden < 16 || hidden % 16 != 0))
    return "H must be a positive multiple of 16 (e4m3)";
  if (eb == 1 && (inter < 16 || inter % 16 != 0))
    return "I must be a positive multiple of 16 (e4m3)";
  if (hidden < 8 || hidden % 8 != 0) return "H must be a positive multiple of 8";
  if (inter < 8 || inter % 8 != 0) return "I must be a positive multiple of 8";
  return nullptr;
}

/// Grid of moe_gemm_kernel: x = max_blocks (moe_max_blocks(...)), y = this many column blocks
/// (n = I for gemm1, where each block covers BLOCK_N gate and BLOCK_N up columns; n = H for
/// gemm2).
KTUNE_MOE_HD constexpr unsigned moe_gemm_grid_y(int n, int block_n) {
  return static_cast<unsigned>((n + block_n - 1) / block_n);
}

/// nullptr when moe_combine_kernel<T, THREADS, VEC> compiles for rows of `hidden` elements.
KTUNE_MOE_HD constexpr const char* moe_combine_invalid_reason(int threads, int vec,
                                                              long long hidden) {
  if (threads != 64 && threads != 128 && threads != 256 && threads != 512)
    return "THREADS must be 64, 128, 256 or 512";
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) return "VEC must be 1, 2, 4 or 8";
  if (hidden % vec != 0) return "H must be a multiple of VEC";
  return nullptr;
}

/// Grid of moe_combine_kernel: x = tokens, y = column blocks of THREADS * VEC elements.
KTUNE_MOE_HD constexpr unsigned moe_combine_grid_y(long long hidden, int threads, int vec) {
  return static_cast<unsigned>((hidden + static_cast<long long>(threads) * vec - 1) /
                               (static_cast<long long>(threads) * vec));
}

}  // namespace ktune
