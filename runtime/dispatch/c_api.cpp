// The C API: every call catches, records the message for ktune_last_error(), and returns a code.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/dispatch/planner.hpp"

namespace {

thread_local std::string last_error;

template <typename F>
ktune_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return KTUNE_OK;
  } catch (const ktune::InvalidArgument& e) {
    last_error = e.what();
    return KTUNE_ERROR_INVALID_ARGUMENT;
  } catch (const ktune::NoDevice& e) {
    last_error = e.what();
    return KTUNE_ERROR_NO_DEVICE;
  } catch (const ktune::CudaError& e) {
    last_error = e.what();
    return e.sticky() ? KTUNE_ERROR_CUDA_STICKY : KTUNE_ERROR_CUDA;
  } catch (const ktune::CompileError& e) {
    last_error = std::string(e.what()) + "\n" + e.log();
    return KTUNE_ERROR_COMPILE;
  } catch (const ktune::DatabaseError& e) {
    last_error = e.what();
    return KTUNE_ERROR_DATABASE;
  } catch (const std::exception& e) {
    last_error = e.what();
    return KTUNE_ERROR_INTERNAL;
  } catch (...) {
    last_error = "unknown error";
    return KTUNE_ERROR_INTERNAL;
  }
}

ktune::DType to_dtype(ktune_dtype t) {
  if (t != KTUNE_FP32 && t != KTUNE_FP16 && t != KTUNE_BF16 && t != KTUNE_E4M3)
    throw ktune::InvalidArgument("dtype " + std::to_string(static_cast<int>(t)) +
                                 " is not one of KTUNE_FP32 (0), KTUNE_FP16 (1), KTUNE_BF16 (2), "
                                 "KTUNE_E4M3 (4)");
  return static_cast<ktune::DType>(t);
}

/// A versioned args struct's struct_size: at least its first version's, at most this header's.
void check_struct_size(const char* function, std::size_t given, std::size_t first,
                       std::size_t full, const char* init) {
  if (given >= first && given <= full) return;
  throw ktune::InvalidArgument(std::string(function) + ": args->struct_size is " +
                               std::to_string(given) + ", not " + std::to_string(full) +
                               (given > full ? " (ktune.h is newer than this library)"
                                             : std::string(" (initialise the struct with ") +
                                                   init + "())"));
}

/// The first `size` bytes of a versioned args struct as `init` sets them, struct_size = size:
/// a caller whose struct is shorter than this library's (an older header, a ctypes binding)
/// gets exactly its own bytes written, and the defaults of the fields it has.
template <typename Args>
void init_sized(const char* function, Args* args, std::size_t size, std::size_t first,
                void (*init)(Args*)) {
  if (!args) throw ktune::InvalidArgument(std::string(function) + ": args is null");
  if (size < first || size > sizeof(Args))
    throw ktune::InvalidArgument(
        std::string(function) + ": size is " + std::to_string(size) + ", not in " +
        std::to_string(first) + ".." + std::to_string(sizeof(Args)) +
        " (the first version's size through this library's sizeof; pass the caller's sizeof)");
  Args full;
  init(&full);
  std::memcpy(static_cast<void*>(args), &full, size);
  args->struct_size = size;
}

// The first ktune_moe_args: a caller built against it passes this struct_size. Fields appended
// later keep their ktune_moe_args_init() defaults for such a caller.
constexpr std::size_t kMoeArgsFirstSize =
    offsetof(ktune_moe_args, workspace_bytes) + sizeof(size_t);

