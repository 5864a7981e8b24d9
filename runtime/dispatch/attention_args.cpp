// AttentionArgs checked on the host and packed in the order of the op that serves them. The op
// descriptions (templates/attention, templates/decode) decide the order of their dims, tensors
// and scalars and the problem's constraints; this file maps each name to an AttentionArgs field
// (a dim, tensor or scalar an op gains needs one entry in the tables below) and decides which op
// serves a call.
#include "runtime/dispatch/attention_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "templates/attention/attention_op.hpp"
#include "templates/op.hpp"

namespace ktune {
namespace {

constexpr const char* kPrefill = "flash_attention";
constexpr const char* kDecode = "flash_decode";

bool varlen(const AttentionArgs& a) { return a.cu_seqlens_q || a.cu_seqlens_k; }

/// An AttentionArgs field under the ops' name for it. A dim an op lacks (a variant) must be 0
/// in the call: missing_variant() routes or refuses the call otherwise.
struct Dim {
  const char* name;
  std::int64_t (*get)(const AttentionArgs&);
};

const Dim kDims[] = {
    {"b", [](const AttentionArgs& a) { return a.b; }},
    {"hq", [](const AttentionArgs& a) { return a.hq; }},
    {"hkv", [](const AttentionArgs& a) { return a.hkv; }},
    {"nq", [](const AttentionArgs& a) { return a.nq; }},
    {"nk", [](const AttentionArgs& a) { return a.nk; }},
    {"d", [](const AttentionArgs& a) { return a.d; }},
    {"causal", [](const AttentionArgs& a) -> std::int64_t { return a.causal ? 1 : 0; }},
    {"window", [](const AttentionArgs& a) { return a.window; }},
    {"softcap", [](const AttentionArgs& a) -> std::int64_t { return a.softcap != 0.0f ? 1 : 0; }},
    {"alibi", [](const AttentionArgs& a) -> std::int64_t { return a.alibi_slopes ? 1 : 0; }},
    {"page", [](const AttentionArgs& a) { return a.page_size; }},
    {"varlen", [](const AttentionArgs& a) -> std::int64_t { return varlen(a) ? 1 : 0; }},
};

struct Tensor {
  const char* name;
  std::uint64_t (*get)(const AttentionArgs&);
  std::size_t alignment;
};

template <typename T>
std::uint64_t addr(const T* p) {
  return reinterpret_cast<std::uint64_t>(p);
}

const Tensor kTensors[] = {
    {"q", [](const AttentionArgs& a) { return addr(a.q); }, 16},
    {"k", [](const AttentionArgs& a) { return addr(a.k); }, 16},
    {"v", [](const AttentionArgs& a) { return addr(a.v); }, 16},
    {"k_cache", [](const AttentionArgs& a) { return addr(a.k); }, 16},
    {"v_cache", [](const AttentionArgs& a) { return addr(a.v); }, 16},
    {"o", [](const AttentionArgs& a) { return addr(a.o); }, 16},
    {"lse", [](const AttentionArgs& a) { return addr(a.lse); }, 4},
    {"alibi_slopes", [](const AttentionArgs& a) { return addr(a.alibi_slopes); }, 4},
    {"block_table", [](const AttentionArgs& a) { return addr(a.block_table); }, 4},
    {"seq_lens", [](const AttentionArgs& a) { return addr(a.seq_lens); }, 4},
    {"cu_seqlens_q", [](const AttentionArgs& a) { return addr(a.cu_seqlens_q); }, 4},
    {"cu_seqlens_k", [](const AttentionArgs& a) { return addr(a.cu_seqlens_k); }, 4},
};

struct Scalar {
  const char* name;
  double (*get)(const AttentionArgs&);
};

const Scalar kScalars[] = {
    {"scale", [](const AttentionArgs& a) { return static_cast<double>(a.scale); }},
    {"softcap", [](const AttentionArgs& a) { return static_cast<double>(a.softcap); }},
    {"q_scale", [](const AttentionArgs& a) { return static_cast<double>(a.q_scale); }},
    {"k_scale", [](const AttentionArgs& a) { return static_cast<double>(a.k_scale); }},
    {"v_scale", [](const AttentionArgs& a) { return static_cast<double>(a.v_scale); }},
};

template <typename T, std::size_t N>
const T* by_name(const T (&table)[N], const std::string& name, std::string_view op,
                 const char* what) {
  for (const T& f : table)
    if (name == f.name) return &f;
  throw Error(std::string(op) + ": the op's " + what + " " + name +
              " has no AttentionArgs field (runtime/dispatch/attention_args.cpp)");
}

/// Tensors in the op's order for one (paging, ALiBi) combination, with what a call must pass.
struct TensorOrder {
  std::vector<const Tensor*> tensors;
  std::vector<bool> required;
};

/// One op's tables, resolved once; its tensor orders per combination at their first call.
struct OpTables {
  const Op* op = nullptr;
  int index = 0;
  std::vector<const Dim*> dims;
  std::vector<const Scalar*> scalars;
  std::vector<DType> dtypes;
  std::once_flag once[2][2][2];  // [paged][alibi][varlen]
  TensorOrder orders[2][2][2];

