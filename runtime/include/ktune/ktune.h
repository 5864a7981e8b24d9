/* ktune C API: tuned kernels for any FFI (ctypes, cffi, ...).
 *
 * Every function returns KTUNE_OK or an error code; ktune_last_error() then gives the message of
 * the calling thread's last failure. Pointers are CUDA device addresses; `stream` is a CUstream
 * (NULL: the legacy default stream). A call runs in its stream's context (the GPU the stream
 * belongs to, whichever context is current on the thread), and leaves the thread's current
 * context as it found it; NULL runs in the current one. The first call for a problem plans it (database lookup,
 * compile or cache load); later calls only launch. The library never prints unless KTUNE_LOG is
 * set, and never exits. */
#ifndef KTUNE_KTUNE_H
#define KTUNE_KTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ktune_status {
  KTUNE_OK = 0,
  KTUNE_ERROR_INVALID_ARGUMENT = 1, /* bad shape, dtype, null or misaligned pointer */
  KTUNE_ERROR_NO_DEVICE = 2,        /* no CUDA driver or device */
  KTUNE_ERROR_CUDA = 3,             /* a driver call or launch failed */
  KTUNE_ERROR_CUDA_STICKY = 4,      /* ... and the CUDA context is now unusable */
  KTUNE_ERROR_COMPILE = 5,          /* NVRTC failed */
  KTUNE_ERROR_DATABASE = 6,
  KTUNE_ERROR_INTERNAL = 7
} ktune_status;

/* KTUNE_E4M3: OCP FP8 E4M3 inputs (flash attention on sm_90a; the output is bf16). */
typedef enum ktune_dtype {
  KTUNE_FP32 = 0,
  KTUNE_FP16 = 1,
  KTUNE_BF16 = 2,
  KTUNE_E4M3 = 4
} ktune_dtype;

typedef enum ktune_activation {
  KTUNE_GELU_TANH = 0,
  KTUNE_GELU_ERF = 1,
  KTUNE_SILU = 2,
  KTUNE_RELU = 3
} ktune_activation;

/* How the configuration for a problem was found. */
typedef enum ktune_match {
  KTUNE_MATCH_EXACT = 0,         /* tuned on this device for this problem */
  KTUNE_MATCH_NEAREST_SHAPE = 1, /* tuned on this device for the nearest problem */
  KTUNE_MATCH_OTHER_DEVICE = 2,  /* tuned on another device of the same architecture */
  KTUNE_MATCH_DEFAULT = 3        /* built-in default for the architecture */
} ktune_match;

typedef void* ktune_stream;

const char* ktune_version(void);
/* Message of the calling thread's last failed call ("" if none). */
const char* ktune_last_error(void);

/* h = x + residual; y = h * rsqrt(mean(h^2) + eps) * weight. x, residual, y, h: [m, n]; weight: [n]. */
ktune_status ktune_add_rmsnorm(const void* x, const void* residual, const void* weight, void* y,
                               void* h, int64_t m, int64_t n, ktune_dtype dtype, float eps,
                               ktune_stream stream);
/* y = (h - mean) * rsqrt(var + eps) * weight + bias with h = x (+ residual, written to h).
 * residual and h are both NULL or both set. */
ktune_status ktune_layernorm(const void* x, const void* residual, const void* weight,
                             const void* bias, void* y, void* h, int64_t m, int64_t n,
                             ktune_dtype dtype, float eps, ktune_stream stream);
/* y = act(x + bias). x, y: [m, n]; bias: [n]. */
ktune_status ktune_bias_act(const void* x, const void* bias, void* y, int64_t m, int64_t n,
                            ktune_activation act, ktune_dtype dtype, ktune_stream stream);
/* y = silu(a) * b with a = x[:, :n], b = x[:, n:]. x: [m, 2n]; y: [m, n]. */
ktune_status ktune_swiglu(const void* x, void* y, int64_t m, int64_t n, ktune_dtype dtype,
                          ktune_stream stream);
/* y = softmax(scale * x) over each row. x, y: [m, n]. */
ktune_status ktune_softmax(const void* x, void* y, int64_t m, int64_t n, float scale,
                           ktune_dtype dtype, ktune_stream stream);

