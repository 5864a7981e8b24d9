#!/usr/bin/env python3
"""Mixture-of-Experts layer on the GPU (issue 8): ktune tuned vs ktune default vs naive PyTorch vs
the best PyTorch has (sort + torch._grouped_mm), each plainly launched and captured in a CUDA
graph, all in one process on the same GPU, for two layers and every token bucket:

  mixtral   E=8,  k=2, H=4096, I=14336, routing softmax_renorm
  deepseek  E=64, k=8, H=2048, I=1408,  routing sigmoid_group (n_group=8, topk_group=4,
            routed_scaling=2.5, a per-expert correction bias)

Every implementation does the whole op from router logits: routing, alignment/permutation, both
GEMMs (SiLU-gated), combine. ktune is called through its C API (ctypes on libktune.so, one
wrapper class, KtuneMoe); "tuned" dispatches from the database given with --db, "default" from
an empty database with the shipped databases off (ktune_configure), i.e. the built-in default.

Correctness before timing: every implementation's y (plain and graph-replayed, output poisoned
with NaN first where the implementation writes into a caller's buffer) against a float64 torch
reference of the layer on the same bf16 inputs, within the op's bf16 tolerance
(|y - ref| <= 2e-2 + 2e-2 |ref|, templates/moe/moe_op.cpp), and routing against a float64
reference with ktune's semantics (templates/moe/route.cuh, tests/support/moe_reference.cpp).
Logits are drawn so that no routing decision is a near-tie (rows whose top-k or group boundary
margin is under 1e-4 are redrawn), so every correct implementation picks the same experts.
A failed check is printed loudly, that implementation is not timed, and the exit code is 1.

Timing: CUDA events, 3 warm-up calls, then samples of `--batch` back-to-back calls between two
events, median over >= `--samples` samples (and >= 100 ms). Plain: nothing fills the queue, so a
call costs max(host launch time, device time), what eager Python gets. Graph: a sleep kernel
fills the queue first, then the graph is replayed: device time. The working set of every row
exceeds the 50 MB L2 (at least k distinct experts' weights: 138 MB for deepseek at T=1, 705 MB for
mixtral), so nothing is flushed between calls; x and the logits stay where the previous call left
them, as in a model where the previous op just wrote them.

Usage: python3 benchmarks/moe_bench.py --lib .gpu/lib/libktune.so --db moe.db [--out DIR]
           [--layers mixtral,deepseek] [--tokens 1,16,128] [--no-ktune]
       (benchmarks/run_moe.sh runs it on the GPU machine)
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import re
import statistics
import sys
import tempfile
import traceback

import torch
import torch.nn.functional as F

LAYERS = {
    "mixtral": dict(e=8, k=2, h=4096, i=14336, routing="softmax_renorm", n_group=1,
                    topk_group=1, scaling=1.0),
    "deepseek": dict(e=64, k=8, h=2048, i=1408, routing="sigmoid_group", n_group=8,
                     topk_group=4, scaling=2.5),
    # Past 256 experts (the kernels' 512-entry forms, stop 76), no bar: Kimi-K2's layers (384
    # experts, sigmoid scores in one group, routed scaling 2.827; 34 GB of bf16 weights) and
    # Qwen3-Next's (512 experts of 512, top 10, renormalised).
    "kimi": dict(e=384, k=8, h=7168, i=2048, routing="sigmoid_group", n_group=1, topk_group=1,
                 scaling=2.827),
    "qwen3next": dict(e=512, k=10, h=2048, i=512, routing="softmax_renorm", n_group=1,
                      topk_group=1, scaling=1.0),
}
TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
IMPLS = ["ktune_tuned", "ktune_default", "torch_grouped_mm", "torch_naive"]
# Issue 8's bar for T >= 1024: 0.9x the tuned Triton fused-MoE TFLOP/s of its table (H100).
TRITON_TFLOPS = {"mixtral": {1024: 428.0, 4096: 504.0}, "deepseek": {1024: 241.0, 4096: 408.0}}
ATOL = RTOL = 2e-2  # the moe op's bf16 tolerance (MoeOp::tolerance), for y of order 1
ROUTE_MARGIN = 1e-4  # no routing decision closer than this (fp32 scoring errs by ~1e-7)
WEIGHT_RTOL = 1e-5   # routing weights, fp32 against float64
SLEEP_CYCLES = 4_000_000  # ~2 ms at H100 clocks: the queue fill before a graph sample
BF16 = 2  # ktune_dtype
DEVICE = "cuda"  # a module constant so that the pure-torch parts can be exercised on a CPU


# ---------------------------------------------------------------------------------------------
# ktune through ctypes
# ---------------------------------------------------------------------------------------------

class KtuneMoe:
    """The MoE entry point of ktune's C API (runtime/include/ktune/ktune.h), and the
    configure/query calls around it:

        ktune_status ktune_moe_args_init_sized(ktune_moe_args* args, size_t size);
        ktune_status ktune_moe_workspace_size(const ktune_moe_args* args, size_t* bytes);
        ktune_status ktune_moe(const ktune_moe_args* args, ktune_stream stream);

    At construction Args and the routing values are checked against the header (field names,
    order and kinds; a mismatch raises with both lists) and sizeof(Args) against the sizes the
    library accepts: if the API changes, adapt Args._fields_, ROUTING and the calls here and
    nowhere else. Args is initialised with ktune_moe_args_init_sized(sizeof(Args)), never the
    plain init: that writes the library's sizeof, past Args when the library's struct has grown.
    """

    class Args(ctypes.Structure):
        _fields_ = [
            ("struct_size", ctypes.c_size_t),      # set by ktune_moe_args_init_sized
            ("x", ctypes.c_void_p),                # [t, h] bf16
            ("logits", ctypes.c_void_p),           # [t, e] fp32
            ("correction_bias", ctypes.c_void_p),  # [e] fp32 or NULL (sigmoid_group)
            ("topk_ids", ctypes.c_void_p),         # [t, k] int32 out or NULL
            ("topk_weights", ctypes.c_void_p),     # [t, k] fp32 out or NULL
            ("w1", ctypes.c_void_p),               # [e, 2i, h]
            ("w2", ctypes.c_void_p),               # [e, h, i]
            ("y", ctypes.c_void_p),                # [t, h] out
            ("expert_counts", ctypes.c_void_p),    # [e] int32 out or NULL
            ("aux_loss", ctypes.c_void_p),         # [1] fp32 out or NULL
            ("e", ctypes.c_int64),
            ("k", ctypes.c_int64),
            ("h", ctypes.c_int64),
            ("i", ctypes.c_int64),
            ("t", ctypes.c_int64),
            ("routing", ctypes.c_int),             # ktune_moe_routing
            ("n_group", ctypes.c_int64),
            ("topk_group", ctypes.c_int64),
            ("routed_scaling", ctypes.c_float),
            ("dtype", ctypes.c_int),               # ktune_dtype
            ("workspace", ctypes.c_void_p),        # the caller's scratch, or NULL: the runtime's
            ("workspace_bytes", ctypes.c_size_t),
            ("w1_scale", ctypes.c_void_p),         # [e, 2i] fp32, FP8 weights only (NULL here)
            ("w2_scale", ctypes.c_void_p),         # [e, h] fp32, FP8 weights only (NULL here)
        ]

    ROUTING = {"softmax": 0, "softmax_renorm": 1, "sigmoid_group": 2, "precomputed": 3}
    ROUTING_ENUM = {"softmax": "KTUNE_MOE_SOFTMAX", "softmax_renorm": "KTUNE_MOE_SOFTMAX_RENORM",
                    "sigmoid_group": "KTUNE_MOE_SIGMOID_GROUP",
                    "precomputed": "KTUNE_MOE_PRECOMPUTED"}
    MATCH = ["exact", "nearest_shape", "other_device", "default"]

    def __init__(self, lib_path, header_path):
        self.lib = lib = ctypes.CDLL(lib_path)
        P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        lib.ktune_last_error.restype = ctypes.c_char_p
        lib.ktune_version.restype = ctypes.c_char_p
        lib.ktune_configure.argtypes = [ctypes.c_char_p, I]
        lib.ktune_query.argtypes = [ctypes.c_char_p, ctypes.c_char_p, I, ctypes.POINTER(I),
                                    ctypes.c_char_p, S]
        missing = [f for f in ("ktune_moe_args_init_sized", "ktune_moe",
                               "ktune_moe_workspace_size") if not hasattr(lib, f)]
        if missing:
            raise RuntimeError(f"{lib_path} has no {', '.join(missing)}: build a bundle with the "
                               "MoE C API (scripts/gpu_bundle.sh), or run with --no-ktune")
        args_p = ctypes.POINTER(self.Args)
        lib.ktune_moe_args_init_sized.argtypes = [args_p, S]
        lib.ktune_moe.argtypes = [args_p, P]
        lib.ktune_moe_workspace_size.argtypes = [args_p, ctypes.POINTER(S)]
        self.version = lib.ktune_version().decode()
        self.header_note = self._check_header(header_path)
        # The library refuses a size outside its first ktune_moe_args .. its own sizeof.
        if lib.ktune_moe_args_init_sized(ctypes.byref(self.Args()), ctypes.sizeof(self.Args)):
            raise RuntimeError(f"{lib.ktune_last_error().decode()}: KtuneMoe.Args has "
                               f"{ctypes.sizeof(self.Args)} bytes, adapt KtuneMoe.Args")

    def _check_header(self, path):
        """Raises if the header declares ktune_moe_args or the routing enum differently."""
        if not path or not os.path.exists(path):
            return f"no header at {path!r}: binding unchecked (expected design)"
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(path).read(), flags=re.S)
        m = re.search(r"struct\s+ktune_moe_args\s*\{(.*?)\}", text, flags=re.S)
        if not m:
            return f"{path} declares no ktune_moe_args: binding unchecked (expected design)"
        got = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            head = re.match(r"^((?:const\s+)?[A-Za-z_][\w]*(?:\s+const)?)\s*(.*)$", decl)
            base, rest = head.group(1), head.group(2)
            for name in rest.split(","):
                name = name.strip()
                ptr = "*" in name
                name = name.replace("*", "").replace("const", "").strip()
                got.append((name, "pointer" if ptr else self._kind(base.replace("const", "")
                                                                        .strip())))
        want = [(n, self._ctype_kind(t)) for n, t in self.Args._fields_]
        if got != want:
            raise RuntimeError("KtuneMoe.Args does not match ktune_moe_args in " + path +
                               f":\n  header: {got}\n  ours:   {want}\nadapt KtuneMoe.Args")
        consts = dict((n, int(v, 0)) for n, v in
                      re.findall(r"\b(KTUNE_MOE_[A-Z_]+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", text))
        for mode, enum in self.ROUTING_ENUM.items():
            if enum in consts and consts[enum] != self.ROUTING[mode]:
                raise RuntimeError(f"{enum} = {consts[enum]} in {path}, KtuneMoe.ROUTING says "
                                   f"{self.ROUTING[mode]}")
        return f"binding checked against {path}"

    @staticmethod
    def _kind(ctype_name):
        return {"int64_t": "i64", "long long": "i64", "size_t": "size", "int": "i32",
                "int32_t": "i32", "float": "f32", "double": "f64"}.get(
                    ctype_name, "i32" if ctype_name.startswith("ktune_") else ctype_name)

    @staticmethod
    def _ctype_kind(t):
        return {ctypes.c_void_p: "pointer", ctypes.c_int64: "i64", ctypes.c_size_t: "size",
                ctypes.c_int: "i32", ctypes.c_float: "f32", ctypes.c_double: "f64"}[t]

    def check(self, status):
        if status != 0:
            raise RuntimeError(f"ktune error {status}: {self.lib.ktune_last_error().decode()}")

    def configure(self, db_path):
        """Dispatch from db_path alone (shipped databases off); drops every plan."""
        self.check(self.lib.ktune_configure(db_path.encode(), 0))

    def query(self, shape):
        match, params = ctypes.c_int(-1), ctypes.create_string_buffer(512)
        self.check(self.lib.ktune_query(b"moe", shape.encode(), BF16, ctypes.byref(match),
                                        params, 512))
        return params.value.decode(), self.MATCH[match.value]

    def args(self, cfg, t, x, logits, bias, w1, w2, y, ids=None, weights=None, counts=None,
             workspace=None):
        a = self.Args()
        self.check(self.lib.ktune_moe_args_init_sized(ctypes.byref(a), ctypes.sizeof(a)))
        for name, v in (("x", x), ("logits", logits), ("correction_bias", bias),
                        ("topk_ids", ids), ("topk_weights", weights), ("w1", w1), ("w2", w2),
                        ("y", y), ("expert_counts", counts)):
            setattr(a, name, None if v is None else v.data_ptr())
        a.e, a.k, a.h, a.i, a.t = cfg["e"], cfg["k"], cfg["h"], cfg["i"], t
        a.routing, a.n_group, a.topk_group = (self.ROUTING[cfg["routing"]], cfg["n_group"],
                                              cfg["topk_group"])
        a.routed_scaling, a.dtype = cfg["scaling"], BF16
        if workspace is not None:
            a.workspace, a.workspace_bytes = workspace.data_ptr(), workspace.numel()
        return a

    def workspace_bytes(self, args):
        n = ctypes.c_size_t(0)
        self.check(self.lib.ktune_moe_workspace_size(ctypes.byref(args), ctypes.byref(n)))
        return n.value

    def __call__(self, args, stream):
        self.check(self.lib.ktune_moe(ctypes.byref(args), stream))


def shape_key(cfg, t):
    return (f"e={cfg['e']},k={cfg['k']},h={cfg['h']},i={cfg['i']},t={t},routing={cfg['routing']},"
            f"n_group={cfg['n_group']},topk_group={cfg['topk_group']}")


# ---------------------------------------------------------------------------------------------
# Inputs and float64 references
# ---------------------------------------------------------------------------------------------

def _randn_bf16(shape, divisor, g):
    """N(0, 1) / divisor in bf16. Drawn in one fp32 tensor where that takes at most 8 GiB (the
    values the bench always drew), else one expert at a time: Kimi-K2's w1 in fp32 is 42 GiB,
    which with the bf16 copy does not fit an H100 (stop 77)."""
    if math.prod(shape) * 4 <= 8 << 30:
        return (torch.randn(*shape, device=DEVICE, generator=g) / divisor).to(torch.bfloat16)
    out = torch.empty(*shape, device=DEVICE, dtype=torch.bfloat16)
    for i in range(shape[0]):
        out[i] = (torch.randn(*shape[1:], device=DEVICE, generator=g) / divisor).to(torch.bfloat16)
    return out


class Layer:
    """One layer's weights: x ~ N(0, 1), w1 ~ N(0, 1/H) so gate and up are O(1), w2 ~ N(0, 1/I)
    divided by routed_scaling so y is O(1); correction bias ~ N(0, 0.1^2) (the GPU test's)."""

    def __init__(self, name, seed):
        self.name, self.cfg = name, LAYERS[name]
        c = self.cfg
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        self.w1 = _randn_bf16((c["e"], 2 * c["i"], c["h"]), math.sqrt(c["h"]), g)
        self.w2 = _randn_bf16((c["e"], c["h"], c["i"]), math.sqrt(c["i"]) * c["scaling"], g)
        self.bias = (0.1 * torch.randn(c["e"], device=DEVICE, generator=g)
                     if c["routing"] == "sigmoid_group" else None)
        self.expert_bytes = 3 * c["h"] * c["i"] * 2  # w1 + w2 of one expert, bf16


def route_ref(cfg, logits, bias):
    """float64 routing with ktune's definitions: (ids [T, k] best first, weights [T, k], margin
    [T]: the smallest gap at any boundary the choice depends on)."""
    T, E, k = logits.shape[0], cfg["e"], cfg["k"]
    inf = float("inf")
    l = logits.double()
    if cfg["routing"] == "softmax_renorm":
        # Selection on the raw logit (softmax is monotone); weights softmax renormalised over k.
        top, ids = l.topk(min(k + 1, E), dim=-1)
        margin = top[:, k - 1] - top[:, k] if k < E else torch.full((T,), inf, device=l.device)
        w = torch.softmax(top[:, :k], dim=-1)
        return ids[:, :k], w, margin
    assert cfg["routing"] == "sigmoid_group"
    G, tg = cfg["n_group"], cfg["topk_group"]
    scores = torch.sigmoid(l)
    sel = scores + (bias.double() if bias is not None else 0.0)
    margin = torch.full((T,), inf, device=l.device, dtype=torch.float64)
    if G > 1:
        gsize = E // G
        groups = sel.view(T, G, gsize)
        gscore = groups.topk(2, dim=-1).values.sum(-1) if gsize >= 2 else groups[..., 0]
        gtop, gids = gscore.topk(min(tg + 1, G), dim=-1)
        if tg < G:
            margin = torch.minimum(margin, gtop[:, tg - 1] - gtop[:, tg])
        keep = torch.zeros(T, G, dtype=torch.bool, device=l.device)
        keep.scatter_(1, gids[:, :tg], True)
        sel = sel.masked_fill(~keep.repeat_interleave(gsize, dim=1), -inf)
    top, ids = sel.topk(min(k + 1, E), dim=-1)
    if k < E:
        gap = top[:, k - 1] - top[:, k]  # inf where the (k+1)-th is outside the kept groups
        margin = torch.minimum(margin, gap)
    ids = ids[:, :k]
    w = scores.gather(1, ids)
    w = w / w.sum(-1, keepdim=True) * cfg["scaling"]
    return ids, w, margin


def make_inputs(layer, t, seed):
    """x [T, H] bf16 and logits [T, E] fp32, rows redrawn until no routing decision is closer
    than ROUTE_MARGIN; returns (x, logits, ref ids, ref weights, redrawn rows)."""
    c = layer.cfg
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(t, c["h"], device=DEVICE, generator=g).to(torch.bfloat16)
    logits = torch.randn(t, c["e"], device=DEVICE, generator=g)
    redrawn = 0
    for _ in range(100):
        ids, w, margin = route_ref(c, logits, layer.bias)
        bad = (margin < ROUTE_MARGIN).nonzero().flatten()
        if bad.numel() == 0:
            return x, logits, ids, w, redrawn
        redrawn += bad.numel()
        logits[bad] = torch.randn(bad.numel(), c["e"], device=DEVICE, generator=g)
    raise RuntimeError(f"{layer.name} T={t}: could not draw logits without near-ties")


def layer_ref(layer, x, ids, w):
    """float64 y of the layer for the given routing: sum over the token's experts of
    w * (silu(x W1g^T) * (x W1u^T)) W2^T."""
    c = layer.cfg
    I = c["i"]
    xd = x.double()
    y = torch.zeros(x.shape[0], c["h"], dtype=torch.float64, device=DEVICE)
    for e in range(c["e"]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = xd[tok] @ layer.w1[e].double().T
        a = F.silu(h[:, :I]) * h[:, I:]
        y.index_add_(0, tok, (a @ layer.w2[e].double().T) * w[tok, slot, None])
    return y


def compare(y, ref):
    """Max abs error, relative norm error, and the worst error as a fraction of the tolerance
    |y - ref| <= ATOL + RTOL |ref| (NaN/inf anywhere fails)."""
    yd = y.double()
    finite = bool(torch.isfinite(yd).all())
    d = (yd - ref).abs()
    worst = (d / (ATOL + RTOL * ref.abs())).max().item() if finite else float("inf")
    return {"max_abs_err": d.max().item() if finite else float("inf"),
            "rel_err": ((yd - ref).norm() / ref.norm()).item() if finite else float("inf"),
            "worst_of_tol": worst, "ok": finite and worst <= 1.0}


def same_routing(ids, w, ref_ids, ref_w):
    """(ok, message): the same expert set per token and each chosen expert's weight within
    WEIGHT_RTOL (order within a token's k does not change y)."""
    a, ia = ids.long().sort(dim=-1)
    b, ib = ref_ids.long().sort(dim=-1)
    wrong = (a != b).any(dim=-1)
    if bool(wrong.any()):
        t = int(wrong.nonzero()[0])
        return False, (f"{int(wrong.sum())} tokens route differently; token {t}: "
                       f"{a[t].tolist()} vs reference {b[t].tolist()}")
    wa, wb = w.double().gather(1, ia), ref_w.gather(1, ib)
    err = ((wa - wb).abs() / wb.abs()).max().item()
    if not err <= WEIGHT_RTOL:
        return False, f"routing weights off by {err:.1e} relative (> {WEIGHT_RTOL})"
    return True, f"routing exact, weights within {err:.1e}"


# ---------------------------------------------------------------------------------------------
# PyTorch implementations
# ---------------------------------------------------------------------------------------------

def route_torch(cfg, logits, bias):
    """Routing with plain torch ops in fp32, the same definitions as ktune: ids [T, k], weights
    [T, k] fp32. (torch.topk does not promise ties to the lower id; inputs have no near-ties.)"""
    k = cfg["k"]
    if cfg["routing"] == "softmax_renorm":
        top, ids = logits.topk(k, dim=-1)
        return ids, torch.softmax(top, dim=-1)
    T, E, G, tg = logits.shape[0], cfg["e"], cfg["n_group"], cfg["topk_group"]
    scores = torch.sigmoid(logits)
    sel = scores + bias
    if G > 1:
        gscore = sel.view(T, G, E // G).topk(2, dim=-1).values.sum(-1)
        gids = gscore.topk(tg, dim=-1).indices
        keep = torch.zeros(T, G, dtype=torch.bool, device=logits.device).scatter_(1, gids, True)
        sel = sel.masked_fill(~keep.repeat_interleave(E // G, dim=1), float("-inf"))
    ids = sel.topk(k, dim=-1).indices
    w = scores.gather(1, ids)
    return ids, w / w.sum(-1, keepdim=True) * cfg["scaling"]


def moe_naive(layer, x, logits):
    """Routing, then a Python loop over experts: gather the expert's tokens, two matmuls,
    silu * up, weighted index_add (in fp32, cast once at the end). Data-dependent shapes: each
    expert's token list is read back to the host."""
    c = layer.cfg
    I = c["i"]
    ids, w = route_torch(c, logits, layer.bias)
    y = torch.zeros(x.shape[0], c["h"], dtype=torch.float32, device=x.device)
    for e in range(c["e"]):
        tok, slot = torch.where(ids == e)
        if tok.numel() == 0:
            continue
        h = x.index_select(0, tok) @ layer.w1[e].T
        a = F.silu(h[:, :I]) * h[:, I:]
        y.index_add_(0, tok, (a @ layer.w2[e].T) * w[tok, slot, None])
    return y.to(x.dtype)


def probe_grouped_mm():
    """What torch._grouped_mm accepts on this build: exists, int32 offsets, groups of any size
    (including empty ones) or only multiples of 16, weights as a transposed view. Returns
    (row alignment to use or None, facts)."""
    facts = {"exists": hasattr(torch, "_grouped_mm"),
             "public_F_grouped_mm": hasattr(F, "grouped_mm")}
    if not facts["exists"]:
        return None, facts
    g = torch.Generator(device=DEVICE).manual_seed(7)
    a = torch.randn(64, 64, device=DEVICE, generator=g).to(torch.bfloat16)
    b = torch.randn(4, 96, 64, device=DEVICE, generator=g).to(torch.bfloat16)  # [G, N, K]

    def attempt(sizes, offs_dtype):
        offs = torch.tensor(sizes, device=DEVICE).cumsum(0).to(offs_dtype)
        try:
            out = torch._grouped_mm(a, b.transpose(1, 2), offs=offs)
            torch.cuda.synchronize()
        except Exception as e:  # the build refuses: record why
            return str(e).strip().splitlines()[0][:200]
        start = 0
        for grp, n in enumerate(sizes):
            ref = a[start:start + n].float() @ b[grp].float().T
            if n and not torch.allclose(out[start:start + n].float(), ref, atol=0.1, rtol=0.02):
                return f"wrong result in group {grp}"
            start += n
        return "ok"

    facts["int32_any_sizes"] = attempt([7, 0, 13, 20], torch.int32)
    facts["int64_offsets"] = attempt([7, 0, 13, 20], torch.int64)
    facts["int32_multiples_of_16"] = attempt([16, 0, 32, 16], torch.int32)
    if facts["int32_any_sizes"] == "ok":
        return 1, facts
    if facts["int32_multiples_of_16"] == "ok":
        return 16, facts
    return None, facts


def moe_grouped(layer, x, logits, align):
    """Routing, a stable sort of the (token, slot) pairs by expert, int32 end offsets,
    torch._grouped_mm for both GEMMs (weights as transposed views, no copy), silu * up, and a
    weighted scatter-add (index_add_ in fp32, cast once). align > 1: each expert's rows padded
    to a multiple of align (zero rows), computed on the device without a host sync."""
    c = layer.cfg
    E, k, I = c["e"], c["k"], c["i"]
    T = x.shape[0]
    ids, w = route_torch(c, logits, layer.bias)
    flat = ids.reshape(-1)
    sorted_e, order = torch.sort(flat, stable=True)
    tok = order // k
    pairs = flat.numel()
    # Pairs per expert, ends of each expert's run: searchsorted on the sorted ids (no bincount,
    # whose output size depends on the data).
    ends = torch.searchsorted(sorted_e, torch.arange(1, E + 1, device=x.device), out_int32=True)
    if align == 1:
        xs = x.index_select(0, tok)
        offs = ends
    else:
        counts = torch.diff(ends, prepend=ends.new_zeros(1))
        padded = (counts + align - 1) // align * align
        pend = padded.cumsum(0, dtype=torch.int32)
        rank = torch.arange(pairs, device=x.device) - (ends - counts)[sorted_e]
        dest = (pend - padded)[sorted_e] + rank
        xs = x.new_zeros(pairs + E * (align - 1), x.shape[1])
        xs[dest] = x.index_select(0, tok)
        offs = pend
    h = torch._grouped_mm(xs, layer.w1.transpose(1, 2), offs=offs)
    a = F.silu(h[:, :I]) * h[:, I:]
    o = torch._grouped_mm(a, layer.w2.transpose(1, 2), offs=offs)
    if align != 1:
        o = o[dest]
    y = torch.zeros(T, c["h"], dtype=torch.float32, device=x.device)
    y.index_add_(0, tok, o * w.reshape(-1)[order, None])
    return y.to(x.dtype)


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

def median_us(fn, fill, samples, batch, min_ms=100.0, max_samples=200):
    """Median time of one call in microseconds (and the spread): `batch` back-to-back calls
    between two events; fill: a sleep kernel first, so the GPU never waits for the host."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times, total = [], 0.0
    while (len(times) < samples or total < min_ms) and len(times) < max_samples:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if fill:
            torch.cuda._sleep(SLEEP_CYCLES)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b)
        times.append(t / batch)
        total += t
    times.sort()
    return {"us": statistics.median(times) * 1e3, "min_us": times[0] * 1e3,
            "p90_us": times[int(0.9 * (len(times) - 1))] * 1e3, "samples": len(times)}


def copy_bandwidth(samples):
    """Device-to-device copy of 1 GiB (bytes read + written over time), median."""
    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    r = median_us(lambda: dst.copy_(src), False, samples, 5, min_ms=0)
    return {"bytes": 2 * n, "us": r["us"], "tb_s": 2 * n / (r["us"] * 1e-6) / 1e12}


def cublas_rate(samples):
    """torch.matmul bf16 8192^3 on random data, median TFLOP/s."""
    n = 8192
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=DEVICE, dtype=torch.bfloat16)
    r = median_us(lambda: torch.matmul(a, b, out=c), False, samples, 5, min_ms=0)
    return {"us": r["us"], "tflops": 2.0 * n ** 3 / (r["us"] * 1e-6) / 1e12}


def capture_error(e):
    """Why a capture failed: torch reports the failed end of the capture, chained to the error
    that broke it; both, the first first."""
    chain = []
    while e is not None and len(chain) < 5:
        text = str(e).strip()
        chain.append(text.splitlines()[0][:200] if text else type(e).__name__)
        e = e.__cause__ or e.__context__
    return chain[-1] + (f" (then: {chain[0]})" if len(chain) > 1 else "")


class Capture:
    """fn captured in a CUDA graph on a side stream (warmed up there first); replay() returns
    the graph's output tensor."""

    def __init__(self, fn):
        self.stream = torch.cuda.Stream()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(self.stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            self.out = fn()
        torch.cuda.synchronize()

    def replay(self):
        self.graph.replay()
        return self.out


# ---------------------------------------------------------------------------------------------
# One (layer, T)
# ---------------------------------------------------------------------------------------------

def run_row(layer, t, args, kt, dbs, grouped_align, naive_capture, seed):
    c = layer.cfg
    res = {"layer": layer.name, "t": t, **{d: c[d] for d in ("e", "k", "h", "i", "routing")}}
    res["flops"] = 6.0 * c["h"] * c["i"] * t * c["k"]
    x, logits, ref_ids, ref_w, redrawn = make_inputs(layer, t, seed)
    res["redrawn_rows"] = redrawn
    res["experts_touched"] = int(torch.unique(ref_ids).numel())
    res["weight_bytes_touched"] = res["experts_touched"] * layer.expert_bytes
    yref = layer_ref(layer, x, ref_ids, ref_w)
    res["ref_abs_mean"] = yref.abs().mean().item()
    res["impls"] = {}
    failures = []

    ids, w = route_torch(c, logits, layer.bias)
    ok, msg = same_routing(ids, w, ref_ids, ref_w)
    res["torch_routing"] = msg
    if not ok:
        failures.append(f"torch routing: {msg}")

    def record(name, mode, fn, y_check, fill):
        """Check y, then time; returns the entry stored under impls[name][mode]."""
        entry = compare(y_check, yref)
        if not entry["ok"]:
            failures.append(f"{name} {mode}: " + (
                f"max abs err {entry['max_abs_err']:.3g}, {entry['worst_of_tol']:.2f}x the "
                "tolerance" if math.isfinite(entry["worst_of_tol"]) else "NaN or inf in y"))
            print(f"!!!! WRONG RESULT {layer.name} T={t} {name} {mode}: {failures[-1]}",
                  flush=True)
            entry["us"] = float("nan")
            return entry
        best = None
        for _ in range(args.rounds):
            r = median_us(fn, fill, args.samples, args.batch)
            best = r if best is None or r["us"] < best["us"] else best
        entry.update(best)
        return entry

    def run_torch(name, fn, capture_ok=True, why=None):
        out = res["impls"][name] = {}
        try:
            y = fn()
            torch.cuda.synchronize()
        except Exception as e:
            out["plain"] = out["graph"] = {"us": float("nan"), "error": str(e)[:300]}
            failures.append(f"{name}: {e}")
            return
        out["plain"] = record(name, "plain", fn, y, False)
        del y
        if not capture_ok:
            out["graph"] = {"us": float("nan"), "na": why}
            return
        try:
            cap = Capture(fn)
        except Exception as e:
            torch.cuda.synchronize()
            out["graph"] = {"us": float("nan"), "na": "capture failed: " + capture_error(e)}
            return
        cap.out.fill_(float("nan"))
        y = cap.replay()
        torch.cuda.synchronize()
        out["graph"] = record(name, "graph", cap.replay, y, True)
        del cap

    # ktune, tuned then default: configure drops every plan, so each graph is released before.
    if kt is not None:
        for name, db in (("ktune_tuned", dbs["tuned"]), ("ktune_default", dbs["default"])):
            out = res["impls"][name] = {}
            try:
                kt.configure(db)
                try:
                    out["params"], out["match"] = kt.query(shape_key(c, t))
                except RuntimeError as e:  # informative only: the call below plans for itself
                    out["params"], out["match"] = f"query failed: {e}", "?"
                y = torch.full((t, c["h"]), float("nan"), device=DEVICE, dtype=torch.bfloat16)
                ids_out = torch.full((t, c["k"]), -1, device=DEVICE, dtype=torch.int32)
                w_out = torch.full((t, c["k"]), float("nan"), device=DEVICE)
                counts = torch.full((c["e"],), -1, device=DEVICE, dtype=torch.int32)
                ws_bytes = kt.workspace_bytes(kt.args(c, t, x, logits, layer.bias, layer.w1,
                                                      layer.w2, y))
                # The caller's workspace, so that no call allocates (graph capture).
                ws = torch.empty(ws_bytes, device=DEVICE, dtype=torch.uint8) if ws_bytes else None
                a_check = kt.args(c, t, x, logits, layer.bias, layer.w1, layer.w2, y, ids_out,
                                  w_out, counts, ws)
                a_time = kt.args(c, t, x, logits, layer.bias, layer.w1, layer.w2, y, workspace=ws)
                out["workspace_bytes"] = ws_bytes
                kt(a_check, torch.cuda.current_stream().cuda_stream)
                torch.cuda.synchronize()
                rok, rmsg = same_routing(ids_out, w_out, ref_ids, ref_w)
                hist = torch.bincount(ref_ids.flatten(), minlength=c["e"]).to(torch.int32)
                if rok and not torch.equal(counts, hist):
                    rok, rmsg = False, "expert_counts differ from the reference histogram"
                out["routing"] = rmsg
                if not rok:
                    failures.append(f"{name} routing: {rmsg}")
                    print(f"!!!! WRONG ROUTING {layer.name} T={t} {name}: {rmsg}", flush=True)

                def call(a=a_time, y=y):
                    kt(a, torch.cuda.current_stream().cuda_stream)
                    return y

                out["plain"] = record(name, "plain", call, y, False)
                try:
                    cap = Capture(call)
                except Exception as e:  # the issue requires a capturable op: a failure
                    raise RuntimeError("capture failed: " + capture_error(e)) from e
                y.fill_(float("nan"))
                cap.replay()
                torch.cuda.synchronize()
                out["graph"] = record(name, "graph", cap.replay, y, True)
                del cap
            except Exception as e:
                traceback.print_exc()
                failures.append(f"{name}: {e}")
                out.setdefault("plain", {"us": float("nan"), "error": str(e)[:300]})
                out.setdefault("graph", {"us": float("nan"), "error": str(e)[:300]})
            torch.cuda.synchronize()

    if grouped_align is None:
        res["impls"]["torch_grouped_mm"] = {
            "plain": {"us": float("nan"), "na": "torch._grouped_mm unusable on this build"},
            "graph": {"us": float("nan"), "na": "torch._grouped_mm unusable on this build"}}
    else:
        run_torch("torch_grouped_mm", lambda: moe_grouped(layer, x, logits, grouped_align))
    run_torch("torch_naive", lambda: moe_naive(layer, x, logits), naive_capture["ok"],
              naive_capture["why"])

    for impl in res["impls"].values():
        for mode in ("plain", "graph"):
            e = impl.get(mode, {})
            us = e.get("us", float("nan"))
            e["tflops"] = res["flops"] / (us * 1e-6) / 1e12 if math.isfinite(us) else float("nan")
            if t <= 128:
                e["weight_tb_s"] = (res["weight_bytes_touched"] / (us * 1e-6) / 1e12
                                    if math.isfinite(us) else float("nan"))
    res["failures"] = failures
    return res


def naive_capture_probe(layer):
    """Whether the naive loop (host read-back of each expert's token list) can be captured."""
    x = torch.randn(4, layer.cfg["h"], device=DEVICE).to(torch.bfloat16)
    logits = torch.randn(4, layer.cfg["e"], device=DEVICE)
    try:
        Capture(lambda: moe_naive(layer, x, logits))
        return {"ok": True, "why": None}
    except Exception as e:
        torch.cuda.synchronize()
        return {"ok": False, "why": "not capturable: " + capture_error(e)}


# ---------------------------------------------------------------------------------------------
# The bar, tables, summary
# ---------------------------------------------------------------------------------------------

def bar(row, copy_tb_s):
    """Issue 8's bar for this row on ktune tuned's graph time: (verdict, criterion)."""
    t, name = row["t"], row["layer"]
    if name not in TRITON_TFLOPS:
        return "-", "no bar for this layer"
    e = row["impls"].get("ktune_tuned", {}).get("graph")
    if e is None:
        return "n/a", "ktune not run"
    us = e.get("us", float("nan"))
    if not math.isfinite(us):
        return "FAIL", "no valid time (wrong result or error)"
    floor_us = row["weight_bytes_touched"] / (copy_tb_s * 1e12) * 1e6
    if t == 1:
        limit = 1.12 * floor_us if name == "mixtral" else 75.0
        crit = f"{us:.0f} us, need <= " + (f"{limit:.0f} (1.12x the floor)" if name == "mixtral"
                                          else "75")
        return ("pass" if us <= limit else "FAIL"), crit
    if 16 <= t <= 128:
        pct = 100.0 * e.get("weight_tb_s", float("nan")) / copy_tb_s
        return (("pass" if pct >= 95.0 else "FAIL"),
                f"{pct:.0f}% of copy on touched weights, need >= 95%")
    if t >= 1024:
        ref_t = 4096 if t >= 4096 else 1024  # T=2048: the table's T=1024 figure
        need = 0.9 * TRITON_TFLOPS[name][ref_t]
        tflops = e.get("tflops", 0.0)
        crit = f"{tflops:.0f} TFLOP/s, need >= {need:.0f} (0.9x Triton at T={ref_t})"
        return ("pass" if tflops >= need else "FAIL"), crit
    return "-", "no bar at this T"


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"


def markdown(meta, rows, copy_tb_s):
    lines = [
        "# Mixture-of-Experts layer, bf16: ktune tuned vs default vs PyTorch (naive, grouped_mm)",
        "",
        f"- device: {meta['device']}, torch {meta['torch']} (CUDA {meta['cuda']}), "
        f"date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- ceilings, same run: copy {meta['copy_start']['tb_s']:.2f} TB/s at the start, "
        f"{meta['copy_end']['tb_s']:.2f} at the end (1 GiB D2D, read + write; "
        f"{copy_tb_s:.2f} used below); cuBLAS bf16 8192^3 {meta['cublas']['tflops']:.0f} TFLOP/s",
        f"- ktune: {meta['ktune']}",
        f"- torch._grouped_mm: {meta['grouped_mm']}",
        f"- naive graph: {meta['naive_capture']}",
        f"- L2 ({(meta['l2_bytes'] or 0) / 1e6:.0f} MB) not flushed between calls: every row touches at "
        f"least {meta['min_weight_bytes'] / 1e6:.0f} MB of expert weights per call, which L2 "
        "cannot hold; x and the logits stay where the last call left them, as after the op "
        "that wrote them in a model",
        "- whole op from fp32 router logits: routing, alignment, both GEMMs, combine. "
        "TFLOP/s = 6·H·I·T·k / t; weight % = experts touched × 3·H·I·2 bytes / t as % of copy "
        "(T <= 128). Plain: back-to-back eager calls (host cost included where it dominates); "
        "graph: replays behind a sleep kernel (device time). Median of >= "
        f"{meta['samples']} samples of {meta['batch']} calls, best of {meta['rounds']} round(s).",
        f"- correctness: y vs float64 torch reference, |err| <= {ATOL} + {RTOL}|ref|; routing "
        f"exact (margins >= {ROUTE_MARGIN} enforced). err = max abs error (plain; graph checked "
        "too).",
        "",
        "| layer | T | experts | impl | plain ms | graph ms | plain TFLOP/s | graph TFLOP/s |"
        " weight % copy (plain / graph) | max abs err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for name in IMPLS:
            if name not in r["impls"]:
                continue
            p, g = r["impls"][name].get("plain", {}), r["impls"][name].get("graph", {})
            pct = "-"
            if r["t"] <= 128:
                pct = (f"{fmt(100 * p.get('weight_tb_s', float('nan')) / copy_tb_s, '.0f')} / "
                       f"{fmt(100 * g.get('weight_tb_s', float('nan')) / copy_tb_s, '.0f')}")
            pms = fmt(p.get("us", float("nan")) / 1e3, ".3f")
            gms = fmt(g.get("us", float("nan")) / 1e3, ".3f")
            if "na" in g:
                gms = "n/a (" + g["na"].split(":")[0] + ")"
            pms, gms = ("WRONG" if e.get("ok") is False else v for e, v in ((p, pms), (g, gms)))
            lines.append(
                f"| {r['layer']} | {r['t']} | {r['experts_touched']} | {name} | "
                f"{pms} | {gms} | "
                f"{fmt(p.get('tflops'), '.0f')} | {fmt(g.get('tflops'), '.0f')} | {pct} | "
                f"{fmt(p.get('max_abs_err'), '.1e')} |")
    if any("ktune_tuned" in r["impls"] for r in rows):
        lines += ["", "## ktune configurations", "",
                  "| layer | T | tuned (match) | default (match) | bar (tuned, graph) |",
                  "|---|---|---|---|---|"]
        for r in rows:
            tu, de = r["impls"].get("ktune_tuned", {}), r["impls"].get("ktune_default", {})
            verdict, crit = bar(r, copy_tb_s)
            lines.append(f"| {r['layer']} | {r['t']} | `{tu.get('params', '?')}` "
                         f"({tu.get('match', '?')}) | `{de.get('params', '?')}` "
                         f"({de.get('match', '?')}) | {verdict}: {crit} |")
    return "\n".join(lines) + "\n"


def summary(rows, copy_tb_s, failures):
    out = ["==== summary: ms per call (graph = CUDA-graph replay, plain = eager); ratios of graph "
           "times; bar on ktune tuned's graph time",
           f"{'layer':9} {'T':>5} {'tuned':>7} {'default':>7} {'grouped':>7} {'grouped':>7} "
           f"{'naive':>7} {'def/tu':>6} {'grp/tu':>6}  bar",
           f"{'':9} {'':>5} {'graph':>7} {'graph':>7} {'graph':>7} {'plain':>7} {'plain':>7}"]
    for r in rows:
        def ms(name, mode="graph"):
            return r["impls"].get(name, {}).get(mode, {}).get("us", float("nan")) / 1e3
        tu, de, gr = ms("ktune_tuned"), ms("ktune_default"), ms("torch_grouped_mm")
        verdict, crit = bar(r, copy_tb_s)
        out.append(f"{r['layer']:9} {r['t']:>5} {fmt(tu, '7.3f'):>7} {fmt(de, '7.3f'):>7} "
                   f"{fmt(gr, '7.3f'):>7} {fmt(ms('torch_grouped_mm', 'plain'), '7.3f'):>7} "
                   f"{fmt(ms('torch_naive', 'plain'), '7.3f'):>7} {fmt(de / tu, '6.2f'):>6} "
                   f"{fmt(gr / tu, '6.2f'):>6}  {verdict} ({crit})")
    out.append(f"correctness: {'ALL OK' if not failures else str(len(failures)) + ' FAILED'}")
    out += ["  " + f for f in failures[:20]]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="tuned database (ktune sweep --op moe)")
    ap.add_argument("--header", default="",
                    help="ktune.h to check the binding against (default: beside the bundle, "
                    "else runtime/include/ktune/ktune.h)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="output directory ($OUT)")
    ap.add_argument("--layers", default="mixtral,deepseek")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--no-ktune", action="store_true", help="torch baselines and ceilings only")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1, help="timing rounds per entry, best kept")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--command", default="", help="the command line to record")
    args = ap.parse_args()
    if not args.out:
        ap.error("--out (or $OUT) is required")
    os.makedirs(args.out, exist_ok=True)
    layers = [s for s in args.layers.split(",") if s]
    tokens = [int(s) for s in args.tokens.split(",") if s]
    for name in layers:
        if name not in LAYERS:
            ap.error(f"unknown layer {name!r} (known: {', '.join(LAYERS)})")

    kt, dbs, kt_note = None, {}, "not run (--no-ktune)"
    if not args.no_ktune:
        if not args.db:
            ap.error("--db (a tuned database) is required unless --no-ktune")
        if not os.path.isfile(args.db):
            # An absent path would be dispatched as an empty database: every "tuned" row the
            # built-in default (stop 70's first bench timed the default twice that way).
            ap.error(f"--db {args.db}: no such file (a database written by ktune sweep)")
        header = args.header or next(
            (p for p in (os.path.join(os.path.dirname(os.path.abspath(args.lib)), "..", "include",
                                      "ktune", "ktune.h"),
                         os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime",
                                      "include", "ktune", "ktune.h")) if os.path.exists(p)), "")
        kt = KtuneMoe(args.lib, header)
        dbs = {"tuned": os.path.abspath(args.db),
               "default": os.path.join(tempfile.mkdtemp(), "empty.db")}
        kt_note = (f"libktune {kt.version} ({args.lib}); tuned: --db {args.db}; default: an empty "
                   f"database, shipped databases off; {kt.header_note}")

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    props = torch.cuda.get_device_properties(0)
    meta = {"device": torch.cuda.get_device_name(), "sms": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None), "torch": torch.__version__,
            "cuda": torch.version.cuda, "date": date, "ktune": kt_note,
            "command": args.command or " ".join(sys.argv), "samples": args.samples,
            "batch": args.batch, "rounds": args.rounds, "route_margin": ROUTE_MARGIN,
            "tolerance": {"atol": ATOL, "rtol": RTOL}}
    print(f"{meta['device']} ({meta['sms']} SMs, L2 {meta['l2_bytes']}), torch {meta['torch']}, "
          f"CUDA {meta['cuda']}, {date}", flush=True)
    meta["copy_start"] = copy_bandwidth(args.samples)
    meta["cublas"] = cublas_rate(args.samples)
    print(f"copy {meta['copy_start']['tb_s']:.3f} TB/s, cuBLAS bf16 8192^3 "
          f"{meta['cublas']['tflops']:.0f} TFLOP/s", flush=True)
    grouped_align, gm_facts = probe_grouped_mm()
    meta["grouped_mm_facts"] = gm_facts
    meta["grouped_mm"] = ("unusable: " + json.dumps(gm_facts) if grouped_align is None else
                          f"int32 end offsets, weights as transposed views; groups "
                          f"{'of any size' if grouped_align == 1 else 'padded to 16 rows'} "
                          f"({json.dumps(gm_facts)})")
    print("torch._grouped_mm:", meta["grouped_mm"], flush=True)

    rows, failures = [], []
    for li, name in enumerate(layers):
        layer = Layer(name, seed=1000 * (args.seed + 1) + li)
        naive_cap = naive_capture_probe(layer)
        meta.setdefault("naive_capture", {})[name] = naive_cap
        print(f"{name}: naive graph capture: {naive_cap}", flush=True)
        for t in tokens:
            row = run_row(layer, t, args, kt, dbs, grouped_align, naive_cap,
                          seed=args.seed * 100003 + 7919 * li + t)
            rows.append(row)
            torch.cuda.empty_cache()
            failures += [f"{name} T={t} {f}" for f in row["failures"]]
            brief = {n: [fmt(row["impls"][n].get(m, {}).get("us", float("nan")) / 1e3, ".3f")
                         for m in ("plain", "graph")] for n in row["impls"]}
            print(f"{name} T={t}: experts {row['experts_touched']}, redrawn {row['redrawn_rows']},"
                  f" ms plain/graph {brief}", flush=True)
            with open(os.path.join(args.out, "moe.partial.json"), "w") as f:
                json.dump({"meta": meta, "rows": rows}, f, indent=1)
        del layer
        torch.cuda.empty_cache()
    meta["copy_end"] = copy_bandwidth(args.samples)
    meta["naive_capture"] = "; ".join(f"{n}: {'captured' if v['ok'] else v['why']}"
                                      for n, v in meta.get("naive_capture", {}).items())
    copy_tb_s = max(meta["copy_start"]["tb_s"], meta["copy_end"]["tb_s"])
    meta["copy_tb_s_used"] = copy_tb_s
    meta["min_weight_bytes"] = min(r["weight_bytes_touched"] for r in rows)
    if meta["l2_bytes"] and meta["min_weight_bytes"] < 2 * meta["l2_bytes"]:
        print(f"WARNING: a row touches only {meta['min_weight_bytes']} bytes of weights, under "
              "twice the L2: its times include L2 reuse across calls", flush=True)
    for r in rows:
        r["floor_us"] = r["weight_bytes_touched"] / (copy_tb_s * 1e12) * 1e6
        r["bar"] = dict(zip(("verdict", "criterion"), bar(r, copy_tb_s)))
        for impl in r["impls"].values():
            for e in impl.values():
                if isinstance(e, dict) and "weight_tb_s" in e:
                    e["weight_pct_of_copy"] = 100.0 * e["weight_tb_s"] / copy_tb_s

    with open(os.path.join(args.out, "moe.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "failures": failures}, f, indent=1)
    partial = os.path.join(args.out, "moe.partial.json")
    if os.path.exists(partial):
        os.remove(partial)
    text = markdown(meta, rows, copy_tb_s)
    with open(os.path.join(args.out, "moe.md"), "w") as f:
        f.write(text)
    print(text)
    print(summary(rows, copy_tb_s, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
