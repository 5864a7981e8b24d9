"""ktune's ops as torch operators (torch.library: a schema, the CUDA kernel and a fake
implementation each), so that torch.compile(fullgraph=True) traces models that call them without
graph breaks and CUDA graphs capture and replay them. Importing this module imports torch;
`import ktune` alone does not.

Each op is torch.ops.ktune.<name>, also reachable here (ktune.torch.add_rmsnorm(...)). Outputs
are new tensors (never views of inputs) from torch's caching allocator, written on torch's
current stream; shapes and dtypes are those of the eager functions (help(ktune.add_rmsnorm)):

  add_rmsnorm(x, residual, weight, eps=1e-6) -> (y, h)      h = x + residual, y = RMSNorm(h)
  layernorm(x, weight, bias, eps=1e-5) -> y
  layernorm_residual(x, residual, weight, bias, eps=1e-5) -> (y, h)
  bias_act(x, bias, activation="gelu_tanh") -> y           gelu_tanh, gelu_erf, silu, relu
  swiglu(x) -> y                                           x [..., 2n] -> y [..., n]
  softmax(x, scale=1.0) -> y
  flash_attention(q, k, v, causal=False, scale=None, window=0, softcap=0.0,
                  alibi_slopes=None, q_scale=1.0, k_scale=1.0, v_scale=1.0) -> o
                                                           batched [b, h, s, d], any strides
  flash_attention_paged(q, k_pages, v_pages, block_table, seq_lens, causal=False, scale=None,
                        window=0, softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
                        max_seqlen_q=None) -> o            q [b, hq, nq, d] or packed
                                                           [total_q, hq, d] (cu_seqlens_q);
                                                           pools [pages, page_size, hkv, d]
  flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         causal=False, scale=None, window=0, softcap=0.0,
                         alibi_slopes=None) -> o           q [total_q, hq, d], k [total_k, hkv, d]
  moe(x, w1, w2, logits, k, routing="softmax_renorm", n_group=1, topk_group=1,
      routed_scaling=1.0, correction_bias=None, w1_scale=None, w2_scale=None) -> y
                                                           routed by fp32 logits [t, e]
  moe_topk(x, w1, w2, topk_ids, topk_weights, w1_scale=None, w2_scale=None) -> y
                                                           the caller's top-k [t, k]

x, residual: [..., n]; weight, bias: [n]; bf16 or fp16 CUDA tensors, contiguous (attention:
the head dim contiguous; block_table, seq_lens and cu_seqlens int32). flash_attention also
takes q, k, v in torch.float8_e4m3fn with their dequantisation scales q_scale, k_scale, v_scale
(sm_90a, d 128 or 256); o is bf16 then. moe and moe_topk also take w1 and w2 in
torch.float8_e4m3fn with their fp32 per-row dequantisation scales w1_scale [e, 2i] and
w2_scale [e, h] (x bf16; compute capability 8.9 or later); y is bf16 then. The attention layouts
are those of ktune.flash_attention (help(ktune.flash_attention)); its return_lse is eager-only.
The ops are registered as plain torch.library kernels rather than torch.library.custom_op
functions: on the H100 custom_op added ~55 us per call to the eager function's, the plain
registration ~5 us (benchmarks/results/python-overhead-h100-2026-11-24.md)."""
import torch

from . import _attention, _fused, _moe

__all__ = ["add_rmsnorm", "bias_act", "flash_attention", "flash_attention_paged",
           "flash_attention_varlen", "layernorm", "layernorm_residual", "moe",
           "moe_topk", "softmax", "swiglu"]

_lib = torch.library.Library("ktune", "DEF")
_E4M3 = getattr(torch, "float8_e4m3fn", None)  # torch >= 2.1


def _op(schema, kernel, fake):
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    # CPU too: host tensors then get ktune's own TypeError naming the argument.
    for key in ("CUDA", "CPU"):
        _lib.impl(name, kernel, key)
    torch.library.register_fake("ktune::" + name, fake, lib=_lib)
    return getattr(torch.ops.ktune, name)


def _like2(x, *_):
    return torch.empty_like(x), torch.empty_like(x)


add_rmsnorm = _op(
    "add_rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)",
    lambda x, residual, weight, eps=1e-6: _fused.add_rmsnorm(x, residual, weight, eps), _like2)
layernorm = _op(
    "layernorm(Tensor x, Tensor weight, Tensor bias, float eps=1e-05) -> Tensor",
    lambda x, weight, bias, eps=1e-5: _fused.layernorm(x, weight, bias, eps),
    lambda x, *_: torch.empty_like(x))