/* Flash attention forward. q: [b, hq, nq, d], k and v: [b, hkv, nk, d], o like q, with element
 * strides (batch, head, seq for q, k, v, o in that order: 12 values) or NULL for contiguous
 * [b, h, s, d]. d: a multiple of 8, 8..256. lse: fp32 [b, hq, nq] or NULL. hq % hkv == 0.
 * causal: 0 or 1 (bottom-right aligned when nq != nk). scale <= 0: 1/sqrt(d). Always the
 * prefill kernel: decode (a few query rows), paged caches and mask variants go through
 * ktune_attention. */
ktune_status ktune_flash_attention(const void* q, const void* k, const void* v, void* o,
                                   float* lse, int64_t b, int64_t hq, int64_t hkv, int64_t nq,
                                   int64_t nk, int64_t d, const int64_t* strides, int causal,
                                   float scale, ktune_dtype dtype, ktune_stream stream);

/* Which kernel family serves ktune_attention (ktune_attention_args.impl). */
typedef enum ktune_attention_impl {
  KTUNE_ATTENTION_AUTO = 0,    /* nq <= 16: split-KV decode (not paged varlen); else prefill */
  KTUNE_ATTENTION_PREFILL = 1, /* flash_attention: contiguous, varlen or paged K/V (paged
                                  varlen: packed q and o, seq_lens for the keys) */
  KTUNE_ATTENTION_DECODE = 2   /* flash_decode: split-KV, GQA packing, contiguous, varlen or
                                  paged K/V (varlen and paged not together) */
} ktune_attention_impl;

/* One attention forward call: prefill or decode, contiguous or paged K/V, mask variants.
 * o = softmax(mask(scale * q k^T)) v per query head; query head h reads KV head h / (hq / hkv).
 * q, k, v, o of `dtype`, 16-byte aligned; the others 4-byte aligned. Fill it with
 * ktune_attention_args_init() first (struct_size and the defaults), so that a program built
 * against this header keeps working when later versions append fields. */
typedef struct ktune_attention_args {
  size_t struct_size;          /* sizeof(ktune_attention_args), set by ktune_attention_args_init() */
  const void* q;               /* [b, hq, nq, d] (strides: see strides) */
  const void* k;               /* [b, hkv, nk, d]; paged: the pool [pages, page_size, hkv, d] */
  const void* v;               /* like k */
  void* o;                     /* like q */
  float* lse;                  /* optional fp32 [b, hq, nq] output: the rows' log-sum-exp */
  int64_t b, hq, hkv, nq, nk, d; /* paged: nk is the longest sequence */
  const int64_t* strides;      /* 12 element strides (batch, head, seq of q, k, v, o) or NULL:
                                  contiguous [b, h, s, d]; paged: the k and v entries are unused */
  int causal;                  /* 0 or 1, bottom-right aligned: row r sees keys <= r + len - nq */
  float scale;                 /* <= 0: 1/sqrt(d) */
  int64_t window;              /* > 0: each row sees only the last `window` keys up to its own */
  float softcap;               /* > 0: scores become softcap * tanh(scores / softcap) */
  const float* alibi_slopes;   /* optional fp32 [hq]: score -= slope * |key - query position| */
  int64_t page_size;           /* 0: contiguous K/V; else 16, 32, 64, 128 or 256 */
  const int32_t* block_table;  /* paged: [b, ceil(nk / page_size)] page ids into the pools */
  const int32_t* seq_lens;     /* paged: [b] keys of each sequence, 1..nk */
  ktune_dtype dtype;           /* default KTUNE_BF16 */
  ktune_attention_impl impl;   /* default KTUNE_ATTENTION_AUTO */
  void* workspace;             /* the caller's scratch (256-byte aligned), or NULL: the runtime's,
                                  allocated at a problem's first call on each stream */
  size_t workspace_bytes;      /* its size: at least ktune_attention_workspace_size() */
  const int32_t* cu_seqlens_q; /* varlen: [b + 1] row offsets; q and o packed [total_q, hq, d]
                                  (strides: the batch entries unused), lse [hq, total_q] */
  const int32_t* cu_seqlens_k; /* varlen: [b + 1] row offsets; k and v packed [total_k, hkv, d]
                                  (paged: NULL, seq_lens gives the key counts);
                                  nq and nk are then the longest lengths */
  float q_scale, k_scale, v_scale; /* dtype KTUNE_E4M3: dequantisation scales of q, k, v (real
                                  value = stored e4m3 x scale; default 1); o is bf16 then.
                                  Other dtypes: must stay 1 */
} ktune_attention_args;

