// Host side of the Hopper (wgmma) tests, header-only: the NVRTC source of the wgmma tile test
// kernel and of moe_gemm_sm90_kernel, and their name expressions. common/wgmma.cuh and
// moe/gemm_sm90.cuh are embedded (KTUNE_KERNEL_SOURCES), so NVRTC resolves their includes from
// the binary.
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
