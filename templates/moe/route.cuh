// Routing: router logits [T, E] -> each token's top-k experts and their weights, and optionally
// the switch-transformer auxiliary loss. moe::RoutedToken routes one token on a group of LANES
// lanes; moe_route_kernel runs it for THREADS / LANES tokens per block, and
// moe_route_align_kernel (moe/route_align.cuh) for every token in one block.
//
// Template parameters (the host checks them, with reasons, before compiling):
//   ROUTING  moe_softmax, moe_softmax_renorm or moe_sigmoid_group; must equal args.routing
//   THREADS  threads per block: a power of two in 32..1024
//   LANES    threads per token: 4, 8, 16 or 32 (a token never spans warps: E <= 512 fits in one
//            warp's registers, so a wider group would only add a cross-warp reduction per pick);
//            a block routes THREADS / LANES tokens at a time
//   VEC      logits per load (1, 2 or 4 floats: up to one 16-byte load); needs E % VEC == 0
//   ITEMS    vectors per thread: the host picks ceil(E / (LANES * VEC)); ITEMS * VEC <= 64
//            (<= 32 for moe_sigmoid_group, which keeps two scores per expert: past that it
//            spills)
//   moe_sigmoid_group also keeps ITEMS * VEC * LANES (>= E) floats of shared memory per token in
//   flight, the biased scores its lanes read back by group: THREADS * ITEMS * VEC <= 8192
//   (kMoeRouteMaxScores, 32 KiB).
//   EMAX     the block's per-expert aux sums: moe_emax(E), 256 (the default) or 512 (moe/args.h)
// Expert j of a token lives in lane (j / VEC) % LANES of its group, item j / (LANES * VEC).
//
// Selection: each lane offers its best remaining (score, expert), the score's bits made
// order-preserving, and the group keeps the largest score and, among equal scores, the lowest
// expert id: one 32-bit max, then one 32-bit min over the lanes holding that score (redux.sync
// when a token has the whole warp, a butterfly of 32-bit shuffles below). Softmax modes select
// on the raw logit (softmax is monotone), which makes the choice exact and independent of how exp
// rounds. k picks; the owner of each winner sends its weight to the group. moe_sigmoid_group
// keeps its topk_group best groups the same way.
//
// Aux loss without float atomics: every probability is turned into a 32.32 fixed-point integer,
// summed per block in shared memory and then into args.aux_scratch with 64-bit integer atomics
// (integer sums do not depend on their order, so the result is bitwise reproducible). The last
// block to finish (a ticket counter in the scratch) computes the loss in double, writes it and
// zeroes the scratch again, so one zeroing at allocation serves every later call (and graph
// replays).
#pragma once

#include "common/pdl.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "moe/args.h"

