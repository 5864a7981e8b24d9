// Hopper warpgroup MMA (wgmma.mma_async, sm_90a): shared-memory matrix descriptors for K-major
// 16-bit tiles in the 128-byte swizzle, the fence / commit / wait protocol, m64nNk16 products with
// A and B from shared memory (N = 64, 80, 128, 256; bf16 and fp16 in, fp32 accumulators) or A
// from registers (N = 64, 80, 96, 128, 256), and where each of a thread's accumulators sits in the
// m64 x N tile.
//
// NVRTC alone: no headers. Host code (g++) may include this file too: the descriptor, swizzle
// and fragment-layout functions are plain constexpr (the tests check them on the CPU); the
// device wrappers exist only under __CUDACC__. wgmma needs the architecture-specific target
// sm_90a: elsewhere (sm_80, plain sm_90) KTUNE_WGMMA is 0 and the wrappers trap, so that a file
// including this one still compiles for every target; kernels test KTUNE_WGMMA to compile their
// body only where it runs.
//
// The 128-byte swizzle (descriptor swizzle mode 1). A K-major tile of R rows x 64 16-bit
// elements has rows of 128 bytes = 8 chunks of 16 bytes. Element (r, k) is stored at byte
//     r * 128 + ((k / 8) ^ (r % 8)) * 16 + (k % 8) * 2
// i.e. the 16-byte chunk index is XOR'd with the row's index within its group of 8 rows. The
// hardware applies the same XOR to address bits 4-6 using bits 7-9 of the address it computes,
// so the XOR is only the row's if the tile starts 1024-byte aligned (8 rows x 128 bytes, one
// swizzle atom): every tile base handed to sw128_desc() must be a multiple of 1024 bytes. This is
// the layout of moe::Tile<64> in moe/gemm.cuh, whose cp.async loaders therefore feed wgmma
// unchanged. A warp's 16-byte stores of one chunk column then hit 8 distinct bank groups.
//
// Descriptor fields for that tile (PTX ISA, "Matrix Descriptor Format" of wgmma): the operand
// is cut into 8 x 16-byte core matrices. SBO, the stride between core matrices along M/N (the
// next 8 rows), is 8 rows x 128 bytes = 1024. LBO, the stride between core matrices along K, is
// not used in the swizzled K-major modes (a k16 step is 32 bytes, inside one swizzled row); the
// field holds 1 (16 bytes) as CUTLASS writes it. One m64nNk16 reads k columns 16 * kk .. + 15:
// the start address moves by kk * 32 bytes with the base-offset field left 0, and the hardware
// swizzles the address it forms, so the same descriptor advanced by 32 bytes reads the next k16
// slice of the swizzled rows.
#pragma once

// Device code only: host code includes this file for its constexpr functions from any include
// root, so it must not depend on one.
#if defined(__CUDACC__)
#include "common/types.cuh"
#endif

#ifndef KTUNE_WG_HD
#if defined(__CUDACC__)
#define KTUNE_WG_HD __host__ __device__
#else
#define KTUNE_WG_HD
#endif
#endif

// 1 where wgmma may be issued: device code for sm_90a (the 'a' target defines the feature macro).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KTUNE_WGMMA 1
#else
#define KTUNE_WGMMA 0
#endif

