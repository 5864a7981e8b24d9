// Expert-choice routing (routing=expert_choice): each expert picks the C = ceil(T k / E) tokens
// with the highest score S[t, e] = softmax over experts of token t's logits, ties to the lower
// token id. Pair p = e * C + c is the c-th chosen token of expert e in increasing id, with
// routing weight S[token, e] (not renormalised). A token may be chosen by 0..E experts; y[t] is
// the sum, in expert order, of the pairs that name t, and 0 when none does.
//
// Kernels, in this order on one stream (moe/gemm.cuh's two GEMMs run between select and
// combine, gemm1 gathering x rows through pair_token):
//   moe_expert_choice_scores_kernel          grid ceil(T / kMoeEcScoreTokens),
//                                            kMoeEcScoreThreads threads: S transposed [E, T]
//                                            (E > 256: moe_expert_choice_scores_wide_kernel
//                                            <512>, grid ceil(T / moe_ec_score_tokens(512)))
//   moe_expert_choice_select_kernel<THREADS> grid E: expert e's C tokens and weights, its rows
//                                            of sorted_pairs and block_expert, expert_counts[e]
//   moe_expert_choice_combine_kernel<T, THREADS, VEC, EMAX>
//                                            grid (T, moe_combine_grid_y(H, THREADS, VEC)): y
// EMAX: moe_emax(E), 256 (the default) or 512, the per-expert arrays' size (moe/args.h).
//
// Scores: one thread takes a token's max and its sum of exponentials serially in expert order,
// with additions and the division that are never fused into an FMA, so that the op's fp32
// reference (moe/reference.cuh), written the same plain way, gets bit-identical scores and
// chooses the same tokens: the tuner compares chosen ids exactly.
//
// Select: radix select of the C-th largest key (the score's bits made order-preserving) over
// the expert's column, 8 bits per pass from the top, a histogram in shared memory with one
// atomic per distinct digit per warp; it stops as soon as the bin it narrows to holds exactly
// the tokens still needed. Then a stable compaction in token order: a token is chosen if its key,
// masked to the bits decided, is above the threshold, or equal to it and among the first `need`
// equal ones. Every count is an integer, so the result is a pure function of the logits.
//
// No host synchronisation: every expert picks exactly C tokens, so the GEMMs' padded layout
// (MoeExpertChoiceArgs) is known on the host; select still writes it on every call, as nothing
// is assumed to survive in the workspace.
#pragma once

#include "common/pdl.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"
#include "moe/args.h"
#include "moe/route.cuh"

