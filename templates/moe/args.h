// Arguments of the Mixture-of-Experts kernels, shared by the kernels (NVRTC, nvcc) and host code
// (g++): no headers, plain types only.
//
// One MoE layer, T tokens of hidden size H, E experts of intermediate size I, top-k routing:
//   y[t] = sum over the k experts e chosen for t of weight[t, e] * (silu(x[t] W1g_e^T) *
//          (x[t] W1u_e^T)) W2_e^T
// with w1 [E, 2I, H] (rows 0..I-1 the gate projection, I..2I-1 the up projection) and w2
// [E, H, I]. A (token, slot) pair p = t * k + s names one of a token's k choices.
//
// The kernels, in order (no host synchronisation between them; every grid is sized from the
// problem's upper bounds and blocks past the device-side counts exit):
//   1. route:   logits [T, E] -> topk_ids [T, k], topk_weights [T, k]  (skipped when the caller
//               passes precomputed ids and weights)
//   2. align:   topk_ids -> the pairs sorted by expert, each expert's list padded to a multiple
//               of block_m (the GEMMs' row tile), and the expert of each block of block_m rows
//   3. gemm1:   for each block: rows x[token(pair)] gathered through sorted_pairs, times the
//               expert's w1, with silu(gate) * up fused into the epilogue -> act [padded, I]
//   4. gemm2:   act rows times the expert's w2, scaled by the pair's routing weight in fp32 ->
//               pair_out [T * k, H] at row p (scattered back through sorted_pairs)
//   5. combine: y[t] = sum over s of pair_out[t * k + s], in slot order (deterministic)
// With fuse_route = 1 (small T * k), 1 and 2 are one kernel of one block (moe/route_align.cuh).
// moe_expert_choice replaces 1, 2 and 5 (moe/expert_choice.cuh): scores, select (each expert's
// C tokens, and the static padded layout), the GEMMs with gemm1 gathering x through
// pair_token, and a combine that sums the pairs naming each token in expert order.
#pragma once

#if defined(__CUDACC__)
#define KTUNE_MOE_HD __host__ __device__
#else
#define KTUNE_MOE_HD
#endif