namespace ktune {
namespace wg {

constexpr int kWarpgroupThreads = 128;  // 4 consecutive warps, the first one's index % 4 == 0
constexpr int kSw128RowBytes = 128;     // one tile row: 64 16-bit elements
constexpr int kSw128AtomBytes = 1024;   // 8 rows: the swizzle repeats, tiles start aligned to it
constexpr int kK16Bytes = 32;           // K extent of one m64nNk16 per row, 16-bit elements

/// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte-swizzled tile.
KTUNE_WG_HD constexpr unsigned sw128_offset(int row, int chunk) {
  return static_cast<unsigned>(row * kSw128RowBytes + ((chunk ^ (row & 7)) << 4));
}

/// Descriptor swizzle modes (bits 62-63).
enum Swizzle : int { swizzle_none = 0, swizzle_128b = 1, swizzle_64b = 2, swizzle_32b = 3 };

/// The 64-bit shared-memory matrix descriptor: start address (bits 0-13), leading-dimension byte
/// offset (16-29), stride-dimension byte offset (32-45), each in 16-byte units (the low 4 bits
/// are dropped); base offset (49-51) 0; swizzle mode (62-63). smem_addr is a shared-window
/// address (below 256 KiB, so the start field cannot overflow).
KTUNE_WG_HD constexpr unsigned long long make_desc(unsigned smem_addr, unsigned lbo_bytes,
                                                   unsigned sbo_bytes, int swizzle) {
  return static_cast<unsigned long long>((smem_addr & 0x3ffffu) >> 4) |
         static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3fffu) << 16 |
         static_cast<unsigned long long>((sbo_bytes >> 4) & 0x3fffu) << 32 |
         static_cast<unsigned long long>(swizzle & 3) << 62;
}

/// Descriptor of a K-major [rows][64] 16-bit tile in the 128-byte swizzle starting at
/// `smem_addr` + `k_bytes` (a multiple of 1024 plus kk * 32 for the kk-th k16 slice); see the
/// file comment for SBO = 1024 and LBO = 16.
KTUNE_WG_HD constexpr unsigned long long sw128_desc(unsigned smem_addr, unsigned k_bytes = 0) {
  return make_desc(smem_addr + k_bytes, 16, kSw128AtomBytes, swizzle_128b);
}

/// Descriptor of an MN-major B operand in the 128-byte swizzle: a [K rows][N] 16-bit tile stored
/// as N / 64 column blocks, each [K rows][64] with 128-byte swizzled rows (what a TMA box of 64
/// columns with SWIZZLE_128B writes; V in O += P V is one: its rows are the product's K, its
/// columns the product's N). In the canonical MN-major layout ((8 x 16 B, n), (8 rows, k)) the
/// leading byte offset is the stride between the 64-column blocks (`block_bytes`, K rows x 128)
/// and the stride byte offset that between groups of 8 rows (1024). One k16 step reads 16 rows:
/// the start moves by 16 x 128 = 2048 bytes, a whole number of swizzle atoms. N = 96 (flash
/// attention's V at d = 96) reads a block and the first half of the next, addressed as whole
/// blocks are (checked on the H200 by gpu_attention_test's d=96 cases); N = 80 (d = 72 or 80 in
/// d=96's tiles) a block and a quarter, likewise (its d=80 cases).
KTUNE_WG_HD constexpr unsigned long long sw128_mn_desc(unsigned smem_addr, unsigned block_bytes) {
  return make_desc(smem_addr, block_bytes, kSw128AtomBytes, swizzle_128b);
}

/// Where the fp32 accumulators of m64nNk16 sit (PTX ISA, wgmma D fragment for .f32): thread t of
/// the warpgroup (warp w = t / 32, g = (t % 32) / 4, q = t % 4) holds N / 2 values; value i is in
/// row 16 w + g + 8 ((i / 2) % 2) and column 8 (i / 4) + 2 q + i % 2. So every n8 slice j has four
/// values per thread, as mma.sync's m16n8 C fragment with the warp's 16 rows offset by 16 w:
/// {4j, 4j + 1} in row g, {4j + 2, 4j + 3} in row g + 8, at columns 8j + 2q, 8j + 2q + 1.
template <int N>
struct Acc {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N is a multiple of 8 up to 256");
  static constexpr int REGS = N / 2;  // fp32 accumulators per thread
  KTUNE_WG_HD static constexpr int row(int thread, int i) {
    return 16 * ((thread >> 5) & 3) + ((thread & 31) >> 2) + 8 * ((i >> 1) & 1);
  }
  KTUNE_WG_HD static constexpr int col(int thread, int i) {
    return 8 * (i >> 2) + 2 * (thread & 3) + (i & 1);
  }
};

#if defined(__CUDACC__)

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// Orders this thread's earlier generic-proxy writes to shared memory (st.shared, cp.async)
/// before later async-proxy reads (wgmma operands, bulk copies). Each writing thread issues it
/// before the barrier that publishes the tile.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// wgmma.fence: the accumulator registers and shared-memory operands written before it are
/// visible to the wgmmas issued after it. Needed before the first wgmma of a batch, and after
/// any other instruction touched the accumulators.
__device__ __forceinline__ void fence() {
#if KTUNE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// Closes the wgmmas issued since the last commit into one group.
__device__ __forceinline__ void commit() {
#if KTUNE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// Waits until at most N of this warpgroup's committed groups are pending: the accumulators of
/// the finished ones are written and their shared-memory operands may be overwritten.
template <int N>
__device__ __forceinline__ void wait() {
#if KTUNE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

/// Keeps the compiler from moving accesses of the accumulators across a wgmma wait or fence:
/// the registers are rewritten in place as far as it knows, so reads after wait() stay after it.
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// d (+)= A x B^T for one m64nNk16: A is 64 x 16 and B is N x 16, both K-major in shared memory
/// (descriptors a and b); d is this thread's N / 2 accumulators (Acc<N> says where they sit).
/// scale_d = 0 ignores d's old values (d = A x B^T). Asynchronous: d is valid after commit()
/// and wait<>(); the operands must stay unchanged until then.
template <typename T, int N>
struct MmaSS;

/// d = A x B^T for one m64nNk16, as MmaSS with scale_d = 0, but d is only written: the
/// accumulators are not inputs of the instruction, so whatever last wrote them (the softmax of
/// the previous tile, say) does not make ptxas serialise the wgmmas in flight (warning C7513).
template <typename T, int N>
struct MmaSSZero;

/// d (+)= A x B for one m64nNk16 with A from registers and B an MN-major shared tile
/// (sw128_mn_desc): a are this thread's four 32-bit registers of the 64 x 16 A tile, two 16-bit
/// values each, laid out as the accumulators of a k16 slice (Acc<16>): a[0] row g, columns
/// 2q, 2q + 1; a[1] row g + 8, same columns; a[2] and a[3] the same rows at columns + 8. So the
/// fp32 accumulators of S = Q K^T, rounded pairwise, are the A operand of O += P V as they sit.
template <typename T, int N>
struct MmaRSTransB;

/// e4m3 (fp8) products, m64nNk32: both operands K-major (wgmma transposes 16-bit types only), a
/// k32 step is 32 bytes of a 128-byte swizzled row as a k16 step of 16-bit elements is, so
/// sw128_desc() addresses them unchanged. MmaSS<e4m3, N> and MmaSSZero<e4m3, N> as above with k32;
/// MmaRS<e4m3, N>: A from registers (four 32-bit registers of four e4m3 values each, mma.sync's
/// m16n8k32 A fragment per warp: a[0] row g, columns 4q .. 4q + 3 from the low byte up; a[1] row
/// g + 8, same columns; a[2], a[3] the same rows at columns + 16), B an N x 32 K-major shared tile.
template <typename T, int N>
struct MmaRS;

// The accumulator operand list {%0, ..., %(N/2 - 1)} is assembled from decades ("%<t>0, ...,
// %<t>9, ") and the constraint list from groups of 8; a specialisation names its N, the list and
// the operand numbers of a, b and scale_d that follow the accumulators.
#define KTUNE_WG_R0_9 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
#define KTUNE_WG_R10(t)                                                                         \
  "%" #t "0, %" #t "1, %" #t "2, %" #t "3, %" #t "4, %" #t "5, %" #t "6, %" #t "7, %" #t "8, %" \
  #t "9, "
#define KTUNE_WG_REGS_32 KTUNE_WG_R0_9 KTUNE_WG_R10(1) KTUNE_WG_R10(2) "%30, %31"
// N = 80 (flash attention's key tiles at d = 256): 40 accumulators.
#define KTUNE_WG_REGS_40 \
  KTUNE_WG_R0_9 KTUNE_WG_R10(1) KTUNE_WG_R10(2) "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39"
// N = 96 (O at d = 96): 48 accumulators.
#define KTUNE_WG_REGS_48                                                  \
  KTUNE_WG_R0_9 KTUNE_WG_R10(1) KTUNE_WG_R10(2) KTUNE_WG_R10(3) "%40, %41, %42, %43, %44, %45, " \
                                                                "%46, %47"
#define KTUNE_WG_REGS_64                                                                    \
  KTUNE_WG_R0_9 KTUNE_WG_R10(1) KTUNE_WG_R10(2) KTUNE_WG_R10(3) KTUNE_WG_R10(4) KTUNE_WG_R10(5) \
  "%60, %61, %62, %63"
#define KTUNE_WG_REGS_128                                                                   \
  KTUNE_WG_R0_9 KTUNE_WG_R10(1) KTUNE_WG_R10(2) KTUNE_WG_R10(3) KTUNE_WG_R10(4) KTUNE_WG_R10(5) \
  KTUNE_WG_R10(6) KTUNE_WG_R10(7) KTUNE_WG_R10(8) KTUNE_WG_R10(9) KTUNE_WG_R10(10)              \
  KTUNE_WG_R10(11) "%120, %121, %122, %123, %124, %125, %126, %127"

#define KTUNE_WG_F8(b)                                                                   \
  "+f"(d[(b) + 0]), "+f"(d[(b) + 1]), "+f"(d[(b) + 2]), "+f"(d[(b) + 3]), "+f"(d[(b) + 4]), \
      "+f"(d[(b) + 5]), "+f"(d[(b) + 6]), "+f"(d[(b) + 7])
#define KTUNE_WG_F32(b) \
  KTUNE_WG_F8(b), KTUNE_WG_F8((b) + 8), KTUNE_WG_F8((b) + 16), KTUNE_WG_F8((b) + 24)
#define KTUNE_WG_F40(b) KTUNE_WG_F32(b), KTUNE_WG_F8((b) + 32)
#define KTUNE_WG_F48(b) KTUNE_WG_F32(b), KTUNE_WG_F8((b) + 32), KTUNE_WG_F8((b) + 40)
#define KTUNE_WG_F64(b) KTUNE_WG_F32(b), KTUNE_WG_F32((b) + 32)
#define KTUNE_WG_F128 KTUNE_WG_F64(0), KTUNE_WG_F64(64)
#define KTUNE_WG_W8(b)                                                                   \
  "=f"(d[(b) + 0]), "=f"(d[(b) + 1]), "=f"(d[(b) + 2]), "=f"(d[(b) + 3]), "=f"(d[(b) + 4]), \
      "=f"(d[(b) + 5]), "=f"(d[(b) + 6]), "=f"(d[(b) + 7])
#define KTUNE_WG_W32(b) \
  KTUNE_WG_W8(b), KTUNE_WG_W8((b) + 8), KTUNE_WG_W8((b) + 16), KTUNE_WG_W8((b) + 24)
#define KTUNE_WG_W40(b) KTUNE_WG_W32(b), KTUNE_WG_W8((b) + 32)
#define KTUNE_WG_W64(b) KTUNE_WG_W32(b), KTUNE_WG_W32((b) + 32)
#define KTUNE_WG_W128 KTUNE_WG_W64(0), KTUNE_WG_W64(64)

#if KTUNE_WGMMA
// TAIL: imm-scale-a = imm-scale-b = 1 (no negation), then for 16-bit types imm-trans-a =
// imm-trans-b = 0 (K-major); e4m3 has no transpose operands.
#define KTUNE_WG_MMA_SSK(T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, IA, IB, IS)                \
  template <>                                                                                \
  struct MmaSS<T, N> {                                                                       \
    __device__ static __forceinline__ void run(float (&d)[N / 2], unsigned long long a,      \
                                               unsigned long long b, int scale_d) {          \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                         \
                   "wgmma.mma_async.sync.aligned.m64n" #N #K ".f32." PTX_T "." PTX_T " {" REGS  \
                   "}, %" #IA ", %" #IB ", p, " TAIL ";\n}\n"                                \
                   : CONSTRAINTS                                                             \
                   : "l"(a), "l"(b), "r"(scale_d));                                          \
    }                                                                                        \
  };
#else
#define KTUNE_WG_MMA_SSK(T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, IA, IB, IS)               \
  template <>                                                                           \
  struct MmaSS<T, N> {                                                                  \
    __device__ static __forceinline__ void run(float (&)[N / 2], unsigned long long,    \
                                               unsigned long long, int) {               \
      __trap();                                                                         \
    }                                                                                   \
  };
#endif

KTUNE_WG_MMA_SSK(bf16, "bf16", k16, "1, 1, 0, 0", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0), 32, 33, 34)
KTUNE_WG_MMA_SSK(bf16, "bf16", k16, "1, 1, 0, 0", 80, KTUNE_WG_REGS_40, KTUNE_WG_F40(0), 40, 41, 42)
KTUNE_WG_MMA_SSK(bf16, "bf16", k16, "1, 1, 0, 0", 128, KTUNE_WG_REGS_64, KTUNE_WG_F64(0), 64, 65,
                 66)
KTUNE_WG_MMA_SSK(bf16, "bf16", k16, "1, 1, 0, 0", 256, KTUNE_WG_REGS_128, KTUNE_WG_F128, 128, 129,
                 130)
KTUNE_WG_MMA_SSK(fp16, "f16", k16, "1, 1, 0, 0", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0), 32, 33, 34)
KTUNE_WG_MMA_SSK(fp16, "f16", k16, "1, 1, 0, 0", 80, KTUNE_WG_REGS_40, KTUNE_WG_F40(0), 40, 41, 42)
KTUNE_WG_MMA_SSK(fp16, "f16", k16, "1, 1, 0, 0", 128, KTUNE_WG_REGS_64, KTUNE_WG_F64(0), 64, 65, 66)
KTUNE_WG_MMA_SSK(fp16, "f16", k16, "1, 1, 0, 0", 256, KTUNE_WG_REGS_128, KTUNE_WG_F128, 128, 129,
                 130)
KTUNE_WG_MMA_SSK(e4m3, "e4m3", k32, "1, 1", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0), 32, 33, 34)
KTUNE_WG_MMA_SSK(e4m3, "e4m3", k32, "1, 1", 128, KTUNE_WG_REGS_64, KTUNE_WG_F64(0), 64, 65, 66)
KTUNE_WG_MMA_SSK(e4m3, "e4m3", k32, "1, 1", 256, KTUNE_WG_REGS_128, KTUNE_WG_F128, 128, 129,
                 130)

