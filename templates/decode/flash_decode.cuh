// Split-KV ("flash decoding") attention forward with grouped-query packing, for decode and short
// query blocks (Nq up to a few hundred): mma.sync m16n8k16 tiles, a cp.async K/V ring.
//
// Grid (row tiles, splits, B * Hkv). A CTA takes BLOCK_M packed rows (the g query heads of one KV
// head times the query rows, see args.h) and the key tiles of its split. Every warp holds all
// BLOCK_M rows and takes its own BLOCK_N / WARPS keys of each tile: with M as small as decode's
// 1-16 rows, splitting keys rather than rows keeps every warp busy, and each warp keeps its own
// online softmax. At the end the warps' states are merged in shared memory (in warp order, so the
// result is deterministic), and the CTA writes its split's O (normalised) and log-sum-exp to the
// workspace, or with a single split o and lse directly. flash_decode_combine then merges the
// splits: lse = log sum_s exp(lse_s), o = sum_s exp(lse_s - lse) o_s, exact up to rounding.
//
// Paged KV (PAGE > 0, see args.h): rows are gathered through the block table, and every CTA
// reads its sequence's length: key tiles past it are never loaded, a split past it exits at once
// (writing nothing; the combine reads only the splits that hold keys), and the causal diagonal
// is aligned to that length. The page ids of the tile loaded next are read one tile ahead into a
// shared slot, so the cp.async issue never waits on the block table.
//
// Mask variants (WINDOW, SOFTCAP, ALIBI; off, the kernel is the same code as without them), as
// flash_attention_fwd's: a left sliding window bottom-right aligned per packed row (each row's
// own query row, against the sequence's own length when paged); the key tiles of a split that lie
// left of the window of the tile's first row are neither loaded nor computed (a split left with
// none writes lse = -inf, weight 0, as one wholly past the causal diagonal does), and the tiles
// that cross the last row's window edge are masked per element. Soft-capping and the ALiBi bias
// (the slope of the packed row's query head) turn the scores into log2-domain logits per element
// right after Q K^T.
//
// Variable-length batches (VARLEN, see args.h): the grid keeps the longest lengths' shape, and
// each CTA reads its sequence's offsets: row tiles past its packed rows (group * its query count)
// exit at once, and its key count bounds the tiles and the splits as a paged sequence's length
// does (splits past it exit; the combine reads only the splits that wrote). An empty sequence
// (no key) writes o = 0 and lse = -inf from split 0; one with no query writes nothing.
//
// Merged in a cluster (CLUSTER = splits > 1, sm_90, contiguous K/V, not varlen): the splits of
// one (row tile, batch, KV head) are the CTAs of one thread block cluster along x, and instead of
// writing partials for the combine kernel each CTA leaves its split's O rows and log-sum-exp in
// its shared memory; after a cluster barrier, CTA c merges rows c, c + CLUSTER, ... reading the
// other splits' rows from their shared memory, with the combine's arithmetic in its order (the
// same bits), and a second barrier keeps every CTA's shared memory alive until all have read it.
// No workspace, no second kernel.
#pragma once

#include "attention/mma.cuh"
#include "common/cluster.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/types.cuh"
#include "decode/args.h"

