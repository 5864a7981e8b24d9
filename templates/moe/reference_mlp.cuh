// The layer's MLP half of the fp32 reference for large problems, parallel over tokens AND
// columns (moe_reference_kernel's own MLP runs one block per token, which streams every chosen
// expert's 3*H*I weights through one SM: minutes at Mixtral size). moe_reference_kernel routes
// and records each token's choices (MoeReferenceArgs::choice_*); then, for the sampled tokens
// t % sample_stride == 0 only (the tuner checks those rows of y):
//   moe_reference_act_kernel<T>  grid (samples, ceil(I / kMoeRefCols)): act[sample][s][j] =
//                                silu(x.W1g_e[j]) * (x.W1u_e[j]) for each choice s of the token
//   moe_reference_out_kernel<T>  grid (samples, ceil(H / kMoeRefCols)): y[t][c] =
//                                sum over choices, in order, of w_s * act[sample][s] . W2_e[c]
// One warp per column, lanes along the reduction, fp32 accumulation: the same arithmetic as
// moe_reference_kernel's loop, so both references agree to rounding.
#pragma once

namespace ktune {

constexpr int kMoeRefMlpThreads = 256;  // 8 warps
constexpr int kMoeRefCols = 64;         // columns per block (8 per warp)

/// Scratch of the sampled reference, in moe_reference_workspace's layout (floats/ints):
/// choice ids [T * max_choices], weights [T * max_choices], counts [T], act [samples *
/// max_choices * I].
struct MoeRefMlpArgs {
  const void* x;         // [T, H]
  const void* w1;        // [E, 2I, H]
  const void* w2;        // [E, H, I]
  const float* w1_scale;  // e4m3 weights: [E, 2I] per-row scales (nullptr: 1)
  const float* w2_scale;  // e4m3 weights: [E, H]
  const int* choice_id;  // [T, max_choices]
  const float* choice_w;
  const int* choice_n;   // [T]
  float* act;            // [samples, max_choices, I]
  float* y;              // [T, H]: rows t % sample_stride == 0 written
  int tokens, experts, hidden, inter;
  int max_choices;
  int sample_stride;
};

#if defined(__CUDACC__)
}  // namespace ktune

#include "common/types.cuh"
#include "moe/reference.cuh"

namespace ktune {

/// T: x's type; W: the weights' (T, or e4m3 with w1_scale).
template <typename T, typename W = T>
__global__ void __launch_bounds__(kMoeRefMlpThreads) moe_reference_act_kernel(const MoeRefMlpArgs a) {
  const int sample = static_cast<int>(blockIdx.x);
  const int t = sample * a.sample_stride;
  if (t >= a.tokens) return;
  const int H = a.hidden, I = a.inter;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const T* x = static_cast<const T*>(a.x) + static_cast<long long>(t) * H;
  const int n = a.choice_n[t];
  // FP8 weights: x quantised per row and act rounded to bf16, as the kernels do.
  constexpr bool FP8 = sizeof(W) == 1;
  moe_ref::RowQuant qx;
  if (FP8) qx.set(moe_ref::warp_amax(x, H, lane));
  for (int s = 0; s < n; ++s) {
    const int e = a.choice_id[static_cast<long long>(t) * a.max_choices + s];
    if (e < 0 || e >= a.experts) continue;
    const W* w1 = static_cast<const W*>(a.w1) + static_cast<long long>(e) * 2 * I * H;
    float* act = a.act + (static_cast<long long>(sample) * a.max_choices + s) * I;
    for (int c = warp; c < kMoeRefCols; c += kMoeRefMlpThreads / 32) {
      const int j = static_cast<int>(blockIdx.y) * kMoeRefCols + c;
      if (j >= I) break;
      const long long rg = static_cast<long long>(e) * 2 * I + j;  // gate row
      const float v = moe_ref::gated_act(x, w1 + static_cast<long long>(j) * H,
                                         w1 + static_cast<long long>(I + j) * H, H, lane,
                                         moe_ref::row_scale(a.w1_scale, rg),
                                         moe_ref::row_scale(a.w1_scale, rg + I), qx);
      if (lane == 0) act[j] = moe_ref::stored_act(v, FP8);
    }
  }
}

/// W: the weights' type (e4m3 with w2_scale); EMAX: moe_emax(E), 256 or 512.
template <typename W, int EMAX = kMoeEmax>
__global__ void __launch_bounds__(kMoeRefMlpThreads) moe_reference_out_kernel(const MoeRefMlpArgs a) {
  const int sample = static_cast<int>(blockIdx.x);
  const int t = sample * a.sample_stride;
  if (t >= a.tokens) return;
  const int H = a.hidden, I = a.inter;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int n = a.choice_n[t];
  // FP8 weights: act is quantised per row before gemm2, as the kernels do; each row's largest
  // value, found once per block (max_choices <= EMAX: k, or E for expert_choice).
  constexpr bool FP8 = sizeof(W) == 1;
  static_assert(EMAX == kMoeEmax || EMAX == kMoeMaxExperts, "EMAX must be 256 or 512");
  __shared__ float s_amax[FP8 ? EMAX : 1];
  if constexpr (FP8) {
    for (int s = warp; s < n; s += kMoeRefMlpThreads / 32) {
      const float m = moe_ref::warp_amax(
          a.act + (static_cast<long long>(sample) * a.max_choices + s) * I, I, lane);
      if (lane == 0) s_amax[s] = m;
    }
    __syncthreads();
  }
  for (int c0 = warp; c0 < kMoeRefCols; c0 += kMoeRefMlpThreads / 32) {
    const int c = static_cast<int>(blockIdx.y) * kMoeRefCols + c0;
    if (c >= H) break;
    float y = 0.0f;
    for (int s = 0; s < n; ++s) {
      const int e = a.choice_id[static_cast<long long>(t) * a.max_choices + s];
      if (e < 0 || e >= a.experts) continue;
      const float w = a.choice_w[static_cast<long long>(t) * a.max_choices + s];
      const W* r2 = static_cast<const W*>(a.w2) + (static_cast<long long>(e) * H + c) * I;
      const float* act = a.act + (static_cast<long long>(sample) * a.max_choices + s) * I;
      moe_ref::RowQuant qa;
      if constexpr (FP8) qa.set(s_amax[s]);
      float acc = 0.0f;
      for (int j = lane; j < I; j += 32) acc += qa(act[j]) * to_float(r2[j]);
      y += w * moe_ref::warp_sum(acc) *
           moe_ref::row_scale(a.w2_scale, static_cast<long long>(e) * H + c);
    }
    if (lane == 0) a.y[static_cast<long long>(t) * H + c] = y;
  }
}

#endif  // __CUDACC__

}  // namespace ktune
