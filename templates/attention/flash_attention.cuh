// Flash attention forward with mma.sync tensor-core tiles (sm_80 and later; Hopper runs it too,
// a wgmma/TMA variant would sit beside this file as flash_attention_sm90.cuh).
//
// One CTA computes BLOCK_M query rows of one (batch, head): Q stays resident (in registers or in
// shared memory) while K and V tiles of BLOCK_N rows stream through a STAGES-deep cp.async ring.
// Per tile: S = Q K^T on the tensor cores, online softmax in fp32 on the accumulator fragments
// (exp2 with scale * log2(e) folded into one FFMA), and O += P V with P converted to 16 bits in
// registers and fed straight back as the A operand. Each warp owns 16 * MF whole query rows, so
// row max and row sum need only shuffles inside a quad.
#pragma once

#include "attention/args.h"
#include "attention/mma.cuh"
#include "common/types.cuh"

namespace ktune {
namespace attn {

/// Shared-memory layout of a [rows][D] tile of 16-bit elements. The 8 row addresses of one
/// ldmatrix phase (8 consecutive rows, one 16-byte chunk) must hit 8 distinct 16-byte bank groups:
/// - PAD = false: rows of D * 2 bytes, the chunk index XOR'd with a row swizzle: row & 7 for rows
///   of 8k chunks; bits 1-2 of the row for rows of 4 or 12 chunks (two rows per 128-byte line).
///   The swizzle only depends on row & 7.
/// - PAD = true: rows of D * 2 + 16 bytes, no XOR: 6 % more shared memory, but every ldmatrix
///   address is one lane register plus an immediate, which frees registers at 255.
template <int D, bool PAD>
struct Tile {
  static constexpr int PITCH = D * 2 + (PAD ? 16 : 0);  // bytes per row
  __device__ static __forceinline__ int swizzle(int row) {
    return PAD ? 0 : (D / 8) % 8 == 0 ? (row & 7) : ((row >> 1) & 3);
  }
  /// Byte offset of 16-byte chunk `chunk` of row `row`.
  __device__ static __forceinline__ unsigned offset(int row, int chunk) {
    return static_cast<unsigned>(row * PITCH + ((chunk ^ swizzle(row)) << 4));
  }
  /// Byte offset of logical chunk `c` (even, a compile-time constant after unrolling) for a lane
  /// whose odd-chunk bit and row swizzle are folded into `x` (< 8; 0 with PAD, where the lane's
  /// odd-chunk bit lives in its base address). Splitting at 8 keeps a few lane constants.
  __device__ static __forceinline__ unsigned chunk(int c, int x) {
    return PAD ? static_cast<unsigned>(c << 4)
               : static_cast<unsigned>(((c & ~7) | ((c & 7) ^ x)) << 4);
  }
};

/// Copies rows [0, ROWS) of a global matrix of 16-bit elements with `row_stride` into a swizzled
/// shared tile at `dst`; rows >= `rows_valid` are zero-filled without being read. DV: the
/// matrix's columns (a multiple of 8, at most D); the tile's columns from DV on are zero-filled
/// without being read (a head dim that runs in a wider tile's kernel: zeros add nothing to Q K^T,
/// and O's columns past DV are never stored).
template <typename T, int D, bool PAD, int ROWS, int THREADS, int DV = D>
__device__ __forceinline__ void load_tile(unsigned dst, const T* src, long long row_stride,
                                          int rows_valid, int tid) {
  static_assert(DV % 8 == 0 && DV > 0 && DV <= D, "DV: a multiple of 8 in (0, D]");
  constexpr int CHUNKS = D / 8;
  constexpr int STEP = THREADS / CHUNKS;  // rows one pass of the CTA covers
  using L = Tile<D, PAD>;
  if constexpr (THREADS % CHUNKS == 0 && (PAD || STEP % 8 == 0) && ROWS % STEP == 0) {
    // Each thread keeps one chunk column and walks down the tile by STEP rows: one pointer,
    // one 64-bit step and an immediate smem offset (the swizzle repeats every 8 rows). Only a
    // partial last tile pays for predicates.
    const int row0 = tid / CHUNKS;
    const unsigned d0 = dst + L::offset(row0, tid % CHUNKS);
    // 32-bit offset inside the tile (ROWS * row_stride < 2^31, checked by the host).
    const T* p = src + (row0 * static_cast<int>(row_stride) + (tid % CHUNKS) * 8);
    const long long step = STEP * row_stride;
    const bool col = DV == D || (tid % CHUNKS) * 8 < DV;  // this thread's chunk column exists
    if (DV == D && rows_valid >= ROWS) {
#pragma unroll
      for (int i = 0; i < ROWS / STEP; ++i) {
        cp_async_16(d0 + i * STEP * L::PITCH, p);
        p += step;
      }
    } else {
#pragma unroll
      for (int i = 0; i < ROWS / STEP; ++i) {
        const bool ok = col && row0 + i * STEP < rows_valid;
        cp_async_16(d0 + i * STEP * L::PITCH, ok ? p : src, ok ? 16 : 0);
        p += step;
      }
    }
  } else {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int i = 0; i < (TOTAL + THREADS - 1) / THREADS; ++i) {
      const int id = tid + i * THREADS;
      if (TOTAL % THREADS == 0 || id < TOTAL) {
        const int row = id / CHUNKS;
        const int chunk = id % CHUNKS;
        const bool ok = row < rows_valid && (DV == D || chunk * 8 < DV);
        const T* p = ok ? src + row * row_stride + chunk * 8 : src;
        cp_async_16(dst + L::offset(row, chunk), p, ok ? 16 : 0);
      }
    }
  }
}

/// load_tile for a paged K/V cache (args.h): rows [0, ROWS) of the tile whose first key is key0
/// from the pool at `src` (the KV head's first element; rows `row_stride` elements apart inside a
/// page), `pages` the tile's page ids (common/paged_kv.h: one, or ROWS / PAGE); rows >=
/// `rows_valid` are zero-filled without reading the ids or the pool. Each page's rows are a
/// contiguous load_tile from the page's first row (a tile inside one page: from key0's row), so
/// the copy costs the registers of a contiguous one.
template <typename T, int D, bool PAD, int ROWS, int THREADS, int PAGE, int DV = D>
__device__ __forceinline__ void load_tile_paged(unsigned dst, const T* src, long long row_stride,
                                                const int* pages, long long key0, int rows_valid,
                                                int tid) {
  if constexpr (PAGE >= ROWS) {
    const long long row = rows_valid > 0 ? static_cast<long long>(pages[0]) * PAGE + key0 % PAGE
                                         : 0;
    load_tile<T, D, PAD, ROWS, THREADS, DV>(dst, src + row * row_stride, row_stride, rows_valid,
                                            tid);
  } else {
    // PAGE rows per page, a multiple of 8: the row swizzle repeats every page. Not unrolled:
    // one page's addresses live at a time (unrolled, the 16-key pages of d=128 spilled at 255
    // registers on sm_80).
#pragma unroll 1
    for (int s = 0; s < ROWS / PAGE; ++s) {
      const int left = rows_valid - s * PAGE;
      const long long row = left > 0 ? static_cast<long long>(pages[s]) * PAGE : 0;
      load_tile<T, D, PAD, PAGE, THREADS, DV>(dst + s * PAGE * Tile<D, PAD>::PITCH,
                                              src + row * row_stride, row_stride, left, tid);
    }
  }
}

/// Pairwise reduction of t[0, 2W) into t[0] (max or sum): depth log2(2W) instead of 2W.
template <int W, int N>
__device__ __forceinline__ float tree_max(float (&t)[N]) {
#pragma unroll
  for (int j = 0; j < W; ++j) t[j] = fmaxf(t[j], t[j + W]);
  if constexpr (W > 1) {
    return tree_max<W / 2>(t);
  } else {
    return t[0];
  }
}

template <int W, int N>
__device__ __forceinline__ float tree_sum(float (&t)[N]) {
#pragma unroll
  for (int j = 0; j < W; ++j) t[j] += t[j + W];
  if constexpr (W > 1) {
    return tree_sum<W / 2>(t);
  } else {
    return t[0];
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace attn

/// O = softmax(scores + mask) V and, when args.lse is set, the natural-log log-sum-exp of each
/// row of scores, where scores = scale * Q K^T, then cap * tanh(scores / cap) with SOFTCAP, then
/// minus slope[h] * |j - i'| with ALIBI (i' = i + Nk - Nq, the row aligned bottom-right). Masks:
/// CAUSAL keeps keys j <= i'; WINDOW keeps keys j > i' - args.window (a left window, alone or
/// with CAUSAL, as FlashAttention's window (left, -1) or (left, 0)). A row that sees no key gets
/// O = 0 and LSE = -inf. With WINDOW, K/V tiles wholly left of every row's window are neither
/// loaded nor computed: a CTA walks about (window + BLOCK_M) / BLOCK_N tiles whatever Nk is.
///
/// T: bf16 or fp16. D: head dimension. BLOCK_M x BLOCK_N: query rows per CTA x key rows per
/// tile. WARPS: each owns BLOCK_M / WARPS query rows (16 or 32). STAGES: depth of the K/V ring.
/// Q_IN_REGS: Q fragments loaded once into registers (true) or re-read from shared memory for
/// every tile (false; fewer registers, for large D or 32 rows per warp). MIN_CTAS: CTAs per SM
/// promised to the register allocator (__launch_bounds__); 1 lets it use up to 255 registers.
/// SMEM_PAD: padded rows instead of XOR swizzle in shared memory (see Tile). WINDOW, SOFTCAP,
/// ALIBI: the mask variants above (args.window, args.softcap, args.alibi_slopes); off, the
/// kernel is the same code as without them. VARLEN: a variable-length batch (args.h): each CTA
/// reads its sequence's offsets, leaves at once when its row tile starts past the sequence's
/// queries, and applies every rule above with the sequence's own Nq and Nk; lse is [Hq, total_q].
/// PAGE: 0, or the page size of a paged K/V cache (args.h): K/V rows are copied through the
/// block table, each sequence has its own key count (seq_lens) to which every rule is aligned,
/// and the page ids of the tile loaded next are read one tile ahead into a shared slot (as
/// flash_decode's split kernel does), so that no copy waits on the table.
///
/// Launch: grid (flash_attention_grid_x(Nq, BLOCK_M), B * Hq), WARPS * 32 threads,
/// flash_attention_smem_bytes(D, BLOCK_M, BLOCK_N, STAGES, SMEM_PAD, PAGE) bytes of dynamic shared
/// memory (raise the kernel's dynamic limit first above 48 KiB). Measured best on H100: D=128
/// <128, 64, 4, 2, Q_IN_REGS=false>, D=64 <128, 64, 4, 2, true> (benchmarks/attention/NOTES.md).
template <typename T, int D, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, bool CAUSAL,
          bool Q_IN_REGS = true, int MIN_CTAS = 1, bool SMEM_PAD = false, bool WINDOW = false,
          bool SOFTCAP = false, bool ALIBI = false, bool VARLEN = false, int PAGE = 0, int DV = D>
__global__ void __launch_bounds__(WARPS * 32, MIN_CTAS)
    flash_attention_fwd(const __grid_constant__ FlashAttentionArgs args) {
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(D == 32 || D == 64 || D == 96 || D == 128 || D == 256, "unsupported head dim");
  static_assert(DV % 8 == 0 && DV > 0 && DV <= D, "DV: the data's head dim, a multiple of 8 <= D");
  static_assert(BLOCK_M == 64 || BLOCK_M == 128 || BLOCK_M == 256, "BLOCK_M: 64, 128, 256");
  static_assert(BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N must be 32, 64, 128");
  static_assert(WARPS == 4 || WARPS == 8, "WARPS must be 4 or 8");
  static_assert(BLOCK_M % (16 * WARPS) == 0, "BLOCK_M must be a multiple of 16 * WARPS");
  static_assert(BLOCK_M / (16 * WARPS) <= 2, "at most two 16-row fragments per warp");
  static_assert(STAGES >= 2 && STAGES <= 4, "STAGES must be 2, 3 or 4");
  static_assert(MIN_CTAS >= 1 && MIN_CTAS * WARPS <= 64, "MIN_CTAS out of range");
  static_assert(flash_attention_smem_bytes(D, BLOCK_M, BLOCK_N, STAGES, SMEM_PAD, PAGE) <=
                    227 * 1024,
                "shared memory above 227 KiB");
  static_assert(PAGE == 0 || PAGE == 16 || PAGE == 32 || PAGE == 64 || PAGE == 128 ||
                    PAGE == 256,
                "PAGE: 0 (contiguous), 16, 32, 64, 128 or 256");

  using namespace attn;
  constexpr int THREADS = WARPS * 32;
  constexpr int MF = BLOCK_M / (16 * WARPS);  // 16-row fragments per warp
  constexpr int NT = BLOCK_N / 8;             // n8 column tiles of S
  constexpr int DT = D / 8;                   // n8 column tiles of O
  constexpr int QK_STEPS = D / 16;            // k16 steps of Q K^T
  constexpr int PV_STEPS = BLOCK_N / 16;      // k16 steps of P V
  using L = Tile<D, SMEM_PAD>;
  constexpr int ROW_BYTES = L::PITCH;
  constexpr unsigned Q_BYTES = BLOCK_M * ROW_BYTES;
  constexpr unsigned KV_BYTES = BLOCK_N * ROW_BYTES;

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sQ = smem_addr(smem);
  const unsigned sK = sQ + Q_BYTES;
  const unsigned sV = sK + STAGES * KV_BYTES;
  // Paged: two slots of SLOTS page ids, those of the next tile to load, after the ring.
  constexpr int SLOTS = PAGE > 0 ? paged_kv_slots(BLOCK_N, PAGE) : 1;
  int* const s_pages = reinterpret_cast<int*>(smem + Q_BYTES + 2 * STAGES * KV_BYTES);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  int Nq = args.seq_q;  // VARLEN: the sequence's own lengths, set below
  int Nk = args.seq_k;
  // Which (query block, batch*head) this CTA computes. Non-causal: blockIdx as launched, query
  // blocks fastest, so the CTAs in flight share one head's K/V in L2. Causal: work grows with the
  // query block, so CTAs are taken longest first over all heads (LPT, in dispatch order, x
  // fastest). Head-major order started a heavy block of the last head near the end (~1.3x the
  // ideal makespan at N = 4-8k); LPT restricted to L2-sized head groups did the same with the
  // last group. L2 still serves K/V: the CTAs of one head in flight started together and walk
  // the same K/V tiles in step.
  int m_block = blockIdx.x;
  int bh = blockIdx.y;
  if constexpr (CAUSAL) {
    const int linear = blockIdx.y * gridDim.x + blockIdx.x;
    m_block = gridDim.x - 1 - linear / gridDim.y;
    bh = linear % gridDim.y;
  }
  const int m0 = m_block * BLOCK_M;
  const int b = bh / args.heads_q;
  const int h = bh % args.heads_q;
  const int hk = h / (args.heads_q / args.heads_kv);
  // VARLEN: sequence b's first rows in the packed arrays and its lengths. The grid is sized for
  // the longest sequence, so a tile starting past this one's queries has nothing to do (nothing
  // below has synchronised yet, and the whole CTA leaves).
  // Paged: the keys are the sequence's own count, read from seq_lens.
  int q_first = 0, k_first = 0;
  if constexpr (VARLEN) {
    q_first = args.cu_seqlens_q[b];
    Nq = args.cu_seqlens_q[b + 1] - q_first;
    if constexpr (PAGE == 0) {
      k_first = args.cu_seqlens_k[b];
      Nk = args.cu_seqlens_k[b + 1] - k_first;
    }
  }
  if constexpr (PAGE > 0) Nk = paged_kv_seq_len(args.seq_lens[b], args.seq_k);
  if constexpr (VARLEN)
    if (m0 >= Nq) return;

  const T* q = static_cast<const T*>(args.q) +
               (VARLEN ? q_first * args.q_row_stride : b * args.q_batch_stride) +
               h * args.q_head_stride + m0 * args.q_row_stride;
  // Paged: the pools' first row of this KV head (pages are addressed from there).
  const T* k = static_cast<const T*>(args.k) +
               (PAGE > 0 ? 0 : VARLEN ? k_first * args.k_row_stride : b * args.k_batch_stride) +
               hk * args.k_head_stride;
  const T* v = static_cast<const T*>(args.v) +
               (PAGE > 0 ? 0 : VARLEN ? k_first * args.v_row_stride : b * args.v_batch_stride) +
               hk * args.v_head_stride;
  // Paged: tile n's block table entries (its first page id), and page id `slot` of tile n, or 0
  // past the sequence (never used: those rows are zeroed).
  const int* table = PAGE > 0 ? args.block_table + static_cast<long long>(b) * args.pages_per_seq
                              : nullptr;
  constexpr int PG = PAGE > 0 ? PAGE : 1;
  const auto table_at = [&](int n) { return table + static_cast<long long>(n) * BLOCK_N / PG; };
  const auto page_id = [&](int n, int slot) {
    const long long first = static_cast<long long>(n) * BLOCK_N / PG + slot;
    return first * PG < Nk ? table[first] : 0;
  };
  // K and V tile n into ring stage st; paged, `pages` holds its page ids.
  const auto load_kv = [&](int n, int st, const int* pages) {
    const long long r = static_cast<long long>(n) * BLOCK_N;
    if constexpr (PAGE > 0) {
      load_tile_paged<T, D, SMEM_PAD, BLOCK_N, THREADS, PAGE, DV>(
          sK + st * KV_BYTES, k, args.k_row_stride, pages, r, Nk - n * BLOCK_N, tid);
      load_tile_paged<T, D, SMEM_PAD, BLOCK_N, THREADS, PAGE, DV>(
          sV + st * KV_BYTES, v, args.v_row_stride, pages, r, Nk - n * BLOCK_N, tid);
    } else {
      load_tile<T, D, SMEM_PAD, BLOCK_N, THREADS, DV>(sK + st * KV_BYTES,
                                                      k + r * args.k_row_stride,
                                                      args.k_row_stride, Nk - n * BLOCK_N, tid);
      load_tile<T, D, SMEM_PAD, BLOCK_N, THREADS, DV>(sV + st * KV_BYTES,
                                                      v + r * args.v_row_stride,
                                                      args.v_row_stride, Nk - n * BLOCK_N, tid);
    }
  };

  // Tiles [0, n_full) need no mask; [n_full, n_end) are partial or cut by the diagonal; tiles
  // past n_end are fully masked for every row of this CTA and skipped.
  int n_end = (Nk + BLOCK_N - 1) / BLOCK_N;
  int n_full = Nk / BLOCK_N;
  if (CAUSAL) {
    const int diag = m0 + Nk - Nq;  // last key the CTA's first row sees
    const int last = min(m0 + BLOCK_M, Nq) - 1 + Nk - Nq;
    n_end = last < 0 ? 0 : min(n_end, last / BLOCK_N + 1);
    n_full = diag + 1 <= 0 ? 0 : min(n_full, (diag + 1) / BLOCK_N);
  }
  // Sliding window: tiles [0, n_begin) lie left of the first row's window, so of every row's,
  // and are skipped; [n_begin, n_low) hold keys left of the last row's window, which need the
  // mask. Without WINDOW both stay 0.
  int n_begin = 0;
  int n_low = 0;
  if constexpr (WINDOW) {
    const int first_lo = m0 + Nk - Nq - args.window + 1;  // first key the first row sees
    const int last_lo = min(m0 + BLOCK_M, Nq) - 1 + Nk - Nq - args.window + 1;
    n_begin = first_lo <= 0 ? 0 : min(n_end, first_lo / BLOCK_N);
    n_low = last_lo <= 0 ? n_begin : min(n_end, (last_lo + BLOCK_N - 1) / BLOCK_N);
  }

  // Prologue: Q as its own group, then the first STAGES - 1 K/V tiles.
  load_tile<T, D, SMEM_PAD, BLOCK_M, THREADS, DV>(sQ, q, args.q_row_stride, Nq - m0, tid);
  cp_async_commit();
  // Paged: the prologue's tiles read their ids from the block table; the first tile step's from
  // its slot, written here (the step's barrier orders it).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s, table_at(n_begin + s));
    cp_async_commit();
  }
  if constexpr (PAGE > 0) {
    const int m = n_begin + STAGES - 1;
    if (tid < SLOTS && m < n_end) s_pages[(m & 1) * SLOTS + tid] = page_id(m, tid);
  }

  // Lane constants of the ldmatrix addresses (see the fragment layouts in mma.cuh).
  // Each lane addresses one row and an odd or even chunk; with PAD the odd-chunk bit goes into the
  // lane base, otherwise into the XOR term with the row swizzle.
  const int sw = L::swizzle(lane & 7);
  const int q_hi = lane >> 4, k_hi = (lane >> 3) & 1, v_hi = lane >> 4;
  const unsigned q_lane =
      sQ + (warp * 16 * MF + (lane & 15)) * ROW_BYTES + (SMEM_PAD ? q_hi << 4 : 0);
  const unsigned k_lane =
      ((lane & 7) + ((lane >> 4) << 3)) * ROW_BYTES + (SMEM_PAD ? k_hi << 4 : 0);
  const unsigned v_lane =
      ((lane & 7) + (((lane >> 3) & 1) << 3)) * ROW_BYTES + (SMEM_PAD ? v_hi << 4 : 0);
  const int q_x = SMEM_PAD ? 0 : q_hi ^ sw;
  const int k_x = SMEM_PAD ? 0 : k_hi ^ sw;
  const int v_x = SMEM_PAD ? 0 : v_hi ^ sw;

  unsigned qf[Q_IN_REGS ? MF : 1][Q_IN_REGS ? QK_STEPS : 1][4];
  if constexpr (Q_IN_REGS) {
    cp_async_wait<STAGES - 1>();
    __syncthreads();
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int kk = 0; kk < QK_STEPS; ++kk)
        ldmatrix_x4(q_lane + mf * 16 * ROW_BYTES + L::chunk(2 * kk, q_x), qf[mf][kk][0],
                    qf[mf][kk][1], qf[mf][kk][2], qf[mf][kk][3]);
  }

  const float scale_log2 = args.scale * 1.4426950408889634f;
  // SOFTCAP and ALIBI turn the scores into log2-domain logits right after Q K^T (the cap and the
  // bias apply to scaled scores), so the softmax then multiplies by 1; otherwise the scale is
  // folded into the softmax's FFMA. lse_scale takes a row max back to natural-log units.
  constexpr bool LOGITS = SOFTCAP || ALIBI;
  const float softmax_scale = LOGITS ? 1.f : scale_log2;
  const float lse_scale = LOGITS ? 0.6931471805599453f : args.scale;
  float cap_in = 0.f, cap_out = 0.f, slope_log2 = 0.f;
  if constexpr (SOFTCAP) {
    cap_in = args.scale / args.softcap;              // tanh's argument: score / cap
    cap_out = args.softcap * 1.4426950408889634f;    // cap in log2 units
  }
  if constexpr (ALIBI) slope_log2 = args.alibi_slopes[h] * 1.4426950408889634f;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair
  const int row_base = m0 + warp * 16 * MF + g;
  const int warp_last_row = m0 + warp * 16 * MF + 16 * MF - 1;

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
      row_max[mf][r] = -__int_as_float(0x7f800000);
      row_sum[mf][r] = 0.f;
    }
  }

