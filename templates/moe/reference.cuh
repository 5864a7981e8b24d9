// fp32 GPU reference of the whole MoE layer, for the tuner's verification: as plain as possible,
// independent of the tuned kernels' data layout (no alignment, no sorted lists, no tiles).
//
//   moe_reference_kernel<T>       grid T, kMoeReferenceThreads threads: thread 0 routes the
//                                 token (same selection and tie rule as moe/route.cuh: softmax
//                                 modes select on the raw logit, sigmoid_group on sigmoid + bias
//                                 within the topk_group best groups, ties to the lower id), then
//                                 the block runs the token's k expert MLPs in fp32 and writes
//                                 y[t] = sum over slots of weight * mlp (slot order). act is
//                                 never rounded to 16 bits here: the tolerance covers that.
//   moe_reference_stats_kernel    grid 1: expert_counts and the aux loss from the ids above.
// Past 256 experts: moe_reference_kernel<T, W, 512> and moe_reference_stats_wide_kernel<512>
// (EMAX = moe_emax(E), moe/args.h, sizes their per-expert arrays; E <= 256 compiles the kernels
// it always did).
//
// routing=expert_choice launches moe_reference_expert_choice_kernel first (grid E): expert e's
// C tokens by a bisection on the score bits (32 counting passes, each score recomputed from its
// logits row: plain, no scratch), written in token order to topk_ids / topk_weights [E * C];
// then moe_reference_kernel finds, for its token, the experts whose list names it (in expert
// order), and the stats kernel counts each expert's list. Scores are computed exactly as
// moe/expert_choice.cuh computes them (serial max and sum in expert order, unfused add and
// division), so both choose the same tokens bit for bit.
//
// One warp per dot product, lanes along the contiguous dimension (coalesced); act values of
// kMoeReferenceChunk intermediate columns at a time live in shared memory.
#pragma once

namespace ktune {

struct MoeReferenceArgs {
  const void* x;                 // [T, H] T
  const float* logits;           // [T, E] (not precomputed)
  const float* correction_bias;  // [E] or nullptr (sigmoid_group)
  const int* ids_in;             // [T, k] (precomputed)
  const float* weights_in;       // [T, k] (precomputed)
  const void* w1;                // [E, 2I, H] W
  const void* w2;                // [E, H, I] W
  const float* w1_scale;         // e4m3 weights: [E, 2I] per-row scales (nullptr: 1)
  const float* w2_scale;         // e4m3 weights: [E, H]
  float* topk_ids;               // [T, k] fp32 out (not precomputed); expert_choice: [E * C]
                                 // chosen tokens, expert-major, increasing per expert
  float* topk_weights;           // [T, k] out (not precomputed); expert_choice: [E * C]
  float* y;                      // [T, H] out
  float* expert_counts;          // [E] out or nullptr
  float* aux_loss;               // [1] out or nullptr (softmax, softmax_renorm, sigmoid_group)
  int tokens, experts, k, hidden, inter;
  int routing;                   // MoeRouting
  int n_group, topk_group;
  float routed_scaling;
  // When choice_n is set, the kernel records each token's choices here ([T, max_choices] ids
  // and weights, [T] counts) and leaves y to moe/reference_mlp.cuh (the sampled, parallel MLP).
  int* choice_id;
  float* choice_w;
  int* choice_n;
  int max_choices;
};

constexpr int kMoeReferenceThreads = 256;
constexpr int kMoeReferenceChunk = 1024;       // act values per pass (4 KiB of shared memory)
constexpr int kMoeReferenceStatsThreads = 1024;

#if defined(__CUDACC__)
}  // namespace ktune

#include "common/types.cuh"
#include "moe/args.h"

