// ktune._ktune: the C API (ktune/ktune.h) for the Python package, and DLPack's view of a tensor.
// Every op function takes device addresses as integers and returns the C API's status; the
// Python layer (python/ktune) checks the tensors first and turns a failed status into an
// exception with ktune_last_error()'s message, read right after the call on the same thread.
// Calls release the GIL: the first call for a problem may compile for seconds.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ktune/ktune.h"

namespace nb = nanobind;

namespace {

using Ptr = std::uintptr_t;

const void* in(Ptr p) { return reinterpret_cast<const void*>(p); }
void* out(Ptr p) { return reinterpret_cast<void*>(p); }
ktune_stream stream_of(Ptr s) { return reinterpret_cast<ktune_stream>(s); }
ktune_dtype dtype_of(int d) { return static_cast<ktune_dtype>(d); }

/// (address, device type, device id, dtype code, bits, lanes, shape, strides) of any object that
/// exports DLPack (or the buffer protocol): strides in elements, as DLPack gives them.
nb::tuple tensor_info(nb::ndarray<> a) {
  nb::list shape, strides;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape.append(static_cast<std::int64_t>(a.shape(i)));
    strides.append(a.stride(i));
  }
  const nb::dlpack::dtype t = a.dtype();
  return nb::make_tuple(reinterpret_cast<Ptr>(a.data()), a.device_type(), a.device_id(),
                        static_cast<int>(t.code), static_cast<int>(t.bits),
                        static_cast<int>(t.lanes), nb::tuple(shape), nb::tuple(strides));
}

}  // namespace

