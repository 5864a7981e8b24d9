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
  tma::TensorMap q_map;  // box 64 x 64 rows (e4m3: 128 x 64)
  tma::TensorMap k_map;  // box 64 x BLOCK_N rows (e4m3: 128 x BLOCK_N)
  tma::TensorMap v_map;  // box 64 x BLOCK_N rows; e4m3: over Vt [B, Hkv, D, nk_pad], BLOCK_N x D
  FlashAttentionArgs base;  // e4m3: base.o_scale multiplies O
};

/// The key (0..31) of a 32-key slice that column c of an e4m3 A fragment holds when P is rounded
/// in place from the accumulators of S (flash_attention_sm90.cuh): Vt stores key
/// fp8_key_of_column(c) of each slice at column c.
KTUNE_ATTN90_HD constexpr int fp8_key_of_column(int c) {
  return (c & 16) + 2 * ((c & 15) >> 2) + ((c & 3) < 2 ? (c & 3) : 8 + (c & 3) - 2);
}

/// fp8_v_transpose (fp8_transpose.cuh): V [B, Hkv, Nk, D] e4m3 with element strides (16-byte
/// rows) -> Vt [B, Hkv, D, nk_pad], keys in fp8_key_of_column order per 32-key slice, zeros past
/// Nk. Grid (nk_pad / 128, Hkv, B), kFp8TransposeThreads threads.
struct Fp8VTransposeArgs {
  const void* v;
  void* vt;
  long long v_row_stride, v_head_stride, v_batch_stride;  // elements (= bytes)
  int batch, heads_kv, seq_k, nk_pad;  // D is the kernel's template argument
};
constexpr int kFp8TransposeThreads = 256;
constexpr int kFp8TransposeKeys = 128;  // keys per block, the kernel's BLOCK_N

/// Keys of Vt's rows: Nk rounded up to whole 128-key tiles.
KTUNE_ATTN90_HD constexpr long long fp8_vt_keys(long long seq_k) {
  return (seq_k + kFp8TransposeKeys - 1) / kFp8TransposeKeys * kFp8TransposeKeys;
}

/// Query rows one consumer warpgroup owns (one m64 wgmma tile).
constexpr int kSm90RowsPerConsumer = 64;

/// The columns flash_attention_sm90's shared tiles hold per row: d rounded up to whole 128-byte
/// column blocks (d = 96: 128, the last 32 columns zeros from the TMA box past the tensor's d
/// that the products never read).
KTUNE_ATTN90_HD constexpr int flash_attention_sm90_tile_cols(int d, int elem_bytes = 2) {
  return (d * elem_bytes + 127) / 128 * 128 / elem_bytes;
}

/// Dynamic shared memory of flash_attention_sm90: each consumer's Q tile, STAGES K and V tiles,
/// the barriers (Q full and empty, per stage K full, V full, empty, and with kv_apart V empty),
/// and 1024 bytes of slack to align the swizzled tiles to 1024 bytes.
KTUNE_ATTN90_HD constexpr unsigned flash_attention_sm90_smem_bytes(int d, int block_n,
                                                                   int consumers, int stages,
                                                                   int elem_bytes = 2,
                                                                   bool kv_apart = false) {
  return static_cast<unsigned>(elem_bytes * flash_attention_sm90_tile_cols(d, elem_bytes) *
                                   (kSm90RowsPerConsumer * consumers + 2 * block_n * stages) +
                               8 * (2 + (kv_apart ? 4 : 3) * stages) + 1024);
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
                                                                          int stages,
                                                                          int elem_bytes = 2) {
  if (d != 64 && d != 96 && d != 128 && d != 256)
    return "the wgmma kernel takes D = 64, 96, 128 or 256";
  if (elem_bytes == 1 && (d == 64 || d == 96))
    return "e4m3 takes D = 128 or 256 (its rows fill whole 128-byte swizzled column blocks)";
  if (elem_bytes == 1 && block_n != 128)
    return "e4m3 takes BLOCK_N = 128 (a Vt tile row is BLOCK_N bytes, the 128-byte swizzle's)";
  if (block_n != 64 && block_n != 80 && block_n != 128)
    return "the wgmma kernel takes BLOCK_N = 64, 80 or 128";
  if (consumers < 1 || consumers > 3) return "1 to 3 consumer warpgroups";
  if (stages < 2 || stages > 6) return "STAGES must be 2 to 6";
  if (d == 256 && consumers == 3)
    return "D = 256 with 3 consumer warpgroups: O alone takes 128 of their 160 registers";
  if (flash_attention_sm90_smem_bytes(d, block_n, consumers, stages, elem_bytes) > 227u * 1024u)
    return "shared memory above 227 KiB";
  return nullptr;
}

}  // namespace ktune
