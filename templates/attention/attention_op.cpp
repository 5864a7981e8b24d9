// Host side of flash attention forward: the problem, the search space with a reason for every
// invalid point, per-architecture defaults, and the launches of the kernel and its reference.
#include "templates/attention/attention_op.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ktune/error.hpp"
#include "templates/attention/args.h"
#include "templates/attention/args_sm90.h"
#include "templates/kernel_tensor_map.hpp"

namespace ktune {
namespace {

// Problem dimensions and tunables, in declared order.
enum Dim : std::size_t {
  kB, kHq, kHkv, kNq, kNk, kD, kCausal, kWindow, kSoftcap, kAlibi, kVarlen, kPage
};
enum Param : std::size_t {
  kBlockM, kBlockN, kWarps, kStages, kQRegs, kSmemPad, kImpl, kPingpong, kPersistent, kRegSplit,
  kKvApart
};

constexpr std::int64_t kMaxGridY = 65535;                      // b * hq rows of the grid
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 30;        // int positions: row + nk < 2^31
constexpr std::int64_t kMaxRowStride = std::int64_t{1} << 23;  // a tile's offsets are 32-bit
constexpr std::int64_t kRowAlign = 8;                          // elements: 16-byte rows
constexpr std::int64_t kMaxRows = 2147483647;                  // varlen: int32 row offsets
constexpr unsigned kReferenceThreads = 256;                    // 8 query rows per block
constexpr std::int64_t kHeadDims[] = {32, 64, 96, 128, 256};
constexpr std::int64_t kPages[] = {0, 16, 32, 64, 128, 256};   // 0: contiguous K/V
constexpr std::int64_t kMaxPageIds = 2147483647;              // int32 block table entries

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

/// A problem of 7 values (flash_decode's, which shares the first 7 dims and delegates its
/// tensors and reference here) has every mask variant, varlen and paging off.
Shape shape_of(const Problem& p) {
  const std::vector<std::int64_t>& v = p.values;
  const auto at = [&](Dim i) { return i < v.size() ? v[i] : 0; };
  return {v[kB], v[kHq], v[kHkv], v[kNq], v[kNk], v[kD], v[kCausal] != 0,
          at(kWindow), at(kSoftcap) != 0, at(kAlibi) != 0, at(kVarlen) != 0, at(kPage)};
}

/// The cu_seqlens the tuner fills for a varlen problem: lengths in [1, nq] and [1, nk] (the
/// first sequence the longest, the second the shortest), from one fixed seed for both, so that
/// with nq = nk each sequence has as many keys as queries (packed prefill).
Fill query_offsets(const Shape& s) { return Fill::seq_offsets(1, s.nq); }
Fill key_offsets(const Shape& s) { return Fill::seq_offsets(1, s.nk); }

/// Score-value pairs a row sees, summed over rows: sum over i in [0, nq) of clamp(i + c, 0, nk),
/// the keys j < i + c (bottom-right aligned bounds), in closed form.
double clamped_sum(std::int64_t c, std::int64_t nq, std::int64_t nk) {
  // x = i + c runs over [c, c + nq - 1]: 0 below 0, x on [0, nk], nk above.
  const std::int64_t lo = std::max<std::int64_t>(c, 0), hi = std::min(c + nq - 1, nk);
  double sum = 0.0;
  if (lo <= hi) sum += (static_cast<double>(lo) + static_cast<double>(hi)) *
                       static_cast<double>(hi - lo + 1) / 2.0;
  const std::int64_t above = c + nq - 1 - std::max(nk, c - 1);  // x in (nk, c + nq - 1]
  if (above > 0) sum += static_cast<double>(above) * static_cast<double>(nk);
  return sum;
}

/// Score-value pairs computed for one sequence of nq queries and nk keys (see flops()).
double pairs(const Shape& s, std::int64_t nq, std::int64_t nk) {
  // Row i sees keys j < i + nk - nq + 1 (causal; else all nk) less those
  // j < i + nk - nq - window + 1 (a window), each count clamped to [0, nk].
  const std::int64_t shift = nk - nq;
  double n = s.causal ? clamped_sum(shift + 1, nq, nk)
                      : static_cast<double>(nq) * static_cast<double>(nk);
  if (s.window > 0) n -= clamped_sum(shift - s.window + 1, nq, nk);
  return n;
}

struct Config {
  int block_m, block_n, warps, stages;
  bool q_regs, smem_pad;
  int impl;
  bool pingpong;
  bool persistent;
  bool reg_split;
  bool kv_apart;
};

Config config_of(const Params& p) {
  const auto at = [&](Param i) { return static_cast<int>(p.values[i]); };
  return {at(kBlockM),    at(kBlockN),        at(kWarps),
          at(kStages),    at(kQRegs) != 0,    at(kSmemPad) != 0,
          at(kImpl),      at(kPingpong) != 0, at(kPersistent) != 0,
          at(kRegSplit) != 0, at(kKvApart) != 0};
}

/// The wgmma kernel's consumer warpgroups: one per 64 query rows.
int consumers(const Config& c) { return c.block_m / kSm90RowsPerConsumer; }

/// Bytes of one element of q, k and v: e4m3 1, the 16-bit types 2.
int elem_bytes(DType t) { return static_cast<int>(dtype_size(t)); }

/// `page`: the paged kernels' page size (impl=0 keeps two slots of page ids after its ring).
unsigned smem_bytes(const Config& c, std::int64_t d, DType t, std::int64_t page = 0) {
  if (c.impl == 1)
    return flash_attention_sm90_smem_bytes(static_cast<int>(d), c.block_n, consumers(c),
                                           c.stages, elem_bytes(t), c.kv_apart);
  return flash_attention_smem_bytes(static_cast<int>(d), c.block_m, c.block_n, c.stages,
                                    c.smem_pad, static_cast<int>(page));
}

std::string str(std::int64_t v) { return std::to_string(v); }

const char* kernel_type(DType t) {
  return t == DType::e4m3 ? "ktune::e4m3" : t == DType::bf16 ? "ktune::bf16" : "ktune::fp16";
}
const char* cpp_bool(bool b) { return b ? "true" : "false"; }

/// The template arguments of the mask variants: ", WINDOW, SOFTCAP, ALIBI", then unless
/// `varlen` is false ", VARLEN" where varlen is on or the problem is paged and ", PAGE" where it
/// is paged (left to their defaults otherwise, so that names written before them stay the same;
/// the wgmma kernel takes VARLEN and PAGE last: varlen_page_args()).
std::string varlen_page_args(const Shape& s) {
  return std::string(s.varlen_or_paged() ? std::string(", ") + cpp_bool(s.varlen) : "") +
         (s.paged() ? ", " + std::to_string(s.page) : "");
}
std::string variant_args(const Shape& s, bool varlen = true) {
  return std::string(", ") + cpp_bool(s.window > 0) + ", " + cpp_bool(s.softcap) + ", " +
         cpp_bool(s.alibi) + (varlen ? varlen_page_args(s) : "");
}

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
    // d=256: two consumers of 80-key tiles taking turns, in 2 stages with K and V freed apart
    // (d256_tiles() for short grids); the row below where that cannot run (paged, varlen).
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

/// Keys up to which the defaults keep the mma.sync kernel on Hopper: with five or fewer 64-key
/// tiles per row block the wgmma kernel's pipeline never fills (its producer, barriers and the
/// first unoverlapped Q K^T), and the mma.sync kernel's smaller CTAs, two per SM, won: 1.22x at
/// b=5,hq=20,nq=nk=300,d=128 and 1.3x at b=16,hq=8,nq=nk=150,d=64 (H100 sweeps,
/// benchmarks/results/fallback-h100-2026-11-24-wgmma.md); from 420 keys on the wgmma kernel won
/// or tied.
constexpr std::int64_t kWgmmaMinKeys = 320;

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
std::int64_t persistent_max_keys(std::int64_t d) { return d == 64 ? 1024 : d == 128 ? 4096 : 0; }

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
  if ((s.d != 64 && s.d != 128) || rows <= kSm90RowsPerConsumer) return false;
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
  if ((s.d != 64 && s.d != 128) || device.sm_count <= 0) return std::nullopt;
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
    if (s.d != 128 || s.nq <= kSm90RowsPerConsumer) return std::nullopt;
    const std::int64_t r = fits_one_wave(128) ? 128 : 192;
    if (s.causal) return tiles(r, false);
    // Without a mask: consumers taking turns, 128-key tiles in 2 stages at 128 rows where they
    // pad no more keys than 64-key ones, else 64-key tiles in 3; the persistent code path at 128
    // rows (one tile per CTA here, but 0.5-6 % faster on 5 of the 6 sweeps of such tiles).
    const bool wide = r == 128 && (s.nk + 127) / 128 * 128 == (s.nk + 63) / 64 * 64;
    return tiles(r, r == 128, wide ? 128 : 64, wide ? 2 : 3, true);
  }
  return tiles(rows, rows > kSm90RowsPerConsumer || s.d == 128);
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

void* tensor(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}

/// The kernel arguments of one call: pointers, strides (from args.layout, else contiguous
/// [B, H, S, D], or with varlen packed [total, H, D]) and the scale. Throws InvalidArgument for
/// strides the kernel cannot address.
FlashAttentionArgs make_args(const RunArgs& a, const Shape& s) {
  FlashAttentionArgs k{};
  k.q = tensor(a, 0);
  k.k = tensor(a, 1);
  k.v = tensor(a, 2);
  k.o = tensor(a, 3);
  k.lse = static_cast<float*>(tensor(a, 4));
  std::int64_t st[12];
  if (a.layout) {
    static const char* const names[12] = {"q batch", "q head", "q seq", "k batch", "k head",
                                          "k seq",   "v batch", "v head", "v seq", "o batch",
                                          "o head",  "o seq"};
    for (int i = 0; i < 12; ++i) {
      st[i] = a.layout[i];
      if (s.paged() && i >= 3 && i < 9) continue;  // the pools' own strides (below)
      const bool row = i % 3 == 2;
      // 16-byte rows: 8 elements of 16 bits, 16 of e4m3 (o is bf16 then).
      const std::int64_t align = a.dtype == DType::e4m3 && i < 9 ? 2 * kRowAlign : kRowAlign;
      if (st[i] < (row ? 1 : 0) || st[i] % align != 0 || (row && st[i] >= kMaxRowStride))
        throw InvalidArgument(
            std::string("flash_attention: ") + names[i] + " stride " + str(st[i]) +
            " must be a " + (row ? "positive" : "non-negative") + " multiple of " + str(align) +
            " elements (rows start 16-byte aligned)" + (row ? " below 2^23" : ""));
    }
  } else if (s.varlen) {
    // FlashAttention's packed [total, H, D]; no batch stride.
    const std::int64_t contiguous[12] = {0, s.d, s.hq * s.d,  0, s.d, s.hkv * s.d,
                                         0, s.d, s.hkv * s.d, 0, s.d, s.hq * s.d};
    for (int i = 0; i < 12; ++i) st[i] = contiguous[i];
  } else {
    const std::int64_t q_head = s.nq * s.d, kv_head = s.nk * s.d;
    const std::int64_t contiguous[12] = {s.hq * q_head,  q_head,  s.d, s.hkv * kv_head, kv_head,
                                         s.d,            s.hkv * kv_head, kv_head, s.d,
                                         s.hq * q_head,  q_head,  s.d};
    for (int i = 0; i < 12; ++i) st[i] = contiguous[i];
  }
  k.q_batch_stride = st[0], k.q_head_stride = st[1], k.q_row_stride = st[2];
  k.k_batch_stride = st[3], k.k_head_stride = st[4], k.k_row_stride = st[5];
  k.v_batch_stride = st[6], k.v_head_stride = st[7], k.v_row_stride = st[8];
  k.o_batch_stride = st[9], k.o_head_stride = st[10], k.o_row_stride = st[11];
  if (s.paged()) {  // the pools [pages, page, hkv, d]: row hkv * d, head d, no batch
    k.k_batch_stride = k.v_batch_stride = 0;
    k.k_head_stride = k.v_head_stride = s.d;
    k.k_row_stride = k.v_row_stride = s.hkv * s.d;
  }
  k.batch = static_cast<int>(s.b);
  k.heads_q = static_cast<int>(s.hq);
  k.heads_kv = static_cast<int>(s.hkv);
  k.seq_q = static_cast<int>(s.nq);
  k.seq_k = static_cast<int>(s.nk);
  const double scale = a.scalars[0];
  if (std::isinf(scale))
    throw InvalidArgument("flash_attention: scale " + std::to_string(scale) + " is not finite");
  // <= 0 (and NaN) select the usual 1/sqrt(d).
  k.scale = scale > 0 ? static_cast<float>(scale)
                      : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d)));
  if (a.dtype == DType::e4m3) {
    // Dequantisation scales of e4m3 q, k and v: q's and k's multiply the scores, v's O.
    static const char* const names[3] = {"q_scale", "k_scale", "v_scale"};
    for (int i = 0; i < 3; ++i)
      if (!(a.scalars[2 + i] > 0) || std::isinf(a.scalars[2 + i]))
        throw InvalidArgument(std::string("flash_attention: ") + names[i] + " " +
                              std::to_string(a.scalars[2 + i]) +
                              " must be a positive finite dequantisation scale");
    k.scale = static_cast<float>(k.scale * a.scalars[2] * a.scalars[3]);
    k.o_scale = static_cast<float>(a.scalars[4]);
  }
  // The variants' arguments are read only when the problem asks for them (flash_decode passes
  // one scalar and five tensors).
  k.window = static_cast<int>(s.window);  // <= 2^30, the dim's range
  if (s.softcap) {
    const double cap = a.scalars[1];
    if (!(cap > 0) || std::isinf(cap))
      throw InvalidArgument("flash_attention: softcap " + std::to_string(cap) +
                            " must be a positive finite cap with softcap=yes");
    k.softcap = static_cast<float>(cap);
  }
  if (s.alibi) {
    k.alibi_slopes = static_cast<const float*>(tensor(a, 5));
    if (!k.alibi_slopes)
      throw InvalidArgument("flash_attention: alibi=yes needs the alibi_slopes tensor ([hq] fp32)");
  }
  // After the slopes: cu_seqlens_q and (contiguous) cu_seqlens_k with varlen, then block_table
  // and seq_lens when paged (tensors()).
  if (s.varlen) {
    k.cu_seqlens_q = static_cast<const int*>(tensor(a, 6));
    if (!k.cu_seqlens_q)
      throw InvalidArgument("flash_attention: varlen=yes needs cu_seqlens_q ([b + 1] int32 row "
                            "offsets)");
    if (!s.paged()) {
      k.cu_seqlens_k = static_cast<const int*>(tensor(a, 7));
      if (!k.cu_seqlens_k)
        throw InvalidArgument("flash_attention: varlen=yes needs cu_seqlens_k ([b + 1] int32 row "
                              "offsets; a paged cache gives its lengths through seq_lens)");
    }
  }
  if (s.paged()) {
    const std::size_t at = s.varlen ? 7 : 6;
    k.block_table = static_cast<const int*>(tensor(a, at));
    k.seq_lens = static_cast<const int*>(tensor(a, at + 1));
    if (!k.block_table || !k.seq_lens)
      throw InvalidArgument("flash_attention: page=" + str(s.page) +
                            " needs the block_table and seq_lens tensors");
    k.page = static_cast<int>(s.page);
    k.pages_per_seq = static_cast<int>(s.pages_per_seq());
  }
  return k;
}

