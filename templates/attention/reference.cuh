// Reference flash attention forward for the tuner's verification: plain fp32 on the CUDA cores,
// no tensor cores, no shared memory, no tiling, so that it shares no idea that could be wrong
// with flash_attention_fwd. Writes O and the log-sum-exp as float.
#pragma once

#include "attention/args.h"
#include "common/types.cuh"

namespace ktune {

/// One warp per query row; lane l holds elements l, l + 32, ... of the row (D a multiple of 8:
/// past the row's end, the last lanes hold zeros). Keys are streamed in
/// order with an online softmax (expf, running max and sum), so any Nk runs in O(D) registers.
/// Same arguments, masks and score variants as flash_attention_fwd (WINDOW, SOFTCAP, ALIBI,
/// VARLEN, PAGE: key j of a paged sequence read at its page's row, looked up per key), computed
/// directly with tanhf and expf, except that `args.o` is float (with the o
/// strides in float elements). Launch: grid (ceil(Nq / warps per block), B * Hq), any multiple of
/// 32 threads, no shared memory.
template <typename T, int D, bool CAUSAL, bool WINDOW = false, bool SOFTCAP = false,
          bool ALIBI = false, bool VARLEN = false, int PAGE = 0>
__global__ void flash_attention_reference(const __grid_constant__ FlashAttentionArgs args) {
  static_assert(D % 8 == 0 && D <= 256, "D must be a multiple of 8, at most 256");
  constexpr int PER_LANE = (D + 31) / 32;
  // Element i of this lane is in the row (always, when D is a multiple of 32).
  const auto in_row = [](int lane_, int i) { return D % 32 == 0 || lane_ + 32 * i < D; };
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int b = blockIdx.y / args.heads_q;
  const int h = blockIdx.y % args.heads_q;
  const int hk = h / (args.heads_q / args.heads_kv);
  // VARLEN: sequence b's lengths, and its first rows in the packed arrays (batch strides unused).
  long long seq_q = args.seq_q, seq_k = args.seq_k, q_first = 0, k_first = 0;
  if (VARLEN) {
    q_first = args.cu_seqlens_q[b];
    seq_q = args.cu_seqlens_q[b + 1] - q_first;
    if (PAGE == 0) {
      k_first = args.cu_seqlens_k[b];
      seq_k = args.cu_seqlens_k[b + 1] - k_first;
    }
  }
  if (PAGE > 0) seq_k = paged_kv_seq_len(args.seq_lens[b], args.seq_k);
  if (row >= seq_q) return;  // whole warps leave; nothing below synchronises the block

  const T* q = static_cast<const T*>(args.q) +
               (VARLEN ? q_first * args.q_row_stride : b * args.q_batch_stride) +
               h * args.q_head_stride + row * args.q_row_stride;
  const T* k = static_cast<const T*>(args.k) +
               (PAGE > 0 ? 0 : VARLEN ? k_first * args.k_row_stride : b * args.k_batch_stride) +
               hk * args.k_head_stride;
  const T* v = static_cast<const T*>(args.v) +
               (PAGE > 0 ? 0 : VARLEN ? k_first * args.v_row_stride : b * args.v_batch_stride) +
               hk * args.v_head_stride;
  // Key j's row: j, or paged its page's row in the pools.
  const int* table = PAGE > 0 ? args.block_table + static_cast<long long>(b) * args.pages_per_seq
                              : nullptr;
  const auto key_row = [&](long long j) {
    return PAGE > 0 ? static_cast<long long>(table[j / (PAGE > 0 ? PAGE : 1)]) * PAGE +
                          j % (PAGE > 0 ? PAGE : 1)
                    : j;
  };
  float qv[PER_LANE], acc[PER_LANE];
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    qv[i] = in_row(lane, i) ? to_float(q[lane + 32 * i]) : 0.f;
    acc[i] = 0.f;
  }

  // Bottom-right alignment: row i is at position i' = i + Nk - Nq among the keys. Causal: it
  // sees keys j <= i'; a window: keys j > i' - window.
  const long long aligned = row + seq_k - seq_q;
  long long keys = seq_k, first = 0;
  if (CAUSAL) keys = aligned < 0 ? 0 : (aligned + 1 < keys ? aligned + 1 : keys);
  if (WINDOW && aligned - args.window + 1 > 0) first = aligned - args.window + 1;
  const float slope = ALIBI ? args.alibi_slopes[h] : 0.f;
  const float neg_inf = -__int_as_float(0x7f800000);
  float max = neg_inf, sum = 0.f;
  for (long long j = first; j < keys; ++j) {
    const T* kr = k + key_row(j) * args.k_row_stride;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
      if (in_row(lane, i)) s += qv[i] * to_float(kr[lane + 32 * i]);
    // Butterfly sum: every lane ends with the same bits (each step adds the same pair).
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    s *= args.scale;
    if (SOFTCAP) s = args.softcap * tanhf(s / args.softcap);
    if (ALIBI) s -= slope * static_cast<float>(j > aligned ? j - aligned : aligned - j);
    if (s > max) {
      const float c = expf(max - s);  // 0 for the first key (max = -inf)
      sum *= c;
#pragma unroll
      for (int i = 0; i < PER_LANE; ++i) acc[i] *= c;
      max = s;
    }
    const float p = expf(s - max);
    sum += p;
    const T* vr = v + key_row(j) * args.v_row_stride;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
      if (in_row(lane, i)) acc[i] += p * to_float(vr[lane + 32 * i]);
  }

  float* o = static_cast<float*>(args.o) +
             (VARLEN ? q_first * args.o_row_stride : b * args.o_batch_stride) +
             h * args.o_head_stride + row * args.o_row_stride;
  // e4m3 inputs: V's dequantisation scale (Q's and K's are in args.scale).
  const float o_scale = sizeof(T) == 1 ? args.o_scale : 1.f;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i)
    if (in_row(lane, i)) o[lane + 32 * i] = sum > 0.f ? o_scale * acc[i] / sum : 0.f;
  if (args.lse != nullptr && lane == 0) {
    // [B, Hq, Nq], or with VARLEN [Hq, total_q].
    const long long i = VARLEN ? h * static_cast<long long>(args.cu_seqlens_q[args.batch]) +
                                     q_first + row
                               : (static_cast<long long>(b) * args.heads_q + h) * seq_q + row;
    args.lse[i] = sum > 0.f ? max + logf(sum) : neg_inf;
  }
}

}  // namespace ktune