namespace ktune {
namespace decode {

/// The split kernel's argument type: FlashDecodeTmaArgs with TMA, else FlashDecodeArgs.
template <bool TMA>
struct SplitArgs {
  using type = FlashDecodeArgs;
};
template <>
struct SplitArgs<true> {
  using type = FlashDecodeTmaArgs;
};

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// One lane's PER_LANE consecutive floats of a row: four at a time through load4(e) (floats e to
/// e + 3, 16 bytes) when PER_LANE allows, else one at a time through load1(e).
template <int PER_LANE, typename Load4, typename Load1>
__device__ __forceinline__ void lane_row(float (&x)[PER_LANE], Load4 load4, Load1 load1) {
  if constexpr (PER_LANE % 4 == 0) {
#pragma unroll
    for (int e = 0; e < PER_LANE; e += 4) {
      const float4 v = load4(e);
      x[e] = v.x;
      x[e + 1] = v.y;
      x[e + 2] = v.z;
      x[e + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int e = 0; e < PER_LANE; ++e) x[e] = load1(e);
  }
}

/// One lane's PER_LANE consecutive floats of a partial O row (16-byte loads when they allow).
template <int PER_LANE>
__device__ __forceinline__ void load_lane_row(float (&x)[PER_LANE], const float* p) {
  lane_row<PER_LANE>(
      x, [p](int e) { return *reinterpret_cast<const float4*>(p + e); },
      [p](int e) { return p[e]; });
}

/// Stores one lane's PER_LANE consecutive results of an output row, converted to T (two at a
/// time when they pair).
template <typename T, int PER_LANE>
__device__ __forceinline__ void store_lane_row(T* o, const float (&acc)[PER_LANE]) {
  if constexpr (PER_LANE % 2 == 0) {
#pragma unroll
    for (int e = 0; e < PER_LANE; e += 2)
      *reinterpret_cast<unsigned*>(o + e) = pack2<T>(acc[e], acc[e + 1]);
  } else {
#pragma unroll
    for (int e = 0; e < PER_LANE; ++e) o[e] = from_float<T>(acc[e]);
  }
}

/// store_lane_row for lane `lane` of a row whose elements from DV on are not stored (a head dim
/// that runs in a wider tile's kernel); with DV = 32 * PER_LANE, store_lane_row itself.
template <typename T, int PER_LANE, int DV>
__device__ __forceinline__ void store_lane_row_upto(T* o, const float (&acc)[PER_LANE],
                                                    int lane) {
  if constexpr (DV == 32 * PER_LANE) {
    store_lane_row<T, PER_LANE>(o, acc);
  } else {
#pragma unroll
    for (int e = 0; e < PER_LANE; ++e)
      if (lane * PER_LANE + e < DV) o[e] = from_float<T>(acc[e]);
  }
}

/// Byte offset of 16-byte chunk `chunk` of row `row` in a K/V tile (flash_decode_kv_pitch); SPLIT:
/// d=96's tile of ROWS rows in two parts (flash_decode_split96_offset); d=32 swizzled: 64-byte
/// rows (flash_decode_row64_offset).
template <int D, bool SWZ, bool SPLIT = false, int ROWS = 0>
__device__ __forceinline__ unsigned kv_offset(int row, int chunk) {
  if constexpr (SPLIT)
    return flash_decode_split96_offset(ROWS, row, chunk);
  else if constexpr (SWZ && D == 32)
    return flash_decode_row64_offset(row, chunk);
  else if constexpr (SWZ)
    return static_cast<unsigned>(row * 2 * D + ((chunk ^ (row & 7)) << 4));  // unpadded rows
  else
    return static_cast<unsigned>(row * flash_decode_pitch(D) + chunk * 16);
}

/// Copies key rows [row0, row0 + ROWS) of one KV head into a shared tile (kv_offset); rows at
/// or past `rows_valid` (the end of the keys) are zero-filled without being read, so P V never
/// meets garbage (0 * NaN). DV: the rows' elements (a multiple of 8, at most D); the chunks from
/// DV on are zero-filled without being read.
template <int D, int ROWS, int THREADS, bool SWZ, int DV = D, bool SPLIT = false>
__device__ __forceinline__ void load_kv_tile(unsigned dst, const unsigned short* src,
                                             long long row_stride, int rows_valid, int tid) {
  // The chunks the products read (a row's first ceil(DV / 16) * 2; all of them when DV = D):
  // those past them are neither copied nor zeroed.
  constexpr int CHUNKS = (DV + 15) / 16 * 2;
  if constexpr (SPLIT) {
    // d=96's two parts, each copied in whole 128-byte lines a warp: chunks 0-7 (every DV of
    // d=96's tiles, 72 to 96, reads all 8) 4 rows a warp, then chunks 8-11, 8 rows a warp.
    static_assert(D == 96 && DV > 64 && (ROWS * 8) % THREADS == 0, "d=96's split tiles");
#pragma unroll
    for (int i = 0; i < ROWS * 8 / THREADS; ++i) {
      const int id = tid + i * THREADS;
      const int row = id >> 3;
      const int chunk = id & 7;
      if (row < rows_valid)
        attn::cp_async_16(dst + flash_decode_split96_offset(ROWS, row, chunk),
                          src + row * row_stride + chunk * 8);
      else
        attn::cp_async_16(dst + flash_decode_split96_offset(ROWS, row, chunk), src, 0);
    }
#pragma unroll
    for (int i = 0; i < (ROWS * 4 + THREADS - 1) / THREADS; ++i) {
      const int id = tid + i * THREADS;
      const int row = id >> 2;
      const int chunk = 8 + (id & 3);
      if (((ROWS * 4) % THREADS == 0 || id < ROWS * 4) && chunk < CHUNKS) {
        if (row < rows_valid && chunk * 8 < DV)
          attn::cp_async_16(dst + flash_decode_split96_offset(ROWS, row, chunk),
                            src + row * row_stride + chunk * 8);
        else
          attn::cp_async_16(dst + flash_decode_split96_offset(ROWS, row, chunk), src, 0);
      }
    }
    return;
  }
  constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
  for (int i = 0; i < (TOTAL + THREADS - 1) / THREADS; ++i) {
    const int id = tid + i * THREADS;
    if (TOTAL % THREADS == 0 || id < TOTAL) {
      const int row = id / CHUNKS;
      const int chunk = id % CHUNKS;
      if (row < rows_valid && (DV == D || chunk * 8 < DV))
        attn::cp_async_16(dst + kv_offset<D, SWZ>(row, chunk), src + row * row_stride + chunk * 8);
      else
        attn::cp_async_16(dst + kv_offset<D, SWZ>(row, chunk), src, 0);
    }
  }
}

/// Paged: copies keys [key0, key0 + ROWS) of one KV head from the pools (rows `row_stride`
/// elements apart, Hkv * D) into shared K and V tiles (kv_offset). `pages` holds the tile's page
/// ids (paged_kv_copy_slot), from the block table or a shared slot; rows at or past
/// `rows_valid` are zero-filled, reading neither the table nor the pools. A row's D / 8 chunks
/// are spread over a power of two of threads (paged_kv_copy_slot's rows per pass are powers of
/// two): at D = 96, 16 threads a row, the last 4 idle.
template <int D, int ROWS, int THREADS, int PAGE, bool SWZ, int DV = D, bool SPLIT = false>
__device__ __forceinline__ void load_kv_tiles_paged(unsigned dst_k, unsigned dst_v,
                                                    const unsigned short* k,
                                                    const unsigned short* v, long long row_stride,
                                                    const int* pages, long long key0,
                                                    int rows_valid, int tid) {
  constexpr int CHUNKS = D / 8;
  constexpr int LANES = CHUNKS <= 4 ? 4 : CHUNKS <= 8 ? 8 : CHUNKS <= 16 ? 16 : 32;  // a row's
  constexpr int RPI = THREADS / LANES;  // rows per pass
  static_assert(LANES >= CHUNKS && THREADS % LANES == 0 && ROWS % RPI == 0, "whole rows per pass");
  const int rt = tid / LANES;
  const int chunk = tid % LANES;
  if (LANES != CHUNKS && chunk >= CHUNKS) return;
#pragma unroll
  for (int i = 0; i < ROWS / RPI; ++i) {
    const int row = rt + i * RPI;
    const unsigned off = kv_offset<D, SWZ, SPLIT, ROWS>(row, chunk);
    if (row < rows_valid && (DV == D || chunk * 8 < DV)) {
      const long long page = pages[paged_kv_copy_slot(i, rt, RPI, ROWS, PAGE)];
      const long long at =
          (page * PAGE + paged_kv_copy_row(key0, i, rt, RPI, ROWS, PAGE)) * row_stride +
          chunk * 8;
      attn::cp_async_16(dst_k + off, k + at);
      attn::cp_async_16(dst_v + off, v + at);
    } else {
      attn::cp_async_16(dst_k + off, k, 0);
      attn::cp_async_16(dst_v + off, v, 0);
    }
  }
}

/// The float at `addr`, a shared::cluster address (cluster::map_shared's result): another CTA's
/// shared memory, written before a cluster::sync() that this thread has passed.
__device__ __forceinline__ float load_cluster_f32(unsigned addr) {
  float v = 0.f;
  KTUNE_CLUSTER_ASM("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

/// Four floats at `addr` (16-byte aligned), as load_cluster_f32.
__device__ __forceinline__ float4 load_cluster_v4_f32(unsigned addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  KTUNE_CLUSTER_ASM("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                    : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                    : "r"(addr)
                    : "memory");
  return v;
}

/// One lane's PER_LANE consecutive floats of another CTA's partial O row at the shared::cluster
/// address `src` (as load_lane_row, from distributed shared memory).
template <int PER_LANE>
__device__ __forceinline__ void load_cluster_lane_row(float (&x)[PER_LANE], unsigned src) {
  lane_row<PER_LANE>(
      x, [src](int e) { return load_cluster_v4_f32(src + 4 * e); },
      [src](int e) { return load_cluster_f32(src + 4 * e); });
}

/// The end of a split CTA merged in a cluster (CLUSTER > 1, see the file comment). `buf_addr`:
/// the shared address of the CTA's normalised O rows ([BLOCK_M][D + 8] fp32, the warps' merge);
/// w_max / w_sum: the warps' row maxima (log2 units) and sums ([WARPS][BLOCK_M]). The row's
/// log-sum-exp is the one the split path writes to part_lse, and the merge is
/// flash_decode_combine's arithmetic in its order, so both paths give the same bits. Every thread
/// of the CTA calls it.
template <typename T, int D, int BLOCK_M, int WARPS, int CLUSTER, int DV = D>
__device__ __forceinline__ void cluster_merge(const FlashDecodeArgs& args, unsigned buf_addr,
                                              float* w_max, const float* w_sum, int rows_valid,
                                              int r0, int b, int kh, int group, int Nq) {
  constexpr int THREADS = WARPS * 32;
  constexpr int OP = D + 8;
  constexpr int PER_LANE = D / 32;
  constexpr float LOG2E = 1.4426950408889634f;
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // Row r's log-sum-exp over the CTA's keys into w_max[r] (warp 0's slot: only this thread reads
  // row r's entries here), -inf for padding rows.
  for (int row = tid; row < BLOCK_M; row += THREADS) {
    float m = NEG_INF, l = 0.f;
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, w_max[w * BLOCK_M + row]);
    if (m != NEG_INF)
      for (int w = 0; w < WARPS; ++w)
        l += w_sum[w * BLOCK_M + row] * attn::exp2_approx(w_max[w * BLOCK_M + row] - m);
    w_max[row] = row < rows_valid && l > 0.f
                     ? (m + attn::log2_approx(l)) * 0.6931471805599453f
                     : NEG_INF;
  }
  // Every split's rows and log-sum-exps are written and visible cluster-wide.
  cluster::sync();
  const unsigned rank = cluster::ctarank();
  const unsigned lse_addr = attn::smem_addr(w_max);
  for (int row = static_cast<int>(rank) + warp * CLUSTER; row < rows_valid;
       row += WARPS * CLUSTER) {
    // Lane s < CLUSTER holds split s's log-sum-exp.
    const float mine =
        lane < CLUSTER ? load_cluster_f32(cluster::map_shared(lse_addr + 4 * row, lane))
                       : NEG_INF;
    float m = mine;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.f;
    if (m != NEG_INF && lane < CLUSTER) l += attn::exp2_approx((mine - m) * LOG2E);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float w = lane < CLUSTER && m != NEG_INF ? attn::exp2_approx((mine - m) * LOG2E) * inv
                                                   : 0.f;
    float acc[PER_LANE];
#pragma unroll
    for (int e = 0; e < PER_LANE; ++e) acc[e] = 0.f;
    const unsigned at = buf_addr + 4u * static_cast<unsigned>(row * OP + lane * PER_LANE);
    // As the combine takes them: whole batches of kFlashDecodeCombineBatch (all of a batch's
    // loads issued before the first is used), then the rest one at a time; the sums in split
    // order either way, so both paths give the same bits at any cluster size.
    constexpr int BATCH = CLUSTER < kFlashDecodeCombineBatch ? CLUSTER : kFlashDecodeCombineBatch;
    constexpr int BATCHED = CLUSTER - CLUSTER % BATCH;
#pragma unroll
    for (int s0 = 0; s0 < BATCHED; s0 += BATCH) {
      float x[BATCH][PER_LANE];
#pragma unroll
      for (int u = 0; u < BATCH; ++u)
        load_cluster_lane_row<PER_LANE>(x[u],
                                        cluster::map_shared(at, static_cast<unsigned>(s0 + u)));
#pragma unroll
      for (int u = 0; u < BATCH; ++u) {
        const float ws = __shfl_sync(0xffffffffu, w, s0 + u);
#pragma unroll
        for (int e = 0; e < PER_LANE; ++e) acc[e] += ws * x[u][e];
      }
    }
#pragma unroll
    for (int u = BATCHED; u < CLUSTER; ++u) {
      float x[PER_LANE];
      load_cluster_lane_row<PER_LANE>(x, cluster::map_shared(at, static_cast<unsigned>(u)));
      const float ws = __shfl_sync(0xffffffffu, w, u);
#pragma unroll
      for (int e = 0; e < PER_LANE; ++e) acc[e] += ws * x[e];
    }
    const int r = r0 + row;
    const int h = kh * group + r % group;
    const int qr = r / group;
    store_lane_row_upto<T, PER_LANE, DV>(static_cast<T*>(args.o) + b * args.o_batch_stride +
                                             h * args.o_head_stride + qr * args.o_row_stride +
                                             lane * PER_LANE,
                                         acc, lane);
    if (args.lse != nullptr && lane == 0)
      args.lse[(static_cast<long long>(b) * args.heads_q + h) * Nq + qr] =
          m != NEG_INF ? m + logf(l) : NEG_INF;
  }
  // No CTA leaves while another may still read its shared memory.
  cluster::sync();
}

}  // namespace decode

/// Partial attention of one (row tile, split, batch * KV head); see the file comment.
///
/// T: bf16 or fp16. D: head dimension. BLOCK_M: packed rows per CTA (16 * MF; every warp holds
/// all of them). BLOCK_N: keys per tile; each warp takes BLOCK_N / WARPS of them (a multiple of
/// 16). STAGES: depth of the K/V ring. PAGE: 0 for contiguous K/V, else the page size of the
/// pools (args.block_table, args.seq_lens). WINDOW, SOFTCAP, ALIBI: the mask variants
/// (args.window, args.softcap, args.alibi_slopes; see the file comment). VARLEN: packed
/// variable-length sequences (args.cu_seqlens_q, args.cu_seqlens_k; PAGE must be 0). CLUSTER:
/// 1, or the split count (2, 4, 8 or 16; PAGE 0, not VARLEN) merged in a cluster (file comment).
/// TMA (sm_90; PAGE 0, not VARLEN, not KV_SPLIT, D = 64, 128 or 256): one thread copies each
/// K/V tile with tensor-map copies (args' FlashDecodeTmaArgs maps) that complete on an
/// mbarrier per stage (file comment).
/// Launch: grid (ceil(rows / BLOCK_M), splits, B * Hkv) with rows = g * Nq, the longest (CLUSTER
/// > 1: grid (splits, ceil(rows / BLOCK_M), B * Hkv) in clusters of CLUSTER along x), WARPS * 32
/// threads,
/// flash_decode_smem_bytes(D, BLOCK_M, BLOCK_N, WARPS, STAGES, PAGE) bytes of dynamic shared
/// memory (raise the kernel's limit above 48 KiB).
template <typename T, int D, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, bool CAUSAL,
          int PAGE = 0, bool WINDOW = false, bool SOFTCAP = false, bool ALIBI = false,
          bool VARLEN = false, int CLUSTER = 1, int DV = D, bool KV_SPLIT = false,
          bool TMA = false>
// Paged, varlen or with a mask variant, at least one CTA per SM (and no more) is all ptxas is
// told: without it, it capped a paged default (and the contiguous d=128 default with every
// variant) at 168 registers and spilled; varlen holds the sequence's offsets on top. Contiguous
// kernels without variants keep the plain bound.
__global__ void __launch_bounds__(WARPS * 32,
                                  PAGE > 0 || WINDOW || SOFTCAP || ALIBI || VARLEN ? 1 : 0)
    flash_decode_split(const __grid_constant__ typename decode::SplitArgs<TMA>::type args) {
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(D == 32 || D == 64 || D == 96 || D == 128 || D == 256, "unsupported head dim");
  static_assert(DV % 8 == 0 && DV > 0 && DV <= D, "DV: the data's head dim, a multiple of 8 <= D");
  static_assert(BLOCK_M == 16 || BLOCK_M == 32 || BLOCK_M == 64, "BLOCK_M: 16, 32, 64");
  static_assert(BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N: 32, 64, 128");
  static_assert(WARPS == 2 || WARPS == 4 || WARPS == 8, "WARPS: 2, 4, 8");
  static_assert(BLOCK_N % (16 * WARPS) == 0, "each warp takes whole 16-key slices");
  static_assert(flash_decode_accumulators(D, BLOCK_M, BLOCK_N, WARPS) <= 144,
                "O and S accumulators: at most 144 fp32 registers per thread");
  static_assert(STAGES >= 2 && STAGES <= 4, "STAGES must be 2, 3 or 4");
  static_assert(flash_decode_smem_bytes(D, BLOCK_M, BLOCK_N, WARPS, STAGES, PAGE, VARLEN,
                                        KV_SPLIT, TMA) <= 227 * 1024,
                "shared memory above 227 KiB");
  static_assert(!KV_SPLIT || D == 96, "KV_SPLIT: d=96's tiles");
  static_assert(!TMA || (PAGE == 0 && !VARLEN && !KV_SPLIT && (D == 64 || D == 128 || D == 256)),
                "TMA: contiguous K/V, not varlen, d = 64, 128 or 256's tiles");
  static_assert(PAGE == 0 || PAGE == 16 || PAGE == 32 || PAGE == 64 || PAGE == 128 ||
                    PAGE == 256,
                "PAGE: 0 (contiguous), 16, 32, 64, 128 or 256");
  static_assert(!VARLEN || PAGE == 0, "VARLEN packs contiguous K/V: PAGE must be 0");
  static_assert(CLUSTER >= 1 && CLUSTER <= 16, "CLUSTER: 1 (no cluster) or 2 to 16 splits");
  // Every CTA of a cluster must reach both cluster barriers: no early exit may exist.
  static_assert(CLUSTER == 1 || (PAGE == 0 && !VARLEN),
                "CLUSTER > 1: contiguous K/V, not varlen (their CTAs may exit early)");

  // The combine (launched with programmatic dependent launch) may be scheduled as soon as every
  // CTA of this grid has started: its CTAs then wait in griddep_wait() for this grid to finish,
  // and its launch latency hides behind this grid's tail instead of following it.
  griddep_launch_dependents();

  using namespace attn;
  constexpr int THREADS = WARPS * 32;
  constexpr int MF = BLOCK_M / 16;        // 16-row fragments (every warp holds all)
  constexpr int KW = BLOCK_N / WARPS;     // keys of a tile per warp
  constexpr int NT = KW / 8;              // n8 column tiles of S per warp
  constexpr int DT = D / 8;               // n8 column tiles of O
  // Products over the data's columns only (DV < D: the tile's last columns are never read): Q K^T
  // in ceil(DV / 16) k16 steps, P V into as many pairs of n8 tiles. DV an odd multiple of 8: the
  // last step's upper half reads the zeros the copies write.
  constexpr int QK_STEPS = (DV + 15) / 16;
  constexpr int PV_PAIRS = (DV + 15) / 16;
  constexpr int PV_STEPS = KW / 16;
  constexpr int CHUNKS = D / 8;           // 16-byte chunks per row
  constexpr int PITCH = flash_decode_pitch(D);
  // TMA: each tile of K (and V) is D / 64 parts of BLOCK_N rows of 128 bytes (64 columns), each
  // in the copy engine's 128-byte swizzle: chunk c of a part's row r at c ^ (r & 7), the parts
  // PART bytes apart. The rows of a part are addressed as d=64's swizzled tiles, k-step kk (and
  // P V's column pair dd) in part kk / 4 at (kk % 4) << 5.
  constexpr int KV_PITCH =
      TMA ? 2 * D : flash_decode_kv_pitch(D, VARLEN, KV_SPLIT, BLOCK_N / WARPS);
  constexpr bool SWZ = flash_decode_kv_swizzled(D, VARLEN, BLOCK_N / WARPS);
  // KV_SPLIT (d=96): the first part's rows are 128 bytes, swizzled as SWZ's; its k-steps
  // (P V: column pairs) 0-3 read there, 4-5 in the second part (64-byte rows, PART_B on).
  // d=32 swizzled: every k-step reads 64-byte rows as that second part, from the tile's start.
  constexpr bool ROW64 = SWZ && D == 32;
  constexpr bool XOR_A = (SWZ && !ROW64) || KV_SPLIT || TMA;
  constexpr int PITCH_A = KV_SPLIT || TMA ? 128 : KV_PITCH;
  constexpr unsigned PART = BLOCK_N * 128;  // TMA: bytes of one 64-column part of a tile
  // Byte offset of k-step (or column pair) kk's chunk in the lane's row: lane_off holds the row
  // and the lane's chunk XOR (kk << 5 stays in the row's bits 5-8 untouched by it).
  const auto xor_a = [](unsigned lane_off, int kk) {
    return TMA ? (kk >> 2) * PART + (lane_off ^ ((kk & 3) << 5)) : lane_off ^ (kk << 5);
  };
  constexpr bool HAS_B = KV_SPLIT || ROW64;
  constexpr int B_FIRST = KV_SPLIT ? 4 : 0;  // first k-step in 64-byte rows (HAS_B)
  constexpr unsigned PART_B = KV_SPLIT ? BLOCK_N * 128 : 0;
  constexpr unsigned KV_BYTES = BLOCK_N * KV_PITCH;
  constexpr unsigned RING = 2 * STAGES * KV_BYTES > flash_decode_merge_bytes(D, BLOCK_M, WARPS)
                                ? 2 * STAGES * KV_BYTES
                                : flash_decode_merge_bytes(D, BLOCK_M, WARPS);
  constexpr int SLOTS = PAGE > 0 ? paged_kv_slots(BLOCK_N, PAGE) : 1;
  const float NEG_INF = -__int_as_float(0x7f800000);

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sQ = smem_addr(smem);
  // TMA: the ring starts at the next 1024-byte boundary (the swizzle's period), and the "full"
  // barriers (one per stage, counting the tile's bytes) follow the largest ring's end.
  const unsigned sK = TMA ? (sQ + BLOCK_M * PITCH + 1023u) & ~1023u : sQ + BLOCK_M * PITCH;
  [[maybe_unused]] const unsigned full_bar = sQ + BLOCK_M * PITCH + RING + 1024u;
  const unsigned sV = sK + STAGES * KV_BYTES;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair
  // Without VARLEN every expression below is the one of before it (ptxas allocates the d=256
  // kernels at their limit of 255 registers: a reordering there spilled).
  const int b = blockIdx.z / args.heads_kv;
  // VARLEN: the sequence's first rows in the packed arrays and its own counts.
  const int q_first = VARLEN ? args.cu_seqlens_q[b] : 0;
  const int k_first = VARLEN ? args.cu_seqlens_k[b] : 0;
  const int Nq =
      VARLEN ? flash_decode_seq_len(args.cu_seqlens_q[b + 1] - q_first, args.seq_q) : args.seq_q;
  const int group = args.group;
  const int rows = group * Nq;
  const int r0 = (CLUSTER > 1 ? blockIdx.y : blockIdx.x) * BLOCK_M;
  // VARLEN: a row tile past the sequence's packed rows has none to compute or write.
  if (VARLEN && r0 >= rows) return;
  const int rows_valid = min(BLOCK_M, rows - r0);
  const int split = CLUSTER > 1 ? blockIdx.x : blockIdx.y;
  const int kh = blockIdx.z % args.heads_kv;
  // Keys of this sequence: all Nk, or paged (VARLEN) its own count.
  const int Nk = PAGE > 0 ? flash_decode_seq_len(args.seq_lens[b], args.seq_k)
                 : VARLEN ? flash_decode_seq_len(args.cu_seqlens_k[b + 1] - k_first, args.seq_k)
                          : args.seq_k;
  const int tiles = (Nk + BLOCK_N - 1) / BLOCK_N;
  // Contiguous with a window: the splits divide the tiles from the first one any row sees.
  const int n_begin =
      (WINDOW && PAGE == 0 && !VARLEN
           ? static_cast<int>(flash_decode_window_base(Nq, Nk, args.window, BLOCK_N))
           : 0) +
      split * args.tiles_per_split;
  // A split past the sequence's end has nothing to add: the combine does not read it (split 0
  // always writes, so that an empty sequence still gets o = 0 and lse = -inf).
  if ((PAGE > 0 || VARLEN) && split > 0 && n_begin >= tiles) return;

  // Paged, run() sets the k and v strides to the pools' (batch 0, head D, row Hkv * D): the same
  // addressing then gives this head's column of every pool row. VARLEN: the sequence starts at
  // its first packed row.
  const unsigned short* q = static_cast<const unsigned short*>(args.q) +
                            (VARLEN ? q_first * args.q_row_stride : b * args.q_batch_stride);
  const unsigned short* k = static_cast<const unsigned short*>(args.k) +
                            (VARLEN ? k_first * args.k_row_stride : b * args.k_batch_stride) +
                            kh * args.k_head_stride;
  const unsigned short* v = static_cast<const unsigned short*>(args.v) +
                            (VARLEN ? k_first * args.v_row_stride : b * args.v_batch_stride) +
                            kh * args.v_head_stride;
  // Two slots of SLOTS page ids: those of the next tile to load, written one tile ahead.
  int* const s_pages = reinterpret_cast<int*>(smem + BLOCK_M * PITCH + RING);

  // Q tile: packed row r is query row r / g of head kh * g + r % g; padding rows are zeros.
  for (int id = tid; id < BLOCK_M * CHUNKS; id += THREADS) {
    const int row = id / CHUNKS;
    const int chunk = id % CHUNKS;
    const unsigned dst = sQ + row * PITCH + chunk * 16;
    if (row < rows_valid && (DV == D || chunk * 8 < DV)) {
      const int r = r0 + row;
      cp_async_16(dst, q + (kh * group + r % group) * args.q_head_stride +
                           (r / group) * args.q_row_stride + chunk * 8);
    } else {
      cp_async_16(dst, q, 0);
    }
  }
  cp_async_commit();

  // Key tiles of this split, [n_begin, n_end); for causal, cut after the last key the tile's last
  // row sees. Tiles below n_full need no mask (every row of the tile sees all their keys).
  int n_end = min(tiles, n_begin + args.tiles_per_split);
  int n_full = Nk / BLOCK_N;
  if (CAUSAL) {
    const int last = static_cast<int>(
        flash_decode_row_limit(r0 + rows_valid - 1, group, Nq, Nk, true));
    n_end = min(n_end, last <= 0 ? 0 : (last + BLOCK_N - 1) / BLOCK_N);
    const int first = static_cast<int>(flash_decode_row_limit(r0, group, Nq, Nk, true));
    n_full = first <= 0 ? 0 : first / BLOCK_N;
  }
  // Sliding window: tiles [n_begin, n_start) lie left of the window of the tile's first row, so
  // of every row's, and are skipped; [n_start, n_low) hold keys left of the last row's window
  // and need the mask. Without WINDOW both are n_begin.
  int n_start = n_begin;
  int n_low = n_begin;
  if constexpr (WINDOW) {
    const int first_lo =
        static_cast<int>(flash_decode_row_first(r0, group, Nq, Nk, args.window));
    const int last_lo = static_cast<int>(
        flash_decode_row_first(r0 + rows_valid - 1, group, Nq, Nk, args.window));
    n_start = max(n_begin, first_lo <= 0 ? 0 : first_lo / BLOCK_N);
    n_low = max(n_start, min(n_end, last_lo <= 0 ? 0 : (last_lo + BLOCK_N - 1) / BLOCK_N));
  }
  n_full = max(n_low, min(n_full, n_end));

  // Paged: `pages` holds tile n's page ids (the block table row from page n * BLOCK_N / PAGE, or
  // a shared slot holding the same).
  const auto load = [&](int n, int st, const int* pages) {
    const long long r = static_cast<long long>(n) * BLOCK_N;
    if constexpr (TMA) {
      // One thread: the stage's bytes announced on its barrier, then D / 64 boxes of K and of V
      // (only the parts holding the data's columns: the products never read past DV). Keys
      // past Nk land as zeros. The stage was last read before the block barrier this thread
      // passed: its reads are ordered before the copy engine's writes by the proxy fence.
      constexpr int PARTS = (DV + 63) / 64;
      if (tid == 0) {
        const unsigned bar = full_bar + 8u * static_cast<unsigned>(st);
        mbar::fence_proxy_async_shared();
        mbar::arrive_expect_tx(bar, 2u * PARTS * PART);
#pragma unroll
        for (int p = 0; p < PARTS; ++p) {
          tma::load(sK + st * KV_BYTES + p * PART, &args.k_map, bar, p * 64, static_cast<int>(r),
                    kh, b);
          tma::load(sV + st * KV_BYTES + p * PART, &args.v_map, bar, p * 64, static_cast<int>(r),
                    kh, b);
        }
      }
      (void)pages;
    } else if constexpr (PAGE > 0) {
      decode::load_kv_tiles_paged<D, BLOCK_N, THREADS, PAGE, SWZ, DV, KV_SPLIT>(
          sK + st * KV_BYTES, sV + st * KV_BYTES, k, v, args.k_row_stride, pages, r,
          Nk - n * BLOCK_N, tid);
    } else {
      decode::load_kv_tile<D, BLOCK_N, THREADS, SWZ, DV, KV_SPLIT>(
          sK + st * KV_BYTES, k + r * args.k_row_stride, args.k_row_stride, Nk - n * BLOCK_N, tid);
      decode::load_kv_tile<D, BLOCK_N, THREADS, SWZ, DV, KV_SPLIT>(
          sV + st * KV_BYTES, v + r * args.v_row_stride, args.v_row_stride, Nk - n * BLOCK_N, tid);
    }
  };
  // Paged: page id `slot` of tile n, or 0 past the sequence (never used: such rows are zeroed).
  const auto page_id = [&](int n, int slot) {
    constexpr int P = PAGE > 0 ? PAGE : 1;  // (the lambda is only called when paged)
    const long long first = static_cast<long long>(n) * BLOCK_N / P + slot;
    // The row's address is recomputed from the parameters: one register fewer across the math.
    return first * P < Nk
               ? args.block_table[static_cast<long long>(b) * args.pages_per_seq + first]
               : 0;
  };
  if constexpr (TMA) {
    if (tid == 0) {
      for (int st = 0; st < STAGES; ++st) mbar::init(full_bar + 8u * st, 1);
      mbar::fence_init();
      tma::prefetch_map(&args.k_map);
      tma::prefetch_map(&args.v_map);
    }
  }
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (n_start + s < n_end)
      load(n_start + s, s,
           PAGE > 0 ? args.block_table + static_cast<long long>(b) * args.pages_per_seq +
                          static_cast<long long>(n_start + s) * BLOCK_N / (PAGE > 0 ? PAGE : 1)
                    : nullptr);
    cp_async_commit();
  }
  if constexpr (PAGE > 0) {
    const int m = n_start + STAGES - 1;  // loaded by the first tile step, from its slot
    if (tid < SLOTS && m < n_end) s_pages[(m & 1) * SLOTS + tid] = page_id(m, tid);
  }

  // Keys each of this thread's rows sees (rows mf * 16 + r * 8 + g of the tile).
  int limit[MF][2];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      limit[mf][r] = static_cast<int>(
          flash_decode_row_limit(r0 + mf * 16 + r * 8 + g, group, Nq, Nk, CAUSAL));
  // The variants' per-row values: the row's aligned position i' (WINDOW: the window starts at
  // i' - window + 1; ALIBI: the distance's origin) and its head's slope in log2 units (ALIBI).
  // They live in the 16 padding bytes that end the row's Q tile row (never read by ldmatrix),
  // not in registers: at d=256 the kernel has none to spare for them across the loop (ptxas
  // spilled). Written here, read after the first tile's barrier; padding rows (past `rows`) get
  // values too (their head is in range), never stored.
  if constexpr (WINDOW || ALIBI) {
    for (int row = tid; row < BLOCK_M; row += THREADS) {
      const int r = r0 + row;
      const float slope = ALIBI ? args.alibi_slopes[kh * group + r % group] : 0.f;
      *reinterpret_cast<int2*>(smem + row * PITCH + 2 * D) =
          make_int2(r / group + Nk - Nq, __float_as_int(slope * 1.4426950408889634f));
    }
  }
  // Row `row`'s (aligned position, slope) from its padding.
  [[maybe_unused]] const auto row_values = [&](int row) {
    return *reinterpret_cast<const int2*>(smem + row * PITCH + 2 * D);
  };

  // ldmatrix lane addresses (fragment layouts: see attention/flash_attention.cuh).
  const unsigned q_lane = sQ + (lane & 15) * PITCH + ((lane >> 4) << 4);
  // Swizzled K/V (flash_decode_kv_swizzled): the lane's rows are multiples of 8 apart from the
  // ones it reads (KW and 16-row steps), so chunk 2 kk + c of its row sits at chunk
  // (2 kk) ^ (c ^ (lane & 7)); its offset is kept with c ^ (lane & 7) in bits 4-6 and k-step kk
  // XORs in kk << 5 (bits 5-6 at d=64, 5-7 at d=128, 5-8 at d=256: the row part, a multiple of
  // the 2 * D-byte row, has them clear).
  const int k_c = (lane >> 3) & 1;
  const int v_c = lane >> 4;
  const int k_row = warp * KW + (lane & 7) + ((lane >> 4) << 3);
  const int v_row = warp * KW + (lane & 7) + (((lane >> 3) & 1) << 3);
  const unsigned k_lane = k_row * PITCH_A + ((XOR_A ? k_c ^ (lane & 7) : k_c) << 4);
  const unsigned v_lane = v_row * PITCH_A + ((XOR_A ? v_c ^ (lane & 7) : v_c) << 4);
  // KV_SPLIT's second part (and d=32's 64-byte rows, B_FIRST 0): chunk 8 + 2 (kk - 4) + c of
  // the lane's row at (2 (kk - 4) + c) ^ ((row >> 1) & 3), i.e. c ^ ((lane & 7) >> 1) with
  // (kk - 4) << 5 XORed in (its rows, 16-row steps and the warp's KW keys apart, keep
  // (row >> 1) & 3 and bit 5 of row * 64 clear).
  [[maybe_unused]] const unsigned k_lane_b =
      PART_B + k_row * 64 + ((k_c ^ ((lane & 7) >> 1)) << 4);
  [[maybe_unused]] const unsigned v_lane_b =
      PART_B + v_row * 64 + ((v_c ^ ((lane & 7) >> 1)) << 4);

  const float scale_log2 = args.scale * 1.4426950408889634f;
  // SOFTCAP and ALIBI turn the scores into log2-domain logits right after Q K^T (the cap and the
  // bias apply to scaled scores), so the softmax and the merge then multiply by 1; otherwise the
  // scale is folded into the softmax's FFMA.
  constexpr bool LOGITS = SOFTCAP || ALIBI;
  const float softmax_scale = LOGITS ? 1.f : scale_log2;
  float cap_in = 0.f, cap_out = 0.f;
  if constexpr (SOFTCAP) {
    cap_in = args.scale / args.softcap;            // tanh's argument: score / cap
    cap_out = args.softcap * 1.4426950408889634f;  // cap in log2 units
  }
  float o_acc[MF][DT][4];
  float row_max[MF][2];
  float row_sum[MF][2];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf) {
#pragma unroll
    for (int j = 0; j < DT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mf][j][e] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mf][r] = NEG_INF;
      row_sum[mf][r] = 0.f;
    }
  }

