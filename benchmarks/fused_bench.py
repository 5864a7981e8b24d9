#!/usr/bin/env python3
"""Fused-op benchmark on the GPU: ktune tuned vs ktune default vs PyTorch eager vs torch.compile,
all timed in one process on the same GPU.

ktune is called through its C API (ctypes on libktune.so). "tuned" dispatches from the database
given with --db (filled by `ktune sweep`); "default" dispatches from an empty database, i.e. the
built-in default configuration. Times are CUDA-event medians after warm-up; for problems that fit
in L2 a 256 MiB buffer is overwritten before every repetition (outside the timed region).

Usage: python3 benchmarks/fused_bench.py --lib .gpu/lib/libktune.so --db bench.db [--out results.md]
"""
import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.nn.functional as F

OPS = ["add_rmsnorm", "layernorm", "bias_act", "swiglu", "softmax"]
SHAPES = [(16384, 1024), (16384, 4096), (16384, 8192), (1, 4096), (16, 4096), (64, 4096)]
BF16 = 2  # ktune_dtype


def load(lib_path):
    lib = ctypes.CDLL(lib_path)
    P, I64, F32, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    lib.ktune_add_rmsnorm.argtypes = [P, P, P, P, P, I64, I64, I, F32, P]
    lib.ktune_layernorm.argtypes = [P, P, P, P, P, P, I64, I64, I, F32, P]
    lib.ktune_bias_act.argtypes = [P, P, P, I64, I64, I, I, P]
    lib.ktune_swiglu.argtypes = [P, P, I64, I64, I, P]
    lib.ktune_softmax.argtypes = [P, P, I64, I64, F32, I, P]
    lib.ktune_configure.argtypes = [ctypes.c_char_p, I]
    lib.ktune_query.argtypes = [ctypes.c_char_p, ctypes.c_char_p, I, ctypes.POINTER(I), ctypes.c_char_p, ctypes.c_size_t]
    lib.ktune_last_error.restype = ctypes.c_char_p
    return lib


def check(lib, status):
    if status != 0:
        raise RuntimeError(f"ktune error {status}: {lib.ktune_last_error().decode()}")


def make_case(op, m, n):
    """Inputs, outputs, byte count, ktune call, torch function."""
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(1234)

    def rnd(*shape):
        return (torch.rand(*shape, generator=g, device=dev, dtype=torch.float32) * 4 - 2).to(dt)

    s = torch.cuda.current_stream().cuda_stream
    if op == "add_rmsnorm":
        x, r, w = rnd(m, n), rnd(m, n), rnd(n)
        y, h = torch.empty_like(x), torch.empty_like(x)
        nbytes = 4 * m * n * 2 + n * 2

        def kt(lib):
            check(lib, lib.ktune_add_rmsnorm(x.data_ptr(), r.data_ptr(), w.data_ptr(), y.data_ptr(), h.data_ptr(), m, n, BF16, 1e-6, s))

        def tf(x=x, r=r, w=w):
            hh = x + r
            return F.rms_norm(hh, (n,), w, 1e-6), hh
    elif op == "layernorm":
        x, w, b = rnd(m, n), rnd(n), rnd(n)
        y = torch.empty_like(x)
        nbytes = 2 * m * n * 2 + 2 * n * 2

        def kt(lib):
            check(lib, lib.ktune_layernorm(x.data_ptr(), None, w.data_ptr(), b.data_ptr(), y.data_ptr(), None, m, n, BF16, 1e-5, s))

        def tf(x=x, w=w, b=b):
            return F.layer_norm(x, (n,), w, b, 1e-5)
    elif op == "bias_act":
        x, b = rnd(m, n), rnd(n)
        y = torch.empty_like(x)
        nbytes = 2 * m * n * 2 + n * 2

        def kt(lib):
            check(lib, lib.ktune_bias_act(x.data_ptr(), b.data_ptr(), y.data_ptr(), m, n, 0, BF16, s))

        def tf(x=x, b=b):
            return F.gelu(x + b, approximate="tanh")
    elif op == "swiglu":
        x = rnd(m, 2 * n)
        y = torch.empty(m, n, device=dev, dtype=dt)
        nbytes = 3 * m * n * 2

        def kt(lib):
            check(lib, lib.ktune_swiglu(x.data_ptr(), y.data_ptr(), m, n, BF16, s))

        def tf(x=x):
            a, bb = x.chunk(2, dim=-1)
            return F.silu(a) * bb
    elif op == "softmax":
        x = rnd(m, n)
        y = torch.empty_like(x)
        nbytes = 2 * m * n * 2

        def kt(lib):
            check(lib, lib.ktune_softmax(x.data_ptr(), y.data_ptr(), m, n, 1.0, BF16, s))

        def tf(x=x):
            return torch.softmax(x, dim=-1)
    else:
        raise ValueError(op)
    return kt, tf, nbytes, (y, tf)