namespace ktune {

/// Most expert groups of moe_sigmoid_group.
constexpr int kMoeMaxGroups = 64;
/// Most choices per token the route kernel supports (most experts: kMoeMaxExperts, moe/args.h).
constexpr int kMoeMaxK = 16;

#if defined(__CUDACC__)

namespace moe {

/// The score's bits, made to order like the float (negative values below positive ones).
__device__ __forceinline__ unsigned ordered_bits(float v) {
  const unsigned u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// "No candidate" for an id offered to best_of().
constexpr unsigned kNoPick = 0xffffffffu;

/// The winner of the candidates (bits, id) that the aligned groups of LANES lanes offer: the
/// largest bits and, among equal bits, the lowest id; kNoPick when no lane offers one (id
/// kNoPick, bits 0). Every lane of the group gets it; the whole warp must take part.
template <int LANES>
__device__ __forceinline__ unsigned best_of(unsigned bits, unsigned id) {
  constexpr unsigned kFull = 0xffffffffu;
  if constexpr (LANES == 32) {
    // One instruction each (sm_80+). Not for sub-warp groups: with 16-lane masks ptxas spilled
    // in the route kernel, and cooperative groups keep shuffles below 16 lanes.
    const unsigned top = __reduce_max_sync(kFull, bits);
    return __reduce_min_sync(kFull, bits == top ? id : kNoPick);
  } else {
    unsigned top = bits;
#pragma unroll
    for (int d = LANES / 2; d > 0; d /= 2) {
      const unsigned other = __shfl_xor_sync(kFull, top, d);
      top = other > top ? other : top;
    }
    unsigned win = bits == top ? id : kNoPick;
#pragma unroll
    for (int d = LANES / 2; d > 0; d /= 2) {
      const unsigned other = __shfl_xor_sync(kFull, win, d);
      win = other < win ? other : win;
    }
    return win;
  }
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// Probability p in [0, 1] as a 32.32 fixed-point integer.
__device__ __forceinline__ unsigned long long to_fixed(float p) {
  return __float2ull_rn(p * 4294967296.0f);
}

/// The template parameters' limits, shared by the kernels that route.
template <int ROUTING, int THREADS, int LANES, int VEC, int ITEMS, int EMAX>
__device__ __forceinline__ void check_route() {
  static_assert(ROUTING == moe_softmax || ROUTING == moe_softmax_renorm ||
                    ROUTING == moe_sigmoid_group,
                "ROUTING must be moe_softmax, moe_softmax_renorm or moe_sigmoid_group");
  static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                "THREADS must be a power of two in 32..1024");
  static_assert(LANES == 4 || LANES == 8 || LANES == 16 || LANES == 32,
                "LANES (threads per token) must be 4, 8, 16 or 32");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4 floats");
  static_assert(ITEMS >= 1 && ITEMS * VEC <= 64, "ITEMS * VEC must be in 1..64");
  static_assert(ROUTING != moe_sigmoid_group || ITEMS * VEC <= 32,
                "moe_sigmoid_group keeps two scores per expert in registers: ITEMS * VEC must be "
                "at most 32 (E <= 32 * LANES)");
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  static_assert(ITEMS * LANES * VEC <= 4 * EMAX, "ITEMS: far more than EMAX experts");
  static_assert(ROUTING != moe_sigmoid_group || THREADS * ITEMS * VEC <= kMoeRouteMaxScores,
                "moe_sigmoid_group keeps ITEMS * VEC * LANES floats of shared memory per token "
                "in flight: THREADS * ITEMS * VEC must be at most 8192");
}

/// One token routed by the aligned group of LANES lanes that holds it: its scores and choices,
/// each lane holding its share (expert j in lane (j / VEC) % LANES, score n = j's position in
/// that lane). route() is called by whole warps, every group of a warp on its own token.
/// EARLY_BIAS: moe_sigmoid_group's correction bias is read beside the logits, both loads in
/// flight together; otherwise (the route kernel's and the one-block kernel's machine code, which
/// shipped databases were timed with) it is read after the first sigmoid, a second round trip
/// to memory that the scores wait for.
template <int ROUTING, int LANES, int VEC, int ITEMS, bool EARLY_BIAS = false>
struct RoutedToken {
  static constexpr int N = ITEMS * VEC;                         // scores per lane
  static constexpr int SLOTS = (kMoeMaxK + LANES - 1) / LANES;  // output slots per lane
  static constexpr bool kSigmoid = ROUTING == moe_sigmoid_group;
  /// Floats of shared memory route() needs per token (moe_sigmoid_group; >= E).
  static constexpr int kScratch = kSigmoid ? N * LANES : 0;

  int lane;
  float x[N];           // logits (softmax) or sigmoid scores
  float m;              // softmax: the largest logit
  float total;          // softmax: sum of exp(x - m); sigmoid: sum of the scores
  int slot_id[SLOTS];   // slot s is kept by lane s % LANES, in its slot s / LANES; -1: none
  float slot_w[SLOTS];  // its weight, final (renormalised, scaled)

  __device__ __forceinline__ int expert(int n) const {
    return ((n / VEC) * LANES + lane) * VEC + n % VEC;
  }

  /// Routes token t (row 0 when !live: the shuffles still run, nothing is stored). `scratch`:
  /// kScratch floats of this group's own, free again on return.
  __device__ __forceinline__ void route(const MoeRouteArgs& args, int t, bool live,
                                        float* scratch) {
    constexpr unsigned kFull = 0xffffffffu;
    const int E = args.experts;
    const int K = args.k;
    lane = static_cast<int>(threadIdx.x) % LANES;
    const float* row = args.logits + static_cast<long long>(live ? t : 0) * E;
    const float neg_inf = __int_as_float(0xff800000);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = (i * LANES + lane) * VEC;
      float f[VEC];
      const Vec<float, VEC> v = load_vec<VEC>(row + j, live && j < E);
      unpack(v, f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) x[i * VEC + e] = f[e];
    }
    float early_bias[EARLY_BIAS && kSigmoid ? N : 1];
    if constexpr (EARLY_BIAS && kSigmoid) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        const int j = expert(n);
        early_bias[n] =
            j < E && args.correction_bias != nullptr ? __ldg(args.correction_bias + j) : 0.0f;
      }
    }
    unsigned long long excluded = 0;  // bit n: score n past E, outside the chosen groups, taken
#pragma unroll
    for (int n = 0; n < N; ++n)
      if (expert(n) >= E) excluded |= 1ull << n;