/// A tensor map addresses every index of a dimension: a broadcast (stride 0) over more than one
/// head or batch cannot be described.
void refuse_broadcast(const char* name, std::int64_t heads, std::int64_t batch,
                      long long head_stride, long long batch_stride) {
  if ((heads > 1 && head_stride == 0) || (batch > 1 && batch_stride == 0))
    throw InvalidArgument(std::string("flash_attention impl=1: ") + name + " " +
                          (heads > 1 && head_stride == 0 ? "head" : "batch") +
                          " stride 0 (a broadcast) cannot be read through a tensor map; pass "
                          "a materialised tensor, or tune this problem's layout with impl=0");
}

/// The tensor map of one [B, H, S, D] operand of the wgmma kernel (args_sm90.h): dims innermost
/// first (d, rows, heads, batch), strides in bytes, a box of 64 columns by `box_rows` rows in the
/// 128-byte swizzle. A dim of size 1 gets a harmless stride (its index is always 0), so that a
/// broadcast stride of 0 there never reaches the driver; over more dims refuse_broadcast() has
/// refused it.
tma::TensorMap operand_map(const void* ptr, DType t, std::int64_t d, std::int64_t rows,
                           std::int64_t heads, std::int64_t batch, long long row_stride,
                           long long head_stride, long long batch_stride, int box_rows) {
  const std::uint64_t eb = dtype_size(t);
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(row_stride) * eb;
  std::uint64_t head_bytes = static_cast<std::uint64_t>(head_stride) * eb;
  std::uint64_t batch_bytes = static_cast<std::uint64_t>(batch_stride) * eb;
  if (heads == 1) head_bytes = row_bytes * static_cast<std::uint64_t>(rows);
  if (batch == 1) batch_bytes = head_bytes * static_cast<std::uint64_t>(heads);
  return kernel_tensor_map(swizzled_map(
      ptr, t,
      {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(rows),
       static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch)},
      {row_bytes, head_bytes, batch_bytes},
      {static_cast<std::uint32_t>(128 / eb), static_cast<std::uint32_t>(box_rows), 1, 1}));
}

