// The flash attention forward op ("flash_attention", kernels in templates/attention/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims b, hq, hkv, nq, nk, d, causal, then the mask variants window (0: none), softcap
/// and alibi (no/yes); tensors q, k, v, o, the optional fp32 lse and the fp32 alibi_slopes [hq]
/// (required with alibi=yes); scalars scale (<= 0: 1/sqrt(d)) and softcap (the cap, > 0, read
/// with softcap=yes). RunArgs::layout holds 12 element strides (batch, head, seq of q, k, v, o)
/// or is null for contiguous [B, H, S, D]. A problem of the first 7 dims only (flash_decode
/// delegates its tensors and reference here) has the variants off, and then only the first 5
/// tensors and the first scalar are read. The reference stays valid for the life of the program.
const Op& flash_attention_op();

}  // namespace ktune
