// ktune C++ API: tuned kernels, dispatched from the tuning databases.
//
// Pointers are CUDA device addresses and `stream` a CUstream (nullptr: legacy default stream).
// Calls run on the device of the current CUDA context (the primary context of device 0 when
// there is none). The first call for a problem plans it: database lookup, then compile or cache
// load; later calls only launch (no database query, no allocation, no compile). An op that needs
// scratch memory (moe) takes the caller's workspace, or uses one the runtime allocates at the
// problem's first call on each stream (two streams never share one). Thread-safe.
// Errors are thrown as ktune::Error subclasses (ktune/error.hpp); nothing is printed unless
// KTUNE_LOG is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ktune/dtype.hpp"
#include "ktune/error.hpp"

namespace ktune {

using Stream = void*;

/// How a configuration was found.
enum class Match : int { exact = 0, nearest_shape = 1, other_device = 2, default_config = 3 };
const char* match_kind_name(Match m);

/// What the runtime dispatches for one (device, op, dtype, problem).
struct MatchInfo {
  Match kind = Match::default_config;
  std::string op;
  std::string problem;          // the problem asked for, canonical key
  std::string params;           // the configuration dispatched
  std::string tuned_problem;    // the problem it was tuned on (empty for defaults)
  std::string tuned_device;     // the device key it was tuned on (empty for defaults)
  std::string database;         // the database it came from (empty for defaults)
  double tuned_us = 0.0;        // its measured median time (0 for defaults)
  std::string note;             // why the default serves although a neighbour was found
  std::string cannot_run;       // why the default given cannot run the problem (e4m3 at a head
                                // dim it does not take, say): then no configuration does; empty
                                // when it runs
};

/// One database the runtime consults, and what became of it.
struct DatabaseStatus {
  enum class State : int {
    loaded = 0,   // opened and consulted
    missing = 1,  // no file there (the user's database before the first sweep): not an error
    refused = 2   // not used at all: not a regular file, corrupt, foreign, newer schema...
  };
  std::string path;
  State state = State::missing;
  std::string reason;                     // why it is missing or refused; empty when loaded
  std::vector<std::string> errors;        // queries that failed on a loaded database, with why;
                                          // it stays in use for the others
  std::vector<std::string> skipped_rows;  // rows lookups skip, each with its reason (the first
                                          // 100: found by lookups so far, and by status())
  std::size_t skipped_count = 0;          // all skipped rows, listed or not
};
/// "loaded", "missing" or "refused".
const char* database_state_name(DatabaseStatus::State s);

/// What the runtime consults: its databases (the user's first) and its compile cache.
struct RuntimeStatus {
  std::vector<DatabaseStatus> databases;
  std::string cache_dir;   // the on-disk compile cache in use; empty when compiling in memory
  std::string cache_note;  // why the disk cache is not used, when it is not
};

struct RuntimeOptions {
  std::string db_path;                 // user database; empty: $KTUNE_DB or the default location
  bool use_shipped_databases = true;   // read-only databases installed with ktune / $KTUNE_DB_PATH
  std::string cache_dir;               // compile cache; empty: default per-user directory
  bool disk_cache = true;
};

/// Element strides of one attention tensor; the head dimension is contiguous.
struct AttentionStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t seq = 0;
};

/// Strides of q, k, v and o: [B,H,S,D] and [B,S,H,D] (and any other strided view) work without
/// copies. Every stride must keep rows 16-byte aligned.
struct AttentionLayout {
  AttentionStrides q, k, v, o;
  /// Contiguous [B, H, S, D] tensors.
  static AttentionLayout bhsd(std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk,
                              std::int64_t d);
  /// Contiguous [B, S, H, D] tensors.
  static AttentionLayout bshd(std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk,
                              std::int64_t d);
};