/// The wgmma kernel's arguments: flash_attention_fwd's plus the tensor maps of Q, K and V.
FlashAttentionSm90Args make_sm90_args(const FlashAttentionArgs& k, const Shape& s, DType t,
                                      int block_n, const void* vt) {
  FlashAttentionSm90Args a{};
  a.base = k;
  // varlen (paged or not): the producer's threads copy the tiles (flash_attention_sm90.cuh), no
  // maps.
  if (s.varlen) return a;
  // Every operand's strides before the driver is asked for any map.
  refuse_broadcast("q", s.hq, s.b, k.q_head_stride, k.q_batch_stride);
  if (s.paged()) {
    // The pools [pages, page, hkv, d] as 4-D maps (d, head, row in the page, page), a box of
    // min(page, block_n) rows of one head of one page; the pages dim covers every int32 page id
    // (the op never sees the pool's size; the block table names the pages).
    a.q_map = operand_map(k.q, t, s.d, s.nq, s.hq, s.b, k.q_row_stride, k.q_head_stride,
                          k.q_batch_stride, kSm90RowsPerConsumer);
    const std::uint64_t eb = dtype_size(t), d = static_cast<std::uint64_t>(s.d);
    const std::uint64_t hkv = static_cast<std::uint64_t>(s.hkv);
    const std::uint64_t page = static_cast<std::uint64_t>(s.page);
    const std::uint32_t box = static_cast<std::uint32_t>(std::min<std::int64_t>(s.page, block_n));
    const auto pool = [&](const void* ptr) {
      return kernel_tensor_map(swizzled_map(ptr, t, {d, hkv, page, std::uint64_t{kMaxPageIds}},
                                            {d * eb, hkv * d * eb, page * hkv * d * eb},
                                            {static_cast<std::uint32_t>(128 / eb), 1, box, 1}));
    };
    a.k_map = pool(k.k);
    a.v_map = pool(k.v);
    return a;
  }
  refuse_broadcast("k", s.hkv, s.b, k.k_head_stride, k.k_batch_stride);
  refuse_broadcast("v", s.hkv, s.b, k.v_head_stride, k.v_batch_stride);
  a.q_map = operand_map(k.q, t, s.d, s.nq, s.hq, s.b, k.q_row_stride, k.q_head_stride,
                        k.q_batch_stride, kSm90RowsPerConsumer);
  a.k_map = operand_map(k.k, t, s.d, s.nk, s.hkv, s.b, k.k_row_stride, k.k_head_stride,
                        k.k_batch_stride, block_n);
  if (t == DType::e4m3) {
    // Vt [b, hkv, d, nk_pad] (fp8_transpose.cuh): a box of block_n keys by d rows.
    const std::uint64_t kp = static_cast<std::uint64_t>(fp8_vt_keys(s.nk));
    const std::uint64_t d = static_cast<std::uint64_t>(s.d);
    a.v_map = kernel_tensor_map(swizzled_map(
        vt, t, {kp, d, static_cast<std::uint64_t>(s.hkv), static_cast<std::uint64_t>(s.b)},
        {kp, kp * d, kp * d * static_cast<std::uint64_t>(s.hkv)},
        {static_cast<std::uint32_t>(block_n), static_cast<std::uint32_t>(s.d), 1, 1}));
    return a;
  }
  a.v_map = operand_map(k.v, t, s.d, s.nk, s.hkv, s.b, k.v_row_stride, k.v_head_stride,
                        k.v_batch_stride, block_n);
  return a;
}