def time_fn(fn, flush, reps=100, min_ms=200.0):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    total = 0.0
    while len(times) < reps or total < min_ms:
        if flush is not None:
            flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b)
        times.append(t)
        total += t
        if len(times) >= 5000:
            break
    return statistics.median(times) * 1e3  # us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()

    lib = load(args.lib)
    empty_db = os.path.join(tempfile.mkdtemp(), "empty.db")
    name = torch.cuda.get_device_name()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    # Copy bandwidth, same run: bytes read + written.
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = time_fn(lambda: dst.copy_(src), None, reps=30, min_ms=50)
    copy_tbs = 2 * src.numel() / (copy_us * 1e-6) / 1e12
    del src, dst

    rows = []
    for op in args.ops.split(","):
        for m, n in SHAPES:
            kt, tf, nbytes, (y, _) = make_case(op, m, n)
            flush = flush_buf if nbytes < 4 * l2 else None
            res = {"op": op, "m": m, "n": n, "bytes": nbytes}
            match = ctypes.c_int(-1)
            pbuf = ctypes.create_string_buffer(256)
            shape = f"m={m},n={n}" + (",act=gelu_tanh" if op == "bias_act" else "")
            for label, db in (("tuned", args.db), ("default", empty_db)):
                check(lib, lib.ktune_configure(db.encode(), 0))
                check(lib, lib.ktune_query(op.encode(), shape.encode(), BF16, ctypes.byref(match), pbuf, 256))
                res[label + "_params"] = pbuf.value.decode()
                res[label + "_match"] = ["exact", "nearest_shape", "other_device", "default"][match.value]
                res[label] = time_fn(lambda: kt(lib), flush)
            # Correctness spot check of the tuned kernel against torch (bf16 tolerance).
            check(lib, lib.ktune_configure(args.db.encode(), 0))
            kt(lib)
            torch.cuda.synchronize()
            ref = tf()
            ref0 = ref[0] if isinstance(ref, tuple) else ref
            err = ((y.float() - ref0.float()).norm() / ref0.float().norm()).item()
            res["rel_err_vs_torch"] = err
            res["eager"] = time_fn(tf, flush)
            if not args.no_compile:
                cf = torch.compile(tf)
                res["compile"] = time_fn(cf, flush)
            rows.append(res)
            print(json.dumps(res), flush=True)

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Fused ops, bf16: ktune tuned vs default vs PyTorch",
        "",
        f"- device: {name}, torch {torch.__version__}, date {date}",
        f"- command: `python3 benchmarks/fused_bench.py --lib {args.lib} --db {args.db}` "
        f"(after `ktune sweep` of every row into that database; see benchmarks/run_fused.sh)",
        f"- device-to-device copy measured in this run: {copy_tbs:.2f} TB/s (read + write)",
        "- effective TB/s = bytes that must move (inputs read once, outputs written once) / median time;"
        " CUDA events, warm-up, >= 100 reps and >= 200 ms, L2 flushed between reps when the data fits in L2",
        "",
        "| op | M | N | tuned us | TB/s | % copy | default us | eager us | compile us | tuned/default | tuned vs eager | tuned vs compile | tuned params |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tbs = r["bytes"] / (r["tuned"] * 1e-6) / 1e12
        comp = r.get("compile", float("nan"))
        lines.append(
            f"| {r['op']} | {r['m']} | {r['n']} | {r['tuned']:.2f} | {tbs:.2f} | {100 * tbs / copy_tbs:.0f}% | "
            f"{r['default']:.2f} | {r['eager']:.2f} | {comp:.2f} | {r['default'] / r['tuned']:.2f}x | "
            f"{r['eager'] / r['tuned']:.2f}x | {comp / r['tuned']:.2f}x | `{r['tuned_params']}` ({r['tuned_match']}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump({"device": name, "date": date, "copy_tb_per_s": copy_tbs, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
