// Grouped GEMMs of the MoE layer with mma.sync tensor-core tiles (sm_80 and later; a wgmma/TMA
// variant would sit beside this file as gemm_sm90.cuh).
//
// One CTA computes a BLOCK_M x BLOCK_N tile of one expert: the BLOCK_M rows are one block of
// sorted_pairs (all routed to the same expert, block_expert[block]), gathered row by row, and
// the columns are BLOCK_N output columns. A [BLOCK_M, BLOCK_K] and W [BLOCK_N, BLOCK_K] tiles
// stream through a STAGES-deep cp.async ring; both operands are K-contiguous, so W is the "col"
// operand of mma.m16n8k16 read with plain (non-transposed) ldmatrix.
//
// GATED (gemm1): A = x, row of sorted row r is x[pair / k]; the CTA reads BLOCK_N gate rows
// (w1[e, n0 + j]) and the matching BLOCK_N up rows (w1[e, I + n0 + j]) of w1, keeps two
// accumulators and writes act[r, n0 + j] = silu(gate) * up once, rounded from fp32.
// With pair_token set (expert choice), the row is x[pair_token[pair]] instead of x[pair / k].
// Not GATED (gemm2): A = act, row r read in place; the fp32 accumulator is multiplied by
// topk_weights[pair] before rounding and stored at pair_out[pair]. Padding rows
// (pair == T * k) load zeros and store nothing, so unwritten act rows are never read.
#pragma once

#include "attention/mma.cuh"
#include "common/math.cuh"
#include "common/types.cuh"
#include "moe/args.h"
#include "moe/gemm_args.h"

namespace ktune {
namespace moe {

/// Shared-memory layout of a [rows][BLOCK_K] tile of 16-bit elements, rows of BLOCK_K * 2 bytes.
/// The 8 row addresses of one ldmatrix phase (8 consecutive rows, one 16-byte chunk) hit 8
/// distinct 16-byte bank groups: the chunk index is XOR'd with row & 7 for rows of 8 or 16
/// chunks, with bits 1-2 of the row for rows of 4 chunks (two rows per 128-byte line). The
/// swizzle depends on row & 7 only, so offsets by multiples of 8 rows keep it.
template <int BLOCK_K>
struct Tile {
  static constexpr int CHUNKS = BLOCK_K / 8;
  static constexpr int PITCH = BLOCK_K * 2;
  __device__ static __forceinline__ int swizzle(int row) {
    return CHUNKS >= 8 ? (row & 7) : ((row >> 1) & 3);
  }
  __device__ static __forceinline__ unsigned offset(int row, int chunk) {
    return static_cast<unsigned>(row * PITCH + ((chunk ^ swizzle(row)) << 4));
  }
};

}  // namespace moe

/// out = (gathered rows of a) x w[expert]^T with the epilogue of gemm1 (GATED) or gemm2, for the
/// blocks of sorted_pairs; see MoeGemmArgs and the file comment.
///
/// T: bf16 or fp16 (a, w and out). BLOCK_M: rows per CTA, equal to the align kernel's block_m.
/// BLOCK_N: output columns per CTA (GATED: of act, so 2 * BLOCK_N rows of w1 are read).
/// BLOCK_K: reduction step per ring slot. WARPS: warps per CTA, WARPS_M of them along M (each
/// warp owns a (BLOCK_M / WARPS_M) x (BLOCK_N / (WARPS / WARPS_M)) sub-tile). STAGES: ring depth.
///
/// Requirements: n and kdim multiples of 8 (16-byte rows; moe_gemm_shape_invalid_reason);
/// sorted_pairs entries in [0, pairs] (pairs = padding); block_expert of every block below
/// *padded_rows / BLOCK_M in [0, E).
///
/// Launch: grid (args.max_blocks, moe_gemm_grid_y(n, BLOCK_N)), WARPS * 32 threads,
/// moe_gemm_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED) bytes of dynamic shared memory
/// (raise the kernel's dynamic limit first above 48 KiB). Blocks past *padded_rows exit at once.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARPS, int WARPS_M, int STAGES,
          bool GATED>
__global__ void __launch_bounds__(WARPS * 32)
    moe_gemm_kernel(const __grid_constant__ MoeGemmArgs args) {
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(BLOCK_M == 16 || BLOCK_M == 32 || BLOCK_M == 64 || BLOCK_M == 128 ||
                    BLOCK_M == 256,
                "BLOCK_M must be 16, 32, 64, 128 or 256");
  static_assert(BLOCK_N == 16 || BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 ||
                    BLOCK_N == 256,
                "BLOCK_N must be 16, 32, 64, 128 or 256");
  static_assert(BLOCK_K == 32 || BLOCK_K == 64 || BLOCK_K == 128, "BLOCK_K must be 32, 64 or 128");
  static_assert(WARPS == 1 || WARPS == 2 || WARPS == 4 || WARPS == 8, "WARPS: 1, 2, 4 or 8");
  static_assert(WARPS_M >= 1 && WARPS % WARPS_M == 0, "WARPS_M must divide WARPS");
  static_assert(BLOCK_M % (16 * WARPS_M) == 0, "BLOCK_M must be a multiple of 16 * WARPS_M");
  static_assert(BLOCK_N % (16 * (WARPS / WARPS_M)) == 0,
                "BLOCK_N must be a multiple of 16 * (WARPS / WARPS_M)");
  static_assert(STAGES >= 2 && STAGES <= 6, "STAGES must be 2 to 6");
  static_assert(moe_gemm_acc_regs(BLOCK_M, BLOCK_N, WARPS, GATED) <= 128,
                "more than 128 fp32 accumulators per thread");
  static_assert(moe_gemm_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED) +
                        moe_gemm_static_smem_bytes(BLOCK_M) <=
                    227 * 1024,
                "shared memory above 227 KiB");

