// Host side of the Hopper tests, header-only: the NVRTC sources of the wgmma tile, bulk-copy
// ring, TMA tile and TMA pipeline test kernels and of moe_gemm_sm90_kernel, and their name
// expressions. The common/ headers and moe/gemm_sm90.cuh are embedded (KTUNE_KERNEL_SOURCES),
// so NVRTC resolves their includes from the binary.
#pragma once

#include <string>

namespace ktune::test {

/// NVRTC source text that includes `file` (relative to templates/, an embedded file).
inline std::string hopper_source(const std::string& file) {
  return "#include \"" + file + "\"\n";
}

/// One m64nNk16 x 4 (K = 64) tile from shared memory: a [64][64] and b [N][64] row-major (K
/// contiguous) in global memory are copied into one 128-byte-swizzled tile (a's rows, then b's)
/// with ordinary 16-byte stores, published by fence.proxy.async and a barrier, multiplied by four
/// wgmmas whose descriptors advance 32 bytes per k16 step (the first with scale_d = 0 over
/// NaN-filled accumulators), and d [64][N] fp32 is written through wg::Acc<N>. One warpgroup;
/// (64 + N) * 128 + 1024 bytes of dynamic shared memory; one argument, {a, b, d} by value.
inline std::string wgmma_tile_source() {
  return hopper_source("common/wgmma.cuh") + R"(
namespace ktune_test {
struct WgmmaTileArgs {
  const void* a;
  const void* b;
  float* d;
};

template <typename T, int N>
__global__ void __launch_bounds__(128, 1) wgmma_tile_kernel(const WgmmaTileArgs args) {
  using namespace ktune;
  const T* a = static_cast<const T*>(args.a);
  const T* b = static_cast<const T*>(args.b);
  float* d = args.d;
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned raw = wg::smem_u32(smem);
  const unsigned pad = ((raw + 1023u) & ~1023u) - raw;
  unsigned char* tile = smem + pad;
  const int tid = threadIdx.x;
  for (int idx = tid; idx < (64 + N) * 8; idx += 128) {
    const int row = idx / 8, chunk = idx % 8;
    const T* src = row < 64 ? a + row * 64 + chunk * 8 : b + (row - 64) * 64 + chunk * 8;
    *reinterpret_cast<uint4*>(tile + wg::sw128_offset(row, chunk)) =
        *reinterpret_cast<const uint4*>(src);
  }
  wg::fence_proxy_async();
  __syncthreads();
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = __int_as_float(0x7fffffff);
  wg::fence_acc(acc);
  wg::fence();
  const unsigned sa = raw + pad;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wg::MmaSS<T, N>::run(acc, wg::sw128_desc(sa, kk * wg::kK16Bytes),
                         wg::sw128_desc(sa + 64 * wg::kSw128RowBytes, kk * wg::kK16Bytes),
                         kk > 0 ? 1 : 0);
  wg::commit();
  wg::wait<0>();
  wg::fence_acc(acc);
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    d[wg::Acc<N>::row(tid, i) * N + wg::Acc<N>::col(tid, i)] = acc[i];
}
}  // namespace ktune_test
)";
}