  int stage = 0;
  unsigned phase = 0;  // TMA: parity of the stage's barrier phase that brings tile n
  const auto tile = [&](const int n, const bool MASK) {
    // Tile n has landed once this thread's older groups are done and the barrier passes; the
    // barrier also retires every read of tile n - 1, whose stage the copy below refills. TMA:
    // the only cp.async group is Q's; tile n has landed once its stage's barrier completes.
    cp_async_wait<TMA ? 0 : STAGES - 2>();
    __syncthreads();
    const int nl = n + STAGES - 1;
    if (nl < n_end) load(nl, stage == 0 ? STAGES - 1 : stage - 1, s_pages + (nl & 1) * SLOTS);
    cp_async_commit();
    if constexpr (TMA) mbar::wait_parity(full_bar + 8u * stage, phase);
    // Paged: the page ids of tile nl + 1, read now and stored to the other slot after this
    // tile's math (the barrier of the next step publishes them; the slot's last readers were
    // before this step's barrier).
    int next_page = 0;
    if constexpr (PAGE > 0)
      if (tid < SLOTS && nl + 1 < n_end) next_page = page_id(nl + 1, tid);
    const unsigned k_stage = sK + stage * KV_BYTES + (XOR_A || HAS_B ? 0u : k_lane);
    const unsigned v_stage = sV + stage * KV_BYTES + (XOR_A || HAS_B ? 0u : v_lane);

    float s[MF][NT][4];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mf][j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < QK_STEPS; ++kk) {
      unsigned a[MF][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
        ldmatrix_x4(q_lane + mf * 16 * PITCH + kk * 32, a[mf][0], a[mf][1], a[mf][2], a[mf][3]);
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        unsigned b0, b1, b2, b3;
        ldmatrix_x4(HAS_B && kk >= B_FIRST
                        ? k_stage + (k_lane_b ^ ((kk - B_FIRST) << 5)) + nn * 16 * 64
                    : XOR_A ? k_stage + xor_a(k_lane, kk) + nn * 16 * PITCH_A
                            : k_stage + nn * 16 * KV_PITCH + kk * 32,
                    b0, b1, b2, b3);
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) {
          mma_16816<T>(s[mf][2 * nn], a[mf], b0, b1);
          mma_16816<T>(s[mf][2 * nn + 1], a[mf], b2, b3);
        }
      }
    }

    if constexpr (LOGITS) {
      const int key0 = n * BLOCK_N + warp * KW + 2 * t;
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // Column minus aligned row, as a float (exact below 2^24) for ALiBi's distance.
          float dist0 = 0.f, slope_log2 = 0.f;
          if constexpr (ALIBI) {
            const int2 rv = row_values(mf * 16 + r * 8 + g);
            dist0 = static_cast<float>(key0 - rv.x);
            slope_log2 = __int_as_float(rv.y);
          }
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float x = s[mf][j][2 * r + e];
              x = SOFTCAP ? cap_out * tanh_approx(x * cap_in) : x * scale_log2;
              if constexpr (ALIBI)
                x = fmaf(-slope_log2, fabsf(dist0 + static_cast<float>(j * 8 + e)), x);
              s[mf][j][2 * r + e] = x;
            }
        }
    }

    if (MASK) {
      // Keys past Nk, for causal past each row's diagonal, and with a window left of it, score
      // -inf.
      const int key0 = n * BLOCK_N + warp * KW + 2 * t;
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // First masked column of this thread. With WINDOW or ALIBI, derived from the row's
          // position in its Q row's padding, so that `limit` takes no registers across the loop.
          int lim = limit[mf][r] - key0;
          [[maybe_unused]] int aligned = 0;
          if constexpr (WINDOW || ALIBI) {
            aligned = row_values(mf * 16 + r * 8 + g).x;
            lim = (CAUSAL ? min(Nk, aligned + 1) : Nk) - key0;
          }
          if constexpr (WINDOW) {
            // First column of this thread in the row's window.
            const int lo = aligned - args.window + 1 - key0;
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (j * 8 + e >= lim || j * 8 + e < lo) s[mf][j][2 * r + e] = NEG_INF;
          } else {
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (j * 8 + e >= lim) s[mf][j][2 * r + e] = NEG_INF;
          }
        }
    }

    // Online softmax over this warp's keys. O is rescaled only when some row's max moved.
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = NEG_INF;
#pragma unroll
        for (int j = 0; j < NT; ++j)
          mx = fmaxf(mx, fmaxf(s[mf][j][2 * r], s[mf][j][2 * r + 1]));
        mx = decode::quad_max(mx);
        const float m_old = row_max[mf][r];
        const float m_new = fmaxf(m_old, mx);
        const bool moved = m_new > m_old;  // false while the row is fully masked
        if (__any_sync(0xffffffffu, moved)) {
          // exp2(-inf) = 0 when the row had no key yet.
          const float alpha =
              moved ? exp2_approx(m_old * softmax_scale - m_new * softmax_scale) : 1.f;
          row_sum[mf][r] *= alpha;
#pragma unroll
          for (int j = 0; j < DT; ++j) {
            o_acc[mf][j][2 * r] *= alpha;
            o_acc[mf][j][2 * r + 1] *= alpha;
          }
        }
        row_max[mf][r] = m_new;
        const float offset = m_new == NEG_INF ? 0.f : m_new * softmax_scale;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          s[mf][j][2 * r] = exp2_approx(s[mf][j][2 * r] * softmax_scale - offset);
          s[mf][j][2 * r + 1] = exp2_approx(s[mf][j][2 * r + 1] * softmax_scale - offset);
          sum += s[mf][j][2 * r] + s[mf][j][2 * r + 1];
        }
        row_sum[mf][r] += sum;
      }

    // O += P V: the S accumulators of n8 tiles 2kk, 2kk+1 are the A fragment of k16 step kk.
