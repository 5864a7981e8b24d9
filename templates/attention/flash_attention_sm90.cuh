// Flash attention forward for Hopper (sm_90a): the copy engine (TMA) streams Q, K and V into
// 128-byte-swizzled shared tiles, warpgroup MMAs (wgmma) compute both products, and the block is
// warp-specialised: warpgroup 0 is the producer (one elected thread issues every copy; the
// group gives its registers away with setmaxnreg), warpgroups 1..CONSUMERS each own 64 query
// rows and compute.
//
// Per K/V tile of BLOCK_N keys, each consumer warpgroup:
//   S = Q K^T     m64 x BLOCK_N x D: A = its Q rows, B = the K tile, both K-major in shared memory
//                 (wg::MmaSS, D / 16 k16 steps);
//   online softmax on the fp32 accumulators in registers (scores to log2-domain logits, masks,
//                 row max over the quad that shares a row, exp2, row sums);
//   O += P V      m64 x D x BLOCK_N: A = P, rounded to 16 bits in place (the accumulator layout
//                 of S is the register layout of A, wg::MmaRSTransB), B = the V tile read
//                 MN-major (its rows are the product's K), BLOCK_N / 16 k16 steps;
// then releases the stage to the producer. The producer fills a ring of STAGES K/V slots: per
// slot one barrier for K and one for V (so Q K^T starts while V still lands) and one "empty"
// barrier on which every consumer warp arrives when it is done with the slot.
//
// KV_APART (contiguous K/V, the TMA producer): a second "empty" barrier per slot, so that a
// slot's K is freed once its Q K^T has retired and its V once P V has. With one slot freed after
// P V, a 2-stage ring asks for tile j + 2 only after P V of tile j, just before Q K^T of j + 2
// needs it: its latency is exposed every tile (d=256 with two consumers fits only 2 stages).
// Freed apart, K of j + 2 loads while the consumers still run tile j + 1's softmax.
//
// Semantics are flash_attention_fwd's (flash_attention.cuh): bottom-right causal alignment, a
// left window, soft-capping, ALiBi, rows without any visible key give O = 0 and LSE = -inf.
// Q, K and V are read through tensor maps (args_sm90.h), so rows past Nq or Nk arrive as zeros;
// keys past Nk are masked, rows past Nq are not written. Not here (the host gives reasons):
// D other than 64/96/128/256.
//
// D = 96 (16-bit): the tiles keep the 128-byte column blocks of D = 128 (Layout), the products
// read only the 96 columns: Q K^T in 6 k16 steps (4 in the first block, 2 in the second), and
// O += P V as m64n96k16, whose MN-major B spans a block and a half.
//
// VARLEN (variable-length batches, args.h: packed rows, cu_seqlens): the host cannot know how
// many rows the packed tensors hold (the offsets live on the GPU), so no tensor map could bound
// them, and a tile that runs past the last sequence would read past the allocation. The producer
// warpgroup's 128 threads copy the tiles instead, 16 bytes per cp.async into the same swizzled
// layout, zeros past the sequence's own rows, and arrive on the slot's barrier when their copies
// land (cp.async.mbarrier.arrive.noinc: the barriers count 128 arrivals); the consumers order
// those generic-proxy writes before their wgmmas read them (fence.proxy.async). One item per CTA
// (not PERSISTENT), 16-bit types.
//
// PAGE > 0 (a paged K/V cache, args.h: pools of pages through a block table, each sequence's
// own key count in seq_lens): the K and V maps are 4-D over the pools (d, head, row in the page,
// page), and the producer reads a tile's page ids from the block table and loads the tile one
// page at a time (a page of BLOCK_N keys or more: one box of BLOCK_N rows); Q by its own map. The
// rows of a sequence's last tile past its keys hold whatever the pool does there (another
// sequence's keys, or NaN in never-written memory): K's are masked, but P V would multiply
// them by zero, so that tile's V is copied by the producer's 128 threads with zeros past the
// keys (as VARLEN copies). The K and V barriers then count 128 arrivals (the leader's
// expect_tx and 127 plain ones, or 128 cp.async arrivals). With VARLEN (a paged varlen batch:
// Q and O packed by cu_seqlens_q, key counts from seq_lens) the producer's threads copy every
// tile, each row from its page.
//
// FP8 (T = e4m3, D = 128 or 256, BLOCK_N = 128): Q and K as above (a 128-byte swizzled row holds
// 128 elements, a k32 step is 32 bytes), scores m64nNk32. wgmma reads e4m3 operands K-major
// only, so O += P V takes V transposed: the v map reads Vt [B, Hkv, D, nk_pad], written by
// fp8_v_transpose (fp8_transpose.cuh) before the kernel, one tile = D rows of BLOCK_N keys. P is
// rounded to e4m3 in place: the accumulators of S give thread (g, q) the keys 2q, 2q + 1,
// 8 + 2q, 9 + 2q (+ 16) of each 32-key slice, the A fragment wants columns 4q .. 4q + 3 (+ 16),
// so Vt stores each slice's keys in that order (fp8_key_of_column) and no register moves. The
// host folds the dequantisation scales of Q and K into args.base.scale; O is multiplied by
// args.base.o_scale (V's) and written in bf16.
#pragma once

#include "attention/args_sm90.h"
#include "attention/flash_attention.cuh"
#include "attention/mma.cuh"
#include "common/mbarrier.cuh"
#include "common/tma.cuh"
#include "common/types.cuh"
#include "common/warpgroup.cuh"
#include "common/wgmma.cuh"