NB_MODULE(_ktune, m) {
  m.doc() = "ktune's C API and DLPack tensor views (internal: use the ktune package)";
  const auto release = nb::call_guard<nb::gil_scoped_release>();

  m.def("version", [] { return std::string(ktune_version()); });
  m.def("last_error", [] { return std::string(ktune_last_error()); });
  m.def("tensor_info", &tensor_info, nb::arg("tensor"));

  m.def(
      "configure",
      [](std::optional<std::string> db, bool shipped) {
        return static_cast<int>(ktune_configure(db ? db->c_str() : nullptr, shipped ? 1 : 0));
      },
      nb::arg("db").none(), nb::arg("shipped"));
  m.def("reset", [] { return static_cast<int>(ktune_reset()); });
  m.def("runtime_report", [] {
    std::size_t needed = 0;
    ktune_status st = ktune_runtime_report(nullptr, 0, &needed);
    std::string text;
    if (st == KTUNE_OK && needed > 1) {
      std::vector<char> buf(needed);
      st = ktune_runtime_report(buf.data(), buf.size(), nullptr);
      text = buf.data();
    }
    return nb::make_tuple(static_cast<int>(st), text);
  });
  m.def(
      "query",
      [](const std::string& op, const std::string& shape, int dtype) {
        ktune_match match = KTUNE_MATCH_DEFAULT;
        std::vector<char> params(4096, '\0');
        ktune_status st;
        {
          nb::gil_scoped_release unlocked;
          st = ktune_query(op.c_str(), shape.c_str(), dtype_of(dtype), &match, params.data(),
                           params.size());
        }
        return nb::make_tuple(static_cast<int>(st), static_cast<int>(match),
                              std::string(params.data()));
      },
      nb::arg("op"), nb::arg("shape"), nb::arg("dtype"));

  m.def(
      "add_rmsnorm",
      [](Ptr x, Ptr residual, Ptr weight, Ptr y, Ptr h, std::int64_t rows, std::int64_t n,
         int dtype, float eps, Ptr stream) {
        return static_cast<int>(ktune_add_rmsnorm(in(x), in(residual), in(weight), out(y), out(h),
                                                  rows, n, dtype_of(dtype), eps,
                                                  stream_of(stream)));
      },
      release);
  m.def(
      "layernorm",
      [](Ptr x, Ptr residual, Ptr weight, Ptr bias, Ptr y, Ptr h, std::int64_t rows,
         std::int64_t n, int dtype, float eps, Ptr stream) {
        return static_cast<int>(ktune_layernorm(in(x), in(residual), in(weight), in(bias), out(y),
                                                out(h), rows, n, dtype_of(dtype), eps,
                                                stream_of(stream)));
      },
      release);
  m.def(
      "bias_act",
      [](Ptr x, Ptr bias, Ptr y, std::int64_t rows, std::int64_t n, int act, int dtype,
         Ptr stream) {
        return static_cast<int>(ktune_bias_act(in(x), in(bias), out(y), rows, n,
                                               static_cast<ktune_activation>(act), dtype_of(dtype),
                                               stream_of(stream)));
      },
      release);
  m.def(
      "swiglu",
      [](Ptr x, Ptr y, std::int64_t rows, std::int64_t n, int dtype, Ptr stream) {
        return static_cast<int>(
            ktune_swiglu(in(x), out(y), rows, n, dtype_of(dtype), stream_of(stream)));
      },
      release);
  // One ktune_attention call: the fields of ktune_attention_args (ktune/ktune.h), the 12 element
  // strides (batch, head, seq of q, k, v, o) or an empty list for contiguous [b, h, s, d]; the
  // e4m3 dequantisation scales last (1 for 16-bit dtypes).
  m.def(
      "attention",
      [](Ptr q, Ptr k, Ptr v, Ptr o, Ptr lse, std::int64_t b, std::int64_t hq, std::int64_t hkv,
         std::int64_t nq, std::int64_t nk, std::int64_t d, std::vector<std::int64_t> strides,
         int causal, float scale, std::int64_t window, float softcap, Ptr alibi_slopes,
         std::int64_t page_size, Ptr block_table, Ptr seq_lens, Ptr cu_seqlens_q,
         Ptr cu_seqlens_k, int dtype, int impl, Ptr stream, float q_scale, float k_scale,
         float v_scale) {
        ktune_attention_args a;
        if (ktune_status st = ktune_attention_args_init(&a); st != KTUNE_OK)
          return static_cast<int>(st);
        a.q = in(q), a.k = in(k), a.v = in(v), a.o = out(o);
        a.lse = static_cast<float*>(out(lse));
        a.b = b, a.hq = hq, a.hkv = hkv, a.nq = nq, a.nk = nk, a.d = d;
        a.strides = strides.size() == 12 ? strides.data() : nullptr;
        a.causal = causal, a.scale = scale, a.window = window, a.softcap = softcap;
        a.alibi_slopes = static_cast<const float*>(in(alibi_slopes));
        a.page_size = page_size;
        a.block_table = static_cast<const int32_t*>(in(block_table));
        a.seq_lens = static_cast<const int32_t*>(in(seq_lens));
        a.cu_seqlens_q = static_cast<const int32_t*>(in(cu_seqlens_q));
        a.cu_seqlens_k = static_cast<const int32_t*>(in(cu_seqlens_k));
        a.dtype = dtype_of(dtype);
        a.impl = static_cast<ktune_attention_impl>(impl);
        a.q_scale = q_scale, a.k_scale = k_scale, a.v_scale = v_scale;
        return static_cast<int>(ktune_attention(&a, stream_of(stream)));
      },
      release);
  // One ktune_moe call: the fields of ktune_moe_args (ktune/ktune.h); 0 for a null pointer. The
  // e4m3 weights' dequantisation scales last (0 for 16-bit dtypes).
  m.def(
      "moe",
      [](Ptr x, Ptr logits, Ptr correction_bias, Ptr topk_ids, Ptr topk_weights, Ptr w1, Ptr w2,
         Ptr y, Ptr expert_counts, Ptr aux_loss, std::int64_t e, std::int64_t k, std::int64_t h,
         std::int64_t i, std::int64_t t, int routing, std::int64_t n_group,
         std::int64_t topk_group, float routed_scaling, int dtype, Ptr stream, Ptr w1_scale,
         Ptr w2_scale) {
        ktune_moe_args a;
        if (ktune_status st = ktune_moe_args_init(&a); st != KTUNE_OK) return static_cast<int>(st);
        a.x = in(x);
        a.logits = static_cast<const float*>(in(logits));
        a.correction_bias = static_cast<const float*>(in(correction_bias));
        a.topk_ids = static_cast<int32_t*>(out(topk_ids));
        a.topk_weights = static_cast<float*>(out(topk_weights));
        a.w1 = in(w1), a.w2 = in(w2), a.y = out(y);
        a.expert_counts = static_cast<int32_t*>(out(expert_counts));
        a.aux_loss = static_cast<float*>(out(aux_loss));
        a.e = e, a.k = k, a.h = h, a.i = i, a.t = t;
        a.routing = static_cast<ktune_moe_routing>(routing);
        a.n_group = n_group, a.topk_group = topk_group, a.routed_scaling = routed_scaling;
        a.dtype = dtype_of(dtype);
        a.w1_scale = static_cast<const float*>(in(w1_scale));
        a.w2_scale = static_cast<const float*>(in(w2_scale));
        return static_cast<int>(ktune_moe(&a, stream_of(stream)));
      },
      release);
  m.def(
      "softmax",
      [](Ptr x, Ptr y, std::int64_t rows, std::int64_t n, float scale, int dtype, Ptr stream) {
        return static_cast<int>(
            ktune_softmax(in(x), out(y), rows, n, scale, dtype_of(dtype), stream_of(stream)));
      },
      release);
}
