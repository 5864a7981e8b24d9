"""Attention forward through ktune_attention: prefill and decode, batched with any strides,
paged K/V (a block table per sequence; queries batched or packed) or packed variable-length
batches, causal, sliding window, soft-capping and ALiBi, FP8 (e4m3) inputs with dequantisation
scales; checked before any launch like every op of the package."""
from . import _ktune
from ._errors import check as _check_status
from ._tensors import C_DTYPES, check, empty_like, flag, integer, need_contiguous, need_shape
from ._tensors import stream_of, view
from ._tensors import Torch as _Torch

_IMPLS = {"auto": 0, "prefill": 1, "decode": 2}


def _last_dim_unit(t):
    if t.shape and t.shape[-1] > 1 and t.strides[-1] != 1:
        raise ValueError(f"{t.name}: last-dim stride {t.strides[-1]} (shape {t.shape}); the "
                         f"head dim must be contiguous (stride 1)")


def _ints(t, shape, what):
    """An int32 CUDA tensor of `shape`, contiguous, on the call's device."""
    check([t], dtypes=("int32",))
    need_shape(t, shape, what)
    need_contiguous(t)


def _ndim(t, n, layout):
    if len(t.shape) != n:
        raise ValueError(f"{t.name}: shape {t.shape} has {len(t.shape)} dims; {layout} takes "
                         f"{n}")


def _torch_batched(q, k, v, causal, scale, window, softcap, return_lse, impl, q_scale, k_scale,
                   v_scale):
    """The common call (torch tensors of a 16-bit dtype, batched, no slopes, outputs allocated
    here) checked with a few attribute reads; None when anything differs (e4m3 included), for
    the general path to say what."""
    # Anything but a bool and an int window in range: the general path says what is wrong.
    if type(causal) is not bool or type(window) is not int or not 0 <= window < 2**31:
        return None
    T = _Torch.torch
    if (not isinstance(k, T.Tensor) or not isinstance(v, T.Tensor) or q.dim() != 4
            or k.dim() != 4 or k.shape != v.shape or impl not in _IMPLS):
        return None
    code = _Torch.codes.get(q.dtype)
    if (code is None or k.dtype is not q.dtype or v.dtype is not q.dtype or not q.is_cuda
            or not k.is_cuda or not v.is_cuda):
        return None
    dev = q.get_device()
    if k.get_device() != dev or v.get_device() != dev:
        return None
    qs, ks, vs = q.stride(), k.stride(), v.stride()
    if qs[3] != 1 or ks[3] != 1 or vs[3] != 1:
        return None
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    if k.shape[0] != b or k.shape[3] != d or hkv == 0 or hq % hkv != 0:
        return None
    o = q.new_empty((b, hq, nq, d))
    lse = q.new_empty((b, hq, nq), dtype=T.float32) if return_lse else None
    strides = [qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], vs[0], vs[1], vs[2],
               hq * nq * d, nq * d, d]
    _check_status(_ktune.attention(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
        lse.data_ptr() if lse is not None else 0, b, hq, hkv, nq, nk, d, strides, int(causal),
        0.0 if scale is None else float(scale), int(window), float(softcap), 0, 0, 0, 0, 0, 0,
        code, _IMPLS[impl], _Torch.stream(dev), q_scale, k_scale, v_scale))
    return (o, lse) if return_lse else o


def flash_attention(q, k, v, *, causal=False, scale=None, window=0, softcap=0.0,
                    alibi_slopes=None, block_table=None, seq_lens=None, cu_seqlens_q=None,
                    cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False,
                    out=None, lse_out=None, impl="auto", q_scale=1.0, k_scale=1.0,
                    v_scale=1.0, stream=None):
    """o = softmax(mask(scale * q k^T)) v per query head; query head h reads KV head
    h // (hq // hkv) (GQA, MQA). q, k, v of one dtype: bf16 or fp16 (any head dim that is a
    multiple of 8 up to 256: 32, 64, 96, 128 and 256 have tiles of their own, others run in the
    next one's), or e4m3 (torch.float8_e4m3fn: OCP FP8; the
    batched layout on the prefill kernel, sm_90a, d 128 or 256); CUDA tensors whose head dim is
    contiguous. out is like q, bf16 for e4m3 inputs.

    Layouts:
      batched (default): q [b, hq, nq, d], k and v [b, hkv, nk, d], any batch/head/seq strides
        (a transposed view of [b, s, h, d] works without a copy); out like q.
      paged (block_table given): k and v are page pools [pages, page_size, hkv, d] (contiguous),
        block_table int32 [b, pages_per_seq] (page ids), seq_lens int32 [b] (keys per
        sequence, 1..pages_per_seq * page_size); q [b, hq, nq, d], or packed [total_q, hq, d]
        with cu_seqlens_q and max_seqlen_q as varlen's (a paged varlen batch, vLLM's prefill:
        no cu_seqlens_k, seq_lens gives the keys; max_seqlen_k optional, checked); out like q.
      varlen (cu_seqlens_q given): q [total_q, hq, d], k and v [total_k, hkv, d], cu_seqlens_q
        and cu_seqlens_k int32 [b + 1] row offsets, max_seqlen_q and max_seqlen_k the longest
        lengths (ints: no device read); out like q.
    causal: bottom-right aligned (row r sees keys <= r + len_k - len_q). scale: None for
    1/sqrt(d). window > 0: each row sees the last `window` keys up to its own. softcap > 0:
    scores become softcap * tanh(scores / softcap). alibi_slopes: fp32 [hq].
    impl: "auto" (nq <= 16: split-KV decode, else prefill (a paged varlen batch always
    prefill); e4m3: prefill), "prefill", "decode". q_scale, k_scale, v_scale: e4m3's
    dequantisation scales (real value = stored value * scale; positive, finite); 1 for bf16 and
    fp16.
    Returns o, or (o, lse) with return_lse: lse fp32 [b, hq, nq] (q packed by cu_seqlens_q:
    [hq, total_q]), the rows' log-sum-exp."""
    if (stream is None and out is None and lse_out is None and alibi_slopes is None
            and block_table is None and seq_lens is None and cu_seqlens_q is None
            and cu_seqlens_k is None and _Torch.get(q) is not None):
        fast = _torch_batched(q, k, v, causal, scale, window, softcap, return_lse, impl,
                              q_scale, k_scale, v_scale)
        if fast is not None:
            return fast
    if not isinstance(impl, str) or impl not in _IMPLS:
        raise ValueError(f"impl: {impl!r} is not one of {', '.join(_IMPLS)}")
    causal, window = flag(causal, "causal"), integer(window, "window", 0, 2**31 - 1)
    tq, tk, tv = view("q", q), view("k", k), view("v", v)
    dtype = check([tq, tk, tv], dtypes=("bf16", "fp16", "e4m3"))
    for t in (tq, tk, tv):
        _last_dim_unit(t)
    paged = block_table is not None
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None  # q and o packed
    if paged:
        if seq_lens is None:
            raise ValueError("seq_lens: paged K/V (block_table given) needs seq_lens, int32 [b]")
        if cu_seqlens_k is not None:
            raise ValueError("cu_seqlens_k: paged K/V (block_table given) take no cu_seqlens_k; "
                             "seq_lens gives each sequence's keys (a paged varlen batch passes "
                             "cu_seqlens_q and max_seqlen_q alone)")
    elif seq_lens is not None:
        raise ValueError("seq_lens: given without block_table (only paged K/V takes it)")
    extra = {}
    others = [tk, tv]  # on q's device, checked at the end
    if varlen:
        if paged:  # cu_seqlens_q given (cu_seqlens_k refused above)
            if max_seqlen_q is None:
                raise ValueError("max_seqlen_q: a paged varlen batch (block_table with "
                                 "cu_seqlens_q) needs max_seqlen_q, the longest query length")
        else:
            for name, value in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                                ("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
                if value is None:
                    raise ValueError(f"{name}: varlen batches need cu_seqlens_q, cu_seqlens_k, "
                                     f"max_seqlen_q and max_seqlen_k")
        _ndim(tq, 3, ("paged " if paged else "") + "varlen q [total_q, hq, d]")
        hq, d = tq.shape[1], tq.shape[2]
        tcq = view("cu_seqlens_q", cu_seqlens_q)
        if len(tcq.shape) != 1 or tcq.shape[0] < 2:
            raise ValueError(f"cu_seqlens_q: shape {tcq.shape}; expected [b + 1] with b >= 1")
        b = tcq.shape[0] - 1
        _ints(tcq, (b + 1,), "[b + 1]")
        others.append(tcq)
        # The longest query: at most the packed rows (a larger value would size the grid
        # for rows that are not there).
        nq = integer(max_seqlen_q, "max_seqlen_q", 1, max(1, tq.shape[0]))
        extra.update(cu_seqlens_q=tcq.ptr)
        o_shape, lse_shape = tq.shape, (hq, tq.shape[0])
        strides = [0, tq.strides[1], tq.strides[0]]
    else:
        _ndim(tq, 4, "q [b, hq, nq, d]")
        b, hq, nq, d = tq.shape
        o_shape, lse_shape = tq.shape, (b, hq, nq)
        strides = list(tq.strides[:3])
    if paged:
        _ndim(tk, 4, "a page pool [pages, page_size, hkv, d]")
        need_shape(tv, tk.shape, "like k")
        need_contiguous(tk)
        need_contiguous(tv)
        page, hkv = tk.shape[1], tk.shape[2]
        tbt, tsl = view("block_table", block_table), view("seq_lens", seq_lens)
        if len(tbt.shape) != 2 or tbt.shape[0] != b:
            raise ValueError(f"block_table: shape {tbt.shape}; expected [b={b}, pages_per_seq]"
                             + (" (b + 1 = len(cu_seqlens_q))" if varlen else ""))
        _ints(tbt, tbt.shape, "[b, pages_per_seq]")
        _ints(tsl, (b,), "[b]")
        others += [tbt, tsl]
        nk = tbt.shape[1] * page
        # vLLM passes the longest key count too: checked against the table, not needed.
        if max_seqlen_k is not None and not 0 < integer(max_seqlen_k, "max_seqlen_k") <= nk:
            raise ValueError(f"max_seqlen_k: {int(max_seqlen_k)} keys; a block table of "
                             f"{tbt.shape[1]} pages of {page} holds 1..{nk}")
        extra.update(page_size=page, block_table=tbt.ptr, seq_lens=tsl.ptr)
        strides += [0] * 6  # k, v: pools (the runtime ignores their strides)
        if tk.shape[3] != d:
            raise ValueError(f"k: head dim {tk.shape[3]} differs from q's {d}")
    elif varlen:
        _ndim(tk, 3, "varlen k [total_k, hkv, d]")
        need_shape(tv, tk.shape, "like k")
        hkv = tk.shape[1]
        if tk.shape[2] != d:
            raise ValueError(f"k: head dim {tk.shape[2]} differs from q's {d}")
        tck = view("cu_seqlens_k", cu_seqlens_k)
        _ints(tck, (b + 1,), "like cu_seqlens_q")
        others.append(tck)
        nk = integer(max_seqlen_k, "max_seqlen_k", 1, max(1, tk.shape[0]))
        extra.update(cu_seqlens_k=tck.ptr)
        strides += [0, tk.strides[1], tk.strides[0], 0, tv.strides[1], tv.strides[0]]
    else:
        _ndim(tk, 4, "k [b, hkv, nk, d]")
        need_shape(tv, tk.shape, "like k")
        hkv, nk = tk.shape[1], tk.shape[2]
        if tk.shape[0] != b or tk.shape[3] != d:
            raise ValueError(f"k: shape {tk.shape}; expected [b={b}, hkv, nk, d={d}] for "
                             f"q {tq.shape}")
        strides += list(tk.strides[:3]) + list(tv.strides[:3])
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"q: {hq} query heads are not a multiple of k's {hkv} KV heads")
    fp8 = dtype == "e4m3"  # o in bf16
    o = out if out is not None else empty_like(tq, o_shape, "out", "bf16" if fp8 else None)
    to = view("out", o)
    if fp8 and to.dtype != "bf16":
        raise TypeError(f"out: dtype {to.dtype} is not supported with e4m3 q, k, v (allowed: "
                        f"bf16, the output dtype of FP8 attention)")
    need_shape(to, o_shape, "like q")
    _last_dim_unit(to)
    strides += [to.strides[0], to.strides[1], to.strides[2]] if not varlen else \
        [0, to.strides[1], to.strides[0]]
    lse_ptr, lse = 0, None
    if return_lse or lse_out is not None:
        lse = lse_out if lse_out is not None else empty_like(tq, lse_shape, "lse_out", "fp32")
        tl = view("lse_out", lse)
        check([tl], dtypes=("fp32",))
        need_shape(tl, lse_shape, "fp32 log-sum-exp per query row")
        need_contiguous(tl)
        lse_ptr = tl.ptr
        others.append(tl)
    if fp8:
        check([to], dtypes=("bf16",))
        others.append(to)
    else:
        check([tq, to])
    slopes = 0
    if alibi_slopes is not None:
        ts = view("alibi_slopes", alibi_slopes)
        check([ts], dtypes=("fp32",))
        need_shape(ts, (hq,), "one fp32 slope per query head")
        need_contiguous(ts)
        slopes = ts.ptr
        others.append(ts)
    for t in others:
        if t.device_id != tq.device_id:
            raise ValueError(f"{t.name}: on cuda:{t.device_id}, q on cuda:{tq.device_id} "
                             f"(one device per call)")
    s = stream_of(stream, tq)
    _check_status(_ktune.attention(
        tq.ptr, tk.ptr, tv.ptr, to.ptr, lse_ptr, b, hq, hkv, nq, nk, d, strides, int(causal),
        0.0 if scale is None else float(scale), int(window), float(softcap), slopes,
        extra.get("page_size", 0), extra.get("block_table", 0), extra.get("seq_lens", 0),
        extra.get("cu_seqlens_q", 0), extra.get("cu_seqlens_k", 0), C_DTYPES[dtype],
        _IMPLS[impl], s, float(q_scale), float(k_scale), float(v_scale)))
    return (o, lse) if return_lse else o
