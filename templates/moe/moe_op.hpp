// The Mixture-of-Experts layer op ("moe", kernels in templates/moe/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims e, k, h, i (exact), t (tokens, by distance), routing (softmax, softmax_renorm,
/// sigmoid_group, precomputed), n_group, topk_group (exact). Tensors, in run()'s order: x, logits,
/// correction_bias, topk_ids, topk_weights (inputs when routing=precomputed, else optional
/// outputs), w1, w2, y, expert_counts, aux_loss; scalar routed_scaling. Needs a workspace of
/// workspace_bytes() (256-byte aligned). The reference stays valid for the life of the program.
/// Not yet in all_ops(): the tuner cannot fill its int32 and scaled inputs nor sweep token
/// buckets, and the runtime has no entry point for it; it is registered when those land.
const Op& moe_op();

}  // namespace ktune
