// Routing: router logits [T, E] -> each token's top-k experts and their weights, and optionally
// the switch-transformer auxiliary loss.
//
// Template parameters (the host checks them, with reasons, before compiling):
//   ROUTING  moe_softmax, moe_softmax_renorm or moe_sigmoid_group; must equal args.routing
//   THREADS  threads per block: a power of two in 32..1024
//   LANES    threads per token: 4, 8, 16 or 32 (a token never spans warps: E <= 256 fits in one
//            warp's registers, so a wider group would only add a cross-warp reduction per pick);
//            a block routes THREADS / LANES tokens
//   VEC      logits per load (1, 2 or 4 floats: up to one 16-byte load); needs E % VEC == 0
//   ITEMS    vectors per thread: the host picks ceil(E / (LANES * VEC)); ITEMS * VEC <= 64
//            (<= 32 for moe_sigmoid_group, which keeps two scores per expert: past that it
//            spills)
//   moe_sigmoid_group also keeps (256 + 64) floats of shared memory per token: at most 32
//   tokens (THREADS / LANES) per block.
// Expert j of a token lives in lane (j / VEC) % LANES of its group, item j / (LANES * VEC).
//
// Selection compares (score, expert) keys packed into 64 bits, the score's bits made
// order-preserving and the low word 0xffff - expert, so one integer max picks the best score and,
// among equal scores, the lower expert id. Softmax modes select on the raw logit (softmax is
// monotone), which makes the choice exact and independent of how exp rounds. k picks of a
// butterfly max over the token's lanes; the owner of each winner sends its weight to the group.
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
/// Most experts and most choices per token the route kernel supports.
constexpr int kMoeMaxExperts = 256;
constexpr int kMoeMaxK = 16;

#if defined(__CUDACC__)

namespace moe {

/// The score's bits, made to order like the float (negative values below positive ones).
__device__ __forceinline__ unsigned ordered_bits(float v) {
  const unsigned u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Max key = best score, ties to the lower id. Never 0, which stands for "nothing left".
__device__ __forceinline__ unsigned long long pick_key(float score, int id) {
  return (static_cast<unsigned long long>(ordered_bits(score)) << 32) |
         static_cast<unsigned>(0xffff - id);
}

__device__ __forceinline__ int key_id(unsigned long long key) {
  return 0xffff - static_cast<int>(key & 0xffffu);
}

struct MaxKeyOp {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a,
                                                           unsigned long long b) const {
    return a > b ? a : b;
  }
};

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// Probability p in [0, 1] as a 32.32 fixed-point integer.
__device__ __forceinline__ unsigned long long to_fixed(float p) {
  return __float2ull_rn(p * 4294967296.0f);
}

}  // namespace moe

template <int ROUTING, int THREADS, int LANES, int VEC, int ITEMS>
__global__ void __launch_bounds__(THREADS) moe_route_kernel(const __grid_constant__ MoeRouteArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
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
  static_assert(ITEMS * LANES * VEC <= 4 * kMoeMaxExperts, "ITEMS: far more than 256 experts");
  static_assert(ROUTING != moe_sigmoid_group || THREADS / LANES <= 32,
                "moe_sigmoid_group keeps (256 + 64) floats of shared memory per token: at most "
                "32 tokens (THREADS / LANES) per block");
  constexpr int N = ITEMS * VEC;                 // scores per thread
  constexpr int TOKENS = THREADS / LANES;        // tokens per block
  constexpr int SLOTS = (kMoeMaxK + LANES - 1) / LANES;  // output slots per thread
  constexpr bool kSigmoid = ROUTING == moe_sigmoid_group;
  constexpr unsigned kFull = 0xffffffffu;

  const int E = args.experts;
  const int K = args.k;
  const int lane = static_cast<int>(threadIdx.x) % LANES;
  const int group = static_cast<int>(threadIdx.x) / LANES;
  const int t = static_cast<int>(blockIdx.x) * TOKENS + group;
  // Tokens past T still run every shuffle (their warp may hold live tokens); they store nothing.
  const bool live = t < args.tokens;
  const float* row = args.logits + static_cast<long long>(live ? t : 0) * E;
  const float neg_inf = __int_as_float(0xff800000);

  auto expert = [&](int n) { return ((n / VEC) * LANES + lane) * VEC + n % VEC; };

  // Aux loss accumulators of this block, zeroed before anything else so that no register state
  // lives across a barrier (the flag is uniform over the grid).
  const bool aux = args.aux_loss != nullptr;
  __shared__ unsigned long long block_p[kMoeMaxExperts];
  __shared__ unsigned block_count[kMoeMaxExperts];
  __shared__ bool last_block;
  if (aux) {
    for (int e = static_cast<int>(threadIdx.x); e < E; e += THREADS) {
      block_p[e] = 0;
      block_count[e] = 0;
    }
    __syncthreads();
  }

  float x[N];  // logits (softmax) or sigmoid scores
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = (i * LANES + lane) * VEC;
    float f[VEC];
    const Vec<float, VEC> v = load_vec<VEC>(row + j, live && j < E);
    unpack(v, f);
#pragma unroll
    for (int e = 0; e < VEC; ++e) x[i * VEC + e] = f[e];
  }
  unsigned long long excluded = 0;  // bit n: score n is past E, outside the chosen groups or taken
