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
//
// Warps along M take interleaved m16 fragments (fragment i of warp wm covers rows
// (i * WARPS_M + wm) * 16 ...), and fragments past the block's last real row skip their ldmatrix
// and mma: the last, partly padded block of each expert costs tensor time for its real rows
// only, spread evenly over the warps. The loads of the tile stay whole (the B tile is needed
// anyway, padding rows of A are zero-filled without reading memory).
//
// e4m3 (FP8, sm_89 and later): a is quantised per row and w per output channel (MoeGemmArgs'
// a_scale and w_scale); the ring, the copies and the ldmatrix addresses are the 16-bit tiles'
// in bytes (a row of BLOCK_K e4m3 is BLOCK_K bytes), each 32-byte step of k one m16n8k32 mma
// instead of one m16n8k16, and the epilogue dequantises the fp32 accumulator and writes bf16.
//
// Start and steady state are arranged for weight streaming at small T: the block's row count,
// expert and pairs are read together, the prologue's weight tiles are requested before the rows
// are resolved, gemm2's routing weights are published only for the epilogue, and in the main loop
// the next slot's copies are issued one part before each k16 step of mma (Loader, k_tile).
#pragma once

#include "attention/mma.cuh"
#include "common/math.cuh"
#include "common/pdl.cuh"
#include "common/types.cuh"
#include "moe/args.h"
#include "moe/gemm_args.h"

namespace ktune {
namespace moe {

/// c += a * b over 32 bytes of k: mma.m16n8k16 for 16-bit T; for e4m3 (sm_89 and later)
/// m16n8k32, whose fragments hold the same bytes (four e4m3 where the 16-bit ones hold two
/// elements: k bytes 4t..4t+3 and 16 + 4t.. of a row or column), so the same ldmatrix addresses
/// feed it.
template <typename T>
__device__ __forceinline__ void mma_k32b(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  if constexpr (sizeof(T) == 2) {
    attn::mma_16816<T>(c, a, b0, b1);
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // e4m3 tensor cores: sm_89 and later (the op refuses e4m3 below)
#endif
  }
}

/// Shared-memory layout of a [rows][BLOCK_K] tile of 16-bit elements, rows of BLOCK_K * 2 bytes
/// (e4m3 tiles use the layout of the 16-bit tile of the same bytes: Tile<BLOCK_K / 2>).
/// The 8 row addresses of one ldmatrix phase (8 consecutive rows, one 16-byte chunk) hit 8
/// distinct 16-byte bank groups: the chunk index is XOR'd with row & 7 for rows of 8, 16 or 32
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

/// 16-byte cp.async of a weight chunk; PF > 0 asks L2 to fetch the whole PF-byte block around
/// it (.L2::128B / .L2::256B), so the next k-tiles' bytes of the same weight row arrive with it.
/// bytes = 0 zero-fills without reading (src must still be a valid address).
template <int PF>
__device__ __forceinline__ void cp_async_w(unsigned dst, const void* src, int bytes) {
  if constexpr (PF == 0) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
  } else if constexpr (PF == 128) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(bytes));
  } else {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(bytes));
  }
}

/// Global -> shared copies of one ring slot: the A tile [BLOCK_M][BLOCK_K] (rows gathered) and
/// the weight tile [NB * BLOCK_N][BLOCK_K]. Thread tid copies 16-byte chunk tid % CHUNKS of rows
/// tid / CHUNKS + i * STEP. A slot's copies are cut into PARTS = BLOCK_K / 16 parts (pass i goes
/// to part i % PARTS) so that the main loop can issue one part before each k16 step of mma:
/// address arithmetic and copy issue then overlap the tensor work instead of stalling every
/// warp right after the barrier.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREADS, bool GATED, int PF>
struct Loader {
  static constexpr int EPC = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  static constexpr int K16 = BLOCK_K * static_cast<int>(sizeof(T)) / 2;  // row in 16-bit units
  using L = Tile<K16>;
  static constexpr int CHUNKS = L::CHUNKS;
  static constexpr int NB = GATED ? 2 : 1;  // weight tiles per slot (gate, up)
  static constexpr int TILE_N = BLOCK_N;
  static constexpr int B_ROWS = NB * BLOCK_N;
  static constexpr unsigned A_BYTES = BLOCK_M * L::PITCH;
  static constexpr unsigned STAGE_BYTES = (BLOCK_M + B_ROWS) * L::PITCH;
  static constexpr int STEP = THREADS / CHUNKS;  // tile rows one pass of the CTA copies
  static constexpr int A_ITERS = (BLOCK_M + STEP - 1) / STEP;
  static constexpr int B_ITERS = (B_ROWS + STEP - 1) / STEP;
  static constexpr int PARTS = K16 / 16;  // 32-byte steps of k per slot
  static_assert(THREADS % CHUNKS == 0, "a pass covers whole rows");