#pragma unroll
    for (int kk = 0; kk < PV_STEPS; ++kk) {
      unsigned a[MF][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) {
        a[mf][0] = pack2<T>(s[mf][2 * kk][0], s[mf][2 * kk][1]);
        a[mf][1] = pack2<T>(s[mf][2 * kk][2], s[mf][2 * kk][3]);
        a[mf][2] = pack2<T>(s[mf][2 * kk + 1][0], s[mf][2 * kk + 1][1]);
        a[mf][3] = pack2<T>(s[mf][2 * kk + 1][2], s[mf][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < PV_PAIRS; ++dd) {
        unsigned b0, b1, b2, b3;
        ldmatrix_x4_trans(
            HAS_B && dd >= B_FIRST
                ? v_stage + (v_lane_b ^ ((dd - B_FIRST) << 5)) + kk * 16 * 64
            : XOR_A ? v_stage + xor_a(v_lane, dd) + kk * 16 * PITCH_A
                    : v_stage + kk * 16 * KV_PITCH + dd * 32,
            b0, b1, b2, b3);
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) {
          mma_16816<T>(o_acc[mf][2 * dd], a[mf], b0, b1);
          mma_16816<T>(o_acc[mf][2 * dd + 1], a[mf], b2, b3);
        }
      }
    }
    if constexpr (PAGE > 0)
      if (tid < SLOTS && nl + 1 < n_end) s_pages[((nl + 1) & 1) * SLOTS + tid] = next_page;
    stage = stage + 1 == STAGES ? 0 : stage + 1;
    if (TMA && stage == 0) phase ^= 1u;
  };
  int n = n_start;
  if constexpr (WINDOW)
    for (; n < n_low; ++n) tile(n, true);
  for (; n < n_full; ++n) tile(n, false);
  for (; n < n_end; ++n) tile(n, true);

  // Merge the warps. Every copy has landed and every warp is past its last ldmatrix before the
  // ring is reused: O tile [BLOCK_M][D + 8] fp32, then row max (log2 units) and sum per warp.
  cp_async_wait<0>();
  __syncthreads();
  constexpr int OP = D + 8;
  float* const buf = reinterpret_cast<float*>(smem + BLOCK_M * PITCH);
  float* const w_max = buf + BLOCK_M * OP;
  float* const w_sum = w_max + WARPS * BLOCK_M;
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[mf][r] = decode::quad_sum(row_sum[mf][r]);
      if (t == 0) {
        const int row = mf * 16 + r * 8 + g;
        w_max[warp * BLOCK_M + row] =
            row_max[mf][r] == NEG_INF ? NEG_INF : row_max[mf][r] * softmax_scale;
        w_sum[warp * BLOCK_M + row] = row_sum[mf][r];
      }
    }
  __syncthreads();
  // Each warp's weight for its rows: exp2(m_w - M) / L, with M the rows' max over warps and L the
  // total sum at that reference. A row no warp saw gets weight 0 (O = 0, lse = -inf).
  float weight[MF][2];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = mf * 16 + r * 8 + g;
      float m = NEG_INF;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) m = fmaxf(m, w_max[w * BLOCK_M + row]);
      float l = 0.f;
      if (m != NEG_INF) {
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
          l += w_sum[w * BLOCK_M + row] * exp2_approx(w_max[w * BLOCK_M + row] - m);
      }
      const float mine = row_max[mf][r] == NEG_INF ? NEG_INF : row_max[mf][r] * softmax_scale;
      weight[mf][r] = l > 0.f ? exp2_approx(mine - m) * rcp_approx(l) : 0.f;
    }
  // Warps add their share in order: the same bits on every run.
