// Routing and alignment in one kernel of many blocks (the op's fuse_route = 2): the route
// kernel's grid, each block routing THREADS / LANES tokens as moe_route_kernel does, then every
// block placing its own pairs after one grid-wide barrier. The outputs equal moe_route_kernel's
// followed by moe_align_kernel's, bit for bit, and no align kernel runs: on the H100 the
// DeepSeek-like layer at T=128 waited ~6 us for it after the routing (benchmarks/moe/NOTES.md).
//
// Block b routes tokens b * TOKENS .., so its pairs are one run of pair indices, and:
//   1. routes its tokens (moe::RoutedToken with the correction bias read beside the logits),
//      writes the weights (and the ids where asked) to global memory, the ids to shared memory;
//   2. counts its pairs per expert in 32-pair chunks (match.any: a pair's rank in its chunk; the
//      chunks' counts, prefix-summed, its rank in the block) and writes the block's count of
//      each expert to row b of the count table;
//   3. waits for the zero kernel before it (griddep_wait: the barrier count and the aux sums),
//      adds its aux sums, arrives at the barrier and waits for all G blocks;
//   4. reads the table: per expert, the pairs of the blocks before it and of all; the padded
//      starts (the align kernel's arithmetic);
//   5. writes its pairs to sorted_pairs (start + earlier blocks + earlier chunks + rank) and its
//      share of the rest of the layout (over the grid's threads); block 0 writes the aux loss.
// The barrier needs every block resident at once: the host launches at most kMoeSortMaxBlocks
// blocks, and no more than the GPU has SMs, of THREADS threads and < 48 KiB of shared memory.
// Work of other streams on the SMs can delay the blocks, not keep them out for good (it does not
// wait on this kernel). The count table is at most kMoeSortMaxTable ints.
//
// Template parameters: as moe_route_kernel's (moe/route.cuh), EMAX sizing the per-expert arrays
// (moe_emax(E): 256 or 512; at 512 and the op's 128 threads the kernel takes at most 29 KiB).
#pragma once

#include "moe/align.cuh"
#include "moe/route.cuh"

namespace ktune {

#if defined(__CUDACC__)

namespace moe {

/// One thread of each block: adds the block to *count (zeroed before the kernel) and waits until
/// `blocks` have arrived. The caller's __syncthreads before and after make the block's writes
/// visible to, and the other blocks' visible after, as a grid barrier does.
__device__ __forceinline__ void arrive_and_wait(unsigned long long* count,
                                                unsigned long long blocks) {
  __threadfence();
  atomicAdd(count, 1ull);
  unsigned long long seen;
  do {
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(count) : "memory");
  } while (seen < blocks);
}

/// Warp 0 of the block, from total[e] (pairs of expert e) in shared memory: start[0..E] =
/// exclusive prefix of the counts padded to block_m (start[E] = padded rows). The same
/// arithmetic as lay_out_experts (moe/align.cuh), kept apart from it so that the align kernels'
/// machine code, which shipped databases were timed with, stays as it was.
template <int EMAX>
__device__ __forceinline__ void padded_starts(const MoeAlignArgs& args, const int* total,
                                              int* start) {
  const int E = args.experts;
  const int bm = args.block_m;
  const int lane = static_cast<int>(threadIdx.x);
  if (lane >= 32) return;
  constexpr int kPer = EMAX / 32;
  int local[kPer];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane * kPer + i;
    local[i] = sum;
    sum += e < E ? (total[e] + bm - 1) / bm * bm : 0;
  }
  int inclusive = sum;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(kFullMask, inclusive, d);
    if (lane >= d) inclusive += y;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane * kPer + i;
    if (e < E) start[e] = inclusive - sum + local[i];
  }
  if (lane == 31) start[E] = inclusive;
}

/// Items first, first + stride, ... of what lay_out_experts writes around the pairs, from
/// total[] and start[] (shared memory, complete): expert_counts, padded_rows, block_expert and
/// every padding row of sorted_pairs (fewer than block_m after each expert's pairs, then the
/// rows past the end), spread over the grid's threads.
__device__ __forceinline__ void write_layout(const MoeAlignArgs& args, const int* total,
                                             const int* start, int first, int stride) {
  const int E = args.experts;
  const int bm = args.block_m;
  const int padded = start[E];
  if (first == 0) *args.padded_rows = padded;
  for (int e = first; e < E; e += stride) args.expert_counts[e] = total[e];
  const int max_padded = static_cast<int>(moe_max_padded(args.pairs, E, bm));
  for (int b = first; b < max_padded / bm; b += stride) {
    const int row = b * bm;
    int expert = -1;
    if (row < padded) {  // the last expert starting at or before the row owns it
      int lo = 0, hi = E - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (start[mid] <= row) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      expert = lo;
    }
    args.block_expert[b] = expert;
  }
  for (int i = first; i < E * bm; i += stride) {
    const int e = i / bm;
    const int r = total[e] + i % bm;
    if (r < start[e + 1] - start[e]) args.sorted_pairs[start[e] + r] = args.pairs;
  }
  for (int r = padded + first; r < max_padded; r += stride) args.sorted_pairs[r] = args.pairs;
}

}  // namespace moe