  const T* a_row[A_ITERS];  // gathered row of pass i at this thread's chunk (padding: row 0)
  int a_bytes[A_ITERS];     // 16, or 0 for padding rows (zero fill)
  const T* w;               // the expert's weights: a valid address for zero fills
  const T* w_row;           // weight row of pass 0 (gate half) at this thread's chunk
  long long up_jump;        // GATED: elements from gate row j to up row j, (n - BLOCK_N) * kdim
  int b_step;               // bytes between the weight rows of consecutive passes
  unsigned s_base;          // shared address of slot 0
  int lrow, lchunk, n0, n, kdim;

  static constexpr int LOAD_A = 1, LOAD_B = 2, LOAD_AB = 3;

  /// Part `part` of k-tile kt into ring slot `slot`: the A tile (WHAT & LOAD_A), the weight
  /// tile (WHAT & LOAD_B) or both. FAST: every weight row of the tile is below n and the whole
  /// tile below kdim (no per-chunk test); otherwise chunks past either bound are zero-filled
  /// from a valid address.
  template <bool FAST, int WHAT = LOAD_AB>
  __device__ __forceinline__ void load(int slot, int kt, int part) const {
    const unsigned sa = s_base + slot * STAGE_BYTES;
    const unsigned sb = sa + A_BYTES;
    const bool k_ok = FAST || kt * BLOCK_K + lchunk * EPC < kdim;
    const int koff = k_ok ? kt * BLOCK_K : 0;
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
      if ((WHAT & LOAD_A) == 0 || i % PARTS != part) continue;
      if (BLOCK_M % STEP == 0 || lrow + i * STEP < BLOCK_M)
        attn::cp_async_16(sa + L::offset(lrow + i * STEP, lchunk), a_row[i] + koff,
                          k_ok ? a_bytes[i] : 0);
    }
    const char* wk = reinterpret_cast<const char*>(w_row + koff);
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
      if ((WHAT & LOAD_B) == 0 || i % PARTS != part) continue;
      const int row = lrow + i * STEP;
      if (B_ROWS % STEP == 0 || row < B_ROWS) {
        bool up = false;
        if constexpr (GATED && BLOCK_N % STEP == 0) up = i >= BLOCK_N / STEP;
        else if constexpr (GATED) up = row >= BLOCK_N;
        const T* p = reinterpret_cast<const T*>(wk + i * b_step) + (up ? up_jump : 0);
        if constexpr (FAST) {
          cp_async_w<PF>(sb + L::offset(row, lchunk), p, 16);
        } else {
          const bool ok = k_ok && n0 + (up ? row - BLOCK_N : row) < n;
          cp_async_w<PF>(sb + L::offset(row, lchunk), ok ? p : w, ok ? 16 : 0);
        }
      }
    }
  }
};

/// Tile `id` of a gx x gy grid of (row block, column block) tiles: launch order (id = col_block
/// * gx + block), or with GROUP_M > 0 renumbered group by group (GROUP_M row blocks run through
/// every column block, their weights shared in L2). The last group holds the remaining
/// gx % GROUP_M row blocks (or GROUP_M), so the map is one to one.
template <int GROUP_M>
__device__ __forceinline__ void gemm_tile_of(int id, int gx, int gy, int& block, int& col_block) {
  if constexpr (GROUP_M == 0) {
    block = id % gx;
    col_block = id / gx;
  } else {
    const int per_group = GROUP_M * gy;
    const int group = id / per_group;
    const int first = group * GROUP_M;
    const int size = gx - first < GROUP_M ? gx - first : GROUP_M;
    const int in = id - group * per_group;
    block = first + in % size;
    col_block = in / size;
  }
}