void init_moe_args(ktune_moe_args* args) {
  std::memset(static_cast<void*>(args), 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->routing = KTUNE_MOE_SOFTMAX_RENORM;
  args->n_group = 1;
  args->topk_group = 1;
  args->routed_scaling = 1.0f;
  args->dtype = KTUNE_BF16;
}

/// The caller's struct as MoeArgs; `function` names the entry point in messages.
ktune::MoeArgs moe_args(const char* function, const ktune_moe_args* in) {
  if (!in) throw ktune::InvalidArgument(std::string(function) + ": args is null");
  check_struct_size(function, in->struct_size, kMoeArgsFirstSize, sizeof(ktune_moe_args),
                    "ktune_moe_args_init");
  ktune_moe_args c;
  init_moe_args(&c);
  std::memcpy(static_cast<void*>(&c), in, in->struct_size);
  ktune::MoeArgs a;
  // Every field but routing and dtype has one name and type in both structs.
#define KTUNE_MOE_COPY(f) a.f = c.f;
  KTUNE_MOE_COPY(x) KTUNE_MOE_COPY(logits) KTUNE_MOE_COPY(correction_bias)
  KTUNE_MOE_COPY(topk_ids) KTUNE_MOE_COPY(topk_weights) KTUNE_MOE_COPY(w1) KTUNE_MOE_COPY(w2)
  KTUNE_MOE_COPY(y) KTUNE_MOE_COPY(expert_counts) KTUNE_MOE_COPY(aux_loss)
  KTUNE_MOE_COPY(e) KTUNE_MOE_COPY(k) KTUNE_MOE_COPY(h) KTUNE_MOE_COPY(i) KTUNE_MOE_COPY(t)
  KTUNE_MOE_COPY(n_group) KTUNE_MOE_COPY(topk_group) KTUNE_MOE_COPY(routed_scaling)
  KTUNE_MOE_COPY(workspace) KTUNE_MOE_COPY(workspace_bytes)
  KTUNE_MOE_COPY(w1_scale) KTUNE_MOE_COPY(w2_scale)
#undef KTUNE_MOE_COPY
  a.routing = static_cast<ktune::MoeRoutingMode>(c.routing);
  a.dtype = to_dtype(c.dtype);
  return a;
}

// The first ktune_attention_args: fields appended later keep their defaults for its callers.
constexpr std::size_t kAttentionArgsFirstSize =
    offsetof(ktune_attention_args, workspace_bytes) + sizeof(size_t);

void init_attention_args(ktune_attention_args* args) {
  std::memset(static_cast<void*>(args), 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->dtype = KTUNE_BF16;
  args->impl = KTUNE_ATTENTION_AUTO;
  args->q_scale = args->k_scale = args->v_scale = 1.0f;
}

/// The caller's struct as AttentionArgs (`layout` receives its strides); `function` names the
/// entry point in messages.
ktune::AttentionArgs attention_args(const char* function, const ktune_attention_args* in,
                                    ktune::AttentionLayout& layout) {
  if (!in) throw ktune::InvalidArgument(std::string(function) + ": args is null");
  check_struct_size(function, in->struct_size, kAttentionArgsFirstSize,
                    sizeof(ktune_attention_args), "ktune_attention_args_init");
  ktune_attention_args c;
  init_attention_args(&c);
  std::memcpy(static_cast<void*>(&c), in, in->struct_size);
  if (c.causal != 0 && c.causal != 1)
    throw ktune::InvalidArgument(std::string(function) + ": causal=" + std::to_string(c.causal) +
                                 " must be 0 or 1");
  ktune::AttentionArgs a;
#define KTUNE_ATTENTION_COPY(f) a.f = c.f;
  KTUNE_ATTENTION_COPY(q) KTUNE_ATTENTION_COPY(k) KTUNE_ATTENTION_COPY(v) KTUNE_ATTENTION_COPY(o)
  KTUNE_ATTENTION_COPY(lse) KTUNE_ATTENTION_COPY(b) KTUNE_ATTENTION_COPY(hq)
  KTUNE_ATTENTION_COPY(hkv) KTUNE_ATTENTION_COPY(nq) KTUNE_ATTENTION_COPY(nk)
  KTUNE_ATTENTION_COPY(d) KTUNE_ATTENTION_COPY(scale) KTUNE_ATTENTION_COPY(window)
  KTUNE_ATTENTION_COPY(softcap) KTUNE_ATTENTION_COPY(alibi_slopes)
  KTUNE_ATTENTION_COPY(page_size) KTUNE_ATTENTION_COPY(block_table)
  KTUNE_ATTENTION_COPY(seq_lens) KTUNE_ATTENTION_COPY(workspace)
  KTUNE_ATTENTION_COPY(workspace_bytes) KTUNE_ATTENTION_COPY(cu_seqlens_q)
  KTUNE_ATTENTION_COPY(cu_seqlens_k) KTUNE_ATTENTION_COPY(q_scale)
  KTUNE_ATTENTION_COPY(k_scale) KTUNE_ATTENTION_COPY(v_scale)
#undef KTUNE_ATTENTION_COPY
  a.causal = c.causal == 1;
  a.dtype = to_dtype(c.dtype);
  a.impl = static_cast<ktune::AttentionImpl>(c.impl);
  if (c.strides) {
    const int64_t* s = c.strides;
    layout.q = {s[0], s[1], s[2]};
    layout.k = {s[3], s[4], s[5]};
    layout.v = {s[6], s[7], s[8]};
    layout.o = {s[9], s[10], s[11]};
    a.layout = &layout;
  }
  return a;
}

}  // namespace

extern "C" {

const char* ktune_version(void) { return "0.1.0"; }

const char* ktune_last_error(void) { return last_error.c_str(); }

ktune_status ktune_add_rmsnorm(const void* x, const void* residual, const void* weight, void* y,
                               void* h, int64_t m, int64_t n, ktune_dtype dtype, float eps,
                               ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().add_rmsnorm(x, residual, weight, y, h, m, n, to_dtype(dtype), eps, stream);
  });
}

