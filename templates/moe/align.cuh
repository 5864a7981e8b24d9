// Alignment: the T * k (token, slot) pairs of topk_ids grouped by expert, each expert's run
// padded to a multiple of block_m, entirely on the GPU and without a host synchronisation.
//
// Outputs (see MoeAlignArgs): expert_counts, padded_rows, sorted_pairs (every row up to
// moe_max_padded is written: pairs, then T * k for padding, including the rows past padded_rows)
// and block_expert (every block up to moe_max_blocks; -1 past padded_rows). Pairs whose id is
// outside 0..E-1 are dropped. The order is stable: inside an expert's run the pairs come in
// increasing pair index, so the output is a pure function of topk_ids.
//
// Two paths, the same result:
//   moe_align_kernel<THREADS>: one block does everything (small T * k); its body,
//                              moe::align_block, also aligns moe_route_align_kernel's ids
//                              from shared memory (moe/route_align.cuh).
//   moe_align_count_kernel<THREADS, CHUNK>  grid ceil(pairs / CHUNK): per-chunk expert counts
//   moe_align_scan_kernel<THREADS, CHUNK>   grid 1: per-expert prefix over the chunks, padded
//                                           starts, counts, padded_rows, block_expert, padding
//   moe_align_scatter_kernel<THREADS, CHUNK> grid ceil(pairs / CHUNK): the pairs to their rows
//   in this order on one stream, with args.scratch holding moe_align_scratch_ints(...) ints.
//
// Template parameters: THREADS, threads per block, a power of two in 128..1024; CHUNK, pairs per
// block of the multi-block path, a multiple of THREADS in 1024..16384; EMAX, the per-expert
// arrays' size, moe_emax(E): 256 (the default) or 512 (moe/args.h). The per-warp counts,
// [THREADS / 32][EMAX] ints, stay within 32 KiB of shared memory: at EMAX 512 at most 512
// threads (the host's one-block align takes at most 512 there; the multi-block path runs 256).
//
// Stability without sorting: inside a block each warp owns a contiguous stretch of pairs and
// walks it 32 pairs at a time. __match_any_sync finds the lanes holding the same expert; a
// pair's rank is the number of such lanes below it, its row the warp's running offset for that
// expert plus the rank, and the lowest such lane advances the offset. A warp's offsets start at
// the expert's start plus the pairs of the same expert in earlier chunks and earlier warps
// (counted first, then prefix-summed per expert). Counts are integers, so nothing depends on
// the order in which blocks run.
#pragma once

#include "common/pdl.cuh"
#include "moe/args.h"

namespace ktune {

#if defined(__CUDACC__)

namespace moe {

constexpr unsigned kFullMask = 0xffffffffu;
/// Pairs a warp loads before it works on them (loads in flight together).
constexpr int kAlignUnroll = 4;

template <int THREADS>
__device__ __forceinline__ void check_align_threads() {
  static_assert(THREADS >= 128 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                "THREADS must be a power of two in 128..1024");
}

/// EMAX, and the per-warp arrays [THREADS / 32][EMAX] of the kernels that keep them.
template <int THREADS, int EMAX>
__device__ __forceinline__ void check_align_emax() {
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  static_assert(THREADS / 32 * EMAX <= 32 * kMoeEmax,
                "the per-warp counts [THREADS / 32][EMAX] exceed 32 KiB of shared memory: at "
                "EMAX 512 at most 512 threads");
}

/// The contiguous stretch [begin, end) of [p0, p1) that warp w of `warps` walks (multiples of 32
/// pairs, so every warp but the last starts on a whole group of 32).
struct Stretch {
  int begin;
  int end;
};
__device__ __forceinline__ Stretch warp_stretch(int p0, int p1, int w, int warps) {
  const int per = ((p1 - p0 + warps - 1) / warps + 31) & ~31;
  const int b = p0 + w * per;
  return {b < p1 ? b : p1, b + per < p1 ? b + per : p1};
}

/// Where the pairs' ids are read from: topk_ids in global memory (read-only path), or the
/// one-block route + align kernel's copy in shared memory (16-bit: ids < kMoeMaxExperts, -1 for
/// none).
struct GlobalIds {
  const int* ids;
  __device__ __forceinline__ int operator()(int p) const { return __ldg(ids + p); }
};
struct SharedIds {
  const short* ids;
  __device__ __forceinline__ int operator()(int p) const { return ids[p]; }
};

/// Adds the valid pairs of [begin, end) to counts[expert]. ATOMIC: other warps add to the same
/// counts. Whole warp, warp-uniform bounds.
template <bool ATOMIC, typename Ids>
__device__ __forceinline__ void count_stretch(Ids ids, Stretch s, int experts, int* counts) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int base = s.begin; base < s.end; base += 32 * kAlignUnroll) {
    int id[kAlignUnroll];
#pragma unroll
    for (int u = 0; u < kAlignUnroll; ++u) {
      const int p = base + u * 32 + lane;
      id[u] = p < s.end ? ids(p) : -1;
    }
#pragma unroll
    for (int u = 0; u < kAlignUnroll; ++u) {
      const bool valid = static_cast<unsigned>(id[u]) < static_cast<unsigned>(experts);
      const unsigned peers = __match_any_sync(kFullMask, valid ? id[u] : -1);
      if (valid && lane == __ffs(peers) - 1) {
        if constexpr (ATOMIC) {
          atomicAdd(&counts[id[u]], __popc(peers));
        } else {
          counts[id[u]] += __popc(peers);
        }
      }
      if constexpr (!ATOMIC) __syncwarp();
    }
  }
}