/// The (row block, column block) a CTA computes: gemm_tile_of of its launch index.
template <int GROUP_M>
__device__ __forceinline__ void gemm_block_of(int& block, int& col_block) {
  if constexpr (GROUP_M == 0) {
    block = blockIdx.x;
    col_block = blockIdx.y;
  } else {
    gemm_tile_of<GROUP_M>(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, block,
                          col_block);
  }
}

/// The loader of expert `expert`'s column block n0 for thread `tid`, its ring at s_base.
template <class LD>
__device__ __forceinline__ void gemm_loader_init(LD& ld, const MoeGemmArgs& args, int expert,
                                                 int n0, int tid, unsigned s_base) {
  ld.w = static_cast<decltype(ld.w)>(args.w) +
         static_cast<long long>(expert) * LD::NB * args.n * args.kdim;
  ld.s_base = s_base;
  ld.lrow = tid / LD::CHUNKS;
  ld.lchunk = tid % LD::CHUNKS;
  ld.n0 = n0;
  ld.n = args.n;
  ld.kdim = args.kdim;
  ld.w_row = ld.w + static_cast<long long>(n0 + ld.lrow) * args.kdim + ld.lchunk * LD::EPC;
  ld.up_jump = static_cast<long long>(args.n - LD::TILE_N) * args.kdim;
  ld.b_step = LD::STEP * args.kdim * static_cast<int>(sizeof(*ld.w));
}

/// Resolves the block's rows from the pairs this thread read (pair_of: rows tid + i * THREADS):
/// s_src (row of a to gather, -1: zeros), s_dst (row of out, -1: none), s_live (1 + the last
/// real row), gemm2's routing weights into scale_of (published after the main loop, the
/// epilogue their only reader), and the loader's gathered A rows. Synchronises the block.
template <int BLOCK_M, int THREADS, bool GATED, int ROWS, class LD>
__device__ __forceinline__ void gemm_resolve_rows(LD& ld, const MoeGemmArgs& args, int m0,
                                                  const int (&pair_of)[ROWS],
                                                  float (&scale_of)[ROWS], int* s_src,
                                                  int* s_dst, int* s_live, float* s_ascale) {
  const int tid = threadIdx.x;
  if (tid == 0) *s_live = 0;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ROWS; ++i) {
    const int r = tid + i * THREADS;
    if (BLOCK_M % THREADS != 0 && r >= BLOCK_M) continue;
    const int pair = pair_of[i];
    const bool real = pair >= 0 && pair < args.pairs;
    if (real) atomicMax(s_live, r + 1);
    if constexpr (GATED) {
      s_src[r] = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : -1;
      s_dst[r] = real ? m0 + r : -1;
    } else {
      s_src[r] = real ? m0 + r : -1;
      s_dst[r] = real ? pair : -1;
      scale_of[i] = real ? args.topk_weights[pair] : 0.f;
    }
    // e4m3: the row's dequantisation scale (x's token row, or act's row).
    if (s_ascale != nullptr) s_ascale[r] = real ? args.a_scale[GATED ? s_src[r] : m0 + r] : 0.f;
  }
  __syncthreads();
  const auto* a = static_cast<decltype(ld.w)>(args.a);
#pragma unroll
  for (int i = 0; i < LD::A_ITERS; ++i) {
    const int row = ld.lrow + i * LD::STEP;
    const int src = row < BLOCK_M ? s_src[row] : -1;
    ld.a_row[i] =
        a + static_cast<long long>(src >= 0 ? src : 0) * args.kdim + ld.lchunk * LD::EPC;
    ld.a_bytes[i] = src >= 0 ? 16 : 0;
  }
}

/// One k16 step (32 bytes of k) of mma on a ring slot: MF m16 fragments of A (rows A_FRAG
/// apart, ldmatrix at a_addr) against NB weight tiles of NF n8 fragments (at b_addr). Fragments
/// i >= mf_live hold padding rows only and are skipped; FULL: all MF are live (no test in the
/// hot path).
template <typename T, bool FULL, int MF, int NF, int NB, int BLOCK_N, int PITCH, int A_FRAG>
__device__ __forceinline__ void mma_k16(float (&acc)[NB][MF][NF][4], unsigned a_addr,
                                        unsigned b_addr, int mf_live) {
  using namespace attn;
  unsigned af[MF][4];
#pragma unroll
  for (int i = 0; i < MF; ++i)
    if (FULL || i < mf_live)
      ldmatrix_x4(a_addr + i * A_FRAG * PITCH, af[i][0], af[i][1], af[i][2], af[i][3]);
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int j = 0; j < NF / 2; ++j) {
      unsigned b0, b1, b2, b3;
      ldmatrix_x4(b_addr + (b * BLOCK_N + j * 16) * PITCH, b0, b1, b2, b3);
#pragma unroll
      for (int i = 0; i < MF; ++i)
        if (FULL || i < mf_live) {
          mma_k32b<T>(acc[b][i][2 * j], af[i], b0, b1);
          mma_k32b<T>(acc[b][i][2 * j + 1], af[i], b2, b3);
        }
    }
}