  using namespace attn;
  using L = moe::Tile<BLOCK_K>;
  constexpr int THREADS = WARPS * 32;
  constexpr int CHUNKS = L::CHUNKS;
  constexpr int PITCH = L::PITCH;
  constexpr int WARPS_N = WARPS / WARPS_M;
  constexpr int WTM = BLOCK_M / WARPS_M;  // warp sub-tile rows
  constexpr int WTN = BLOCK_N / WARPS_N;  // warp sub-tile columns
  constexpr int MF = WTM / 16;            // m16 fragments per warp
  constexpr int NF = WTN / 8;             // n8 fragments per warp
  constexpr int NB = GATED ? 2 : 1;       // weight tiles per stage (gate, up)
  constexpr int B_ROWS = NB * BLOCK_N;
  constexpr unsigned A_BYTES = BLOCK_M * PITCH;
  constexpr unsigned STAGE_BYTES = (BLOCK_M + B_ROWS) * PITCH;
  constexpr int STEP = THREADS / CHUNKS;  // tile rows one pass of the CTA copies
  constexpr int A_ITERS = (BLOCK_M + STEP - 1) / STEP;
  constexpr int B_ITERS = (B_ROWS + STEP - 1) / STEP;
  static_assert(THREADS % CHUNKS == 0, "a pass covers whole rows");

  __shared__ int s_src[BLOCK_M];    // row of a to gather, -1: zeros
  __shared__ int s_dst[BLOCK_M];    // row of out to write, -1: none
  __shared__ float s_scale[BLOCK_M];
  extern __shared__ __align__(128) unsigned char smem[];

  const int block = blockIdx.x;
  const int m0 = block * BLOCK_M;
  if (m0 >= *args.padded_rows) return;
  const int expert = args.block_expert[block];
  if (expert < 0) return;
  const int n0 = blockIdx.y * BLOCK_N;
  const int n = args.n;
  const int kdim = args.kdim;
  const int tid = threadIdx.x;

  for (int r = tid; r < BLOCK_M; r += THREADS) {
    const int pair = args.sorted_pairs[m0 + r];
    const bool real = pair >= 0 && pair < args.pairs;
    if constexpr (GATED) {
      s_src[r] = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : -1;
      s_dst[r] = real ? m0 + r : -1;
      s_scale[r] = 1.f;
    } else {
      s_src[r] = real ? m0 + r : -1;
      s_dst[r] = real ? pair : -1;
      s_scale[r] = real ? args.topk_weights[pair] : 0.f;
    }
  }
  __syncthreads();

  const T* a = static_cast<const T*>(args.a);
  const T* w = static_cast<const T*>(args.w) + static_cast<long long>(expert) * NB * n * kdim;
  const unsigned s_base = smem_addr(smem);

  // Each thread copies chunk `lchunk` of rows lrow + i * STEP of both tiles. Gathered A rows
  // keep one pointer each (nullptr: zeros); W rows are affine in i.
  const int lrow = tid / CHUNKS;
  const int lchunk = tid % CHUNKS;
  const T* a_ptr[A_ITERS];
#pragma unroll
  for (int i = 0; i < A_ITERS; ++i) {
    const int row = lrow + i * STEP;
    const int src = row < BLOCK_M ? s_src[row] : -1;
    a_ptr[i] = src >= 0 ? a + static_cast<long long>(src) * kdim + lchunk * 8 : nullptr;
  }