#pragma unroll
  for (int n = 0; n < N; ++n)
    if (expert(n) >= E) excluded |= 1ull << n;

  // Selection scores (biased for sigmoid) and the normaliser of the full distribution.
  float sel[kSigmoid ? N : 1];
  float m = neg_inf, total = 0.0f;
  if constexpr (kSigmoid) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int j = expert(n);
      const bool in = j < E;
      x[n] = in ? moe::sigmoid(x[n]) : 0.0f;
      const float b = in && args.correction_bias != nullptr ? args.correction_bias[j] : 0.0f;
      sel[n] = x[n] + b;
      total += x[n];
    }
    total = warp_reduce<LANES>(total, SumOp());
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

  if constexpr (kSigmoid) {
    // Group-limited selection: a group's score is the sum of its two best biased scores (its
    // only score for groups of one); the topk_group best groups stay eligible.
    __shared__ float biased[TOKENS][kMoeMaxExperts];
    __shared__ float group_score[TOKENS][kMoeMaxGroups];
    const int n_group = args.n_group;
    if (n_group > 1) {
      const int gsize = E / n_group;
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (expert(n) < E) biased[group][expert(n)] = sel[n];
      __syncwarp();
      for (int g = lane; g < n_group; g += LANES) {
        float b1 = neg_inf, b2 = neg_inf;
        for (int j = g * gsize; j < (g + 1) * gsize; ++j) {
          const float v = biased[group][j];
          if (v > b1) {
            b2 = b1;
            b1 = v;
          } else if (v > b2) {
            b2 = v;
          }
        }
        group_score[group][g] = gsize >= 2 ? b1 + b2 : b1;
      }
      __syncwarp();
      unsigned long long chosen = 0;
      for (int r = 0; r < args.topk_group; ++r) {
        unsigned long long best = 0;
        for (int g = lane; g < n_group; g += LANES)
          if (!((chosen >> g) & 1)) {
            const unsigned long long key = moe::pick_key(group_score[group][g], g);
            best = key > best ? key : best;
          }
        best = warp_reduce<LANES>(best, moe::MaxKeyOp());
        if (best != 0) chosen |= 1ull << moe::key_id(best);
      }
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (expert(n) < E && !((chosen >> (expert(n) / gsize)) & 1)) excluded |= 1ull << n;
    }
  }

  // k picks. Slot s is kept by lane s % LANES, in its slot s / LANES.
  int slot_id[SLOTS];
  float slot_w[SLOTS];
#pragma unroll
  for (int q = 0; q < SLOTS; ++q) {
    slot_id[q] = -1;
    slot_w[q] = 0.0f;
  }
  float picked = 0.0f;  // sum of the picked weights, in slot order
  for (int s = 0; s < K; ++s) {
    unsigned long long best = 0;
    int best_n = 0;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      if ((excluded >> n) & 1) continue;
      float score;
      if constexpr (kSigmoid) {
        score = sel[n];
      } else {
        score = x[n];
      }
      const unsigned long long key = moe::pick_key(score, expert(n));
      if (key > best) {
        best = key;
        best_n = n;
      }
    }
    // The owner's weight quantity: exp(x - m) for softmax, the unbiased score for sigmoid.
    float w = 0.0f;
#pragma unroll
    for (int n = 0; n < N; ++n)
      if (n == best_n) w = kSigmoid ? x[n] : expf(x[n] - m);
    const unsigned long long mine = best;
    best = warp_reduce<LANES>(best, moe::MaxKeyOp());
    const int id = best != 0 ? moe::key_id(best) : -1;
    const int owner = best != 0 ? (id / VEC) % LANES : 0;
    w = __shfl_sync(kFull, w, owner, LANES);
    if (best == 0) w = 0.0f;
    if (mine == best && best != 0) excluded |= 1ull << best_n;
    picked += w;
#pragma unroll
    for (int q = 0; q < SLOTS; ++q)
      if (q * LANES + lane == s) {
        slot_id[q] = id;
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
  if (live) {
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) {
      const int s = q * LANES + lane;
      if (s < K) {
        const long long o = static_cast<long long>(t) * K + s;
        args.topk_ids[o] = slot_id[q];
        args.topk_weights[o] = slot_w[q] * scale;
      }
    }
  }

  if (!aux) return;

  // ---- aux loss: P_e sums and choice counts, fixed point, per block then global ----
  if (live) {
    const float inv = 1.0f / total;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int j = expert(n);
      if (j < E) {
        const float p = kSigmoid ? x[n] * inv : expf(x[n] - m) * inv;
        atomicAdd(&block_p[j], moe::to_fixed(p));
      }
    }
#pragma unroll
    for (int q = 0; q < SLOTS; ++q)
      if (q * LANES + lane < K && slot_id[q] >= 0) atomicAdd(&block_count[slot_id[q]], 1u);
  }
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
  // One warp, a fixed order of additions: E * sum_e f_e * P_e with f_e = count_e / (T k) and
  // P_e = p_sum_e / 2^32 / T.
  double acc = 0.0;
  for (int e = static_cast<int>(threadIdx.x); e < E; e += 32) {
    const unsigned long long p = atomicExch(&p_sum[e], 0ull);
    const unsigned long long c = atomicExch(&counts[e], 0ull);
    acc += static_cast<double>(c) * static_cast<double>(p);
  }
  acc = warp_reduce(acc, SumOp());
  if (threadIdx.x == 0) {
    const double tk = static_cast<double>(args.tokens) * K;
    *args.aux_loss = static_cast<float>(static_cast<double>(E) * acc / 4294967296.0 / tk /
                                        static_cast<double>(args.tokens));
    atomicExch(ticket, 0ull);
  }
}

#endif  // __CUDACC__

}  // namespace ktune