/// How MoE tokens choose their experts. Values match ktune_moe_routing and the moe op's
/// `routing` dimension.
enum class MoeRoutingMode : int {
  softmax = 0,         // softmax over the e logits, top-k, the k probabilities as weights
  softmax_renorm = 1,  // the same, the k weights renormalised to sum to 1 (Mixtral)
  sigmoid_group = 2,   // sigmoid scores; top-k of score + correction_bias within the topk_group
                       // best of n_group expert groups; weights renormalised, times
                       // routed_scaling (DeepSeek-V3)
  precomputed = 3,     // the caller's topk_ids and topk_weights: no routing
  expert_choice = 4,   // each expert picks its c = ceil(t * k / e) tokens of highest softmax
                       // score; a token gets 0..e experts
};

/// One Mixture-of-Experts layer (Runtime::moe). For each of t tokens, over the k experts the token
/// is routed to:  y[t] = sum of weight * (silu(x[t] W1g^T) * (x[t] W1u^T)) W2^T.
/// Tensors are contiguous row-major device arrays, every pointer 16-byte aligned; x, w1, w2 and y
/// are of `dtype` (bf16 or fp16). Dimension limits: `ktune ops`.
struct MoeArgs {
  const void* x = nullptr;                 // [t, h]
  const float* logits = nullptr;           // [t, e] fp32 router logits; routed modes only
  const float* correction_bias = nullptr;  // [e] fp32; sigmoid_group only (null: zeros)
  std::int32_t* topk_ids = nullptr;        // [t, k]: input with precomputed, else optional output
                                           // (expert_choice: [e, c], the tokens each expert chose)
  float* topk_weights = nullptr;           // fp32, like topk_ids: the routing weights
  const void* w1 = nullptr;                // [e, 2i, h]: rows 0..i-1 gate, i..2i-1 up projection
  const void* w2 = nullptr;                // [e, h, i]
  void* y = nullptr;                       // [t, h] output
  std::int32_t* expert_counts = nullptr;   // [e] optional output: pairs routed to each expert
  float* aux_loss = nullptr;               // [1] optional output, routed modes: load-balancing loss
  std::int64_t e = 0;                      // experts
  std::int64_t k = 0;                      // experts per token, at most e
  std::int64_t h = 0;                      // hidden size, a multiple of 8
  std::int64_t i = 0;                      // expert intermediate size, a multiple of 8
  std::int64_t t = 0;                      // tokens
  MoeRoutingMode routing = MoeRoutingMode::softmax_renorm;
  std::int64_t n_group = 1;                // sigmoid_group: expert groups, e % n_group == 0; else 1
  std::int64_t topk_group = 1;             // sigmoid_group: groups kept per token; else 1
  float routed_scaling = 1.0f;             // sigmoid_group: weights are multiplied by it; else 1
  DType dtype = DType::bf16;               // bf16, f16, or e4m3 (FP8 w1/w2, see w1_scale)
  void* workspace = nullptr;               // the caller's scratch, 256-byte aligned; null: the
                                           // runtime's (one per problem and stream)
  std::size_t workspace_bytes = 0;         // its size: at least moe_workspace_size(*this)
  // DType::e4m3: FP8 w1 and w2 (x and y bf16) with fp32 dequantisation scales per output
  // channel (real row = stored row x scale; a per-tensor scale repeated); null otherwise.
  const float* w1_scale = nullptr;         // [e, 2i]
  const float* w2_scale = nullptr;         // [e, h]
};

/// Which kernel family serves an attention call (AttentionArgs::impl).
enum class AttentionImpl : int {
  automatic = 0,  // nq <= kDecodeMaxNq: split-KV decode (not a paged varlen batch); else prefill
  prefill = 1,    // flash_attention: contiguous, varlen or paged K/V (paged varlen too)
  decode = 2,     // flash_decode: split-KV with GQA packing, contiguous, varlen or paged K/V
};

/// Query rows per sequence up to which AttentionImpl::automatic picks the decode kernel: the
/// lookup's regime boundary between decode and prefill problems (DimSpec::regimes of nq).
constexpr std::int64_t kDecodeMaxNq = 16;