namespace ktune {
namespace attn90 {

/// Shared-memory layout (byte offsets from a 1024-byte-aligned base). Every tile is a stack of
/// 128-byte column blocks (64 16-bit or 128 e4m3 columns), each [rows][128 bytes] in the
/// 128-byte swizzle, as one TMA box writes it. An e4m3 V tile (Vt) is D rows of BLOCK_N = 128
/// keys: as many bytes as a K tile. D = 96 takes two blocks, the second half used (its columns
/// 96..127 come as zeros from the box past the tensor's d, or are left unwritten by the
/// producer's copies; no product reads them).
template <int D, int BLOCK_N, int CONSUMERS, int STAGES, int BYTES = 2, bool KV_APART = false>
struct Layout {
  static constexpr int COLS = 128 / BYTES;                         // columns per block
  static constexpr int BLOCKS = (D + COLS - 1) / COLS;             // column blocks of a row
  static constexpr unsigned Q_BLOCK = kSm90RowsPerConsumer * 128;  // one column block of Q
  static constexpr unsigned Q_TILE = Q_BLOCK * BLOCKS;             // one consumer's rows
  static constexpr unsigned KV_BLOCK = BLOCK_N * 128;
  static constexpr unsigned KV_TILE = KV_BLOCK * BLOCKS;
  static constexpr unsigned Q = 0;
  static constexpr unsigned K = Q + CONSUMERS * Q_TILE;
  static constexpr unsigned V = K + STAGES * KV_TILE;
  static constexpr unsigned BARS = V + STAGES * KV_TILE;
  // Barriers, 8 bytes each: Q landed, Q free, then per stage K landed, V landed, slot empty
  // (KV_APART: the slot's K free), then (KV_APART) per stage the slot's V free.
  static constexpr unsigned Q_FULL = BARS;
  static constexpr unsigned Q_EMPTY = BARS + 8;
  static constexpr unsigned K_FULL = BARS + 16;
  static constexpr unsigned V_FULL = K_FULL + 8 * STAGES;
  static constexpr unsigned EMPTY = V_FULL + 8 * STAGES;
  static constexpr unsigned V_EMPTY = EMPTY + 8 * STAGES;
  static constexpr unsigned END = V_EMPTY + (KV_APART ? 8 * STAGES : 0);
};

/// Registers per thread after reallocation, (producer, consumer), by consumer count: the totals
/// fit the 64 Ki register file (128 x 24 + 256 x 240, 128 x 32 + 384 x 160). With one consumer
/// the launch bound already allows 255. GATHER (VARLEN: the producer's threads copy the tiles
/// themselves) gives two consumers' producer 40 (128 x 40 + 256 x 232); PAGED (all producer
/// threads walk the items, read page ids and copy a last V tile) 56 (128 x 56 + 256 x 224: at
/// 40 its persistent form spilled 8-36 bytes at d=128, at 56 none), except at d=256, whose
/// consumers need 232 (GATHER's split; the host refuses its persistent form).
template <int CONSUMERS, bool GATHER = false, bool PAGED = false>
struct Registers {
  static constexpr int PRODUCER = CONSUMERS == 3 ? 32 : PAGED ? 56 : GATHER ? 40 : 24;
  static constexpr int CONSUMER = CONSUMERS == 3 ? 160 : PAGED ? 224 : GATHER ? 232 : 240;
};

/// VARLEN's copy of one tile (ROWS rows of D 16-bit columns) by the producer's 128 threads
/// (ptid): rows [0, rows_left) of src (row_stride elements apart) into the swizzled column
/// blocks at dst (file comment), zeros from row rows_left on. Not waited for here. BLOCK_ROWS:
/// the rows of the whole tile when this copies a slice of it (a page of a paged tile; dst is then
/// the slice's first row, a multiple of 8), whose column blocks are BLOCK_ROWS rows apart.
/// DV: the source's columns (a multiple of 8, at most D); chunks from DV on are zeros, not read.
template <typename T, int D, int ROWS, int BLOCK_ROWS = ROWS, int DV = D>
__device__ __forceinline__ void gather_tile(unsigned dst, const T* src, long long row_stride,
                                            int rows_left, int ptid) {
  constexpr int CPR = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  constexpr int CPB = wg::kSw128RowBytes / 16;                // chunks per column block row
  constexpr int ITEMS = ROWS * CPR;  // a last partial round at d = 96 with 16-row pages
#pragma unroll 2
  for (int j = 0; j < (ITEMS + 127) / 128; ++j) {
    const int i = ptid + 128 * j;
    if (ITEMS % 128 != 0 && i >= ITEMS) break;
    const int r = i / CPR, c = i % CPR;
    const bool ok = r < rows_left && (DV == D || c * 16 < DV * static_cast<int>(sizeof(T)));
    attn::cp_async_16(
        dst + (c / CPB) * (BLOCK_ROWS * wg::kSw128RowBytes) + wg::sw128_offset(r, c % CPB),
        src + (ok ? r * row_stride + c * (16 / static_cast<int>(sizeof(T))) : 0), ok ? 16 : 0);
  }
}

/// gather_tile from a paged pool (args.h): rows [0, ROWS) of the tile whose first key is key0,
/// `src` the KV head's first element of the pools, `pages` the block table entries from the
/// tile's first page (one page holds the tile, or ROWS / PAGE do, each copied as a contiguous
/// slice). Rows >= rows_left are zeros, read from neither the table nor the pool.
template <typename T, int D, int ROWS, int PAGE, int DV = D>
__device__ __forceinline__ void gather_tile_paged(unsigned dst, const T* src, long long row_stride,
                                                  const int* pages, long long key0,
                                                  int rows_left, int ptid) {
  if constexpr (PAGE >= ROWS) {
    const long long row =
        rows_left > 0 ? static_cast<long long>(__ldg(pages)) * PAGE + key0 % PAGE : 0;
    gather_tile<T, D, ROWS, ROWS, DV>(dst, src + row * row_stride, row_stride, rows_left, ptid);
  } else {
#pragma unroll 1
    for (int s = 0; s < ROWS / PAGE; ++s) {
      const int left = rows_left - s * PAGE;
      const long long row = left > 0 ? static_cast<long long>(__ldg(pages + s)) * PAGE : 0;
      gather_tile<T, D, PAGE, ROWS, DV>(dst + s * PAGE * wg::kSw128RowBytes,
                                        src + row * row_stride, row_stride, left, ptid);
    }
  }
}

/// The TMA copy of an item's Q tiles (CONSUMERS x 64 rows from row m0 of head h, batch b) by the
/// producer's leader, once the consumers have freed Q from the item before (`items` so far).
template <class L, int CONSUMERS>
__device__ __forceinline__ void load_q(unsigned base, const tma::TensorMap* q_map, int items,
                                       int m0, int h, int b) {
  if (items > 0) mbar::wait_parity(base + L::Q_EMPTY, (items - 1) & 1);
  mbar::arrive_expect_tx(base + L::Q_FULL, CONSUMERS * L::Q_TILE);
#pragma unroll
  for (int c = 0; c < CONSUMERS; ++c)
#pragma unroll
    for (int blk = 0; blk < L::BLOCKS; ++blk)
      tma::load(base + L::Q + c * L::Q_TILE + blk * L::Q_BLOCK, q_map, base + L::Q_FULL,
                blk * L::COLS, m0 + c * kSm90RowsPerConsumer, h, b);
}

/// How far (log2 units) a score may pass its row's reference maximum before O is rescaled:
/// P <= 2^8 = 256 fits every type P is rounded to (e4m3's largest is 448).
constexpr float kRescaleSlack = 8.f;

/// What one consumer thread's online softmax needs besides the scores: its rows are row_base
/// and row_base + 8, its columns 2 t, 2 t + 1 of every n8 slice (wg::Acc).
struct SoftmaxRows {
  int row_base, t, nk, shift, window;
  float scale_log2, cap_in, cap_out, slope_log2;
};

/// The online softmax of the scores x of the key tile starting at key0: the row maxima and sums
/// move, x becomes P = 2^(logit - max) in fp32 (logits in the log2 domain, masked where needed),
/// and alpha[r] is the factor O's row r must be rescaled by (applied by the caller, once no
/// wgmma writes O). Without softcap and ALiBi the scale rides in exp2's FFMA: the max is taken
/// over the raw scores (the scale is positive) and P = 2^(score * scale_log2 - max). MASK: the
/// body has the per-score mask tests, run where `mask` says the tile reaches past the keys, the
/// causal diagonal or the window's left edge; without it tiles skip the compare and select per
/// score, which a runtime flag alone leaves in every tile's code.
template <int BLOCK_N, bool MASK, bool CAUSAL, bool WINDOW, bool SOFTCAP, bool ALIBI, bool LAZY>
__device__ __forceinline__ void softmax_tile(float (&x)[BLOCK_N / 2], int key0, bool mask,
                                             const SoftmaxRows& s, float (&row_max)[2],
                                             float (&row_sum)[2], float (&alpha)[2]) {
  constexpr bool FUSED = !SOFTCAP && !ALIBI;
  const float kNegInf = -__int_as_float(0x7f800000);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Value i of this thread is row row_base + 8 ((i / 2) % 2), key key0 + 8 (i / 4) + 2 t +
    // i % 2 (wg::Acc).
    const int row = s.row_base + 8 * r;
    const int col0 = key0 + 2 * s.t;
    const int limit = CAUSAL ? min(s.nk, row + s.shift + 1) : s.nk;  // first key masked right
    const int low = WINDOW ? row + s.shift - s.window + 1 : 0;        // first key not masked left
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int idx = 4 * j + 2 * r + e;
        const int col = col0 + 8 * j + e;
        float v = x[idx];
        if constexpr (!FUSED) {
          v = SOFTCAP ? s.cap_out * attn::tanh_approx(v * s.cap_in) : v * s.scale_log2;
          if constexpr (ALIBI)
            v = fmaf(-s.slope_log2, fabsf(static_cast<float>(col - (row + s.shift))), v);
        }
        if constexpr (MASK)
          if (mask && (col >= limit || col < low)) v = kNegInf;
        x[idx] = v;
        mx = fmaxf(mx, v);
      }
    // The 4 threads of a quad share a row.
    mx = attn::quad_max(mx);
    if constexpr (FUSED) mx *= s.scale_log2;  // -inf stays -inf
    float offset;
    if constexpr (LAZY) {
      // Lazy rescaling: the row keeps its reference maximum until a score passes it by more
      // than kRescaleSlack (log2 units), so most tiles leave O as it is (alpha = 1, and the
      // caller skips the rescale where a whole warp has it); P stays below 2^kRescaleSlack.
      // Exact: P, the sum and the LSE all use the same reference. From -inf the first finite
      // maximum is taken (alpha 0); a row with every key masked so far keeps -inf, and offset 0
      // keeps exp2 at 0.
      const bool up = mx > row_max[r] + kRescaleSlack;
      alpha[r] = up ? attn::exp2_approx(row_max[r] - mx) : 1.f;
      if (up) row_max[r] = mx;
      offset = row_max[r] == kNegInf ? 0.f : row_max[r];
    } else {
      mx = fmaxf(row_max[r], mx);
      // A row with every key masked so far keeps max -inf; offset 0 keeps exp2 at 0.
      offset = mx == kNegInf ? 0.f : mx;
      alpha[r] = attn::exp2_approx(row_max[r] - offset);  // 0 while row_max is -inf
      row_max[r] = mx;
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v = x[4 * j + 2 * r + e];
        const float pe = attn::exp2_approx(FUSED ? fmaf(v, s.scale_log2, -offset) : v - offset);
        x[4 * j + 2 * r + e] = pe;
        sum += pe;
      }
    row_sum[r] = row_sum[r] * alpha[r] + sum;
  }
}

