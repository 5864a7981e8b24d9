// The split-KV decode attention op ("flash_decode", kernels in templates/decode/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims b, hq, hkv, nq (1..256), nk, d, causal, as flash_attention's; tensors q, k, v, o
/// and the optional fp32 lse; scalar scale (<= 0: 1/sqrt(d)); RunArgs::layout holds the same 12
/// element strides as flash_attention's (batch, head, seq of q, k, v, o) or is null for
/// contiguous [B, H, S, D]. With splits > 1 it needs a workspace of workspace_bytes() (16-byte
/// aligned) for the partial results; run() neither allocates nor synchronises. The reference
/// stays valid for the life of the program.
const Op& flash_decode_op();

}  // namespace ktune