/* Zeroes *args and sets struct_size and the defaults (dtype KTUNE_BF16, impl AUTO). Writes
 * sizeof(ktune_attention_args) of this header: for C and C++ callers compiled against it. */
ktune_status ktune_attention_args_init(ktune_attention_args* args);
/* ktune_attention_args_init for a struct of `size` bytes, the caller's sizeof: bindings that
 * declare the struct themselves (ctypes, cffi) and programs that may run against a newer
 * library, whose struct has grown, use this form so that nothing past `size` is written.
 * Zeroes `size` bytes, sets struct_size = size and each default whose field lies wholly
 * inside them. size must lie between the first version's size and this library's sizeof. */
ktune_status ktune_attention_args_init_sized(ktune_attention_args* args, size_t size);
/* Runs the call on `stream`. Every argument is checked before any CUDA call; the message names
 * the bad one. Pass a workspace when capturing into a CUDA graph: then no call allocates. */
ktune_status ktune_attention(const ktune_attention_args* args, ktune_stream stream);
/* Workspace bytes ktune_attention(args) needs with the configuration the lookup picks (0 when
 * the chosen kernel needs none; pointers are not looked at). Plans the problem. */
ktune_status ktune_attention_workspace_size(const ktune_attention_args* args, size_t* bytes);

/* How MoE tokens choose their experts (ktune_moe_args.routing). */
typedef enum ktune_moe_routing {
  KTUNE_MOE_SOFTMAX = 0,        /* softmax over the e logits, top-k, probabilities as weights */
  KTUNE_MOE_SOFTMAX_RENORM = 1, /* the same, the k weights renormalised to sum to 1 (Mixtral) */
  KTUNE_MOE_SIGMOID_GROUP = 2,  /* sigmoid + correction bias, group-limited top-k, weights
                                   renormalised times routed_scaling (DeepSeek-V3) */
  KTUNE_MOE_PRECOMPUTED = 3,    /* the caller's topk_ids and topk_weights: no routing */
  KTUNE_MOE_EXPERT_CHOICE = 4   /* each expert picks its c = ceil(t * k / e) best tokens */
} ktune_moe_routing;

/* One Mixture-of-Experts layer: for each of t tokens, over the k experts it is routed to,
 * y[t] = sum of weight * (silu(x[t] W1g^T) * (x[t] W1u^T)) W2^T. Contiguous row-major device
 * arrays, every pointer 16-byte aligned; x, w1, w2, y of `dtype` (KTUNE_BF16 or KTUNE_FP16).
 * KTUNE_E4M3: FP8 weights w1, w2 with fp32 dequantisation scales per output channel (w1_scale,
 * w2_scale; a per-tensor scale is that value repeated), x and y in bf16; x and the gated
 * activation are quantised to e4m3 per row inside the layer (sm_89 and later).
 * Fill it with ktune_moe_args_init() first: it sets struct_size and the defaults, so that a
 * program built against this header keeps working when later versions append fields. */