/// One k-tile: before each k16 step, part kk of the copies of tile `next` into `load_slot`
/// (LOAD 0: none, 1: Loader::load<true>, 2: Loader::load<false>).
template <typename T, bool FULL, int LOAD, int MF, int NF, int NB, int BLOCK_K, int BLOCK_N,
          int PITCH, int A_FRAG, class LD>
__device__ __forceinline__ void k_tile(float (&acc)[NB][MF][NF][4], const LD& ld, unsigned st,
                                       unsigned a_lane, unsigned b_lane, int a_x, int b_x,
                                       int mf_live, int load_slot, int next) {
#pragma unroll
  for (int kk = 0; kk < LD::PARTS; ++kk) {
    if constexpr (LOAD == 1) ld.template load<true>(load_slot, next, kk);
    if constexpr (LOAD == 2) ld.template load<false>(load_slot, next, kk);
    mma_k16<T, FULL, MF, NF, NB, BLOCK_N, PITCH, A_FRAG>(
        acc, st + a_lane + (((2 * kk) ^ a_x) << 4), st + b_lane + (((2 * kk) ^ b_x) << 4),
        mf_live);
  }
}

/// k_tile with the copies `mode` selects (0: none, the ring is full; 1: fast; 2: bounds-checked).
template <typename T, bool FULL, int MF, int NF, int NB, int BLOCK_K, int BLOCK_N, int PITCH,
          int A_FRAG, class LD>
__device__ __forceinline__ void k_tile_mode(int mode, float (&acc)[NB][MF][NF][4], const LD& ld,
                                            unsigned st, unsigned a_lane, unsigned b_lane,
                                            int a_x, int b_x, int mf_live, int load_slot,
                                            int next) {
  if (mode == 1)
    k_tile<T, FULL, 1, MF, NF, NB, BLOCK_K, BLOCK_N, PITCH, A_FRAG>(acc, ld, st, a_lane, b_lane,
                                                                    a_x, b_x, mf_live,
                                                                    load_slot, next);
  else if (mode == 0)
    k_tile<T, FULL, 0, MF, NF, NB, BLOCK_K, BLOCK_N, PITCH, A_FRAG>(acc, ld, st, a_lane, b_lane,
                                                                    a_x, b_x, mf_live,
                                                                    load_slot, next);
  else
    k_tile<T, FULL, 2, MF, NF, NB, BLOCK_K, BLOCK_N, PITCH, A_FRAG>(acc, ld, st, a_lane, b_lane,
                                                                    a_x, b_x, mf_live,
                                                                    load_slot, next);
}

}  // namespace moe

