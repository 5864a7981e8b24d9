// The flash attention problem and tunables as the op's host code reads them, shared by the op
// (attention_op.cpp) and its built-in defaults (attention_defaults.cpp). Internal to templates/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "templates/attention/args.h"
#include "templates/op.hpp"

namespace ktune::attention {

// Problem dimensions and tunables, in declared order.
enum Dim : std::size_t {
  kB, kHq, kHkv, kNq, kNk, kD, kCausal, kWindow, kSoftcap, kAlibi, kVarlen, kPage
};
enum Param : std::size_t {
  kBlockM, kBlockN, kWarps, kStages, kQRegs, kSmemPad, kImpl, kPingpong, kPersistent, kRegSplit,
  kKvApart
};

struct Shape {
  std::int64_t b, hq, hkv, nq, nk, d;
  bool causal;
  std::int64_t window;  // 0: none
  bool softcap, alibi;
  bool varlen;          // packed sequences of at most nq queries and nk keys, cu_seqlens
  std::int64_t page;    // 0: contiguous K/V; else keys per page of paged pools (args.h)
  bool paged() const { return page > 0; }
  /// The kernels' names spell out their trailing VARLEN and PAGE arguments.
  bool varlen_or_paged() const { return varlen || paged(); }
  std::int64_t pages_per_seq() const {
    return paged() ? paged_kv_pages(nk, static_cast<int>(page)) : 0;
  }
  std::int64_t pool_pages() const { return b * pages_per_seq(); }  // each sequence's own pages
};

/// The head dims the kernels' tiles are built for; a problem's d (a multiple of 8, at most 256)
/// runs in the smallest that holds it (d=80 in d=96's tiles), its columns past d zeros.
inline constexpr std::int64_t kTileHeadDims[] = {32, 64, 96, 128, 256};

/// The kernels' head dim for a problem's d: the smallest of kTileHeadDims at least d (flash_decode
/// reads it too).
inline std::int64_t tile_head_dim(std::int64_t d) {
  for (std::int64_t t : kTileHeadDims)
    if (d <= t) return t;
  return d;
}

/// A reason about the kernels' tiles given for a problem of head dim d: for a d between the tiles,
/// it names the tiles d runs in (both attention ops' invalid_reason).
inline std::optional<std::string> naming_tiles(std::optional<std::string> why, std::int64_t d) {
  const std::int64_t tile = tile_head_dim(d);
  if (why && d != tile)
    *why += " (d=" + std::to_string(d) + " runs in d=" + std::to_string(tile) + "'s tiles)";
  return why;
}

/// A problem of 7 values (flash_decode's, which shares the first 7 dims and delegates its
/// tensors and reference here) has every mask variant, varlen and paging off.
inline Shape shape_of(const Problem& p) {
  const std::vector<std::int64_t>& v = p.values;
  const auto at = [&](Dim i) { return i < v.size() ? v[i] : 0; };
  return {v[kB], v[kHq], v[kHkv], v[kNq], v[kNk], v[kD], v[kCausal] != 0,
          at(kWindow), at(kSoftcap) != 0, at(kAlibi) != 0, at(kVarlen) != 0, at(kPage)};
}

/// The shape the kernels see: d rounded up to tile_head_dim(d). Every choice about tiles
/// (validity, shared memory, defaults) reads this; the data's strides, sizes, flops and the
/// reference read shape_of()'s d.
inline Shape kernel_shape(const Problem& p) {
  Shape s = shape_of(p);
  s.d = tile_head_dim(s.d);
  return s;
}

}  // namespace ktune::attention