ktune_status ktune_layernorm(const void* x, const void* residual, const void* weight,
                             const void* bias, void* y, void* h, int64_t m, int64_t n,
                             ktune_dtype dtype, float eps, ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().layernorm(x, residual, weight, bias, y, h, m, n, to_dtype(dtype), eps,
                                       stream);
  });
}

ktune_status ktune_bias_act(const void* x, const void* bias, void* y, int64_t m, int64_t n,
                            ktune_activation act, ktune_dtype dtype, ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().bias_act(x, bias, y, m, n, static_cast<ktune::Activation>(act),
                                      to_dtype(dtype), stream);
  });
}

ktune_status ktune_swiglu(const void* x, void* y, int64_t m, int64_t n, ktune_dtype dtype,
                          ktune_stream stream) {
  return guarded([&] { ktune::Runtime::global().swiglu(x, y, m, n, to_dtype(dtype), stream); });
}

ktune_status ktune_softmax(const void* x, void* y, int64_t m, int64_t n, float scale,
                           ktune_dtype dtype, ktune_stream stream) {
  return guarded(
      [&] { ktune::Runtime::global().softmax(x, y, m, n, scale, to_dtype(dtype), stream); });
}

ktune_status ktune_flash_attention(const void* q, const void* k, const void* v, void* o,
                                   float* lse, int64_t b, int64_t hq, int64_t hkv, int64_t nq,
                                   int64_t nk, int64_t d, const int64_t* strides, int causal,
                                   float scale, ktune_dtype dtype, ktune_stream stream) {
  return guarded([&] {
    if (causal != 0 && causal != 1)  // as ktune_attention: not any nonzero value
      throw ktune::InvalidArgument("ktune_flash_attention: causal=" + std::to_string(causal) +
                                   " must be 0 or 1");
    ktune::AttentionLayout layout;
    if (strides) {
      layout.q = {strides[0], strides[1], strides[2]};
      layout.k = {strides[3], strides[4], strides[5]};
      layout.v = {strides[6], strides[7], strides[8]};
      layout.o = {strides[9], strides[10], strides[11]};
    }
    ktune::Runtime::global().flash_attention(q, k, v, o, lse, b, hq, hkv, nq, nk, d, causal != 0,
                                             scale, to_dtype(dtype), stream,
                                             strides ? &layout : nullptr);
  });
}