/// out = (gathered rows of a) x w[expert]^T with the epilogue of gemm1 (GATED) or gemm2, for the
/// blocks of sorted_pairs; see MoeGemmArgs and the file comment.
///
/// T: bf16 or fp16 (a, w and out), or e4m3 (a and w, dequantised by args.a_scale and
/// args.w_scale; out bf16; sm_89 and later). BLOCK_M: rows per CTA, equal to the align kernel's
/// block_m.
/// BLOCK_N: output columns per CTA (GATED: of act, so 2 * BLOCK_N rows of w1 are read).
/// BLOCK_K: reduction step per ring slot. WARPS: warps per CTA, WARPS_M of them along M (each
/// warp owns BLOCK_M / WARPS_M rows in interleaved m16 fragments and BLOCK_N / (WARPS / WARPS_M)
/// columns). STAGES: ring depth. GROUP_M: CTA order; 0 runs the launch order (row blocks
/// fastest), G > 0 takes G row blocks at a time through every column block (rows fastest within
/// the group), so that a wave reuses a few experts' weights and rows from L2. W_PREFETCH: L2
/// prefetch block of the weight loads in bytes (0, 128 or 256; cp_async_w). MIN_CTAS: CTAs per
/// SM the register allocation must allow (__launch_bounds__' second argument), e.g. 2 keeps two
/// 8-warp CTAs of a 128 x 128 gemm2 tile resident. EPI: 0 stores each thread's fragment pairs
/// (4 bytes) straight to global memory; 1 rounds the tile into the drained ring first (rows of
/// BLOCK_N + 8 elements, so the 32 words of one fragment store hit 32 distinct banks) and writes
/// it back in whole 16-byte chunks, consecutive threads on consecutive chunks of a row: a warp
/// stores 512 contiguous bytes per instruction instead of 8 rows x 16 bytes
/// (moe_gemm_invalid_reason: the ring must hold BLOCK_M x (BLOCK_N + 8) elements). PARTIAL
/// (gemm2, EPI=0): split-k over gridDim.z splits, split z summing k-tiles [z * per, (z + 1) *
/// per) of per = ceil(k-tiles / gridDim.z) and storing its fp32 sums times the routing weight at
/// out = partial [gridDim.z][pairs][n] (fp32; a split past the last k-tile stores zeros); the
/// combine kernel sums the splits. At small T the weight stream of few row blocks then spreads
/// over gridDim.z times more CTAs.
///
/// Requirements: n and kdim multiples of 8 (16-byte rows; moe_gemm_shape_invalid_reason);
/// sorted_pairs entries in [0, pairs] (pairs = padding); block_expert of every block below
/// *padded_rows / BLOCK_M in [0, E). sorted_pairs holds gridDim.x * BLOCK_M entries and
/// block_expert gridDim.x: every CTA reads its block's entries before it compares with
/// *padded_rows (values past it are never used).
///
/// Launch: grid (args.max_blocks, moe_gemm_grid_y(n, BLOCK_N), splits (1 unless PARTIAL)),
/// WARPS * 32 threads,
/// moe_gemm_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED) bytes of dynamic shared memory
/// (raise the kernel's dynamic limit first above 48 KiB). Blocks past *padded_rows exit at once.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARPS, int WARPS_M, int STAGES,
          bool GATED, int GROUP_M = 0, int W_PREFETCH = 0, int MIN_CTAS = 1, int EPI = 0,
          bool PARTIAL = false>