class FlashAttentionOp final : public Op {
 public:
  FlashAttentionOp()
      : dims_{{"b", 1, kMaxGridY, {}, std::nullopt, "batch"},
              {"hq", 1, kMaxGridY, {}, std::nullopt, "query heads (b * hq <= 65535)"},
              {"hkv", 1, kMaxGridY, {}, std::nullopt,
               "key/value heads, dividing hq (hq: multi-head, 1: multi-query, else grouped)"},
              {"nq", 1, kMaxSeq, {}, std::nullopt, "query rows", false, {16}},
              {"nk", 1, kMaxSeq, {}, std::nullopt, "key/value rows"},
              {"d", 32, 256, {}, std::nullopt, "head dimension: 32, 64, 96, 128 or 256",
               /*exact=*/true},
              {"causal", 0, 1, {"no", "yes"}, 0,
               "causal mask, aligned to the bottom right when nq != nk"},
              // The mask variants come after causal, and are left out of keys when off, so that
              // keys written before them parse and match with the variants off. A window is matched by distance (4096 serves 8192: both
              // bound the work per row), never against 0 (no window), its own regime.
              {"window", 0, kMaxSeq, {}, 0,
               "sliding window: 0 none, else row i sees keys j > i + nk - nq - window (with "
               "causal, the last window keys up to its diagonal)",
               false, {0}, /*keyed_at_default=*/false},
              {"softcap", 0, 1, {"no", "yes"}, 0,
               "logit soft-capping: scores become softcap * tanh(score / softcap), the cap a "
               "scalar",
               false, {}, /*keyed_at_default=*/false},
              {"alibi", 0, 1, {"no", "yes"}, 0,
               "ALiBi: score -= slope[h] * |j - (i + nk - nq)|, slopes an fp32 tensor [hq]",
               false, {}, /*keyed_at_default=*/false},
              // Added after the mask variants, left out of keys when off likewise.
              {"varlen", 0, 1, {"no", "yes"}, 0,
               "variable-length batch: q, k, v, o packed [total, h, d] with int32 cu_seqlens_q "
               "and cu_seqlens_k [b + 1]; nq and nk are the longest lengths, every rule above "
               "uses each sequence's own; lse [hq, total_q]",
               false, {}, /*keyed_at_default=*/false},
              // Added after varlen, left out of keys when off likewise; never crossed by a
              // fallback.
              {"page", 0, 256, {}, 0,
               "0: contiguous K/V; else keys per page (16, 32, 64, 128, 256) of paged K/V pools "
               "k_cache, v_cache [pages, page, hkv, d] read through an int32 block_table [b, "
               "ceil(nk / page)], with int32 seq_lens [b] keys per sequence (nk the longest; "
               "every rule above aligned to each sequence's own); with varlen=yes q and o are "
               "packed by cu_seqlens_q alone",
               /*exact=*/true, {}, /*keyed_at_default=*/false}},
        tunables_{
            {"block_m", {64, 128, 192, 256},
             "query rows per CTA (impl=1: 64 per consumer warpgroup, at most 192)"},
            {"block_n", {32, 64, 80, 128},
             "keys per K/V tile (80: impl=1 at d=256 only, where 2 stages of 128 keys do not "
             "fit)"},
            {"warps", {4, 8, 12, 16},
             "warps per CTA; impl=0: 4 or 8, each owning block_m / warps (16 or 32) query rows; "
             "impl=1: 4 per consumer warpgroup plus the producer's 4"},
            {"stages", {2, 3, 4},
             "depth of the K/V pipeline (cp.async ring, impl=1 the TMA ring); 4 for e4m3 only"},
            {"q_regs", {0, 1}, "1: Q fragments stay in registers; 0: re-read from shared memory"},
            {"smem_pad", {0, 1}, "1: shared-memory rows padded by 16 bytes; 0: XOR swizzle"},
            // Variants of the op beside each other, chosen through the same lookup: 0 is the
            // mma.sync + cp.async kernel (sm_80+), 1 the warp-specialised wgmma + TMA kernel
            // (sm_90a, flash_attention_sm90.cuh).
            {"impl", {0, 1},
             "kernel variant: 0 = mma.sync + cp.async (sm_80 and later); 1 = wgmma + TMA, "
             "a producer warpgroup and block_m / 64 consumers (sm_90a)"},
            // Added after databases were written: left out of keys at 0.
            {"pingpong", {0, 1},
             "impl=1 with 2 or 3 consumers: 1 = the consumer warpgroups take turns issuing their "
             "wgmmas (named barriers), so one's softmax runs under another's products",
             0},
            {"persistent", {0, 1},
             "impl=1: 1 = one CTA per SM loops over the query tiles (a head's last tile first), "
             "loading the next tile's Q and K/V while it finishes P V and writes O; 0 = one CTA "
             "per query tile",
             0},
            {"reg_split", {0, 1},
             "impl=1 with 2 or 3 consumers: 1 = the producer warpgroup gives its registers to "
             "the consumers (setmaxnreg: 24 + 2 x 240 or 32 + 3 x 160 per thread); 0 = every "
             "warpgroup keeps the launch bound's (168 or 128)",
             1},
            {"kv_apart", {0, 1},
             "impl=1 with 2 stages: 1 = a slot's K is freed once its Q K^T has retired and its V "
             "once P V has (two barriers), so the next K tile loads a whole tile earlier; 0 = "
             "both freed after P V",
             0},
        },
        scalars_{{"scale", 0.0, "softmax scale; <= 0: 1/sqrt(d)"},
                 {"softcap", 50.0, "tanh cap of the scaled scores with softcap=yes (> 0; Gemma 2 "
                                   "uses 50); ignored otherwise"},
                 // Tuned with scales other than 1, so that verification covers them.
                 {"q_scale", 0.25, "e4m3: q's dequantisation scale (q = stored value x q_scale)",
                  1.0},
                 {"k_scale", 0.25, "e4m3: k's dequantisation scale", 1.0},
                 {"v_scale", 0.5, "e4m3: v's dequantisation scale", 1.0}} {}

  std::string_view name() const override { return "flash_attention"; }
  std::string_view summary() const override {
    return "o = softmax(scale * q k^T [softcap, alibi, causal/window mask]) v with the row "
           "log-sum-exp; GQA/MQA, strided, variable-length batches, paged K/V";
  }
  std::string_view family() const override { return "attention"; }
  /// e4m3: q, k and v in FP8 with dequantisation scales, o in bf16 (impl=1, sm_90a).
  std::vector<DType> dtypes() const override { return {DType::bf16, DType::f16, DType::e4m3}; }
  const std::vector<DimSpec>& dims() const override { return dims_; }
  const std::vector<Tunable>& tunables() const override { return tunables_; }
  const std::vector<ScalarSpec>& scalars() const override { return scalars_; }
  std::size_t layout_size() const override { return 12; }

  Problem default_problem() const override {
    return {{2, 16, 16, 4096, 4096, 128, 0, 0, 0, 0, 0, 0}};
  }