ktune_status ktune_moe_args_init(ktune_moe_args* args) {
  return guarded([&] {
    if (!args) throw ktune::InvalidArgument("ktune_moe_args_init: args is null");
    init_moe_args(args);
  });
}

ktune_status ktune_moe_args_init_sized(ktune_moe_args* args, size_t size) {
  return guarded([&] {
    init_sized("ktune_moe_args_init_sized", args, size, kMoeArgsFirstSize, init_moe_args);
  });
}

ktune_status ktune_moe(const ktune_moe_args* args, ktune_stream stream) {
  return guarded([&] { ktune::Runtime::global().moe(moe_args("ktune_moe", args), stream); });
}

ktune_status ktune_moe_workspace_size(const ktune_moe_args* args, size_t* bytes) {
  return guarded([&] {
    if (!bytes) throw ktune::InvalidArgument("ktune_moe_workspace_size: bytes is null");
    *bytes =
        ktune::Runtime::global().moe_workspace_size(moe_args("ktune_moe_workspace_size", args));
  });
}

ktune_status ktune_attention_args_init(ktune_attention_args* args) {
  return guarded([&] {
    if (!args) throw ktune::InvalidArgument("ktune_attention_args_init: args is null");
    init_attention_args(args);
  });
}

ktune_status ktune_attention_args_init_sized(ktune_attention_args* args, size_t size) {
  return guarded([&] {
    init_sized("ktune_attention_args_init_sized", args, size, kAttentionArgsFirstSize,
               init_attention_args);
  });
}

ktune_status ktune_attention(const ktune_attention_args* args, ktune_stream stream) {
  return guarded([&] {
    ktune::AttentionLayout layout;
    ktune::Runtime::global().attention(attention_args("ktune_attention", args, layout), stream);
  });
}

ktune_status ktune_attention_workspace_size(const ktune_attention_args* args, size_t* bytes) {
  return guarded([&] {
    if (!bytes) throw ktune::InvalidArgument("ktune_attention_workspace_size: bytes is null");
    ktune::AttentionLayout layout;
    *bytes = ktune::Runtime::global().attention_workspace_size(
        attention_args("ktune_attention_workspace_size", args, layout));
  });
}

ktune_status ktune_query(const char* op, const char* shape, ktune_dtype dtype, ktune_match* match,
                         char* params, size_t params_size) {
  return guarded([&] {
    if (!op || !shape) throw ktune::InvalidArgument("ktune_query: op and shape must not be null");
    ktune::MatchInfo info = ktune::Runtime::global().query(op, shape, to_dtype(dtype));
    if (match) *match = static_cast<ktune_match>(info.kind);
    if (params && params_size > 0) {
      std::size_t n = std::min(params_size - 1, info.params.size());
      std::memcpy(params, info.params.data(), n);
      params[n] = '\0';
    }
  });
}

ktune_status ktune_runtime_report(char* text, size_t size, size_t* needed) {
  return guarded([&] {
    if (text == nullptr && size > 0)
      throw ktune::InvalidArgument("ktune_runtime_report: text is null but size is " +
                                   std::to_string(size) + " (pass size 0 to ask for the length)");
    const std::string report = ktune::status_report(ktune::Runtime::global().status());
    if (needed) *needed = report.size() + 1;
    if (size == 0) return;
    std::size_t n = std::min(size - 1, report.size());
    // Cut before a UTF-8 continuation byte, so that the text stays valid UTF-8.
    if (n < report.size())
      while (n > 0 && (static_cast<unsigned char>(report[n]) & 0xc0) == 0x80) --n;
    std::memcpy(text, report.data(), n);
    text[n] = '\0';
  });
}

ktune_status ktune_reset(void) {
  return guarded([] { ktune::Runtime::global().reset(); });
}

ktune_status ktune_configure(const char* db_path, int use_shipped_databases) {
  return guarded([&] {
    ktune::RuntimeOptions o;
    if (db_path) o.db_path = db_path;
    o.use_shipped_databases = use_shipped_databases != 0;
    ktune::Runtime::global().configure(std::move(o));
  });
}

}  // extern "C"