__global__ void __launch_bounds__(WARPS * 32, MIN_CTAS)
    moe_gemm_kernel(const __grid_constant__ MoeGemmArgs args) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "T must be bf16, fp16 or e4m3");
  constexpr int EB = static_cast<int>(sizeof(T));
  static_assert(BLOCK_M == 16 || BLOCK_M == 32 || BLOCK_M == 64 || BLOCK_M == 128 ||
                    BLOCK_M == 256,
                "BLOCK_M must be 16, 32, 64, 128 or 256");
  static_assert(BLOCK_N == 16 || BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 ||
                    BLOCK_N == 256,
                "BLOCK_N must be 16, 32, 64, 128 or 256");
  static_assert(BLOCK_K == 32 || BLOCK_K == 64 || BLOCK_K == 128 || BLOCK_K == 256,
                "BLOCK_K must be 32, 64, 128 or 256");
  static_assert(EB == 2 || BLOCK_K >= 64,
                "e4m3 tiles take BLOCK_K 64, 128 or 256 (rows of at least 64 bytes)");
  static_assert(WARPS == 1 || WARPS == 2 || WARPS == 4 || WARPS == 8, "WARPS: 1, 2, 4 or 8");
  static_assert(WARPS_M >= 1 && WARPS % WARPS_M == 0, "WARPS_M must divide WARPS");
  static_assert(BLOCK_M % (16 * WARPS_M) == 0, "BLOCK_M must be a multiple of 16 * WARPS_M");
  static_assert(BLOCK_N % (16 * (WARPS / WARPS_M)) == 0,
                "BLOCK_N must be a multiple of 16 * (WARPS / WARPS_M)");
  static_assert(STAGES >= 2 && STAGES <= 6, "STAGES must be 2 to 6");
  static_assert(moe_gemm_acc_regs(BLOCK_M, BLOCK_N, WARPS, GATED) <= 128,
                "more than 128 fp32 accumulators per thread");
  static_assert(moe_gemm_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED, EB) +
                        moe_gemm_static_smem_bytes(BLOCK_M, EB) <=
                    227 * 1024,
                "shared memory above 227 KiB");
  static_assert(GROUP_M == 0 || GROUP_M == 2 || GROUP_M == 4 || GROUP_M == 8 || GROUP_M == 16 ||
                    GROUP_M == 32,
                "GROUP_M must be 0, 2, 4, 8, 16 or 32");
  static_assert(W_PREFETCH == 0 || W_PREFETCH == 128 || W_PREFETCH == 256,
                "W_PREFETCH must be 0, 128 or 256");
  static_assert(MIN_CTAS >= 1 && MIN_CTAS <= 4, "MIN_CTAS must be 1 to 4");
  static_assert(moe_gemm_regs_per_thread(WARPS, MIN_CTAS) >=
                    moe_gemm_acc_regs(BLOCK_M, BLOCK_N, WARPS, GATED) + 32,
                "MIN_CTAS leaves fewer registers per thread than the accumulators plus 32");
  static_assert(EPI == 0 || EPI == 1, "EPI must be 0 or 1");
  static_assert(!PARTIAL || (!GATED && EPI == 0),
                "PARTIAL (split-k fp32 partial sums) is gemm2's, with EPI=0");
  static_assert(EPI == 0 || moe_gemm_epi_smem_bytes(BLOCK_M, BLOCK_N) <=
                                moe_gemm_smem_bytes(BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GATED, EB),
                "EPI=1: the ring must hold the BLOCK_M x (BLOCK_N + 8) output tile");

  using namespace attn;
  using OutT = typename OutputOf<T>::type;
  constexpr bool QUANT = EB == 1;  // e4m3: dequantise by a_scale and w_scale in the epilogue
  using L = moe::Tile<BLOCK_K * EB / 2>;
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

  __shared__ int s_src[BLOCK_M];    // row of a to gather, -1: zeros
  __shared__ int s_dst[BLOCK_M];    // row of out to write, -1: none
  __shared__ float s_scale[BLOCK_M];
  __shared__ float s_ascale[QUANT ? BLOCK_M : 1];  // e4m3: the rows' dequantisation scales
  __shared__ int s_live;            // 1 + the last real row of the block
  extern __shared__ __align__(128) unsigned char smem[];

  // Programmatic launch (common/pdl.cuh): gemm1 reads the alignment its predecessor wrote, so it
  // waits first; gemm2 reads only what kernels before gemm1 wrote until its A loads (act, gemm1's
  // output), so it waits just before them: its weight tiles stream during gemm1's tail.
  if constexpr (GATED) griddep_wait();
  int block, col_block;
  moe::gemm_block_of<GROUP_M>(block, col_block);
  const int m0 = block * BLOCK_M;
  const int tid = threadIdx.x;
  // The block's row count, its expert and its pairs are independent reads (block < max_blocks,
  // its rows inside sorted_pairs): all three in flight at once, before the early exits.
  constexpr int ROWS_PER_THREAD = (BLOCK_M + THREADS - 1) / THREADS;
  const int padded_rows = *args.padded_rows;
  const int expert = args.block_expert[block];
  int pair_of[ROWS_PER_THREAD];
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i) {
    const int r = tid + i * THREADS;
    pair_of[i] = BLOCK_M % THREADS == 0 || r < BLOCK_M ? args.sorted_pairs[m0 + r] : -1;
  }
  if (m0 >= padded_rows || expert < 0) return;
  const int n0 = col_block * BLOCK_N;
  const int n = args.n;
  const int kdim = args.kdim;

  using LD = moe::Loader<T, BLOCK_M, BLOCK_N, BLOCK_K, THREADS, GATED, W_PREFETCH>;
  LD ld;
  moe::gemm_loader_init(ld, args, expert, n0, tid, smem_addr(smem));
  // Every weight row of this CTA's column block exists: the fast loads need no column test.
  const bool interior = n0 + BLOCK_N <= n;

  // The weight tiles of the prologue depend on the expert alone: request them before the rows
  // are resolved. They join the first commit group with A tile 0, and group s holds A tile s,
  // so tile s has landed once groups 0..s have, as the main loop assumes.
  // Split-k (PARTIAL): split blockIdx.z of gridDim.z takes k-tiles [kt0, kt1) (possibly none).
  const int k_all = (kdim + BLOCK_K - 1) / BLOCK_K;
  int kt0 = 0, kt1 = k_all;
  if constexpr (PARTIAL) {
    const int per = (k_all + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z);
    kt0 = min(k_all, static_cast<int>(blockIdx.z) * per);
    kt1 = min(k_all, kt0 + per);
  }
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s)
    if (kt0 + s < kt1)