    // Selection scores (biased for sigmoid) and the normaliser of the full distribution.
    float sel[kSigmoid ? N : 1];
    m = neg_inf;
    total = 0.0f;
    if constexpr (kSigmoid) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        const int j = expert(n);
        const bool in = j < E;
        x[n] = in ? sigmoid(x[n]) : 0.0f;
        float b;
        if constexpr (EARLY_BIAS)
          b = early_bias[n];
        else
          b = in && args.correction_bias != nullptr ? args.correction_bias[j] : 0.0f;
        sel[n] = x[n] + b;
        total += x[n];
      }
      total = warp_reduce<LANES>(total, SumOp());
      if (args.n_group > 1) excluded |= outside_groups(args, sel, scratch);
    } else {
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (!((excluded >> n) & 1)) m = fmaxf(m, x[n]);
      m = warp_reduce<LANES>(m, MaxOp());
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (!((excluded >> n) & 1)) total += expf(x[n] - m);
      total = warp_reduce<LANES>(total, SumOp());
    }

    // k picks.
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) {
      slot_id[q] = -1;
      slot_w[q] = 0.0f;
    }
    float picked = 0.0f;  // sum of the picked weights, in slot order
    for (int s = 0; s < K; ++s) {
      unsigned bits = 0, id = kNoPick;
      int best_n = 0;
#pragma unroll
      for (int n = 0; n < N; ++n) {
        if ((excluded >> n) & 1) continue;
        const unsigned b = ordered_bits(kSigmoid ? sel[n] : x[n]);
        if (id == kNoPick || b > bits) {  // ties keep the lower expert (n in increasing order)
          bits = b;
          id = static_cast<unsigned>(expert(n));
          best_n = n;
        }
      }
      // The owner's weight quantity: exp(x - m) for softmax, the unbiased score for sigmoid.
      float w = 0.0f;
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (n == best_n) w = kSigmoid ? x[n] : expf(x[n] - m);
      const unsigned win = best_of<LANES>(bits, id);
      const bool found = win != kNoPick;
      const int owner = found ? static_cast<int>(win / VEC) % LANES : 0;
      w = __shfl_sync(kFull, w, owner, LANES);
      if (!found) w = 0.0f;
      if (found && id == win) excluded |= 1ull << best_n;
      picked += w;
#pragma unroll
      for (int q = 0; q < SLOTS; ++q)
        if (q * LANES + lane == s) {
          slot_id[q] = found ? static_cast<int>(win) : -1;
          slot_w[q] = w;
        }
    }

    float scale;
    if constexpr (ROUTING == moe_softmax) {
      scale = 1.0f / total;
    } else if constexpr (ROUTING == moe_softmax_renorm) {
      scale = 1.0f / picked;
    } else {
      scale = args.routed_scaling / picked;
    }
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) slot_w[q] *= scale;
  }

  /// Writes token t's ids (where args.topk_ids is set, and to ids_out[t * k + slot] where given)
  /// and weights.
  __device__ __forceinline__ void store(const MoeRouteArgs& args, int t, short* ids_out) const {
    const int K = args.k;
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) {
      const int s = q * LANES + lane;
      if (s < K) {
        const long long o = static_cast<long long>(t) * K + s;
        if (args.topk_ids != nullptr) args.topk_ids[o] = slot_id[q];
        if (ids_out != nullptr) ids_out[o] = static_cast<short>(slot_id[q]);
        args.topk_weights[o] = slot_w[q];
      }
    }
  }

  /// Writes the token's ids as 16 bits to ids_out[local * k + slot] (-1 for an empty slot).
  __device__ __forceinline__ void store_ids(const MoeRouteArgs& args, int local,
                                            short* ids_out) const {
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) {
      const int s = q * LANES + lane;
      if (s < args.k) ids_out[local * args.k + s] = static_cast<short>(slot_id[q]);
    }
  }

  /// Adds the token's probabilities (32.32 fixed point) and choices to p_sum and counts [E].
  __device__ __forceinline__ void add_aux(const MoeRouteArgs& args, unsigned long long* p_sum,
                                          unsigned* counts) const {
    const float inv = 1.0f / total;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int j = expert(n);
      if (j < args.experts) {
        const float p = kSigmoid ? x[n] * inv : expf(x[n] - m) * inv;
        atomicAdd(&p_sum[j], to_fixed(p));
      }
    }
