#!/usr/bin/env python3
"""Flash attention forward on the GPU: ktune tuned vs ktune default vs torch
scaled_dot_product_attention with the FlashAttention-2 backend and with the cuDNN backend, all in
one process on the same GPU, on the attention table of ../shared/ANCHORS.md (bf16, [B, H, N, D]).

ktune is called through its C API (ctypes on libktune.so). "tuned" dispatches from the database
given with --db (filled by `ktune sweep` of every row, see benchmarks/run_attention.sh);
"default" from an empty database, i.e. the built-in default configuration. Shipped databases are
off for both. Times are CUDA-event medians: a sleep kernel fills the queue first, then 10
back-to-back calls are timed together (launch overhead hidden, as in a real model), 20+ such
samples after warm-up; each contender is measured in two interleaved rounds and keeps its better
median. TFLOP/s = 4 * B * H * N^2 * D / t, halved for causal (the ANCHORS convention).

Also: peak device memory at N = 32768 (B=1, H=16, D=128) against the N x N fp32 score matrix a
naive attention would materialise.

Usage: python3 benchmarks/attention_bench.py --lib .gpu/lib/libktune.so --db attention.db
           [--out benchmarks/results/attention.md] [--shapes "B,HQ,HKV,N,D,causal;..."]
--shapes replaces the table with other shapes, grouped-query ones included (HKV < HQ): torch gets
K and V expanded to HQ heads before timing (the same FLOPs; its backends then need no GQA
support), ktune reads the HKV heads.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ROWS = [  # B, H, N, D, causal
    (16, 16, 512, 64, False), (8, 16, 1024, 64, False), (4, 16, 2048, 64, False),
    (2, 16, 4096, 64, False), (1, 16, 8192, 64, False), (2, 16, 4096, 64, True),
    (1, 16, 8192, 64, True), (16, 16, 512, 128, False), (8, 16, 1024, 128, False),
    (2, 16, 4096, 128, False), (1, 16, 8192, 128, False), (1, 16, 16384, 128, False),
    (2, 16, 4096, 128, True), (1, 16, 8192, 128, True), (1, 16, 16384, 128, True),
]
BF16 = 2  # ktune_dtype
SHIPPED = "shipped"  # --db value: the databases shipped with ktune (db/shipped/ in a build tree)
MATCH = ["exact", "nearest_shape", "other_device", "default"]
BACKENDS = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def load(lib_path):
    lib = ctypes.CDLL(lib_path)
    P, I64, F32, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    lib.ktune_flash_attention.argtypes = [P, P, P, P, P, I64, I64, I64, I64, I64, I64, P, I, F32,
                                          I, P]
    lib.ktune_configure.argtypes = [ctypes.c_char_p, I]
    lib.ktune_query.argtypes = [ctypes.c_char_p, ctypes.c_char_p, I, ctypes.POINTER(I),
                                ctypes.c_char_p, ctypes.c_size_t]
    lib.ktune_last_error.restype = ctypes.c_char_p
    return lib


def check(lib, status):
    if status != 0:
        raise RuntimeError(f"ktune error {status}: {lib.ktune_last_error().decode()}")


def shape_key(b, h, n, d, causal, hkv=None):
    return (f"b={b},hq={h},hkv={hkv or h},nq={n},nk={n},d={d},"
            f"causal={'yes' if causal else 'no'}")


def parse_shapes(text):
    """"B,HQ,HKV,N,D,causal;..." (causal: yes/no) as (B, H, N, D, causal, HKV) rows."""
    rows = []
    for item in filter(None, (t.strip() for t in text.split(";"))):
        b, h, hkv, n, d, causal = item.split(",")
        if causal not in ("yes", "no") or int(h) % int(hkv):
            raise SystemExit(f"--shapes: bad shape {item!r} (B,HQ,HKV,N,D,yes|no; HKV divides HQ)")
        rows.append((int(b), int(h), int(n), int(d), causal == "yes", int(hkv)))
    return rows


def median_us(fn, samples=20, batch=10, min_ms=100.0):
    """Median time of one call: `batch` calls between two events behind a sleep kernel."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times, total = [], 0.0
    while len(times) < samples or total < min_ms:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)  # the GPU waits while the CPU queues the batch
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b)
        times.append(t / batch)
        total += t
        if len(times) >= 200:
            break
    return statistics.median(times) * 1e3


def geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def configure(lib, db):
    """Dispatch from `db` alone; SHIPPED: from the shipped databases under an empty user one."""
    if db == SHIPPED:
        check(lib, lib.ktune_configure(os.path.join(tempfile.mkdtemp(), "user.db").encode(), 1))
    else:
        check(lib, lib.ktune_configure(db.encode(), 0))


def query(lib, key):
    match, params = ctypes.c_int(-1), ctypes.create_string_buffer(256)
    check(lib, lib.ktune_query(b"flash_attention", key.encode(), BF16, ctypes.byref(match), params,
                               256))
    return params.value.decode(), MATCH[match.value]


def run_row(lib, args, empty_db, b, h, n, d, causal, hkv=None):
    hkv = hkv or h
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    # torch's backends get K and V with HQ heads (query head i reads key/value head i // group).
    kx, vx = (t.repeat_interleave(h // hkv, dim=1) if hkv != h else t for t in (k, v))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream
    key = shape_key(b, h, n, d, causal, hkv)

    def kt():
        check(lib, lib.ktune_flash_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                             lse.data_ptr(), b, h, hkv, n, n, d, None, int(causal),
                                             0.0, BF16, stream))

    def sdpa():
        return F.scaled_dot_product_attention(q, kx, vx, is_causal=causal)

    res = {"b": b, "h": h, "hkv": hkv, "n": n, "d": d, "causal": causal}
    res["flops"] = 4.0 * b * h * n * n * d / (2 if causal else 1)
    for label, db in (("tuned", args.db), ("default", empty_db)):
        configure(lib, db)
        res[label + "_params"], res[label + "_match"] = query(lib, key)
    # Correctness of the tuned kernel: o against torch's FA2 output, lse of the first (batch,
    # head) against logsumexp of the fp32 scores.
    configure(lib, args.db)
    kt()
    with sdpa_kernel(BACKENDS["fa2"]):
        ref = sdpa()
    scores = q[0, 0].float() @ kx[0, 0].float().T / math.sqrt(d)
    if causal:
        scores.masked_fill_(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1),
                            float("-inf"))
    torch.cuda.synchronize()
    res["rel_err_vs_fa2"] = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
    res["lse_max_err"] = (lse[0, 0] - torch.logsumexp(scores, dim=-1)).abs().max().item()
    del ref, scores

    def time_contender(label):
        if label in ("tuned", "default"):
            configure(lib, args.db if label == "tuned" else empty_db)
            return median_us(kt)
        with sdpa_kernel(BACKENDS[label]):
            return median_us(sdpa)

    best = {}
    for _ in range(args.rounds):
        for label in ("tuned", "default", "fa2", "cudnn"):
            try:
                t = time_contender(label)
            except Exception as e:  # a backend may refuse a shape
                print(f"  {label} failed: {e}", file=sys.stderr)
                t = float("nan")
            prev = best.get(label, float("nan"))
            best[label] = t if not math.isfinite(prev) else min(prev, t) if math.isfinite(t) else prev
    for label, t in best.items():
        res[label + "_us"] = t
        res[label + "_tflops"] = res["flops"] / (t * 1e-6) / 1e12 if math.isfinite(t) else \
            float("nan")
    del q, k, v, kx, vx, o, lse
    torch.cuda.empty_cache()
    return res


