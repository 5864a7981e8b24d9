#!/usr/bin/env python3
"""Decode attention on the GPU (issue 9): `ktune sweep --op flash_decode` (tuned and built-in
default, both timed by the sweep) against torch SDPA's FlashAttention-2, cuDNN and
memory-efficient backends, in one call on the same GPU, with the copy bandwidth measured in the
same process.

For each shape: the sweep runs first (its own process, every valid point, the default among
them; its stdout gives the best and the default median), then this process times SDPA on the
same problem: q [b, hq, nq, d], k/v [b, hkv, nk, d] (bf16 unless --dtype), enable_gqa so that
K/V are not expanded (a backend that refuses GQA is reported as such, never timed on expanded
K/V). CUDA events, 5 warm-up calls, median of >= 30 samples of 10 back-to-back calls; K and V
are rotated over enough copies to exceed 4x the L2 when one copy fits in it.

The rate reported is the bytes of K and V (read once) per second, and its share of the copy
bandwidth (a device-to-device torch copy of 2 GiB, same process): decode reads every K/V byte
once and does ~g FLOP per byte (g = hq / hkv), so bandwidth is the measure.

With --lib (libktune.so), ktune is also timed in this process through `ktune_attention` (the
runtime's entry: lookup, then the same CUDA-event loop as SDPA): "tuned" dispatches from the
sweep's database, "default" from an empty one with the shipped databases off. That is the
like-for-like comparison with SDPA; the sweep's own medians are reported beside it.

Paged (--paged): the issue's batch of 64 sequences, page 16, lengths uniform in 100..8000 (the
longest 8000), bf16, d=128, hq=32, hkv=8, one query row each. The pools hold every sequence's
pages in a shuffled order; K/V bytes are counted for each sequence's own length. Timed through
`ktune_attention` (tuned after `ktune sweep` of the paged problem, and default); the bar is
>= 80 % of the copy bandwidth.

Usage (GPU machine, after scripts/gpu_bundle.sh, carrying .gpu):
  python3 benchmarks/decode_bench.py --ktune .gpu/bin/ktune --lib .gpu/lib/libktune.so \
      --out $OUT [--shapes N,M] [--paged]
"""
import ctypes
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

# b, hq, hkv, nq, nk, d, causal: the two bar shapes first, then shapes off any table.
SHAPES = [
    (16, 32, 8, 1, 4096, 128, False),
    (1, 64, 8, 1, 32768, 128, False),
    (8, 32, 32, 1, 8192, 64, False),
    (8, 16, 4, 1, 8192, 256, False),
    (4, 32, 8, 4, 6000, 128, True),
    (2, 28, 4, 16, 13000, 128, True),
    (32, 32, 8, 1, 2000, 128, False),
    # d=80 (Phi-2's heads, multi-head): runs in d=96's tiles (2026-12-04)
    (16, 32, 32, 1, 4096, 80, False),
    (4, 32, 32, 4, 8000, 80, True),
    # the same multi-head decode at d=96 and d=128, tiles of their own
    (16, 32, 32, 1, 4096, 96, False),
    (16, 32, 32, 1, 4096, 128, False),
    # GQA at d=96 and d=72 (d=96's tiles: kv_split, 2026-12-04)
    (8, 32, 8, 1, 8192, 96, False),
    (8, 32, 8, 1, 8192, 72, False),
]
BACKENDS = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}


class AttentionArgs(ctypes.Structure):
    """ktune_attention_args of runtime/include/ktune/ktune.h, field for field."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("b", ctypes.c_int64), ("hq", ctypes.c_int64), ("hkv", ctypes.c_int64),
        ("nq", ctypes.c_int64), ("nk", ctypes.c_int64), ("d", ctypes.c_int64),
        ("strides", ctypes.c_void_p), ("causal", ctypes.c_int), ("scale", ctypes.c_float),
        ("window", ctypes.c_int64), ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p),
        ("page_size", ctypes.c_int64), ("block_table", ctypes.c_void_p),
        ("seq_lens", ctypes.c_void_p), ("dtype", ctypes.c_int), ("impl", ctypes.c_int),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
    ]


class Ktune:
    """The few C API calls this bench needs."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.ktune_last_error.restype = ctypes.c_char_p
        self.lib.ktune_configure.argtypes = [ctypes.c_char_p, ctypes.c_int]
        # The _sized init writes sizeof(AttentionArgs) bytes only: the plain one writes the
        # library's sizeof, past AttentionArgs when the library's struct has grown.
        self.lib.ktune_attention_args_init_sized.argtypes = [ctypes.POINTER(AttentionArgs),
                                                             ctypes.c_size_t]
        self.lib.ktune_attention.argtypes = [ctypes.POINTER(AttentionArgs), ctypes.c_void_p]

    def check(self, status):
        if status != 0:
            raise RuntimeError(f"ktune error {status}: {self.lib.ktune_last_error().decode()}")

    def configure(self, db, shipped):
        self.check(self.lib.ktune_configure(db.encode() if db else None, 1 if shipped else 0))

    def args(self, **fields):
        a = AttentionArgs()
        self.check(self.lib.ktune_attention_args_init_sized(ctypes.byref(a), ctypes.sizeof(a)))
        for k, v in fields.items():
            setattr(a, k, v)
        return a

    def attention(self, a):
        self.check(self.lib.ktune_attention(ctypes.byref(a),
                                            torch.cuda.current_stream().cuda_stream))