  explicit OpTables(const char* name) {
    op = &get_op(name);
    index = Runtime::Impl::op_index(name);
    for (const DimSpec& d : op->dims()) dims.push_back(by_name(kDims, d.name, name, "dimension"));
    for (const ScalarSpec& s : op->scalars())
      scalars.push_back(by_name(kScalars, s.name, name, "scalar"));
    dtypes = op->dtypes();
    if (dims.size() > kMaxDims || scalars.size() > kMaxScalars)
      throw Error(std::string(name) + ": more dimensions or scalars than the runtime passes");
  }

  bool has_dim(const char* name) const {
    for (const Dim* d : dims)
      if (std::string_view(d->name) == name) return true;
    return false;
  }

  /// The tensor order of `problem`: it depends on paging, ALiBi and varlen alone (the ops add
  /// block_table/seq_lens, the slopes and cu_seqlens by those dims), so the first problem of
  /// each combination stands for all.
  const TensorOrder& order(const Problem& problem, bool paged, bool alibi, bool packed, DType t) {
    std::call_once(once[paged][alibi][packed], [&] {
      TensorOrder o;
      for (const TensorSpec& s : op->tensors(problem, t)) {
        o.tensors.push_back(by_name(kTensors, s.name, op->name(), "tensor"));
        o.required.push_back(!s.optional);
      }
      if (o.tensors.size() > kMaxTensors)
        throw Error(std::string(op->name()) + ": more tensors than the runtime passes");
      orders[paged][alibi][packed] = std::move(o);
    });
    return orders[paged][alibi][packed];
  }
};

OpTables& tables(bool decode) {
  static OpTables prefill(kPrefill);
  static OpTables dec(kDecode);
  return decode ? dec : prefill;
}

bool takes(const OpTables& t, DType dtype) {
  return std::find(t.dtypes.begin(), t.dtypes.end(), dtype) != t.dtypes.end();
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The variant `a` asks for that `t`'s op lacks, or null.
const char* missing_variant(const OpTables& t, const AttentionArgs& a) {
  if (a.window != 0 && !t.has_dim("window")) return "window";
  if (a.softcap != 0.0f && !t.has_dim("softcap")) return "softcap";
  if (a.alibi_slopes && !t.has_dim("alibi")) return "alibi_slopes";
  if (a.page_size != 0 && !t.has_dim("page")) return "page_size";
  if (varlen(a) && !t.has_dim("varlen")) return "cu_seqlens";
  return nullptr;
}

}  // namespace

const char* attention_op_for(const AttentionArgs& a) {
  switch (a.impl) {
    case AttentionImpl::prefill:
    case AttentionImpl::decode: {
      const bool decode = a.impl == AttentionImpl::decode;
      if (const char* what = missing_variant(tables(decode), a))
        throw InvalidArgument(std::string("attention: impl=") + (decode ? "decode" : "prefill") +
                              " (" + (decode ? kDecode : kPrefill) + ") does not take " + what +
                              (std::string_view(what) == "page_size"
                                   ? " (paged K/V: impl=automatic)"
                                   : std::string_view(what) == "cu_seqlens"
                                         ? " (variable-length batches: impl=prefill or automatic)"
                                         : " (impl=automatic picks an op that does)"));
      return decode ? kDecode : kPrefill;
    }
    case AttentionImpl::automatic: {
      // Few query rows go to decode, contiguous or paged; a paged variable-length batch, which
      // decode refuses, to prefill.
      const bool want_decode = a.nq <= kDecodeMaxNq && !(a.page_size != 0 && varlen(a));
      if (want_decode && !missing_variant(tables(true), a)) {
        // A dtype decode lacks (e4m3) goes to prefill where prefill serves the call; else
        // decode, whose dtype check names the reason (paged e4m3).
        if (takes(tables(true), a.dtype) || missing_variant(tables(false), a) ||
            !takes(tables(false), a.dtype))
          return kDecode;
        return kPrefill;
      }
      // Both take every variant, paged K/V and variable-length batches today; this names
      // whatever an op added later lacks.
      if (const char* what = missing_variant(tables(false), a)) {
        const char* also = missing_variant(tables(true), a);
        throw InvalidArgument(std::string("attention: no op takes ") + what +
                              (also && std::string_view(also) != what
                                   ? std::string(" together with ") + also
                                   : std::string()) +
                              " (neither " + std::string(kPrefill) + " nor " + kDecode +
                              " takes it)");
      }
      return kPrefill;
    }
  }
  throw InvalidArgument("attention: impl " + std::to_string(static_cast<int>(a.impl)) +
                        " is not one of automatic (0), prefill (1), decode (2)");
}

AttentionCall pack_attention(const AttentionArgs& a, bool pointers) {
  AttentionCall c;
  c.op = attention_op_for(a);
  OpTables& t = tables(c.op == kDecode);
  c.op_index = t.index;
  if (!takes(t, a.dtype)) {
    std::string allowed;
    for (DType d : t.dtypes) allowed += (allowed.empty() ? "" : ", ") + std::string(dtype_name(d));
    throw InvalidArgument("attention: dtype " + std::string(dtype_name(a.dtype)) + " (" +
                          std::to_string(static_cast<int>(a.dtype)) + ") is not supported by " +
                          std::string(t.op->name()) + " (allowed: " + allowed + ")");
  }
  const float scales[3] = {a.q_scale, a.k_scale, a.v_scale};
  static const char* const scale_names[3] = {"q_scale", "k_scale", "v_scale"};
  for (int i = 0; i < 3; ++i) {
    if (a.dtype != DType::e4m3 && scales[i] != 1.0f)
      throw InvalidArgument("attention: " + std::string(scale_names[i]) + "=" +
                            number(scales[i]) + " dequantises e4m3 inputs; with dtype " +
                            dtype_name(a.dtype) + " it must be 1");
    if (!(scales[i] > 0.0f) || !std::isfinite(scales[i]))
      throw InvalidArgument("attention: " + std::string(scale_names[i]) + "=" +
                            number(scales[i]) + " must be a positive finite scale");
  }
  if (a.dtype == DType::e4m3 && a.page_size != 0)
    throw InvalidArgument("attention: dtype e4m3 with page_size=" + std::to_string(a.page_size) +
                          ": paged K/V take bf16 or fp16 (e4m3 runs on contiguous K/V)");
  if (a.window < 0)
    throw InvalidArgument("attention: window=" + std::to_string(a.window) +
                          " must be >= 0 (0: no sliding window)");
  if (!std::isfinite(a.softcap) || a.softcap < 0.0f)
    throw InvalidArgument("attention: softcap=" + number(a.softcap) +
                          " must be finite and >= 0 (0: no soft-capping)");
  if (!std::isfinite(a.scale))
    throw InvalidArgument("attention: scale=" + number(a.scale) +
                          " must be finite (<= 0: 1/sqrt(d))");

  c.ndims = static_cast<int>(t.dims.size());
  for (std::size_t d = 0; d < t.dims.size(); ++d) c.dims[d] = t.dims[d]->get(a);
  // Reused by every call of the thread: checking allocates nothing once it has grown.
  thread_local Problem problem;
  problem.values.assign(c.dims.begin(), c.dims.begin() + c.ndims);
  t.op->check_problem(problem);

  c.nscalars = static_cast<int>(t.scalars.size());
  for (std::size_t s = 0; s < t.scalars.size(); ++s) c.scalars[s] = t.scalars[s]->get(a);

  if (a.layout) {
    const AttentionLayout& l = *a.layout;
    c.strides = {l.q.batch, l.q.head, l.q.seq, l.k.batch, l.k.head, l.k.seq,
                 l.v.batch, l.v.head, l.v.seq, l.o.batch, l.o.head, l.o.seq};
    c.has_strides = true;
    if (std::optional<std::string> why =
            output_stride_reason("attention", c.strides.data(), a.b, a.hq, varlen(a)))
      throw InvalidArgument(*why);
  }
  if (!pointers) return c;

  const bool paged = a.page_size != 0;
  if (!paged && (a.block_table || a.seq_lens))
    throw InvalidArgument(std::string("attention: ") + (a.block_table ? "block_table" : "seq_lens") +
                          " is set but page_size=0 (contiguous K/V): set page_size for a paged "
                          "cache, or leave block_table and seq_lens null");
  if (paged && a.cu_seqlens_k)
    throw InvalidArgument("attention: cu_seqlens_k is set with page_size=" +
                          std::to_string(a.page_size) +
                          ": a paged cache's key counts are seq_lens (a paged variable-length "
                          "batch passes cu_seqlens_q alone)");
  if (!paged && varlen(a) && !(a.cu_seqlens_q && a.cu_seqlens_k))
    throw InvalidArgument(std::string("attention: ") +
                          (a.cu_seqlens_q ? "cu_seqlens_q is set but cu_seqlens_k is null"
                                          : "cu_seqlens_k is set but cu_seqlens_q is null") +
                          " (a variable-length batch needs both)");
  const TensorOrder& order =
      t.order(problem, paged, a.alibi_slopes != nullptr, varlen(a), a.dtype);
  c.ntensors = static_cast<int>(order.tensors.size());
  for (std::size_t i = 0; i < order.tensors.size(); ++i) {
    const Tensor& tensor = *order.tensors[i];
    const std::uint64_t ptr = tensor.get(a);
    if (ptr == 0) {
      if (order.required[i])
        throw InvalidArgument("attention: " + std::string(tensor.name) + " is null (" + c.op +
                              " needs it" + (paged ? " for a paged cache)" : ")"));
      continue;
    }
    if (ptr % tensor.alignment != 0)
      throw InvalidArgument("attention: " + std::string(tensor.name) + " at " +
                            address_text(ptr) + " is not " + std::to_string(tensor.alignment) +
                            "-byte aligned");
    c.tensors[i] = ptr;
  }
  c.workspace = {reinterpret_cast<std::uint64_t>(a.workspace), a.workspace_bytes};
  if (auto why = workspace_reason(c.op, c.workspace, 0, {})) throw InvalidArgument(*why);
  return c;
}

}  // namespace ktune