/// One attention forward call (Runtime::attention): prefill or decode, contiguous or paged K/V,
/// variable-length batches (cu_seqlens: q, k, v, o packed [total, h, d], nq and nk the longest
/// lengths, lse [hq, total_q]), with the mask variants. o = softmax(mask(scale * q k^T)) v per
/// query head; query head h reads KV head h / (hq / hkv). Every pointer of q, k, v, o is 16-byte aligned, the others 4-byte.
struct AttentionArgs {
  const void* q = nullptr;  // [b, hq, nq, d] (strides: layout)
  const void* k = nullptr;  // [b, hkv, nk, d], or paged: the pool [pages, page_size, hkv, d]
  const void* v = nullptr;  // like k
  void* o = nullptr;        // like q
  float* lse = nullptr;     // optional fp32 [b, hq, nq] output: each row's log-sum-exp
  std::int64_t b = 0, hq = 0, hkv = 0, nq = 0, nk = 0, d = 0;  // paged: nk = longest sequence
  bool causal = false;      // bottom-right aligned: query row r sees keys <= r + len - nq
  float scale = 0.0f;       // <= 0: 1/sqrt(d)
  std::int64_t window = 0;  // > 0: each row sees only the last `window` keys up to its own
  float softcap = 0.0f;     // > 0: scores become softcap * tanh(scores / softcap)
  const float* alibi_slopes = nullptr;  // optional fp32 [hq]: score -= slope * |key - query|
  std::int64_t page_size = 0;           // 0: contiguous k and v; else 16, 32, 64, 128 or 256
  const std::int32_t* block_table = nullptr;  // paged: [b, ceil(nk / page_size)] page ids
  const std::int32_t* seq_lens = nullptr;     // paged: [b] keys of each sequence, 1..nk
  const std::int32_t* cu_seqlens_q = nullptr;  // varlen: [b + 1] row offsets of packed q and o
  const std::int32_t* cu_seqlens_k = nullptr;  // varlen: [b + 1] row offsets of packed k and v
                                               // (paged: null, seq_lens gives the lengths)
  const AttentionLayout* layout = nullptr;    // null: contiguous [b, h, s, d], or varlen packed
                                              // [total, h, d] (batch strides unused; paged: q, o)
  DType dtype = DType::bf16;  // bf16, f16, or e4m3 (q, k, v in FP8, o in bf16; sm_90a prefill)
  AttentionImpl impl = AttentionImpl::automatic;
  void* workspace = nullptr;        // the caller's scratch (256-byte aligned) or null: the
                                    // runtime's, one per problem and stream
  std::size_t workspace_bytes = 0;  // its size: at least attention_workspace_size(*this)
  // e4m3: dequantisation scales (real value = stored value x scale); other dtypes: must be 1.
  float q_scale = 1.0f, k_scale = 1.0f, v_scale = 1.0f;
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// The process-wide runtime the C API uses.
  static Runtime& global();

  void add_rmsnorm(const void* x, const void* residual, const void* weight, void* y, void* h,
                   std::int64_t m, std::int64_t n, DType dtype, float eps, Stream stream);
  /// residual and h are both null (plain layernorm) or both set.
  void layernorm(const void* x, const void* residual, const void* weight, const void* bias,
                 void* y, void* h, std::int64_t m, std::int64_t n, DType dtype, float eps,
                 Stream stream);
  void bias_act(const void* x, const void* bias, void* y, std::int64_t m, std::int64_t n,
                Activation act, DType dtype, Stream stream);
  void swiglu(const void* x, void* y, std::int64_t m, std::int64_t n, DType dtype, Stream stream);
  void softmax(const void* x, void* y, std::int64_t m, std::int64_t n, float scale, DType dtype,
               Stream stream);

