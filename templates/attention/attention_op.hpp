// The flash attention forward op ("flash_attention", kernels in templates/attention/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims b, hq, hkv, nq, nk, d, causal (the order Runtime::flash_attention packs them);
/// tensors q, k, v, o and the optional fp32 lse; scalar scale (<= 0: 1/sqrt(d)); RunArgs::layout
/// holds 12 element strides (batch, head, seq of q, k, v, o) or is null for contiguous
/// [B, H, S, D]. The reference stays valid for the life of the program.
const Op& flash_attention_op();

}  // namespace ktune
