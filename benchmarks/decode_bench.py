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

Usage (GPU machine, after scripts/gpu_bundle.sh, carrying .gpu):
  python3 benchmarks/decode_bench.py --ktune .gpu/bin/ktune --out $OUT [--shapes N,M]
"""
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
]
BACKENDS = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}


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
    cmd = [k, "sweep", "--op", "flash_decode", "--shape", shape_str(s), "--dtype", dtype,
           "--db", db]
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
    ap.add_argument("--ktune", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--shapes", default="", help="comma-separated indices into SHAPES")
    ap.add_argument("--command", default=" ".join(sys.argv))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tdt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    idx = [int(x) for x in a.shapes.split(",")] if a.shapes else range(len(SHAPES))
    db = os.path.join(a.out, "decode.db")
    log = os.path.join(a.out, "decode_sweeps.log")
    copy = copy_tbps()
    rows = []
    for i in idx:
        s = SHAPES[i]
        row = {"shape": shape_str(s), "kv_mb": kv_bytes(s) / 1e6}
        row["ktune"] = ktune_sweep(a.ktune, s, a.dtype, db, log)
        for name in BACKENDS:
            row[name] = sdpa_time(s, name, tdt)
        rows.append(row)
        print(json.dumps(row), flush=True)
    dev = torch.cuda.get_device_name(0)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Decode attention: ktune flash_decode vs torch SDPA ({a.dtype})", "",
             f"- device: {dev}; {when}; torch {torch.__version__}",
             f"- command: `{a.command}`",
             f"- copy bandwidth, same process: {copy:.2f} TB/s", "",
             "TB/s = K+V bytes / time (% of copy). ktune times come from its sweep (every valid "
             "point, default included).", "",
             "| shape | K+V MB | ktune tuned us (TB/s, %) | ktune default us | "
             + " | ".join(BACKENDS) + " | tuned / best SDPA |",
             "|---|---|---|---|" + "---|" * len(BACKENDS) + "---|"]

    def rate(us, mb):
        return f"{us:.1f} ({mb / us:.2f}, {100 * mb / us / copy:.0f}%)"

    for r in rows:
        kt, mb = r["ktune"], r["kv_mb"]
        cells = [r["shape"], f"{mb:.0f}",
                 rate(kt["best_us"], mb) if "best_us" in kt else f"rc={kt['rc']}",
                 f"{kt['default_us']:.1f}" if "default_us" in kt else "-"]
        best_sdpa = None
        for name in BACKENDS:
            x = r[name]
            if "us" in x:
                cells.append(rate(x["us"], mb))
                best_sdpa = x["us"] if best_sdpa is None else min(best_sdpa, x["us"])
            else:
                cells.append("n/a")
        cells.append(f"{best_sdpa / kt['best_us']:.2f}x" if best_sdpa and "best_us" in kt else "-")
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "decode.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "decode.json"), "w") as f:
        json.dump({"device": dev, "date": when, "copy_tbps": copy, "rows": rows}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