  /// Flash attention forward: o = softmax(scale * q k^T [causal mask]) v, with q [B, Hq, Nq, D],
  /// k and v [B, Hkv, Nk, D], o like q (strides from `layout`; null: contiguous [B,H,S,D]).
  /// Hq must be a multiple of Hkv. Causal masking is aligned to the bottom right when Nq != Nk.
  /// `lse` (may be null) receives the fp32 row log-sum-exp, [B, Hq, Nq] contiguous.
  /// scale <= 0 means 1/sqrt(D). Always the prefill kernel: for decode (a few query rows per
  /// sequence), paged caches and the mask variants use attention(), which picks flash_decode.
  void flash_attention(const void* q, const void* k, const void* v, void* o, float* lse,
                       std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                       std::int64_t nk, std::int64_t d, bool causal, float scale, DType dtype,
                       Stream stream, const AttentionLayout* layout = nullptr);

  /// Attention forward through one entry for prefill, decode (split-KV, GQA packing), paged KV
  /// caches and variable-length batches, with sliding window, soft-capping and ALiBi: args.impl
  /// picks the kernel family (automatic: decode for nq <= kDecodeMaxNq, unless a variant or
  /// combination it lacks is asked for; then prefill). Every argument is checked on the host
  /// before any CUDA call. The decode kernel's split partials need a workspace: args.workspace
  /// (attention_workspace_size bytes) for graph capture without allocation, else the runtime's
  /// per (problem, stream), as moe().
  void attention(const AttentionArgs& args, Stream stream);
  /// Workspace bytes attention(args) needs with the configuration the lookup picks (0 when the
  /// chosen kernel needs none). Plans the problem.
  std::size_t attention_workspace_size(const AttentionArgs& args);

  /// Mixture-of-Experts layer: routing (or the caller's), alignment of tokens by expert, two
  /// grouped GEMMs and the weighted combine, all on `stream`. Every argument is checked on the
  /// host before any CUDA call (InvalidArgument naming it and what is allowed): null, unused or
  /// misaligned pointers for the routing mode, the problem's constraints, the scalars.
  /// Workspace: with args.workspace set (at least moe_workspace_size(args) bytes) no call
  /// allocates device memory: the form for CUDA graph capture and for callers with their own
  /// allocator. Without, the runtime allocates one per (problem, stream) at the problem's first
  /// call on that stream (CU_STREAM_PER_THREAD: per thread) and frees it at reset() or
  /// configure(). A graph captured that way keeps using the capture stream's workspace: replay
  /// it on that stream (elsewhere it could overlap calls on it), and capture it again after a
  /// reset(). A problem's first call may come inside a stream capture: planning and allocating
  /// run with the thread's capture mode relaxed (they are not captured work).
  void moe(const MoeArgs& args, Stream stream);
  /// Workspace bytes moe(args) needs with the configuration the lookup picks for args' problem
  /// (dimensions, routing, dtype; pointers are not looked at). Plans the problem.
  std::size_t moe_workspace_size(const MoeArgs& args);

  /// Generic entry: runs `op` with tensors in the op's declared order and scalars likewise.
  /// The problem is given by its dimension values in declared order.
  void run(std::string_view op, const std::vector<std::int64_t>& problem, DType dtype,
           const std::vector<const void*>& tensors, const std::vector<double>& scalars,
           Stream stream);

  /// What would be dispatched for `op` on `shape` ("m=16384,n=4096"); plans it if needed.
  MatchInfo query(std::string_view op, std::string_view shape, DType dtype);

  /// The databases and compile cache this runtime uses, opening them if no call has yet, with
  /// every row of the databases that lookups skip and why. Needs no GPU (creates no CUDA
  /// context). The same facts are logged once per runtime to stderr when KTUNE_LOG is set.
  RuntimeStatus status();

  /// Drops all plans and the runtime's workspaces; databases are reopened on the next call.
  void reset();
  /// Replaces the options and drops all plans and the runtime's workspaces.
  void configure(RuntimeOptions options);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune
