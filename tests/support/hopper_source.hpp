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