#if KTUNE_WGMMA
// A from registers. S names the struct: MmaRSTransB (16-bit types, TAIL "1, 1, 1":
// imm-scale-a = imm-scale-b = 1, imm-trans-b = 1, B MN-major) or MmaRS (e4m3, TAIL "1, 1": no
// transpose operand, B K-major).
#define KTUNE_WG_MMA_RSK(S, T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, A0, A1, A2, A3, IB, IS)   \
  template <>                                                                                \
  struct S<T, N> {                                                                           \
    __device__ static __forceinline__ void run(float (&d)[N / 2], const unsigned (&a)[4],    \
                                               unsigned long long b, int scale_d) {          \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                         \
                   "wgmma.mma_async.sync.aligned.m64n" #N #K ".f32." PTX_T "." PTX_T " {" REGS  \
                   "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #IB ", p, " TAIL ";\n}\n"  \
                   : CONSTRAINTS                                                             \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));    \
    }                                                                                        \
  };
#else
#define KTUNE_WG_MMA_RSK(S, T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, A0, A1, A2, A3, IB, IS)   \
  template <>                                                                              \
  struct S<T, N> {                                                                         \
    __device__ static __forceinline__ void run(float (&)[N / 2], const unsigned (&)[4],    \
                                               unsigned long long, int) {                  \
      __trap();                                                                            \
    }                                                                                      \
  };
#endif
#if KTUNE_WGMMA
#define KTUNE_WG_MMA_SS0K(T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, IA, IB)                 \
  template <>                                                                                \
  struct MmaSSZero<T, N> {                                                                   \
    __device__ static __forceinline__ void run(float (&d)[N / 2], unsigned long long a,      \
                                               unsigned long long b) {                       \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"                                 \
                   "wgmma.mma_async.sync.aligned.m64n" #N #K ".f32." PTX_T "." PTX_T " {" REGS  \
                   "}, %" #IA ", %" #IB ", p, " TAIL ";\n}\n"                                \
                   : CONSTRAINTS                                                             \
                   : "l"(a), "l"(b));                                                        \
    }                                                                                        \
  };
#else
#define KTUNE_WG_MMA_SS0K(T, PTX_T, K, TAIL, N, REGS, CONSTRAINTS, IA, IB)                 \
  template <>                                                                                \
  struct MmaSSZero<T, N> {                                                                   \
    __device__ static __forceinline__ void run(float (&)[N / 2], unsigned long long,         \
                                               unsigned long long) {                         \
      __trap();                                                                              \
    }                                                                                        \
  };
#endif

KTUNE_WG_MMA_SS0K(bf16, "bf16", k16, "1, 1, 0, 0", 64, KTUNE_WG_REGS_32, KTUNE_WG_W32(0), 32, 33)
KTUNE_WG_MMA_SS0K(bf16, "bf16", k16, "1, 1, 0, 0", 80, KTUNE_WG_REGS_40, KTUNE_WG_W40(0), 40, 41)
KTUNE_WG_MMA_SS0K(bf16, "bf16", k16, "1, 1, 0, 0", 128, KTUNE_WG_REGS_64, KTUNE_WG_W64(0), 64, 65)
KTUNE_WG_MMA_SS0K(bf16, "bf16", k16, "1, 1, 0, 0", 256, KTUNE_WG_REGS_128, KTUNE_WG_W128, 128, 129)
KTUNE_WG_MMA_SS0K(fp16, "f16", k16, "1, 1, 0, 0", 64, KTUNE_WG_REGS_32, KTUNE_WG_W32(0), 32, 33)
KTUNE_WG_MMA_SS0K(fp16, "f16", k16, "1, 1, 0, 0", 80, KTUNE_WG_REGS_40, KTUNE_WG_W40(0), 40, 41)
KTUNE_WG_MMA_SS0K(fp16, "f16", k16, "1, 1, 0, 0", 128, KTUNE_WG_REGS_64, KTUNE_WG_W64(0), 64, 65)
KTUNE_WG_MMA_SS0K(fp16, "f16", k16, "1, 1, 0, 0", 256, KTUNE_WG_REGS_128, KTUNE_WG_W128, 128, 129)
KTUNE_WG_MMA_SS0K(e4m3, "e4m3", k32, "1, 1", 64, KTUNE_WG_REGS_32, KTUNE_WG_W32(0), 32, 33)
KTUNE_WG_MMA_SS0K(e4m3, "e4m3", k32, "1, 1", 128, KTUNE_WG_REGS_64, KTUNE_WG_W64(0), 64, 65)
KTUNE_WG_MMA_SS0K(e4m3, "e4m3", k32, "1, 1", 256, KTUNE_WG_REGS_128, KTUNE_WG_W128, 128, 129)

KTUNE_WG_MMA_RSK(MmaRSTransB, bf16, "bf16", k16, "1, 1, 1", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0),
                 32, 33, 34, 35, 36, 37)
KTUNE_WG_MMA_RSK(MmaRSTransB, bf16, "bf16", k16, "1, 1, 1", 80, KTUNE_WG_REGS_40, KTUNE_WG_F40(0),
                 40, 41, 42, 43, 44, 45)
KTUNE_WG_MMA_RSK(MmaRSTransB, bf16, "bf16", k16, "1, 1, 1", 96, KTUNE_WG_REGS_48, KTUNE_WG_F48(0),
                 48, 49, 50, 51, 52, 53)
KTUNE_WG_MMA_RSK(MmaRSTransB, bf16, "bf16", k16, "1, 1, 1", 128, KTUNE_WG_REGS_64,
                 KTUNE_WG_F64(0), 64, 65, 66, 67, 68, 69)
KTUNE_WG_MMA_RSK(MmaRSTransB, bf16, "bf16", k16, "1, 1, 1", 256, KTUNE_WG_REGS_128,
                 KTUNE_WG_F128, 128, 129, 130, 131, 132, 133)
KTUNE_WG_MMA_RSK(MmaRSTransB, fp16, "f16", k16, "1, 1, 1", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0),
                 32, 33, 34, 35, 36, 37)
