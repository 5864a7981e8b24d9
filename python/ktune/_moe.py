"""A Mixture-of-Experts layer through ktune_moe: routing (or the caller's top-k), alignment, both
expert GEMMs with SiLU-gated activation, and the weighted combine, on the framework's stream;
16-bit weights, or FP8 (e4m3) weights with per-row dequantisation scales."""
import collections

from . import _ktune
from ._errors import check as _check_status
from ._tensors import C_DTYPES, check, empty_like, integer, need_contiguous, need_shape
from ._tensors import stream_of, view

ROUTINGS = {"softmax": 0, "softmax_renorm": 1, "sigmoid_group": 2, "precomputed": 3,
            "expert_choice": 4}

MoeOutput = collections.namedtuple(
    "MoeOutput", ["y", "topk_ids", "topk_weights", "expert_counts", "aux_loss"])
MoeOutput.__doc__ = """moe(..., return_routing=True): y [t, h]; the routing's topk_ids (int32)
and topk_weights (fp32), [t, k] ([e, c] with expert_choice, c = ceil(t k / e)); expert_counts
int32 [e], pairs routed to each expert; aux_loss fp32 [1], the load-balancing loss (routed
modes; None with precomputed routing)."""


def _aligned(t):
    if t.ptr % 16 != 0:
        raise ValueError(f"{t.name}: address {t.ptr:#x} is not 16-byte aligned (every MoE tensor "
                         f"must be)")


def _dtype(tx, t1, t2):
    """The call's dtype, w1's and w2's: bf16 or fp16 with x (and y) alike, or e4m3 with x (and y)
    in bf16."""
    if tx.dtype == "e4m3":
        raise TypeError("x: dtype e4m3 is not supported (allowed: bf16, fp16; FP8 MoE takes e4m3 "
                        "weights w1, w2 with a bf16 x, quantised inside the layer)")
    if t1.dtype != "e4m3" and t2.dtype != "e4m3":
        return check([tx, t1, t2])
    if t2.dtype != t1.dtype:
        raise TypeError(f"w2: dtype {t2.dtype} differs from w1's {t1.dtype} (w1 and w2 have one "
                        f"dtype: bf16, fp16 or e4m3)")
    if tx.dtype != "bf16":
        raise TypeError(f"x: dtype {tx.dtype} is not supported with e4m3 weights (allowed: bf16; "
                        f"y is bf16 too)")
    check([tx], dtypes=("bf16",))
    check([t1, t2], dtypes=("e4m3",))
    if t1.device_id != tx.device_id:
        raise ValueError(f"w1: on cuda:{t1.device_id}, x on cuda:{tx.device_id} (one device per "
                         f"call)")
    return "e4m3"


def _scales(dtype, e, two_i, hidden, w1_scale, w2_scale):
    """The Tensors of w1_scale and w2_scale, fp32 [e, 2i] and [e, h] under e4m3 weights; none
    with 16-bit weights."""
    given = (("w1_scale", w1_scale, (e, two_i), "w1", "[e, 2i]"),
             ("w2_scale", w2_scale, (e, hidden), "w2", "[e, h]"))
    if dtype != "e4m3":
        for name, value, *_ in given:
            if value is not None:
                raise ValueError(f"{name}: given with {dtype} weights; only e4m3 "
                                 f"(float8_e4m3fn) weights take dequantisation scales (pass "
                                 f"None)")
        return []
    scales = []
    for name, value, shape, w, dims in given:
        if value is None:
            raise ValueError(f"{name}: e4m3 weights need {name}, fp32 {dims} (one dequantisation "
                             f"scale per {w} row: real row = stored row * scale)")
        ts = view(name, value)
        check([ts], dtypes=("fp32",))
        need_shape(ts, shape, f"fp32 {dims}: one scale per {w} row")
        scales.append(ts)
    return scales


def moe(x, w1, w2, *, logits=None, k=None, routing=None, topk_ids=None, topk_weights=None,
        correction_bias=None, n_group=1, topk_group=1, routed_scaling=1.0, w1_scale=None,
        w2_scale=None, return_routing=False, out=None, stream=None):
    """y[t] = sum over token t's k experts of weight * (silu(x[t] W1g^T) * (x[t] W1u^T)) W2^T.

    x [t, h]; w1 [e, 2i, h] (rows 0..i-1 the gate, i..2i-1 the up projection); w2 [e, h, i];
    CUDA, contiguous, 16-byte aligned. Dtypes, either:
      x, w1, w2 (and y) of one dtype, bf16 or fp16; or
      FP8 weights: w1 and w2 in e4m3 (torch.float8_e4m3fn: OCP FP8) with their fp32
        dequantisation scales per output channel, w1_scale [e, 2i] and w2_scale [e, h] (real
        weight row = stored row * its scale; a per-tensor scale is that value repeated); x and
        y in bf16; x and the gated activation are quantised to e4m3 per row inside the layer;
        h and i multiples of 16; compute capability 8.9 or later.
    Routing, either:
      logits fp32 [t, e] with k and routing "softmax_renorm" (default, Mixtral), "softmax",
        "sigmoid_group" (DeepSeek-V3: correction_bias fp32 [e] for selection only, n_group
        groups of which topk_group are kept, weights renormalised times routed_scaling) or
        "expert_choice" (each expert takes its c = ceil(t k / e) best tokens);
      or topk_ids int32 [t, k] and topk_weights fp32 [t, k] (routing "precomputed", implied).
    Returns y [t, h], or with return_routing a MoeOutput (y, topk_ids, topk_weights,
    expert_counts, aux_loss)."""
    tx, t1, t2 = view("x", x), view("w1", w1), view("w2", w2)
    dtype = _dtype(tx, t1, t2)
    for t in (tx, t1, t2):
        if len(t.shape) != (2 if t is tx else 3):
            raise ValueError(f"{t.name}: shape {t.shape}; expected "
                             + ("[t, h]" if t is tx else "[e, 2i, h]" if t is t1 else "[e, h, i]"))
        need_contiguous(t)
        _aligned(t)
    tokens, hidden = tx.shape
    e, two_i = t1.shape[0], t1.shape[1]
    if t1.shape[2] != hidden or two_i % 2 != 0:
        raise ValueError(f"w1: shape {t1.shape}; expected [e, 2i, h={hidden}]")
    inter = two_i // 2
    need_shape(t2, (e, hidden, inter), "[e, h, i] with w1's e and i")
    scales = _scales(dtype, e, two_i, hidden, w1_scale, w2_scale)
    precomputed = topk_ids is not None or topk_weights is not None
    if routing is None:
        routing = "precomputed" if precomputed else "softmax_renorm"
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise ValueError(f"routing: {routing!r} is not one of {', '.join(ROUTINGS)}")
    others, ptr = list(scales), {t.name: t.ptr for t in scales}
    if routing == "precomputed":
        if topk_ids is None or topk_weights is None:
            raise ValueError("topk_ids: precomputed routing needs topk_ids (int32 [t, k]) and "
                             "topk_weights (fp32 [t, k])")
        if logits is not None:
            raise ValueError("logits: given with precomputed top-k (give one or the other)")
        ti, tw = view("topk_ids", topk_ids), view("topk_weights", topk_weights)
        if len(ti.shape) != 2 or ti.shape[0] != tokens:
            raise ValueError(f"topk_ids: shape {ti.shape}; expected [t={tokens}, k]")
        k = ti.shape[1] if k is None else k
        check([ti], dtypes=("int32",))
        check([tw], dtypes=("fp32",))
        need_shape(ti, (tokens, k), "[t, k]")
        need_shape(tw, (tokens, k), "like topk_ids")
        others += [ti, tw]
        ptr.update(topk_ids=ti.ptr, topk_weights=tw.ptr)
    else:
        if logits is None:
            raise ValueError(f"logits: routing {routing!r} needs fp32 router logits [t, e]")
        if k is None:
            raise ValueError("k: routed modes need k, the experts per token")
        tl = view("logits", logits)
        check([tl], dtypes=("fp32",))
        need_shape(tl, (tokens, e), "fp32 [t, e]")
        others.append(tl)
        ptr["logits"] = tl.ptr
        if correction_bias is not None:
            if routing != "sigmoid_group":
                raise ValueError("correction_bias: only sigmoid_group routing takes it")
            tb = view("correction_bias", correction_bias)
            check([tb], dtypes=("fp32",))
            need_shape(tb, (e,), "fp32 [e]")
            others.append(tb)
            ptr["correction_bias"] = tb.ptr
    k = integer(k, "k", 1, 2**31 - 1)
    n_group = integer(n_group, "n_group", 1, 2**31 - 1)
    topk_group = integer(topk_group, "topk_group", 1, 2**31 - 1)
    if e == 0:
        raise ValueError(f"w1: shape {t1.shape} holds no experts (e=0)")
    result = {}
    if return_routing:
        rows = (e, -(-tokens * k // e)) if routing == "expert_choice" else (tokens, k)
        if routing != "precomputed":
            result["topk_ids"] = empty_like(tx, rows, "topk_ids", "int32")
            result["topk_weights"] = empty_like(tx, rows, "topk_weights", "fp32")
            result["aux_loss"] = empty_like(tx, (1,), "aux_loss", "fp32")
        result["expert_counts"] = empty_like(tx, (e,), "expert_counts", "int32")
    y = out if out is not None else empty_like(tx, (tokens, hidden), "out")
    ty = view("out", y)
    if dtype == "e4m3" and ty.dtype != "bf16":
        raise TypeError(f"out: dtype {ty.dtype} is not supported with e4m3 weights (allowed: "
                        f"bf16, the output dtype of FP8 MoE)")
    need_shape(ty, (tokens, hidden), "like x")
    need_contiguous(ty)
    _aligned(ty)
    check([tx, ty])
    for t in others:
        need_contiguous(t)
        _aligned(t)
        if t.device_id != tx.device_id:
            raise ValueError(f"{t.name}: on cuda:{t.device_id}, x on cuda:{tx.device_id} "
                             f"(one device per call)")
    for name, value in result.items():  # the routing's outputs, allocated above
        ptr[name] = view(name, value).ptr
    s = stream_of(stream, tx)
    _check_status(_ktune.moe(
        tx.ptr, ptr.get("logits", 0), ptr.get("correction_bias", 0), ptr.get("topk_ids", 0),
        ptr.get("topk_weights", 0), t1.ptr, t2.ptr, ty.ptr, ptr.get("expert_counts", 0),
        ptr.get("aux_loss", 0), e, k, hidden, inter, tokens, ROUTINGS[routing],
        n_group, topk_group, float(routed_scaling), C_DTYPES[dtype], s,
        ptr.get("w1_scale", 0), ptr.get("w2_scale", 0)))
    if not return_routing:
        return y
    return MoeOutput(y, result.get("topk_ids", topk_ids), result.get("topk_weights", topk_weights),
                     result.get("expert_counts"), result.get("aux_loss"))