/// A ring of bulk copies (common/mbarrier.cuh): rows of `row_bytes` bytes (a multiple of 16)
/// stream from src in tiles of ROWS rows through STAGES shared slots, one mbarrier per slot, warp
/// 0 issuing one bulk copy per row; the threads copy each landed tile to dst with ordinary loads
/// and stores, then a barrier frees its slot for the tile STAGES - 1 ahead (decode's protocol).
/// The last tile may be short. One CTA of 128 threads, STAGES * (ROWS * row_bytes + 8) bytes of
/// dynamic shared memory; one argument, {src, dst, rows, row_bytes} by value.
inline std::string bulk_ring_source() {
  return hopper_source("common/mbarrier.cuh") + R"(
namespace ktune_test {
struct BulkRingArgs {
  const unsigned char* src;
  unsigned char* dst;
  int rows;
  int row_bytes;
};

template <int ROWS, int STAGES>
__global__ void __launch_bounds__(128, 1) bulk_ring_kernel(const BulkRingArgs args) {
  using namespace ktune;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x;
  const int slot_bytes = ROWS * args.row_bytes;
  const unsigned bars = base + STAGES * slot_bytes;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar::init(bars + 8 * s, 1);
    mbar::fence_init();
  }
  __syncthreads();
  const int tiles = (args.rows + ROWS - 1) / ROWS;
  const auto issue = [&](int t) {
    const int s = t % STAGES;
    const int valid = min(ROWS, args.rows - t * ROWS);
    if (tid < 32) {
      if (tid == 0) {
        mbar::fence_proxy_async_shared();
        mbar::arrive_expect_tx(bars + 8 * s, static_cast<unsigned>(valid * args.row_bytes));
      }
      __syncwarp();
      for (int r = tid; r < valid; r += 32)
        mbar::bulk_g2s(base + s * slot_bytes + r * args.row_bytes,
                       args.src + static_cast<long long>(t * ROWS + r) * args.row_bytes,
                       static_cast<unsigned>(args.row_bytes), bars + 8 * s);
    }
  };
  for (int t = 0; t < STAGES - 1 && t < tiles; ++t) issue(t);
  for (int t = 0; t < tiles; ++t) {
    mbar::wait_parity(bars + 8 * (t % STAGES), static_cast<unsigned>(t / STAGES) & 1u);
    __syncthreads();  // every thread is past tile t - 1's reads: its slot may be refilled
    if (t + STAGES - 1 < tiles) issue(t + STAGES - 1);
    const int valid = min(ROWS, args.rows - t * ROWS);
    const uint4* tile = reinterpret_cast<const uint4*>(smem + (t % STAGES) * slot_bytes);
    uint4* out = reinterpret_cast<uint4*>(args.dst + static_cast<long long>(t) * slot_bytes);
    for (int i = tid; i < valid * args.row_bytes / 16; i += 128) out[i] = tile[i];
  }
}
}  // namespace ktune_test
)";
}

/// The value the TMA tests place at (row, col) of their bf16 matrices (a 16-bit pattern, never
/// 0 and never 0xffff: zero fill and untouched poison stay distinguishable); unique while
/// row * 251 + col < 32767, i.e. for the tests' 120 x 200 matrices.
inline unsigned short tma_test_value(int row, int col) {
  return static_cast<unsigned short>(((row * 251 + col) & 0x7fff) + 1);
}

/// What the TMA test kernels include, and aligned_tile(): the 1024-byte-aligned start of the
/// dynamic shared memory (its shared address in *addr).
inline std::string tma_test_prelude() {
  return hopper_source("common/tma.cuh") + hopper_source("common/mbarrier.cuh") +
         hopper_source("common/warpgroup.cuh") + hopper_source("common/wgmma.cuh") + R"(
namespace ktune_test {
__device__ __forceinline__ unsigned char* aligned_tile(unsigned char* smem, unsigned* addr) {
  const unsigned raw = ktune::wg::smem_u32(smem);
  const unsigned pad = ((raw + 1023u) & ~1023u) - raw;
  *addr = raw + pad;
  return smem + pad;
}
}  // namespace ktune_test
)";
}