typedef struct ktune_moe_args {
  size_t struct_size;             /* sizeof(ktune_moe_args), set by ktune_moe_args_init() */
  const void* x;                  /* [t, h] */
  const float* logits;            /* [t, e] fp32 router logits; routed modes only */
  const float* correction_bias;   /* [e] fp32; KTUNE_MOE_SIGMOID_GROUP only (NULL: zeros) */
  int32_t* topk_ids;              /* [t, k]: input with KTUNE_MOE_PRECOMPUTED, else optional out
                                     (KTUNE_MOE_EXPERT_CHOICE: [e, c], each expert's tokens) */
  float* topk_weights;            /* fp32, like topk_ids: the routing weights */
  const void* w1;                 /* [e, 2i, h]: rows 0..i-1 gate, i..2i-1 up projection */
  const void* w2;                 /* [e, h, i] */
  void* y;                        /* [t, h] output */
  int32_t* expert_counts;         /* [e] optional output: pairs routed to each expert */
  float* aux_loss;                /* [1] optional output, routed modes: load-balancing loss */
  int64_t e, k, h, i, t;          /* experts, experts per token, hidden, intermediate, tokens */
  ktune_moe_routing routing;      /* default KTUNE_MOE_SOFTMAX_RENORM */
  int64_t n_group, topk_group;    /* KTUNE_MOE_SIGMOID_GROUP: groups, groups kept; else 1 */
  float routed_scaling;           /* KTUNE_MOE_SIGMOID_GROUP: weight multiplier; else 1 */
  ktune_dtype dtype;              /* default KTUNE_BF16 */
  void* workspace;                /* the caller's scratch (256-byte aligned), or NULL: the
                                     runtime's, allocated at a problem's first call on each
                                     stream */
  size_t workspace_bytes;         /* its size: at least ktune_moe_workspace_size() */
  const float* w1_scale;          /* KTUNE_E4M3: [e, 2i] real w1 row = stored row x scale */
  const float* w2_scale;          /* KTUNE_E4M3: [e, h]; both NULL for 16-bit dtypes */
} ktune_moe_args;

/* Zeroes *args and sets struct_size and the defaults (routing KTUNE_MOE_SOFTMAX_RENORM,
 * n_group = topk_group = 1, routed_scaling = 1, dtype KTUNE_BF16). Writes
 * sizeof(ktune_moe_args) of this header: for C and C++ callers compiled against it. */
ktune_status ktune_moe_args_init(ktune_moe_args* args);
/* ktune_moe_args_init for a struct of `size` bytes, the caller's sizeof: bindings that declare
 * the struct themselves (ctypes, cffi) and programs that may run against a newer library,
 * whose struct has grown, use this form so that nothing past `size` is written. Zeroes `size`
 * bytes, sets struct_size = size and each default whose field lies wholly inside them. size
 * must lie between the first version's size and this library's sizeof. */
ktune_status ktune_moe_args_init_sized(ktune_moe_args* args, size_t size);
/* Runs the layer on `stream`. Every argument is checked before any CUDA call; the message names
 * the bad one. Pass a workspace when capturing into a CUDA graph: then no call allocates. */
ktune_status ktune_moe(const ktune_moe_args* args, ktune_stream stream);
/* Workspace bytes ktune_moe(args) needs with the configuration the lookup picks for the problem
 * (dimensions, routing, dtype; pointers are not looked at). Plans the problem. */
ktune_status ktune_moe_workspace_size(const ktune_moe_args* args, size_t* bytes);

/* What the runtime dispatches for `op` on `shape` (e.g. "m=16384,n=4096") on the current device:
 * how it matched and the parameters ("threads=256,rows=1,..."), written NUL-terminated into
 * params (truncated to params_size). Plans the problem if needed. */
ktune_status ktune_query(const char* op, const char* shape, ktune_dtype dtype, ktune_match* match,
                         char* params, size_t params_size);

/* What the runtime consults, as lines of text: each database (loaded, missing or refused, with
 * the reason; under it the queries that failed and the rows lookups skip, with theirs) and the
 * compile cache (the directory, or why kernels are compiled in memory). Written NUL-terminated
 * into text, truncated to size bytes (at a UTF-8 character boundary); text may be NULL when size
 * is 0. *needed (may be NULL) receives the full length plus one. Opens the databases if no call
 * has yet; needs no GPU. */
ktune_status ktune_runtime_report(char* text, size_t size, size_t* needed);

/* Drops every plan and the runtime's workspaces, and reopens the databases on the next call
 * (after a sweep, say). */
ktune_status ktune_reset(void);

/* Chooses the user database (NULL: $KTUNE_DB or the default location) and whether the shipped
 * read-only databases are consulted; drops every plan. */
ktune_status ktune_configure(const char* db_path, int use_shipped_databases);

#ifdef __cplusplus
}
#endif

#endif /* KTUNE_KTUNE_H */