template <int ROUTING, int THREADS, int LANES, int VEC, int ITEMS, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_route_sort_kernel(const __grid_constant__ MoeRouteSortArgs args) {
  // Launched programmatically after the zero kernel: the routing reads only the caller's inputs
  // and writes only this call's outputs, so it runs before the wait; the barrier and the aux
  // sums come after it. Every block running lets gemm1 be scheduled.
  griddep_launch_dependents();
  moe::check_route<ROUTING, THREADS, LANES, VEC, ITEMS, EMAX>();
  using Token = moe::RoutedToken<ROUTING, LANES, VEC, ITEMS, true>;
  constexpr int TOKENS = THREADS / LANES;       // tokens per block
  constexpr int WARPS = THREADS / 32;
  constexpr int CHUNKS = (TOKENS * kMoeMaxK + 31) / 32;  // 32-pair chunks of the block's pairs
  constexpr int PER_WARP = (CHUNKS + WARPS - 1) / WARPS;
  const MoeRouteArgs& route = args.route;
  const MoeAlignArgs& al = args.align;
  const int E = route.experts;
  const int K = route.k;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int b = static_cast<int>(blockIdx.x);
  const int blocks = static_cast<int>(gridDim.x);
  const int group = tid / LANES;
  const int t0 = b * TOKENS;
  const int t = t0 + group;
  const bool live = t < route.tokens;
  const int tokens = route.tokens - t0 < TOKENS ? route.tokens - t0 : TOKENS;
  const int pairs = tokens * K;  // this block's, from pair t0 * K on
  unsigned long long* const barrier = args.scratch;
  unsigned long long* const p_sum = args.scratch + 1;   // [E] aux: 32.32 probability sums
  unsigned long long* const counts = p_sum + E;         // [E] aux: choices
  int* const table = reinterpret_cast<int*>(args.scratch + moe_sort_header(E));  // [blocks][E]

  __shared__ short ids[TOKENS * kMoeMaxK];
  __shared__ union {
    float scratch[Token::kSigmoid ? TOKENS * Token::kScratch : 1];  // routing
    int chunk[CHUNKS][EMAX];  // then per chunk and expert: count, then prefix
  } pool;
  __shared__ int before[EMAX];  // pairs of the expert in blocks before this one
  __shared__ int total[EMAX];
  __shared__ int start[EMAX + 1];
  __shared__ unsigned long long block_p[EMAX];
  __shared__ unsigned block_count[EMAX];

  const bool aux = route.aux_loss != nullptr;
  if (aux)
    for (int e = tid; e < E; e += THREADS) {
      block_p[e] = 0;
      block_count[e] = 0;
    }
  Token token;
  token.route(route, t, live, pool.scratch + group * Token::kScratch);
  if (live) {
    token.store(route, t, nullptr);
    token.store_ids(route, group, ids);
  }
  __syncthreads();  // the ids complete, the routing's scratch free, the aux sums zeroed
  if (aux && live) token.add_aux(route, block_p, block_count);
  const int chunks = (pairs + 31) / 32;
  for (int i = tid; i < chunks * E; i += THREADS) pool.chunk[i / E][i % E] = 0;
  __syncthreads();

  // Each pair's rank among its chunk's pairs of the same expert; the chunks' counts.
  int rank[PER_WARP];
  int id[PER_WARP];
#pragma unroll
  for (int i = 0; i < PER_WARP; ++i) {
    const int c = warp + i * WARPS;
    const int q = c * 32 + lane;
    const int v = c < CHUNKS && q < pairs ? ids[q] : -1;
    const bool valid = static_cast<unsigned>(v) < static_cast<unsigned>(E);
    const unsigned peers = __match_any_sync(moe::kFullMask, valid ? v : -1);
    rank[i] = __popc(peers & ((1u << lane) - 1u));
    id[i] = valid ? v : -1;
    if (valid && lane == __ffs(peers) - 1) pool.chunk[c][v] = __popc(peers);
  }
  __syncthreads();
  // Per expert: the chunks' counts become their exclusive prefix; the block's count to the table.
  for (int e = tid; e < E; e += THREADS) {
    int run = 0;
    for (int c = 0; c < chunks; ++c) {
      const int n = pool.chunk[c][e];
      pool.chunk[c][e] = run;
      run += n;
    }
    table[b * E + e] = run;
  }
  griddep_wait();  // the zero kernel has cleared the barrier count and the aux sums
  if (aux) {
    __syncthreads();  // every token's add_aux is in block_p and block_count
    for (int e = tid; e < E; e += THREADS) {
      if (block_p[e] != 0) atomicAdd(&p_sum[e], block_p[e]);
      if (block_count[e] != 0)
        atomicAdd(&counts[e], static_cast<unsigned long long>(block_count[e]));
    }
  }
  __syncthreads();
  if (tid == 0) moe::arrive_and_wait(barrier, static_cast<unsigned long long>(blocks));
  __syncthreads();

  // Every block's counts are in the table.
  for (int e = tid; e < E; e += THREADS) {
    int earlier = 0, all = 0;
    for (int r = 0; r < blocks; ++r) {
      const int n = __ldcg(table + r * E + e);
      all += n;
      earlier += r < b ? n : 0;
    }
    before[e] = earlier;
    total[e] = all;
  }
  __syncthreads();
  moe::padded_starts<EMAX>(al, total, start);
  __syncthreads();
  const int p0 = t0 * K;
#pragma unroll
  for (int i = 0; i < PER_WARP; ++i) {
    const int c = warp + i * WARPS;
    if (id[i] >= 0) {
      const int e = id[i];
      al.sorted_pairs[start[e] + before[e] + pool.chunk[c][e] + rank[i]] = p0 + c * 32 + lane;
    }
  }
  moe::write_layout(al, total, start, b * THREADS + tid, blocks * THREADS);
  if (aux && b == 0 && tid < 32)
    moe::write_aux_loss(route, [&](int e) {
      return moe::AuxSums{__ldcg(counts + e), __ldcg(p_sum + e)};
    });
}

#endif  // __CUDACC__

}  // namespace ktune
