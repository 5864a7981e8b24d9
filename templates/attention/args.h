// Arguments of the flash attention forward kernels, shared by the kernels (NVRTC, nvcc) and host
// code (g++): no headers, plain types only.
//
// Q is [B, Hq, Nq, D], K and V are [B, Hkv, Nk, D], O is like Q, each addressed through its own
// element strides for batch, head and row (the last dimension is contiguous), so both
// [B, S, H, D] and [B, H, S, D] layouts work. Hq must be a multiple of Hkv (GQA, MQA).
// Variable-length batches (kernels instantiated with VARLEN): q and o are packed [total_q, Hq, D],
// k and v [total_k, Hkv, D] (any head and row strides; batch strides are ignored), sequence i
// owns query rows [cu_seqlens_q[i], cu_seqlens_q[i + 1]) and key rows [cu_seqlens_k[i],
// cu_seqlens_k[i + 1]), and Nq, Nk are the longest lengths (they size the grid).
// Paged K/V (kernels instantiated with PAGE > 0, common/paged_kv.h): k and v are pools
// [num_pages, PAGE, Hkv, D] (k/v row strides Hkv * D, head strides D, batch strides unused),
// sequence b's key j lives in page block_table[b * pages_per_seq + j / PAGE], and sequence b has
// seq_lens[b] keys (clamped to [0, Nk]; Nk is the longest), every rule below aligned to that
// length. Q and O stay [B, Hq, Nq, D], or with VARLEN packed (cu_seqlens_q; cu_seqlens_k is then
// unused: the lengths come from seq_lens).
#pragma once

// Named from templates/ in kernels (NVRTC's embedded names), from the repository root in host
// code.
#if defined(__CUDACC__)
#include "common/paged_kv.h"
#else
#include "templates/common/paged_kv.h"
#endif

#if defined(__CUDACC__)
#define KTUNE_ATTN_HD __host__ __device__
#else
#define KTUNE_ATTN_HD
#endif

namespace ktune {

struct FlashAttentionArgs {
  const void* q;                 // [B, Hq, Nq, D] elements of the kernel's dtype
  const void* k;                 // [B, Hkv, Nk, D]
  const void* v;                 // [B, Hkv, Nk, D]
  void* o;                       // [B, Hq, Nq, D], same dtype as q
  float* lse;                    // [B, Hq, Nq] contiguous (VARLEN: [Hq, total_q]), natural
                                 // log; nullptr: not written
  long long q_batch_stride;      // element strides; row starts 16-byte aligned, row strides
                                 // below 2^23 (a tile's offsets are 32-bit)
  long long q_head_stride;
  long long q_row_stride;
  long long k_batch_stride;
  long long k_head_stride;
  long long k_row_stride;
  long long v_batch_stride;
  long long v_head_stride;
  long long v_row_stride;
  long long o_batch_stride;
  long long o_head_stride;
  long long o_row_stride;
  int batch;                     // B
  int heads_q;                   // Hq
  int heads_kv;                  // Hkv, divides Hq
  int seq_q;                     // Nq >= 1
  int seq_k;                     // Nk >= 1
  float scale;                   // softmax scale (> 0), usually 1/sqrt(D)
  // Mask variants; each is read only by kernels instantiated with its flag (WINDOW, SOFTCAP,
  // ALIBI), so configurations without them ignore these fields.
  int window;                    // > 0: query row i sees keys j > i + Nk - Nq - window
  float softcap;                 // > 0: scores become softcap * tanh(score / softcap)
  const float* alibi_slopes;     // [Hq] fp32: score -= slope[h] * |j - (i + Nk - Nq)|
  // Read only by VARLEN kernels; there Nq and Nk in the rules above are each sequence's own.
  const int* cu_seqlens_q;       // [B + 1] int32 row offsets: 0, non-decreasing, total_q last
  const int* cu_seqlens_k;       // [B + 1] int32 row offsets of k and v
  // e4m3 inputs only (flash_attention_sm90 with T = e4m3, its reference): O is multiplied by it,
  // V's dequantisation scale (Q's and K's are folded into scale by the host).
  float o_scale;
  // Read only by PAGE > 0 kernels (file comment).
  const int* block_table;        // [B, pages_per_seq] int32 page ids into the pools
  const int* seq_lens;           // [B] int32 keys per sequence
  int page;                      // keys per page (the kernel's PAGE)
  int pages_per_seq;             // a block table row: ceil(Nk / page)
};

/// Dynamic shared memory of flash_attention_fwd: the Q tile plus STAGES K and V tiles, 16-bit
/// elements, rows padded by 16 bytes with SMEM_PAD; paged (page > 0), two slots of the page ids
/// of the next tile to load after them. Above 48 KiB the launcher must raise the kernel's
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first.
KTUNE_ATTN_HD constexpr unsigned flash_attention_smem_bytes(int d, int block_m, int block_n,
                                                            int stages, bool pad = false,
                                                            int page = 0) {
  return static_cast<unsigned>((2 * d + (pad ? 16 : 0)) * (block_m + 2 * block_n * stages)) +
         static_cast<unsigned>(page > 0 ? 2 * 4 * paged_kv_slots(block_n, page) : 0);
}

/// Grid of flash_attention_fwd: x = query blocks, y = batch * query heads (at most 65535).
KTUNE_ATTN_HD constexpr unsigned flash_attention_grid_x(int seq_q, int block_m) {
  return static_cast<unsigned>((seq_q + block_m - 1) / block_m);
}

/// nullptr when flash_attention_fwd<T, D, BLOCK_M, BLOCK_N, WARPS, STAGES, CAUSAL, Q_IN_REGS,
/// MIN_CTAS, SMEM_PAD, WINDOW, SOFTCAP, ALIBI, VARLEN> compiles (the mask variants and VARLEN never
/// matter here);
/// otherwise why not (the kernel's static_asserts).
/// Whether it also fits in registers without spilling only ptxas tells.
KTUNE_ATTN_HD constexpr const char* flash_attention_invalid_reason(int d, int block_m, int block_n,
                                                                   int warps, int stages,
                                                                   int min_ctas = 1,
                                                                   bool pad = false) {
  if (d != 32 && d != 64 && d != 96 && d != 128 && d != 256)
    return "D must be 32, 64, 96, 128 or 256";
  if (block_m != 64 && block_m != 128 && block_m != 256) return "BLOCK_M must be 64, 128 or 256";
  if (block_n != 32 && block_n != 64 && block_n != 128) return "BLOCK_N must be 32, 64 or 128";
  if (warps != 4 && warps != 8) return "WARPS must be 4 or 8";
  if (block_m % (16 * warps) != 0) return "BLOCK_M must be a multiple of 16 * WARPS";
  if (block_m / (16 * warps) > 2) return "at most two 16-row fragments per warp";
  if (stages < 2 || stages > 4) return "STAGES must be 2, 3 or 4";
  if (min_ctas < 1 || min_ctas * warps > 64) return "MIN_CTAS must be >= 1, MIN_CTAS * WARPS <= 64";
  if (flash_attention_smem_bytes(d, block_m, block_n, stages, pad) > 227u * 1024u)
    return "shared memory above 227 KiB";
  return nullptr;
}

}  // namespace ktune
