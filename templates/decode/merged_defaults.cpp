// The decode op's default rules that merge splits in a thread block cluster (merge=1; sm_90,
// contiguous fixed-length K/V): d=32's merged tiles, d=64's row tiles merged, short spans over
// few pairs at d=96's and d=128's tiles, and two splits of the row's tiles. Each is read from
// exhaustive sweeps of held-out problems (the results files its comments name); params_for
// (decode_defaults.cpp) decides where each is asked.
#include <algorithm>
#include <optional>

#include "templates/decode/default_rules.hpp"

namespace ktune::decode::rules {
namespace {

/// Tiles for one row tile at d=32 on sm_90, contiguous fixed-length K/V, where they give 2
/// splits or more (see merged_tiles): 64-key tiles of 2 warps, two stages (more where the grid
/// leaves an SM few CTAs), up to kMergedCtasPerSm CTAs per SM, the splits merged in a cluster
/// where a cluster holds them (2-16). A d=32 key is 128 bytes of K and V: these calls stream
/// 5-200 MB in 10-75 us, so the combine kernel's ~3 us and the SMs a small grid leaves idle
/// weigh more than at larger head dims. Read from exhaustive sweeps on the H200 (2026-12-03,
/// benchmarks/results/fallback-h200-2026-12-03-decode-d32.md): over 26 problems (8-800 pairs,
/// 1000-100000 keys) the rows before gave 0.906 of each fastest point (worst 0.766), this rule
/// 0.970 (worst 0.851, 800 pairs left to the row's tiles); on 6 more swept after it was fixed,
/// 0.991 (worst 0.951) against the rows' 0.909 (0.765). Merged grids of 8 CTAs per SM or more
/// (1024-1280 CTAs) ran 0.81-0.83x in three of four sweeps: hence 7.
constexpr FewPairsTiles kMergedTiles[] = {{32, 64, 2, 2}};
// (kMergedCtasPerSm, the CTAs per SM their split count aims at, is in default_rules.hpp.)
// K/V bytes in flight per SM the merged tiles' ring aims at: where the grid gives an SM few
// CTAs (splits capped by the no-empty-split rule), up to 4 stages. ~1.3 us of the H200's ~36
// GB/s per SM; 8 pairs of 60000 keys (2 CTAs per SM) ran 1.25x faster at 4 stages than at 2.
constexpr double kMergedBytesInFlight = 48 * 1024;
constexpr int kMergedMaxStages = 4;

/// d=64, one row tile, sm_90, contiguous fixed-length K/V, more than kRowMergeMinPairs (batch,
/// KV head) pairs: the row's tiles in 2, 4 or 8 splits merged in a cluster, the most of those
/// within kRowMergeCtasPerSm CTAs per SM (see row_merged). Read from exhaustive sweeps of 16
/// held-out problems on the H200 (2026-12-03, 8-400 pairs, 1500-65536 keys,
/// benchmarks/results/fallback-h200-2026-12-03-decode-d64-merged.md): their fastest points were
/// merged splits at ~1.5-3 CTAs per SM in clusters of at most 8 wherever there were more than 16
/// pairs; the rows before reached 0.944 of the fastest point (worst 0.892), this rule 0.977
/// (worst 0.932); on 8 more swept after it was written 0.976 (worst 0.910) against the rows'
/// 0.928 (0.903). At 16 pairs or fewer the row's unmerged splits (16-64) stay: a cluster of 16
/// waits for 16 free SMs of one GPC, and 8 merged splits of so few pairs leave SMs idle. Keys
/// in reach from kWideTilesMinKeys (the problems measured had 1024-65536; a short window is not
/// a stream). Not measured on the H100, which runs it too (its SMs and clusters are the same).
/// (d=32's 64-key tiles of 2 warps at up to 7 CTAs per SM, kMergedTiles, were 0.981 on the
/// first 8 of these problems and 0.936, worst 0.835, on the next 8.)
constexpr std::int64_t kRowMergeHeadDim = 64;
constexpr int kRowMergeCtasPerSm = 3;
constexpr std::int64_t kRowMergeMinPairs = 16;

/// Short spans over few pairs at d=96's and d=128's tiles (one row tile, sm_90, contiguous
/// fixed-length K/V): kShortSpanMinPairs-kShortSpanMaxPairs (batch, KV head) pairs and at most
/// kShortSpanMaxKeys keys in reach take 32-key tiles of 2 warps, 2 stages, in as many of 16, 8,
/// 4 or 2 splits as leave each kShortSpanSplitKeys keys, merged in a cluster (see short_spans).
/// Read on the H200 (2026-12-04, stop 56) from 8 exhaustive sweeps (16-48 pairs, 1000-4000 keys
/// in reach, windows of 1024 and 2048 among them, d = 80-128;
/// benchmarks/results/fallback-h200-2026-12-04-short-spans-trials.csv.gz and the window problem of
/// -d96-tiles-check-trials.csv.gz): the fastest point was merged splits at all 8, 8-16 of them,
/// 32-key tiles at 6; the defaults before took 4-8 splits of 64-key tiles, split_keys 256 capping
/// the count (0.806-0.976 of the fastest, geometric mean 0.854 over the seven of 370-376). This
/// rule: 0.946-1.000 at all 8 (geometric mean 0.980). The keys per split lie between two of
/// them: 16 splits of a 1024-key window (64 keys each) ran 0.672 of its fastest point (8 splits:
/// 0.982), 16 of 1500 keys (94 each) its fastest. Its check set (377-382, swept after it was
/// written; benchmarks/results/fallback-h200-2026-12-04-short-spans.md): 1.18-1.26x at four,
/// 0.90x at 48 pairs x 3500 keys (hence kShortSpanMaxPairKeys) and 0.81x at a 3000-key window
/// over 32 MHA pairs (merged 0.742 of the fastest, the same splits unmerged 0.980; 374, MHA
/// without a window, ran the merged point fastest: not explained); the six 0.818 -> 0.900 with
/// the bound. On the H100 (2026-12-05, benchmarks/results/pending-checks-h100-2026-12-05-stop61.md)
/// its points were 0.835-0.952 of the fastest at 439-446, where 64-key tiles of 4 warps won six
/// of eight; three stages on small grids (stop 60, read from recorded sweeps) were slower there
/// than two at six of the eight and were removed.
constexpr std::int64_t kShortSpanMinPairs = 16;
constexpr std::int64_t kShortSpanMaxPairs = 48;
constexpr std::int64_t kShortSpanMaxKeys = 4096;
constexpr std::int64_t kShortSpanSplitKeys = 80;
// At most this many (pair, key in reach) products: the check set's 48 pairs of 3500 keys (168K,
// 86 MB at d=128, a stream, not a fixed cost) ran 0.90x the rows' tiles' time with the rule; the
// design set's largest was 96K.
constexpr std::int64_t kShortSpanMaxPairKeys = 131072;
constexpr FewPairsTiles kShortSpanTiles = {0, 32, 2, 2};  // any of the two tiles' head dims
// With a mask variant (window, soft-capping, ALiBi) over kVariantSpanMinPairs pairs or more: at
// most kVariantSpanSplits splits, kVariantSpanStages stages. On the H200 (2026-12-04, stop 57;
// benchmarks/results/fallback-h200-2026-12-04-windows.md) 16 merged splits of windows of
// 1024-3000 keys over 32-48 pairs ran 0.67-0.74 of the fastest point at all six such problems,
// 8 merged splits at three stages 0.92-1.00; without a window 32 pairs ran 16 merged splits at
// 0.95-1.00 (five problems). The check set written with a first bound of 17 pairs (402-408 of
// benchmarks/fallback_quality.py) took the cap 1.25-1.45x faster at all four of 32-44 pairs
// (soft-capping and ALiBi among them) and 0.87-0.91x slower at all three of 20-24 pairs, where
// 16 merged splits stayed within 0.93-0.99 of the fastest (and 1.00 at 16 pairs): hence 32.
// Over the eleven variant problems of 32-48 pairs swept by then 0.755 -> 0.952 of the fastest
// (computed); one lost: 351 (a 2048-key window over 32 pairs, d=80) 1.000 -> 0.944.
// Reading (compiled, not profiled): the variants' kernels of these tiles take more registers,
// so fewer CTAs per SM (d=128's: 193-197 a thread, 5 CTAs of 64 threads, where the plain one
// takes 161-164, 6; d=96's: 145-158, 6, where the plain one takes 119-120, 8), and 16-CTA
// clusters of 32 pairs or more then no longer run in one round. The bound's own check set
// (415-422) is written, not yet swept; not measured on the H100.
constexpr std::int64_t kVariantSpanMinPairs = 32;
constexpr int kVariantSpanSplits = 8;
constexpr int kVariantSpanStages = 3;

/// Medium spans over few pairs at d=96's and d=128's tiles (one query row, sm_90, contiguous
/// fixed-length K/V, no mask variant), where short_spans does not apply:
/// kMediumSpanMinPairs-kMediumSpanMaxPairs pairs and kMediumSpanMinKeys-kMediumSpanMaxKeys keys
/// in reach take the row's tiles in 16 merged splits where 16 per pair keep the grid within
/// kMediumSpanCtasPerSm CTAs per SM, else 8; at 2 stages, 3 where the grid gives an SM under 1.5
/// CTAs (see medium_spans). Read on the H200 (2026-12-05, stop 59;
/// benchmarks/results/fallback-h200-2026-12-05-cap-medium-spans.md) from nine exhaustive sweeps
/// (16-40 pairs, 4800-8000 keys, d = 96-128: 423-427, 429, 430 and the earlier 384 and 395):
/// the row's unmerged splits (3-12 of 64-key tiles) ran 0.841-0.981 of the fastest point
/// (geometric mean 0.89, computed), this rule 0.964-1.000 (0.996, computed). At 9000-12000 keys
/// (428 and two earlier sweeps, d = 72-80) the unmerged splits stayed fastest, 8 merged at
/// 0.954-0.957: hence the 8000-key bound. 3 stages lost 0.68-0.82x wherever the grid gave 2 or
/// more CTAs per SM, and won 0.917 -> 1.000 at 24 pairs x 8 (1.45 per SM, d=96). Its check set
/// (431-436 of benchmarks/fallback_quality.py, written with the rule, swept after): 0.975-1.000
/// of the fastest (0.992) where the defaults before ran 0.821-0.913 (0.870), 1.10-1.19x faster
/// at all six. On the H100 (2026-12-05, stop 60; benchmarks/results/h100-bars-2026-12-05.md)
/// all eight of 431-438: 0.921 -> 0.977 of the fastest (computed), 1.01-1.12x faster at all.
constexpr std::int64_t kMediumSpanMinPairs = 16;
constexpr std::int64_t kMediumSpanMaxPairs = 40;
constexpr std::int64_t kMediumSpanMinKeys = 2048;
constexpr std::int64_t kMediumSpanMaxKeys = 8000;
constexpr std::int64_t kMediumSpanCtasPerSm = 2;

// Several packed rows (more than 16: GQA groups x nq, MQA) over few (batch, KV head) pairs:
// at most kFewRowTilesMax row tiles of 16 rows over all pairs, sm_90, contiguous fixed-length
// K/V, no mask variant, tile head dims 64 and 128 (where it was read) take 16-row tiles of 128
// keys, 4 warps, 3 stages, their splits merged in clusters: 16 where at most
// kSixteenClustersAtOnce clusters of 16 are asked (the H100 and H200 hold 7 such clusters at
// one CTA per SM; stop 56's cluster_probe), else 8 or 4, the grid within one CTA per SM and no
// split empty (see few_row_tiles_merged). Read on the H100 (2026-12-07, stop 78) from the
// design set 489-492 of benchmarks/fallback_quality.py (MQA/GQA over 1-3 pairs, 32-96 rows,
// d = 64 and 128, 4000-12000 keys;
// benchmarks/results/fallback-h100-2026-12-07-stop78-design-trials.csv.gz): the fastest point
// at all four was 16-row tiles of 128 keys in 8-16 merged splits (the combine kernel's ~3 us
// and a second row of 3 CTAs per SM cost more than these 9-15 us calls can hide), where the
// multi-row rule's 24-32 unmerged splits of 64-key tiles ran 0.78-0.91 of it. Over every
// recorded H100 sweep with at most 8 such row tiles (5 problems; the fifth 30000 keys over 4
// pairs, 3 stages its fastest) this rule gives 0.963-1.000 of the fastest (geometric mean
// 0.986) against 0.781-0.928 (0.835), computed. Past 8 row tiles it lost at two of four (12
// row tiles at 12000 keys 0.920 -> 0.903; the H200's 20 at 10396 keys 0.991 -> 0.904).
constexpr std::int64_t kFewRowTilesMax = 8;
constexpr std::int64_t kSixteenClustersAtOnce = 7;
constexpr FewPairsTiles kFewRowTiles = {0, 128, 4, 3};  // head dims 64 and 128

// d=256's tiles over few pairs (rule B): one row tile, at most kD256MergedMaxPairs (batch, KV
// head) pairs, contiguous fixed-length K/V without a mask variant, sm_90: 64-key tiles of 2
// warps, 3 stages, tensor-map copies, merged splits (16 where at most kSixteenClustersAtOnce
// clusters of 16 are asked, else 8, 4 or 2; the grid within one CTA per SM, no split empty),
// where each split keeps at most kD256MergedMaxSplitKeys keys (else today's tiles). A d=256
// key is 1 KiB of K and V: one CTA per SM streams its split alone, and past ~800 keys a split
// of a few dozen CTAs is bound by what one SM can pull. Read on the H100 (2026-12-07, stop 78)
// from the design set's 493-496 and stop 75's 3-pair problem
// (benchmarks/results/fallback-h100-2026-12-07-stop78-design-trials.csv.gz): at 2-12 pairs
// and 440-690 keys a split this point ran 0.954-1.000 of the fastest (main's few-pairs or
// row tiles, unmerged: 0.845-0.905). Where a split would hold 1250-3140 keys (2 pairs over
// 20000 keys, 16 and 32 pairs over 12562-14766) it ran 0.800-0.859 against main's
// 0.958-0.988: hence the bound.
constexpr std::int64_t kD256MergedMaxPairs = 16;
constexpr std::int64_t kD256MergedMaxSplitKeys = 800;
constexpr FewPairsTiles kD256MergedTiles = {256, 64, 2, 3};

/// The most splits of 16, 8, 4, ... down to `fewest` that a merged grid of `groups` (pair,
/// row tile) groups takes: clusters of 16 only where at most kSixteenClustersAtOnce are asked,
/// the grid within one CTA per SM (device.sm_count > 0), no split empty; 0 where none does.
int merged_split_count(std::int64_t groups, std::int64_t span, int block_n,
                       const DeviceInfo& device, int fewest) {
  for (int v : {16, 8, 4, 2}) {
    if (v < fewest) break;
    if (v == 16 && groups > kSixteenClustersAtOnce) continue;
    if (groups * v <= device.sm_count && flash_decode_used_splits(span, block_n, v) == v)
      return v;
  }
  return 0;
}

}  // namespace

/// One row tile, sm_90 (clusters), contiguous fixed-length K/V (what merge=1 merges).
bool merged_tiles_apply(const Shape& s, const DeviceInfo& device) {
  return s.rows() <= 16 && device.cc_major >= 9 && device.sm_count > 0 && !s.paged() && !s.varlen;
}

/// The merged tiles (kMergedTiles) for this problem and device, or nullptr: one row tile,
/// sm_90 (clusters), contiguous fixed-length K/V (what merge=1 merges) and a listed head dim;
/// params_for uses them where they give at least 2 splits (as in every sweep they were read
/// from). Not measured on the H100: the same SMs, where a fixed cost weighs no less.
const FewPairsTiles* merged_tiles(const Shape& s, const DeviceInfo& device) {
  if (!merged_tiles_apply(s, device)) return nullptr;
  for (const FewPairsTiles& t : kMergedTiles)
    if (t.d == s.d) return &t;
  return nullptr;
}

/// The merged tiles' configuration from their split count (at least 2): merged in a cluster
/// where the count allows one, and the stages for kMergedBytesInFlight per SM.
Params merged_params(Config c, const Shape& s, const DeviceInfo& device) {
  // A cluster holds 2, 4, 8 or 16 splits: under 32, the most of those the count allows.
  if (c.splits < 32) {
    const std::int64_t span = split_span(s, c.block_n);
    for (int v : {16, 8, 4, 2})
      if (v <= c.splits && flash_decode_used_splits(span, c.block_n, v) == v) {
        c.splits = v;
        c.merge = 1;
        break;
      }
  }
  // Stages for kMergedBytesInFlight per SM at the grid's CTAs per SM (16-bit K and V).
  const double per_sm = static_cast<double>(ctas(c, s)) / device.sm_count;
  const double stage_bytes = 2.0 * c.block_n * static_cast<double>(s.d) * 2.0;
  while (c.stages < kMergedMaxStages && per_sm * c.stages * stage_bytes < kMergedBytesInFlight)
    ++c.stages;
  return params_of(c);
}

/// The row's tiles in merged splits at d=64 (kRowMergeHeadDim; see kRowMergeCtasPerSm), or
/// nothing where the rule does not apply or no count of 2, 4 or 8 splits fits.
std::optional<Params> row_merged(const DecodeDefaults& r, const Shape& s, const DeviceInfo& device,
                                 int block_m) {
  const std::int64_t pairs = s.b * s.hkv;
  const std::int64_t span = split_span(s, r.block_n);
  if (s.d != kRowMergeHeadDim || !merged_tiles_apply(s, device) || pairs <= kRowMergeMinPairs ||
      span < kWideTilesMinKeys)
    return std::nullopt;
  const std::int64_t want = kRowMergeCtasPerSm * device.sm_count / (pairs * row_tiles(s, block_m));
  for (int v : {8, 4, 2})
    if (v <= want && flash_decode_used_splits(span, r.block_n, v) == v)
      return params_of({v, block_m, r.block_n, r.warps, r.stages, 1});
  return std::nullopt;
}

/// The short-span tiles in merged splits (kShortSpanTiles), or nothing where the rule does not
/// apply: one query row (all it was read from), d=96's or d=128's tiles,
/// kShortSpanMinPairs-kShortSpanMaxPairs pairs, at most
/// kShortSpanMaxKeys keys in reach, and a count of 2-16 splits of kShortSpanSplitKeys keys or
/// more with none empty (with a mask variant over kVariantSpanMinPairs pairs or more, at most
/// kVariantSpanSplits at kVariantSpanStages stages). kv_split=1 at the data head dims that take
/// it (kKvSplitHeadDims): at d = 80/96 the merged 32-key tiles ran 1.02-1.08x faster with it in
/// the same sweeps.
std::optional<Params> short_spans(const Shape& s, std::int64_t data_d, const DeviceInfo& device,
                                  int block_m) {
  const std::int64_t pairs = s.b * s.hkv;
  const FewPairsTiles& t = kShortSpanTiles;
  const std::int64_t span = split_span(s, t.block_n);
  if (s.nq != 1 || (s.d != 96 && s.d != 128) || !merged_tiles_apply(s, device) ||
      pairs < kShortSpanMinPairs || pairs > kShortSpanMaxPairs || span > kShortSpanMaxKeys ||
      pairs * span > kShortSpanMaxPairKeys)
    return std::nullopt;
  const int kv_split = takes_kv_split(s, data_d, device) ? 1 : 0;
  const bool variant_cap = s.variants() && pairs >= kVariantSpanMinPairs;
  for (int v : {16, 8, 4, 2})
    if ((!variant_cap || v <= kVariantSpanSplits) && span / v >= kShortSpanSplitKeys &&
        flash_decode_used_splits(span, t.block_n, v) == v)
      return params_of(
          {v, block_m, t.block_n, t.warps, variant_cap ? kVariantSpanStages : t.stages, 1,
           kv_split});
  return std::nullopt;
}

/// The row's tiles in merged splits over medium spans (kMediumSpanMinPairs etc.), or nothing
/// where the rule does not apply or neither 16 nor 8 splits leave every split a tile.
/// kv_split=1 at the data head dims that take it (the row's own choice there).
std::optional<Params> medium_spans(const DecodeDefaults& r, const Shape& s, std::int64_t data_d,
                                   const DeviceInfo& device, int block_m) {
  const std::int64_t pairs = s.b * s.hkv;
  const std::int64_t span = split_span(s, r.block_n);
  if (s.nq != 1 || (s.d != 96 && s.d != 128) || s.variants() ||
      !merged_tiles_apply(s, device) || pairs < kMediumSpanMinPairs ||
      pairs > kMediumSpanMaxPairs || span < kMediumSpanMinKeys || span > kMediumSpanMaxKeys)
    return std::nullopt;
  const int kv_split = takes_kv_split(s, data_d, device) ? 1 : 0;
  for (int v : {16, 8}) {
    if (v == 16 && pairs * v > kMediumSpanCtasPerSm * device.sm_count) continue;
    if (flash_decode_used_splits(span, r.block_n, v) != v) continue;
    const int stages = 2 * pairs * v < 3 * static_cast<std::int64_t>(device.sm_count) ? 3 : 2;
    return params_of({v, block_m, r.block_n, r.warps, stages, 1, kv_split});
  }
  return std::nullopt;
}

/// The row's tiles (as the table has them: not the few-pairs tiles) in 2 splits at d=96's and
/// d=128's tiles (one row tile, contiguous fixed-length K/V, sm_90): the two merged in a
/// cluster (merge=1) instead of by the combine kernel. On the H200 the same point merged ran
/// 1.011-1.103x faster at all seven such problems of the stop-56 sweeps (64-128 pairs,
/// d = 72-128; benchmarks/decode/NOTES.md); of the two check sets written before their sweeps
/// (benchmarks/fallback_quality.py; benchmarks/results/fallback-h200-2026-12-04-windows.md),
/// 389-394 (64-128 pairs, 2500-9000 keys, MHA and GQA, kv_split 0 and 1) ran 1.032-1.121x
/// faster and 410-414 (64-130 pairs, 2000-16000 keys) 1.010-1.090x. At 4 splits (395) merged
/// ran 0.961x: only 2. Reading (not measured): a cluster of two needs two free SMs of one GPC,
/// which a grid of such CTAs finds as readily as one. Not measured on the H100.
Config two_merged(Config c, const DecodeDefaults& r, const Shape& s, const DeviceInfo& device) {
  if (c.splits == 2 && (s.d == 96 || s.d == 128) && merged_tiles_apply(s, device) &&
      c.block_n == r.block_n && c.warps == r.warps && c.stages == r.stages)
    c.merge = 1;
  return c;
}

/// Few row tiles of several packed rows each, merged (kFewRowTilesMax etc.), or nothing where
/// the rule does not apply or no count of 16, 8 or 4 merged splits fits.
std::optional<Params> few_row_tiles_merged(const Shape& s, const DeviceInfo& device) {
  constexpr int kBlockM = 16;
  const FewPairsTiles& t = kFewRowTiles;
  const std::int64_t tiles = s.b * s.hkv * row_tiles(s, kBlockM);
  if (s.rows() <= 16 || (s.d != 64 && s.d != 128) || device.cc_major < 9 ||
      device.sm_count <= 0 || s.paged() || s.varlen || s.variants() || tiles > kFewRowTilesMax)
    return std::nullopt;
  const int v = merged_split_count(tiles, split_span(s, t.block_n), t.block_n, device, 4);
  if (v == 0) return std::nullopt;
  return params_of({v, kBlockM, t.block_n, t.warps, t.stages, 1});
}

/// Rule B (kD256MergedMaxPairs etc.): d=256's tiles over few pairs in merged splits, or
/// nothing where the rule does not apply, no count fits, or a split would hold too many keys.
std::optional<Params> d256_merged(const Shape& s, const DeviceInfo& device) {
  const FewPairsTiles& t = kD256MergedTiles;
  const std::int64_t pairs = s.b * s.hkv;
  if (s.d != t.d || !merged_tiles_apply(s, device) || s.variants() ||
      pairs > kD256MergedMaxPairs)
    return std::nullopt;
  const std::int64_t span = split_span(s, t.block_n);
  const int v = merged_split_count(pairs, span, t.block_n, device, 2);
  if (v == 0 || span > v * kD256MergedMaxSplitKeys) return std::nullopt;
  return params_of({v, 16, t.block_n, t.warps, t.stages, 1});  // tma=1: default_params' rule
}

}  // namespace ktune::decode::rules
