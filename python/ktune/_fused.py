"""The fused ops: residual + RMSNorm, LayerNorm, bias + activation, SwiGLU, softmax. Each reads
its tensors as matrices over their last dimension (leading dims flattened; contiguous
row-major), checks them before any launch, allocates the outputs it is not given (torch and CuPy
inputs) and launches on the framework's current stream."""
from . import _ktune
from ._errors import check as _check_status
from ._tensors import (C_DTYPES, check, empty_like, need_contiguous, need_shape, rows,
                       stream_of, view)
from ._tensors import Torch as _Torch

_ACTIVATIONS = {"gelu_tanh": 0, "gelu_erf": 1, "silu": 2, "relu": 3}


def _out(given, name, like, shape):
    """The output tensor `name`: `given`, or a new one shaped `shape` like `like`."""
    obj = given if given is not None else empty_like(like, shape, name)
    t = view(name, obj)
    need_shape(t, shape)
    need_contiguous(t)
    return obj, t


def add_rmsnorm(x, residual, weight, eps=1e-6, *, out=None, residual_out=None, stream=None):
    """h = x + residual; y = h / sqrt(mean(h^2, last dim) + eps) * weight.

    x, residual: [..., n] (contiguous, bf16/fp16, CUDA); weight: [n], same dtype.
    Returns (y, h), both shaped like x: y the normalised rows, h the sum (the next residual).
    out= and residual_out= pass them (else allocated for torch/CuPy inputs); stream= overrides
    the framework's current stream (an int CUstream handle or a stream object)."""
    fast = _Torch.matrix(x, residual, weight) if stream is None else None
    y = h = None
    if fast and residual.shape == x.shape and weight.shape == (fast[2],):
        y = _Torch.output(out, x, fast[0], x.shape)
        h = _Torch.output(residual_out, x, fast[0], x.shape)
    if y is not None and h is not None:
        dev, m, n, code = fast
        ptrs = (x.data_ptr(), residual.data_ptr(), weight.data_ptr(), y.data_ptr(), h.data_ptr())
        s = _Torch.stream(dev)
    else:
        tx, tr, tw = view("x", x), view("residual", residual), view("weight", weight)
        code = C_DTYPES[check([tx, tr, tw])]
        m, n = rows(tx)
        need_contiguous(tx)
        need_shape(tr, tx.shape, "like x")
        need_contiguous(tr)
        need_shape(tw, (n,), "x's last dim")
        y, ty = _out(out, "out", tx, tx.shape)
        h, th = _out(residual_out, "residual_out", tx, tx.shape)
        check([tx, ty, th])
        ptrs = (tx.ptr, tr.ptr, tw.ptr, ty.ptr, th.ptr)
        s = stream_of(stream, tx)
    _check_status(_ktune.add_rmsnorm(*ptrs, m, n, code, float(eps), s))
    return y, h


def layernorm(x, weight, bias, eps=1e-5, *, residual=None, out=None, residual_out=None,
              stream=None):
    """y = (h - mean) / sqrt(var + eps) * weight + bias over the last dim, with h = x, or
    h = x + residual when residual is given (then returned too).

    x (and residual): [..., n]; weight, bias: [n]; one dtype (bf16/fp16), CUDA, contiguous.
    Returns y, or (y, h) with a residual."""
    tx, tw, tb = view("x", x), view("weight", weight), view("bias", bias)
    tensors = [tx, tw, tb]
    tr = None
    if residual is not None:
        tr = view("residual", residual)
        tensors.append(tr)
    elif residual_out is not None:
        raise ValueError("residual_out: given without residual (h = x + residual needs both)")
    dtype = check(tensors)
    m, n = rows(tx)
    need_contiguous(tx)
    need_shape(tw, (n,), "x's last dim")
    need_shape(tb, (n,), "x's last dim")
    if tr is not None:
        need_shape(tr, tx.shape, "like x")
        need_contiguous(tr)
    y, ty = _out(out, "out", tx, tx.shape)
    h, th = (None, None)
    if tr is not None:
        h, th = _out(residual_out, "residual_out", tx, tx.shape)
    check([t for t in (tx, ty, th) if t is not None])
    s = stream_of(stream, tx)
    _check_status(_ktune.layernorm(tx.ptr, tr.ptr if tr else 0, tw.ptr, tb.ptr, ty.ptr,
                                   th.ptr if th else 0, m, n, C_DTYPES[dtype], float(eps), s))
    return (y, h) if tr is not None else y


def bias_act(x, bias, activation="gelu_tanh", *, out=None, stream=None):
    """y = act(x + bias) over [..., n] with bias [n]; activation one of gelu_tanh, gelu_erf,
    silu, relu. One dtype (bf16/fp16), CUDA, contiguous. Returns y shaped like x."""
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise ValueError(f"activation: {activation!r} is not one of "
                         f"{', '.join(_ACTIVATIONS)}")
    fast = _Torch.matrix(x, bias) if stream is None else None
    y = None
    if fast and bias.shape == (fast[2],):
        y = _Torch.output(out, x, fast[0], x.shape)
    if y is not None:
        dev, m, n, code = fast
        ptrs = (x.data_ptr(), bias.data_ptr(), y.data_ptr())
        s = _Torch.stream(dev)
    else:
        tx, tb = view("x", x), view("bias", bias)
        code = C_DTYPES[check([tx, tb])]
        m, n = rows(tx)
        need_contiguous(tx)
        need_shape(tb, (n,), "x's last dim")
        y, ty = _out(out, "out", tx, tx.shape)
        check([tx, ty])
        ptrs = (tx.ptr, tb.ptr, ty.ptr)
        s = stream_of(stream, tx)
    _check_status(_ktune.bias_act(*ptrs, m, n, _ACTIVATIONS[activation], code, s))
    return y


def _one_input(x, out, stream, halve):
    """(y, x's and y's addresses, rows, last dim of x, C dtype, stream) for the ops that read one
    tensor x [..., n] and write y [..., n] (or [..., n / 2] with halve, n then even)."""
    fast = _Torch.matrix(x) if stream is None else None
    y = None
    if fast and not (halve and fast[2] % 2):
        y = _Torch.output(out, x, fast[0], x.shape[:-1] + (fast[2] // (2 if halve else 1),))
    if y is not None:
        dev, m, n, code = fast
        return y, x.data_ptr(), y.data_ptr(), m, n, code, _Torch.stream(dev)
    tx = view("x", x)
    code = C_DTYPES[check([tx])]
    m, n = rows(tx)
    need_contiguous(tx)
    if halve and n % 2 != 0:
        raise ValueError(f"x: last dim {n} is odd (x holds the gate and up halves, 2n)")
    y, ty = _out(out, "out", tx, tuple(tx.shape[:-1]) + (n // (2 if halve else 1),))
    check([tx, ty])
    return y, tx.ptr, ty.ptr, m, n, code, stream_of(stream, tx)


def swiglu(x, *, out=None, stream=None):
    """y = silu(a) * b with a = x[..., :n], b = x[..., n:]: x [..., 2n] -> y [..., n].
    One dtype (bf16/fp16), CUDA, contiguous."""
    y, px, py, m, two_n, code, s = _one_input(x, out, stream, halve=True)
    _check_status(_ktune.swiglu(px, py, m, two_n // 2, code, s))
    return y


def softmax(x, scale=1.0, *, out=None, stream=None):
    """y = softmax(scale * x) over the last dim of x [..., n]. One dtype (bf16/fp16),
    CUDA, contiguous. Returns y shaped like x."""
    y, px, py, m, n, code, s = _one_input(x, out, stream, halve=False)
    _check_status(_ktune.softmax(px, py, m, n, float(scale), code, s))
    return y
