// Internal to the decode op's built-in defaults: the types and helpers that decode_defaults.cpp
// (the table and the rules of split counts, tiles per regime) and merged_defaults.cpp (the rules
// that merge splits in a cluster) share. Not an interface: nothing outside templates/decode/
// includes it.
#pragma once

#include <cstdint>
#include <optional>

#include "templates/decode/decode_problem.hpp"

namespace ktune::decode::rules {

/// Built-in configuration per architecture and head dimension: first row with cc_major <= the
/// device's and the problem's d. Should not affect results, only speed. Not yet measured: chosen
/// so that 2 CTAs per SM keep 2-4 K/V tiles (64-130 KiB) in flight per SM, well above the ~25 KiB
/// per SM that H100's bandwidth-latency product asks (benchmarks/decode/NOTES.md).
struct DecodeDefaults {
  int cc_major;     // first compute capability (major) this row applies to
  int d;            // head dimension
  int block_n;      // keys per K/V tile
  int warps;        // warps per CTA; each takes block_n / warps keys of every tile
  int stages;       // depth of the cp.async K/V ring
  int ctas_per_sm;  // CTAs per SM the split count aims to fill (capped by shared memory)
  int split_keys;   // fewest keys a split should get (its prologue and the combine amortised)
};

/// Tiles that replace a row's: head dim (0: any), keys per tile, warps, stages.
struct FewPairsTiles {
  int d, block_n, warps, stages;
};

constexpr std::int64_t kWideTilesMinKeys = 1024;  // keys in reach: a window of 128 is not a stream

/// CTAs of configuration `c` on problem `s`: pairs x row tiles x splits.
std::int64_t ctas(const Config& c, const Shape& s);

/// Whether d=96's tiles split their K/V rows (kv_split=1) for data of head dim `data_d`
/// (decode_defaults.cpp's with_kv_split).
bool takes_kv_split(const Shape& s, std::int64_t data_d, const DeviceInfo& device);

// merged_defaults.cpp: the rules whose configurations merge splits in a cluster.
/// CTAs per SM at most (as shared memory allows) that the split count of merged_tiles' tiles
/// aims at (params_for); merged_defaults.cpp says where it was read.
constexpr int kMergedCtasPerSm = 7;
bool merged_tiles_apply(const Shape& s, const DeviceInfo& device);
const FewPairsTiles* merged_tiles(const Shape& s, const DeviceInfo& device);
Params merged_params(Config c, const Shape& s, const DeviceInfo& device);
std::optional<Params> row_merged(const DecodeDefaults& r, const Shape& s, const DeviceInfo& device,
                                 int block_m);
std::optional<Params> short_spans(const Shape& s, std::int64_t data_d, const DeviceInfo& device,
                                  int block_m);
std::optional<Params> medium_spans(const DecodeDefaults& r, const Shape& s, std::int64_t data_d,
                                   const DeviceInfo& device, int block_m);
Config two_merged(Config c, const DecodeDefaults& r, const Shape& s, const DeviceInfo& device);
std::optional<Params> few_row_tiles_merged(const Shape& s, const DeviceInfo& device);
std::optional<Params> d256_merged(const Shape& s, const DeviceInfo& device);

}  // namespace ktune::decode::rules
