#!/usr/bin/env python3
"""One MoE call as benchmarks/moe_bench.py times it (router logits in, y out, no optional
outputs, the caller's workspace), repeated, for a profiler: run it under ncu to read the op's
per-kernel durations on the GPU machine, e.g.

  ncu -k regex:"^moe_" --launch-skip 10 --launch-count 5 --section SpeedOfLight \
      python3 benchmarks/moe_profile.py --layer deepseek --tokens 16 [--db moe.db]

(the first two calls warm up; with routing, alignment, two GEMMs and a combine a call is 5
kernels: fewer with --tokens 1 and k = 1, more with the multi-block alignment.)
Without --db the built-in default configuration runs (an empty database, shipped ones off)."""
import argparse
import importlib.util
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("moe_bench", os.path.join(HERE, "moe_bench.py"))
mb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="tuned database (default: the built-in default)")
    ap.add_argument("--layer", default="deepseek", choices=sorted(mb.LAYERS))
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--calls", type=int, default=4)
    args = ap.parse_args()
    kt = mb.KtuneMoe(args.lib, os.path.join(os.path.dirname(args.lib), "..", "include", "ktune",
                                            "ktune.h"))
    db = args.db or os.path.join(tempfile.mkdtemp(), "empty.db")
    kt.configure(db)
    layer = mb.Layer(args.layer, 0)
    c = layer.cfg
    x, logits, _, _, _ = mb.make_inputs(layer, args.tokens, 1)
    y = torch.empty(args.tokens, c["h"], device=mb.DEVICE, dtype=torch.bfloat16)
    a = kt.args(c, args.tokens, x, logits, layer.bias, layer.w1, layer.w2, y)
    n = kt.workspace_bytes(a)
    ws = torch.empty(n, device=mb.DEVICE, dtype=torch.uint8) if n else None
    a = kt.args(c, args.tokens, x, logits, layer.bias, layer.w1, layer.w2, y, workspace=ws)
    params, match = kt.query(mb.shape_key(c, args.tokens))
    print(f"{args.layer} T={args.tokens}: {match} {params}", file=sys.stderr)
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(args.calls):
        kt(a, stream)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
