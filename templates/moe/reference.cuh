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
  const void* w1;                // [E, 2I, H] T
  const void* w2;                // [E, H, I] T
  float* topk_ids;               // [T, k] fp32 out (not precomputed)
  float* topk_weights;           // [T, k] out (not precomputed)
  float* y;                      // [T, H] out
  float* expert_counts;          // [E] out or nullptr
  float* aux_loss;               // [1] out or nullptr (not precomputed)
  int tokens, experts, k, hidden, inter;
  int routing;                   // MoeRouting
  int n_group, topk_group;
  float routed_scaling;
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

/// Routes token t serially (one thread): ids and weights, best first.
__device__ void route_token(const MoeReferenceArgs& a, int t, int* ids, float* weights) {
  const int E = a.experts;
  const float* row = a.logits + static_cast<long long>(t) * E;
  const bool sig = a.routing == moe_sigmoid_group;
  float raw[256], sel[256];
  bool allowed[256];
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

}  // namespace moe_ref

template <typename T>
__global__ void __launch_bounds__(kMoeReferenceThreads)
    moe_reference_kernel(const MoeReferenceArgs a) {
  constexpr int WARPS = kMoeReferenceThreads / 32;
  __shared__ int s_id[16];
  __shared__ float s_w[16];
  __shared__ float s_act[kMoeReferenceChunk];
  const int t = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int E = a.experts, K = a.k, H = a.hidden, I = a.inter;
  if (tid == 0) {
    if (a.routing == moe_precomputed) {
      for (int s = 0; s < K; ++s) {
        s_id[s] = a.ids_in[static_cast<long long>(t) * K + s];
        s_w[s] = a.weights_in[static_cast<long long>(t) * K + s];
      }
    } else {
      moe_ref::route_token(a, t, s_id, s_w);
      for (int s = 0; s < K; ++s) {
        a.topk_ids[static_cast<long long>(t) * K + s] = static_cast<float>(s_id[s]);
        a.topk_weights[static_cast<long long>(t) * K + s] = s_w[s];
      }
    }
  }
  float* y = a.y + static_cast<long long>(t) * H;
  for (int c = tid; c < H; c += kMoeReferenceThreads) y[c] = 0.0f;
  __syncthreads();
  const T* x = static_cast<const T*>(a.x) + static_cast<long long>(t) * H;
  for (int s = 0; s < K; ++s) {
    const int e = s_id[s];
    if (e < 0 || e >= E) continue;  // dropped pair (uniform over the block)
    const float w = s_w[s];
    const T* w1 = static_cast<const T*>(a.w1) + static_cast<long long>(e) * 2 * I * H;
    const T* w2 = static_cast<const T*>(a.w2) + static_cast<long long>(e) * H * I;
    for (int j0 = 0; j0 < I; j0 += kMoeReferenceChunk) {
      const int n = I - j0 < kMoeReferenceChunk ? I - j0 : kMoeReferenceChunk;
      for (int j = warp; j < n; j += WARPS) {
        const T* rg = w1 + static_cast<long long>(j0 + j) * H;
        const T* ru = w1 + static_cast<long long>(I + j0 + j) * H;
        float g = 0.0f, u = 0.0f;
        for (int h = lane; h < H; h += 32) {
          const float xv = to_float(x[h]);
          g += xv * to_float(rg[h]);
          u += xv * to_float(ru[h]);
        }
        g = moe_ref::warp_sum(g);
        u = moe_ref::warp_sum(u);
        if (lane == 0) s_act[j] = g / (1.0f + expf(-g)) * u;
      }
      __syncthreads();
      for (int c = warp; c < H; c += WARPS) {
        const T* r2 = w2 + static_cast<long long>(c) * I + j0;
        float acc = 0.0f;
        for (int j = lane; j < n; j += 32) acc += s_act[j] * to_float(r2[j]);
        acc = moe_ref::warp_sum(acc);
        if (lane == 0) y[c] += w * acc;
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kMoeReferenceStatsThreads)
    moe_reference_stats_kernel(const MoeReferenceArgs a) {
  __shared__ unsigned count[256];
  __shared__ float prob[256];
  const int E = a.experts, K = a.k, T = a.tokens;
  const int tid = static_cast<int>(threadIdx.x);
  const bool pre = a.routing == moe_precomputed;
  for (int e = tid; e < E; e += kMoeReferenceStatsThreads) {
    count[e] = 0;
    prob[e] = 0.0f;
  }
  __syncthreads();
  const long long pairs = static_cast<long long>(T) * K;
  for (long long p = tid; p < pairs; p += kMoeReferenceStatsThreads) {
    const int id = pre ? a.ids_in[p] : static_cast<int>(a.topk_ids[p]);
    if (id >= 0 && id < E) atomicAdd(&count[id], 1u);
  }
  const bool aux = !pre && a.aux_loss != nullptr;
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

#endif  // __CUDACC__

}  // namespace ktune
