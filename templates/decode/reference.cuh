// Reference split-free attention over a paged KV cache, for the tuner's verification of
// flash_decode's paged problems: plain fp32 on the CUDA cores, one key at a time, each key's row
// found through the block table directly (page = block_table[b][j / page], row j % page), so that
// it shares neither the tiles, the page slots nor the splits of flash_decode_split. Contiguous
// problems use flash_attention's reference instead.
#pragma once

#include "common/types.cuh"
#include "decode/args.h"

namespace ktune {

/// One warp per query row; lane l holds elements l, l + 32, ... of the row, keys streamed with an
/// online softmax (expf). Reads q, the pools, block_table, seq_lens (each sequence's length,
/// clamped to [0, Nk]) and the q and o strides of `args`; `args.o` is float (o strides in float
/// elements) and `args.lse` float (may be null). Bottom-right alignment against the sequence's own
/// length: query row i is at position i' = i + len - Nq among its keys; causal keeps keys j <= i',
/// WINDOW keys j > i' - args.window. Scores are scale * q k, then with SOFTCAP
/// args.softcap * tanh(score / args.softcap), then with ALIBI minus args.alibi_slopes[h] *
/// |j - i'| (tanhf and expf, as flash_attention's reference). A row that sees no key gets o = 0
/// and lse = -inf. Launch: grid (ceil(Nq / warps per block), B * Hq), any multiple of 32 threads,
/// no shared memory.
template <typename T, int D, bool CAUSAL, bool WINDOW = false, bool SOFTCAP = false,
          bool ALIBI = false>
__global__ void flash_decode_paged_reference(const __grid_constant__ FlashDecodeArgs args) {
  static_assert(D % 32 == 0, "D must be a multiple of 32");
  constexpr int PER_LANE = D / 32;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= args.seq_q) return;  // whole warps leave; nothing below synchronises the block
  const int b = blockIdx.y / args.heads_q;
  const int h = blockIdx.y % args.heads_q;
  const int hk = h / (args.heads_q / args.heads_kv);
  const long long len = flash_decode_seq_len(args.seq_lens[b], args.seq_k);
  const int* table = args.block_table + static_cast<long long>(b) * args.pages_per_seq;
  const long long pool_row = static_cast<long long>(args.heads_kv) * D;  // NHD pools

  const T* q = static_cast<const T*>(args.q) + b * args.q_batch_stride + h * args.q_head_stride +
               row * args.q_row_stride;
  float qv[PER_LANE], acc[PER_LANE];
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    qv[i] = to_float(q[lane + 32 * i]);
    acc[i] = 0.f;
  }

  const long long aligned = static_cast<long long>(row) + len - args.seq_q;
  long long keys = len, first = 0;
  if (CAUSAL) keys = aligned < 0 ? 0 : (aligned + 1 < keys ? aligned + 1 : keys);
  if (WINDOW && aligned - args.window + 1 > 0) first = aligned - args.window + 1;
  const float slope = ALIBI ? args.alibi_slopes[h] : 0.f;
  const float neg_inf = -__int_as_float(0x7f800000);
  float max = neg_inf, sum = 0.f;
  for (long long j = first; j < keys; ++j) {
    const long long at =
        (static_cast<long long>(table[j / args.page]) * args.page + j % args.page) * pool_row +
        static_cast<long long>(hk) * D;
    const T* kr = static_cast<const T*>(args.k) + at;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) s += qv[i] * to_float(kr[lane + 32 * i]);
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
    const T* vr = static_cast<const T*>(args.v) + at;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) acc[i] += p * to_float(vr[lane + 32 * i]);
  }

  float* o = static_cast<float*>(args.o) + b * args.o_batch_stride + h * args.o_head_stride +
             row * args.o_row_stride;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) o[lane + 32 * i] = sum > 0.f ? acc[i] / sum : 0.f;
  if (args.lse != nullptr && lane == 0)
    args.lse[(static_cast<long long>(b) * args.heads_q + h) * args.seq_q + row] =
        sum > 0.f ? max + logf(sum) : neg_inf;
}

}  // namespace ktune