def ktune_time(kt, s, dtype, db, empty_db):
    """ktune_attention on problem s, tuned (db) and default (empty db, no shipped), same loop as
    SDPA; the output checked against SDPA's math backend in float32."""
    b, hq, hkv, nq, nk, d, causal = s
    one = kv_bytes(s)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = 1 if one > 4 * l2 else -(-4 * l2 // one)
    q = torch.randn(b, hq, nq, d, dtype=dtype, device="cuda")
    ks = [torch.randn(b, hkv, nk, d, dtype=dtype, device="cuda") for _ in range(copies)]
    vs = [torch.randn(b, hkv, nk, d, dtype=dtype, device="cuda") for _ in range(copies)]
    o = torch.empty_like(q)
    code = 2 if dtype == torch.bfloat16 else 1
    calls = [kt.args(q=q.data_ptr(), k=ks[i].data_ptr(), v=vs[i].data_ptr(), o=o.data_ptr(),
                     b=b, hq=hq, hkv=hkv, nq=nq, nk=nk, d=d, causal=int(causal), dtype=code)
             for i in range(copies)]
    kf = ks[0].float().repeat_interleave(hq // hkv, dim=1)
    vf = vs[0].float().repeat_interleave(hq // hkv, dim=1)
    sc = q.float() @ kf.transpose(-1, -2) / d ** 0.5
    if causal:
        r = torch.arange(nq, device="cuda")[:, None] + (nk - nq)
        sc = sc.masked_fill(torch.arange(nk, device="cuda")[None, :] > r, float("-inf"))
    want = torch.softmax(sc, -1) @ vf
    del kf, vf, sc
    out = {}
    for name, path in (("tuned", db), ("default", empty_db)):
        kt.configure(path, False)
        o.fill_(float("nan"))
        kt.attention(calls[0])
        torch.cuda.synchronize()
        err = (o.float() - want).abs().max().item()
        out[name] = {"us": median_us(lambda i: kt.attention(calls[i % copies])), "max_err": err}
    return out


def paged_bar(kt, k_path, db, empty_db, log, copy):
    """64 sequences, page 16, lengths 100..8000: ktune_attention tuned and default."""
    b, hq, hkv, d, page, nk = 64, 32, 8, 128, 16, 8000
    g = torch.Generator(device="cpu").manual_seed(0)
    lens = torch.randint(100, nk + 1, (b,), generator=g, dtype=torch.int32)
    lens[0] = nk
    cols = -(-nk // page)
    pages = b * cols
    perm = torch.randperm(pages, generator=g, dtype=torch.int32)
    table = perm.view(b, cols).cuda()
    k_pool = torch.randn(pages, page, hkv, d, dtype=torch.bfloat16, device="cuda")
    v_pool = torch.randn(pages, page, hkv, d, dtype=torch.bfloat16, device="cuda")
    q = torch.randn(b, hq, 1, d, dtype=torch.bfloat16, device="cuda")
    o = torch.empty_like(q)
    seq_lens = lens.cuda()
    shape = f"b={b},hq={hq},hkv={hkv},nq=1,nk={nk},d={d},causal=no,page={page}"
    sweep = ktune_sweep_shape(k_path, shape, "bf16", db, log)
    a = kt.args(q=q.data_ptr(), k=k_pool.data_ptr(), v=v_pool.data_ptr(), o=o.data_ptr(), b=b,
                hq=hq, hkv=hkv, nq=1, nk=nk, d=d, page_size=page, block_table=table.data_ptr(),
                seq_lens=seq_lens.data_ptr(), dtype=2)
    # Reference: each sequence gathered from the pools, float32.
    kt.configure(db, False)
    kt.attention(a)
    torch.cuda.synchronize()
    err = 0.0
    for s in range(0, b, 9):  # a sample of the sequences
        n = int(lens[s])
        ids = table[s, : -(-n // page)].long()
        kk = k_pool[ids].reshape(-1, hkv, d)[:n].float().permute(1, 0, 2)
        vv = v_pool[ids].reshape(-1, hkv, d)[:n].float().permute(1, 0, 2)
        kk = kk.repeat_interleave(hq // hkv, dim=0)
        vv = vv.repeat_interleave(hq // hkv, dim=0)
        sc = q[s].float() @ kk.transpose(-1, -2) / d ** 0.5
        want = torch.softmax(sc, -1) @ vv
        err = max(err, (o[s].float() - want).abs().max().item())
    kv_mb = float(lens.sum()) * hkv * d * 2 * 2 / 1e6
    res = {"shape": shape, "kv_mb": kv_mb, "sweep": sweep, "max_err_tuned": err}
    for name, path in (("tuned", db), ("default", empty_db)):
        kt.configure(path, False)
        us = median_us(lambda i: kt.attention(a))
        res[name] = {"us": us, "tbps": kv_mb / us, "pct_copy": 100 * kv_mb / us / copy}
    return res


def shape_str(s):
    b, hq, hkv, nq, nk, d, causal = s
    return f"b={b},hq={hq},hkv={hkv},nq={nq},nk={nk},d={d},causal={'yes' if causal else 'no'}"


def kv_bytes(s, elem=2):
    b, hq, hkv, nq, nk, d, _ = s
    return 2 * b * hkv * nk * d * elem


def median_us(fn, samples=30, batch=10):
    for _ in range(5):
        fn(0)
    times = []
    i = 0
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn(i)
            i += 1
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / batch)
    return statistics.median(times)


def copy_tbps():
    n = 1 << 30  # elements of 2 bytes: 2 GiB
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    us = median_us(lambda i: dst.copy_(src), samples=20, batch=3)
    del src, dst
    return 2 * 2 * n / us / 1e6


def sdpa_time(s, backend, dtype):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, hq, hkv, nq, nk, d, causal = s
    one = kv_bytes(s)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = 1 if one > 4 * l2 else -(-4 * l2 // one)
    q = torch.randn(b, hq, nq, d, dtype=dtype, device="cuda")
    ks = [torch.randn(b, hkv, nk, d, dtype=dtype, device="cuda") for _ in range(copies)]
    vs = [torch.randn(b, hkv, nk, d, dtype=dtype, device="cuda") for _ in range(copies)]
    # SDPA's is_causal is top-left aligned; decode needs bottom-right: an explicit mask would
    # cost bytes, so causal rows use the causal_lower_right bias where the backend takes it.
    mask = None
    if causal:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(nq, nk)
    try:
        with sdpa_kernel(getattr(SDPBackend, BACKENDS[backend])):
            def run(i):
                return F.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies],
                                                      attn_mask=mask, enable_gqa=True)
            ref = run(0)
            torch.cuda.synchronize()
            # Correctness against a float32 computation on the same inputs.
            kf = ks[0].float().repeat_interleave(hq // hkv, dim=1)
            vf = vs[0].float().repeat_interleave(hq // hkv, dim=1)
            sc = q.float() @ kf.transpose(-1, -2) / d ** 0.5
            if causal:
                r = torch.arange(nq, device="cuda")[:, None] + (nk - nq)
                sc = sc.masked_fill(torch.arange(nk, device="cuda")[None, :] > r, float("-inf"))
            want = torch.softmax(sc, -1) @ vf
            err = (ref.float() - want).abs().max().item()
            del kf, vf, sc, want
            us = median_us(run)
            return {"us": us, "max_err": err}
    except Exception as e:  # a backend that does not take this problem
        return {"error": str(e).splitlines()[0][:160]}


def ktune_sweep(k, s, dtype, db, log):
    return ktune_sweep_shape(k, shape_str(s), dtype, db, log)


def ktune_sweep_shape(k, shape, dtype, db, log):
    cmd = [k, "sweep", "--op", "flash_decode", "--shape", shape, "--dtype", dtype, "--db", db]
    t0 = datetime.datetime.now()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = (datetime.datetime.now() - t0).total_seconds()
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr + "\n")
    out = {"rc": p.returncode, "wall_s": round(wall, 1)}
    m = re.search(r"best:\s+(\S+)\s+([\d.]+) us", p.stdout)
    if m:
        out.update(best_params=m.group(1), best_us=float(m.group(2)))
    m = re.search(r"default:\s+(\S+)\s+([\d.]+) us", p.stdout)
    if m:
        out.update(default_params=m.group(1), default_us=float(m.group(2)))
    m = re.search(r"this run: (.*)", p.stdout)
    if m:
        out["trials"] = m.group(1).strip()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ktune", required=True, help="the ktune executable (sweeps)")
    ap.add_argument("--lib", default="", help="libktune.so: also time ktune_attention here")
    ap.add_argument("--out", default=".")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--shapes", default="", help="comma-separated indices into SHAPES")
    ap.add_argument("--paged", action="store_true", help="the paged bar (needs --lib)")
    ap.add_argument("--command", default=" ".join(sys.argv))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tdt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    idx = [int(x) for x in a.shapes.split(",")] if a.shapes else range(len(SHAPES))
    db = os.path.join(a.out, "decode.db")
    empty_db = os.path.join(a.out, "empty.db")
    log = os.path.join(a.out, "decode_sweeps.log")
    kt = Ktune(a.lib) if a.lib else None
    copy = copy_tbps()
    rows = []
    for i in idx:
        s = SHAPES[i]
        row = {"shape": shape_str(s), "kv_mb": kv_bytes(s) / 1e6}
        row["ktune"] = ktune_sweep(a.ktune, s, a.dtype, db, log)
        if kt:
            row["ktune_runtime"] = ktune_time(kt, s, tdt, db, empty_db)
        for name in BACKENDS:
            row[name] = sdpa_time(s, name, tdt)
        rows.append(row)
        print(json.dumps(row), flush=True)
    paged = paged_bar(kt, a.ktune, db, empty_db, log, copy) if a.paged and kt else None
    if paged:
        print(json.dumps(paged), flush=True)
    dev = torch.cuda.get_device_name(0)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Decode attention: ktune flash_decode vs torch SDPA ({a.dtype})", "",
             f"- device: {dev}; {when}; torch {torch.__version__}",
             f"- command: `{a.command}`",
             f"- copy bandwidth, same process: {copy:.2f} TB/s", "",
             "TB/s = K+V bytes / time (% of copy). \"sweep\": the medians of `ktune sweep` (every "
             "valid point, default included); \"runtime\": ktune_attention in this process, timed "
             "like SDPA (tuned: the sweep's database; default: an empty one).", ""]
    runtime = kt is not None
    head = ["shape", "K+V MB", "sweep tuned us (TB/s, %)", "sweep default us"]
    if runtime:
        head += ["runtime tuned", "runtime default"]
    head += list(BACKENDS) + ["tuned / best SDPA"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def rate(us, mb):
        return f"{us:.1f} ({mb / us:.2f}, {100 * mb / us / copy:.0f}%)"

    for r in rows:
        k, mb = r["ktune"], r["kv_mb"]
        cells = [r["shape"], f"{mb:.0f}",
                 rate(k["best_us"], mb) if "best_us" in k else f"rc={k['rc']}",
                 f"{k['default_us']:.1f}" if "default_us" in k else "-"]
        tuned = k.get("best_us")
        if runtime:
            rt = r["ktune_runtime"]
            cells += [rate(rt["tuned"]["us"], mb), rate(rt["default"]["us"], mb)]
            tuned = rt["tuned"]["us"]
        best_sdpa = None
        for name in BACKENDS:
            x = r[name]
            if "us" in x:
                cells.append(rate(x["us"], mb))
                best_sdpa = x["us"] if best_sdpa is None else min(best_sdpa, x["us"])
            else:
                cells.append("n/a")
        cells.append(f"{best_sdpa / tuned:.2f}x" if best_sdpa and tuned else "-")
        lines.append("| " + " | ".join(cells) + " |")
    if paged:
        lines += ["", f"Paged bar: `{paged['shape']}`, lengths 100..8000, "
                  f"{paged['kv_mb']:.0f} MB of K/V read: tuned {rate(paged['tuned']['us'], paged['kv_mb'])}"
                  f", default {rate(paged['default']['us'], paged['kv_mb'])}; bar >= 80 % of copy; "
                  f"max |error| on a sample of sequences {paged['max_err_tuned']:.1e}."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "decode.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "decode.json"), "w") as f:
        json.dump({"device": dev, "date": when, "copy_tbps": copy, "rows": rows, "paged": paged},
                  f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
