// The MoE layer op's built-in configurations (moe_defaults.hpp).
#include "templates/moe/moe_defaults.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ktune::moe {
namespace {

/// Built-in configuration per architecture and regime. Should not affect results, only speed.
/// The regime is the mean rows an expert receives (t * k over the experts reached, mean_rows),
/// not t: how many times each weight byte is used is what separates weight streaming from tensor
/// work, and layers differ in k / e (Mixtral 1/4, DeepSeek-V3 1/32). The first row with
/// cc_major <= the device's, mean rows <= max_rows and i <= max_i applies; a row invalid for the
/// problem (shared memory, shape) falls through to kSafe.
struct MoeDefaults {
  int cc_major;     // first compute capability (major) this row applies to
  int max_rows;     // mean rows per expert up to this count
  int max_i;        // intermediate size (gemm2's k extent) up to this
  int block_m;      // rows per GEMM block = align block (few rows: little padding per expert)
  GemmTile g1;      // gemm1: act columns, k step, warps, warps along M, ring, CTA order, prefetch
  GemmTile g2;      // gemm2
  int align_chunk;  // 0: one-block align; else pairs per block of the three-kernel path
  int route_lanes;  // threads per token in the route kernel
  int combine_vec;  // elements per thread of the combine
};
constexpr int kAnyI = 1 << 30;
constexpr MoeDefaults kDefaults[] = {
    // Hopper (sm_90a) runs the same mma.sync kernels below kWgmmaMinRows. First read from the GEMM
    // harness on the H100 (benchmarks/moe/gemm_h100_2026-11-23.log) with t in place of rows;
    // re-read on the H200 (2026-12-02) from layers no earlier row came from
    // (benchmarks/results/moe-default-quality-h200-2026-12-02.md, OLMoE, DeepSeek-V3, gpt-oss-20b,
    // Mixtral-8x22B, then Qwen1.5-MoE, Phi-3.5-MoE, DBRX) and the shipped h200.db rows. Up to 16
    // rows per expert (weight streaming): gemm1 64 columns on 4 warps, 128-wide k steps, 4 stages
    // (within 2 % of each sweep's best gemm1 there; 128 columns 2-3 % behind at 11 rows; the old
    // 32-column, 2-warp, 6-stage tile 2-8 % behind); gemm2 32 columns on 2 warps where its k extent
    // is short (i <= 4096: 2-7 % ahead of 64 on 4 warps), 128 on 4 warps where it is long
    // (Mixtral-8x22B's i = 16384: 3 % ahead of 32). Up to 32 rows: gemm1 128 columns on 4 warps
    // (the best or within 1.5 % at 11-22 rows; 64 columns was 10 % behind at DeepSeek-V3's 22);
    // gemm2 128 columns in 64-wide k steps, groups of 8 row blocks, where i is short (DeepSeek-V3:
    // 64 x 128 steps 8-12 % behind), 64 x 128 where it is long (Mixtral-8x22B: 3 % ahead of 128 x
    // 64). From 32 to 64 rows gemm1 64 columns on 4 warps (8 % ahead of 256 on 8 at 50 rows, level
    // on the other layer measured there). Large rows take wide tiles.
    {9, 16, 4096, 16, {64, 128, 4, 1, 4, 0, 0, 0, 0}, {32, 128, 2, 1, 4, 0, 0, 0, 0}, 0, 8, 8},
    {9, 16, kAnyI, 16, {64, 128, 4, 1, 4, 0, 0, 0, 0}, {128, 128, 4, 1, 4, 0, 0, 0, 0}, 0, 8, 8},
    {9, 32, 4096, 32, {128, 128, 4, 1, 3, 0, 0, 0, 0}, {128, 64, 4, 1, 4, 8, 0, 0, 0}, 0, 8, 8},
    {9, 32, kAnyI, 32, {128, 128, 4, 1, 3, 0, 0, 0, 0}, {64, 128, 4, 1, 4, 0, 0, 0, 0}, 0, 8, 8},
    {9, 512, kAnyI, 64, {64, 64, 4, 1, 3, 0, 0, 0, 0}, {128, 64, 4, 1, 4, 8, 0, 0, 0}, 0, 8, 8},
    {9, 1 << 30, kAnyI, 128, {128, 64, 8, 2, 4, 0, 0, 0, 0}, {256, 64, 8, 2, 3, 8, 0, 0, 0}, 4096,
     8, 8},
    // Ampere (sm_80) and later: 164 KiB of shared memory, fewer stages. Not measured on an sm_80
    // GPU; written for Mixtral's t (rows = t / 4) and kept at those rows.
    {8, 8, kAnyI, 16, {64, 64, 4, 1, 3, 0, 0, 0, 0}, {64, 64, 4, 1, 3, 0, 0, 0, 0}, 0, 8, 8},
    {8, 64, kAnyI, 32, {64, 64, 4, 2, 3, 0, 0, 0, 0}, {64, 64, 4, 2, 3, 0, 0, 0, 0}, 0, 8, 8},
    {8, 512, kAnyI, 64, {64, 64, 4, 2, 3, 0, 0, 0, 0}, {64, 64, 4, 2, 3, 0, 0, 0, 0}, 0, 8, 8},
    {8, 1 << 30, kAnyI, 128, {64, 32, 8, 2, 3, 0, 0, 0, 0}, {128, 32, 8, 2, 3, 0, 0, 0, 0}, 4096,
     8, 8},
};
/// sm_90a with at least kWgmmaMinRows rows per expert on average (t * k / e): both GEMMs on
/// the wgmma kernel, whatever t. On the H100 (benchmarks/results/moe-wgmma-h100-2026-11-23.md)
/// this is the best point of the Mixtral T=4096 sweep (1024 rows per expert; 1.27x the mma.sync
/// row; its align_chunk=0 and 4096 within 1 %, 4096 up to 7 % ahead at DeepSeek T=4096) and
/// within 8 % of DeepSeek T=4096's (512 rows; 1.20x); where experts got 128 rows (DeepSeek
/// T=1024) the best wgmma gemm1 was 5 % slower than the mma.sync row, and at 256 (Mixtral
/// T=1024) the wgmma points won by 1.1-1.2x. gemm2 takes 256 columns: the full Mixtral sweep of
/// the night of 2026-11-23 (benchmarks/results/moe-sweep-mixtral-13buckets-h100-2026-11-23.txt)
/// chose bn2=256 at T=1024, 2048 and 4096, 1.08-1.10x ahead of this row with bn2=128.
/// The same tiles on the warp-specialised kernel (impl 2): in the GEMM harness on the H100
/// (benchmarks/moe/SM90.md, 2026-11-24) gemm1 1.04-1.23x and gemm2 1.05-1.30x the impl=1 kernel
/// at Mixtral and DeepSeek-like T=1024 and 4096; the whole layer, graph-captured, 1.01-1.09x
/// impl=1 at those four points, and at 128 rows per expert (DeepSeek-like T=1024) 1.18x the
/// mma.sync row that was the default there (benchmarks/results/moe-ws-h100-2026-11-24.md), so
/// the threshold moved from 256 to 128 rows per expert. On the H200 (2026-12-02) at 64-88 rows
/// the warp-specialised gemm1 won in 4 of 5 layers (DeepSeek-V3 at 78 rows 0.89x the mma.sync
/// row's time, gpt-oss-20b at 88 0.93x, OLMoE at 88 1.03x; the shipped rows of Mixtral at 64
/// and Qwen3-30B-A3B at 64 chose it), so it starts at 64.
constexpr MoeDefaults kWgmma = {9, 1 << 30, kAnyI, 128, {128, 64, 8, 1, 4, 0, 0, 0, 2},
                                {256, 64, 8, 1, 4, 8, 0, 0, 2}, 4096, 8, 8};
constexpr long long kWgmmaMinRows = 64;
/// Pairs (t * k) up to which softmax routings default to fuse_route=1: the sweeps of the shipped
/// h200.db and of the held-out layers of 2026-12-02 chose it at 34 of 34 such problems up to 200
/// pairs, at none of 9 from 256.
constexpr long long kFuseDefaultMaxPairs = 200;
/// Rows of kDefaults up to this many rows per expert stream the weights (spread_gemm2).
constexpr long long kStreamRows = 16;
/// Valid for every problem problem_reason() accepts on any sm_80+ device: small tiles, 2 stages.
constexpr MoeDefaults kSafe = {8, 0, kAnyI, 16, {64, 32, 4, 1, 2, 0, 0, 0, 0},
                               {64, 32, 4, 1, 2, 0, 0, 0, 0}, 0, 8, 8};

/// Streaming rows (few tokens an expert): gemm2 has ceil(h / bn2) column blocks for each of
/// the at most min(e, t * k) experts reached, times split2. Where that leaves more than half
/// the SMs without a block, bn2 halves (down to 64) and split2 doubles (up to 4) until every
/// SM has one. Narrower tiles alone lose (H200, 2026-12-03, benchmarks/moe/NOTES.md: 64 columns
/// without split-k 0.96x / 0.95x the speed of 128 at 128 and 96 blocks); with split-k they win
/// where the grid was a quarter to a half of the SMs (JetMoE h = 2048 at 1-2 tokens: 0.80-0.82
/// of the best -> 0.92). On six problems swept after this was written: 0.919 -> 0.981 of the
/// best, the default 1.068x faster.
Params spread_gemm2(Params p, const Shape& s, int sm_count) {
  if (sm_count <= 0 || s.expert_choice()) return p;
  const long long experts = std::min<long long>(s.e, s.pairs());
  const auto blocks = [&] {
    const long long bn = p.values[kBn2];
    return (s.h + bn - 1) / bn * experts * p.values[kSplit2];
  };
  if (2 * blocks() >= sm_count) return p;
  while (blocks() < sm_count) {
    if (p.values[kBn2] > 64)
      p.values[kBn2] /= 2;
    else if (p.values[kSplit2] < 4)
      p.values[kSplit2] *= 2;
    else
      break;
  }
  return p;
}

/// Lowers a default's bn1 / bn2 where i / h are narrower than the tile (else pruned).
void fit_columns(Params& p, const Shape& s, const Lists& lists) {
  p.values[kBn1] = std::min<std::int64_t>(p.values[kBn1], fitting_block_n(lists.bn1, s.i));
  p.values[kBn2] = std::min<std::int64_t>(p.values[kBn2], fitting_block_n(lists.bn2, s.h));
}

}  // namespace

