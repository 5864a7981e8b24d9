// The flash attention op's built-in configurations (attention_defaults.hpp).
#include "templates/attention/attention_defaults.hpp"

#include <algorithm>
#include <optional>

#include "templates/attention/args_sm90.h"
#include "templates/device_class.hpp"

namespace ktune::attention {
namespace {

/// d=96 runs the wgmma kernel in d=128's shared layout (flash_attention_sm90_tile_cols), so its
/// Hopper defaults follow d=128's rules.
bool like_d128(std::int64_t d) { return d == 96 || d == 128; }

/// Built-in configuration per architecture and head dimension. Should not affect results, only
/// speed. The first row with cc_major <= the device's and the problem's d applies.
struct AttentionDefaults {
  int cc_major;  // first compute capability (major) this row applies to
  int d;         // head dimension
  int block_m;   // query rows per CTA
  int block_n;   // keys per K/V tile
  int warps;     // warps per CTA; each owns block_m / warps query rows (16 or 32)
  int stages;    // depth of the cp.async K/V ring
  int q_regs;    // 1: Q fragments stay in registers; 0: re-read from shared memory every tile
  int smem_pad;  // 1: shared rows padded by 16 bytes; 0: XOR swizzle
  int impl = 0;      // 1: the wgmma kernel (block_m / 64 consumers, warps = 4 per warpgroup)
  int pingpong = 0;  // impl=1: consumers take turns issuing their wgmmas
  int persistent = 0;  // impl=1: one CTA per SM looping over the query tiles
  int kv_apart = 0;    // impl=1, 2 stages: K freed after Q K^T, V after P V
};
constexpr AttentionDefaults kDefaults[] = {
    // Hopper, the wgmma kernel: the point that won most rows of exhaustive sweeps of the
    // ANCHORS table on the H100 (benchmarks/results/attention-wgmma-h100-2026-11-24.md): d=64 5
    // of 7 rows (1.08-1.13x the sm_80 row's default on the long ones), d=128 6 of 8 (up to
    // 1.43x; the 2 others, long causal rows, took 192x64 tiles without turns); d=256 the point
    // that won all three held-out d=256 sweeps (1.4-1.7x the mma.sync row below it,
    // benchmarks/results/fallback-h100-2026-11-24-wgmma.md). wgmma_single_consumer() takes
    // 64-row tiles for short grids. Varlen problems, which the wgmma kernel does not take, go on
    // to the mma.sync rows.
    {9, 64, 192, 128, 16, 3, 0, 0, 1, 1},
    {9, 64, 128, 128, 12, 3, 0, 0, 1, 1},  // where the row above spills (a window, ALiBi)
    {9, 128, 128, 128, 12, 3, 0, 0, 1, 1},
    // d=96 on the same kernel (its tiles padded to d=128's shared layout, the products at 96
    // columns): d=128's row and rules (like_d128), where the mma.sync row below held
    // 0.66-0.82x cuDNN on the H200 (benchmarks/results/attention-d96-h200-2026-12-04.md).
    {9, 96, 128, 128, 12, 3, 0, 0, 1, 1},
    // d=256: two consumers of 80-key tiles taking turns, in 2 stages with K and V freed apart
    // (d256_single_consumer() for short grids); the row below where that cannot run (paged,
    // varlen, a window or ALiBi).
    {9, 256, 128, 80, 12, 2, 0, 0, 1, 1, 0, 1},
    {9, 256, 64, 64, 8, 3, 0, 0, 1, 0},
    // Hopper: the fastest point of exhaustive sweeps of two held-out problems per head dim on
    // the H100 (benchmarks/results/fallback-h100-2026-11-23{,-evening}.md), the same point for
    // both, where the sm_80 rows below were 0.74-0.89x (d=32: b=4,hq=16,nq=nk=2048 and
    // b=2,hq=16,nq=nk=3000 causal), 0.77-0.82x (d=96: b=2,hq=24,nq=nk=4096 and
    // b=4,hq=12,nq=nk=1500 causal) and 0.81-0.83x (d=256: b=2,hq=16,nq=nk=4096, causal and not)
    // of it. The d=32 and d=96 points spill a few registers (attention_compile_test holds them to
    // what they spilled when measured): timing, not the spill count, decides. d=256 with three
    // stages needs 160 KiB of shared memory, within Hopper's 227 KiB.
    {9, 32, 128, 128, 4, 3, 1, 0},
    {9, 96, 128, 64, 4, 2, 0, 0},
    {9, 256, 128, 32, 8, 3, 1, 0},
    // sm_80 and later; Hopper runs this mma.sync kernel too (a wgmma variant would add sm_90
    // rows above these). D=64 and D=128: best of the ANCHORS table on H100
    // (benchmarks/attention/NOTES.md, v4); the other head dims are the configs checked there.
    {8, 32, 128, 64, 8, 2, 1, 0},
    {8, 64, 128, 64, 4, 2, 1, 0},
    {8, 96, 128, 64, 8, 2, 1, 0},
    {8, 128, 128, 64, 4, 2, 0, 0},
    {8, 256, 128, 32, 8, 2, 0, 0},  // 128 KiB of shared memory: fits sm_80's 163 KiB
};
/// Few query tiles (d=64 and d=128, the head dims it was measured at): 64-row tiles (4 warps, Q
/// in registers) instead of 128-row ones when
///  - the 128-row grid is under one wave (every 64-row CTA then runs at once, two per SM where
///    there are more than SMs), or
///  - ceil(CTAs / SMs) waves of 64-row tiles, each costing kHalfTileCost of a 128-row one (the
///    same K/V stream, half the math), take less than the 128-row grid's waves.
/// On the H100 (benchmarks/results/fallback-h100-2026-11-23-evening.md) this picks the faster tile
/// height of eight of the nine held-out problems it was read from: 64 rows at nq=64 (128 CTAs of
/// 128 rows), nq=96 (72), nq=128 (64), nq=300 (300), nq=777 (336); 128 rows at nq=200 (256 CTAs:
/// 4 waves of 64-row tiles), nq=420 (384), nq=5000 (480) and the ANCHORS table's shapes. The
/// miss: nq=500, nk=2500 (160 CTAs; 128 rows 1.07x faster).
constexpr double kHalfTileCost = 0.55;
/// Keys from which the 64-row tile streams K/V in 128-key tiles: the fastest point of each
/// 64-row problem above with nk >= 1999 had block_n=128 (1.1-1.15x the 64-key tile), except
/// nq=96 (144 CTAs on 132 SMs), whose 64-key tiles let two CTAs share an SM (112 KiB each; the
/// 128-key ones need 144 KiB): 1.2x the fastest 128-key point.
constexpr std::int64_t kHalfTileLongKeys = 1024;

}  // namespace

/// The short-grid rule above on `device`: 0 when the problem keeps the row's 128-row tiles, else
/// the block_n of its 64-row tiles (`row_block_n`, or 128 for long key sequences).
int short_grid_block_n(const Shape& s, const DeviceInfo& device, int row_block_n) {
  if ((s.d != 64 && s.d != 128) || device.sm_count <= 0) return 0;
  const std::int64_t sms = device.sm_count;
  const auto ctas = [&](std::int64_t rows) { return s.b * s.hq * ((s.nq + rows - 1) / rows); };
  const auto waves = [&](std::int64_t rows) {
    return static_cast<double>((ctas(rows) + sms - 1) / sms);
  };
  const bool sub_wave = ctas(128) <= sms;
  if (!sub_wave && !(waves(64) * kHalfTileCost < waves(128))) return 0;
  const bool shared_sms = sub_wave && ctas(64) > sms;  // two 64-row CTAs on some SMs
  return s.nk >= kHalfTileLongKeys && !shared_sms ? 128 : row_block_n;
}

/// Whether the wgmma kernel's default at d=64 and d=256 takes one consumer warpgroup's 64-row
/// tiles instead of the row's `block_m`: when the query rows fit one such tile (nq <= 64), when
/// 128-row tiles would fill at most half of the SMs (twice the CTAs then still fit one wave), or
/// when 192-row tiles would be more than a quarter padding. From exhaustive sweeps of 24
/// held-out problems on the H100 (benchmarks/results/fallback-h100-2026-11-24-wgmma.md): 64-row
/// tiles were fastest at d=64 for nq=420 (3 tiles of 192 for 420 rows) and at d=256 everywhere
/// (its row has 64 already).
bool wgmma_single_consumer(const Shape& s, const DeviceInfo& device, int block_m) {
  if (s.nq <= kSm90RowsPerConsumer) return true;
  const std::int64_t tiles128 = s.b * s.hq * ((s.nq + 127) / 128);
  if (device.sm_count > 0 && 2 * tiles128 <= device.sm_count) return true;
  if (block_m <= 128) return false;
  const std::int64_t padded = (s.nq + block_m - 1) / block_m * block_m;
  return 4 * (padded - s.nq) > s.nq;
}

/// Whether the d=256 wgmma default (2-stage rings, K and V freed apart) takes one consumer's
/// 64-row tiles of 80 keys instead of the row's two consumers of 128 rows: where
/// wgmma_single_consumer() says (nq <= 64, or 128-row tiles fill at most half the SMs), and
/// under a causal mask where the 128-row tiles are fewer than two waves (the persistent grid of
/// 64-row tiles, longest first, evens out the uneven causal work). From exhaustive sweeps on the
/// H200 (benchmarks/results/attention-kv-apart-h200-2026-12-03.md): the 64-row tiles were the
/// fastest point at 16-64 tiles (short grids) and at 128, 192 and 256 causal tiles; 128-row
/// tiles at 320+ causal tiles and at 224+ without the mask.
bool d256_single_consumer(const Shape& s, const DeviceInfo& device) {
  if (wgmma_single_consumer(s, device, 128)) return true;
  const std::int64_t tiles128 = s.b * s.hq * ((s.nq + 127) / 128);
  return s.causal && device.sm_count > 0 && tiles128 < 2 * device.sm_count;
}

namespace {


/// The wgmma kernel's tiles at d=128 on Hopper: of 64 rows (one consumer), 128 (two, taking
/// turns) and 192 (three, taking turns, 64-key tiles), the one whose grid costs least, counting
/// ceil(CTAs / SMs) waves at 0.8, 1 and 1.5 per wave (a 64-row CTA runs one consumer on its SM,
/// a 192-row one 1.5 times the rows of a 128-row one); ties keep 128. From exhaustive sweeps on
/// the H100 (benchmarks/results/fallback-h100-2026-11-24-wgmma.md): it picks the fastest tile
/// height at nq=64 and 128 (64 rows), 80, 96, 256, 1000 and 4096 (128), 180 and 500 (192: one
/// wave of 96 and 120 CTAs against two of 128 rows); at nq=300 (b=5, hq=20) it keeps 128 rows,
/// 0.82x of that sweep's fastest (mma.sync 64-row tiles, two CTAs per SM).
AttentionDefaults wgmma_d128_tiles(const Shape& s, const DeviceInfo& device) {
  const AttentionDefaults one = {9, 128, 64, 128, 8, 3, 0, 0, 1, 0};
  const AttentionDefaults two = {9, 128, 128, 128, 12, 3, 0, 0, 1, 1};
  const AttentionDefaults three = {9, 128, 192, 64, 16, 3, 0, 0, 1, 1};
  if (s.nq <= kSm90RowsPerConsumer) return one;
  if (device.sm_count <= 0) return two;
  const auto cost = [&](std::int64_t rows, double per_wave) {
    const std::int64_t ctas = s.b * s.hq * ((s.nq + rows - 1) / rows);
    return static_cast<double>((ctas + device.sm_count - 1) / device.sm_count) * per_wave;
  };
  const double c64 = cost(64, 0.8), c128 = cost(128, 1.0), c192 = cost(192, 1.5);
  if (c64 < c128 && c64 < c192) return one;
  if (c192 < c128) return three;
  return two;
}

/// Query rows from which causal d=128 problems take 192-row tiles of 64 keys (see default_params):
/// between the 1024 rows where 128-row tiles won and the 3000 where 192-row ones did.
constexpr std::int64_t kCausal192MinRows = 2048;

/// Keys up to which the wgmma defaults with 2 or 3 consumers run persistently (one CTA per SM
/// looping over the query tiles) without a causal mask: where a tile's keys are few, its
/// prologue (Q and the first K/V tiles) and epilogue (P V's tail, O) weigh enough that
/// overlapping them with the next tile's pays. From exhaustive sweeps of the ANCHORS rows on the
/// H100 (benchmarks/results/attention-persistent-h100-2026-11-24.md): d=128 1.06-1.16x at nk =
/// 512-4096, 0.98-0.99x at 8192 and 16384; d=64 1.01-1.10x at 512 and 1024, 0.94-0.98x from
/// 2048. A window bounds the keys a tile sees like a short sequence.
std::int64_t persistent_max_keys(std::int64_t d) {
  return d == 64 ? 1024 : like_d128(d) ? 4096 : 0;
}

/// Whether the wgmma default with tiles of `rows` query rows runs persistently (given more tiles
/// than SMs). d=256 (one consumer's 64-row tiles): always, the fastest point of 3 of 4 held-out
/// d=256 sweeps on the H100 and 0.885 of the 4th (the default without it: 0.80-0.97;
/// benchmarks/results/fallback-h100-2026-11-24-short-keys.md). d=64 and 128 with one consumer:
/// never (0.55-0.8x; few keys have their own rule, wgmma_short_keys_tiles). With 2 or 3
/// consumers: under a causal mask always (the tiles' work grows with their index, and the
/// persistent grid runs the longest first, alternating its CTAs' order per pass: 1.13-1.24x on
/// the causal ANCHORS rows but the longest, 0.97x at d=128, nk=16384), otherwise up to
/// persistent_max_keys.
bool wgmma_persistent(const Shape& s, int rows) {
  if (s.d == 256) return true;
  if ((s.d != 64 && !like_d128(s.d)) || rows <= kSm90RowsPerConsumer) return false;
  if (s.causal) return true;
  const std::int64_t keys = s.window > 0 ? std::min(s.nk, s.window) : s.nk;
  return keys <= persistent_max_keys(s.d);
}

/// The wgmma kernel's tiles on Hopper for few keys (nk <= kWgmmaMinKeys) at d=64 and 128, or
/// nullopt where the mma.sync kernel's smaller CTAs should run instead. With one to five key
/// tiles per query tile, a tile's cost is mostly its padded query rows and its prologue: the
/// tile height (64 rows at d=64 or when the rows fit one consumer, else 128 or 192) that pads
/// the fewest rows, ties to the taller; 64-key tiles, 3 stages, no turns, persistent over more
/// tiles than SMs with 2-3 consumers, and with one at d=128 (0.75-1.0 of each sweep's optimum
/// against 0.57-0.8 without; at d=64 one consumer without was ahead on 10 of 11 sweeps).
/// Where those tiles number no more than the SMs, the persistent grid has nothing to overlap and
/// part of the GPU idles, and with a single key tile the wgmma pipeline never runs: nullopt;
/// except d=128 over more than 64 query rows, which takes the smallest of 128 or 192 rows whose
/// tiles still fit the SMs (one tile per CTA). Causal: 64-key tiles, not persistent; after the
/// softmax's masked and unmasked tiles got their own code
/// (benchmarks/results/attention-mask-split-h100-2026-11-24.md) those were 0.955-1.0 of each
/// sweep's optimum on 5 such H100 sweeps, where the mma.sync default held 0.80-0.85
/// (b=1,hq=64,nq=300 needs 192: its 128-row tiles, 1.45 waves, 0.76). Not causal: consumers
/// taking turns, 128-key tiles in 2 stages at 128 rows unless they pad more keys than 64-key
/// tiles in 3 (and at 192 rows), the persistent code path at 128 rows (still one tile per CTA,
/// measured faster); once the wgmma kernel's O left in 16-byte stores, the mma.sync default held
/// 0.54-0.94 of the optimum on the 7 such H100 sweeps (design set,
/// benchmarks/results/fallback-h100-2026-11-24-noncausal-wave.md), where these tiles were the
/// fastest point or within 1 % of it on each.
/// Before all of that: where one consumer's 64-row tiles fit the SMs, those (64-key tiles under a
/// causal mask, else 128), not persistent: the most CTAs one wave holds. On the 5 such held-out
/// H100 sweeps (d=64 and 128, causal or not) a 64-row wgmma point was fastest in 9 of 10 sweep
/// runs, where the defaults above held 0.85-0.95 of the optimum
/// (benchmarks/results/fallback-h100-2026-11-24-one-consumer.md has the check set swept after).
/// From exhaustive sweeps on the H100 (benchmarks/results/fallback-h100-2026-11-24-short-keys.md):
/// 12 held-out problems with 64-300 query rows and 100-300 keys (design set; the persistent
/// kernel beat the mma.sync defaults by 1.2-1.45x on most, which held 0.68-0.99 of each
/// optimum), then 8 more (check set), two of which (nq=48 at d=128: one consumer, persistent
/// 1.26x; nq=nk=64: mma.sync 1.32x) set the last two clauses.
std::optional<AttentionDefaults> wgmma_short_keys_tiles(const Shape& s, const DeviceInfo& device) {
  if ((s.d != 64 && !like_d128(s.d)) || device.sm_count <= 0) return std::nullopt;
  const auto padded = [&](std::int64_t rows) { return (s.nq + rows - 1) / rows * rows; };
  std::int64_t rows = 192;
  for (const std::int64_t r : {128, 64}) {
    if (r == 64 && s.d != 64 && s.nq > kSm90RowsPerConsumer) continue;
    if (padded(r) < padded(rows)) rows = r;
  }
  const auto fits_one_wave = [&](std::int64_t r) {
    return flash_attention_sm90_work(static_cast<int>(s.nq), static_cast<int>(r), s.b * s.hq) <=
           device.sm_count;
  };
  // Key tiles of block_n (64 unless said) and r rows, 3 stages unless said, turns if said.
  const auto tiles = [&](std::int64_t r, bool persistent, int block_n = 64, int stages = 3,
                         bool pingpong = false) {
    const int consumers = static_cast<int>(r / kSm90RowsPerConsumer);
    return AttentionDefaults{9, static_cast<int>(s.d), static_cast<int>(r), block_n,
                             4 * (consumers + 1), stages, 0, 0, 1, pingpong ? 1 : 0,
                             persistent ? 1 : 0};
  };
  if (s.nk <= 64) return std::nullopt;
  if (fits_one_wave(kSm90RowsPerConsumer))
    return tiles(kSm90RowsPerConsumer, false, s.causal ? 64 : 128);
  if (fits_one_wave(rows)) {
    if (!like_d128(s.d) || s.nq <= kSm90RowsPerConsumer) return std::nullopt;
    const std::int64_t r = fits_one_wave(128) ? 128 : 192;
    if (s.causal) return tiles(r, false);
    // Without a mask: consumers taking turns, 128-key tiles in 2 stages at 128 rows where they
    // pad no more keys than 64-key ones, else 64-key tiles in 3; the persistent code path at 128
    // rows (one tile per CTA here, but 0.5-6 % faster on 5 of the 6 sweeps of such tiles).
    const bool wide = r == 128 && (s.nk + 127) / 128 * 128 == (s.nk + 63) / 64 * 64;
    return tiles(r, r == 128, wide ? 128 : 64, wide ? 2 : 3, true);
  }
  return tiles(rows, rows > kSm90RowsPerConsumer || like_d128(s.d));
}

/// d=64 on a Hopper device with the H200's fast memory (fast_memory_per_sm; unknown: no), a
/// plain problem (contiguous K/V, no window, ALiBi or soft-capping), more than 64 query rows
/// and keys: where wgmma_single_consumer()'s padding clause alone would give one consumer's
/// 64-row tiles (192-row tiles more than a quarter padding) and 128-row tiles fill more than 3/4
/// of the SMs, tiles of 192 or 128 rows: the fewer ceil(tiles / SMs) waves, a 192-row wave
/// costing 1.5 of a 128-row one (wgmma_d128_tiles' model); on equal costs the height that pads
/// fewer query rows, 192 on a tie. 192 rows: three consumers, 3 stages, persistent, in 64-key
/// tiles without turns, or from kHalfTileLongKeys keys the row's 128-key tiles taking turns;
/// 128 rows: 128 x 128 of two consumers taking turns, 2 stages, K and V freed apart,
/// persistent (64-key tiles at few keys, below). Else nullopt. From exhaustive sweeps of 37
/// held-out problems on the H200 (2026-12-03, 80-768 heads, nq 100-700, 100-16384 keys;
/// benchmarks/results/fallback-h200-2026-12-03-prefill-d64-rule.md), where one consumer's tiles
/// ran 0.63-0.99 of each sweep's fastest point (0.855 geometric mean), in four rounds each
/// checked on problems written before their sweep: padding alone (design set 0.987, check set
/// 0.986, failed a second at 2000-4096 keys: 0.916, worst 0.816); 128-key tiles at 192 rows from
/// 1024 keys (its check set 0.960, worst 0.822: 192-row tiles over 1.2 waves where 128-row ones
/// fit in 2); the waves model read from all 31 so far, its check set 0.981, worst 0.894 (padding
/// alone: 0.880 / 0.786 there). All 37: 0.980, worst 0.862. The H100's sweeps (nq=420) chose
/// one consumer, so it keeps that.
std::optional<AttentionDefaults> d64_tile_height(const Shape& s, const DeviceInfo& device) {
  if (s.d != 64 || device.cc_major != 9 || device.sm_count <= 0 || s.paged() || s.varlen ||
      s.window > 0 || s.alibi || s.softcap || s.nq <= kSm90RowsPerConsumer || s.nk <= 64 ||
      !fast_memory_per_sm(device))
    return std::nullopt;
  const auto tiles = [&](std::int64_t rows) { return s.b * s.hq * ((s.nq + rows - 1) / rows); };
  // With 128-row tiles on at most 3/4 of the SMs the earlier rules' one consumer or mma.sync
  // tiles were the fastest points (72-96 such tiles, 2026-12-03 sweeps).
  if (!wgmma_single_consumer(s, device, 192) || 4 * tiles(128) <= 3 * device.sm_count)
    return std::nullopt;
  const auto waves = [&](std::int64_t rows) {
    return (tiles(rows) + device.sm_count - 1) / device.sm_count;
  };
  const auto padded = [&](std::int64_t rows) { return (s.nq + rows - 1) / rows * rows; };
  const std::int64_t cost192 = 3 * waves(192), cost128 = 2 * waves(128);  // in half waves
  if (cost192 < cost128 || (cost192 == cost128 && padded(192) <= padded(128))) {
    if (s.nk >= kHalfTileLongKeys) return AttentionDefaults{9, 64, 192, 128, 16, 3, 0, 0, 1, 1, 1};
    return AttentionDefaults{9, 64, 192, 64, 16, 3, 0, 0, 1, 0, 1};
  }
  // 64-key tiles where one 128-key tile would hold every key, under a causal mask up to 256
  // keys, and up to 320 keys where they pad fewer keys than 128-key ones. Read from the 31
  // problems given 128 x 128 so far (stop 51, 2026-12-04; nq = nk = 90-128: 0.87-0.94 -> 0.96-0.99
  // of their sweeps' fastest), first with the causal bound at 512, which its check set refuted
  // at 400 and 460 keys (0.97 / 0.94 -> 0.89 / 0.92) while confirming the rest (80-120 keys
  // 0.88-0.95 -> 0.95-1.00, causal 230 keys 0.978 -> 0.991). The padding clause (stop 52): at
  // 150-310 keys 64-key tiles were 1.01-1.10x the 128-key ones in all 17 sweeps where they pad
  // less; at 400-430 keys 0.92-1.02x (a bound at 448, predicted on 281-287, failed there).
  const auto keys_padded = [&](std::int64_t n) { return (s.nk + n - 1) / n * n; };
  const bool pads_less = s.nk <= 320 && keys_padded(64) < keys_padded(128);
  const int block_n = s.nk <= 128 || (s.causal && s.nk <= 256) || pads_less ? 64 : 128;
  return AttentionDefaults{9, 64, 128, block_n, 12, 2, 0, 0, 1, 1, 1, 1};
}

/// The mma.sync kernel's key tile for few keys on Hopper (its 64-row tiles, with 3 stages when
/// 32 keys): 32 keys at d=64 (ahead of 64 on 21 of the 23 d=64 sweeps above, by up to 1.4x at
/// b=16,hq=8,nq=nk=150), and at d=128 where they pad fewer keys than `block_n`'s tiles (mixed
/// there: within 10 % either way on most), else `block_n`.
int short_keys_block_n(const Shape& s, int block_n) {
  const auto padded = [&](std::int64_t n) { return (s.nk + n - 1) / n * n; };
  return s.d == 64 || padded(32) < padded(block_n) ? 32 : block_n;
}

/// Smallest tiles, for a device with less shared memory than the row above assumes
/// (96 KiB at d=256).
constexpr AttentionDefaults kSmallest = {8, 0, 64, 32, 4, 2, 0, 0};

}  // namespace

Params default_params(const Shape& s, DType t, const DeviceInfo& device,
                      const std::function<bool(const Params&)>& valid) {
  if (t == DType::e4m3) {
    // The wgmma kernel's e4m3 point that won most rows of the harness (d=128: two consumers
    // taking turns, 4 stages; d=256: 2 stages fit), persistent under a causal mask where the
    // tiles outnumber the SMs (benchmarks/results/attention-fp8-h100-2026-11-24.md). Invalid
    // elsewhere than sm_90a and d = 128/256, with the reason.
    // (Not at d=256, where the persistent causal kernel spills: attention_compile_test.)
    const int persistent = s.causal && s.d == 128 && device.sm_count > 0 &&
                           flash_attention_sm90_work(static_cast<int>(s.nq), 128, s.b * s.hq) >
                               device.sm_count;
    // At d=256 K and V freed apart: 1.2x the same point without on the H200
    // (b=2,hq=16,nq=nk=4096: 491 against 588 us, attention-kv-apart-h200-2026-12-03.md).
    return Params{{128, 128, 12, s.d == 256 ? 2 : 4, 0, 0, 1, 1, persistent, 1,
                   s.d == 256 ? 1 : 0}};
  }
  const auto params = [](const AttentionDefaults& r) {
    return Params{
        {r.block_m, r.block_n, r.warps, r.stages, r.q_regs, r.smem_pad, r.impl, r.pingpong,
         r.persistent, 1, r.kv_apart}};
  };
  for (const AttentionDefaults& row : kDefaults) {
    if (row.d != s.d || device.cc_major < row.cc_major) continue;
    const bool short_keys = device.cc_major == 9 && s.nk <= kWgmmaMinKeys;
    if (row.impl == 1 && row.d == 64 && row.block_m == 192) {
      // H200-like devices: 192 or 128 rows where one consumer's would run (d64_tile_height).
      const std::optional<AttentionDefaults> tiles = d64_tile_height(s, device);
      if (tiles && valid(params(*tiles))) return params(*tiles);
    }
    if (row.impl == 1 && short_keys) {
      // Few keys: the tiles of wgmma_short_keys_tiles, or the mma.sync rows below.
      const std::optional<AttentionDefaults> tiles = wgmma_short_keys_tiles(s, device);
      if (tiles && valid(params(*tiles))) return params(*tiles);
      continue;
    }
    // Paged on mma.sync: 16 query rows per warp. The page ids and the sequence's own key
    // count cost registers, and with the rows' 32 rows per warp the kernel spilled 28 (d=64)
    // and 96-176 (d=128) bytes at 255 registers on sm_80 (NVRTC, CUDA 13.0), none with 16.
    // Not timed: no sm_80 GPU here, and sm_90a takes the wgmma rows.
    AttentionDefaults r = row;
    if (s.paged() && r.impl == 0 && r.block_m == 32 * r.warps) r.warps *= 2;
    const Params p = params(r);
    // A wgmma row the problem cannot take gives way to the mma.sync row below it;
    // an mma.sync row that does not fit goes to the smallest tiles.
    if (!valid(p)) {
      if (row.impl == 1) continue;
      break;
    }
    if (row.impl == 1) {
      // Persistent where wgmma_persistent() says and the tiles outnumber the SMs (with fewer,
      // each CTA would run one tile, as without).
      // Not for a paged cache under a causal mask: the persistent grid takes tiles longest
      // first by their index, which sequences of their own lengths make wrong. Exhaustive
      // sweeps on the H100 (page 16, lengths of the tuner's fill; 2026-11-25): one CTA per tile
      // 1.11x (b=2,hq=32,hkv=8,nq=nk=4096,d=128) and 1.17x (b=8, nq=512, nk=4096) faster;
      // without the mask persistent stayed level (1.01x, page 64, d=128, nq=nk=4096).
      const auto persistent = [&](Params q) {
        const int rows = static_cast<int>(q.values[kBlockM]);
        if (!wgmma_persistent(s, rows) || device.sm_count <= 0 || (s.paged() && s.causal) ||
            flash_attention_sm90_work(static_cast<int>(s.nq), rows, s.b * s.hq) <=
                device.sm_count)
          return q;
        Params with = q;
        with.values[kPersistent] = 1;
        return valid(with) ? with : q;
      };
      if (like_d128(s.d)) {
        AttentionDefaults tiles = wgmma_d128_tiles(s, device);
        // Causal with enough 192-row tiles to fill the GPU and at least kCausal192MinRows
        // query rows: three consumers of 64-key tiles without turns, persistent, were the
        // fastest persistent point of the 3 causal d=128 ANCHORS sweeps (1.05-1.07x the
        // 128-row tiles taking turns) and of held-out sweeps at nq = 3000-12000 (1.03-1.18x);
        // at nq = 1000 and 1024 the 128-row tiles taking turns were 1.11-1.13x faster
        // (benchmarks/results/fallback-h100-2026-11-24-short-keys.md, last section).
        if (s.causal && s.nq >= kCausal192MinRows && device.sm_count > 0 &&
            flash_attention_sm90_work(static_cast<int>(s.nq), 192, s.b * s.hq) >=
                device.sm_count)
          tiles = {9, 128, 192, 64, 16, 3, 0, 0, 1, 0};
        const Params chosen = params(tiles);
        if (valid(chosen)) return persistent(chosen);
        return persistent(p);
      }
      if (s.d == 256 && row.kv_apart) {
        // One consumer's 64-row tiles of 80 keys (persistent over more tiles than SMs) where
        // d256_single_consumer() says; a problem that cannot take K and V apart goes on to the
        // row below.
        if (d256_single_consumer(s, device)) {
          const Params one = params({9, 256, 64, 80, 8, 2, 0, 0, 1, 0, 0, 1});
          if (valid(one)) return persistent(one);
          continue;
        }
        return persistent(p);  // (not taken with two consumers: it would spill)
      }
      // Varlen at d=256: the row's 64-row tiles are its persistent form's, which a packed
      // batch cannot take (one CTA per query tile); two consumers of 64-key tiles taking turns
      // were that sweep's fastest, 1.26x the 64-row tiles (b=4,hq=16,nq=nk=4096, causal;
      // benchmarks/results/attention-varlen-h100-2026-11-25.md).
      if (s.varlen && s.d == 256) {
        const Params two = params({9, 256, 128, 64, 12, 2, 0, 0, 1, 1});
        if (valid(two)) return two;
      }
      // d=64 and d=256: one consumer's 64-row tiles where the row's tiles would leave the GPU
      // or the tiles half empty.
      if (wgmma_single_consumer(s, device, row.block_m)) {
        const Params one = params({row.cc_major, row.d, 64, 64, 8, 3, 0, 0, 1, 0});
        if (valid(one)) return persistent(one);
      }
      return persistent(p);
    }
    // Few query tiles: halve them when the GPU's idle share of the last wave costs more.
    int block_n = row.block_m == 128 ? short_grid_block_n(s, device, row.block_n) : 0;
    if (short_keys && block_n > 0) block_n = short_keys_block_n(s, block_n);
    if (block_n > 0) {
      const int stages = short_keys && block_n == 32 ? 3 : row.stages;
      const Params half = params({row.cc_major, row.d, 64, block_n, 4, stages, 1, 0});
      if (valid(half)) return half;
    }
    return p;
  }
  return params(kSmallest);
}

}  // namespace ktune::attention