#pragma unroll
      for (int part = 0; part < LD::PARTS; ++part)
        ld.template load<false, LD::LOAD_B>(s, kt0 + s, part);

  if constexpr (!GATED) griddep_wait();
  // gemm2's routing weights are read now and published after the main loop (the epilogue is
  // their only reader), so their latency stays off the start.
  float scale_of[ROWS_PER_THREAD];
  moe::gemm_resolve_rows<BLOCK_M, THREADS, GATED>(ld, args, m0, pair_of, scale_of, s_src, s_dst,
                                                 &s_live, QUANT ? s_ascale : nullptr);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (kt0 + s < kt1)
#pragma unroll
      for (int part = 0; part < LD::PARTS; ++part)
        ld.template load<false, LD::LOAD_A>(s, kt0 + s, part);
    cp_async_commit();
  }

  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;
  // ldmatrix lane addresses (fragment layouts in attention/mma.cuh): A rows lane & 15 of the
  // warp's first fragment with the odd chunk for lanes 16-31; W rows (lane & 7) + 8 * (lane >> 4)
  // with the odd chunk for lanes 8-15 and 24-31. The swizzle term only depends on the row mod 8.
  constexpr int A_FRAG = WARPS_M * 16;  // rows between a warp's fragments
  const int a_row = warp_m * 16 + (lane & 15);
  const int b_row = warp_n * WTN + (lane & 7) + ((lane >> 4) << 3);
  const unsigned a_lane = a_row * PITCH;
  const unsigned b_lane = A_BYTES + b_row * PITCH;
  const int a_x = (lane >> 4) ^ L::swizzle(a_row);
  const int b_x = ((lane >> 3) & 1) ^ L::swizzle(b_row);
  // Fragments of this warp holding at least one real row: i < mf_live.
  const int live = s_live - warp_m * 16;
  const int frags = live <= 0 ? 0 : (live + A_FRAG - 1) / A_FRAG;
  const int mf_live = frags < MF ? frags : MF;

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
  for (int kt = kt0; kt < kt1; ++kt) {
    // Tile kt has landed for every thread once this thread's older groups are done and the
    // barrier passes; the barrier also retires every read of tile kt - 1, whose slot the copies
    // issued during this tile overwrite.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    const int load_slot = slot == 0 ? STAGES - 1 : slot - 1;
    const int mode = next >= kt1 ? 0 : interior && (next + 1) * BLOCK_K <= kdim ? 1 : 2;
    const unsigned st = ld.s_base + slot * STAGE_BYTES;
    if (mf_live == MF)
      moe::k_tile_mode<T, true, MF, NF, NB, BLOCK_K, BLOCK_N, PITCH, A_FRAG>(
          mode, acc, ld, st, a_lane, b_lane, a_x, b_x, mf_live, load_slot, next);
    else
      moe::k_tile_mode<T, false, MF, NF, NB, BLOCK_K, BLOCK_N, PITCH, A_FRAG>(
          mode, acc, ld, st, a_lane, b_lane, a_x, b_x, mf_live, load_slot, next);
    cp_async_commit();
    slot = slot + 1 == STAGES ? 0 : slot + 1;
  }
  // Past the main loop this CTA needs its SM for the epilogue only: the next kernel (gemm2 or
  // the combine) may be scheduled into the last wave's tail.
  griddep_launch_dependents();
  cp_async_wait<0>();
  // EPI=1 overwrites the ring: every warp must be past its last ldmatrix (gemm2's barrier
  // below serves as well).
  if constexpr (EPI == 1 && GATED) __syncthreads();
  if constexpr (!GATED) {
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
      const int r = tid + i * THREADS;
      if (BLOCK_M % THREADS == 0 || r < BLOCK_M) s_scale[r] = scale_of[i];
    }
    __syncthreads();
  }

  // Each thread owns rows g and g + 8 of every m16 fragment and columns 2t, 2t + 1 of every n8
  // fragment (n is even, so a pair is in or out); pair (i, r, j) rounds to one 32-bit word.
  OutT* out = static_cast<OutT*>(args.out);
  const int g = lane >> 2;
  const int t = lane & 3;
  // e4m3: the dequantisation scales of weight tile b's rows (output columns) col, col + 1,
  // read where they are used (L1 hits after the first row: kept in registers across the
  // epilogue they would cost NB x NF x 2 of them next to the accumulators).
  const float* const w_scale =
      QUANT ? args.w_scale + static_cast<long long>(expert) * NB * n : nullptr;
  const auto col_scale = [&](int b, int j) {
    const int col = n0 + warp_n * WTN + j * 8 + 2 * t;
    return col < n ? __ldg(reinterpret_cast<const float2*>(w_scale + b * n + col))
                   : make_float2(0.f, 0.f);
  };
  // The column pair acc[b][i][j][2r], [2r + 1], dequantised (e4m3) for row scale ra.
  const auto deq = [&](int b, int i, int j, int r, float ra) {
    float2 v = make_float2(acc[b][i][j][2 * r], acc[b][i][j][2 * r + 1]);
    if constexpr (QUANT) {
      const float2 cs = col_scale(b, j);
      v.x = v.x * ra * cs.x;
      v.y = v.y * ra * cs.y;
    }
    return v;
  };
  // scale: gemm2's routing weight; ra: the row's dequantisation scale (e4m3, else unused).
  const auto word = [&](int i, int r, int j, float scale, float ra) {
    if constexpr (GATED) {
      const float2 gate = deq(0, i, j, r, ra), up = deq(1, i, j, r, ra);
      return pack2<OutT>(gate.x * sigmoid_approx(gate.x) * up.x,
                         gate.y * sigmoid_approx(gate.y) * up.y);
    } else {
      const float2 v = deq(0, i, j, r, ra);
      return pack2<OutT>(v.x * scale, v.y * scale);
    }
  };
  if constexpr (EPI == 1) {
    constexpr int OP = BLOCK_N + 8;  // elements per staged row
    constexpr int CH = BLOCK_N / 8;  // 16-byte chunks per row
    unsigned* so = reinterpret_cast<unsigned*>(smem);
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = (i * WARPS_M + warp_m) * 16 + r * 8 + g;
        const float scale = GATED ? 1.f : s_scale[row];
        const float ra = QUANT ? s_ascale[row] : 1.f;
#pragma unroll
        for (int j = 0; j < NF; ++j)
          so[(row * OP + warp_n * WTN + j * 8 + 2 * t) / 2] = word(i, r, j, scale, ra);
      }
    __syncthreads();
    const int live_rows = s_live;
