// The decode op's built-in configurations: per architecture and head dimension, and the rules
// that adapt them to a problem's grid, keys and device (decode_defaults.cpp), each read from
// exhaustive sweeps of held-out problems (the results files its comments name).
#pragma once

#include <functional>

#include "templates/decode/decode_problem.hpp"

namespace ktune::decode {

/// The table row's tiles; block_m the smallest tile holding the packed rows (at most what
/// the accumulator budget allows), but 16 for 17..64 packed rows; splits the largest listed
/// count whose CTAs still fit in one wave of sm_count * ctas_per_sm (kMultiRowCtasPerSm above
/// 16 packed rows; fewer when shared memory allows fewer CTAs per SM) with at least
/// split_keys keys each and no empty split; paged or varlen, at least enough splits for
/// pieces of kPagedSplitKeys keys of nk (the longest). A grid still under half a wave halves
/// block_m (to 16 at least) and split_keys while that adds CTAs. The count is picked here,
/// from the device, rather than resolved from an `auto` value in run(): run() and
/// workspace_bytes() do not see the device, and an explicit count makes every database row
/// name the configuration it timed.
/// `s` is the kernels' shape (its d the tiles' head dim) and `data_d` the data's head dim (at
/// most s.d; a head dim between the tiles runs in the next tile's kernels and streams fewer
/// bytes per key). `valid(params)` is whether the op can run a point there (its
/// invalid_reason() is empty): a row's choice that cannot gives way to the smallest tiles.
Params default_params(const Shape& s, std::int64_t data_d, const DeviceInfo& device,
                      const std::function<bool(const Params&)>& valid);

}  // namespace ktune::decode