namespace ktune {

#if defined(__CUDACC__)

namespace moe {

/// The scores kernel's body for E <= EMAX, moe_ec_score_tokens(EMAX) tokens a block.
template <int EMAX>
__device__ __forceinline__ void expert_choice_scores(const MoeExpertChoiceArgs& args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  constexpr int TOK = moe_ec_score_tokens(EMAX);
  // Token rows padded by one float: a thread per token walking its row hits distinct banks.
  __shared__ float tile[TOK][EMAX + 1];
  __shared__ float s_max[TOK];
  __shared__ float s_sum[TOK];
  const int E = args.experts;
  const int T = args.tokens;
  const int tid = static_cast<int>(threadIdx.x);
  const int t0 = static_cast<int>(blockIdx.x) * TOK;
  const int n = T - t0 < TOK ? T - t0 : TOK;

  // The block's rows are contiguous: coalesced loads.
  const float* src = args.logits + static_cast<long long>(t0) * E;
  for (int i = tid; i < n * E; i += kMoeEcScoreThreads) tile[i / E][i % E] = src[i];
  __syncthreads();
  if (tid < n) {
    const float* row = tile[tid];
    float m = row[0];
    for (int e = 1; e < E; ++e) m = fmaxf(m, row[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum = __fadd_rn(sum, expf(row[e] - m));
    s_max[tid] = m;
    s_sum[tid] = sum;
  }
  __syncthreads();
  // Transposed: consecutive threads write consecutive tokens of one expert's column.
  for (int i = tid; i < E * TOK; i += kMoeEcScoreThreads) {
    const int e = i / TOK;
    const int j = i % TOK;
    if (j < n)
      args.scores[static_cast<long long>(e) * T + t0 + j] =
          __fdiv_rn(expf(tile[j][e] - s_max[j]), s_sum[j]);
  }
}

}  // namespace moe

/// E <= 256. Launch: grid ceil(T / kMoeEcScoreTokens), kMoeEcScoreThreads threads.
__global__ void __launch_bounds__(kMoeEcScoreThreads)
    moe_expert_choice_scores_kernel(const __grid_constant__ MoeExpertChoiceArgs args) {
  moe::expert_choice_scores<kMoeEmax>(args);
}

/// E in 257..EMAX (EMAX 512): the same scores, moe_ec_score_tokens(EMAX) tokens a block (a
/// kernel of its own so that the one above keeps its name and code). Launch: grid
/// ceil(T / moe_ec_score_tokens(EMAX)), kMoeEcScoreThreads threads.
template <int EMAX>
__global__ void __launch_bounds__(kMoeEcScoreThreads)
    moe_expert_choice_scores_wide_kernel(const __grid_constant__ MoeExpertChoiceArgs args) {
  static_assert(EMAX > kMoeEmax, "E <= 256 runs moe_expert_choice_scores_kernel");
  moe::expert_choice_scores<EMAX>(args);
}

/// THREADS: a power of two in 128..1024. Launch: grid E, THREADS threads, no dynamic shared
/// memory; after moe_expert_choice_scores_kernel on the same stream.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    moe_expert_choice_select_kernel(const __grid_constant__ MoeExpertChoiceArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  static_assert(THREADS >= 128 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                "THREADS must be a power of two in 128..1024");
  constexpr int WARPS = THREADS / 32;
  constexpr int BINS = 256;      // 8-bit digits
  constexpr int UNROLL = 4;      // keys a thread loads before it bins them
  constexpr unsigned kFull = 0xffffffffu;
  __shared__ int hist[BINS];
  __shared__ int warp_above[WARPS];
  __shared__ int warp_equal[WARPS];
  __shared__ int s_bin, s_above, s_count;

  const int e = static_cast<int>(blockIdx.x);
  const int T = args.tokens;
  const int E = args.experts;
  const int C = args.capacity;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const float* col = args.scores + static_cast<long long>(e) * T;

  // This expert's part of the static layout.
  const int bm = args.block_m;
  const int cp = (C + bm - 1) / bm * bm;
  for (int r = tid; r < cp; r += THREADS)
    args.sorted_pairs[static_cast<long long>(e) * cp + r] = r < C ? e * C + r : E * C;
  for (int b = tid; b < cp / bm; b += THREADS) args.block_expert[e * (cp / bm) + b] = e;
  if (tid == 0) {
    if (e == 0) *args.padded_rows = E * cp;
    if (args.expert_counts != nullptr) args.expert_counts[e] = C;
  }

  // Radix select. Invariant: the keys whose decided bits (mask) exceed prefix number C - need,
  // and `candidates` keys match prefix, need <= candidates of them still to be taken.
  unsigned prefix = 0, mask = 0;
  int need = C, candidates = T;
  for (int shift = 24; shift >= 0 && candidates != need; shift -= 8) {
    for (int i = tid; i < BINS; i += THREADS) hist[i] = 0;
    __syncthreads();
    for (int base = 0; base < T; base += THREADS * UNROLL) {
      unsigned key[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int t = base + u * THREADS + tid;
        key[u] = t < T ? moe::ordered_bits(col[t]) : 0u;
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int t = base + u * THREADS + tid;
        const bool in = t < T && (key[u] & mask) == prefix;
        const int digit = in ? static_cast<int>((key[u] >> shift) & 0xffu) : -1;
        const unsigned peers = __match_any_sync(kFull, digit);
        if (in && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l holds bins 8l..8l+7; `above` counts the keys in the bins of higher lanes.
      int mine = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) mine += hist[lane * 8 + i];
      int inclusive = mine;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int y = __shfl_down_sync(kFull, inclusive, d);
        if (lane + d < 32) inclusive += y;
      }
      int above = inclusive - mine;
      if (above < need && need <= inclusive) {  // exactly one lane
        for (int i = 7; i >= 0; --i) {
          const int h = hist[lane * 8 + i];
          if (above + h >= need) {
            s_bin = lane * 8 + i;
            s_above = above;
            s_count = h;
            break;
          }
          above += h;
        }
      }
    }
    __syncthreads();
    prefix |= static_cast<unsigned>(s_bin) << shift;
    mask |= 0xffu << shift;
    need -= s_above;
    candidates = s_count;
  }

  // Stable compaction, one token per thread per tile; run_* count the earlier tiles' keys.
  int* out_token = args.pair_token + static_cast<long long>(e) * C;
  float* out_weight = args.pair_weight + static_cast<long long>(e) * C;
  const unsigned below = (1u << lane) - 1u;
  int run_above = 0, run_equal = 0;
  for (int base = 0; base < T; base += THREADS) {
    const int t = base + tid;
    const float s = t < T ? col[t] : 0.0f;
    const unsigned key = moe::ordered_bits(s) & mask;
    const bool is_above = t < T && key > prefix;
    const bool is_equal = t < T && key == prefix;
    const unsigned ballot_above = __ballot_sync(kFull, is_above);
    const unsigned ballot_equal = __ballot_sync(kFull, is_equal);
    if (lane == 0) {
      warp_above[warp] = __popc(ballot_above);
      warp_equal[warp] = __popc(ballot_equal);
    }
    __syncthreads();
    int above_before = run_above + __popc(ballot_above & below);
    int equal_before = run_equal + __popc(ballot_equal & below);
    for (int w = 0; w < WARPS; ++w) {
      const int na = warp_above[w], ne = warp_equal[w];
      if (w < warp) {
        above_before += na;
        equal_before += ne;
      }
      run_above += na;
      run_equal += ne;
    }
    if (is_above || (is_equal && equal_before < need)) {
      const int c = above_before + (equal_before < need ? equal_before : need);
      out_token[c] = t;
      out_weight[c] = s;
    }
    __syncthreads();
    if (run_above == C - need && run_equal >= need) break;  // all C placed (uniform)
  }
}

/// y[t] = sum over e in 0..E-1 of pair_out[e * C + c] where pair_token[e * C + c] == t, in
/// fp32, rounded once; zeros for a token no expert chose. T: bf16 or fp16. THREADS, VEC as
/// moe_combine_kernel (moe_combine_invalid_reason). Launch: grid (tokens,
/// moe_combine_grid_y(hidden, THREADS, VEC)), THREADS threads, no dynamic shared memory.
template <typename T, int THREADS, int VEC, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_expert_choice_combine_kernel(const __grid_constant__ MoeExpertChoiceCombineArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  static_assert(sizeof(T) == 2, "T must be bf16 or fp16");
  static_assert(THREADS == 64 || THREADS == 128 || THREADS == 256 || THREADS == 512,
                "THREADS must be 64, 128, 256 or 512");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC must be 1, 2, 4 or 8");
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  __shared__ int rows[EMAX];  // pair_out row of (token, expert), -1: not chosen

  const int token = static_cast<int>(blockIdx.x);
  const int C = args.capacity;
  const int tid = static_cast<int>(threadIdx.x);
  // Each expert's list is increasing: a binary search per expert.
  for (int e = tid; e < args.experts; e += THREADS) {
    const int* list = args.pair_token + static_cast<long long>(e) * C;
    int lo = 0, hi = C;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (list[mid] < token) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    rows[e] = lo < C && list[lo] == token ? e * C + lo : -1;
  }
  __syncthreads();

  const int col = (static_cast<int>(blockIdx.y) * THREADS + tid) * VEC;
  if (col >= args.hidden) return;
  const long long h = args.hidden;
  const T* in = static_cast<const T*>(args.pair_out) + col;
  float sum[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) sum[v] = 0.f;
  for (int e = 0; e < args.experts; ++e) {
    const int r = rows[e];
    if (r < 0) continue;
    float f[VEC];
    unpack(load_vec<VEC>(in + r * h), f);
#pragma unroll
    for (int v = 0; v < VEC; ++v) sum[v] += f[v];
  }
  store_vec(static_cast<T*>(args.y) + static_cast<long long>(token) * h + col, pack<T>(sum));
}

#endif  // __CUDACC__

}  // namespace ktune
