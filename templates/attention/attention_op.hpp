// The flash attention forward op ("flash_attention", kernels in templates/attention/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "templates/op.hpp"

namespace ktune {

/// Problem dims b, hq, hkv, nq, nk, d, causal, then the mask variants window (0: none), softcap
/// and alibi (no/yes), then varlen (no/yes); tensors q, k, v, o, the optional fp32 lse and the
/// fp32 alibi_slopes [hq] (required with alibi=yes), then with varlen=yes the int32
/// cu_seqlens_q and cu_seqlens_k [b + 1]; scalars scale (<= 0: 1/sqrt(d)) and softcap (the cap,
/// > 0, read with softcap=yes). RunArgs::layout holds 12 element strides (batch, head, seq of q,
/// k, v, o) or is null for contiguous [B, H, S, D]. With varlen=yes (FlashAttention's varlen
/// API) q, k, v, o are packed [total, H, D] (null layout: contiguous), the layout's batch strides
/// are ignored, nq and nk are the longest lengths, and lse is [hq, total_q]; the tuner's
/// cu_seqlens are fixed (Fill::seq_offsets) and size the tensors exactly. A problem of the first
/// 7 dims only (flash_decode delegates its tensors and reference here) has the variants and
/// varlen off, and then only the first 5 tensors and the first scalar are read. The reference
/// stays valid for the life of the program.
const Op& flash_attention_op();

/// Why a layout's output strides (RunArgs::layout's o batch and o head, elements 9 and 10) would
/// let two (sequence, head) pairs write the same memory: a zero batch stride over several
/// sequences (not varlen, whose rows are packed and whose batch strides are unused) or a zero head
/// stride over several heads; nullopt otherwise. `op` names the op in the message.
std::optional<std::string> output_stride_reason(const char* op, const std::int64_t* st,
                                                std::int64_t b, std::int64_t hq, bool varlen);

}  // namespace ktune