KTUNE_WG_MMA_RSK(MmaRSTransB, fp16, "f16", k16, "1, 1, 1", 80, KTUNE_WG_REGS_40, KTUNE_WG_F40(0),
                 40, 41, 42, 43, 44, 45)
KTUNE_WG_MMA_RSK(MmaRSTransB, fp16, "f16", k16, "1, 1, 1", 96, KTUNE_WG_REGS_48, KTUNE_WG_F48(0),
                 48, 49, 50, 51, 52, 53)
KTUNE_WG_MMA_RSK(MmaRSTransB, fp16, "f16", k16, "1, 1, 1", 128, KTUNE_WG_REGS_64, KTUNE_WG_F64(0),
                 64, 65, 66, 67, 68, 69)
KTUNE_WG_MMA_RSK(MmaRSTransB, fp16, "f16", k16, "1, 1, 1", 256, KTUNE_WG_REGS_128, KTUNE_WG_F128,
                 128, 129, 130, 131, 132, 133)
KTUNE_WG_MMA_RSK(MmaRS, e4m3, "e4m3", k32, "1, 1", 64, KTUNE_WG_REGS_32, KTUNE_WG_F32(0), 32, 33,
                 34, 35, 36, 37)
KTUNE_WG_MMA_RSK(MmaRS, e4m3, "e4m3", k32, "1, 1", 128, KTUNE_WG_REGS_64, KTUNE_WG_F64(0), 64, 65,
                 66, 67, 68, 69)
KTUNE_WG_MMA_RSK(MmaRS, e4m3, "e4m3", k32, "1, 1", 256, KTUNE_WG_REGS_128, KTUNE_WG_F128, 128,
                 129, 130, 131, 132, 133)

#undef KTUNE_WG_MMA_RSK
#undef KTUNE_WG_MMA_SS0K
#undef KTUNE_WG_W128
#undef KTUNE_WG_W64
#undef KTUNE_WG_W40
#undef KTUNE_WG_W32
#undef KTUNE_WG_W8
#undef KTUNE_WG_MMA_SSK
#undef KTUNE_WG_F128
#undef KTUNE_WG_F64
#undef KTUNE_WG_F48
#undef KTUNE_WG_F40
#undef KTUNE_WG_F32
#undef KTUNE_WG_F8
#undef KTUNE_WG_REGS_128
#undef KTUNE_WG_REGS_64
#undef KTUNE_WG_REGS_48
#undef KTUNE_WG_REGS_40
#undef KTUNE_WG_REGS_32
#undef KTUNE_WG_R10
#undef KTUNE_WG_R0_9

#endif  // __CUDACC__

}  // namespace wg
}  // namespace ktune
