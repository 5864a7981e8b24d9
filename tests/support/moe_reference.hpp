// CPU references of the MoE routing and alignment kernels and of the whole layer, in double
// precision: what moe/route.cuh, moe/expert_choice.cuh and moe/align.cuh must produce, written
// as plainly as possible (sort and count, no cleverness). Plain std::vector, no Eigen: routing
// has no matrix algebra.
#pragma once

#include <vector>

#include "templates/moe/args.h"

namespace ktune::test {

/// The routing problem (MoeRouteArgs without the pointers).
struct MoeRouteProblem {
  int tokens = 1;
  int experts = 8;
  int k = 2;
  int routing = moe_softmax;  // MoeRouting, not moe_precomputed
  int n_group = 1;
  int topk_group = 1;
  double routed_scaling = 1.0;
};

/// Routing of every token, [T, k] best first, plus what a checker needs to judge near-ties.
struct MoeRouteResult {
  std::vector<int> ids;         // [T, k]
  std::vector<double> weights;  // [T, k]
  std::vector<double> select;   // [T, E] selection score (logit, or sigmoid + bias); -inf for
                                // experts outside the token's chosen groups
  std::vector<double> prob;     // [T, E] the aux loss's probability (softmax, or sigmoid / sum)
};

/// Routes logits [T, E]; `bias` [E] is the correction bias (empty: zeros).
MoeRouteResult moe_route_ref(const std::vector<float>& logits, const std::vector<float>& bias,
                             const MoeRouteProblem& p);

/// The k weights token t would get if it had chosen `ids` (k experts), in that order: for
/// judging a choice that differs from the reference's only by a near-tie.
std::vector<double> moe_route_weights_for(const std::vector<float>& logits, const MoeRouteProblem& p,
                                          int t, const std::vector<int>& ids);

/// moe_sigmoid_group: the id lists token t gets when group scores within `eps` of the
/// topk_group-th best are ranked either way (the first is moe_route_ref's). fp32 group scores
/// cannot order groups closer than a few 1e-7, so a kernel may rightly pick any of these.
std::vector<std::vector<int>> moe_route_group_alternatives(const std::vector<float>& logits,
                                                           const std::vector<float>& bias,
                                                           const MoeRouteProblem& p, int t,
                                                           double eps);

/// E * sum_e f_e * P_e: f_e the share of the T*k choices that went to e, P_e the mean of prob.
double moe_aux_loss_ref(const MoeRouteResult& r, const MoeRouteProblem& p);

/// Expert-choice routing (routing=expert_choice) of logits [T, E]: each expert's C =
/// moe_expert_capacity(T, k, E) tokens of highest softmax score, ties to the lower token id.
struct MoeExpertChoiceResult {
  int capacity = 0;             // C
  std::vector<int> tokens;      // [E, C] each expert's chosen tokens in increasing id
  std::vector<double> weights;  // [E, C] their scores
  std::vector<double> scores;   // [T, E] softmax over experts of each token
};

MoeExpertChoiceResult moe_expert_choice_ref(const std::vector<float>& logits, int tokens,
                                            int experts, int k);

/// One expert's term of a token's output: y[token] += weight * MLP_expert(x[token]).
struct MoeUse {
  int token;
  int expert;
  double weight;
};

/// The uses of top-k routing: ids and weights [T, k]; ids outside 0..E-1 are dropped.
std::vector<MoeUse> moe_topk_uses(const std::vector<int>& ids, const std::vector<double>& weights,
                                  int k, int experts);

/// The uses of expert-choice routing: per token, the experts that chose it, in expert order.
std::vector<MoeUse> moe_expert_choice_uses(const std::vector<int>& tokens,
                                           const std::vector<double>& weights, int experts,
                                           int capacity);

/// The layer in double: y [T, H] = sum over uses of weight * (silu(x W1g^T) * (x W1u^T)) W2^T,
/// x [T, H], w1 [E, 2I, H], w2 [E, H, I]; 0 for a token with no use.
std::vector<double> moe_layer_ref(const std::vector<double>& x, const std::vector<double>& w1,
                                  const std::vector<double>& w2, int tokens, int hidden, int inter,
                                  const std::vector<MoeUse>& uses);

/// What the align kernels write, sized to moe_max_padded / moe_max_blocks.
struct MoeAlignResult {
  std::vector<int> sorted_pairs;
  std::vector<int> block_expert;
  std::vector<int> expert_counts;
  int padded_rows = 0;
};

/// Pairs grouped by expert in increasing pair index, each run padded to block_m with the value
/// ids.size(); ids outside 0..E-1 dropped.
MoeAlignResult moe_align_ref(const std::vector<int>& ids, int experts, int block_m);

}  // namespace ktune::test