/// TMA tile kernels (common/tma.cuh), one CTA of 128 threads per BOX_ROWS x BOX_COLS tile of
/// 16-bit elements; tile (x, y) of the grid sits at column first_col + x * BOX_COLS and row
/// first_row + y * BOX_ROWS (negative or past the edges in part), its index is y * gridDim.x + x.
/// The tile in shared memory starts 1024-byte aligned (BOX_ROWS * BOX_COLS * 2 + 1024 bytes of
/// dynamic shared memory); one argument, {map, out, first_col, first_row} by value, the tensor
/// map as a __grid_constant__ member.
/// - tma_load_tile_kernel: one elected thread loads the tile through the map (its mbarrier
///   counts the bytes), every thread waits, and the raw shared tile is copied to out[index] as
///   it lies (the host checks the layout: plain rows, or the 128-byte swizzle).
/// - tma_store_tile_kernel<.., SW128>: the threads write tma_test_value(row, col) of each
///   element's global position into the shared tile (plain rows, or at wg::sw128_offset when
///   SW128), fence it for the async proxy, and one elected thread stores the tile through the
///   map; out is unused.
inline std::string tma_tile_source() {
  return tma_test_prelude() + R"(
namespace ktune_test {
struct TmaTileArgs {
  ktune::tma::TensorMap map;
  unsigned short* out;
  int first_col;
  int first_row;
};

__device__ __forceinline__ unsigned short tma_test_value(int row, int col) {
  return static_cast<unsigned short>(((row * 251 + col) & 0x7fff) + 1);
}

template <int BOX_ROWS, int BOX_COLS>
__global__ void __launch_bounds__(128, 1)
    tma_load_tile_kernel(const __grid_constant__ TmaTileArgs args) {
  using namespace ktune;
  constexpr int kBytes = BOX_ROWS * BOX_COLS * 2;
  static_assert(kBytes % (16 * 128) == 0, "whole 16-byte chunks for every thread");
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar_word;
  unsigned dst = 0;
  const unsigned char* tile = aligned_tile(smem, &dst);
  const unsigned bar = wg::smem_u32(&bar_word);
  if (threadIdx.x == 0) {
    tma::prefetch_map(&args.map);
    mbar::init(bar, 1);
    mbar::fence_init();
  }
  __syncthreads();
  if (wgrp::warp_index() == 0 && wgrp::elect_one()) {
    mbar::arrive_expect_tx(bar, kBytes);
    tma::load(dst, &args.map, bar, args.first_col + static_cast<int>(blockIdx.x) * BOX_COLS,
              args.first_row + static_cast<int>(blockIdx.y) * BOX_ROWS);
  }
  mbar::wait_parity(bar, 0);
  const int index = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
  uint4* out = reinterpret_cast<uint4*>(args.out) + static_cast<long long>(index) * (kBytes / 16);
  for (int i = threadIdx.x; i < kBytes / 16; i += 128)
    out[i] = reinterpret_cast<const uint4*>(tile)[i];
}

template <int BOX_ROWS, int BOX_COLS, bool SW128>
__global__ void __launch_bounds__(128, 1)
    tma_store_tile_kernel(const __grid_constant__ TmaTileArgs args) {
  using namespace ktune;
  static_assert(!SW128 || BOX_COLS == 64, "128-byte swizzled rows hold 64 16-bit elements");
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned src = 0;
  unsigned char* tile = aligned_tile(smem, &src);
  const int col0 = args.first_col + static_cast<int>(blockIdx.x) * BOX_COLS;
  const int row0 = args.first_row + static_cast<int>(blockIdx.y) * BOX_ROWS;
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += 128) {
    const int r = i / BOX_COLS, c = i % BOX_COLS;
    const unsigned off = SW128 ? wg::sw128_offset(r, c / 8) + (c % 8) * 2
                               : static_cast<unsigned>(i * 2);
    *reinterpret_cast<unsigned short*>(tile + off) = tma_test_value(row0 + r, col0 + c);
  }
  wg::fence_proxy_async();  // the copy engine reads what the generic proxy wrote
  __syncthreads();
  if (wgrp::warp_index() == 0 && wgrp::elect_one()) {
    tma::store(&args.map, src, col0, row0);
    tma::store_commit();
    tma::store_wait<0>();
  }
}
}  // namespace ktune_test
)";
}

/// A cluster of two CTAs (common/cluster.cuh) sharing one BOX_ROWS x 64 tile of the TMA tests'
/// bf16 matrix, as a warp-specialised GEMM pair would share a weight tile: after the barriers'
/// initialisation and a cluster sync, each CTA's elected thread announces the whole tile on its
/// own barrier and loads half of its rows (a box of BOX_ROWS / 2 rows, CTA rank r the r-th half)
/// multicast into both CTAs; each CTA waits for the whole tile and copies it as it lies (plain
/// rows) to out[cluster * 2 + rank]. Then each arrives on the other CTA's second barrier
/// (arrive_remote), waits on its own, writes flags[cluster * 2 + rank] = 1, and syncs the
/// cluster before exiting. Cluster c's tile starts at column first_col + c * 64, row first_row.
/// 128 threads a CTA, clusters of 2 along x; BOX_ROWS * 128 + 1024 bytes of dynamic shared
/// memory; one argument, {map, out, flags, first_col, first_row} by value.
inline std::string tma_multicast_source() {
  return tma_test_prelude() + hopper_source("common/cluster.cuh") + R"(
namespace ktune_test {
struct TmaMulticastArgs {
  ktune::tma::TensorMap map;  // box: 64 columns, BOX_ROWS / 2 rows, no swizzle
  unsigned short* out;
  int* flags;
  int first_col;
  int first_row;
};

template <int BOX_ROWS>
__global__ void __launch_bounds__(128, 1)
    tma_multicast_kernel(const __grid_constant__ TmaMulticastArgs args) {
  using namespace ktune;
  constexpr int kBytes = BOX_ROWS * 64 * 2;
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar_words[2];
  unsigned dst = 0;
  const unsigned char* tile = aligned_tile(smem, &dst);
  const unsigned full = wg::smem_u32(&bar_words[0]), peer = wg::smem_u32(&bar_words[1]);
  const unsigned rank = cluster::ctarank();
  const int index = static_cast<int>(blockIdx.x);  // cluster * 2 + rank
  if (threadIdx.x == 0) {
    tma::prefetch_map(&args.map);
    mbar::init(full, 1);
    mbar::init(peer, 1);
    mbar::fence_init();
  }
  cluster::sync();  // both CTAs' barriers exist before either copies into or arrives on the other
  if (wgrp::warp_index() == 0 && wgrp::elect_one()) {
    mbar::arrive_expect_tx(full, kBytes);  // both halves land on this barrier
    cluster::load_multicast(dst + rank * (kBytes / 2), &args.map, full, 0x3,
                            args.first_col + (index / 2) * 64,
                            args.first_row + static_cast<int>(rank) * (BOX_ROWS / 2));
  }
  mbar::wait_parity(full, 0);
  uint4* out = reinterpret_cast<uint4*>(args.out) + static_cast<long long>(index) * (kBytes / 16);
  for (int i = threadIdx.x; i < kBytes / 16; i += 128)
    out[i] = reinterpret_cast<const uint4*>(tile)[i];
  if (threadIdx.x == 0) cluster::arrive_remote(peer, rank ^ 1u);
  mbar::wait_parity(peer, 0);
  if (threadIdx.x == 0) args.flags[index] = 1;
  cluster::sync();  // neither CTA exits while the other may still arrive on its barriers
}
}  // namespace ktune_test
)";
}

