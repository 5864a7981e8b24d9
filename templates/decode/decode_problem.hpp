// The split-KV decode problem and tunables as the op's host code reads them, shared by the op
// (decode_op.cpp) and its built-in defaults (decode_defaults.cpp). Internal to templates/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "templates/attention/args.h"
#include "templates/attention/attention_problem.hpp"
#include "templates/decode/args.h"
#include "templates/op.hpp"

namespace ktune::decode {

// Problem dimensions and tunables, in declared order.
enum Dim : std::size_t {
  kB, kHq, kHkv, kNq, kNk, kD, kCausal, kPage, kWindow, kSoftcap, kAlibi, kVarlen
};
enum Param : std::size_t { kSplits, kBlockM, kBlockN, kWarps, kStages, kMerge, kKvSplit, kTma };

constexpr std::int64_t kBlockMs[] = {16, 32, 64};
constexpr int kMaxAccumulators = 144;  // O + S fp32 registers per thread

/// The split counts the search may use; `splits` = 1 writes o directly (no combine, no
/// workspace).
inline const std::vector<std::int64_t> kSplitValues = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
/// Every tunable's values, in Param order: the op's space (decode_op.cpp) and the cost model's
/// search (cost_model.cpp) both walk these.
inline const std::vector<std::vector<std::int64_t>> kTunableValues = {
    kSplitValues, {16, 32, 64}, {32, 64, 128}, {2, 4, 8}, {2, 3, 4}, {0, 1}, {0, 1}, {0, 1}};

struct Shape {
  std::int64_t b, hq, hkv, nq, nk, d;
  bool causal;
  std::int64_t page;  // 0: contiguous K/V
  std::int64_t window;  // 0: none
  bool softcap, alibi;
  bool varlen;  // packed sequences of at most nq queries and nk keys, cu_seqlens
  bool variants() const { return window > 0 || softcap || alibi; }
  std::int64_t group() const { return hq / hkv; }
  std::int64_t rows() const { return flash_decode_rows(group(), nq); }  // per KV head
  bool paged() const { return page > 0; }
  std::int64_t pages_per_seq() const {
    return paged() ? paged_kv_pages(nk, static_cast<int>(page)) : 0;
  }
  std::int64_t pool_pages() const { return b * pages_per_seq(); }  // each sequence's own pages
};

// A problem of fewer values (one built before the page dim, the mask variants or varlen
// existed) has the missing dims at 0: contiguous, no variant, one length for all.
inline Shape shape_of(const Problem& p) {
  const std::vector<std::int64_t>& v = p.values;
  const auto at = [&](Dim i) { return i < v.size() ? v[i] : 0; };
  return {v[kB],     v[kHq],         v[kHkv],   v[kNq],         v[kNk],
          v[kD],     v[kCausal] != 0, at(kPage), at(kWindow),    at(kSoftcap) != 0,
          at(kAlibi) != 0, at(kVarlen) != 0};
}

// The kernels' head dim for a problem's d: flash_attention's (d=80 runs in d=96's tiles).
using attention::naming_tiles;
using attention::tile_head_dim;

/// The shape the kernels see: d rounded up to tile_head_dim(d). Every choice about tiles
/// (validity, shared memory, the workspace's partial rows, defaults) reads this; the data's
/// strides, sizes and the scale read shape_of()'s d.
inline Shape kernel_shape(const Problem& p) {
  Shape s = shape_of(p);
  s.d = tile_head_dim(s.d);
  return s;
}

/// Keys the splits divide: nk, or contiguous with a window those from the first tile any row
/// sees (flash_decode_window_base; the kernel starts its splits there).
inline std::int64_t split_span(const Shape& s, int block_n) {
  if (s.paged() || s.varlen) return s.nk;
  return s.nk - flash_decode_window_base(s.nq, s.nk, s.window, block_n) * block_n;
}

struct Config {
  int splits, block_m, block_n, warps, stages;
  int merge;  // 0: the combine kernel; 1: the splits merged in a thread block cluster
  int kv_split = 0;  // 1: d=96's K/V tiles in two parts (flash_decode_split96_offset)
  int tma = 0;       // 1: K/V tiles copied by tensor-map copies (sm_90)
};

inline Config config_of(const Params& p) {
  const auto at = [&](Param i) { return static_cast<int>(p.values[i]); };
  return {at(kSplits), at(kBlockM), at(kBlockN), at(kWarps), at(kStages), at(kMerge),
          at(kKvSplit), at(kTma)};
}

/// The op's parameters of a configuration, every tunable in declared order.
inline Params params_of(const Config& c) {
  return Params{{c.splits, c.block_m, c.block_n, c.warps, c.stages, c.merge, c.kv_split, c.tma}};
}

inline unsigned smem_bytes(const Config& c, const Shape& s) {
  return flash_decode_smem_bytes(static_cast<int>(s.d), c.block_m, c.block_n, c.warps, c.stages,
                                 static_cast<int>(s.page), s.varlen, c.kv_split != 0,
                                 c.tma != 0);
}

inline std::int64_t row_tiles(const Shape& s, int block_m) { return (s.rows() + block_m - 1) / block_m; }

}  // namespace ktune::decode