/// The key tiles a block of query rows [row0, row0 + rows) of a sequence of nq queries and nk
/// keys visits: [begin, end) in BLOCK_N units (causal: up to its last row's diagonal; window:
/// from its first row's window).
template <int BLOCK_N, bool CAUSAL, bool WINDOW>
__device__ __forceinline__ void tile_range(int nq, int nk, int window, int row0, int rows,
                                           int& begin, int& end) {
  const int shift = nk - nq;
  int keys_end = nk;
  if (CAUSAL) keys_end = min(keys_end, min(row0 + rows, nq) - 1 + shift + 1);
  int keys_begin = 0;
  if (WINDOW) keys_begin = max(0, row0 + shift - window + 1);
  begin = keys_begin / BLOCK_N;
  end = keys_end <= 0 ? begin : max(begin, (keys_end + BLOCK_N - 1) / BLOCK_N);
}

/// A 4x4 transpose of 32-bit words over the 4 lanes of each quad (t = lane & 3): lane t holds
/// word t of chunks 0..3 on entry and chunk t's words 0..3 on exit. Two butterfly rounds; every
/// lane of the warp must take part.
__device__ __forceinline__ void quad_transpose(unsigned (&w)[4], int t) {
#pragma unroll
  for (int m = 2; m >= 1; m >>= 1) {
    const bool low = (t & m) == 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (q & m) continue;
      const unsigned recv = __shfl_xor_sync(0xffffffffu, low ? w[q | m] : w[q], m);
      if (low)
        w[q | m] = recv;
      else
        w[q] = recv;
    }
  }
}

}  // namespace attn90

