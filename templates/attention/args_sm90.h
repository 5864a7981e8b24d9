// Arguments of the Hopper flash attention forward (flash_attention_sm90.cuh), shared by the kernel
// (NVRTC) and host code (g++): FlashAttentionArgs plus the tensor maps through which the copy
// engine reads Q, K and V. No headers beyond the two plain ones below, named from templates/ in
// kernels (NVRTC's embedded names) and from the repository root in host code.
//
// Each map is 4-D over a [B, H, S, D] tensor with the args' element strides (innermost first:
// d, row, head, batch) and a box of 64 columns (128 bytes, the 128-byte swizzle's row) by the
// kernel's tile rows (64 for Q, BLOCK_N for K and V) of one head of one batch.
#pragma once

#if defined(__CUDACC__)
#include "attention/args.h"
#include "common/tma.cuh"
#else
#include "templates/attention/args.h"
#include "templates/common/tma.cuh"
#endif

#if defined(__CUDACC__)
#define KTUNE_ATTN90_HD __host__ __device__
#else
#define KTUNE_ATTN90_HD
#endif

namespace ktune {

struct FlashAttentionSm90Args {
  tma::TensorMap q_map;  // box 64 x 64 rows
  tma::TensorMap k_map;  // box 64 x BLOCK_N rows
  tma::TensorMap v_map;  // box 64 x BLOCK_N rows
  FlashAttentionArgs base;
};

/// Query rows one consumer warpgroup owns (one m64 wgmma tile).
constexpr int kSm90RowsPerConsumer = 64;

/// Dynamic shared memory of flash_attention_sm90: each consumer's Q tile, STAGES K and V tiles,
/// the barriers (Q full and empty, per stage K full, V full, empty), and 1024 bytes of slack to
/// align the swizzled tiles to 1024 bytes.
KTUNE_ATTN90_HD constexpr unsigned flash_attention_sm90_smem_bytes(int d, int block_n,
                                                                   int consumers, int stages) {
  return static_cast<unsigned>(2 * d * (kSm90RowsPerConsumer * consumers + 2 * block_n * stages) +
                               8 * (2 + 3 * stages) + 1024);
}

/// Query tiles of flash_attention_sm90 over all (batch, head) pairs: the work items a persistent
/// grid loops over.
KTUNE_ATTN90_HD constexpr long long flash_attention_sm90_work(int seq_q, int block_m,
                                                             long long batch_heads) {
  return static_cast<long long>((seq_q + block_m - 1) / block_m) * batch_heads;
}

/// nullptr when flash_attention_sm90<T, D, BLOCK_N, CONSUMERS, STAGES, ...> instantiates;
/// otherwise why not (its static_asserts).
KTUNE_ATTN90_HD constexpr const char* flash_attention_sm90_invalid_reason(int d, int block_n,
                                                                          int consumers,
                                                                          int stages) {
  if (d != 64 && d != 128 && d != 256) return "the wgmma kernel takes D = 64, 128 or 256";
  if (block_n != 64 && block_n != 128) return "the wgmma kernel takes BLOCK_N = 64 or 128";
  if (consumers < 1 || consumers > 3) return "1 to 3 consumer warpgroups";
  if (stages < 2 || stages > 4) return "STAGES must be 2, 3 or 4";
  if (d == 256 && consumers == 3)
    return "D = 256 with 3 consumer warpgroups: O alone takes 128 of their 160 registers";
  if (flash_attention_sm90_smem_bytes(d, block_n, consumers, stages) > 227u * 1024u)
    return "shared memory above 227 KiB";
  return nullptr;
}

}  // namespace ktune
