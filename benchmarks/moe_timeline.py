#!/usr/bin/env python3
"""Per-kernel timeline of MoE calls as the GPU runs them (programmatic launches overlapping, no
serialisation, unlike ncu): each call's kernels with their start and end in us from the call's
first kernel, from the CUDA activity records torch.profiler (CUPTI) collects for every kernel of
the process, libktune's included. On the GPU machine:

  python3 benchmarks/moe_timeline.py --layer deepseek --tokens 128 [--db moe.db] [--calls 20]

Calls are plain back-to-back launches (not graph replays), so a period includes the launch gap
between calls. Without --db the built-in default configuration runs."""
import argparse
import importlib.util
import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("moe_profile", os.path.join(HERE, "moe_profile.py"))
mp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mp)


def short(name):
    name = name.split("<")[0].replace("void ", "").replace("ktune::", "").replace("moe_", "")
    return name.replace("_kernel", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="tuned database (default: the built-in default)")
    ap.add_argument("--layer", default="deepseek", choices=sorted(mp.mb.LAYERS))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--show", type=int, default=5, help="calls printed (the last ones)")
    args = ap.parse_args()
    kt, a, _ = mp.make_call(args.lib, args.db, args.layer, args.tokens, log=sys.stdout)
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(5):
        kt(a, stream)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            kt(a, stream)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    first = short(kernels[0]["name"]) if kernels else ""
    calls = []
    for e in kernels:  # a call starts with the op's first kernel
        if short(e["name"]) == first:
            calls.append([])
        calls[-1].append(e)
    for call in calls[-args.show:]:
        t0 = call[0]["ts"]
        print(" | ".join(f"{short(e['name'])} {e['ts'] - t0:.1f}-{e['ts'] + e['dur'] - t0:.1f}"
                         for e in call))
    starts = [call[0]["ts"] for call in calls]
    print("period us:", [round(b - a, 1) for a, b in zip(starts, starts[1:])][-args.show:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
