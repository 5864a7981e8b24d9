// CPU reference of flash attention forward in double precision (Eigen): O and the row
// log-sum-exp, grouped-query heads, bottom-right causal masking, strided tensors, and the mask
// variants (sliding window, logit soft-capping, ALiBi); variable-length batches.
#pragma once

#include <cstdint>
#include <vector>

namespace ktune::test {

/// One attention tensor [B, H, S, D] in host memory, addressed through element strides (the last
/// dimension is contiguous), as the kernels address theirs.
struct AttentionTensor {
  std::vector<double> data;
  std::int64_t batch = 0, head = 0, seq = 0;  // element strides

  double at(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t i) const {
    return data[static_cast<std::size_t>(b * batch + h * head + s * seq + i)];
  }
};

/// Sets t's strides for [B, H, S, D] stored contiguously as [B, H, S, D] (bshd = false) or as
/// [B, S, H, D] (bshd = true), and sizes t.data to B * H * S * D (zeros).
void attention_strides(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool bshd,
                       AttentionTensor& t);

struct AttentionShape {
  std::int64_t b = 1, hq = 1, hkv = 1, nq = 1, nk = 1, d = 64;
  bool causal = false;
  double scale = 0.0;  // <= 0: 1/sqrt(d)
  std::int64_t window = 0;          // > 0: row i sees keys j > i + nk - nq - window
  double softcap = 0.0;             // > 0: scores become softcap * tanh(score / softcap)
  std::vector<double> alibi_slopes; // non-empty ([hq]): score -= slope[h] * |j - (i + nk - nq)|
};

struct AttentionResult {
  std::vector<double> o;    // [B, Hq, Nq, D], contiguous
  std::vector<double> lse;  // [B, Hq, Nq], natural log; -inf for a row that sees no key
  double o_at(const AttentionShape& s, std::int64_t b, std::int64_t h, std::int64_t r,
              std::int64_t i) const {
    return o[static_cast<std::size_t>(((b * s.hq + h) * s.nq + r) * s.d + i)];
  }
};

/// o = softmax(scores + mask) v per (batch, query head); query head h reads key/value head
/// h / (hq / hkv). scores = scale * q k^T, soft-capped, then the ALiBi bias. With i' = i + nk - nq,
/// causal keeps keys j <= i' and a window keys j > i' - window; a row that sees none gets o = 0
/// and lse = -inf.
AttentionResult attention_ref(const AttentionShape& s, const AttentionTensor& q,
                              const AttentionTensor& k, const AttentionTensor& v);

/// A variable-length batch (FlashAttention's varlen API): q, k, v hold packed rows, addressed
/// with b = 0 (their batch strides unused); sequence i has query rows [cu_q[i], cu_q[i + 1]) and
/// key rows [cu_k[i], cu_k[i + 1]), and each follows attention_ref with its own lengths (s.b,
/// s.nq, s.nk are ignored). Returns o packed [total_q, Hq, D] and lse [Hq, total_q].
AttentionResult attention_ref_varlen(const AttentionShape& s, const std::vector<std::int64_t>& cu_q,
                                     const std::vector<std::int64_t>& cu_k,
                                     const AttentionTensor& q, const AttentionTensor& k,
                                     const AttentionTensor& v);

}  // namespace ktune::test