inline std::string tma_multicast_name(int box_rows) {
  return "ktune_test::tma_multicast_kernel<" + std::to_string(box_rows) + ">";
}

inline std::string tma_load_tile_name(int box_rows, int box_cols) {
  return "ktune_test::tma_load_tile_kernel<" + std::to_string(box_rows) + ", " +
         std::to_string(box_cols) + ">";
}

inline std::string tma_store_tile_name(int box_rows, int box_cols, bool sw128) {
  return "ktune_test::tma_store_tile_kernel<" + std::to_string(box_rows) + ", " +
         std::to_string(box_cols) + ", " + (sw128 ? "true" : "false") + ">";
}

/// A warp-specialised TMA pipeline (common/tma.cuh, mbarrier.cuh, warpgroup.cuh): 3 warpgroups.
/// Warpgroup 0, the producer, gives registers back (setmaxnreg_dec<40>) and one elected thread
/// of its first warp streams the 64 x 64 bf16 tiles of the map (tile t at column
/// (t % tiles_x) * 64, row (t / tiles_x) * 64) through STAGES slots: it waits on the slot's
/// empty barrier, announces the bytes on its full barrier and loads. Warpgroups 1 and 2, the
/// consumers, take registers (setmaxnreg_inc<232>), wait on the full barrier, and each sums its
/// 32 rows of the tile (16 elements a thread, a warp shuffle, the 4 warp sums through shared
/// memory after a per-warpgroup named barrier); they release the slot on the empty barrier (8
/// arrivals a phase: consumer 0's leader arrives once with count 4, each warp of consumer 1
/// arrives itself), meet on a named barrier for both (256 threads), and consumer 0's leader
/// writes tile_sums[t]. At the end consumer 1 publishes its running total with bar_arrive and
/// consumer 0 syncs on that barrier and writes the sum of both to *total. 384 threads;
/// tma_pipeline_smem(STAGES) bytes of dynamic shared memory; one argument by value.
inline std::string tma_pipeline_source() {
  return tma_test_prelude() + R"(
namespace ktune_test {
struct TmaPipelineArgs {
  ktune::tma::TensorMap map;
  float* tile_sums;
  float* total;
  int tiles_x;
  int tiles;
};

template <int STAGES>
__global__ void __launch_bounds__(384, 1)
    tma_pipeline_kernel(const __grid_constant__ TmaPipelineArgs args) {
  using namespace ktune;
  constexpr int kTileBytes = 64 * 64 * 2;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned slots_addr = 0;
  unsigned char* slots = aligned_tile(smem, &slots_addr);
  unsigned long long* bar_words =
      reinterpret_cast<unsigned long long*>(slots + STAGES * kTileBytes);
  const unsigned full = wg::smem_u32(bar_words), empty = full + 8 * STAGES;
  float* warp_sums = reinterpret_cast<float*>(bar_words + 2 * STAGES);  // [consumer][warp]
  float* group_sums = warp_sums + 8;                                   // [t % 2][consumer]
  float* group_total = group_sums + 4;                                 // consumer 1's total
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar::init(full + 8 * s, 1);
      mbar::init(empty + 8 * s, 8);
    }
    mbar::fence_init();
  }
  __syncthreads();
  const int group = wgrp::warpgroup_index();
  if (group == 0) {
    wgrp::setmaxnreg_dec<40>();
    if (wgrp::warp_in_warpgroup() == 0 && wgrp::elect_one()) {
      tma::prefetch_map(&args.map);
      for (int t = 0; t < args.tiles; ++t) {
        const int s = t % STAGES;
        mbar::wait_parity(empty + 8 * s, ((t / STAGES) & 1) ^ 1);
        mbar::arrive_expect_tx(full + 8 * s, kTileBytes);
        tma::load(slots_addr + s * kTileBytes, &args.map, full + 8 * s,
                  (t % args.tiles_x) * 64, (t / args.tiles_x) * 64);
      }
    }
  } else {
    wgrp::setmaxnreg_inc<232>();
    const int c = group - 1;
    const int tid = wgrp::thread_in_warpgroup(), warp = wgrp::warp_in_warpgroup();
    const int col = tid % 64, row0 = c * 32 + (tid / 64) * 16;
    float total = 0.f;
    for (int t = 0; t < args.tiles; ++t) {
      const int s = t % STAGES;
      mbar::wait_parity(full + 8 * s, (t / STAGES) & 1);
      const unsigned short* tile =
          reinterpret_cast<const unsigned short*>(slots + s * kTileBytes);
      float sum = 0.f;
#pragma unroll
      for (int r = 0; r < 16; ++r)
        sum += __uint_as_float(static_cast<unsigned>(tile[(row0 + r) * 64 + col]) << 16);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (tid % 32 == 0) warp_sums[c * 4 + warp] = sum;
      wgrp::bar_sync(1 + c, 128);  // this consumer's reads of slot s and its warp sums are done
      if (c == 0 && tid == 0) mbar::arrive(empty + 8 * s, 4u);
      if (c == 1 && tid % 32 == 0) mbar::arrive(empty + 8 * s);
      if (tid == 0) {
        const float part = warp_sums[c * 4] + warp_sums[c * 4 + 1] + warp_sums[c * 4 + 2] +
                           warp_sums[c * 4 + 3];
        group_sums[(t & 1) * 2 + c] = part;
        total += part;
      }
      wgrp::bar_sync(3, 256);  // both halves of tile t are in group_sums
      if (c == 0 && tid == 0)
        args.tile_sums[t] = group_sums[(t & 1) * 2] + group_sums[(t & 1) * 2 + 1];
    }
    if (c == 1) {
      if (tid == 0) *group_total = total;
      wgrp::bar_arrive(4, 256);
    } else {
      wgrp::bar_sync(4, 256);
      if (tid == 0) *args.total = total + *group_total;
    }
  }
}
}  // namespace ktune_test
)";
}

