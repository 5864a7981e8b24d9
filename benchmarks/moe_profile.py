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


def make_call(lib, db, layer_name, tokens, log=sys.stderr):
    """(ktune binding, call arguments) for one MoE call of the layer at `tokens` with the
    database `db` ("": the built-in default), the caller's workspace allocated; the dispatched
    configuration is printed to `log`."""
    kt = mb.KtuneMoe(lib, os.path.join(os.path.dirname(lib), "..", "include", "ktune", "ktune.h"))
    kt.configure(db or os.path.join(tempfile.mkdtemp(), "empty.db"))
    layer = mb.Layer(layer_name, 0)
    c = layer.cfg
    x, logits, _, _, _ = mb.make_inputs(layer, tokens, 1)
    y = torch.empty(tokens, c["h"], device=mb.DEVICE, dtype=torch.bfloat16)
    a = kt.args(c, tokens, x, logits, layer.bias, layer.w1, layer.w2, y)
    n = kt.workspace_bytes(a)
    ws = torch.empty(n, device=mb.DEVICE, dtype=torch.uint8) if n else None
    a = kt.args(c, tokens, x, logits, layer.bias, layer.w1, layer.w2, y, workspace=ws)
    a.keep = (layer, x, logits, y, ws)  # what the pointers in `a` refer to
    params, match = kt.query(mb.shape_key(c, tokens))
    print(f"{layer_name} T={tokens}: {match} {params}", file=log)
    return kt, a, match


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="tuned database (default: the built-in default)")
    ap.add_argument("--layer", default="deepseek", choices=sorted(mb.LAYERS))
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--allow-fallback", action="store_true",
                    help="with --db, run whatever the lookup gives when the database has no "
                    "current row for the problem (default: refuse)")
    args = ap.parse_args()
    kt, a, match = make_call(args.lib, args.db, args.layer, args.tokens)
    if args.db and match != "exact" and not args.allow_fallback:
        # A row the library does not dispatch (another problem, or a template hash this build
        # does not have: a rebuilt kernel makes rows stale) would profile some other
        # configuration under the database's name.
        sys.exit(f"moe_profile.py: {args.db} has no current row for {args.layer} "
                 f"T={args.tokens} for this library (lookup: {match}); re-hash or re-tune it, "
                 "or pass --allow-fallback")
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(args.calls):
        kt(a, stream)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
