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
///
/// Variable-length batches (dim varlen = yes, after the variants; contiguous K/V only: with
/// page > 0 the problem is invalid): flash_attention's varlen, tensors q, k, v, o, lse,
/// alibi_slopes, cu_seqlens_q, cu_seqlens_k in its order. q and o are packed [total_q, hq, d], k
/// and v [total_k, hkv, d] (null layout: contiguous; else the layout's head and row strides, its
/// batch strides ignored), cu_seqlens int32 [b + 1]; sequence s has cu_seqlens_q[s + 1] -
/// cu_seqlens_q[s] queries in 0..nq and cu_seqlens_k[s + 1] - cu_seqlens_k[s] keys in 0..nk (nq
/// and nk the longest: they size the grid and the workspace, so nothing is read back on the
/// host); each rule above uses the sequence's own lengths; lse is [hq, total_q]. A sequence
/// without keys gets o = 0 and lse = -inf, one without queries nothing.
const Op& flash_decode_op();

}  // namespace ktune
