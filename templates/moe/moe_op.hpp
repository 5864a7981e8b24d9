// The Mixture-of-Experts layer op ("moe", kernels in templates/moe/).
#pragma once

#include "templates/op.hpp"

namespace ktune {

/// Problem dims e, k, h, i (exact), t (tokens, by distance), routing (softmax, softmax_renorm,
/// sigmoid_group, precomputed, expert_choice), n_group, topk_group (exact). Tensors, in run()'s
/// order: x, logits, correction_bias, topk_ids, topk_weights (inputs when routing=precomputed,
/// else optional outputs; [t, k], or [e, c] with c = ceil(t * k / e) for expert_choice: the
/// tokens each expert chose), w1, w2, y, expert_counts, aux_loss (size 0, never written, with
/// precomputed and expert_choice); scalar routed_scaling. Needs a workspace of
/// workspace_bytes() (256-byte aligned). The reference stays valid for the life of the program.
const Op& moe_op();

}  // namespace ktune
