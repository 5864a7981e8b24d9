// x's rows gathered into sorted order before gemm1 (the MoE op's gather1=2): out[r] = x[token of
// sorted_pairs[r]] for the real rows r < *padded_rows, zeros for padding pairs and for the rest
// of the `rows` (max_blocks * block_m) rows, so that the warp-specialised gemm1
// (moe_gemm_ws_kernel with GATHER = moe_ws_gather_sorted) reads its act tile as one TMA box a
// k-tile, as gemm2 reads act. One block per row: 16-byte copies when H % 8 == 0, else one
// element a copy. The token of a pair is pair_token[pair] when given (expert choice), else
// pair / k, as gemm1's own gather computes it.
//
// Launched programmatically like every kernel of the op after its first: it waits for the
// alignment before reading sorted_pairs and padded_rows, and lets gemm1 be scheduled at once
// (gemm1 waits for this grid's completion before its first load).
#pragma once

#if defined(__CUDACC__)
#include "common/pdl.cuh"
#include "common/types.cuh"
#endif

namespace ktune {

struct MoeGatherRowsArgs {
  const void* x;             // [T, H] bf16 or fp16
  void* out;                 // [rows, H] in sorted order
  const int* sorted_pairs;   // [rows] (read below *padded_rows only)
  const int* padded_rows;    // [1]
  const int* pair_token;     // [pairs] token of each pair, or nullptr: pair / k
  int pairs;                 // real pairs: sorted_pairs[r] >= pairs is padding
  int k;
  int h;
  int rows;                  // the grid's bound: max_blocks * block_m
};

/// Threads per block of moe_gather_rows_kernel (one block per row).
constexpr int kMoeGatherThreads = 128;

#if defined(__CUDACC__)

/// T: bf16 or fp16 (any 16-bit element; copied as bits). Grid: args.rows blocks of
/// kMoeGatherThreads threads.
template <typename T>
__global__ void __launch_bounds__(kMoeGatherThreads)
    moe_gather_rows_kernel(const __grid_constant__ MoeGatherRowsArgs args) {
  static_assert(sizeof(T) == 2, "T must be a 16-bit type (bf16 or fp16)");
  griddep_wait();
  griddep_launch_dependents();
  const int r = static_cast<int>(blockIdx.x);
  if (r >= args.rows) return;
  int pair = -1;
  if (r < *args.padded_rows) pair = args.sorted_pairs[r];
  const bool real = pair >= 0 && pair < args.pairs;
  const long long token = real ? (args.pair_token ? args.pair_token[pair] : pair / args.k) : 0;
  const int h = args.h;
  if (h % 8 == 0) {
    const int vecs = h / 8;
    const uint4* src = static_cast<const uint4*>(args.x) + token * vecs;
    uint4* dst = static_cast<uint4*>(args.out) + static_cast<long long>(r) * vecs;
    for (int v = static_cast<int>(threadIdx.x); v < vecs; v += kMoeGatherThreads)
      dst[v] = real ? src[v] : make_uint4(0u, 0u, 0u, 0u);
  } else {
    const unsigned short* src = static_cast<const unsigned short*>(args.x) + token * h;
    unsigned short* dst = static_cast<unsigned short*>(args.out) + static_cast<long long>(r) * h;
    for (int c = static_cast<int>(threadIdx.x); c < h; c += kMoeGatherThreads)
      dst[c] = real ? src[c] : static_cast<unsigned short>(0);
  }
}

#endif  // __CUDACC__

}  // namespace ktune