#pragma unroll 1
  for (int w = 0; w < WARPS; ++w) {
    if (warp == w) {
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float* const dst = buf + (mf * 16 + r * 8 + g) * OP + 2 * t;
#pragma unroll
          for (int j = 0; j < DT; ++j) {
            float2 x = make_float2(o_acc[mf][j][2 * r] * weight[mf][r],
                                   o_acc[mf][j][2 * r + 1] * weight[mf][r]);
            if (w > 0) {
              const float2 y = *reinterpret_cast<const float2*>(dst + j * 8);
              x.x += y.x;
              x.y += y.y;
            }
            *reinterpret_cast<float2*>(dst + j * 8) = x;
          }
        }
    }
    __syncthreads();
  }

  if constexpr (CLUSTER > 1) {
    decode::cluster_merge<T, D, BLOCK_M, WARPS, CLUSTER, DV>(args, sQ + BLOCK_M * PITCH, w_max,
                                                             w_sum, rows_valid, r0, b, kh, group,
                                                             Nq);
    return;
  }

  // Store the CTA's rows: o in T with one split, else the fp32 partial of this split. The
  // workspace keeps the [B, Hq, Nq] row order of the longest Nq (VARLEN too: rows past a
  // sequence's own count are neither written nor read).
  const bool direct = args.splits == 1;
  const int Nq_max = VARLEN ? args.seq_q : Nq;
  const long long plane = static_cast<long long>(args.batch) * args.heads_q * Nq_max;  // rows/split
  for (int id = tid; id < BLOCK_M * (D / 4); id += THREADS) {
    const int row = id / (D / 4);
    const int c = id % (D / 4);
    if (row >= rows_valid) continue;
    const int r = r0 + row;
    const int h = kh * group + r % group;
    const int qr = r / group;
    const float4 x = *reinterpret_cast<const float4*>(buf + row * OP + 4 * c);
    if (direct) {
      if (DV < D && 4 * c >= DV) continue;  // O's columns past DV are not stored
      unsigned short* o = static_cast<unsigned short*>(args.o) +
                          (VARLEN ? q_first * args.o_row_stride : b * args.o_batch_stride) +
                          h * args.o_head_stride + qr * args.o_row_stride + 4 * c;
      *reinterpret_cast<uint2*>(o) = make_uint2(pack2<T>(x.x, x.y), pack2<T>(x.z, x.w));
    } else {
      const long long at =
          split * plane + (static_cast<long long>(b) * args.heads_q + h) * Nq_max + qr;
      *reinterpret_cast<float4*>(args.part_o + at * D + 4 * c) = x;
    }
  }
  for (int row = tid; row < rows_valid; row += THREADS) {
    float m = NEG_INF, l = 0.f;
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, w_max[w * BLOCK_M + row]);
    if (m != NEG_INF)
      for (int w = 0; w < WARPS; ++w)
        l += w_sum[w * BLOCK_M + row] * exp2_approx(w_max[w * BLOCK_M + row] - m);
    const float lse = l > 0.f ? (m + log2_approx(l)) * 0.6931471805599453f : NEG_INF;
    const int r = r0 + row;
    const long long at =
        (static_cast<long long>(b) * args.heads_q + kh * group + r % group) * Nq_max + r / group;
    if (!direct)
      args.part_lse[split * plane + at] = lse;
    else if (args.lse != nullptr)  // VARLEN: [Hq, total_q]
      args.lse[VARLEN ? static_cast<long long>(kh * group + r % group) *
                                args.cu_seqlens_q[args.batch] +
                            q_first + r / group
                      : at] = lse;
  }
}