/// Writes each valid pair p of [begin, end) to sorted[offset[expert] + rank] in increasing p,
/// advancing offset (this warp's own row of shared memory).
template <typename Ids>
__device__ __forceinline__ void scatter_stretch(Ids ids, Stretch s, int experts, int* offset,
                                                int* sorted) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const unsigned below = (1u << lane) - 1u;
  for (int base = s.begin; base < s.end; base += 32 * kAlignUnroll) {
    int id[kAlignUnroll];
#pragma unroll
    for (int u = 0; u < kAlignUnroll; ++u) {
      const int p = base + u * 32 + lane;
      id[u] = p < s.end ? ids(p) : -1;
    }
#pragma unroll
    for (int u = 0; u < kAlignUnroll; ++u) {
      const bool valid = static_cast<unsigned>(id[u]) < static_cast<unsigned>(experts);
      const unsigned peers = __match_any_sync(kFullMask, valid ? id[u] : -1);
      if (valid) sorted[offset[id[u]] + __popc(peers & below)] = base + u * 32 + lane;
      __syncwarp();
      if (valid && lane == __ffs(peers) - 1) offset[id[u]] += __popc(peers);
      __syncwarp();
    }
  }
}

/// Block-wide, from total[e] (pairs of expert e) in shared memory: start[0..E] = exclusive
/// prefix of the padded counts (start[E] = padded rows), then expert_counts, padded_rows,
/// block_expert and every padding row of sorted_pairs. Ends with __syncthreads.
template <int THREADS, int EMAX>
__device__ void lay_out_experts(const MoeAlignArgs& args, const int* total, int* start) {
  const int E = args.experts;
  const int bm = args.block_m;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 32) {
    constexpr int kPer = EMAX / 32;
    int local[kPer];
    int sum = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = tid * kPer + i;
      local[i] = sum;
      sum += e < E ? (total[e] + bm - 1) / bm * bm : 0;
    }
    int inclusive = sum;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(kFullMask, inclusive, d);
      if (tid >= d) inclusive += y;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = tid * kPer + i;
      if (e < E) start[e] = inclusive - sum + local[i];
    }
    if (tid == 31) start[E] = inclusive;
  }
  __syncthreads();
  const int padded = start[E];
  if (tid == 0) *args.padded_rows = padded;
  for (int e = tid; e < E; e += THREADS) args.expert_counts[e] = total[e];
  const int max_padded = static_cast<int>(moe_max_padded(args.pairs, E, bm));
  for (int b = tid; b < max_padded / bm; b += THREADS) {
    const int row = b * bm;
    int expert = -1;
    if (row < padded) {
      // The last expert starting at or before the row: experts with no pairs share their
      // start with the next one, so this is the non-empty expert that owns the row.
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
  // Padding: fewer than block_m rows after each expert's pairs, then the rows past the end.
  for (int i = tid; i < E * bm; i += THREADS) {
    const int e = i / bm;
    const int r = total[e] + i % bm;
    if (r < start[e + 1] - start[e]) args.sorted_pairs[start[e] + r] = args.pairs;
  }
  for (int r = padded + tid; r < max_padded; r += THREADS) args.sorted_pairs[r] = args.pairs;
  __syncthreads();
}

/// The one-block alignment of args.pairs pairs, their ids read through `ids`, by the block's
/// first `warps` warps (one stretch of pairs each; offset[w] holds warp w's counts, then its row
/// offsets). Every thread of the block calls it.
template <int THREADS, int EMAX, typename Ids>
__device__ __forceinline__ void align_block(const MoeAlignArgs& args, Ids ids,
                                            int (*offset)[EMAX], int* total, int* start,
                                            int warps) {
  const int E = args.experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  for (int i = tid; i < warps * EMAX; i += THREADS) (&offset[0][0])[i] = 0;
  __syncthreads();
  const Stretch s = warp_stretch(0, args.pairs, warp, warps);
  if (warp < warps) count_stretch<false>(ids, s, E, offset[warp]);
  __syncthreads();
  for (int e = tid; e < E; e += THREADS) {
    int sum = 0;
    for (int w = 0; w < warps; ++w) sum += offset[w][e];
    total[e] = sum;
  }
  __syncthreads();
  lay_out_experts<THREADS, EMAX>(args, total, start);
  for (int e = tid; e < E; e += THREADS) {
    int run = start[e];
    for (int w = 0; w < warps; ++w) {
      const int c = offset[w][e];
      offset[w][e] = run;
      run += c;
    }
  }
  __syncthreads();
  if (warp < warps) scatter_stretch(ids, s, E, offset[warp], args.sorted_pairs);
}

}  // namespace moe