  std::optional<std::string> problem_reason(const Problem& p) const override {
    const Shape s = shape_of(p);
    bool head_dim = false;
    for (std::int64_t d : kHeadDims) head_dim = head_dim || d == s.d;
    if (!head_dim)
      return "d=" + str(s.d) + " is not a supported head dimension (32, 64, 96, 128, 256)";
    if (s.hq % s.hkv != 0)
      return "hq=" + str(s.hq) + " is not a multiple of hkv=" + str(s.hkv) +
             " (each key/value head serves hq / hkv query heads)";
    if (s.b * s.hq > kMaxGridY)
      return "b=" + str(s.b) + " x hq=" + str(s.hq) + " = " + str(s.b * s.hq) +
             " (batch, head) pairs; the grid allows at most " + str(kMaxGridY);
    if (std::find(std::begin(kPages), std::end(kPages), s.page) == std::end(kPages))
      return "page=" + str(s.page) + " is not a supported page size (0: contiguous; 16, 32, 64, "
             "128, 256)";
    if (s.paged() && s.pool_pages() > kMaxRows)
      return "b=" + str(s.b) + " x " + str(s.pages_per_seq()) + " pages of page=" + str(s.page) +
             ": more than 2^31 - 1 pages (int32 page ids)";
    if (s.paged() && s.hkv * s.d >= kMaxRowStride)
      return "page=" + str(s.page) + " pools rows of hkv=" + str(s.hkv) + " x d=" + str(s.d) +
             " = " + str(s.hkv * s.d) + " elements; row strides must stay below 2^23";
    if (s.varlen) {
      // The offsets are int32; the packed rows of the built-in layout are [h, d].
      if (s.b * std::max(s.nq, s.nk) > kMaxRows)
        return "varlen=yes with b=" + str(s.b) + " sequences of up to " +
               str(std::max(s.nq, s.nk)) + " rows: offsets up to " +
               str(s.b * std::max(s.nq, s.nk)) + " do not fit int32 (at most " + str(kMaxRows) +
               ")";
      if (s.hq * s.d >= kMaxRowStride)
        return "varlen=yes packs rows of hq=" + str(s.hq) + " x d=" + str(s.d) + " = " +
               str(s.hq * s.d) + " elements; row strides must stay below 2^23";
    }
    return std::nullopt;
  }

  /// q, k, v, o, lse, alibi_slopes; with varlen cu_seqlens_q and (contiguous) cu_seqlens_k;
  /// paged, k and v are the pools k_cache and v_cache ([b * ceil(nk / page), page, hkv, d]: every
  /// sequence's pages sized for nk keys), then block_table int32 [b, ceil(nk / page)] and
  /// seq_lens int32 [b]. The tuner fills the table with a permutation of the pool's pages and
  /// the lengths in [max(1, nk / 2), nk], both ends present.
  std::vector<TensorSpec> tensors(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    // Rows of q and o, of k and v: b * nq and b * nk, or with varlen the totals of the tuner's
    // cu_seqlens (its whole arrays are compared: no row may be left unwritten).
    std::int64_t rows_q = s.b * s.nq, rows_k = s.b * s.nk;
    if (s.varlen) {
      rows_q = offsets_of(query_offsets(s), s.b + 1).back();
      rows_k = offsets_of(key_offsets(s), s.b + 1).back();
    }
    if (s.paged()) rows_k = s.pool_pages() * s.page;
    const std::int64_t q = rows_q * s.hq * s.d, kv = rows_k * s.hkv * s.d;
    const DType o_type = t == DType::e4m3 ? DType::bf16 : t;  // e4m3 inputs write bf16
    std::vector<TensorSpec> out = {
        {"q", TensorRole::input, t, q},
        {s.paged() ? "k_cache" : "k", TensorRole::input, t, kv},
        {s.paged() ? "v_cache" : "v", TensorRole::input, t, kv},
        {"o", TensorRole::output, o_type, q},
        {"lse", TensorRole::output, DType::f32, s.hq * rows_q, true},
        // Required with alibi=yes; ALiBi's slopes are 2^(-8k/hq), in (0, 1].
        {"alibi_slopes", TensorRole::input, DType::f32, s.hq, !s.alibi,
         Fill::uniform(0.01f, 1.0f)}};
    if (s.varlen) {
      out.push_back({"cu_seqlens_q", TensorRole::input, DType::i32, s.b + 1, false,
                     query_offsets(s)});
      if (!s.paged())
        out.push_back({"cu_seqlens_k", TensorRole::input, DType::i32, s.b + 1, false,
                       key_offsets(s)});
    }
    if (s.paged()) {
      out.push_back({"block_table", TensorRole::input, DType::i32, s.pool_pages(), false,
                     Fill::permutation(s.pool_pages())});
      out.push_back({"seq_lens", TensorRole::input, DType::i32, s.b, false,
                     Fill::uniform_int(std::max<std::int64_t>(1, s.nk / 2), s.nk)});
    }
    out = word_aligned_side_tensors(std::move(out), t);
    out[3].alignment = 0;  // o: 16 bytes, also in bf16 under e4m3 inputs
    return out;
  }

  std::size_t alignment(const Params&, const Problem&, DType) const override { return 16; }

  /// e4m3: V transposed into Vt [b, hkv, d, fp8_vt_keys(nk)] (fp8_transpose.cuh) each call.
  std::size_t workspace_bytes(const Params&, const Problem& p, DType t) const override {
    if (t != DType::e4m3) return 0;
    const Shape s = shape_of(p);
    return static_cast<std::size_t>(s.b * s.hkv * s.d * fp8_vt_keys(s.nk));
  }

  std::optional<std::string> invalid_reason(const Params& params, const Problem& problem,
                                            DType t, const DeviceInfo& device) const override {
    if (auto why = static_reason(params, problem, t)) return why;
    const Config c = config_of(params);
    const Shape s = shape_of(problem);
    if (auto why = needs_sm80_reason(device)) return why;
    if (c.impl == 1 && device.cc_major > 0 && device.cc_major != 9)
      return "impl=1 (wgmma, TMA) needs sm_90a; the device is " + str(device.cc_major) + "." +
             str(device.cc_minor);
    const unsigned smem = smem_bytes(c, s.d, t, s.page);
    if (device.smem_optin_per_block > 0 && smem > static_cast<unsigned>(device.smem_optin_per_block))
      return smem_text(c, s, t) + ", more than the device's " +
             str(device.smem_optin_per_block) + " per block";
    return std::nullopt;
  }