  const int k_tiles = (kdim + BLOCK_K - 1) / BLOCK_K;
  auto load_stage = [&](int slot, int kt) {
    const int kc = kt * BLOCK_K + lchunk * 8;
    const bool k_ok = kc < kdim;
    const unsigned sa = s_base + slot * STAGE_BYTES;
    const unsigned sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
      const int row = lrow + i * STEP;
      if (BLOCK_M % STEP == 0 || row < BLOCK_M) {
        const bool ok = k_ok && a_ptr[i] != nullptr;
        cp_async_16(sa + L::offset(row, lchunk), ok ? a_ptr[i] + kt * BLOCK_K : a, ok ? 16 : 0);
      }
    }
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
      const int row = lrow + i * STEP;
      if (B_ROWS % STEP == 0 || row < B_ROWS) {
        const bool up = GATED && row >= BLOCK_N;
        const int col = n0 + (up ? row - BLOCK_N : row);  // output column of this w row
        const bool ok = k_ok && col < n;
        const T* p = w + static_cast<long long>(up ? n + col : col) * kdim + kc;
        cp_async_16(sb + L::offset(row, lchunk), ok ? p : w, ok ? 16 : 0);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;
  // ldmatrix lane addresses (fragment layouts in attention/mma.cuh): A rows lane & 15 with the
  // odd chunk for lanes 16-31; W rows (lane & 7) + 8 * (lane >> 4) with the odd chunk for lanes
  // 8-15 and 24-31. The swizzle term only depends on the row mod 8.
  const int a_row = warp_m * WTM + (lane & 15);
  const int b_row = warp_n * WTN + (lane & 7) + ((lane >> 4) << 3);
  const unsigned a_lane = a_row * PITCH;
  const unsigned b_lane = A_BYTES + b_row * PITCH;
  const int a_x = (lane >> 4) ^ L::swizzle(a_row);
  const int b_x = ((lane >> 3) & 1) ^ L::swizzle(b_row);

  float acc[NB][MF][NF][4];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
      for (int j = 0; j < NF; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[b][i][j][e] = 0.f;

  int slot = 0;
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed for every thread once this thread's older groups are done and the
    // barrier passes; the barrier also retires every read of tile kt - 1, whose slot the copy
    // issued just below overwrites.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int next = kt + STAGES - 1;
      if (next < k_tiles) load_stage(slot == 0 ? STAGES - 1 : slot - 1, next);
      cp_async_commit();
    }
    const unsigned st = s_base + slot * STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < BLOCK_K / 16; ++kk) {
      unsigned af[MF][4];
#pragma unroll
      for (int i = 0; i < MF; ++i)
        ldmatrix_x4(st + a_lane + i * 16 * PITCH + (((2 * kk) ^ a_x) << 4), af[i][0], af[i][1],
                    af[i][2], af[i][3]);
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int j = 0; j < NF / 2; ++j) {
          unsigned b0, b1, b2, b3;
          ldmatrix_x4(st + b_lane + (b * BLOCK_N + j * 16) * PITCH + (((2 * kk) ^ b_x) << 4), b0,
                      b1, b2, b3);
#pragma unroll
          for (int i = 0; i < MF; ++i) {
            mma_16816<T>(acc[b][i][2 * j], af[i], b0, b1);
            mma_16816<T>(acc[b][i][2 * j + 1], af[i], b2, b3);
          }
        }
    }
    slot = slot + 1 == STAGES ? 0 : slot + 1;
  }
  cp_async_wait<0>();

  // Epilogue straight from the fragments: each thread owns rows g and g + 8 of every m16
  // fragment and columns 2t, 2t + 1 of every n8 fragment (n is even, so a pair is in or out).
  T* out = static_cast<T*>(args.out);
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int i = 0; i < MF; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_m * WTM + i * 16 + r * 8 + g;
      const int dst = s_dst[row];
      if (dst < 0) continue;
      const float scale = s_scale[row];
      T* o = out + static_cast<long long>(dst) * n;
#pragma unroll
      for (int j = 0; j < NF; ++j) {
        const int col = n0 + warp_n * WTN + j * 8 + 2 * t;
        if (col < n) {
          float v0, v1;
          if constexpr (GATED) {
            const float g0 = acc[0][i][j][2 * r], g1 = acc[0][i][j][2 * r + 1];
            v0 = g0 * sigmoid_approx(g0) * acc[1][i][j][2 * r];
            v1 = g1 * sigmoid_approx(g1) * acc[1][i][j][2 * r + 1];
          } else {
            v0 = acc[0][i][j][2 * r] * scale;
            v1 = acc[0][i][j][2 * r + 1] * scale;
          }
          *reinterpret_cast<unsigned*>(o + col) = pack2<T>(v0, v1);
        }
      }
    }
}

}  // namespace ktune