template <int THREADS, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_align_kernel(const __grid_constant__ MoeAlignArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  moe::check_align_threads<THREADS>();
  moe::check_align_emax<THREADS, EMAX>();
  constexpr int WARPS = THREADS / 32;
  __shared__ int offset[WARPS][EMAX];  // per-warp counts, then row offsets
  __shared__ int total[EMAX];
  __shared__ int start[EMAX + 1];
  moe::align_block<THREADS, EMAX>(args, moe::GlobalIds{args.topk_ids}, offset, total, start,
                                  WARPS);
}

template <int THREADS, int CHUNK, int EMAX>
__device__ __forceinline__ void check_align_chunk() {
  moe::check_align_threads<THREADS>();
  moe::check_align_emax<THREADS, EMAX>();
  static_assert(CHUNK >= 1024 && CHUNK <= 16384 && CHUNK % THREADS == 0,
                "CHUNK must be a multiple of THREADS in 1024..16384");
}

template <int THREADS, int CHUNK, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_align_count_kernel(const __grid_constant__ MoeAlignArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  check_align_chunk<THREADS, CHUNK, EMAX>();
  __shared__ int counts[EMAX];
  const int E = args.experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int c = static_cast<int>(blockIdx.x);
  for (int e = tid; e < E; e += THREADS) counts[e] = 0;
  __syncthreads();
  const int p0 = c * CHUNK;
  const int p1 = p0 + CHUNK < args.pairs ? p0 + CHUNK : args.pairs;
  moe::count_stretch<true>(moe::GlobalIds{args.topk_ids},
                           moe::warp_stretch(p0, p1, tid / 32, THREADS / 32), E, counts);
  __syncthreads();
  for (int e = tid; e < E; e += THREADS) args.scratch[static_cast<long long>(c) * E + e] = counts[e];
}

template <int THREADS, int CHUNK, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_align_scan_kernel(const __grid_constant__ MoeAlignArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  check_align_chunk<THREADS, CHUNK, EMAX>();
  __shared__ int total[EMAX];
  __shared__ int start[EMAX + 1];
  const int E = args.experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int chunks = (args.pairs + CHUNK - 1) / CHUNK;
  // Per expert, the pairs of that expert in earlier chunks (a column walk; rows are coalesced
  // across the threads of consecutive experts). Loads are batched ahead of the dependent adds.
  constexpr int B = 8;
  for (int e = tid; e < E; e += THREADS) {
    int run = 0;
    for (int c0 = 0; c0 < chunks; c0 += B) {
      int v[B];
#pragma unroll
      for (int b = 0; b < B; ++b)
        v[b] = c0 + b < chunks ? args.scratch[static_cast<long long>(c0 + b) * E + e] : 0;
#pragma unroll
      for (int b = 0; b < B; ++b) {
        if (c0 + b < chunks) args.scratch[static_cast<long long>(c0 + b) * E + e] = run;
        run += v[b];
      }
    }
    total[e] = run;
  }
  __syncthreads();
  moe::lay_out_experts<THREADS, EMAX>(args, total, start);
  for (int e = tid; e < E; e += THREADS)
    args.scratch[static_cast<long long>(chunks) * E + e] = start[e];
}

template <int THREADS, int CHUNK, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_align_scatter_kernel(const __grid_constant__ MoeAlignArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  check_align_chunk<THREADS, CHUNK, EMAX>();
  constexpr int WARPS = THREADS / 32;
  __shared__ int offset[WARPS][EMAX];
  const int E = args.experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int c = static_cast<int>(blockIdx.x);
  const int chunks = (args.pairs + CHUNK - 1) / CHUNK;
  for (int i = tid; i < WARPS * EMAX; i += THREADS) (&offset[0][0])[i] = 0;
  __syncthreads();
  const int p0 = c * CHUNK;
  const int p1 = p0 + CHUNK < args.pairs ? p0 + CHUNK : args.pairs;
  const moe::Stretch s = moe::warp_stretch(p0, p1, warp, WARPS);
  moe::count_stretch<false>(moe::GlobalIds{args.topk_ids}, s, E, offset[warp]);
  __syncthreads();
  for (int e = tid; e < E; e += THREADS) {
    int run = args.scratch[static_cast<long long>(c) * E + e] +
              args.scratch[static_cast<long long>(chunks) * E + e];
    for (int w = 0; w < WARPS; ++w) {
      const int n = offset[w][e];
      offset[w][e] = run;
      run += n;
    }
  }
  __syncthreads();
  moe::scatter_stretch(moe::GlobalIds{args.topk_ids}, s, E, offset[warp], args.sorted_pairs);
}

#endif  // __CUDACC__

}  // namespace ktune