layernorm_residual = _op(
    "layernorm_residual(Tensor x, Tensor residual, Tensor weight, Tensor bias, float eps=1e-05)"
    " -> (Tensor, Tensor)",
    lambda x, residual, weight, bias, eps=1e-5: _fused.layernorm(x, weight, bias, eps,
                                                                 residual=residual), _like2)
bias_act = _op(
    "bias_act(Tensor x, Tensor bias, str activation='gelu_tanh') -> Tensor",
    lambda x, bias, activation="gelu_tanh": _fused.bias_act(x, bias, activation),
    lambda x, *_: torch.empty_like(x))
swiglu = _op(
    "swiglu(Tensor x) -> Tensor", lambda x: _fused.swiglu(x),
    lambda x: x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,)))
softmax = _op(
    "softmax(Tensor x, float scale=1.0) -> Tensor",
    lambda x, scale=1.0: _fused.softmax(x, scale), lambda x, *_: torch.empty_like(x))
flash_attention = _op(
    "flash_attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
    "int window=0, float softcap=0.0, Tensor? alibi_slopes=None, float q_scale=1.0, "
    "float k_scale=1.0, float v_scale=1.0) -> Tensor",
    lambda q, k, v, causal=False, scale=None, window=0, softcap=0.0, alibi_slopes=None,
    q_scale=1.0, k_scale=1.0, v_scale=1.0: _attention.flash_attention(
        q, k, v, causal=causal, scale=scale, window=window, softcap=softcap,
        alibi_slopes=alibi_slopes, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale),
    lambda q, *_, **__: q.new_empty(q.shape, dtype=torch.bfloat16 if q.dtype == _E4M3
                                    else q.dtype))  # e4m3 inputs write bf16
_MASKS = ("bool causal=False, float? scale=None, int window=0, float softcap=0.0, "
          "Tensor? alibi_slopes=None")
flash_attention_paged = _op(
    "flash_attention_paged(Tensor q, Tensor k_pages, Tensor v_pages, Tensor block_table, "
    "Tensor seq_lens, " + _MASKS + ", Tensor? cu_seqlens_q=None, int? max_seqlen_q=None) "
    "-> Tensor",
    lambda q, k_pages, v_pages, block_table, seq_lens, causal=False, scale=None, window=0,
    softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
    max_seqlen_q=None: _attention.flash_attention(
        q, k_pages, v_pages, block_table=block_table, seq_lens=seq_lens, causal=causal,
        scale=scale, window=window, softcap=softcap, alibi_slopes=alibi_slopes,
        cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q),
    lambda q, *_, **__: q.new_empty(q.shape))  # q batched or packed: o like q
flash_attention_varlen = _op(
    "flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
    "Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, " + _MASKS + ") -> Tensor",
    lambda q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
    scale=None, window=0, softcap=0.0, alibi_slopes=None: _attention.flash_attention(
        q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, causal=causal, scale=scale,
        window=window, softcap=softcap, alibi_slopes=alibi_slopes),
    lambda q, *_, **__: q.new_empty(q.shape))


def _moe_fake(x, w1, *_, **__):
    """y [t, h]: x's dtype, bf16 under e4m3 weights."""
    return x.new_empty(x.shape, dtype=torch.bfloat16 if w1.dtype == _E4M3 else x.dtype)


_SCALES = "Tensor? w1_scale=None, Tensor? w2_scale=None"
moe = _op(
    "moe(Tensor x, Tensor w1, Tensor w2, Tensor logits, int k, str routing='softmax_renorm', "
    "int n_group=1, int topk_group=1, float routed_scaling=1.0, "
    "Tensor? correction_bias=None, " + _SCALES + ") -> Tensor",
    lambda x, w1, w2, logits, k, routing="softmax_renorm", n_group=1, topk_group=1,
    routed_scaling=1.0, correction_bias=None, w1_scale=None, w2_scale=None: _moe.moe(
        x, w1, w2, logits=logits, k=k, routing=routing, n_group=n_group, topk_group=topk_group,
        routed_scaling=routed_scaling, correction_bias=correction_bias, w1_scale=w1_scale,
        w2_scale=w2_scale),
    _moe_fake)
moe_topk = _op(
    "moe_topk(Tensor x, Tensor w1, Tensor w2, Tensor topk_ids, Tensor topk_weights, "
    + _SCALES + ") -> Tensor",
    lambda x, w1, w2, topk_ids, topk_weights, w1_scale=None, w2_scale=None: _moe.moe(
        x, w1, w2, topk_ids=topk_ids, topk_weights=topk_weights, w1_scale=w1_scale,
        w2_scale=w2_scale),
    _moe_fake)