#pragma unroll 4
    for (int idx = tid; idx < BLOCK_M * CH; idx += THREADS) {
      const int row = idx / CH;
      const int c = idx % CH;
      if (row >= live_rows) break;  // rows past the last real one are padding
      const int dst = s_dst[row];
      const int col = n0 + c * 8;
      if (dst >= 0 && col < n)
        *reinterpret_cast<uint4*>(out + static_cast<long long>(dst) * n + col) =
            *reinterpret_cast<const uint4*>(smem + (row * OP + c * 8) * 2);
    }
    return;
  }
  // PARTIAL: split z's fp32 sums times the routing weight (linear: the combine's sum over the
  // splits is the weighted product) at partial[z][pair][col].
  float* const part = PARTIAL ? static_cast<float*>(args.out) +
                                    static_cast<long long>(blockIdx.z) * args.pairs * n
                              : nullptr;
#pragma unroll
  for (int i = 0; i < MF; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = (i * WARPS_M + warp_m) * 16 + r * 8 + g;
      const int dst = s_dst[row];
      if (dst < 0) continue;
      const float scale = GATED ? 1.f : s_scale[row];
      const float ra = QUANT ? s_ascale[row] : 1.f;
      const long long o = static_cast<long long>(dst) * n;
#pragma unroll
      for (int j = 0; j < NF; ++j) {
        const int col = n0 + warp_n * WTN + j * 8 + 2 * t;
        if (col >= n) continue;
        if constexpr (PARTIAL) {
          const float2 v = deq(0, i, j, r, ra);
          *reinterpret_cast<float2*>(part + o + col) = make_float2(v.x * scale, v.y * scale);
        } else {
          *reinterpret_cast<unsigned*>(out + o + col) = word(i, r, j, scale, ra);
        }
      }
    }
}

}  // namespace ktune