  std::vector<KernelSource> kernels(const Params& params, const Problem& problem,
                                    DType t) const override {
    if (auto why = static_reason(params, problem, t))
      throw InvalidArgument("flash_attention: " + *why);
    const Config c = config_of(params);
    const Shape s = shape_of(problem);
    if (c.impl == 1) {
      std::vector<KernelSource> out = {
          {"attention/flash_attention_sm90.cuh",
           std::string("ktune::flash_attention_sm90<") + kernel_type(t) + ", " + str(s.d) + ", " +
               str(c.block_n) + ", " + str(consumers(c)) + ", " + str(c.stages) + ", " +
               cpp_bool(c.pingpong) + ", " + cpp_bool(s.causal) + variant_args(s, false) +
               (c.persistent || !c.reg_split || s.varlen_or_paged() || c.kv_apart
                    ? std::string(", ") + cpp_bool(c.persistent)
                    : "") +
               (!c.reg_split || s.varlen_or_paged() || c.kv_apart
                    ? std::string(", ") + cpp_bool(c.reg_split)
                    : "") +
               varlen_page_args(s) + (c.kv_apart ? ", false, 0, true" : "") + ">"}};
      if (t == DType::e4m3)
        out.push_back({"attention/fp8_transpose.cuh",
                       "ktune::fp8_v_transpose<" + str(s.d) + ">"});
      return out;
    }
    return {{"attention/flash_attention.cuh",
             std::string("ktune::flash_attention_fwd<") + kernel_type(t) + ", " + str(s.d) + ", " +
                 str(c.block_m) + ", " + str(c.block_n) + ", " + str(c.warps) + ", " +
                 str(c.stages) + ", " + cpp_bool(s.causal) + ", " + cpp_bool(c.q_regs) + ", 1, " +
                 cpp_bool(c.smem_pad) + variant_args(s) + ">"}};
  }

  int block_threads(const Params& params, const Problem&, DType,
                    std::size_t kernel_index) const override {
    return kernel_index == 1 ? kFp8TransposeThreads : config_of(params).warps * 32;
  }

  unsigned dynamic_shared_bytes(const Params& params, const Problem& problem, DType t,
                                std::size_t kernel_index) const override {
    const Shape s = shape_of(problem);
    return kernel_index == 1 ? 0u : smem_bytes(config_of(params), s.d, t, s.page);
  }

