#!/usr/bin/env python3
"""Prefill attention against a paged K/V cache: what reading K and V through a block table costs
the prefill kernels, on the same GPU in one process.

For each shape, every sequence has all nk keys (seq_lens = nk) so that the paged and the
contiguous call do the same work: ktune.flash_attention on contiguous q, k, v [b, h, s, d]
("contiguous"), then on the same values scattered into page pools [pages, page, hkv, d] through a
shuffled block table ("page 16", "page 256"; q [b, hq, nq, d] dense), and where nq == nk (where
torch's top-left causal mask is ktune's bottom-right one) torch SDPA's cuDNN backend on the
contiguous tensors (K and V expanded to hq heads first for grouped-query shapes). impl="prefill"
throughout (no decode routing); ktune runs its built-in defaults (an empty database, shipped ones
off) unless --db names a tuned one. The paged outputs are checked against the contiguous one.

Times are CUDA-event medians of 30 samples of 10 back-to-back calls after warm-up, each contender
measured in two interleaved rounds keeping its better median. TFLOP/s count the score-value pairs
computed (causal: bottom-right aligned, 4 * hq * d flops per pair).

Usage: PYTHONPATH=<ktune wheel> python3 benchmarks/paged_prefill_bench.py [--out FILE.json]
           [--shapes "B,HQ,HKV,NQ,NK,D,causal;..."] [--pages 16,256]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ktune

# Chunked prefill against a long cache (the chunk is the last nq rows), and whole prompts.
SHAPES = [  # b, hq, hkv, nq, nk, d, causal
    (4, 32, 8, 2048, 8192, 128, True),
    (8, 32, 8, 512, 4096, 128, True),
    (2, 32, 8, 4096, 4096, 128, True),
    (2, 16, 16, 4096, 4096, 128, False),
    (4, 16, 16, 2048, 2048, 64, True),
    (2, 16, 16, 4096, 4096, 256, True),
]


def pairs(nq, nk, causal):
    """Score-value pairs one (batch, head) computes: bottom-right causal or all."""
    if not causal:
        return nq * nk
    shift = nk - nq
    return sum(max(0, min(nk, i + shift + 1)) for i in range(nq))


def time_us(fn, samples=30, batch=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(samples):
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / batch)
    return statistics.median(times)


def pools(k, v, page, gen):
    """k, v [b, hkv, nk, d] scattered into pools [b * pps, page, hkv, d] through a shuffled
    table [b, pps]."""
    b, hkv, nk, d = k.shape
    pps = (nk + page - 1) // page
    table = torch.randperm(b * pps, device="cuda", generator=gen).to(torch.int32).view(b, pps)
    kp = torch.zeros(b * pps, page, hkv, d, dtype=k.dtype, device="cuda")
    vp = torch.zeros_like(kp)
    pad = pps * page - nk
    ks = F.pad(k.transpose(1, 2), (0, 0, 0, 0, 0, pad)).reshape(b, pps, page, hkv, d)
    vs = F.pad(v.transpose(1, 2), (0, 0, 0, 0, 0, pad)).reshape(b, pps, page, hkv, d)
    kp[table.long().view(-1)] = ks.reshape(b * pps, page, hkv, d)
    vp[table.long().view(-1)] = vs.reshape(b * pps, page, hkv, d)
    return kp, vp, table


def bench(shape, pages, gen):
    b, hq, hkv, nq, nk, d, causal = shape
    q = torch.randn(b, hq, nq, d, device="cuda", generator=gen).to(torch.bfloat16)
    k = torch.randn(b, hkv, nk, d, device="cuda", generator=gen).to(torch.bfloat16)
    v = torch.randn(b, hkv, nk, d, device="cuda", generator=gen).to(torch.bfloat16)
    lens = torch.full((b,), nk, dtype=torch.int32, device="cuda")
    o_ref = ktune.flash_attention(q, k, v, causal=causal, impl="prefill")
    fns = {"contiguous": lambda: ktune.flash_attention(q, k, v, causal=causal, impl="prefill")}
    errors = {}
    for page in pages:
        kp, vp, table = pools(k, v, page, gen)
        name = f"page {page}"
        fn = (lambda kp=kp, vp=vp, table=table: ktune.flash_attention(
            q, kp, vp, block_table=table, seq_lens=lens, causal=causal, impl="prefill"))
        errors[name] = (fn().float() - o_ref.float()).abs().max().item()
        fns[name] = fn
    if nq == nk:
        ke = k.repeat_interleave(hq // hkv, dim=1)
        ve = v.repeat_interleave(hq // hkv, dim=1)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)
        errors["cudnn"] = (cudnn().float() - o_ref.float()).abs().max().item()
        fns["cudnn"] = cudnn
    best = {}
    for _ in range(2):
        for name, fn in fns.items():
            t = time_us(fn)
            best[name] = min(best.get(name, t), t)
    flops = 4.0 * b * hq * d * pairs(nq, nk, causal)
    return {"shape": dict(b=b, hq=hq, hkv=hkv, nq=nq, nk=nk, d=d, causal=causal),
            "us": best, "tflops": {n: flops / t / 1e6 for n, t in best.items()},
            "max_abs_diff_vs_contiguous": errors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--shapes", default=None, help="B,HQ,HKV,NQ,NK,D,causal;...")
    ap.add_argument("--pages", default="16,256")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
        shapes = [s[:6] + (bool(s[6]),) for s in shapes]
    pages = [int(p) for p in args.pages.split(",")]
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    print(f"device: {torch.cuda.get_device_name()}; ktune defaults, bf16; us (TFLOP/s)")
    for shape in shapes:
        r = bench(shape, pages, gen)
        rows.append(r)
        us, tf = r["us"], r["tflops"]
        cells = "  ".join(f"{n} {us[n]:8.1f} ({tf[n]:5.0f})" for n in us)
        ratios = "  ".join(f"{n}/contig {us['contiguous'] / us[n]:.3f}x"
                           for n in us if n.startswith("page"))
        print(f"{shape}: {cells}  | {ratios}  | max diff {r['max_abs_diff_vs_contiguous']}",
              flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