namespace ktune {
namespace moe_ref {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// The layer's per-row e4m3 quantisation of its GEMM inputs (FP8 weights; moe/quant.cuh), as
/// the kernels apply it to x and to act: scale = moe_quant_scale(amax), value = e4m3(v / scale) *
/// scale.
struct RowQuant {
  float scale = 1.0f, inv = 1.0f;
  bool on = false;
  __device__ void set(float amax) {
    on = true;
    scale = moe_quant_scale(amax);
    inv = 1.0f / scale;
  }
  __device__ float operator()(float v) const {
    return on ? to_float(from_float<e4m3>(v * inv)) * scale : v;
  }
};

/// One warp: the largest |v| of n values (every lane returns it).
template <typename V>
__device__ __forceinline__ float warp_amax(const V* v, int n, int lane) {
  float m = 0.0f;
  for (int i = lane; i < n; i += 32) m = fmaxf(m, fabsf(to_float(v[i])));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

/// act as the FP8 layer's gemm1 stores it: rounded to bf16.
__device__ __forceinline__ float stored_act(float v, bool fp8) {
  return fp8 ? to_float(from_float<bf16>(v)) : v;
}

/// One warp: silu(x . rg) * (x . ru) over H elements, lanes along H, fp32 (every lane returns it).
/// sg and su: the rows' dequantisation scales (e4m3 weights; else 1).
/// qx: x's quantisation (FP8 weights), else the identity.
template <typename T, typename W>
__device__ __forceinline__ float gated_act(const T* x, const W* rg, const W* ru, int H, int lane,
                                           float sg = 1.0f, float su = 1.0f,
                                           const RowQuant& qx = RowQuant()) {
  float g = 0.0f, u = 0.0f;
  for (int h = lane; h < H; h += 32) {
    const float xv = qx(to_float(x[h]));
    g += xv * to_float(rg[h]);
    u += xv * to_float(ru[h]);
  }
  g = warp_sum(g) * sg;
  u = warp_sum(u) * su;
  return g / (1.0f + expf(-g)) * u;
}

/// Row `row` of expert e's weight scales (nullptr: 1).
__device__ __forceinline__ float row_scale(const float* scales, long long row) {
  return scales != nullptr ? scales[row] : 1.0f;
}

/// Routes token t serially (one thread): ids and weights, best first. E <= EMAX.
template <int EMAX>
__device__ void route_token(const MoeReferenceArgs& a, int t, int* ids, float* weights) {
  const int E = a.experts;
  const float* row = a.logits + static_cast<long long>(t) * E;
  const bool sig = a.routing == moe_sigmoid_group;
  float raw[EMAX], sel[EMAX];
  bool allowed[EMAX];
  float m = row[0];
  for (int e = 1; e < E; ++e) m = fmaxf(m, row[e]);
  float sum_all = 0.0f;
  for (int e = 0; e < E; ++e) {
    raw[e] = sig ? sigmoid(row[e]) : expf(row[e] - m);
    sel[e] = sig ? raw[e] + (a.correction_bias ? a.correction_bias[e] : 0.0f) : row[e];
    allowed[e] = true;
    sum_all += raw[e];
  }
  if (sig && a.n_group > 1) {
    const int gsize = E / a.n_group;
    float gscore[64];
    bool kept[64];
    for (int g = 0; g < a.n_group; ++g) {
      int b1 = -1, b2 = -1;  // best and second best member
      for (int e = g * gsize; e < (g + 1) * gsize; ++e) {
        if (b1 < 0 || sel[e] > sel[b1]) {
          b2 = b1;
          b1 = e;
        } else if (b2 < 0 || sel[e] > sel[b2]) {
          b2 = e;
        }
      }
      gscore[g] = gsize >= 2 ? sel[b1] + sel[b2] : sel[b1];
      kept[g] = false;
    }
    for (int r = 0; r < a.topk_group; ++r) {
      int best = -1;
      for (int g = 0; g < a.n_group; ++g)
        if (!kept[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
      kept[best] = true;
    }
    for (int e = 0; e < E; ++e) allowed[e] = kept[e / gsize];
  }
  float sum_sel = 0.0f;
  for (int s = 0; s < a.k; ++s) {
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (allowed[e] && (best < 0 || sel[e] > sel[best])) best = e;
    allowed[best] = false;
    ids[s] = best;
    sum_sel += raw[best];
  }
  const float norm = a.routing == moe_softmax ? sum_all : sum_sel;
  const float scale = sig ? a.routed_scaling : 1.0f;
  for (int s = 0; s < a.k; ++s) weights[s] = raw[ids[s]] / norm * scale;
}

/// expert_choice: S[t, e], the softmax over experts of token t's logits, as
/// moe_expert_choice_scores_kernel computes it (the bits matter: they decide the choice).
__device__ float expert_choice_score(const MoeReferenceArgs& a, int t, int e) {
  const int E = a.experts;
  const float* row = a.logits + static_cast<long long>(t) * E;
  float m = row[0];
  for (int j = 1; j < E; ++j) m = fmaxf(m, row[j]);
  float sum = 0.0f;
  for (int j = 0; j < E; ++j) sum = __fadd_rn(sum, expf(row[j] - m));
  return __fdiv_rn(expf(row[e] - m), sum);
}

/// Order-preserving bits of a score.
__device__ __forceinline__ unsigned score_key(float v) {
  const unsigned u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Block-wide count of the tokens whose key of expert e's score passes `pred` (uniform result).
template <typename Pred>
__device__ int count_tokens(const MoeReferenceArgs& a, int e, int* s_count, Pred pred) {
  if (threadIdx.x == 0) *s_count = 0;
  __syncthreads();
  int n = 0;
  for (int t = static_cast<int>(threadIdx.x); t < a.tokens; t += kMoeReferenceThreads)
    n += pred(score_key(expert_choice_score(a, t, e))) ? 1 : 0;
  atomicAdd(s_count, n);
  __syncthreads();
  const int total = *s_count;
  __syncthreads();
  return total;
}

}  // namespace moe_ref

/// routing=expert_choice: expert blockIdx.x's C tokens (highest score, ties to the lower token
/// id) and their scores, in increasing token order, into topk_ids / topk_weights [E * C].
__global__ void __launch_bounds__(kMoeReferenceThreads)
    moe_reference_expert_choice_kernel(const MoeReferenceArgs a) {
  __shared__ int s_count;
  __shared__ int s_flag[kMoeReferenceThreads];  // 1: above the threshold, 2: equal to it
  __shared__ int s_slot[kMoeReferenceThreads];
  const int e = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int C = moe_expert_capacity(a.tokens, a.k, a.experts);
  // The C-th largest key: the largest v with at least C keys >= v, one bit at a time.
  unsigned v = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const unsigned cand = v | (1u << bit);
    if (moe_ref::count_tokens(a, e, &s_count, [&](unsigned key) { return key >= cand; }) >= C)
      v = cand;
  }
  const int above = moe_ref::count_tokens(a, e, &s_count, [&](unsigned key) { return key > v; });
  // Every key above v is chosen, and the C - above lowest token ids of those equal to v. Thread
  // 0 hands out the slots of each tile in token order.
  int next = 0, equal_taken = 0;  // thread 0's
  for (int base = 0; base < a.tokens; base += kMoeReferenceThreads) {
    const int t = base + tid;
    float score = 0.0f;
    int flag = 0;
    if (t < a.tokens) {
      score = moe_ref::expert_choice_score(a, t, e);
      const unsigned key = moe_ref::score_key(score);
      flag = key > v ? 1 : key == v ? 2 : 0;
    }
    s_flag[tid] = flag;
    __syncthreads();
    if (tid == 0)
      for (int i = 0; i < kMoeReferenceThreads; ++i) {
        const bool take = s_flag[i] == 1 || (s_flag[i] == 2 && equal_taken < C - above);
        if (take && s_flag[i] == 2) ++equal_taken;
        s_slot[i] = take ? next++ : -1;
      }
    __syncthreads();
    if (s_slot[tid] >= 0) {
      const long long p = static_cast<long long>(e) * C + s_slot[tid];
      a.topk_ids[p] = static_cast<float>(t);
      a.topk_weights[p] = score;
    }
    __syncthreads();
  }
}

/// T: x and y's type; W: the weights' (T, or e4m3 with w1_scale and w2_scale); EMAX:
/// moe_emax(E), 256 or 512.
template <typename T, typename W = T, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(kMoeReferenceThreads)
    moe_reference_kernel(const MoeReferenceArgs a) {
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  constexpr int WARPS = kMoeReferenceThreads / 32;
  __shared__ int s_id[EMAX];  // the token's choices: k, or up to E (expert_choice)
  __shared__ float s_w[EMAX];
  __shared__ int s_n;
  __shared__ float s_act[kMoeReferenceChunk];
  const int t = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int E = a.experts, H = a.hidden, I = a.inter;
  if (tid == 0) {
    s_n = a.k;
    if (a.routing == moe_expert_choice) {
      // The experts whose list (increasing token ids) names t, in expert order.
      const int C = moe_expert_capacity(a.tokens, a.k, E);
      s_n = 0;
      for (int e = 0; e < E; ++e) {
        const float* list = a.topk_ids + static_cast<long long>(e) * C;
        int lo = 0, hi = C;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (list[mid] < static_cast<float>(t)) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        if (lo < C && list[lo] == static_cast<float>(t)) {
          s_id[s_n] = e;
          s_w[s_n] = a.topk_weights[static_cast<long long>(e) * C + lo];
          ++s_n;
        }
      }
    } else if (a.routing == moe_precomputed) {
      const int K = a.k;
      for (int s = 0; s < K; ++s) {
        s_id[s] = a.ids_in[static_cast<long long>(t) * K + s];
        s_w[s] = a.weights_in[static_cast<long long>(t) * K + s];
      }
    } else {
      const int K = a.k;
      moe_ref::route_token<EMAX>(a, t, s_id, s_w);
      for (int s = 0; s < K; ++s) {
        a.topk_ids[static_cast<long long>(t) * K + s] = static_cast<float>(s_id[s]);
        a.topk_weights[static_cast<long long>(t) * K + s] = s_w[s];
      }
    }
  }
  if (a.choice_n) {
    __syncthreads();
    const int n = s_n;
    if (tid == 0) a.choice_n[t] = n;
    for (int s = tid; s < n && s < a.max_choices; s += kMoeReferenceThreads) {
      a.choice_id[static_cast<long long>(t) * a.max_choices + s] = s_id[s];
      a.choice_w[static_cast<long long>(t) * a.max_choices + s] = s_w[s];
    }
    return;
  }
  float* y = a.y + static_cast<long long>(t) * H;
  for (int c = tid; c < H; c += kMoeReferenceThreads) y[c] = 0.0f;
  __syncthreads();
  const int K = s_n;
  const T* x = static_cast<const T*>(a.x) + static_cast<long long>(t) * H;
  // FP8 weights: x and each expert's act row quantised per row as the kernels do (act's scale
  // needs the whole row: a first pass over the chunks finds its largest value).
  constexpr bool FP8 = sizeof(W) == 1;
  __shared__ unsigned s_amax;
  moe_ref::RowQuant qx;
  if (FP8) qx.set(moe_ref::warp_amax(x, H, lane));
  for (int s = 0; s < K; ++s) {
    const int e = s_id[s];
    if (e < 0 || e >= E) continue;  // dropped pair (uniform over the block)
    const float w = s_w[s];
    const W* w1 = static_cast<const W*>(a.w1) + static_cast<long long>(e) * 2 * I * H;
    const W* w2 = static_cast<const W*>(a.w2) + static_cast<long long>(e) * H * I;
    const auto act_of = [&](int j) {  // act[j], as stored between the GEMMs
      const long long rg = static_cast<long long>(e) * 2 * I + j;  // gate row
      return moe_ref::stored_act(
          moe_ref::gated_act(x, w1 + static_cast<long long>(j) * H,
                             w1 + static_cast<long long>(I + j) * H, H, lane,
                             moe_ref::row_scale(a.w1_scale, rg),
                             moe_ref::row_scale(a.w1_scale, rg + I), qx),
          FP8);
    };
    moe_ref::RowQuant qa;
    if (FP8) {
      if (tid == 0) s_amax = 0u;
      __syncthreads();
      for (int j = warp; j < I; j += WARPS) {
        const float v = fabsf(act_of(j));
        if (lane == 0) atomicMax(&s_amax, __float_as_uint(v));  // >= 0: bits order as values
      }
      __syncthreads();
      qa.set(__uint_as_float(s_amax));
    }
    for (int j0 = 0; j0 < I; j0 += kMoeReferenceChunk) {
      const int n = I - j0 < kMoeReferenceChunk ? I - j0 : kMoeReferenceChunk;
      for (int j = warp; j < n; j += WARPS) {
        const float act = qa(act_of(j0 + j));
        if (lane == 0) s_act[j] = act;
      }
      __syncthreads();
      for (int c = warp; c < H; c += WARPS) {
        const W* r2 = w2 + static_cast<long long>(c) * I + j0;
        float acc = 0.0f;
        for (int j = lane; j < n; j += 32) acc += s_act[j] * to_float(r2[j]);
        acc = moe_ref::warp_sum(acc) *
              moe_ref::row_scale(a.w2_scale, static_cast<long long>(e) * H + c);
        if (lane == 0) y[c] += w * acc;
      }
      __syncthreads();
    }
  }
}

namespace moe_ref {

/// The stats kernel's body for E <= EMAX.
template <int EMAX>
__device__ __forceinline__ void stats(const MoeReferenceArgs& a) {
  __shared__ unsigned count[EMAX];
  __shared__ float prob[EMAX];
  const int E = a.experts, K = a.k, T = a.tokens;
  const int tid = static_cast<int>(threadIdx.x);
  const bool pre = a.routing == moe_precomputed;
  const bool ec = a.routing == moe_expert_choice;
  const int C = moe_expert_capacity(T, K, E);
  for (int e = tid; e < E; e += kMoeReferenceStatsThreads) {
    count[e] = 0;
    prob[e] = 0.0f;
  }
  __syncthreads();
  const long long pairs = ec ? static_cast<long long>(E) * C : static_cast<long long>(T) * K;
  for (long long p = tid; p < pairs; p += kMoeReferenceStatsThreads) {
    const int id = pre ? a.ids_in[p] : static_cast<int>(a.topk_ids[p]);
    if (ec) {
      // expert_choice lists hold token ids: count the valid entries of each expert's list.
      if (id >= 0 && id < T) atomicAdd(&count[p / C], 1u);
    } else if (id >= 0 && id < E) {
      atomicAdd(&count[id], 1u);
    }
  }
  const bool aux = !pre && !ec && a.aux_loss != nullptr;
  if (aux) {
    const bool sig = a.routing == moe_sigmoid_group;
    for (int t = tid; t < T; t += kMoeReferenceStatsThreads) {
      const float* row = a.logits + static_cast<long long>(t) * E;
      float m = row[0], sum = 0.0f;
      for (int e = 1; e < E; ++e) m = fmaxf(m, row[e]);
      for (int e = 0; e < E; ++e) sum += sig ? moe_ref::sigmoid(row[e]) : expf(row[e] - m);
      for (int e = 0; e < E; ++e)
        atomicAdd(&prob[e], (sig ? moe_ref::sigmoid(row[e]) : expf(row[e] - m)) / sum);
    }
  }
  __syncthreads();
  if (a.expert_counts)
    for (int e = tid; e < E; e += kMoeReferenceStatsThreads)
      a.expert_counts[e] = static_cast<float>(count[e]);
  if (aux && tid == 0) {
    double loss = 0.0;
    for (int e = 0; e < E; ++e)
      loss += static_cast<double>(count[e]) / static_cast<double>(pairs) * prob[e] / T;
    a.aux_loss[0] = static_cast<float>(E * loss);
  }
}

}  // namespace moe_ref

/// E <= 256.
__global__ void __launch_bounds__(kMoeReferenceStatsThreads)
    moe_reference_stats_kernel(const MoeReferenceArgs a) {
  moe_ref::stats<kMoeEmax>(a);
}

/// E in 257..EMAX (EMAX 512): a kernel of its own, so that the one above keeps its name.
template <int EMAX>
__global__ void __launch_bounds__(kMoeReferenceStatsThreads)
    moe_reference_stats_wide_kernel(const MoeReferenceArgs a) {
  static_assert(EMAX == kMoeMaxExperts, "EMAX must be 512 (E <= 256: moe_reference_stats_kernel)");
  moe_ref::stats<EMAX>(a);
}

#endif  // __CUDACC__

}  // namespace ktune
