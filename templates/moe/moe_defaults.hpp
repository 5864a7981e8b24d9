// The MoE layer op's built-in configurations: per architecture and regime (the mean rows an
// expert receives), and the rules that fit a table row to a problem's rows, columns, routing and
// device (moe_defaults.cpp), each read from sweeps named in its comments.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "templates/moe/moe_problem.hpp"

namespace ktune::moe {

/// The op's listed values that a table row is fitted to.
struct Lists {
  const std::vector<std::int64_t>& block_m;
  const std::vector<std::int64_t>& bn1;
  const std::vector<std::int64_t>& bn2;
  std::int64_t combine_vec;  // the one value searched where there is no combine kernel
};

/// Smallest listed block_m that holds the mean rows an expert receives; the largest when none
/// does.
int fitting_block_m(const Shape& s, const std::vector<std::int64_t>& block_ms);

/// Largest block_m worth measuring: the fitting one, or the next listed size where the mean
/// is above half the fitting block. Routing spreads the rows around their mean (about half of
/// the experts get more than it), so there a block one size up holds most experts' rows in one
/// block, and each expert's weights are streamed by one row block instead of two. Expert
/// choice gives every expert exactly its capacity: no spread.
int widest_block_m(const Shape& s, const std::vector<std::int64_t>& block_ms);

/// Smallest listed block_n covering n columns in one block, but at least 64: a 32-column
/// tile needs warps_m >= 2 and so block_m >= 32, which the block_m pruning may have ruled out
/// (64 columns work with every block_m at 4 warps). The largest when none covers n.
int fitting_block_n(const std::vector<std::int64_t>& block_ns, int n);

/// The built-in configuration of `s` in `t` on `device`: the wgmma row from kWgmmaMinRows
/// rows per expert on sm_90a, else the first table row for the device's architecture, the mean
/// rows and i, fitted to the problem; `runnable(params)` is whether the op can run a point
/// there (its invalid_reason() is empty): a row's choice that cannot gives way to the smallest
/// tiles.
Params default_params(const Shape& s, DType t, const DeviceInfo& device, const Lists& lists,
                      const std::function<bool(const Params&)>& runnable);

}  // namespace ktune::moe
