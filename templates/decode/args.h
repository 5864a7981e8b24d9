// Arguments and geometry of the split-KV ("flash decoding") attention kernels, shared by the
// kernels (NVRTC, nvcc) and host code (g++): no headers, plain types only.
//
// Tensors as flash_attention's: Q [B, Hq, Nq, D], K and V [B, Hkv, Nk, D], O like Q, each through
// element strides for batch, head and row (last dimension contiguous). The g = Hq / Hkv query
// heads that share a key/value head are packed with the query rows into the M dimension of one
// tile: packed row r of KV head kh is query row r / g of query head kh * g + r % g, so every K/V
// byte is read once per KV head and split, and causal limits (and sliding-window starts) grow
// with r. A packed row's ALiBi slope is its query head's.
//
// Paged KV cache (PAGE > 0): K and V are pools [num_pages, PAGE, Hkv, D] (vLLM's NHD layout,
// contiguous), sequence b's key j lives in page block_table[b * pages_per_seq + j / PAGE], row
// j % PAGE, and sequence b has seq_lens[b] keys (causal alignment bottom-right against its own
// length). The k/v strides then hold the pool's (row Hkv * D, head D, batch 0).
//
// Variable-length batches (split kernels instantiated with VARLEN; the combine follows
// cu_seqlens_q when it is set): q and o are packed [total_q, Hq, D], k and v [total_k, Hkv, D]
// (head and row strides; batch strides unused), sequence b owns query rows [cu_seqlens_q[b],
// cu_seqlens_q[b + 1]) and key rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]), lengths clamped to
// [0, Nq] and [0, Nk] (the longest, which size the grid and the workspace), lse is [Hq, total_q],
// and every alignment rule uses the sequence's own lengths, as flash_attention's VARLEN does.
// Not combined with PAGE (the op refuses the problem).
#pragma once

// Named from templates/ in kernels (NVRTC's embedded names), from the repository root in host
// code.
#if defined(__CUDACC__)
#include "common/paged_kv.h"
#include "common/tma.cuh"
#else
#include "templates/common/paged_kv.h"
#include "templates/common/tma.cuh"
#endif

#if defined(__CUDACC__)
#define KTUNE_DECODE_HD __host__ __device__
#else
#define KTUNE_DECODE_HD
#endif