  void run(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const Config c = config_of(*a.params);
    const FlashAttentionArgs k = make_args(a, s);
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = flash_attention_grid_x(k.seq_q, c.block_m);
    l.grid[1] = static_cast<unsigned>(s.b * s.hq);
    l.block[0] = static_cast<unsigned>(c.warps * 32);
    l.shared_bytes = smem_bytes(c, s.d, a.dtype, s.page);
    const void* vt = nullptr;
    if (a.dtype == DType::e4m3) {
      // V -> Vt in the workspace first (same stream), then the kernel reads Vt.
      if (a.workspace == 0)
        throw InvalidArgument("flash_attention: e4m3 needs a workspace of " +
                              str(static_cast<std::int64_t>(
                                  workspace_bytes(*a.params, *a.problem, a.dtype))) +
                              " bytes for V transposed");
      Fp8VTransposeArgs t{};
      t.v = k.v;
      t.vt = reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace));
      t.v_row_stride = k.v_row_stride;
      t.v_head_stride = k.v_head_stride;
      t.v_batch_stride = k.v_batch_stride;
      t.batch = k.batch;
      t.heads_kv = k.heads_kv;
      t.seq_k = k.seq_k;
      t.nk_pad = static_cast<int>(fp8_vt_keys(s.nk));
      KernelLaunch tl;
      tl.kernel = a.kernels[1];
      tl.grid[0] = static_cast<unsigned>(t.nk_pad / kFp8TransposeKeys);
      tl.grid[1] = static_cast<unsigned>(s.hkv);
      tl.grid[2] = static_cast<unsigned>(s.b);
      tl.block[0] = kFp8TransposeThreads;
      tl.args = &t;
      tl.args_size = sizeof t;
      launcher.launch(tl);
      vt = t.vt;
    }
    if (c.impl == 1) {
      if (c.persistent) {
        // One CTA per SM (one fits: __launch_bounds__(.., 1) and its shared memory), never more
        // than there are query tiles; without the SM count, one per tile.
        const long long work = flash_attention_sm90_work(k.seq_q, c.block_m, s.b * s.hq);
        l.grid[0] = static_cast<unsigned>(
            a.sm_count > 0 ? std::min<long long>(work, a.sm_count) : work);
        l.grid[1] = 1;
      }
      const FlashAttentionSm90Args k90 = make_sm90_args(k, s, a.dtype, c.block_n, vt);
      l.args = &k90;
      l.args_size = sizeof k90;
      launcher.launch(l);
      return;
    }
    l.args = &k;
    l.args_size = sizeof k;
    launcher.launch(l);
  }

  std::vector<KernelSource> reference_kernels(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    return {{"attention/reference.cuh", std::string("ktune::flash_attention_reference<") +
                                            kernel_type(t) + ", " + str(s.d) + ", " +
                                            cpp_bool(s.causal) + variant_args(s) + ">"}};
  }

  void run_reference(const RunArgs& a, Launcher& launcher) const override {
    const Shape s = shape_of(*a.problem);
    const FlashAttentionArgs k = make_args(a, s);
    constexpr unsigned rows = kReferenceThreads / 32;
    KernelLaunch l;
    l.kernel = a.kernels[0];
    l.grid[0] = static_cast<unsigned>((s.nq + rows - 1) / rows);
    l.grid[1] = static_cast<unsigned>(s.b * s.hq);
    l.block[0] = kReferenceThreads;
    l.args = &k;
    l.args_size = sizeof k;
    launcher.launch(l);
  }

  Tolerance tolerance(DType t) const override {
    // P is rounded to 16 bits before P V; O is a weighted mean of values in [-2, 2). e4m3: P is
    // rounded to e4m3 (3 mantissa bits): ~2.5 % rms, max 0.04 on O of values in [-2, 2) in the
    // harness's checks (benchmarks/results/attention-fp8-h100-2026-11-24.md).
    if (t == DType::e4m3) return {8e-2, 8e-2};
    return t == DType::bf16 ? Tolerance{2e-2, 2e-2} : Tolerance{5e-3, 5e-3};
  }

  /// The tensors' bytes (the slopes only with alibi=yes); paged, the K/V rows of b sequences of
  /// nk keys (the op cannot see seq_lens: an upper bound), not the pools' padding to pages.
  double min_bytes(const Problem& p, DType t) const override {
    const Shape s = shape_of(p);
    const double all = Op::min_bytes(p, t) - (s.alibi ? 0.0 : 4.0 * static_cast<double>(s.hq));
    if (!s.paged()) return all;
    const double e = static_cast<double>(dtype_size(t));
    const std::int64_t padding = s.pool_pages() * s.page - s.b * s.nk;  // rows past nk
    return all - e * 2.0 * static_cast<double>(padding * s.hkv * s.d);
  }

  double flops(const Problem& p, DType) const override {
    const Shape s = shape_of(p);
    // Score-value pairs computed: the keys each row sees; with varlen, summed over the
    // sequences of the tuner's cu_seqlens. Paged, at nk keys per sequence (the op cannot see
    // seq_lens: an upper bound).
    if (!s.varlen) return 4.0 * static_cast<double>(s.b * s.hq * s.d) * pairs(s, s.nq, s.nk);
    const std::vector<std::int64_t> cq = offsets_of(query_offsets(s), s.b + 1);
    const std::vector<std::int64_t> ck = offsets_of(key_offsets(s), s.b + 1);
    double n = 0.0;
    for (std::size_t i = 0; i + 1 < cq.size(); ++i)
      n += pairs(s, cq[i + 1] - cq[i], s.paged() ? s.nk : ck[i + 1] - ck[i]);
    return 4.0 * static_cast<double>(s.hq * s.d) * n;
  }

  /// A tuned neighbour on the other side of the short-grid rule wanted other tiles: on the
  /// H100 a 128-row configuration tuned at b=4,hq=16,nq=2048 (1024 CTAs) served to
  /// b=3,hq=16,nq=777 (336) was 0.81x of that problem's optimum, which the 64-row default
  /// finds (benchmarks/results/fallback-h100-2026-11-23-evening.md).
  /// Likewise across the Hopper defaults' regimes: the short keys that keep the mma.sync kernel,
  /// and at d=64 and d=256 the single-consumer 64-row tiles (b=6,hq=16,nq=nk=420,d=64 was served
  /// the 192-row persistent point tuned at b=16,nq=nk=512: 0.80x of its optimum, which the
  /// 64-row default finds: 0.996; benchmarks/results/attention-ffma-h100-2026-11-24.md). At
  /// d=256 the regimes are d256_single_consumer()'s, causal grids under two waves included
  /// (b=1,hq=8,nq=nk=3000 causal: 128-row tiles 0.85x of its optimum, one consumer's 1.0;
  /// benchmarks/results/attention-kv-apart-h200-2026-12-03.md).
  bool fallback_compatible(const Problem& wanted, const Problem& tuned,
                           const DeviceInfo& device) const override {
    const Shape w = shape_of(wanted), t = shape_of(tuned);
    if ((short_grid_block_n(w, device, 64) > 0) != (short_grid_block_n(t, device, 64) > 0))
      return false;
    if (device.cc_major != 9) return true;
    if ((w.nk <= kWgmmaMinKeys) != (t.nk <= kWgmmaMinKeys)) return false;
    if (w.d == 256) return d256_single_consumer(w, device) == d256_single_consumer(t, device);
    if (w.d != 64) return true;
    return wgmma_single_consumer(w, device, 192) == wgmma_single_consumer(t, device, 192);
  }

  Params default_params(const Problem& problem, DType t, const DeviceInfo& device) const override {
    const Shape s = shape_of(problem);
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
      if (row.impl == 1 && short_keys) {
        // Few keys: the tiles of wgmma_short_keys_tiles, or the mma.sync rows below.
        const std::optional<AttentionDefaults> tiles = wgmma_short_keys_tiles(s, device);
        if (tiles && !invalid_reason(params(*tiles), problem, t, device)) return params(*tiles);
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
      if (invalid_reason(p, problem, t, device)) {
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
          return invalid_reason(with, problem, t, device) ? q : with;
        };
        if (s.d == 128) {
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
          if (!invalid_reason(chosen, problem, t, device)) return persistent(chosen);
          return persistent(p);
        }
        if (s.d == 256 && row.kv_apart) {
          // One consumer's 64-row tiles of 80 keys (persistent over more tiles than SMs) where
          // d256_single_consumer() says; a problem that cannot take K and V apart goes on to the
          // row below.
          if (d256_single_consumer(s, device)) {
            const Params one = params({9, 256, 64, 80, 8, 2, 0, 0, 1, 0, 0, 1});
            if (!invalid_reason(one, problem, t, device)) return persistent(one);
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
          if (!invalid_reason(two, problem, t, device)) return two;
        }
        // d=64 and d=256: one consumer's 64-row tiles where the row's tiles would leave the GPU
        // or the tiles half empty.
        if (wgmma_single_consumer(s, device, row.block_m)) {
          const Params one = params({row.cc_major, row.d, 64, 64, 8, 3, 0, 0, 1, 0});
          if (!invalid_reason(one, problem, t, device)) return persistent(one);
        }
        return persistent(p);
      }
      // Few query tiles: halve them when the GPU's idle share of the last wave costs more.
      int block_n = row.block_m == 128 ? short_grid_block_n(s, device, row.block_n) : 0;
      if (short_keys && block_n > 0) block_n = short_keys_block_n(s, block_n);
      if (block_n > 0) {
        const int stages = short_keys && block_n == 32 ? 3 : row.stages;
        const Params half = params({row.cc_major, row.d, 64, block_n, 4, stages, 1, 0});
        if (!invalid_reason(half, problem, t, device)) return half;
      }
      return p;
    }
    return params(kSmallest);
  }

 private:
  /// Why the point cannot be instantiated at all (no device needed), or nullopt.
  std::optional<std::string> static_reason(const Params& params, const Problem& problem,
                                           DType t) const {
    if (auto why = point_reason(params, problem, t)) return why;
    const Config c = config_of(params);
    const Shape s = shape_of(problem);
    if (t == DType::e4m3 && c.impl != 1)
      return std::string("e4m3 runs on the wgmma kernel only (impl=1, sm_90a)");
    if (t != DType::e4m3 && c.stages == 4)
      return std::string("stages=4 is for e4m3 tiles (half the bytes); 16-bit tiles take 2 or "
                         "3");
    if (c.impl == 1) return sm90_reason(c, s, params, t);
    if (c.block_n == 80)
      return std::string("block_n=80 is for impl=1 (d=256); impl=0 takes 32, 64 or 128");
    if (c.pingpong)
      return std::string("pingpong=1 is for impl=1 (turns between its consumer warpgroups)");
    if (c.persistent)
      return std::string("persistent=1 is for impl=1 (impl=0 runs one CTA per query tile)");
    if (!c.reg_split)
      return std::string("reg_split=0 is for impl=1 (impl=0 has no producer warpgroup): only "
                         "reg_split=1 is searched");
    if (c.kv_apart)
      return std::string("kv_apart=1 is for impl=1 (its TMA ring's slot barriers)");
    if (c.warps > 8)
      return "warps=" + str(c.warps) + " is for impl=1 (4 per warpgroup); impl=0 takes 4 or 8";
    if (c.block_m % (16 * c.warps) != 0)
      return "block_m=" + str(c.block_m) + " is not a multiple of 16 * warps=" + str(c.warps) +
             " (each warp owns whole 16-row fragments)";
    if (c.block_m / c.warps > 32)
      return "block_m=" + str(c.block_m) + " / warps=" + str(c.warps) + " = " +
             str(c.block_m / c.warps) + " query rows per warp (at most 32: two 16-row fragments)";
    if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
      return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
    // Anything else the kernel's static_asserts would reject (nothing, with the lists above).
    if (const char* why = flash_attention_invalid_reason(static_cast<int>(s.d), c.block_m,
                                                         c.block_n, c.warps, c.stages, 1,
                                                         c.smem_pad))
      return params_key(params) + ": " + why;
    return std::nullopt;
  }

  /// static_reason for impl=1, the wgmma kernel.
  std::optional<std::string> sm90_reason(const Config& c, const Shape& s, const Params& params,
                                         DType t) const {
    if (s.paged() && t == DType::e4m3)
      return std::string("page > 0 takes bf16 or fp16 (e4m3's V transpose is per batch)");
    if (s.varlen && t == DType::e4m3)
      return std::string("varlen=yes takes bf16 or fp16 (e4m3's V transpose is per batch)");
    // The paged producer walks every item: persistent, it spilled 12-76 bytes with 32 registers
    // (3 consumers) and 16-36 with 40 (2 consumers at d=256, whose consumers keep 232; NVRTC,
    // CUDA 13.0).
    if (s.paged() && c.persistent && (consumers(c) == 3 || (s.d == 256 && consumers(c) == 2)))
      return "impl=1 persistent with a paged cache and " + str(consumers(c)) +
             " consumer warpgroups at d=" + str(s.d) + " spills (the producer's " +
             (consumers(c) == 3 ? "32" : "40") + " registers); " +
             (consumers(c) == 3 ? "block_m=64 or 128" : "block_m=64") + ", or persistent=0";
    if (s.varlen && c.persistent)
      return std::string("impl=1 with varlen=yes runs one CTA per query tile (persistent=0): "
                         "its tiles past a sequence's end leave at once");
    if (s.d != 64 && s.d != 128 && s.d != 256)
      return "impl=1 takes d = 64, 128 or 256; d=" + str(s.d) + " runs with impl=0";
    // With 2 stages the next K tile goes into the slot P V still reads; with 3 or more it
    // loads a whole tile ahead anyway.
    if (c.kv_apart && c.stages != 2)
      return "kv_apart=1 is for stages=2 (stages=" + str(c.stages) +
             " already loads each K tile a whole tile ahead)";
    // NVRTC, CUDA 13.0: 8-12 bytes of spills at the consumers' 240 registers.
    if (c.kv_apart && c.persistent && s.d == 256 && consumers(c) == 2)
      return std::string("kv_apart=1 with persistent=1 at d=256 and two consumers spills (their "
                         "240 registers): persistent=0");
    // The same with a window or ALiBi slopes: 4-24 bytes (attention_compile_test, 2026-12-03).
    if (c.kv_apart && s.d == 256 && consumers(c) == 2 && (s.window > 0 || s.alibi))
      return std::string("kv_apart=1 at d=256 with two consumers and a window or ALiBi spills "
                         "(their 240 registers): block_m=64 or kv_apart=0");
    if (c.kv_apart && s.varlen_or_paged())
      return std::string("kv_apart=1 is for contiguous K/V without varlen (the TMA producer; "
                         "varlen and paged tiles are copied by the producer's threads)");
    // 80-key tiles are FlashAttention-3's at d=256, where two stages of 128 keys do not fit
    // beside two consumers' Q; elsewhere 64 and 128 cover the space.
    if (c.block_n == 80 && (s.d != 256 || t == DType::e4m3))
      return "block_n=80 is searched at d=256 with bf16 or fp16 only (d=" + str(s.d) +
             (t == DType::e4m3 ? ", e4m3" : "") + "): block_n=64 or 128";
    if (s.paged() && c.block_n % s.page != 0 && s.page % c.block_n != 0) {
      // Every power-of-two tile meets it; 80-key tiles only with 16-key pages.
      std::string pages;
      for (std::int64_t page : kPages)
        if (page > 0 && (c.block_n % page == 0 || page % c.block_n == 0))
          pages += (pages.empty() ? "" : " or ") + str(page);
      return "block_n=" + str(c.block_n) + " with a paged cache takes page=" + pages +
             " (a key tile covers whole pages or lies in one), not page=" + str(s.page);
    }
    if (c.block_m % kSm90RowsPerConsumer != 0 || c.block_m > 3 * kSm90RowsPerConsumer)
      return "impl=1 takes block_m = 64, 128 or 192 (64 query rows per consumer warpgroup), "
             "not " + str(c.block_m);
    if (c.warps != 4 * (consumers(c) + 1))
      return "impl=1 with block_m=" + str(c.block_m) + " runs " + str(consumers(c)) +
             " consumer warpgroups and a producer: warps=" + str(4 * (consumers(c) + 1)) +
             ", not " + str(c.warps);
    // Three consumers get 160 registers each; what spills there (attention_compile_test: 280-352
    // bytes for d=128 with 128-key tiles, 176-192 for d=64 with 128-key tiles and a window or
    // ALiBi) is refused rather than measured.
    if (consumers(c) == 3 && c.block_n == 128 && (s.d == 128 || s.window > 0 || s.alibi))
      return "impl=1 with 3 consumer warpgroups and block_n=128 at d=" + str(s.d) +
             (s.d == 128 ? "" : " with a window or ALiBi") +
             " spills (160 registers per thread); block_n=64 or block_m=128 fit";
    if (c.pingpong && consumers(c) == 1)
      return std::string("pingpong=1 needs 2 or 3 consumer warpgroups (block_m=128 or 192)");
    if (!c.reg_split) {
      if (consumers(c) == 1)
        return std::string("reg_split=0 with one consumer warpgroup: its launch bound already "
                           "gives every warpgroup 255 registers (no reallocation either way); "
                           "only reg_split=1 is searched");
      // Without reallocation a consumer thread has 168 (2 consumers) or 128 (3) registers:
      // ptxas (CUDA 13.0, every variant on) spills beyond these, and serialises wgmmas.
      const bool fits = t != DType::e4m3 && c.block_n == 64 &&
                        (s.d == 64 || (s.d == 128 && consumers(c) == 2));
      if (!fits)
        return "reg_split=0 leaves each consumer thread " +
               str(consumers(c) == 2 ? 168 : 128) + " registers, which spill at d=" + str(s.d) +
               ", block_n=" + str(c.block_n) + ", " + str(consumers(c)) + " consumers" +
               (t == DType::e4m3 ? " (e4m3)" : "") +
               ": it fits 16-bit tiles of block_n=64 at d=64 (2 or 3 consumers) or d=128 (2)";
    }
    if (c.q_regs || c.smem_pad)
      return std::string("impl=1 keeps Q in shared memory in the 128-byte swizzle: q_regs=0 and "
                         "smem_pad=0");
    if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
      return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
    if (const char* why = flash_attention_sm90_invalid_reason(static_cast<int>(s.d), c.block_n,
                                                              consumers(c), c.stages,
                                                              elem_bytes(t)))
      return params_key(params) + ": " + why;
    return std::nullopt;
  }

  static std::string smem_text(const Config& c, const Shape& s, DType t) {
    const std::int64_t d = s.d;
    return "block_m=" + str(c.block_m) + ", block_n=" + str(c.block_n) + ", stages=" +
           str(c.stages) + (c.smem_pad ? ", smem_pad=1" : "") + " at d=" + str(d) +
           (t == DType::e4m3 ? " (e4m3)" : "") + " need " + str(smem_bytes(c, d, t, s.page)) +
           " bytes of shared memory (Q tile + " + str(c.stages) + " K and V tiles)";
  }

  std::vector<DimSpec> dims_;
  std::vector<Tunable> tunables_;
  std::vector<ScalarSpec> scalars_;
};

}  // namespace

const Op& flash_attention_op() {
  static const FlashAttentionOp op;
  return op;
}

}  // namespace ktune