namespace ktune {

/// Experts per layer: at most kMoeMaxExperts. The kernels that keep an array per expert in
/// shared memory or registers take its size as a template parameter EMAX, kMoeEmax (256) unless
/// named: the host names moe_emax(E), so a layer of up to 256 experts compiles exactly the
/// kernels it did before wider layers were supported (the shipped databases' rows were timed
/// with that machine code), and one of 257..512 (Kimi-K2's 384, Qwen3-Next's 512) their
/// EMAX = 512 forms.
constexpr int kMoeMaxExperts = 512;
constexpr int kMoeEmax = 256;
KTUNE_MOE_HD constexpr int moe_emax(int experts) {
  return experts <= kMoeEmax ? kMoeEmax : kMoeMaxExperts;
}

/// How tokens choose experts (the problem's `routing` dimension, in this order).
enum MoeRouting : int {
  moe_softmax = 0,         // softmax over E, top-k of the probabilities, weights as they are
  moe_softmax_renorm = 1,  // the same, weights renormalised to sum to 1 over the k (Mixtral)
  moe_sigmoid_group = 2,   // sigmoid scores; selection on score + correction_bias, limited to
                           // the topk_group best of n_group expert groups (a group's score is
                           // the sum of its two best biased scores); weights are the unbiased
                           // scores renormalised over the k, times routed_scaling (DeepSeek-V3)
  moe_precomputed = 3,     // ids and weights given by the caller: no route kernel
  moe_expert_choice = 4,   // each expert picks its C = moe_expert_capacity(T, k, E) tokens of
                           // highest softmax score (softmax over experts, per token), ties to
                           // the lower token id; weights are the scores; a token gets 0..E
                           // experts (moe/expert_choice.cuh replaces route, align and combine)
};

struct MoeRouteArgs {
  const float* logits;           // [T, E] fp32, row-major
  const float* correction_bias;  // [E] fp32 (moe_sigmoid_group; may be nullptr: zeros)
  int* topk_ids;                 // [T, k] out: chosen experts, best first; ties go to the lower id
  float* topk_weights;           // [T, k] out: fp32 weights in the same order
  float* aux_loss;               // [1] out or nullptr: E * sum_e f_e * P_e (switch transformer),
                                 // f_e = share of the T*k choices that went to e, P_e = mean
                                 // over tokens of e's softmax (or normalised sigmoid) probability
  unsigned long long* aux_scratch;  // [2 * E + 1] when aux_loss is set: fixed-point P_e sums,
                                 // choice counts, a block ticket; zeroed once when allocated,
                                 // every call leaves it zeroed (see moe/route.cuh)
  int tokens;                    // T >= 1
  int experts;                   // E, 1..kMoeMaxExperts (the kernel's EMAX at most)
  int k;                         // 1..min(E, 16)
  int routing;                   // MoeRouting (not moe_precomputed)
  int n_group;                   // moe_sigmoid_group: E % n_group == 0; otherwise 1
  int topk_group;                // moe_sigmoid_group: 1..n_group; otherwise 1
  float routed_scaling;          // moe_sigmoid_group: weights are multiplied by it; otherwise 1
};

struct MoeAlignArgs {
  const int* topk_ids;           // [T * k]; an id outside 0..E-1 drops that pair (never read
                                 // past the weights)
  int* sorted_pairs;             // [moe_max_padded(...)] out: pair indices grouped by expert,
                                 // each expert's run padded to a multiple of block_m with the
                                 // value T * k (a row that gathers nothing and writes nothing)
  int* block_expert;             // [moe_max_blocks(...)] out: expert of each block of block_m
                                 // rows of sorted_pairs; -1 for blocks past the end
  int* padded_rows;              // [1] out: rows of sorted_pairs in use (a multiple of block_m)
  int* expert_counts;            // [E] out: pairs routed to each expert (expert utilisation)
  int* scratch;                  // multi-block path only: [moe_align_scratch_ints(pairs, E,
                                 // chunk)] (below); nullptr for the one-block kernel
  int pairs;                     // T * k
  int experts;                   // E
  int block_m;                   // the GEMMs' row tile
};

/// moe_route_align_kernel (moe/route_align.cuh): routing and alignment in one block. route as
/// for moe_route_kernel except that topk_ids may be nullptr (the ids then live in shared memory
/// only: nothing after alignment reads them) and aux_scratch is not used (one block sums the aux
/// loss in shared memory); align as for moe_align_kernel with topk_ids and scratch unused.
struct MoeRouteAlignArgs {
  MoeRouteArgs route;
  MoeAlignArgs align;
};

/// moe_route_sort_kernel (moe/route_sort.cuh): the route kernel's grid, every block then
/// aligning its own pairs after one grid-wide barrier. route and align as for
/// moe_route_align_kernel (topk_ids may be nullptr; align.topk_ids and align.scratch unused).
/// scratch: moe_sort_header(E) unsigned long longs (the barrier's arrival count, then the
/// aux-loss sums: E probability sums and E choice counts), all zeroed before the kernel runs
/// (by moe_zero_kernel, first in the call: the kernel waits for it before it touches them),
/// then the blocks' expert counts, int [gridDim.x][E], which every block writes before it
/// arrives.
struct MoeRouteSortArgs {
  MoeRouteArgs route;
  MoeAlignArgs align;
  unsigned long long* scratch;
};

/// The sort kernel's grid is at most this many blocks (all resident at once: they meet at a
/// barrier) and its count table at most kMoeSortMaxTable ints (blocks x E), each block reading
/// all of it.
constexpr int kMoeSortMaxBlocks = 64;
constexpr int kMoeSortMaxTable = 8192;

/// Unsigned long longs before the sort kernel's count table: the barrier's count, then the
/// aux-loss sums (2 * E: block 0 writes the loss after the barrier, so no completion count as
/// in MoeRouteArgs::aux_scratch), rounded up to 32 (256 bytes).
KTUNE_MOE_HD constexpr int moe_sort_header(int experts) {
  return (1 + 2 * experts + 31) / 32 * 32;
}

/// Most scores (threads x ITEMS * VEC per thread) a route block holds at once: the
/// moe_sigmoid_group scratch (a float each, 32 KiB) and, in the one-block kernel, registers.
constexpr int kMoeRouteMaxScores = 8192;
/// The one-block kernel routes at most this many tokens and aligns at most this many pairs
/// (T * k; their ids stay in shared memory).
constexpr int kMoeFuseMaxTokens = 1024;
constexpr int kMoeFuseMaxPairs = 4096;

/// Threads of moe_route_align_kernel with `scores` (ITEMS * VEC) scores per thread for
/// `experts` experts: 1024, or fewer so that the block holds at most kMoeRouteMaxScores; at
/// least 128. Past 256 experts (EMAX 512) at most kMoeRouteAlignWideThreads: the align warps'
/// offsets, [THREADS / 32][512] ints (2 KiB a warp), share 48 KiB of static shared memory with
/// the ids (8 KiB), the expert totals and starts (4 KiB) and the aux sums (6 KiB).
constexpr int kMoeRouteAlignWideThreads = 256;
KTUNE_MOE_HD constexpr int moe_route_align_threads(int scores, int experts) {
  int threads = 1024;
  while (threads > 128 && threads * scores > kMoeRouteMaxScores) threads /= 2;
  return moe_emax(experts) > kMoeEmax && threads > kMoeRouteAlignWideThreads
             ? kMoeRouteAlignWideThreads
             : threads;
}

/// One grouped GEMM over the blocks of sorted_pairs. gemm1: a = x [T, H], gathered (row of pair
/// p is x[p / k]); w = w1 [E, 2I, H]; out = act [max_padded, I] in sorted order; n = I,
/// kdim = H. gemm2: a = act [max_padded, I] in sorted order; w = w2 [E, H, I];
/// out = pair_out [T * k, H] at row p (rows of padding are not written); n = H, kdim = I;
/// the routing weight of the pair multiplies the fp32 accumulator before the store.
/// e4m3 operands (FP8 weights, activations quantised per row): a_scale and w_scale dequantise
/// the fp32 accumulator in the epilogue (out = acc * a_scale[row] * w_scale[column]); out bf16.
struct MoeGemmArgs {
  const void* a;
  const void* w;
  void* out;
  const int* sorted_pairs;
  const int* block_expert;
  const int* padded_rows;
  const float* topk_weights;     // [T * k] (gemm2 only)
  int pairs;                     // T * k
  int k;
  int n;                         // output columns
  int kdim;                      // reduction length
  int max_blocks;                // grid bound: moe_max_blocks(...)
  const int* pair_token;         // gemm1: [pairs] token of each pair (moe_expert_choice);
                                 // nullptr: pair / k
  const float* a_scale;          // e4m3: per row of a (gemm1: x's token rows [T]; gemm2:
                                 // act's rows [max_padded])
  const float* w_scale;          // e4m3: per weight row (output channel): gemm1 [E, 2I],
                                 // gemm2 [E, H]
  int* tile_counter;             // moe_gemm_ws_persistent_kernel only: tiles taken so far, zero
                                 // at launch (the op zeroes it with moe_zero_kernel)
};

/// Rows of 16-bit elements quantised to e4m3 with one fp32 scale per row (FP8 MoE): scale[r] =
/// moe_quant_scale(max |in[r, :]|), out[r, c] = e4m3(in[r, c] / scale[r]).
/// With sorted_pairs set (gemm2's act), rows at or past *padded_rows and padding rows
/// (sorted_pairs[r] == pairs) are skipped: gemm1 never wrote them and gemm2 never reads them.
struct MoeQuantArgs {
  const void* in;                // [rows, n] bf16
  void* out;                     // [rows, n] e4m3
  float* scale;                  // [rows]
  int rows;                      // grid bound
  int n;                         // a multiple of 8
  const int* padded_rows;        // nullptr: every row
  const int* sorted_pairs;
  int pairs;
};

/// Threads per row (one block per row) of moe_quant_rows_kernel (moe/quant.cuh).
constexpr int kMoeQuantThreads = 128;

#if defined(__CUDACC__)
/// The e4m3 scale of a row whose largest magnitude is amax: the smallest power of two at or
/// above amax / 448 (the row's largest value lands in e4m3's top binade, at most 448), 1 for an
/// all-zero row. A power of two, so that dividing by it is exact and two computations of a row
/// that differ in their last bits (another summation order, the wgmma's e4m3 accumulation)
/// share its scale unless amax crosses a binade boundary: with amax / 448 itself, a one-ulp
/// change of the row's largest act value re-rounded every value of the row (measured on the
/// H100: the warp-specialised e4m3 GEMMs then missed the reference kernels at a few tokens).
__device__ __forceinline__ float moe_quant_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  const unsigned bits = __float_as_uint(amax * (1.0f / 448.0f));
  return __uint_as_float((bits + 0x007fffffu) & 0xff800000u);  // exponent rounded up
}
#endif