/// One CTA: BLOCK_M = 64 * CONSUMERS query rows of one (batch, query head); grid x = query
/// tiles, y = batch * heads_q; 128 * (CONSUMERS + 1) threads; dynamic shared memory
/// flash_attention_sm90_smem_bytes(). T is bf16, fp16 or e4m3 (O in bf16, file comment).
///
/// PERSISTENT: grid x is at most the SM count (y = 1) and the CTAs loop over the work items
/// (query tile, batch * head) in passes of gridDim.x items. Without a causal mask the query
/// tiles of one head are consecutive items, so a pass shares few heads' K/V in L2, and CTA i
/// takes item i of every pass. Under a causal mask a tile's work grows with its index: the items
/// run longest first (the last tile of every head, then the one before, ...; the heads of a
/// pass read the same key range in step) and the passes alternate direction (CTA i takes item i
/// of even passes and item gridDim.x - 1 - i of odd ones), which evens out the CTAs' sums. The
/// K/V ring and the turns run on across items; Q has one buffer, which the consumers free
/// (Q_EMPTY) once their last Q K^T has retired, so the producer loads the next item's Q and
/// first K/V tiles while they finish P V and write O.
///
/// VARLEN: q, k, v, o packed and lse [Hq, total_q] as flash_attention_fwd's (args.h); grid x
/// covers the longest sequence, and a CTA whose tile starts past its sequence's queries leaves
/// at once. The producer's threads copy the tiles (file comment).
template <typename T, int D, int BLOCK_N, int CONSUMERS, int STAGES, bool PINGPONG, bool CAUSAL,
          bool WINDOW = false, bool SOFTCAP = false, bool ALIBI = false, bool PERSISTENT = false,
          bool REG_SPLIT = true, bool VARLEN = false, int PAGE = 0, bool KV_APART = false,
          int DV = D>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
    flash_attention_sm90(const __grid_constant__ FlashAttentionSm90Args args) {
  static_assert(D == 64 || D == 96 || D == 128 || D == 256, "D must be 64, 96, 128 or 256");
  static_assert(DV % 8 == 0 && DV > 0 && DV <= D && (DV == D || sizeof(T) == 2),
                "DV: the data's head dim (16-bit types), a multiple of 8 <= D: the TMA maps read "
                "zeros past it, the producer's copies write zeros, O's columns past it unstored");
  static_assert(BLOCK_N == 64 || BLOCK_N == 80 || BLOCK_N == 128, "BLOCK_N must be 64, 80 or 128");
  static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "1 to 3 consumer warpgroups");
  static_assert(STAGES >= 2 && STAGES <= 6, "STAGES must be 2 to 6");
  static_assert(!PINGPONG || CONSUMERS > 1, "ping-pong needs two or more consumers");
  constexpr bool FP8 = sizeof(T) == 1;
  static_assert(!FP8 || ((D == 128 || D == 256) && BLOCK_N == 128),
                "e4m3 takes D = 128 or 256 and BLOCK_N = 128 (128-byte rows of Q, K and Vt)");
  // The producer's threads copy the tiles (VARLEN), or copy the last V tile of each item beside
  // the leader's page-wise TMA (PAGED_TMA; file comment).
  constexpr bool GATHER = VARLEN;
  constexpr bool PAGED_TMA = PAGE > 0 && !VARLEN;
  static_assert(!GATHER || (!PERSISTENT && !FP8),
                "VARLEN takes 16-bit types and one item per CTA (not PERSISTENT)");
  static_assert(PAGE == 0 || !FP8, "PAGE takes 16-bit types");
  static_assert(PAGE == 0 || PAGE == 16 || PAGE == 32 || PAGE == 64 || PAGE == 128 ||
                    PAGE == 256,
                "PAGE: 0 (contiguous), 16, 32, 64, 128 or 256");
  static_assert(PAGE == 0 || BLOCK_N % PAGE == 0 || PAGE % BLOCK_N == 0,
                "a key tile covers whole pages or lies in one");
  static_assert(!KV_APART || (!GATHER && !PAGED_TMA),
                "KV_APART: the TMA producer of contiguous K/V only");
  using OT = typename OutputOf<T>::type;