int fitting_block_m(const Shape& s, const std::vector<std::int64_t>& block_ms) {
  const long long rows = s.mean_rows();
  for (std::int64_t bm : block_ms)
    if (bm >= rows) return static_cast<int>(bm);
  return static_cast<int>(block_ms.back());
}

int widest_block_m(const Shape& s, const std::vector<std::int64_t>& block_ms) {
  const int fit = fitting_block_m(s, block_ms);
  if (s.expert_choice() || 2 * s.mean_rows() <= fit) return fit;  // expert choice: C rows each
  for (std::int64_t bm : block_ms)
    if (bm > fit) return static_cast<int>(bm);
  return fit;
}

int fitting_block_n(const std::vector<std::int64_t>& block_ns, int n) {
  for (std::int64_t bn : block_ns)
    if (bn >= n && bn >= 64) return static_cast<int>(bn);
  return static_cast<int>(block_ns.back());
}

Params default_params(const Shape& s, DType t, const DeviceInfo& device, const Lists& lists,
                      const std::function<bool(const Params&)>& runnable) {
  const auto params = [&](const MoeDefaults& r) {
    // Route kernel: a warp per token from 32 experts on (one or two scores per lane instead
    // of eight: its top-k loop is a chain of warp reductions, latency-bound); the DeepSeek-like
    // sweeps on the H100 picked route_lanes=32 at T=16 and 128, 6 % of the T=16 call faster
    // in the sweep (benchmarks/moe/NOTES.md). Narrower routers keep 8 lanes, 4 logits each.
    const int lanes = s.e >= 32 ? 32 : r.route_lanes;
    const int vec = lanes == 32 || s.e % 4 != 0 ? 1 : 4;
    // The row's block_m, lowered to the smallest one that holds an expert's mean rows when
    // fewer tokens than the row assumes reach each expert (else the point is pruned).
    int bm = r.block_m;
    const int fit = fitting_block_m(s, lists.block_m);
    if (bm > fit) bm = fit;
    // e4m3 rows hold half the bytes: twice the k step keeps a ring slot's bytes (and covers
    // the e4m3 minimum of 64).
    const auto bk = [&](int k) { return t == DType::e4m3 ? std::min(256, 2 * k) : k; };
    Params p{{bm, r.g1.bn, bk(r.g1.bk), r.g1.warps, std::min(r.g1.warps_m, bm / 16),
              r.g1.stages, r.g1.group_m, r.g1.prefetch, r.g1.epi, r.g1.impl, r.g2.bn,
              bk(r.g2.bk), r.g2.warps, std::min(r.g2.warps_m, bm / 16), r.g2.stages,
              r.g2.group_m, r.g2.prefetch, r.g2.epi, r.g2.impl,
              s.pairs() > r.align_chunk && !s.expert_choice() ? r.align_chunk : 0,
              s.route_kernel() ? lanes : 8, s.route_kernel() ? vec : 1,
              s.combines() ? r.combine_vec : lists.combine_vec, 1, 0, 0, 0, 1, 1, 0}};
    // One value per tunable, in the Param enum's order (a row that misses one would be read
    // past its end).
    if (p.values.size() != kGather1 + 1)
      throw std::logic_error("moe defaults: a row has " + std::to_string(p.values.size()) +
                             " values for " + std::to_string(kGather1 + 1) + " tunables");
    return p;
  };
  // Few pairs routed by softmax: route and align in one block (fuse_route; worth ~1-3 % of
  // such calls in the sweeps); sigmoid_group's longer per-token selection is faster spread
  // over the route kernel's blocks (benchmarks/moe/NOTES.md, 2026-11-25).
  const bool fuse = s.route_kernel() && s.routing != moe_sigmoid_group &&
                    s.pairs() <= kFuseDefaultMaxPairs;
  const auto valid = [&](Params& p) {
    fit_columns(p, s, lists);
    if (fuse && p.values[kAlignChunk] == 0) {
      // The one block routes its tokens a few at a time: a warp per token, a score per lane,
      // at every e (in the same sweeps the fastest route point or within 0.3 % of it at 12 of
      // 12 fused problems; 8 lanes of 4 scores 1-6 % behind at e = 16 and 24).
      Params f = p;
      f.values[kFuseRoute] = 1;
      f.values[kRouteLanes] = 32;
      f.values[kRouteVec] = 1;
      if (runnable(f)) {
        p = f;
        return true;
      }
    }
    return runnable(p);
  };
  if (device.arch() == "sm_90a" && !s.expert_choice() &&
      s.pairs() >= kWgmmaMinRows * std::min<long long>(s.e, s.pairs())) {
    Params p = params(kWgmma);
    // Its 128-row block even where 64 hold the mean (64-127 rows): the warp-specialised
    // kernel's two consumer warpgroups take 64 rows each, and the shipped Mixtral row at 64 rows
    // per expert chose this point (one block per expert: each weight byte streamed once).
    p.values[kBlockM] = std::min<std::int64_t>(kWgmma.block_m, widest_block_m(s, lists.block_m));
    // e4m3 gemm1 on the warp-specialised kernel keeps a second accumulator set: bn1 <= 64.
    if (t == DType::e4m3) p.values[kBn1] = std::min<std::int64_t>(p.values[kBn1], 64);
    if (valid(p)) return p;
  }
  for (const MoeDefaults& row : kDefaults) {
    if (device.cc_major < row.cc_major || s.mean_rows() > row.max_rows || s.i > row.max_i)
      continue;
    Params p = params(row);
    if (row.max_rows <= kStreamRows) {
      Params q = spread_gemm2(p, s, device.sm_count);
      if (q.values != p.values && valid(q)) return q;
    }
    if (valid(p)) return p;
    break;
  }
  Params p = params(kSafe);
  fit_columns(p, s, lists);
  return p;
}

}  // namespace ktune::moe
