// CPU references of the MoE routing and alignment kernels, in double precision: what
// moe/route.cuh and moe/align.cuh must produce, written as plainly as possible (sort and count,
// no cleverness). Plain std::vector, no Eigen: routing has no matrix algebra.
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