#pragma unroll
    for (int q = 0; q < SLOTS; ++q)
      if (q * LANES + lane < args.k && slot_id[q] >= 0) atomicAdd(&counts[slot_id[q]], 1u);
  }

 private:
  /// moe_sigmoid_group with n_group > 1: the bits of the scores outside the topk_group best
  /// groups. A group's score is the sum of its two best biased scores (its only score for groups
  /// of one). The lanes read the biased scores back from `scratch` by group (group g by lane
  /// g % LANES), and each writes its groups' scores over their first elements, which no other
  /// lane reads.
  __device__ __forceinline__ unsigned long long outside_groups(const MoeRouteArgs& args,
                                                               const float (&sel)[N],
                                                               float* scratch) {
    const int E = args.experts;
    const int n_group = args.n_group;
    const int gsize = E / n_group;
    const float neg_inf = __int_as_float(0xff800000);
#pragma unroll
    for (int n = 0; n < N; ++n)
      if (expert(n) < E) scratch[expert(n)] = sel[n];
    __syncwarp();
    for (int g = lane; g < n_group; g += LANES) {
      float b1 = neg_inf, b2 = neg_inf;
      for (int j = g * gsize; j < (g + 1) * gsize; ++j) {
        const float v = scratch[j];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      scratch[g * gsize] = gsize >= 2 ? b1 + b2 : b1;
    }
    __syncwarp();
    unsigned long long chosen = 0;
    for (int r = 0; r < args.topk_group; ++r) {
      unsigned bits = 0, id = kNoPick;
      for (int g = lane; g < n_group; g += LANES) {
        const unsigned b = ordered_bits(scratch[g * gsize]);
        if (!((chosen >> g) & 1) && (id == kNoPick || b > bits)) {
          bits = b;
          id = static_cast<unsigned>(g);
        }
      }
      const unsigned win = best_of<LANES>(bits, id);
      if (win != kNoPick) chosen |= 1ull << win;
    }
    __syncwarp();  // the scratch may take the group's next token
    unsigned long long outside = 0;
#pragma unroll
    for (int n = 0; n < N; ++n)
      if (expert(n) < E && !((chosen >> (expert(n) / gsize)) & 1)) outside |= 1ull << n;
    return outside;
  }
};

