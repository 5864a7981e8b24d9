// Internal to the MoE op: the parts moe_op.cpp's Op methods delegate to, one file each:
//   moe_plan.cpp       the kernels of a configuration in launch order (names, block sizes,
//                      shared memory) and the workspace layout
//   moe_launch.cpp     run(): the launches of the layer with their arguments
//   moe_reference.cpp  the fp32 reference: its kernels, workspace and launches
//   moe_space.cpp      why a point cannot be instantiated or can never win (no device needed)
// Not an interface: nothing outside templates/moe/ includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "templates/moe/args.h"
#include "templates/moe/gemm_ws_args.h"
#include "templates/moe/moe_problem.hpp"
#include "templates/op.hpp"

namespace ktune::moe {

// Mirrors of the kernels' limits (route.cuh and align.cuh hold them beside CUDA-only code).
constexpr int kMaxExperts = kMoeMaxExperts;  // 512: past 256, the kernels' EMAX = 512 forms
constexpr int kMaxK = 16;             // kMoeMaxK
constexpr int kMaxGroups = 64;        // kMoeMaxGroups
constexpr int kRouteThreads = 128;    // route block: 128 / LANES tokens
/// Threads of the one-block align kernel: a warp per 128 pairs (a warp's pass takes 4 x 32),
/// 128 to 1024. Its per-warp count and offset arrays are summed serially over the warps and its
/// barriers wait for all of them, so small T takes few warps: on the H100 the 1024-thread block
/// took 7-8 us (ncu) to align 8..128 pairs (benchmarks/moe/NOTES.md). Past 256 experts at most
/// kAlignWideThreads: its per-warp arrays [warps][512] (2 KiB a warp) stay within 32 KiB.
int align_one_threads(std::int64_t pairs, int experts);
constexpr int kAlignWideThreads = 512;
constexpr int kAlignThreads = 256;      // the three kernels of the multi-block path
constexpr int kCombineThreads = 128;
constexpr int kEcSelectThreads = 1024;  // expert_choice select: one block per expert
constexpr std::int64_t kMaxTokens = 65536;
constexpr std::int64_t kMaxRow = 65536;  // h and i
constexpr std::size_t kAlign = 256;      // workspace region alignment

inline std::string str(long long v) { return std::to_string(v); }
/// The EMAX template argument of the kernels with per-expert arrays (moe/args.h): none up to 256
/// experts (their default, so those layers' name expressions and kernels stay as they were),
/// ", 512" past it.
inline std::string emax_arg(int experts) {
  return moe_emax(experts) == kMoeEmax ? std::string() : ", " + str(moe_emax(experts));
}
/// The element type of x, act, y and the pair outputs: bf16 under FP8 (e4m3) weights.
inline DType io_type(DType t) { return t == DType::e4m3 ? DType::bf16 : t; }
inline const char* kernel_type(DType t) {
  return t == DType::e4m3 ? "ktune::e4m3" : t == DType::bf16 ? "ktune::bf16" : "ktune::fp16";
}
/// Tensor i of a call (moe_op.hpp gives their order).
inline void* tensor(const RunArgs& a, std::size_t i) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.tensors[i]));
}

// ---- moe_plan.cpp: the kernels of a configuration and the workspace ----

/// The kernels of one configuration, in launch order.
enum class Stage {
  zero_tiles, zero, route, align, align_count, align_scan, align_scatter, route_align,
  route_sort, ec_scores, ec_select, quant_x, gather_x, gemm1, quant_act, gemm2, combine,
  ec_combine
};

/// A combine kernel runs after gemm2: it sums k > 1 pairs (or expert choice's) or gemm2's splits.
bool has_combine(const Config& c, const Shape& s);
/// Routing and alignment in one block (moe_route_align_kernel): no routed ids in the workspace
/// (they stay in its shared memory) and no aux scratch (it sums the loss in shared memory).
bool fused(const Config& c, const Shape& s);
/// Routing and alignment in the route kernel's grid, its blocks meeting at a barrier
/// (moe_route_sort_kernel, fuse_route=2): after the zero kernel, which clears its barrier.
bool sorted_in_route(const Config& c, const Shape& s);
/// Blocks of the route kernel (and of the sort kernel): THREADS / route_lanes tokens each.
int route_blocks(const Config& c, const Shape& s);
/// persist=2: a GEMM that takes its tiles from a counter in the workspace (Layout::tiles).
bool counted(const Config& c);
/// The kernels of the configuration, in launch order.
std::vector<Stage> stages_of(const Config& c, const Shape& s);
/// Kernel `index` of stages_of(c, s); refused with a message past the last.
Stage stage_at(const Config& c, const Shape& s, std::size_t index);
/// Logits each route thread reads per vector, over the route kernel's lanes.
int route_items(const Config& c, const Shape& s);
/// Threads of the one-block route + align kernel (moe/args.h).
int route_align_threads(const Config& c, const Shape& s);
/// Rows of sorted_pairs and act: the bound over any routing, or exact for expert_choice (every
/// expert has C rows).
long long padded_rows_of(const Config& c, const Shape& s);
/// Dynamic shared memory of gemm1 (gated) or gemm2.
unsigned gemm_smem(const Config& c, bool gated);
/// Static shared memory of a GEMM kernel (its row table).
unsigned gemm_static_smem(const Config& c, bool gated);
/// Threads of a GEMM kernel: its warps, plus the producer warpgroup of the warp-specialised one
/// (whose warps tunable counts its consumer warps, one warpgroup per 64 rows).
unsigned gemm_threads(const Config& c, bool gated);

