// The decode defaults' cost model: gradient-boosted trees, fitted by
// benchmarks/decode/fit_cost_model.py on a GPU's recorded exhaustive sweeps, that predict how
// much slower than a problem's fastest point each configuration runs. Where it serves (that
// GPU's class, a problem inside the sweeps' domain), the default is the valid configuration of
// least predicted time, unless the rules' default (decode_defaults.cpp) is predicted within
// kCostModelMargin of it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "templates/decode/decode_problem.hpp"

namespace ktune::decode {

/// One node of the trees: an inner node sends x[feature] <= value left, else right; a leaf
/// (feature -1) adds value.
struct CostNode {
  int feature;
  double value;
  int left, right;
};

/// Bounds of the problems a model was fitted on (inclusive): it serves no problem outside them.
/// max_pair_keys bounds pairs x keys (the KV cache's length over all heads): the box of the
/// other bounds has corners (1000 pairs of 131072 keys) far past any sweep.
struct CostModelDomain {
  std::int64_t min_nk, max_nk, min_pairs, max_pairs, min_rows, max_rows, max_pair_keys;
};

/// Predicted log-time units by which the rules' default may trail the model's choice and stay.
inline constexpr double kCostModelMargin = 0.02;

/// The model's features (FEATURES of fit_cost_model.py, in its order) of kernel shape `s`
/// (d the tiles' head dim), data head dim `data_d` and configuration `c`, for `sm_count` SMs.
std::vector<double> cost_model_features(const Shape& s, std::int64_t data_d, const Config& c,
                                        int sm_count);

/// The H100 model's prediction for `x`: log(median / the fastest median), 0 at the fastest.
double cost_model_predict_h100(const std::vector<double>& x);

/// Whether the H100 model serves `s` on `device`: not switched off (KTUNE_DECODE_COST_MODEL=0),
/// the device of the H100 SXM's class (compute capability 9.0, 132 SMs, known memory bandwidth
/// under the H200's per SM), and `s` contiguous, fixed-length and without a mask variant,
/// inside the fitted domain (keys, (batch, KV head) pairs, packed rows, pairs x keys).
bool cost_model_serves(const Shape& s, const DeviceInfo& device);

/// The model's default for `s`, or nullopt where it does not serve: the point of least
/// predicted time over the decode space's values that `valid` accepts (empty splits and row
/// tiles taller than the rows need skipped before asking), `rules` itself where predicted
/// within kCostModelMargin of that point.
std::optional<Params> cost_model_params(const Shape& s, std::int64_t data_d,
                                        const DeviceInfo& device, const Params& rules,
                                        const std::function<bool(const Params&)>& valid);

/// The tunables' values the model's search walks, in Param order (kTunableValues, the op's
/// space's own; tests hold the two together).
const std::vector<std::vector<std::int64_t>>& cost_model_values();

}  // namespace ktune::decode