  int stage = 0;
  // One tile of the main loop; MASK says whether scores need the bounds/causal mask. The loop
  // body exists twice so that the mask's live values never weigh on the unmasked tiles.
  auto tile = [&](const int n, const bool MASK, const bool COMPUTE) {
    // Tile n has landed for every thread once this thread's older groups are done and the
    // barrier passes; the barrier also retires every read of tile n - 1, whose stage the copy
    // issued just below overwrites.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    // Paged: tile nl's ids are in slot nl & 1 (stored before the barrier above); the ids of
    // tile nl + 1 are read now and stored to the other slot at the end of this step, which no
    // thread reads before the next step's barrier (its last reader, tile nl - 1's copy, is
    // behind this step's).
    const int nl = n + STAGES - 1;
    if (nl < n_end) load_kv(nl, stage == 0 ? STAGES - 1 : stage - 1, s_pages + (nl & 1) * SLOTS);
    cp_async_commit();
    [[maybe_unused]] int next_page = 0;
    if constexpr (PAGE > 0)
      if (tid < SLOTS && nl + 1 < n_end) next_page = page_id(nl + 1, tid);
    const unsigned k_stage = sK + stage * KV_BYTES + k_lane;
    const unsigned v_stage = sV + stage * KV_BYTES + v_lane;

    if (COMPUTE) {
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
        for (int mf = 0; mf < MF; ++mf) {
          if constexpr (Q_IN_REGS) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[mf][e] = qf[mf][kk][e];
          } else {
            ldmatrix_x4(q_lane + mf * 16 * ROW_BYTES + L::chunk(2 * kk, q_x), a[mf][0],
                        a[mf][1], a[mf][2], a[mf][3]);
          }
        }
#pragma unroll
        for (int nn = 0; nn < NT / 2; ++nn) {
          unsigned b0, b1, b2, b3;
          ldmatrix_x4(k_stage + nn * 16 * ROW_BYTES + L::chunk(2 * kk, k_x), b0, b1, b2, b3);
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            mma_16816<T>(s[mf][2 * nn], a[mf], b0, b1);
            mma_16816<T>(s[mf][2 * nn + 1], a[mf], b2, b3);
          }
        }
      }

      if constexpr (LOGITS) {
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            // Column minus aligned row, as a float (exact below 2^24) for ALiBi's distance.
            const float dist0 =
                static_cast<float>(n * BLOCK_N + 2 * t - (row_base + mf * 16 + r * 8 + Nk - Nq));
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
        // Keys past Nk, for causal keys past each row's diagonal, and with a window keys left of
        // it, score -inf.
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_base + mf * 16 + r * 8;
            const int limit = CAUSAL ? min(Nk, row + Nk - Nq + 1) : Nk;
            const int lim = limit - n * BLOCK_N - 2 * t;  // first masked column of this thread
            if constexpr (WINDOW) {
              // First column of this thread inside the row's window.
              const int low = row + Nk - Nq - args.window + 1 - n * BLOCK_N - 2 * t;
#pragma unroll
              for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                  if (j * 8 + e >= lim || j * 8 + e < low)
                    s[mf][j][2 * r + e] = -__int_as_float(0x7f800000);
            } else {
#pragma unroll
              for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                  if (j * 8 + e >= lim) s[mf][j][2 * r + e] = -__int_as_float(0x7f800000);
            }
          }
      }

      // Online softmax. The reference max of a row moves only when the tile max exceeds it by
      // more than 2^RESCALE_LOG2 in exp2 units; otherwise the stale max is kept and P may reach
      // 2^RESCALE_LOG2, harmless in fp32 sums and 16-bit P (same relative precision), and exact
      // after the final division since row_sum uses the same reference. O is rescaled only when
      // some row of the warp moved, which after the first tiles is rare.
      constexpr float RESCALE_LOG2 = 8.f;
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // Tree reductions: short dependency chains while the other warps keep the tensor pipe.
          float t[NT];