/// One expert's aux-loss sums: choices and 32.32 fixed-point probabilities.
struct AuxSums {
  unsigned long long count;
  unsigned long long p;
};

/// One warp: *args.aux_loss = E * sum_e f_e * P_e with f_e = count_e / (T k) and
/// P_e = p_e / 2^32 / T, from load(e) -> AuxSums, in a fixed order of additions.
template <typename Load>
__device__ __forceinline__ void write_aux_loss(const MoeRouteArgs& args, Load load) {
  const int E = args.experts;
  double acc = 0.0;
  for (int e = static_cast<int>(threadIdx.x) % 32; e < E; e += 32) {
    const AuxSums a = load(e);
    acc += static_cast<double>(a.count) * static_cast<double>(a.p);
  }
  acc = warp_reduce(acc, SumOp());
  if (threadIdx.x % 32 == 0) {
    const double tk = static_cast<double>(args.tokens) * args.k;
    *args.aux_loss = static_cast<float>(static_cast<double>(E) * acc / 4294967296.0 / tk /
                                        static_cast<double>(args.tokens));
  }
}

}  // namespace moe

template <int ROUTING, int THREADS, int LANES, int VEC, int ITEMS, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(THREADS)
    moe_route_kernel(const __grid_constant__ MoeRouteArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  moe::check_route<ROUTING, THREADS, LANES, VEC, ITEMS, EMAX>();
  using Token = moe::RoutedToken<ROUTING, LANES, VEC, ITEMS>;
  constexpr int TOKENS = THREADS / LANES;  // tokens per block
  const int E = args.experts;
  const int group = static_cast<int>(threadIdx.x) / LANES;
  const int t = static_cast<int>(blockIdx.x) * TOKENS + group;
  // Tokens past T still run every shuffle (their warp may hold live tokens); they store nothing.
  const bool live = t < args.tokens;

  // Aux loss accumulators of this block, zeroed before anything else so that no register state
  // lives across a barrier (the flag is uniform over the grid).
  const bool aux = args.aux_loss != nullptr;
  __shared__ unsigned long long block_p[EMAX];
  __shared__ unsigned block_count[EMAX];
  __shared__ float scratch[Token::kSigmoid ? TOKENS * Token::kScratch : 1];
  __shared__ bool last_block;
  if (aux) {
    for (int e = static_cast<int>(threadIdx.x); e < E; e += THREADS) {
      block_p[e] = 0;
      block_count[e] = 0;
    }
    __syncthreads();
  }

  Token token;
  token.route(args, t, live, scratch + group * Token::kScratch);
  if (live) token.store(args, t, nullptr);
  if (!aux) return;

  // ---- aux loss: P_e sums and choice counts, fixed point, per block then global ----
  if (live) token.add_aux(args, block_p, block_count);
  __syncthreads();
  unsigned long long* p_sum = args.aux_scratch;        // [E]
  unsigned long long* counts = args.aux_scratch + E;   // [E]
  unsigned long long* ticket = args.aux_scratch + 2 * E;
  for (int e = static_cast<int>(threadIdx.x); e < E; e += THREADS) {
    if (block_p[e] != 0) atomicAdd(&p_sum[e], block_p[e]);
    if (block_count[e] != 0) atomicAdd(&counts[e], static_cast<unsigned long long>(block_count[e]));
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(ticket, 1ull) == gridDim.x - 1;
  __syncthreads();
  if (!last_block || threadIdx.x >= 32) return;
  __threadfence();
  moe::write_aux_loss(args, [&](int e) {
    return moe::AuxSums{atomicExch(&counts[e], 0ull), atomicExch(&p_sum[e], 0ull)};
  });
  if (threadIdx.x == 0) atomicExch(ticket, 0ull);
}

#endif  // __CUDACC__

}  // namespace ktune