/// gemm1's row gather in the warp-specialised kernel: the producer's cp.async copies. One TMA
/// box per row (moe_ws_gather_tma) was correct but 3.5-4x slower on the H100 (one warp issues
/// 128 boxes of 128 bytes per k-tile; benchmarks/moe/SM90.md).
constexpr int kWsGather = moe_ws_gather_cp_async;
/// The GATHER argument of a warp-specialised GEMM: gemm1's gather1 (2: rows gathered into sorted
/// order by moe_gather_rows_kernel first), else kWsGather (ignored by gemm2).
inline int ws_gather(const GemmTile& g) {
  return g.gather == moe_ws_gather_sorted ? g.gather : kWsGather;
}
/// gemm1 reads x's rows gathered into sorted order (gather1=2): the gather kernel before it.
inline bool gathers(const Config& c) { return c.g1.gather == moe_ws_gather_sorted; }


/// Workspace regions, in this order, each starting 256-byte aligned (sizes from the problem's
/// upper bounds, so the layout never depends on device-side counts):
///   ids          int [pairs]            routed ids when the caller passes no topk_ids (routed
///                                       modes only, not with fuse_route; pairs = T * k, or
///                                       E * C for expert_choice)
///   weights      float [pairs]          likewise for topk_weights
///   sorted_pairs int [padded_rows_of]   moe_max_padded, or exact for expert_choice
///   block_expert int [padded_rows_of / block_m]
///   padded_rows  int [1]
///   tiles        int [2]                tile counters of gemm1 and gemm2 (persist=2 only),
///                                       zeroed by moe_zero_kernel first in the call
///   counts       int [E]                expert_counts when the caller passes none
///   align        int [moe_align_scratch_ints(T * k, E, chunk)]  multi-block align only; with
///                                       fuse_route=2 the sort kernel's scratch instead:
///                                       u64 [moe_sort_header(E)] (barrier, aux sums; zeroed
///                                       by moe_zero_kernel first in the call), then int
///                                       [route_blocks][E] (every block's expert counts)
///   aux          u64 [2E + 1]           route's aux-loss scratch, zeroed by moe_zero_kernel in
///                                       the same stream (route-kernel modes only, not with
///                                       fuse_route 1 or 2)
///   scores       float [E, T]           expert_choice only: softmax scores, transposed
///   x_sorted     T [padded_rows_of, H]  gather1=2 only: x's rows in sorted order, zeros for
///                                       padding (moe_gather_rows_kernel -> gemm1)
///   act          T [padded_rows_of, I]  gemm1 -> gemm2
///   pair_out     T [pairs, H]           gemm2 -> combine (when there is a combine), or with
///                                       split2 > 1 fp32 [split2, pairs, H] partial sums
/// FP8 weights (dtype e4m3: T above is bf16) add the GEMMs' quantised inputs:
///   xq, xs       e4m3 [T, H], float [T]                     x per token row
///   actq, acts   e4m3 [padded_rows_of, I], float [padded_rows_of]  act per row
struct Layout {
  std::size_t ids = 0, weights = 0, sorted_pairs = 0, block_expert = 0, padded_rows = 0,
              tiles = 0, counts = 0, align = 0, aux = 0, scores = 0, x_sorted = 0, act = 0,
              pair_out = 0, xq = 0, xs = 0, actq = 0, acts = 0, total = 0;
};

Layout layout_of(const Config& c, const Shape& s, DType t);

/// The kernels of the configuration (header and NVRTC name expression), in launch order.
std::vector<KernelSource> kernel_sources(const Config& c, const Shape& s, DType t);
/// Threads per block of kernel `index`.
int stage_threads(const Config& c, const Shape& s, std::size_t index);
/// Dynamic shared memory of kernel `index`: exactly the size (the GEMMs also have static
/// shared memory, so a limit raised to 227 KiB would fail to launch).
unsigned stage_shared_bytes(const Config& c, const Shape& s, std::size_t index);

// ---- moe_launch.cpp ----

/// The layer's launches for a.problem and a.params (Op::run).
void launch_layer(const RunArgs& a, Launcher& launcher);

// ---- moe_reference.cpp ----

/// Rows of y the tuner checks: every row up to 256 tokens, else every stride-th (at most 256
/// rows): the reference's MLP costs 3*H*I weights read per checked (token, expert).
int reference_stride(const Shape& s);
std::vector<KernelSource> reference_kernels(const Shape& s, DType t);
std::size_t reference_workspace_bytes(const Shape& s);
/// The reference's launches (Op::run_reference).
void launch_reference(const RunArgs& a, Launcher& launcher);

// ---- moe_space.cpp ----

/// Why the configuration cannot be instantiated (no device needed) or can never win, or
/// nullopt; `tunables` are the op's (the values searched where a tunable has no effect, the
/// listed block sizes).
std::optional<std::string> config_reason(const Config& c, const Shape& s,
                                         const std::vector<Tunable>& tunables);

}  // namespace ktune::moe