#pragma unroll
          for (int j = 0; j < NT; ++j) t[j] = fmaxf(s[mf][j][2 * r], s[mf][j][2 * r + 1]);
          const float mx = quad_max(tree_max<NT / 2>(t));
          const float m_old = row_max[mf][r];
          // True when m_old = -inf and mx is finite; false (NaN) while the row is fully masked.
          const bool move = mx * softmax_scale - m_old * softmax_scale > RESCALE_LOG2;
          if (__any_sync(0xffffffffu, move)) {
            const float alpha =
                move ? exp2_approx(m_old * softmax_scale - mx * softmax_scale) : 1.f;
            row_max[mf][r] = move ? mx : m_old;
            row_sum[mf][r] *= alpha;
#pragma unroll
            for (int j = 0; j < DT; ++j) {
              o_acc[mf][j][2 * r] *= alpha;
              o_acc[mf][j][2 * r + 1] *= alpha;
            }
          }
          // A row with every score masked so far keeps max -inf; offset 0 keeps exp2 at 0.
          const float offset = row_max[mf][r] == -__int_as_float(0x7f800000)
                                   ? 0.f
                                   : row_max[mf][r] * softmax_scale;
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            s[mf][j][2 * r] = exp2_approx(s[mf][j][2 * r] * softmax_scale - offset);
            s[mf][j][2 * r + 1] = exp2_approx(s[mf][j][2 * r + 1] * softmax_scale - offset);
            t[j] = s[mf][j][2 * r] + s[mf][j][2 * r + 1];
          }
          row_sum[mf][r] += tree_sum<NT / 2>(t);
        }

      // O += P V: the S accumulator of n8 tiles 2kk and 2kk+1 is exactly the A fragment of k16
      // step kk once packed to 16 bits.
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
        for (int dd = 0; dd < DT / 2; ++dd) {
          unsigned b0, b1, b2, b3;
          ldmatrix_x4_trans(v_stage + kk * 16 * ROW_BYTES + L::chunk(2 * dd, v_x), b0, b1, b2,
                            b3);
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            mma_16816<T>(o_acc[mf][2 * dd], a[mf], b0, b1);
            mma_16816<T>(o_acc[mf][2 * dd + 1], a[mf], b2, b3);
          }
        }
      }
    }
    if constexpr (PAGE > 0)
      if (tid < SLOTS && nl + 1 < n_end) s_pages[((nl + 1) & 1) * SLOTS + tid] = next_page;
    stage = stage + 1 == STAGES ? 0 : stage + 1;
  };
  int n = 0;
  if constexpr (WINDOW) {
    // Tiles left of the window of some row: a warp computes those that reach its first row's
    // window (rows only move right, as on the diagonal), and only copies the others.
    const int warp_lo = m0 + warp * 16 * MF + Nk - Nq - args.window + 1;
    const int n_warp_begin = warp_lo <= 0 ? 0 : warp_lo / BLOCK_N;
    for (n = n_begin; n < n_low; ++n) tile(n, true, n >= n_warp_begin);
  }
  for (; n < n_full; ++n) tile(n, false, true);
  // In diagonal tiles past the last key of this warp's last row, the warp's scores would all be
  // -inf: it only takes part in the barriers and the copies (tiles only move right).
  int n_warp_end = n_end;
  if (CAUSAL) {
    const int last = warp_last_row + Nk - Nq;
    n_warp_end = max(n_full, min(n_end, last < 0 ? 0 : last / BLOCK_N + 1));
  }
  for (; n < n_warp_end; ++n) tile(n, true, true);
  for (; n < n_end; ++n) tile(n, true, false);

  // Epilogue. Every copy must have landed (with n_end = 0 the Q copies may still be in flight)
  // before the Q tile is reused to stage O.
  cp_async_wait<0>();
  __syncthreads();

  T* o = static_cast<T*>(args.o) +
         (VARLEN ? q_first * args.o_row_stride : b * args.o_batch_stride) +
         h * args.o_head_stride;
  // VARLEN: lse is [Hq, total_q], the sequence's rows from q_first.
  const long long lse_base =
      VARLEN ? static_cast<long long>(h) * args.cu_seqlens_q[args.batch] + q_first
             : (static_cast<long long>(b) * args.heads_q + h) * Nq;
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(row_sum[mf][r]);
      const float inv = sum > 0.f ? rcp_approx(sum) : 0.f;
      const int row = row_base + mf * 16 + r * 8;
      if (args.lse != nullptr && t == 0 && row < Nq)
        args.lse[lse_base + row] =
            sum > 0.f ? row_max[mf][r] * lse_scale + log2_approx(sum) * 0.6931471805599453f
                      : -__int_as_float(0x7f800000);
      const int srow = warp * 16 * MF + mf * 16 + r * 8 + g;
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        const unsigned packed = pack2<T>(o_acc[mf][j][2 * r] * inv, o_acc[mf][j][2 * r + 1] * inv);
        *reinterpret_cast<unsigned*>(smem + L::offset(srow, j) + 4 * t) = packed;
      }
    }
  __syncwarp();

  // Each warp stores its own rows with 16-byte accesses.
  constexpr int WARP_ROWS = 16 * MF;
  constexpr int CHUNKS = D / 8;
  constexpr int WARP_CHUNKS = WARP_ROWS * CHUNKS;
#pragma unroll
  for (int i = 0; i < WARP_CHUNKS / 32; ++i) {
    const int id = lane + i * 32;
    const int row = id / CHUNKS;
    const int chunk = id % CHUNKS;
    const int srow = warp * WARP_ROWS + row;
    const int grow = m0 + srow;
    if (grow < Nq && (DV == D || chunk * 8 < DV)) {  // O's columns past DV are not stored
      const uint4 val = *reinterpret_cast<const uint4*>(smem + L::offset(srow, chunk));
      *reinterpret_cast<uint4*>(o + grow * args.o_row_stride + chunk * 8) = val;
    }
  }
}

}  // namespace ktune