def memory_at_32k(lib, args):
    """ktune's device memory at N = 32768 beside the tensors themselves, and what a naive
    attention's N x N fp32 scores would take."""
    b, h, n, d = 1, 16, 32768, 128
    out = {"b": b, "h": h, "n": n, "d": d}
    configure(lib, args.db)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    out["tensor_bytes"] = 4 * b * h * n * d * 2 + b * h * n * 4
    stream = torch.cuda.current_stream().cuda_stream
    for causal in (False, True):
        def kt():
            check(lib, lib.ktune_flash_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                                 o.data_ptr(), lse.data_ptr(), b, h, h, n, n, d,
                                                 None, int(causal), 0.0, BF16, stream))
        key = "causal" if causal else "full"
        torch.cuda.synchronize()
        free0, _ = torch.cuda.mem_get_info()
        kt()  # the first call plans: database lookup, cache load, module load
        torch.cuda.synchronize()
        free1, _ = torch.cuda.mem_get_info()
        kt()
        torch.cuda.synchronize()
        free2, _ = torch.cuda.mem_get_info()
        out[key + "_planning_bytes"] = free0 - free1
        out[key + "_bytes_during_call"] = free1 - free2
        out[key + "_params"], out[key + "_match"] = query(lib, shape_key(b, h, n, d, causal))
        t = median_us(kt, samples=5, batch=1, min_ms=0)
        out[key + "_us"] = t
        out[key + "_tflops"] = 4.0 * b * h * n * n * d / (2 if causal else 1) / (t * 1e-6) / 1e12
        with sdpa_kernel(BACKENDS["fa2"]):
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out[key + "_rel_err_vs_fa2"] = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        del ref
    out["naive_scores_bytes"] = b * h * n * n * 4  # one fp32 N x N matrix per (batch, head)
    out["device_total_bytes"] = torch.cuda.mem_get_info()[1]
    # FA2 through torch, for comparison (torch's own allocator sees its allocations).
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with sdpa_kernel(BACKENDS["fa2"]):
        r = F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    out["fa2_peak_bytes_beyond_inputs"] = torch.cuda.max_memory_allocated() - base
    del r, q, k, v, o, lse
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--db", required=True,
                    help="tuned database (from ktune sweep), or 'shipped' for the shipped ones")
    ap.add_argument("--out", default="")
    ap.add_argument("--rows", default="", help="comma-separated row indices (default: all)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--command", default="", help="the command line to record")
    ap.add_argument("--shapes", default="",
                    help="B,HQ,HKV,N,D,yes|no;... instead of the ANCHORS table (no memory check)")
    args = ap.parse_args()
    if args.db != SHIPPED:
        args.db = os.path.abspath(args.db)

    lib = load(args.lib)
    empty_db = os.path.join(tempfile.mkdtemp(), "empty.db")
    name = torch.cuda.get_device_name()
    torch.manual_seed(0)
    if args.shapes:
        picked = parse_shapes(args.shapes)
    else:
        picked = [ROWS[int(i)] + (None,) for i in args.rows.split(",")] if args.rows else \
            [r + (None,) for r in ROWS]

    rows = []
    for b, h, n, d, causal, hkv in picked:
        res = run_row(lib, args, empty_db, b, h, n, d, causal, hkv)
        rows.append(res)
        print(json.dumps(res), flush=True)
    memory = None if args.shapes else memory_at_32k(lib, args)
    print(json.dumps(memory), flush=True)

    def ratio(r, a, b):
        return r[a + "_tflops"] / r[b + "_tflops"]

    g_fa2 = geomean([ratio(r, "tuned", "fa2") for r in rows])
    g_cudnn = geomean([ratio(r, "tuned", "cudnn") for r in rows])
    g_default = geomean([ratio(r, "tuned", "default") for r in rows])
    bar = []
    for r in rows:
        need = 1.0 if r["d"] == 128 and r["n"] >= 2048 else 0.9
        bar.append(ratio(r, "tuned", "fa2") >= need)

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = args.command or ("python3 benchmarks/attention_bench.py --lib " + args.lib +
                               " --db " + args.db)
    lines = [
        "# Flash attention forward, bf16: ktune tuned vs default vs torch SDPA (FA2, cuDNN)",
        "",
        f"- device: {name}, torch {torch.__version__}, date {date}",
        f"- command: `{command}` (after `ktune sweep` of every row into that database: "
        "benchmarks/run_attention.sh)",
        "- TFLOP/s = 4·B·H·N²·D / t, halved for causal; CUDA events, sleep-kernel-filled queue,"
        " 10 calls per sample, median of >= 20 samples, best of "
        f"{args.rounds} interleaved rounds per contender, all in one process",
        "- fa2 = `sdpa_kernel(SDPBackend.FLASH_ATTENTION)`, cudnn = `sdpa_kernel(SDPBackend."
        "CUDNN_ATTENTION)`; tuned = ktune from the swept database, default = ktune with an empty"
        " database (built-in default configuration)",
        "- bar: tuned >= 1.0x fa2 at D=128, N >= 2048; >= 0.9x elsewhere",
        "",
        "| B | H (kv) | N | D | causal | tuned | default | fa2 | cudnn | tuned/fa2 | tuned/cudnn |"
        " tuned/default | bar | rel. err vs fa2 | tuned config (match) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, ok in zip(rows, bar):
        lines.append(
            f"| {r['b']} | {r['h']}{'' if r['hkv'] == r['h'] else ' (' + str(r['hkv']) + ')'} | "
            f"{r['n']} | {r['d']} | {'yes' if r['causal'] else 'no'} | "
            f"{r['tuned_tflops']:.0f} | {r['default_tflops']:.0f} | {r['fa2_tflops']:.0f} | "
            f"{r['cudnn_tflops']:.0f} | {ratio(r, 'tuned', 'fa2'):.2f} | "
            f"{ratio(r, 'tuned', 'cudnn'):.2f} | {ratio(r, 'tuned', 'default'):.2f} | "
            f"{'ok' if ok else 'MISSED'} | {r['rel_err_vs_fa2']:.1e} | "
            f"`{r['tuned_params']}` ({r['tuned_match']}) |")
    lines += [
        "",
        f"Geometric means over the {len(rows)} rows: tuned/fa2 **{g_fa2:.2f}**, tuned/cudnn "
        f"**{g_cudnn:.2f}**, tuned/default **{g_default:.2f}**. Bar met on "
        f"{sum(bar)}/{len(bar)} rows. Largest LSE error (first head of each row, against "
        f"logsumexp of the fp32 scores): {max(r['lse_max_err'] for r in rows):.1e}.",
    ]
    if memory:
        lines += [
            "",
            "## Memory at N = 32768 (B=1, H=16, D=128, bf16)",
            "",
            f"- q, k, v, o and lse (the caller's): {memory['tensor_bytes'] / 2**20:.0f} MiB; ktune"
            f" allocates nothing per call ({memory['full_bytes_during_call']} bytes full, "
            f"{memory['causal_bytes_during_call']} bytes causal, by cudaMemGetInfo); planning (module "
            f"load) took {memory['full_planning_bytes'] / 2**20:.1f} MiB + "
            f"{memory['causal_planning_bytes'] / 2**20:.1f} MiB once; ktune peak = "
            f"{(memory['tensor_bytes'] + memory['full_planning_bytes'] + memory['causal_planning_bytes']) / 2**20:.0f} MiB",
            f"- a naive attention materialising the N x N fp32 scores needs "
            f"{memory['naive_scores_bytes'] / 2**30:.1f} GiB for them alone and as much again for the "
            f"softmax output (device: {memory['device_total_bytes'] / 2**30:.1f} GiB), so it cannot "
            "run here",
            f"- torch FA2 peak beyond its inputs: {memory['fa2_peak_bytes_beyond_inputs'] / 2**20:.0f}"
            " MiB (its output and lse)",
            f"- ktune at N = 32768: {memory['full_tflops']:.0f} TFLOP/s full "
            f"(`{memory['full_params']}`, {memory['full_match']}), {memory['causal_tflops']:.0f} "
            f"causal (`{memory['causal_params']}`, {memory['causal_match']}); rel. err vs fa2 "
            f"{memory['full_rel_err_vs_fa2']:.1e} / {memory['causal_rel_err_vs_fa2']:.1e}",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump({"device": name, "date": date, "command": command, "torch": torch.__version__,
                       "rows": rows, "memory_n32768": memory,
                       "geomean": {"tuned_over_fa2": g_fa2, "tuned_over_cudnn": g_cudnn,
                                   "tuned_over_default": g_default}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
