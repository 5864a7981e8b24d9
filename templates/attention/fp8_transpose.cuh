// V -> Vt for the e4m3 flash attention kernel (flash_attention_sm90.cuh): wgmma reads 8-bit
// operands K-major only, so O += P V needs V with its keys contiguous. One block moves 128 keys
// x D of one (batch, kv head): 16-byte loads of V's rows into shared memory, then each warp
// writes 4 rows of Vt, 32 bytes each (one sector), in the key order of fp8_key_of_column
// (args_sm90.h) within every 32-key slice. Keys past Nk are written as zeros, so the attention
// kernel's masked keys multiply zeros, never stale bytes.
//
// Shared rows are D + 4 bytes (a 4-byte pitch offset): a warp's 32 reads cover keys
// {0, 2, 4, 6, 16, 18, 20, 22} + k of 4 consecutive d, i.e. 8 rows at distinct banks.
#pragma once

#include "attention/args_sm90.h"

namespace ktune {

#if defined(__CUDACC__)

template <int D>
__global__ void __launch_bounds__(kFp8TransposeThreads)
    fp8_v_transpose(const __grid_constant__ Fp8VTransposeArgs a) {
  static_assert(D == 128 || D == 256, "e4m3 attention takes D = 128 or 256");
  constexpr int KEYS = kFp8TransposeKeys;
  constexpr int PITCH = D + 4;  // bytes
  constexpr int CHUNKS = D / 16;
  __shared__ __align__(16) unsigned char tile[KEYS * PITCH];
  const int tid = static_cast<int>(threadIdx.x);
  const int key0 = static_cast<int>(blockIdx.x) * KEYS;
  const int hk = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const unsigned char* v = static_cast<const unsigned char*>(a.v) + b * a.v_batch_stride +
                           hk * a.v_head_stride;
  for (int i = tid; i < KEYS * CHUNKS; i += kFp8TransposeThreads) {
    const int r = i / CHUNKS, ch = i % CHUNKS;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (key0 + r < a.seq_k)
      val = *reinterpret_cast<const uint4*>(v + (key0 + r) * a.v_row_stride + ch * 16);
    unsigned* dst = reinterpret_cast<unsigned*>(tile + r * PITCH + ch * 16);
    dst[0] = val.x;
    dst[1] = val.y;
    dst[2] = val.z;
    dst[3] = val.w;
  }
  __syncthreads();
  // Word w (4 columns) of row d: lane = dd * 8 + wl, item = (d / 4) * 4 + slice.
  unsigned char* vt = static_cast<unsigned char*>(a.vt) +
                      ((static_cast<long long>(b) * a.heads_kv + hk) * D) * a.nk_pad + key0;
  for (int i = tid; i < D * KEYS / 4; i += kFp8TransposeThreads) {
    const int lane = i & 31, item = i >> 5;
    const int d = (item >> 2) * 4 + (lane >> 3);
    const int w = (item & 3) * 8 + (lane & 7);  // word of the 128-key row
    const int c = 4 * w;                        // its first column: keys of columns c .. c + 3
    const int k = (c & ~31) + fp8_key_of_column(c & 31);  // k, k + 1, k + 8, k + 9
    const unsigned b0 = tile[k * PITCH + d], b1 = tile[(k + 1) * PITCH + d];
    const unsigned b2 = tile[(k + 8) * PITCH + d], b3 = tile[(k + 9) * PITCH + d];
    *reinterpret_cast<unsigned*>(vt + static_cast<long long>(d) * a.nk_pad + c) =
        b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
  }
}

#endif  // __CUDACC__

}  // namespace ktune
