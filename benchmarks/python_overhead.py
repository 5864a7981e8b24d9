#!/usr/bin/env python3
"""Per-call host overhead of the Python package (issue 10) against torch's own ops and the C API
called directly, on problems small enough that launching costs more than running: wall time of
N back-to-back calls after warm-up, divided by N, the median of several repetitions; the GPU's
own time per call (CUDA events around the same loop) is printed beside it, so that a row where
the GPU, not the host, sets the pace shows itself.

Rows: ktune.add_rmsnorm (eager), ktune.torch.add_rmsnorm (the torch operator), the C API's
ktune_add_rmsnorm through ctypes with outputs preallocated (the floor the package adds to), and
torch.nn.functional.rms_norm (bar: the package's eager call <= 1.5x of it) and x + r followed by
rms_norm (what add_rmsnorm replaces), on 1 x 4096 and 8 x 4096 bf16; and with the first,
ktune.flash_attention, its operator, ktune_attention through ctypes (arguments filled once) and
torch's scaled_dot_product_attention on a small decode problem.

Usage (GPU machine): python3 benchmarks/python_overhead.py [--out DIR] (ktune importable)
"""
import argparse
import ctypes
import datetime
import os
import statistics
import time

import torch

import ktune
import ktune.torch as kt
import report  # beside this file


ATTENTION = "b=1,hq=8,hkv=2,nq=1,nk=256,d=128 bf16"


def per_call_us(cases, calls=2000, reps=7):
    """{name: (host us, GPU us)} per call; the repetitions go round the cases, so that a change
    of the CPU's clock during the run touches every case alike."""
    for fn in cases.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    host = {name: [] for name in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            host[name].append((time.perf_counter() - t0) / calls * 1e6)
    out = {}
    for name, fn in cases.items():
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out[name] = (statistics.median(host[name]), a.elapsed_time(b) * 1000.0 / calls)
    return out


class AttentionArgs(ctypes.Structure):
    """ktune_attention_args (ktune/ktune.h), as a ctypes caller declares it."""
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (n, ctypes.c_void_p) for n in ("q", "k", "v", "o", "lse")] + [
        (n, ctypes.c_int64) for n in ("b", "hq", "hkv", "nq", "nk", "d")] + [
        ("strides", ctypes.c_void_p), ("causal", ctypes.c_int), ("scale", ctypes.c_float),
        ("window", ctypes.c_int64), ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p),
        ("page_size", ctypes.c_int64), ("block_table", ctypes.c_void_p),
        ("seq_lens", ctypes.c_void_p), ("dtype", ctypes.c_int), ("impl", ctypes.c_int),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p)]


def c_api():
    """(ktune_add_rmsnorm, ktune_attention, ktune_attention_args_init_sized) through ctypes."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(ktune.__file__), "lib", "libktune.so"))
    f = lib.ktune_add_rmsnorm
    f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                          ctypes.c_float, ctypes.c_void_p]
    f.restype = ctypes.c_int
    att = lib.ktune_attention
    att.argtypes = [ctypes.POINTER(AttentionArgs), ctypes.c_void_p]
    att.restype = ctypes.c_int
    init = lib.ktune_attention_args_init_sized
    init.argtypes = [ctypes.POINTER(AttentionArgs), ctypes.c_size_t]
    init.restype = ctypes.c_int
    return f, att, init


def attention_args(init, q, k, v, o):
    """The arguments of one batched call, filled once: a C caller's loop only launches."""
    a = AttentionArgs()
    assert init(ctypes.byref(a), ctypes.sizeof(a)) == 0
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    a.b, a.hq, a.nq, a.d = q.shape
    a.hkv, a.nk = k.shape[1], k.shape[2]
    return a


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    f, att, init = c_api()
    rows = []
    for m in (1, 8):
        n = 4096
        x = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
        r = torch.randn_like(x)
        w = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        y, h = torch.empty_like(x), torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        cases = {
            "ktune.add_rmsnorm (eager, allocates y and h)": lambda: ktune.add_rmsnorm(x, r, w),
            "ktune.add_rmsnorm (out= given)":
                lambda: ktune.add_rmsnorm(x, r, w, out=y, residual_out=h),
            "ktune.torch.add_rmsnorm (custom op)": lambda: kt.add_rmsnorm(x, r, w, 1e-6),
            "C API ktune_add_rmsnorm via ctypes (outputs given)":
                lambda: f(x.data_ptr(), r.data_ptr(), w.data_ptr(), y.data_ptr(), h.data_ptr(),
                          m, n, 2, 1e-6, stream),
            "torch.nn.functional.rms_norm":
                lambda: torch.nn.functional.rms_norm(x, (n,), w, 1e-6),
            "x + r, then torch.nn.functional.rms_norm":
                lambda: torch.nn.functional.rms_norm(x + r, (n,), w, 1e-6),
        }
        if m == 1:
            # Attention on a small decode problem: b=1, 8 query heads over 2 KV heads, 256 keys.
            q = torch.randn(1, 8, 1, 128, dtype=torch.bfloat16, device="cuda")
            k = torch.randn(1, 2, 256, 128, dtype=torch.bfloat16, device="cuda")
            v = torch.randn_like(k)
            sdpa = torch.nn.functional.scaled_dot_product_attention
            o = torch.empty_like(q)
            a = attention_args(init, q, k, v, o)
            cases.update({
                "C API ktune_attention via ctypes (args and output given)":
                    lambda: att(ctypes.byref(a), stream),
                "ktune.flash_attention (eager)":
                    lambda: ktune.flash_attention(q, k, v),
                "ktune.torch.flash_attention (operator)": lambda: kt.flash_attention(q, k, v),
                "torch sdpa (enable_gqa, same problem)": lambda: sdpa(q, k, v, enable_gqa=True),
            })
        for name, (host, gpu) in per_call_us(cases).items():
            attention = "attention" in name or "sdpa" in name
            rows.append({"problem": ATTENTION if attention else f"{m}x{n} bf16", "case": name,
                         "host_us": host, "gpu_us": gpu})
            print(f"{m}x{n} {name}: {host:.2f} us per call (GPU {gpu:.2f})", flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Python host overhead per call ({torch.cuda.get_device_name(0)}, {stamp})", "",
             f"command: `python3 benchmarks/python_overhead.py`; torch {torch.__version__}, "
             f"ktune {ktune.__version__}. Host: wall time of 2000 back-to-back calls / 2000 "
             "(median of 7 repetitions, taken round the cases); GPU: CUDA events around one "
             "more such loop.", "",
             "| problem | call | host us per call | GPU us per call | / torch's op |",
             "|---|---|---|---|---|"]
    for row in rows:
        torch_op = ("torch sdpa (enable_gqa, same problem)" if row["problem"] == ATTENTION
                    else "torch.nn.functional.rms_norm")
        base = next(r["host_us"] for r in rows if r["problem"] == row["problem"]
                    and r["case"] == torch_op)
        lines.append(f"| {row['problem']} | {row['case']} | {row['host_us']:.2f} | "
                     f"{row['gpu_us']:.2f} | {row['host_us'] / base:.2f}x |")
    report.write(args.out, "python_overhead", lines, rows)


if __name__ == "__main__":
    main()