struct MoeCombineArgs {
  const void* pair_out;          // [T * k, H] (T), or [splits][T * k, H] fp32 partial sums
  void* y;                       // [T, H]
  int tokens;
  int k;
  int hidden;
  int splits;                    // fp32 partial sums only: gemm2's split-k count
};

/// moe_expert_choice: the routing of moe/expert_choice.cuh. Pair p = e * C + c is the c-th token
/// (in increasing id) that expert e chose; sorted_pairs is static: expert e's rows start at
/// e * Cp (Cp = C rounded up to block_m), row e * Cp + c holds pair e * C + c for c < C and the
/// padding value E * C after.
struct MoeExpertChoiceArgs {
  const float* logits;           // [T, E] fp32, row-major
  float* scores;                 // [E, T] scratch: softmax over experts of each token, transposed
  int* pair_token;               // [E * C] out: chosen tokens, expert-major, increasing per expert
  float* pair_weight;            // [E * C] out: their scores, the routing weights
  int* sorted_pairs;             // [moe_expert_choice_padded(E, C, block_m)] out
  int* block_expert;             // [moe_expert_choice_padded(...) / block_m] out
  int* padded_rows;              // [1] out: moe_expert_choice_padded(E, C, block_m)
  int* expert_counts;            // [E] out or nullptr: C each
  int tokens;                    // T >= 1
  int experts;                   // E, 1..kMoeMaxExperts (the kernels' EMAX at most)
  int capacity;                  // C = moe_expert_capacity(T, k, E)
  int block_m;                   // the GEMMs' row tile
};