namespace ktune {

struct FlashDecodeArgs {
  const void* q;                 // [B, Hq, Nq, D] elements of the kernel's dtype
  const void* k;                 // [B, Hkv, Nk, D]
  const void* v;                 // [B, Hkv, Nk, D]
  void* o;                       // [B, Hq, Nq, D], same dtype as q
  float* lse;                    // [B, Hq, Nq] contiguous, natural log; nullptr: not written
  float* part_o;                 // workspace: [splits, B, Hq, Nq, D] fp32 partial O (normalised
                                 // by the split's own sum); unused when splits == 1
  float* part_lse;               // workspace: [splits, B, Hq, Nq] the split's log-sum-exp
  long long q_batch_stride;      // element strides; rows start 16-byte aligned
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
  int group;                     // Hq / Hkv
  int splits;                    // CTAs along the key axis (grid y); 1: o and lse written directly
  int tiles_per_split;           // key tiles (BLOCK_N keys each) per split
  float scale;                   // softmax scale (> 0)
  const int* block_table;        // paged: [B, pages_per_seq] page ids into the pools; else null
  const int* seq_lens;           // paged: [B] keys per sequence, 1..Nk (clamped to [0, Nk]); else
                                 // null (every sequence has Nk keys)
  int page;                      // keys per page (16..256, a power of 2); 0: contiguous K/V
  int pages_per_seq;             // ceil(Nk / page): a block table row
  int split_keys;                // tiles_per_split * BLOCK_N: keys per split (for the combine)
  // Mask variants, as flash_attention's; each is read only by kernels instantiated with its flag
  // (WINDOW, SOFTCAP, ALIBI). With i' = i + len - Nq the aligned position of query row i (len:
  // Nk, or paged the sequence's own length):
  int window;                    // > 0: query row i sees keys j > i' - window
  float softcap;                 // > 0: scores become softcap * tanh(score / softcap)
  const float* alibi_slopes;     // [Hq] fp32: score -= slope[h] * |j - i'|
  // Variable-length batches: read by VARLEN split kernels, and by the combine whenever
  // cu_seqlens_q is set (it is then the only sign of a packed batch the combine gets).
  const int* cu_seqlens_q;       // [B + 1] int32 row offsets of q and o; else null
  const int* cu_seqlens_k;       // [B + 1] int32 row offsets of k and v; else null
};

/// The split kernels instantiated with TMA (sm_90; contiguous K/V, not varlen, d = 64, 128 or
/// 256's tiles) take these: the base's arguments plus tensor maps of K and V as 4-D tensors
/// (columns, keys, KV heads, batch; the data's head dim of columns), boxes of 64 columns by
/// BLOCK_N keys in the 128-byte swizzle. The combine keeps reading the base.
struct FlashDecodeTmaArgs : FlashDecodeArgs {
  tma::TensorMap k_map;
  tma::TensorMap v_map;
};

/// A sequence's key count as the kernels use it: seq_lens[b] (or VARLEN a difference of
/// offsets) clamped to [0, Nk]; VARLEN query counts likewise to [0, Nq].
KTUNE_DECODE_HD constexpr int flash_decode_seq_len(int len, int seq_k) {
  return len < 0 ? 0 : (len > seq_k ? seq_k : len);
}

/// Splits holding keys of a sequence of `len` keys (split 0 always counts: it writes the zero
/// output of an empty sequence); the split kernel's CTAs past them exit at once and the combine
/// reads only these.
KTUNE_DECODE_HD constexpr int flash_decode_splits_used(int len, int split_keys, int splits) {
  return len <= split_keys ? 1
                           : ((len + split_keys - 1) / split_keys < splits
                                  ? (len + split_keys - 1) / split_keys
                                  : splits);
}

/// Packed rows (query heads of a group x query rows) per KV head.
KTUNE_DECODE_HD constexpr long long flash_decode_rows(long long group, long long seq_q) {
  return group * seq_q;
}

/// Key tiles of BLOCK_N keys covering Nk.
KTUNE_DECODE_HD constexpr long long flash_decode_tiles(long long seq_k, int block_n) {
  return (seq_k + block_n - 1) / block_n;
}

/// Key tiles per split: split s covers tiles [s * per, min(tiles, (s + 1) * per)).
KTUNE_DECODE_HD constexpr long long flash_decode_tiles_per_split(long long seq_k, int block_n,
                                                                 int splits) {
  return (flash_decode_tiles(seq_k, block_n) + splits - 1) / splits;
}

/// Splits that receive at least one key tile; fewer than `splits` means some would be empty.
KTUNE_DECODE_HD constexpr long long flash_decode_used_splits(long long seq_k, int block_n,
                                                             int splits) {
  return (flash_decode_tiles(seq_k, block_n) +
          flash_decode_tiles_per_split(seq_k, block_n, splits) - 1) /
         flash_decode_tiles_per_split(seq_k, block_n, splits);
}

/// Keys a packed row sees: all Nk, or for causal (bottom-right aligned) query row i sees keys
/// j <= i + Nk - Nq; may be <= 0 (the row sees none).
KTUNE_DECODE_HD constexpr long long flash_decode_row_limit(long long packed_row, long long group,
                                                           long long seq_q, long long seq_k,
                                                           bool causal) {
  return !causal ? seq_k
                 : (packed_row / group + seq_k - seq_q + 1 < seq_k
                        ? packed_row / group + seq_k - seq_q + 1
                        : seq_k);
}

/// First key a packed row sees with a sliding window of `window` keys: query row i sees keys
/// j > i + Nk - Nq - window (bottom-right aligned, as causal); may be <= 0 (from key 0). It never
/// decreases with the packed row, so a tile's first row bounds every row's window.
KTUNE_DECODE_HD constexpr long long flash_decode_row_first(long long packed_row, long long group,
                                                           long long seq_q, long long seq_k,
                                                           long long window) {
  return packed_row / group + seq_k - seq_q - window + 1;
}

/// Contiguous K/V with a sliding window of `window` keys (> 0): the first key tile any row of
/// the sequence sees (query row 0's window start, rounded down to a tile). The splits divide the
/// tiles from there rather than from key 0, so that a window much shorter than the cache keeps
/// every split busy instead of a few; 0 without a window. Paged and varlen sequences have their
/// own lengths, which the host cannot see: there the splits start at key 0.
KTUNE_DECODE_HD constexpr long long flash_decode_window_base(long long seq_q, long long seq_k,
                                                             long long window, int block_n) {
  return window <= 0 || seq_k - seq_q - window + 1 <= 0
             ? 0
             : (seq_k - seq_q - window + 1) / block_n;
}

/// Bytes per shared-memory row of 16-bit elements: D * 2 plus 16 bytes of padding, so that the 8
/// rows of an ldmatrix phase fall in 8 distinct bank groups.
KTUNE_DECODE_HD constexpr int flash_decode_pitch(int d) { return 2 * d + 16; }

/// K/V tiles of d = 64, 128 and 256 (rows of 8, 16 or 32 16-byte chunks) are stored unpadded,
/// chunk c of row r at chunk c ^ (r & 7): the 8 rows of an ldmatrix phase still hit 8 distinct
/// bank groups, and a warp's copies of whole rows fill aligned 128-byte lines. With the padded
/// pitch those copies straddled shared-memory wavefronts and each extra wavefront asked L2 for
/// its sectors again (ncu, H100: 1.5x the L2 sectors of the K/V bytes, hit rate 34 %). d=32's
/// 64-byte rows take flash_decode_row64_offset's swizzle instead (two rows a line). d=96 (12
/// chunks) keeps the padded rows, or kv_split's two parts (flash_decode_split96_offset), and
/// so do two tiles whose kernels sit at 255 registers, where ptxas spilled more with the
/// swizzled addressing than with the padded (`ktune space --compile`, sm_90a and sm_80,
/// 2026-12-04): d=128 at 64 keys per warp (`keys_per_warp`, BLOCK_N / WARPS) in the
/// variable-length kernels (20-32 bytes on sm_90a, 100 on sm_80, against none), and d=256 at
/// 32 keys per warp (96-160 bytes padded, 244-304 swizzled; paged 0 against 168). Elsewhere no
/// point of d = 64, 128 or 256 spills with the swizzle where it did not without (d=256: 16
/// keys per warp spilled 16-36 bytes padded, none swizzled); with window, softcap and ALiBi at
/// once in the varlen kernels, d=128's points spilling 12-20 bytes went from 34 to 8 on sm_90a
/// and from 8 to 25 on sm_80.
KTUNE_DECODE_HD constexpr bool flash_decode_kv_swizzled(int d, bool varlen = false,
                                                        int keys_per_warp = 0) {
  return d == 32 || d == 64 || (d == 128 && !(varlen && keys_per_warp >= 64)) ||
         (d == 256 && keys_per_warp < 32);
}
/// Bytes per K/V row in shared memory: 2 * d unpadded (swizzled, or split at d=96), else padded.
KTUNE_DECODE_HD constexpr int flash_decode_kv_pitch(int d, bool varlen = false,
                                                    bool split = false, int keys_per_warp = 0) {
  return split || flash_decode_kv_swizzled(d, varlen, keys_per_warp) ? 2 * d
                                                                     : flash_decode_pitch(d);
}

/// A tile of 64-byte rows (4 chunks): chunk c of row r at c ^ ((r >> 1) & 3), two rows a
/// 128-byte line. The 8 consecutive rows of an ldmatrix phase meet 8 distinct bank groups
/// (rows 2i and 2i + 1 share a line, in its two halves), and a warp's copies of 8 rows fill 4
/// whole lines. d=32's tiles (flash_decode_kv_swizzled) and d=96's second part (below).
KTUNE_DECODE_HD constexpr unsigned flash_decode_row64_offset(int row, int chunk) {
  return static_cast<unsigned>(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

/// d=96's K/V tiles split in two (kv_split=1): a row's 12 chunks do not fill whole 128-byte
/// lines, so its padded rows (flash_decode_pitch) make a warp's copies straddle shared-memory
/// wavefronts, and each extra wavefront asks L2 for its sectors again (ncu, H200, d=80 in d=96's
/// tiles: L2 hit rate 36 % and 81 % memory busy against d=128's swizzled 1 % and 64 %). Split,
/// chunks 0-7 of every row form a first part of 128-byte rows (chunk c of row r at c ^ (r & 7),
/// as d=64's tiles) and chunks 8-11 a second part of 64-byte rows after it (chunk 8 + c at
/// c ^ ((r >> 1) & 3)): every 8 consecutive rows of an ldmatrix phase meet 8 distinct bank
/// groups in each part, and a warp's copies fill whole lines (4 rows of the first part, or 8 of
/// the second). Byte offset of chunk `chunk` of row `row` in a tile of `rows` rows:
KTUNE_DECODE_HD constexpr unsigned flash_decode_split96_offset(int rows, int row, int chunk) {
  return chunk < 8 ? static_cast<unsigned>(row * 128 + ((chunk ^ (row & 7)) << 4))
                   : static_cast<unsigned>(rows * 128) + flash_decode_row64_offset(row, chunk - 8);
}

/// Shared memory of the end-of-CTA merge across warps: the fp32 O tile (rows padded by 8 floats)
/// and each warp's row max and sum.
KTUNE_DECODE_HD constexpr unsigned flash_decode_merge_bytes(int d, int block_m, int warps) {
  return static_cast<unsigned>(4 * block_m * (d + 8) + 4 * 2 * warps * block_m);
}

/// Shared memory a TMA kernel (flash_decode_split's TMA) adds: up to 1023 bytes to start the
/// ring 1024-byte aligned (the 128-byte swizzle's period), and a "full" mbarrier per stage.
constexpr unsigned kFlashDecodeTmaExtra = 1024 + 8 * 4;

/// Dynamic shared memory of flash_decode_split: the Q tile, then the K/V ring (STAGES K and V
/// tiles), which the merge reuses once the last tile is consumed; paged, two slots of the page
/// ids of the next tile to load at the end; TMA, kFlashDecodeTmaExtra (its rows are unpadded).
KTUNE_DECODE_HD constexpr unsigned flash_decode_smem_bytes(int d, int block_m, int block_n,
                                                           int warps, int stages, int page = 0,
                                                           bool varlen = false,
                                                           bool split = false, bool tma = false) {
  const unsigned ring = static_cast<unsigned>(
      (tma ? 2 * d : flash_decode_kv_pitch(d, varlen, split, block_n / warps)) * 2 * block_n *
      stages);
  const unsigned merge = flash_decode_merge_bytes(d, block_m, warps);
  return static_cast<unsigned>(page > 0 ? 2 * 4 * paged_kv_slots(block_n, page) : 0) +
         (tma ? kFlashDecodeTmaExtra : 0u) +
         static_cast<unsigned>(flash_decode_pitch(d) * block_m) + (ring > merge ? ring : merge);
}

/// fp32 accumulators of O and S per thread of flash_decode_split: BLOCK_M * D / 32 and
/// BLOCK_M * (BLOCK_N / WARPS) / 32. Above 144 ptxas spills (measured at 160-192 on sm_90a).
KTUNE_DECODE_HD constexpr int flash_decode_accumulators(int d, int block_m, int block_n,
                                                       int warps) {
  return block_m * (d + block_n / warps) / 32;
}

/// Rows of O one combine block merges (one warp each).
constexpr int kFlashDecodeCombineWarps = 4;
/// Splits whose partial rows one combine warp loads before using the first (flash_decode.cuh).
constexpr int kFlashDecodeCombineBatch = 8;

/// nullptr when flash_decode_split<T, D, BLOCK_M, BLOCK_N, WARPS, STAGES, CAUSAL, PAGE, WINDOW,
/// SOFTCAP, ALIBI, VARLEN, CLUSTER, DV, KV_SPLIT, TMA> compiles (the mask variants and VARLEN
/// never matter here, except that VARLEN needs PAGE = 0); otherwise why not (the kernel's
/// static_asserts).
KTUNE_DECODE_HD constexpr const char* flash_decode_invalid_reason(int d, int block_m, int block_n,
                                                                  int warps, int stages,
                                                                  int page = 0,
                                                                  bool varlen = false,
                                                                  bool split = false,
                                                                  bool tma = false) {
  if (page != 0 && page != 16 && page != 32 && page != 64 && page != 128 && page != 256)
    return "PAGE must be 0 (contiguous), 16, 32, 64, 128 or 256";
  if (split && d != 96) return "KV_SPLIT is for D = 96";
  if (d != 32 && d != 64 && d != 96 && d != 128 && d != 256)
    return "D must be 32, 64, 96, 128 or 256";
  if (block_m != 16 && block_m != 32 && block_m != 64) return "BLOCK_M must be 16, 32 or 64";
  if (block_n != 32 && block_n != 64 && block_n != 128) return "BLOCK_N must be 32, 64 or 128";
  if (warps != 2 && warps != 4 && warps != 8) return "WARPS must be 2, 4 or 8";
  if (block_n % (16 * warps) != 0) return "BLOCK_N must be a multiple of 16 * WARPS";
  if (block_m * (d + block_n / warps) > 4608)
    return "BLOCK_M * (D + BLOCK_N / WARPS) must be at most 4608 (O and S accumulators)";
  if (stages < 2 || stages > 4) return "STAGES must be 2, 3 or 4";
  if (tma && (page != 0 || varlen || split || (d != 64 && d != 128 && d != 256)))
    return "TMA: contiguous K/V (PAGE 0), not VARLEN, D = 64, 128 or 256, no KV_SPLIT";
  if (flash_decode_smem_bytes(d, block_m, block_n, warps, stages, page, varlen, split, tma) >
      227u * 1024u)
    return "shared memory above 227 KiB";
  return nullptr;
}

}  // namespace ktune
