// The flash attention op's built-in configurations: per architecture and head dimension, and the
// rules that adapt them to a problem's grid, keys and mask (attention_defaults.cpp), each read
// from exhaustive sweeps of held-out problems (the results files its comments name).
#pragma once

#include <cstdint>
#include <functional>

#include "templates/attention/attention_problem.hpp"

namespace ktune::attention {

/// Keys up to which the defaults keep the mma.sync kernel on Hopper: with five or fewer 64-key
/// tiles per row block the wgmma kernel's pipeline never fills (its producer, barriers and the
/// first unoverlapped Q K^T), and the mma.sync kernel's smaller CTAs, two per SM, won: 1.22x at
/// b=5,hq=20,nq=nk=300,d=128 and 1.3x at b=16,hq=8,nq=nk=150,d=64 (H100 sweeps,
/// benchmarks/results/fallback-h100-2026-11-24-wgmma.md); from 420 keys on the wgmma kernel won
/// or tied.
constexpr std::int64_t kWgmmaMinKeys = 320;

/// The short-grid rule: 0 when the problem keeps the row's 128-row tiles, else the block_n of its
/// 64-row tiles (`row_block_n`, or 128 for long key sequences).
int short_grid_block_n(const Shape& s, const DeviceInfo& device, int row_block_n);

/// Whether the wgmma default takes one consumer warpgroup's 64-row tiles instead of `block_m`
/// rows (d=64, and under d256_single_consumer; see the definition).
bool wgmma_single_consumer(const Shape& s, const DeviceInfo& device, int block_m);

/// Whether the d=256 wgmma default takes one consumer's 64-row tiles (see the definition).
bool d256_single_consumer(const Shape& s, const DeviceInfo& device);

/// The built-in configuration of `s` in `t` on `device`; `valid(params)` is whether the op can
/// run a point there (its invalid_reason() is empty): a rule's choice that cannot gives way to
/// the next row.
Params default_params(const Shape& s, DType t, const DeviceInfo& device,
                      const std::function<bool(const Params&)>& valid);

}  // namespace ktune::attention