/// Merges the splits' partial O and log-sum-exp into o (and lse when set): one warp per output
/// row (b, h, query row), lane l holding elements [l * D / 32, (l + 1) * D / 32); paged or
/// varlen, only the splits that hold keys of the row's sequence (flash_decode_splits_used).
/// Varlen (args.cu_seqlens_q set: one kernel serves both, the test is per warp and uniform):
/// rows past the sequence's query count are left alone, o and lse are packed. Launch: grid
/// ceil(B * Hq * Nq / kFlashDecodeCombineWarps), kFlashDecodeCombineWarps * 32 threads.
template <typename T, int D, int DV = D>
__global__ void __launch_bounds__(kFlashDecodeCombineWarps * 32)
    flash_decode_combine(const __grid_constant__ FlashDecodeArgs args) {
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(D % 32 == 0 && D <= 256, "D must be a multiple of 32, at most 256");
  static_assert(DV % 8 == 0 && DV > 0 && DV <= D, "DV: the data's head dim, a multiple of 8 <= D");
  constexpr int PER_LANE = D / 32;
  const float NEG_INF = -__int_as_float(0x7f800000);
  constexpr float LOG2E = 1.4426950408889634f;
  const int lane = threadIdx.x & 31;
  const long long plane = static_cast<long long>(args.batch) * args.heads_q * args.seq_q;
  const long long row = static_cast<long long>(blockIdx.x) * kFlashDecodeCombineWarps +
                        (threadIdx.x >> 5);
  if (row >= plane) return;  // whole warps leave; nothing below synchronises the block
  // Launched programmatically (KernelLaunch::programmatic): the split kernel may still be running
  // until this returns; nothing it writes is read before.
  griddep_wait();
  // B * Hq * Nq <= 65535 * 256 rows (the op's bounds): 32-bit divisions, which need no call (the
  // 64-bit ones' calls made ptxas spill around them once varlen added live values).
  const int bh = static_cast<int>(row) / args.seq_q;
  const int qr = static_cast<int>(row) - bh * args.seq_q;
  const int h = bh % args.heads_q;
  const int b = bh / args.heads_q;
  // Varlen: the sequence's first packed row (-1: not varlen); rows past its query count were
  // never computed. Paged or varlen, only the splits holding keys of this sequence wrote
  // partials.
  int q_first = -1;
  int len = -1;  // the sequence's keys when sequences differ; -1: every split wrote
  if (args.cu_seqlens_q != nullptr) {
    q_first = args.cu_seqlens_q[b];
    if (qr >= flash_decode_seq_len(args.cu_seqlens_q[b + 1] - q_first, args.seq_q)) return;
    len = flash_decode_seq_len(args.cu_seqlens_k[b + 1] - args.cu_seqlens_k[b], args.seq_k);
  } else if (args.seq_lens != nullptr) {
    len = flash_decode_seq_len(args.seq_lens[b], args.seq_k);
  }
  const int splits =
      len < 0 ? args.splits : flash_decode_splits_used(len, args.split_keys, args.splits);

  float m = NEG_INF;
  for (int s = lane; s < splits; s += 32) m = fmaxf(m, args.part_lse[s * plane + row]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  float l = 0.f;
  if (m != NEG_INF)
    for (int s = lane; s < splits; s += 32)
      l += attn::exp2_approx((args.part_lse[s * plane + row] - m) * LOG2E);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
  const float inv = l > 0.f ? 1.f / l : 0.f;

  float acc[PER_LANE];
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) acc[i] = 0.f;
  for (int s0 = 0; s0 < splits; s0 += 32) {
    // Lane i holds the weight of split s0 + i; broadcast one at a time.
    const int mine = s0 + lane;
    const float w = mine < splits && m != NEG_INF
                        ? attn::exp2_approx((args.part_lse[mine * plane + row] - m) * LOG2E) * inv
                        : 0.f;
    const int count = splits - s0 < 32 ? splits - s0 : 32;
    // Groups of kFlashDecodeCombineBatch splits: every load of a group is issued before the
    // first is used, so a row costs about splits / batch memory latencies, not one per split
    // (bar 2's 16 splits took 8.6 us under ncu one load at a time, on 16 CTAs).
    int i = 0;
    for (; i + kFlashDecodeCombineBatch <= count; i += kFlashDecodeCombineBatch) {
      float x[kFlashDecodeCombineBatch][PER_LANE];
#pragma unroll
      for (int u = 0; u < kFlashDecodeCombineBatch; ++u)
        decode::load_lane_row<PER_LANE>(
            x[u], args.part_o + ((s0 + i + u) * plane + row) * D + lane * PER_LANE);
#pragma unroll
      for (int u = 0; u < kFlashDecodeCombineBatch; ++u) {
        const float ws = __shfl_sync(0xffffffffu, w, i + u);
#pragma unroll
        for (int e = 0; e < PER_LANE; ++e) acc[e] += ws * x[u][e];
      }
    }
    for (; i < count; ++i) {
      float x[PER_LANE];
      decode::load_lane_row<PER_LANE>(
          x, args.part_o + ((s0 + i) * plane + row) * D + lane * PER_LANE);
      const float ws = __shfl_sync(0xffffffffu, w, i);
#pragma unroll
      for (int e = 0; e < PER_LANE; ++e) acc[e] += ws * x[e];
    }
  }

  // [B, Hq, Nq] through the strides, or varlen packed [total_q, Hq] (lse [Hq, total_q]).
  T* o = static_cast<T*>(args.o) +
         (q_first < 0 ? b * args.o_batch_stride + qr * args.o_row_stride
                      : static_cast<long long>(q_first + qr) * args.o_row_stride) +
         h * args.o_head_stride + lane * PER_LANE;
  decode::store_lane_row_upto<T, PER_LANE, DV>(o, acc, lane);
  if (args.lse != nullptr && lane == 0)
    args.lse[q_first < 0 ? row
                         : static_cast<long long>(h) * args.cu_seqlens_q[args.batch] + q_first +
                               qr] = m != NEG_INF ? m + logf(l) : NEG_INF;
}

}  // namespace ktune