/// Launch geometry of moe_expert_choice_scores_kernel (fixed): tokens per block, their logits
/// staged in shared memory, and threads per block.
constexpr int kMoeEcScoreTokens = 32;
constexpr int kMoeEcScoreThreads = 128;
/// Tokens per block of the scores kernel of EMAX: its [tokens][EMAX + 1] float tile stays within
/// 48 KiB of static shared memory (32 at 256, moe_expert_choice_scores_kernel; 16 at 512,
/// moe_expert_choice_scores_wide_kernel<512>).
KTUNE_MOE_HD constexpr int moe_ec_score_tokens(int emax) {
  return kMoeEcScoreTokens * kMoeEmax / emax;
}

struct MoeExpertChoiceCombineArgs {
  const void* pair_out;          // [E * C, H]: row p = weight of pair p x its expert's MLP
  const int* pair_token;         // [E * C] as MoeExpertChoiceArgs
  void* y;                       // [T, H]
  int tokens;
  int experts;
  int capacity;
  int hidden;
};

/// moe_expert_choice: tokens each expert picks, C = ceil(T * k / E); 1 <= C <= T as k <= E. k is
/// the mean number of experts per token (top-k times the capacity factor).
KTUNE_MOE_HD constexpr int moe_expert_capacity(long long tokens, int k, int experts) {
  return static_cast<int>((tokens * k + experts - 1) / experts);
}

/// moe_expert_choice: rows of sorted_pairs, each expert's C rows padded to a multiple of block_m.
KTUNE_MOE_HD constexpr long long moe_expert_choice_padded(int experts, int capacity, int block_m) {
  return static_cast<long long>(experts) * ((capacity + block_m - 1) / block_m * block_m);
}

/// Upper bound of the rows of sorted_pairs: every pair, plus block_m - 1 of padding for each
/// expert that can receive a pair.
KTUNE_MOE_HD constexpr long long moe_max_padded(long long pairs, int experts, int block_m) {
  const long long used = pairs < experts ? pairs : experts;
  return ((pairs + used * (block_m - 1)) + block_m - 1) / block_m * block_m;
}

KTUNE_MOE_HD constexpr long long moe_max_blocks(long long pairs, int experts, int block_m) {
  return moe_max_padded(pairs, experts, block_m) / block_m;
}

/// Ints of MoeAlignArgs::scratch for the multi-block align path with `chunk` pairs per block:
/// per-chunk expert counts, then one row of expert starts (moe/align.cuh).
KTUNE_MOE_HD constexpr long long moe_align_scratch_ints(long long pairs, int experts, int chunk) {
  return ((pairs + chunk - 1) / chunk + 1) * experts;
}

}  // namespace ktune
