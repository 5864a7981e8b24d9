// The split-KV decode attention op ("flash_decode", kernels in templates/decode/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims b, hq, hkv, nq (1..256), nk, d, causal, as flash_attention's, then page (below)
/// and flash_attention's mask variants window (0: none), softcap and alibi (no/yes), with its
/// semantics; tensors q, k, v, o, the optional fp32 lse and the fp32 alibi_slopes [hq] (required
/// with alibi=yes), as flash_attention's six; scalars scale (<= 0: 1/sqrt(d)) and softcap (the
/// cap, > 0, read with softcap=yes); RunArgs::layout holds the same 12 element strides as
/// flash_attention's (batch, head, seq of q, k, v, o) or is null for contiguous [B, H, S, D].
/// With splits > 1 it needs a workspace of workspace_bytes() (16-byte aligned) for the partial
/// results; run() neither allocates nor synchronises. The reference stays valid for the life of
/// the program.
///
/// Paged KV (problem dim page = 16, 32, 64, 128 or 256; 0, the default, is contiguous): tensors
/// q, k_cache, v_cache, o, lse (optional), block_table, seq_lens, alibi_slopes, in that order.
/// The pools are contiguous [num_pages, page, hkv, d] (vLLM's NHD layout; the op sizes them at
/// num_pages = b * ceil(nk / page), any pool of at least the ids used works); block_table is
/// int32 [b, ceil(nk / page)], sequence s's key j being row j % page of page
/// block_table[s][j / page]; seq_lens is int32 [b], each in 1..nk (nk is the longest), and causal
/// and window alignment (and ALiBi's distance) is bottom-right against each sequence's own
/// length. RunArgs::layout still gives the q and o strides; its k and v entries are ignored.
const Op& flash_decode_op();

}  // namespace ktune