inline std::string tma_pipeline_name(int stages) {
  return "ktune_test::tma_pipeline_kernel<" + std::to_string(stages) + ">";
}

/// Dynamic shared memory of tma_pipeline_kernel<stages>: the slots, 1024 bytes of alignment
/// slack, the barriers and the partial sums.
inline unsigned tma_pipeline_smem(int stages) {
  return static_cast<unsigned>(stages * (64 * 64 * 2 + 16) + 1024 + 16 * 4);
}

inline std::string bulk_ring_name(int rows, int stages) {
  return "ktune_test::bulk_ring_kernel<" + std::to_string(rows) + ", " + std::to_string(stages) +
         ">";
}

inline std::string wgmma_tile_name(bool bf16, int n) {
  return std::string("ktune_test::wgmma_tile_kernel<ktune::") + (bf16 ? "bf16" : "fp16") + ", " +
         std::to_string(n) + ">";
}

/// One point of moe_gemm_sm90_kernel's parameters (BLOCK_K is 64).
struct Sm90Tile {
  int block_m, block_n, stages, group_m;
  std::string key() const {
    return "block_m=" + std::to_string(block_m) + ",block_n=" + std::to_string(block_n) +
           ",stages=" + std::to_string(stages) + ",group_m=" + std::to_string(group_m);
  }
};

inline std::string moe_gemm_sm90_name(bool bf16, const Sm90Tile& t, bool gated) {
  return std::string("ktune::moe_gemm_sm90_kernel<ktune::") + (bf16 ? "bf16" : "fp16") + ", " +
         std::to_string(t.block_m) + ", " + std::to_string(t.block_n) + ", 64, " +
         std::to_string(t.stages) + ", " + (gated ? "true" : "false") + ", " +
         std::to_string(t.group_m) + ">";
}

}  // namespace ktune::test
