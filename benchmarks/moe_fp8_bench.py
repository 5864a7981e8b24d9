#!/usr/bin/env python3
"""FP8 (e4m3) MoE weights against bf16 ones, the whole layer through ktune.moe (routing from fp32
logits, alignment, both GEMMs, combine), each captured in a CUDA graph, both in one process on
the same GPU, with the built-in defaults (no tuning database):

  mixtral   E=8,  k=2, H=4096, I=14336, routing softmax_renorm
  deepseek  E=64, k=8, H=2048, I=1408,  routing sigmoid_group (n_group=8, topk_group=4,
            routed_scaling=2.5, a per-expert correction bias)

The e4m3 weights are the bf16 ones quantised per row (scale = amax / 448); the e4m3 layer's y
is compared with the bf16 layer's (relative rms difference: the cost of quantising weights, x
and the activation to e4m3). Timing: CUDA events around `--batch` replays of a graph holding
one call, median over `--samples` samples, after warm-up; every row's weights exceed the 50 MB
L2, x and the logits stay where the previous replay left them (as in a model).

Usage: PYTHONPATH=<ktune wheel> python3 benchmarks/moe_fp8_bench.py [--layers mixtral,deepseek]
           [--tokens 16,128,1024,4096] [--samples 15] [--batch 5] [--out FILE.json]
"""
import argparse
import json
import statistics
import sys
import time

import torch

import ktune

LAYERS = {
    "mixtral": dict(e=8, k=2, h=4096, i=14336, routing="softmax_renorm"),
    "deepseek": dict(e=64, k=8, h=2048, i=1408, routing="sigmoid_group", n_group=8,
                     topk_group=4, routed_scaling=2.5),
}


def e4m3_rows(w):
    """(w_q, scale): each row of w in e4m3 with scale = amax / 448 (fp32 [..., rows])."""
    top = torch.finfo(torch.float8_e4m3fn).max
    scale = w.float().abs().amax(-1).clamp_min(1e-30) / top
    return (w.float() / scale[..., None]).clamp(-top, top).to(torch.float8_e4m3fn), scale


def graph_us(fn, samples, batch):
    """Median microseconds of one call: fn captured in a graph, `batch` replays per sample."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()  # warm-up: plans, compiles, allocates the per-stream workspace
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(samples):
        start.record()
        for _ in range(batch):
            g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / batch)
    return statistics.median(times)


def row(name, t, args):
    c = LAYERS[name]
    e, h, i = c["e"], c["h"], c["i"]
    gen = torch.Generator(device="cuda").manual_seed(t)
    x = torch.randn(t, h, device="cuda", generator=gen).to(torch.bfloat16)
    w1 = (torch.randn(e, 2 * i, h, device="cuda", generator=gen) / h ** 0.5).to(torch.bfloat16)
    w2 = (torch.randn(e, h, i, device="cuda", generator=gen) / i ** 0.5).to(torch.bfloat16)
    logits = torch.randn(t, e, device="cuda", generator=gen)
    extra = {}
    if c["routing"] == "sigmoid_group":
        extra = dict(correction_bias=0.1 * torch.randn(e, device="cuda", generator=gen),
                     n_group=c["n_group"], topk_group=c["topk_group"],
                     routed_scaling=c["routed_scaling"])
    w1q, w1s = e4m3_rows(w1)
    w2q, w2s = e4m3_rows(w2)
    y16 = torch.empty_like(x)
    y8 = torch.empty_like(x)

    def bf16():
        ktune.moe(x, w1, w2, logits=logits, k=c["k"], routing=c["routing"], out=y16, **extra)

    def fp8():
        ktune.moe(x, w1q, w2q, logits=logits, k=c["k"], routing=c["routing"], w1_scale=w1s,
                  w2_scale=w2s, out=y8, **extra)

    bf16()
    fp8()
    torch.cuda.synchronize()
    diff = ((y8.float() - y16.float()).pow(2).mean() / y16.float().pow(2).mean()).sqrt().item()
    us16 = graph_us(bf16, args.samples, args.batch)
    us8 = graph_us(fp8, args.samples, args.batch)
    flops = 2.0 * t * c["k"] * 3 * h * i
    out = dict(layer=name, t=t, bf16_us=us16, e4m3_us=us8, speedup=us16 / us8,
               bf16_tflops=flops / us16 / 1e6, e4m3_tflops=flops / us8 / 1e6, rms_diff=diff)
    del w1, w2, w1q, w2q
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", default="mixtral,deepseek")
    ap.add_argument("--tokens", default="16,128,1024,4096")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    meta = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d %H:%M UTC",
                                                                         time.gmtime()),
                command=" ".join(sys.argv))
    rows = []
    for name in args.layers.split(","):
        for t in (int(v) for v in args.tokens.split(",")):
            rows.append(row(name, t, args))
            r = rows[-1]
            print(f"{r['layer']:9s} T={r['t']:5d}  bf16 {r['bf16_us']:9.1f} us "
                  f"({r['bf16_tflops']:5.0f} TF/s)  e4m3 {r['e4m3_us']:9.1f} us "
                  f"({r['e4m3_tflops']:5.0f} TF/s)  {r['speedup']:.2f}x  "
                  f"rms diff {r['rms_diff']:.3f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
