// The decode op's built-in configurations and the rules that adapt them to a problem's grid,
// keys and device, each read from exhaustive sweeps of held-out problems (the results files its
// comments name).
#include "templates/decode/decode_defaults.hpp"

#include <algorithm>
#include <optional>

#include "templates/decode/cost_model.hpp"
#include "templates/decode/default_rules.hpp"
#include "templates/device_class.hpp"

namespace ktune::decode {
namespace {
using namespace rules;  // NOLINT: the types and rules shared with merged_defaults.cpp

constexpr std::int64_t kPagedSplitKeys = 1024;  // paged defaults: keys per split at most
// Paged and varlen defaults: CTAs per SM the split count aims at with every sequence at the
// longest length, where shared memory holds two CTAs per SM or more (see with_splits). Read on
// the H200 (2026-12-04, stop 54, benchmarks/results/decode-varlen-splits-h200-2026-12-04.md)
// from 13 exhaustive sweeps of paged and varlen decode with 12-256 (sequence, KV head) pairs
// at d = 64-256: the fastest split count of the row's tiles put 2.4-3.9 CTAs per SM at d <= 128
// (the one-CTA-per-SM rule before: 0.61-0.88 of the fastest point where it gave fewer); at
// d=256, whose row tiles fit one CTA per SM, one wave (a second one of such CTAs ran 0.82x).
// Aiming at 4 instead of 3, the form first checked (check set 327-335: 0.753 -> 0.923 of the
// fastest), overshot at 16-64 pairs (0.77-0.87x) and at d=256.
constexpr std::int64_t kMixedLengthsCtasPerSm = 3;
// Defaults for tiles of several query rows per head (packed rows > 16: speculative decoding,
// chunked prefill): 16-row tiles up to this many packed rows, up to this many CTAs per SM (as
// shared memory allows), and splits of at least this many keys.
constexpr std::int64_t kMultiRowSmallTiles = 64;
constexpr int kMultiRowCtasPerSm = 3;
constexpr int kMultiRowSplitKeys = 128;
// Defaults for one row tile (at most 16 packed rows) at head dims up to 64 on sm_90: up to this
// many CTAs per SM (as shared memory allows). A CTA of 3 stages of 64 keys holds 48 KiB of such
// rows in flight, half of d=128's; one per SM does not keep the H200's stream busy.
constexpr int kSmallHeadCtasPerSm = 4;
// Defaults for one row tile at the head dims d=96's tiles serve below 96 (72, 80, 88) on sm_90,
// contiguous K/V, where the few-pairs tiles do not apply: up to this many CTAs per SM (as
// shared memory allows). Such a key is 144-176 bytes of K and V where d=96's is 192, so a CTA
// of the row's three 64-key stages holds 54-66 KiB in flight, under the ~72 KiB with which d=96
// itself streamed as fast at one CTA per SM as at two. Read on the H200 (2026-12-04, stop 55)
// from 7 exhaustive sweeps (16-128 pairs; benchmarks/results/decode-kv-split-h200-2026-12-04.md
// and fallback-h200-2026-12-04-kv-split-check-trials.csv.gz): twice the row's split count ran
// 1.04-1.11x faster at 6 of them and 0.96x at one (d=80, 128 pairs, 4000 keys); at d=96
// itself 0.99x at both such problems.
constexpr int kBetweenTilesCtasPerSm = 2;
// Head dims whose default takes kv_split=1 (see with_kv_split).
constexpr std::int64_t kKvSplitHeadDims[] = {80, 96};
// Packed rows (query heads of a group x nq) from which the default copies K/V by tensor maps
// (tma=1, sm_90; see default_params): 17 (tiles of several query rows), and every row count in
// d=256's tiles.
constexpr std::int64_t kTmaMinRows = 17;
constexpr std::int64_t kTmaMinRowsD256 = 1;
// Head dims (of the tiles) whose unsplit grids of many (batch, KV head) pairs take one stage
// fewer where that puts them in fewer waves (see fewer_waves). d=256's row tiles hold one CTA
// per SM at 3 stages and at 2: never fewer waves.
constexpr std::int64_t kFewerWavesHeadDims[] = {32, 64, 96, 128};

// Short spans of several packed rows (rule C): at least kShortRowsMinRows packed rows, at most
// kShortRowsMaxKeys keys, tile head dims 64 and 128, contiguous K/V without a mask variant,
// sm_90: one split of 128-key tiles, 4 warps, 2 stages, tensor-map copies. Such a call reads
// 0.3-3 MB in ~9-12 us: its fixed costs, not its stream, set the time, and one CTA per
// (pair, row tile) walking 2-5 tiles of 128 keys pays neither a combine nor a cluster. Read on
// the H100 (2026-12-07, stop 78) from the design set's 497-502 and stop 75's 383-key problem
// (benchmarks/results/fallback-h100-2026-12-07-stop78-design-trials.csv.gz,
// fallback-h100-2026-12-06-stop75-trials.csv.gz): at 240-520 keys over 16-24 rows this point
// was the fastest at all four (main's 64-key tiles in 1-3 splits at 3 stages 0.784-0.906 of
// it); at 450 keys over 30 rows 0.914 (main 0.741; 8 merged splits of 64 keys the fastest).
// At 1500 keys (64 rows over 128 pairs) the same point ran 0.907 against main's 0.977: hence
// the bound. Under 16 rows (8-row problems at 650-700 keys) merged splits of smaller tiles won.
constexpr std::int64_t kShortRowsMinRows = 16;
constexpr std::int64_t kShortRowsMaxKeys = 640;
constexpr FewPairsTiles kShortRowsTiles = {0, 128, 4, 2};  // head dims 64 and 128

constexpr DecodeDefaults kDefaults[] = {
    // Hopper: 227 KiB per block, 228 KiB per SM. One CTA per SM: on the H100 (2026-11-23,
    // benchmarks/results/decode-h100-2026-11-23.md) the fastest split count of three exhaustive
    // sweeps (d=128 at 128 and 8 (batch, KV head) pairs, d=256 at 32) was the one that filled
    // each SM once; a second wave of splits cost more (the combine, shorter streams) than it
    // hid. Tiles: d=64 and d=256 the fastest of their exhaustive sweeps (two problems each,
    // benchmarks/results/decode-paged-h100-2026-11-23.md and fallback-h100-2026-11-23.md; the
    // rows before were 0.96-0.97x and 0.95-0.98x of it); d=64 a third stage since its K/V rows
    // are unpadded (6 sweeps after the swizzle: 3 stages 0.99-1.0x of each fastest, 2 stages
    // 0.80-0.99x; benchmarks/results/fallback-h100-2026-11-24.md); d=32/96 follow d=64/128
    // (not measured).
    {9, 32, 128, 4, 3, 1, 256},
    {9, 64, 64, 4, 3, 1, 256},
    {9, 96, 64, 4, 3, 1, 256},
    {9, 128, 64, 4, 3, 1, 256},
    {9, 256, 64, 4, 3, 1, 256},
    // Ampere: 163 KiB per block, 164 KiB per SM: one stage fewer. Not measured (no sm_80 GPU
    // lent): one CTA per SM as measured on Hopper.
    {8, 32, 128, 4, 2, 1, 256},
    {8, 64, 128, 4, 2, 1, 256},
    {8, 96, 64, 4, 2, 1, 256},
    {8, 128, 64, 4, 2, 1, 256},
    {8, 256, 32, 2, 3, 1, 256},
};
/// Tiles for one row tile (at most 16 packed rows) at head dims above 64 on sm_90 when one CTA
/// per SM would leave a tenth of the SMs idle (see params_for): smaller CTAs, several per SM.
/// Read from exhaustive sweeps on the H200 (2026-12-03, 72-112 (batch, KV head) pairs,
/// benchmarks/results/fallback-h200-2026-12-03-decode-few-pairs.md): at d=96 and 128 two
/// stages (3-4 CTAs per SM) were 0.94-1.0x of each fastest point, the three-stage rows' two CTAs
/// per SM 0.87-0.94x; at d=256 only 32-key tiles of 2 warps fit more than one CTA per SM.
constexpr FewPairsTiles kFewPairsTiles[] = {{96, 64, 4, 2}, {128, 64, 4, 2}, {256, 32, 2, 2}};
constexpr int kFewPairsCtasPerSm = 4;  // at most, as shared memory allows

/// Tiles for one wave of one CTA per (batch, KV head) pair, the grid 70-100 % of the SMs, on a
/// device with the H200's fast memory per SM (fast_memory_per_sm): 128-key tiles of 8
/// warps, 3 stages (twice the row's bytes in flight per CTA; see params_for). Head dims 64 and
/// 128, where they were measured.
constexpr FewPairsTiles kWideTiles[] = {{64, 128, 8, 3}, {128, 128, 8, 3}};
// (kWideTilesMinKeys, the keys in reach they need, is in default_rules.hpp: d=64's merged row
// tiles ask the same.)

/// Smallest tiles, for a device with less shared memory than the rows above assume.
constexpr DecodeDefaults kSmallest = {8, 0, 32, 2, 2, 1, 256};

/// Whether `v` is one of `list`'s values.
template <std::size_t N>
bool listed(const std::int64_t (&list)[N], std::int64_t v) {
  return std::find(std::begin(list), std::end(list), v) != std::end(list);
}

}  // namespace

std::int64_t rules::ctas(const Config& c, const Shape& s) {
  return s.b * s.hkv * row_tiles(s, c.block_m) * c.splits;
}

// d=96's tiles at a data head dim of kKvSplitHeadDims (see with_kv_split): one row tile,
// contiguous fixed-length K/V, sm_90.
bool rules::takes_kv_split(const Shape& s, std::int64_t data_d, const DeviceInfo& device) {
  return s.d == 96 && s.rows() <= 16 && !s.paged() && !s.varlen && device.cc_major >= 9 &&
         listed(kKvSplitHeadDims, data_d);
}

namespace {

/// CTAs of `c` that one SM's shared memory holds (the driver reserves 1 KiB per CTA); the
/// device's shared memory per SM must be known (> 0).
std::int64_t smem_fits(const Config& c, const Shape& s, const DeviceInfo& device) {
  return device.smem_per_sm / (smem_bytes(c, s) + 1024);
}

/// The row's tiles at block_m, with the largest listed split count whose CTAs still fit in one
/// wave of sm_count * ctas_per_sm (fewer when shared memory allows fewer CTAs per SM), with at
/// least split_keys keys each and no empty split (see default_params).
Config with_splits(const DecodeDefaults& r, const Shape& s, const DeviceInfo& device, int block_m,
                   int split_keys) {
  Config c{1, block_m, r.block_n, r.warps, r.stages, 0};
  if (device.sm_count > 0) {
    const std::int64_t per_sm =
        device.smem_per_sm > 0
            ? std::clamp<std::int64_t>(smem_fits(c, s, device), 1, r.ctas_per_sm)
            : r.ctas_per_sm;
    const std::int64_t base = s.b * s.hkv * row_tiles(s, c.block_m);
    const std::int64_t span = split_span(s, c.block_n);
    std::int64_t want =
        std::min(device.sm_count * per_sm / base, std::max<std::int64_t>(1, span / split_keys));
    // Paged and varlen batches mix lengths: one CTA per (sequence, head) would leave the SMs
    // waiting on the longest sequences. Pieces of about kPagedSplitKeys keys balance them
    // (splits past a sequence's end exit at once), whatever the grid; and, the lengths unknown
    // when the grid is sized, enough pieces for kMixedLengthsCtasPerSm CTAs per SM at the
    // longest length (about half that of work where lengths spread over 0..nk), at least
    // split_keys keys each, where an SM holds two of the CTAs at once (a piece waiting for a
    // whole CTA to end streams nothing meanwhile).
    if (s.paged() || s.varlen) {
      want = std::max(want, s.nk / kPagedSplitKeys);
      const bool two_fit = device.smem_per_sm <= 0 || smem_fits(c, s, device) >= 2;
      if (two_fit)
        want = std::max(want, std::min(kMixedLengthsCtasPerSm * device.sm_count / base,
                                       std::max<std::int64_t>(1, span / split_keys)));
    }
    for (std::int64_t v : kSplitValues)
      if (v <= want && flash_decode_used_splits(span, c.block_n, static_cast<int>(v)) == v)
        c.splits = static_cast<int>(v);
  }
  return c;
}


/// The wide tiles (kWideTiles) for this problem and device, or nullptr: one row tile, sm_90,
/// contiguous K/V, a listed head dim, the H200's fast memory per SM (fast_memory_per_sm;
/// unknown: no), at least kWideTilesMinKeys keys in reach (a 128-key window ran 0.94x
/// of the fastest point with them, 0.97x with the row's), and one CTA per SM leaving the row's
/// split count at 1 with a grid of 70-100 % of the SMs.
const FewPairsTiles* wide_tiles(const DecodeDefaults& r, const Shape& s, const DeviceInfo& device,
                                int block_m) {
  if (s.rows() > 16 || device.cc_major < 9 || device.sm_count <= 0 || s.paged() || s.varlen ||
      !fast_memory_per_sm(device) ||
      split_span(s, r.block_n) < kWideTilesMinKeys)
    return nullptr;
  const Config one = with_splits(r, s, device, block_m, r.split_keys);
  const std::int64_t n = ctas(one, s);
  if (one.splits != 1 || 10 * n < 7 * device.sm_count || n > device.sm_count) return nullptr;
  for (const FewPairsTiles& t : kWideTiles)
    if (t.d == s.d) return &t;
  return nullptr;
}

/// One row tile at d > 64 on sm_90: where one CTA per SM (the row's split count) would leave
/// a tenth of the SMs idle (67-118 (batch, KV head) pairs unsplit on 132 SMs, or 45-59 in two
/// splits), the few-pairs tiles (kFewPairsTiles) and up to kFewPairsCtasPerSm CTAs per SM, if
/// that gives more CTAs. On the H200 (2026-12-03) one CTA a pair at 72-112 pairs ran at
/// 0.63-0.91x of the fastest point, these at 0.94-1.0x (d=96, 128, 256; read from them); on 7
/// problems swept after the rule (36-104 pairs) 0.61-0.97x before, 0.91-0.99x with it
/// (benchmarks/results/fallback-h200-2026-12-03-decode-few-pairs.md). Grids that fill the SMs
/// keep one CTA per SM, as the H100 sweeps of 8 and 128 pairs measured it fastest
/// (benchmarks/results/decode-h100-2026-11-23.md).
DecodeDefaults few_pairs(const DecodeDefaults& r, const Shape& s, const DeviceInfo& device,
                         int block_m) {
  const Config one = with_splits(r, s, device, block_m, r.split_keys);
  if (10 * ctas(one, s) >= 9 * device.sm_count) return r;
  for (const FewPairsTiles& t : kFewPairsTiles) {
    if (t.d != s.d) continue;
    DecodeDefaults few = r;
    few.block_n = t.block_n;
    few.warps = t.warps;
    few.stages = t.stages;
    few.ctas_per_sm = std::max(r.ctas_per_sm, kFewPairsCtasPerSm);
    return ctas(with_splits(few, s, device, block_m, few.split_keys), s) > ctas(one, s) ? few : r;
  }
  return r;
}

/// The row's tiles at d=96's tiles, one row tile, contiguous K/V, sm_90, for a head dim in
/// kKvSplitHeadDims (the data's, `data_d`): kv_split=1, each K/V tile in two parts (128-byte
/// swizzled rows and 64-byte rows). Read on the H200 (2026-12-04, stop 55) from the 18 d = 72-96
/// sweeps of stops 54-55 at the split counts the defaults take: the row's tile with kv_split=1
/// ran 0.91-0.95x the time of kv_split=0 at all 6 d=80 problems (32-512 pairs) and 0.96-0.99x
/// at all 3 d=96 ones; at d=72 1.035-1.043x (3 problems) and d=88 1.03x (1; their second parts,
/// 8 and 24 columns, fill a fraction of a 64-byte row), paged d = 80-96 0.995-1.08x (5): those
/// keep 0. Varlen not measured. Checked with kBetweenTilesCtasPerSm by 343-352 of
/// benchmarks/fallback_quality.py (kv_split alone 1.015-1.055x at the three it changed alone).
Config with_kv_split(Config c, const DecodeDefaults& r, const Shape& s, std::int64_t data_d,
                     const DeviceInfo& device) {
  if (takes_kv_split(s, data_d, device) && c.block_n == r.block_n && c.stages == r.stages)
    c.kv_split = 1;
  return c;
}

/// Waves of CTAs of `c` on the device: CTAs over (CTAs per SM that shared memory allows x SMs).
std::int64_t waves(const Config& c, const Shape& s, const DeviceInfo& device) {
  const std::int64_t slots = std::max<std::int64_t>(1, smem_fits(c, s, device)) * device.sm_count;
  return (ctas(c, s) + slots - 1) / slots;
}

/// An unsplit grid of many (batch, KV head) pairs, contiguous K/V, one row tile, the row's tiles
/// at a head dim of kFewerWavesHeadDims on sm_90: one stage fewer (not under 2) where that
/// gives fewer waves. Three 64-key stages of d=96 or d=128 rows fit two CTAs per SM, two stages
/// three or four: 384 pairs then run in one wave instead of 1.45, whose second wave leaves SMs
/// idle. On the H200 (2026-12-04, stop 55) both 384-pair problems (d=80) ran 1.14-1.20x faster
/// at two stages, with kv_split 0 or 1; at 256 pairs (one wave either way) 0.95-0.99x, at 512
/// (1.94 waves at three stages, 0.97 at two) 1.00x (benchmarks/results/fallback-h200-2026-12-04-
/// d96-tiles-check-trials.csv.gz, -kv-split-check-trials.csv.gz, decode-kv-split-h200-2026-12-04-
/// trials.csv.gz); the check set written with it (353-358 of benchmarks/fallback_quality.py)
/// 1.11-1.28x at all five it changed. d=64's and d=32's row tiles fit four CTAs per SM at three
/// stages, six or seven at two: at 600-640 pairs (1.1-1.2 waves at three stages) two stages ran
/// 1.17-1.28x faster at all four problems swept (359-362, stop 56), the fastest point or within
/// 0.2 % of it; at 384 pairs (one wave either way, 363) 0.97x, which the rule leaves at three
/// (benchmarks/results/fallback-h200-2026-12-04-fewer-waves-d64-trials.csv.gz).
Config fewer_waves(Config c, const DecodeDefaults& r, const Shape& s, const DeviceInfo& device) {
  if (c.splits != 1 || c.block_n != r.block_n || c.stages != r.stages || c.stages <= 2 ||
      s.rows() > 16 || s.paged() || s.varlen || device.cc_major < 9 || device.sm_count <= 0 ||
      device.smem_per_sm <= 0 || !listed(kFewerWavesHeadDims, s.d))
    return c;
  Config fewer = c;
  --fewer.stages;
  return waves(fewer, s, device) < waves(c, s, device) ? fewer : c;
}


/// Rule C (kShortRowsMinRows etc.): one split of 128-key tiles over a short span of several
/// packed rows, or nothing where it does not apply.
std::optional<Params> short_span_rows(const Shape& s, const DeviceInfo& device) {
  const FewPairsTiles& t = kShortRowsTiles;
  if (s.rows() < kShortRowsMinRows || (s.d != 64 && s.d != 128) || device.cc_major < 9 ||
      s.paged() || s.varlen || s.variants() || split_span(s, t.block_n) > kShortRowsMaxKeys)
    return std::nullopt;
  return params_of({1, 16, t.block_n, t.warps, t.stages, 0, 0, 1});  // tma=1 from 16 rows
}

Params params_for(const DecodeDefaults& r, const Shape& s, std::int64_t data_d,
                  const DeviceInfo& device) {
  std::int64_t block_m = 16;
  for (std::int64_t m : kBlockMs)
    if (flash_decode_accumulators(static_cast<int>(s.d), static_cast<int>(m), r.block_n, r.warps) <=
        kMaxAccumulators) {
      block_m = m;
      if (m >= s.rows()) break;
    }
  // Several query rows per head make the tiles compute more per K/V byte: there the fastest
  // points of 13 exhaustive sweeps on the H100 (24-144 packed rows) ran 2-3 CTAs per SM in
  // splits of 190-375 keys, with 16-row tiles up to 64 packed rows (more row tiles, each K/V
  // tile read again from L2). The one-CTA-per-SM, largest-tile rule reached 0.70-0.97x of
  // them; this rule 0.90-1.0x there, and 0.93-1.0x (against 0.67-0.96x) on 7 more such
  // problems swept afterwards to check it (benchmarks/results/fallback-h100-2026-11-24.md).
  DecodeDefaults row = r;
  // One CTA a pair in one wave that leaves up to 30 % of the SMs idle, on a device with fast
  // memory per SM (the H200): the idle SMs cost less than splitting does if each CTA keeps
  // twice the bytes in flight. On the H200 (2026-12-03) 128-key tiles of 8 warps unsplit were
  // 0.97-1.0x of the fastest point at 96-128 pairs (d=64 and 128), where the 64-key row
  // unsplit (d=64 at 128 pairs) reached 0.88-0.92x and the few-pairs tiles below (d=128 at
  // 96-112 pairs) 0.92-0.96x (benchmarks/results/fallback-h200-2026-12-03-decode-wide.md).
  // The H100 measured the 64-key row fastest at 128 pairs (decode-h100-2026-11-23.md); its
  // memory (25 GB/s per SM) keeps it there.
  if (const FewPairsTiles* wide = wide_tiles(r, s, device, static_cast<int>(block_m))) {
    row.block_n = wide->block_n;
    row.warps = wide->warps;
    row.stages = wide->stages;
    const Config c = with_splits(row, s, device, static_cast<int>(block_m), row.split_keys);
    return params_of(c);
  }
  if (const FewPairsTiles* merged = merged_tiles(s, device)) {
    DecodeDefaults m = row;
    m.block_n = merged->block_n;
    m.warps = merged->warps;
    m.stages = merged->stages;
    m.ctas_per_sm = kMergedCtasPerSm;
    Config c = with_splits(m, s, device, static_cast<int>(block_m), m.split_keys);
    if (c.splits > 1) return merged_params(c, s, device);
  }
  if (const std::optional<Params> merged = row_merged(row, s, device, static_cast<int>(block_m)))
    return *merged;
  if (const std::optional<Params> short_merged =
          short_spans(s, data_d, device, static_cast<int>(block_m)))
    return *short_merged;
  if (const std::optional<Params> medium =
          medium_spans(row, s, data_d, device, static_cast<int>(block_m)))
    return *medium;
  if (const std::optional<Params> d256 = d256_merged(s, device)) return *d256;
  // Few (batch, KV head) pairs at d <= 64 (a grid under 3/4 of the SMs unsplit): on the H200
  // (2026-12-02) the fastest points of two held-out decode problems (32 pairs, d=64) ran 16
  // splits at four CTAs per SM, where the one-CTA-per-SM default (4 splits) reached 0.75-0.79x
  // of them; on six more d=64 problems 4 CTAs per SM took the default from 0.66-0.91x to
  // 0.83-0.95x of the fastest at 8-32 pairs, and lost 2-4 % at 128-256 pairs, hence a bound
  // (benchmarks/results/decode-defaults-h200-2026-12-02.md). It was half the SMs until
  // 2026-12-03, when 96 pairs (one CTA each on 132 SMs, a quarter of them idle) ran at 0.777 of
  // the fastest point and 4 splits at 0.96
  // (benchmarks/results/fallback-h200-2026-12-03-decode-d64.md). Not measured on the H100.
  if (s.d <= 64 && s.rows() <= 16 && device.cc_major >= 9 && device.sm_count > 0 &&
      4 * s.b * s.hkv <= 3 * device.sm_count)
    row.ctas_per_sm = std::max(row.ctas_per_sm, kSmallHeadCtasPerSm);
  if (s.d > 64 && s.rows() <= 16 && device.cc_major >= 9 && device.sm_count > 0) {
    row = few_pairs(row, s, device, static_cast<int>(block_m));
    if (s.d == 96 && data_d < s.d && !s.paged() && !s.varlen && row.block_n == r.block_n &&
        row.stages == r.stages)
      row.ctas_per_sm = std::max(row.ctas_per_sm, kBetweenTilesCtasPerSm);
  }
  if (const std::optional<Params> rows = short_span_rows(s, device)) return *rows;
  if (const std::optional<Params> few = few_row_tiles_merged(s, device)) return *few;
  if (s.rows() > 16) {
    row.ctas_per_sm = std::max(row.ctas_per_sm, kMultiRowCtasPerSm);
    row.split_keys = std::min(row.split_keys, kMultiRowSplitKeys);
    if (s.rows() <= kMultiRowSmallTiles) block_m = 16;
  }
  Config c = with_splits(row, s, device, static_cast<int>(block_m), row.split_keys);
  // A grid under half a wave (few sequences and heads, short caches: b=4, hkv=2, nq=4,
  // nk=2000 took 48 CTAs) leaves SMs idle whatever its tiles: then smaller row tiles (the
  // K/V tiles are read once per row tile, from L2 after the first) and splits of half the
  // keys fill more of it. On the H100 that problem's fastest point had block_m=16 and 8
  // splits of 250 keys, 1.4x the 32-row, 6-split default
  // (benchmarks/results/fallback-h100-2026-11-23-evening.md).
  if (device.sm_count > 0)
    while (c.block_m > 16 && ctas(c, s) * 2 < device.sm_count) {
      const Config smaller = with_splits(row, s, device, c.block_m / 2, row.split_keys / 2);
      if (ctas(smaller, s) <= ctas(c, s)) break;
      c = smaller;
    }
  c = fewer_waves(with_kv_split(c, r, s, data_d, device), r, s, device);
  c = two_merged(c, r, s, device);
  // merge stays 0 here past 2 splits (d=32 and d=64 merge above): the splits merged took
  // 0.84-0.95x the combine's time within one wave of clusters on the H200, but clusters of 16
  // and grids of more clusters than the GPCs hold at once took 1.05-1.78x (they wait for free
  // SMs of one GPC); on six held-out problems (d = 64-256) a merge=1 default of those days was
  // 0.88-1.07x the time of the same tiles at merge=0, geometric mean 1.00
  // (benchmarks/results/decode-merge-h200-2026-12-02.md). The sweep picks merge=1 where it wins.
  return params_of(c);
}

}  // namespace

Params default_params(const Shape& s, std::int64_t data_d, const DeviceInfo& device,
                      const std::function<bool(const Params&)>& valid) {
  const DecodeDefaults* row = &kSmallest;
  for (const DecodeDefaults& r : kDefaults)
    if (r.d == s.d && device.cc_major >= r.cc_major) {
      row = &r;
      break;
    }
  Params p = params_for(*row, s, data_d, device);
  if (!valid(p) && p.values[kKvSplit] != 0) p.values[kKvSplit] = 0;  // padded rows then
  if (!valid(p) && p.values[kTma] != 0) p.values[kTma] = 0;  // a rule's tma=1 (short_span_rows)
  if (row != &kSmallest && !valid(p)) p = params_for(kSmallest, s, data_d, device);
  // Tensor-map copies (tma=1) where a KV head packs many rows: on the H100 (stop 73,
  // benchmarks/results/h100-stop73-2026-12-06.md) the defaults' tiles with tma=1 ran 1.17-1.40x
  // faster at all 4 problems of 64-128 packed rows of two design sets (27 problems; below 64
  // rows 0.94-1.22x, geometric mean ~1.02), and 1.08-1.26x at all 8 of 64-256 rows of the
  // check set written with this rule (geometric mean 1.19; d = 64, 112, 128, 256, causal or
  // not). A rule on keys per split, read from the first set, failed the second
  // (benchmarks/decode/NOTES.md). From 17 rows (stop 77, H100, h100-stop77-2026-12-07.md): the
  // check set written with the rule (tma_ab6.txt, 24-60 rows, d = 64, 112, 128) ran 0.998-1.299x,
  // geometric mean 1.073; exhaustive sweeps of 6 of its problems put the default at 0.950 of
  // the fastest point against 0.911 before. Under 17 rows (one row tile) d = 128 at 5-12 rows
  // was mixed in recorded sweeps (0.958-1.02x), so the rule stops there. In d=256's tiles,
  // whose cp.async form holds 255 registers (167 with tma=1), at any row count: 1.015-1.308x at
  // all 8 problems of 16-48 rows (stop 74, geometric mean 1.117), then 0.986-1.235x at 10 of
  // 1-12 rows of a set written with the rule (stop 77, tma_ab7.txt, geometric mean 1.045).
  const std::int64_t tma_min_rows = s.d == 256 ? kTmaMinRowsD256 : kTmaMinRows;
  if (device.cc_major >= 9 && s.rows() >= tma_min_rows) {
    Params t = p;
    t.values[kTma] = 1;
    if (valid(t)) p = t;
  }
  // On the H100 inside its sweeps' domain, the cost model's choice (cost_model.hpp) where it
  // predicts the rules' point more than kCostModelMargin slower. Cross-validated by problem over
  // the 166 recorded H100 sweeps of its domain (refit of 2026-12-07 stop 80, 200-131072 keys,
  // benchmarks/decode/fit_cost_model.py, each problem's pick from trees fitted without it): the
  // rules gave 0.921 of each fastest point (geometric mean; worst 0.585, 26 under 0.85), the
  // model with this margin 0.968 (worst 0.798, 2 under 0.85), computed from the recorded
  // medians. The first fit's dispatched defaults, timed on 16 problems swept after it (check
  // set 598-613, stop 80): 0.953 of the fastest, 0.905 -> 0.962 where they differed from the
  // rules'. The same trees do not carry to paged or varlen K/V (paged 0.966 -> 0.883, varlen
  // 0.946 -> 0.898 over their 10 and 6 sweeps, computed), which keep the rules
  // (benchmarks/decode/NOTES.md, stop 80).
  if (std::optional<Params> modelled = cost_model_params(s, data_d, device, p, valid))
    p = *modelled;
  return p;
}

}  // namespace ktune::decode