#if KTUNE_WGMMA
  using L = attn90::Layout<D, BLOCK_N, CONSUMERS, STAGES, static_cast<int>(sizeof(T)), KV_APART>;
  using R = attn90::Registers<CONSUMERS, GATHER || (PAGED_TMA && D == 256),
                              PAGED_TMA && D != 256>;
  constexpr int BLOCK_M = kSm90RowsPerConsumer * CONSUMERS;
  const FlashAttentionArgs& a = args.base;
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (wg::smem_u32(smem_raw) + 1023u) & ~1023u;

  // Work items: this CTA's item of pass `pass`, or -1 past the last (one pass unless
  // PERSISTENT).
  const int q_tiles = (a.seq_q + BLOCK_M - 1) / BLOCK_M;
  const int batch_heads = a.batch * a.heads_q;
  const auto work = [&](long long pass) -> long long {
    if constexpr (PERSISTENT) {
      const long long pos = CAUSAL && (pass & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
      const long long w = pass * gridDim.x + pos;
      return w < static_cast<long long>(q_tiles) * batch_heads ? w : -1;
    } else {
      return pass == 0 ? 0 : -1;
    }
  };
  // Item `w`: its batch, query head, key/value head, first row and block key tiles, and its
  // sequence's lengths and first packed rows (VARLEN; else the args' lengths and 0).
  struct Item {
    int b, h, hk, m0, t_begin, t_end, nq, nk, q_first, k_first;
  };
  const auto item = [&](long long w) {
    Item it;
    int bh, mt;
    if constexpr (PERSISTENT && CAUSAL) {
      bh = static_cast<int>(w % batch_heads);
      mt = q_tiles - 1 - static_cast<int>(w / batch_heads);
    } else if constexpr (PERSISTENT) {
      bh = static_cast<int>(w / q_tiles);
      mt = q_tiles - 1 - static_cast<int>(w % q_tiles);
    } else {
      bh = blockIdx.y;
      mt = blockIdx.x;
    }
    it.b = bh / a.heads_q;
    it.h = bh % a.heads_q;
    it.hk = it.h / (a.heads_q / a.heads_kv);
    it.m0 = mt * BLOCK_M;
    it.nq = a.seq_q, it.nk = a.seq_k, it.q_first = 0, it.k_first = 0;
    if constexpr (VARLEN) {
      it.q_first = a.cu_seqlens_q[it.b];
      it.nq = a.cu_seqlens_q[it.b + 1] - it.q_first;
      if constexpr (PAGE == 0) {
        it.k_first = a.cu_seqlens_k[it.b];
        it.nk = a.cu_seqlens_k[it.b + 1] - it.k_first;
      }
    }
    if constexpr (PAGE > 0) it.nk = paged_kv_seq_len(a.seq_lens[it.b], a.seq_k);
    attn90::tile_range<BLOCK_N, CAUSAL, WINDOW>(it.nq, it.nk, a.window, it.m0, BLOCK_M,
                                                it.t_begin, it.t_end);
    return it;
  };
  if constexpr (VARLEN) {
    const Item first = item(0);
    if (first.m0 >= first.nq) return;  // the whole CTA, before any barrier
  }

  // Barrier arrivals per fill: the elected producer thread's expect_tx, or (VARLEN) one
  // cp.async arrival per producer thread, or (PAGED_TMA, K and V) 128 either way.
  constexpr unsigned FILL_ARRIVALS = GATHER || PAGED_TMA ? wgrp::kWarpgroupThreads : 1;

  if (threadIdx.x == 0) {
    mbar::init(base + L::Q_FULL, GATHER ? wgrp::kWarpgroupThreads : 1);
    mbar::init(base + L::Q_EMPTY, 4 * CONSUMERS);  // one arrival per consumer warp
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(base + L::K_FULL + 8 * s, FILL_ARRIVALS);
      mbar::init(base + L::V_FULL + 8 * s, FILL_ARRIVALS);
      mbar::init(base + L::EMPTY + 8 * s, 4 * CONSUMERS);  // one arrival per consumer warp
      if constexpr (KV_APART) mbar::init(base + L::V_EMPTY + 8 * s, 4 * CONSUMERS);
    }
    mbar::fence_init();
  }
  __syncthreads();

  const int wg_index = wgrp::warpgroup_index();
  if (wg_index == 0) {
    // Producer: one thread of warp 0 issues every copy. Per item: its first K/V tile (a slot
    // freed by earlier tiles), then Q once the consumers have freed it, then the other tiles.
    if constexpr (CONSUMERS > 1 && REG_SPLIT) wgrp::setmaxnreg_dec<R::PRODUCER>();
    if constexpr (GATHER) {
      // Every producer thread copies its share of each tile (one item: not PERSISTENT). Paged,
      // kp and vp are the pools' first row of the KV head.
      const int ptid = static_cast<int>(threadIdx.x);
      const Item it = item(0);
      const long long k_at = PAGE > 0 ? 0 : static_cast<long long>(it.k_first) * a.k_row_stride;
      const long long v_at = PAGE > 0 ? 0 : static_cast<long long>(it.k_first) * a.v_row_stride;
      const T* kp = static_cast<const T*>(a.k) + k_at + it.hk * a.k_head_stride;
      const T* vp = static_cast<const T*>(a.v) + v_at + it.hk * a.v_head_stride;
      const int* table =
          PAGE > 0 ? a.block_table + static_cast<long long>(it.b) * a.pages_per_seq : nullptr;
      const auto load_q = [&]() {
        const T* qp = static_cast<const T*>(a.q) +
                      static_cast<long long>(it.q_first + it.m0) * a.q_row_stride +
                      it.h * a.q_head_stride;
#pragma unroll
        for (int c = 0; c < CONSUMERS; ++c)
          attn90::gather_tile<T, D, kSm90RowsPerConsumer, kSm90RowsPerConsumer, DV>(
              base + L::Q + c * L::Q_TILE, qp + c * kSm90RowsPerConsumer * a.q_row_stride,
              a.q_row_stride, it.nq - it.m0 - c * kSm90RowsPerConsumer, ptid);
        mbar::cp_async_arrive_noinc(base + L::Q_FULL);
      };
      if (it.t_end == it.t_begin) load_q();
      for (int tile = it.t_begin, fills = 0; tile < it.t_end; ++tile, ++fills) {
        const int s = fills % STAGES;
        if (fills >= STAGES) mbar::wait_parity(base + L::EMPTY + 8 * s, ((fills / STAGES) - 1) & 1);
        const int key0 = tile * BLOCK_N;
        if constexpr (PAGE > 0) {
          const int* pages = table + key0 / PAGE;
          attn90::gather_tile_paged<T, D, BLOCK_N, PAGE, DV>(base + L::K + s * L::KV_TILE, kp,
                                                         a.k_row_stride, pages, key0,
                                                         it.nk - key0, ptid);
          mbar::cp_async_arrive_noinc(base + L::K_FULL + 8 * s);
          attn90::gather_tile_paged<T, D, BLOCK_N, PAGE, DV>(base + L::V + s * L::KV_TILE, vp,
                                                         a.v_row_stride, pages, key0,
                                                         it.nk - key0, ptid);
          mbar::cp_async_arrive_noinc(base + L::V_FULL + 8 * s);
        } else {
          attn90::gather_tile<T, D, BLOCK_N, BLOCK_N, DV>(base + L::K + s * L::KV_TILE,
                                             kp + key0 * a.k_row_stride, a.k_row_stride,
                                             it.nk - key0, ptid);
          mbar::cp_async_arrive_noinc(base + L::K_FULL + 8 * s);
          attn90::gather_tile<T, D, BLOCK_N, BLOCK_N, DV>(base + L::V + s * L::KV_TILE,
                                             vp + key0 * a.v_row_stride, a.v_row_stride,
                                             it.nk - key0, ptid);
          mbar::cp_async_arrive_noinc(base + L::V_FULL + 8 * s);
        }
        if (tile == it.t_begin) load_q();
      }
    } else if constexpr (PAGED_TMA) {
      // Every producer thread walks the items and tiles (they all arrive on each fill); the
      // leader issues the copies, except for an item's last V tile when it runs past the
      // sequence's keys, which all 128 copy with zeros past them (file comment).
      const bool leader = wgrp::warp_in_warpgroup() == 0 && wgrp::elect_one();
      const int ptid = static_cast<int>(threadIdx.x);
      constexpr int BOX = PAGE < BLOCK_N ? PAGE : BLOCK_N;  // rows per TMA box
      if (leader) {
        tma::prefetch_map(&args.q_map);
        tma::prefetch_map(&args.k_map);
        tma::prefetch_map(&args.v_map);
      }
      int fills = 0;  // K/V tiles issued so far, over every item
      int items = 0;
      for (long long w = work(0); w >= 0; w = work(++items)) {
        const Item it = item(w);
        const int* table = a.block_table + static_cast<long long>(it.b) * a.pages_per_seq;
        const auto load_q = [&]() {
          if (leader) attn90::load_q<L, CONSUMERS>(base, &args.q_map, items, it.m0, it.h, it.b);
        };
        // One tile of the K or V pool by the leader, BOX rows of page ids[sl] per box.
        const auto load_pages = [&](unsigned dst, const tma::TensorMap* map, unsigned bar,
                                    const int (&ids)[BLOCK_N / BOX], int key0) {
#pragma unroll
          for (int sl = 0; sl < BLOCK_N / BOX; ++sl)
#pragma unroll
            for (int blk = 0; blk < L::BLOCKS; ++blk)
              tma::load(dst + blk * L::KV_BLOCK + sl * BOX * wg::kSw128RowBytes, map, bar,
                        blk * L::COLS, it.hk, PAGE < BLOCK_N ? 0 : key0 % PAGE, ids[sl]);
        };
        if (it.t_end == it.t_begin) load_q();
        for (int tile = it.t_begin; tile < it.t_end; ++tile, ++fills) {
          const int s = fills % STAGES;
          const int key0 = tile * BLOCK_N;
          // The tile's page ids, requested before the wait for its slot (which hides their
          // latency); boxes past the keys read page 0 (any page: K's rows there are masked, and
          // a V tile reaching them is copied instead).
          int ids[BLOCK_N / BOX];
#pragma unroll
          for (int sl = 0; sl < BLOCK_N / BOX; ++sl) {
            const int first = key0 / PAGE + sl;
            ids[sl] = leader && first * PAGE < it.nk ? __ldg(table + first) : 0;
          }
          if (fills >= STAGES) mbar::wait_parity(base + L::EMPTY + 8 * s, ((fills / STAGES) - 1) & 1);
          const unsigned k_bar = base + L::K_FULL + 8 * s, v_bar = base + L::V_FULL + 8 * s;
          if (leader) {
            mbar::arrive_expect_tx(k_bar, L::KV_TILE);
            load_pages(base + L::K + s * L::KV_TILE, &args.k_map, k_bar, ids, key0);
          } else {
            mbar::arrive(k_bar);
          }
          if (key0 + BLOCK_N > it.nk) {
            const T* vp = static_cast<const T*>(a.v) + it.hk * a.v_head_stride;
            attn90::gather_tile_paged<T, D, BLOCK_N, PAGE, DV>(base + L::V + s * L::KV_TILE, vp,
                                                           a.v_row_stride, table + key0 / PAGE,
                                                           key0, it.nk - key0, ptid);
            mbar::cp_async_arrive_noinc(v_bar);
          } else if (leader) {
            mbar::arrive_expect_tx(v_bar, L::KV_TILE);
            load_pages(base + L::V + s * L::KV_TILE, &args.v_map, v_bar, ids, key0);
          } else {
            mbar::arrive(v_bar);
          }
          if (tile == it.t_begin) load_q();
        }
      }
    } else if (wgrp::warp_in_warpgroup() == 0 && wgrp::elect_one()) {
      tma::prefetch_map(&args.q_map);
      tma::prefetch_map(&args.k_map);
      tma::prefetch_map(&args.v_map);
      int fills = 0;  // K/V tiles issued so far, over every item
      int items = 0;
      for (long long w = work(0); w >= 0; w = work(++items)) {
        const Item it = item(w);
        const auto load_q = [&]() {
          attn90::load_q<L, CONSUMERS>(base, &args.q_map, items, it.m0, it.h, it.b);
        };
        if (it.t_end == it.t_begin) load_q();
        for (int tile = it.t_begin; tile < it.t_end; ++tile, ++fills) {
          const int s = fills % STAGES;
          // KV_APART: the slot's K is free once its Q K^T has retired, its V once P V has.
          if (fills >= STAGES) mbar::wait_parity(base + L::EMPTY + 8 * s, ((fills / STAGES) - 1) & 1);
          const int key0 = tile * BLOCK_N;
          mbar::arrive_expect_tx(base + L::K_FULL + 8 * s, L::KV_TILE);
#pragma unroll
          for (int blk = 0; blk < L::BLOCKS; ++blk)
            tma::load(base + L::K + s * L::KV_TILE + blk * L::KV_BLOCK, &args.k_map,
                      base + L::K_FULL + 8 * s, blk * L::COLS, key0, it.hk, it.b);
          if constexpr (KV_APART)
            if (fills >= STAGES)
              mbar::wait_parity(base + L::V_EMPTY + 8 * s, ((fills / STAGES) - 1) & 1);
          mbar::arrive_expect_tx(base + L::V_FULL + 8 * s, L::KV_TILE);
          if constexpr (FP8) {
            // Vt: keys innermost, D rows in one box.
            tma::load(base + L::V + s * L::KV_TILE, &args.v_map, base + L::V_FULL + 8 * s, key0,
                      0, it.hk, it.b);
          } else {
#pragma unroll
            for (int blk = 0; blk < L::BLOCKS; ++blk)
              tma::load(base + L::V + s * L::KV_TILE + blk * L::KV_BLOCK, &args.v_map,
                        base + L::V_FULL + 8 * s, blk * L::COLS, key0, it.hk, it.b);
          }
          if (tile == it.t_begin) load_q();
        }
      }
    }
    return;
  }

  // Consumers.
  if constexpr (CONSUMERS > 1 && REG_SPLIT) wgrp::setmaxnreg_inc<R::CONSUMER>();
  const int c = wg_index - 1;
  const int tid = wgrp::thread_in_warpgroup();
  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const float kNegInf = -__int_as_float(0x7f800000);
  constexpr float kLn2 = 0.6931471805599453f;
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale_log2 = a.scale * kLog2e;
  float cap_in = 0.f, cap_out = 0.f;
  if constexpr (SOFTCAP) {
    cap_in = a.scale / a.softcap;  // tanh's argument: score / cap
    cap_out = a.softcap * kLog2e;
  }
  const unsigned q_tile = base + L::Q + c * L::Q_TILE;

  // The current item's ring position: its first tile's fill number is ring0, tile `tile` is
  // fill ring0 + tile - t_begin, in slot fill % STAGES with parity (fill / STAGES) & 1.
  int ring0 = 0, t_begin = 0;
  const auto slot = [&](int tile) { return (ring0 + tile - t_begin) % STAGES; };
  const auto fill = [&](int tile) {
    return static_cast<unsigned>(((ring0 + tile - t_begin) / STAGES) & 1);
  };
  // Releases the slot of `tile` (this warp's wgmmas on it have completed); KV_APART: its V
  // (release_k frees its K, once the tile's Q K^T has retired).
  const auto release = [&](int tile) {
    __syncwarp();
    if (lane == 0) mbar::arrive(base + (KV_APART ? L::V_EMPTY : L::EMPTY) + 8 * slot(tile));
  };
  const auto release_k = [&](int tile) {
    if constexpr (KV_APART) {
      __syncwarp();
      if (lane == 0) mbar::arrive(base + L::EMPTY + 8 * slot(tile));
    }
  };
  // VARLEN: the producer's threads wrote the tile (generic proxy), which the wgmmas read through
  // the async proxy.
  const auto k_ready = [&](int tile) {
    mbar::wait_parity(base + L::K_FULL + 8 * slot(tile), fill(tile));
    if constexpr (GATHER) wg::fence_proxy_async();
    return base + L::K + slot(tile) * L::KV_TILE;
  };
  // PAGED_TMA: an item's last V tile, when it runs past the keys, was copied by the producer's
  // threads too.
  int item_nk = 0;
  const auto v_ready = [&](int tile) {
    mbar::wait_parity(base + L::V_FULL + 8 * slot(tile), fill(tile));
    if constexpr (GATHER) wg::fence_proxy_async();
    if constexpr (PAGED_TMA)
      if ((tile + 1) * BLOCK_N > item_nk) wg::fence_proxy_async();
    return base + L::V + slot(tile) * L::KV_TILE;
  };
  // A tile outside this warpgroup's keys: released once its fill has landed. Arriving before
  // could let a warpgroup that skips several tiles arrive twice within one phase of the empty
  // barrier and free the slot while another warpgroup still reads it.
  // KV_APART: both of its fills (each barrier's earlier phase done), then both halves.
  const auto skip = [&](int tile) {
    k_ready(tile);
    if constexpr (KV_APART) {
      v_ready(tile);
      release_k(tile);
    }
    release(tile);
  };
  // This warp is done with Q (every Q K^T it issued has retired): the producer may load the next
  // item's.
  const auto q_done = [&]() {
    if constexpr (PERSISTENT) {
      __syncwarp();
      if (lane == 0) mbar::arrive(base + L::Q_EMPTY);
    }
  };
  // The products read the data's columns only (DV < D: a head dim between the tiles): Q K^T in
  // ceil(DV / 16) k16 steps (an odd multiple of 8 reads the zeros the copies write past DV), and
  // O over DO columns where P V has a shape for them (80: d = 72 or 80 in d=96's tiles), else
  // over the tile's D.
  constexpr int QK_STEPS = (DV * static_cast<int>(sizeof(T)) + 31) / 32;
  constexpr int DO = D == 96 && (DV + 15) / 16 * 16 == 80 ? 80 : D;
  // Issues S = Q K^T of `tile` into x and commits it (asynchronous).
  const auto mma_qk = [&](float (&x)[BLOCK_N / 2], unsigned k_tile) {
    // One k step (k16 of 16-bit types, k32 of e4m3) is 32 bytes of a row.
    wg::MmaSSZero<T, BLOCK_N>::run(x, wg::sw128_desc(q_tile), wg::sw128_desc(k_tile));
#pragma unroll
    for (int kk = 1; kk < QK_STEPS; ++kk)
      wg::MmaSS<T, BLOCK_N>::run(
          x, wg::sw128_desc(q_tile + (kk / 4) * L::Q_BLOCK, (kk % 4) * wg::kK16Bytes),
          wg::sw128_desc(k_tile + (kk / 4) * L::KV_BLOCK, (kk % 4) * wg::kK16Bytes), 1);
    wg::commit();
  };
  float o[DO / 2];
  // A slices of P: k16 of 16-bit types, k32 of e4m3.
  constexpr int P_SLICES = FP8 ? BLOCK_N / 32 : BLOCK_N / 16;
  // Issues O += P V of `tile` and commits it (asynchronous).
  const auto mma_pv = [&](const unsigned (&p)[P_SLICES][4], unsigned v_tile) {
#pragma unroll
    for (int kk = 0; kk < P_SLICES; ++kk) {
      if constexpr (FP8)
        wg::MmaRS<T, D>::run(o, p[kk], wg::sw128_desc(v_tile, kk * 32), 1);
      else
        wg::MmaRSTransB<T, DO>::run(o, p[kk],
                                   wg::sw128_mn_desc(v_tile + kk * 16 * 128, L::KV_BLOCK), 1);
    }
    wg::commit();
  };
  // P as the A operand, rounded in place. 16-bit: k16 slice kk is accumulator values 8 kk ..
  // 8 kk + 7. e4m3: k32 slice kk is values 16 kk .. 16 kk + 15, four per register (Vt's key
  // order makes them the fragment's columns). Done while no wgmma is in flight: registers a
  // wgmma reads, written while another one runs, make ptxas serialise the wgmmas (C7513).
  const auto pack = [&](const float (&x)[BLOCK_N / 2], unsigned (&p)[P_SLICES][4]) {
#pragma unroll
    for (int kk = 0; kk < P_SLICES; ++kk) {
      if constexpr (FP8) {
        const float* v = x + 16 * kk;
        p[kk][0] = pack4_e4m3(v[0], v[1], v[4], v[5]);
        p[kk][1] = pack4_e4m3(v[2], v[3], v[6], v[7]);
        p[kk][2] = pack4_e4m3(v[8], v[9], v[12], v[13]);
        p[kk][3] = pack4_e4m3(v[10], v[11], v[14], v[15]);
      } else {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          p[kk][r] = pack2<T>(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
      }
    }
  };
  const auto rescale = [&](const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < DO / 8; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        o[4 * j + 2 * r] *= alpha[r];
        o[4 * j + 2 * r + 1] *= alpha[r];
      }
  };

  // PINGPONG: the consumers issue their wgmmas in turns, round robin: consumer c waits on named
  // barrier 1 + c (its turn, 256 threads: itself and the one before it), issues, and passes the
  // turn on. Each consumer takes exactly n_tiles + 1 turns per item (skipped tiles and a
  // computing warpgroup's last O += P V included), so that no one waits for a turn never given;
  // the last pass of the round is left pending at exit. Consumer 0 takes the first turn.
  const int next = c + 1 == CONSUMERS ? 0 : c + 1;
  const auto turn_begin = [&]() {
    if constexpr (PINGPONG) wgrp::bar_sync(1 + c, 256);
  };
  const auto turn_end = [&]() {
    if constexpr (PINGPONG) wgrp::bar_arrive(1 + next, 256);
  };
  if constexpr (PINGPONG)
    if (c == CONSUMERS - 1) wgrp::bar_arrive(1, 256);  // consumer 0's first turn

  int items = 0;
  for (long long w = work(0); w >= 0; w = work(++items)) {
    const Item it = item(w);
    t_begin = it.t_begin;
    const int t_end = it.t_end;
    const int Nq = it.nq, Nk = it.nk, shift = Nk - Nq;
    item_nk = Nk;
    const int wg_row0 = it.m0 + c * kSm90RowsPerConsumer;
    const int row_base = wg_row0 + 16 * warp + g;  // rows row_base and row_base + 8
    float slope_log2 = 0.f;
    if constexpr (ALIBI) slope_log2 = a.alibi_slopes[it.h] * kLog2e;

    // The key tiles this warpgroup's rows see, [w_begin, w_end) within the item's; the item's
    // other tiles are only released.
    int w_begin, w_end;
    attn90::tile_range<BLOCK_N, CAUSAL, WINDOW>(Nq, Nk, a.window, wg_row0, kSm90RowsPerConsumer,
                                                w_begin, w_end);
    w_begin = min(max(w_begin, t_begin), t_end);  // rows past Nq may start past the item's keys
    w_end = max(w_begin, min(w_end, t_end));
    // A warpgroup whose rows all lie past Nq (its share of a head's last, padded tile) computes
    // nothing: it only takes its turns and releases the slots, and the others get the tensor
    // cores. Not at d=256 with two consumers, whose 240 registers it would overflow.
    if (!(D == 256 && CONSUMERS > 1) && wg_row0 >= Nq) w_end = w_begin;

#pragma unroll
    for (int i = 0; i < DO / 2; ++i) o[i] = 0.f;
    float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.f, 0.f};

    // Lazy rescaling of O (softmax_tile) at d=256, where a rescale is 128 multiplies a thread,
    // and for e4m3, where the consumer's softmax, not the tensor cores, sets the pace (P <= 2^8
    // fits e4m3's 448): most tiles then go from the wait for O += P V straight to P's
    // conversion. Not at 16-bit d=64 and 128, whose tuned rows (db/shipped) were measured
    // without it.
    constexpr bool LAZY = D == 256 || FP8;
    const attn90::SoftmaxRows rows{row_base, t, Nk, shift, WINDOW ? a.window : 0, scale_log2,
                                   cap_in, cap_out, slope_log2};
    const auto softmax = [&](float (&x)[BLOCK_N / 2], int tile, float (&alpha)[2]) {
      const int key0 = tile * BLOCK_N;
      const bool mask =
          key0 + BLOCK_N > Nk || (CAUSAL && key0 + BLOCK_N - 1 > wg_row0 + shift) ||
          (WINDOW && key0 < wg_row0 + kSm90RowsPerConsumer - 1 + shift - a.window + 1);
      // Softcap and ALiBi transform every score anyway: their variants keep one body, as d=256
      // with two consumers does (a second body made those spill, 160 and 240 registers).
      constexpr bool ONE_BODY = SOFTCAP || ALIBI || (D == 256 && CONSUMERS > 1 && BLOCK_N != 80);
      if (ONE_BODY || mask)
        attn90::softmax_tile<BLOCK_N, true, CAUSAL, WINDOW, SOFTCAP, ALIBI, LAZY>(
            x, key0, mask, rows, row_max, row_sum, alpha);
      else
        attn90::softmax_tile<BLOCK_N, false, CAUSAL, WINDOW, SOFTCAP, ALIBI, LAZY>(
            x, key0, false, rows, row_max, row_sum, alpha);
    };

    mbar::wait_parity(base + L::Q_FULL, items & 1);
    if constexpr (GATHER) wg::fence_proxy_async();
    for (int tile = t_begin; tile < w_begin; ++tile) {
      turn_begin();
      turn_end();
      skip(tile);
    }
    if (w_begin < w_end) {
      // Software pipeline within the warpgroup: while the tensor cores run O += P V of one
      // tile, the threads compute the softmax of the next tile's scores, issued just before it.
      float x[BLOCK_N / 2];
      unsigned p[P_SLICES][4];
      float alpha[2];
      {
        const unsigned k_tile = k_ready(w_begin);
        turn_begin();
        wg::fence();
        mma_qk(x, k_tile);
        turn_end();
      }
      wg::wait<0>();
      wg::fence_acc(x);
      release_k(w_begin);
      softmax(x, w_begin, alpha);  // O is still 0: no rescale
      pack(x, p);
      for (int tile = w_begin + 1; tile < w_end; ++tile) {
        // Both tiles' operands are waited for and addressed before the first wgmma.
        const unsigned k_tile = k_ready(tile), v_tile = v_ready(tile - 1);
        turn_begin();
        wg::fence();
        mma_qk(x, k_tile);
        mma_pv(p, v_tile);
        turn_end();
        wg::wait<1>();  // S of `tile` has landed; O += P V of the previous tile may still run
        wg::fence_acc(x);
        release_k(tile);
        softmax(x, tile, alpha);
        wg::wait<0>();
        wg::fence_acc(o);
        release(tile - 1);
        // LAZY: most tiles keep every row's reference maximum (softmax_tile); the test is
        // warp-uniform.
        if (!LAZY || __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale(alpha);
        pack(x, p);
      }
      q_done();  // every S has landed
      {
        const unsigned v_tile = v_ready(w_end - 1);
        turn_begin();
        wg::fence();
        mma_pv(p, v_tile);
        turn_end();
      }
      wg::wait<0>();
      wg::fence_acc(o);
      release(w_end - 1);
    } else {
      q_done();
      turn_begin();  // the turn a computing warpgroup spends on its last O += P V
      turn_end();
    }
    for (int tile = w_end; tile < t_end; ++tile) {
      turn_begin();
      turn_end();
      skip(tile);
    }
    ring0 += t_end - t_begin;

    // Epilogue: normalise, write O and the LSE. The quad of a row holds 4 bytes of each of its
    // 16-byte chunks; a transpose over the quad gives each thread whole chunks, so O leaves in
    // 16-byte stores (rows start 16-byte aligned: the host checks O's strides).
    // VARLEN: o packed from the sequence's first row, lse [Hq, total_q] (args.h).
    OT* out = static_cast<OT*>(a.o) +
              (VARLEN ? static_cast<long long>(it.q_first) * a.o_row_stride
                      : it.b * a.o_batch_stride) +
              it.h * a.o_head_stride;
    const long long lse_base =
        VARLEN ? static_cast<long long>(it.h) * a.cu_seqlens_q[a.batch] + it.q_first
               : (static_cast<long long>(it.b) * a.heads_q + it.h) * Nq;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = attn::quad_sum(row_sum[r]);
      const float inv = sum > 0.f ? (FP8 ? a.o_scale : 1.f) * attn::rcp_approx(sum) : 0.f;
      const int row = row_base + 8 * r;
      if (a.lse != nullptr && t == 0 && row < Nq)
        a.lse[lse_base + row] =
            sum > 0.f ? (row_max[r] + attn::log2_approx(sum)) * kLn2 : kNegInf;
      OT* dst = out + static_cast<long long>(row) * a.o_row_stride + 8 * t;
#pragma unroll
      for (int q = 0; q < (DO + 31) / 32; ++q) {
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = 4 * q + i < DO / 8 ? pack2<OT>(o[4 * (4 * q + i) + 2 * r] * inv,
                                                o[4 * (4 * q + i) + 2 * r + 1] * inv)
                                    : 0u;  // past DO: columns not stored
        attn90::quad_transpose(w, t);  // the whole warp shuffles, rows past Nq too
        if (row < Nq && (DV == D || 32 * q + 8 * t < DV))
          *reinterpret_cast<uint4*>(dst + 32 * q) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }
#else
  __trap();  // sm_90a only: the host never plans this kernel elsewhere
#endif
}

}  // namespace ktune
