#!/usr/bin/env python3
"""Sliding-window prefill against the full causal kernel (issue 9's window row), one GPU, one run.

For each problem (default: b=1, hq=hkv=16, nq=nk=16384, d=128, bf16, causal; windows 4096 and
1024), `ktune sweep` measures every valid configuration of the causal problem and of the same
problem with `window=W`, into one database, in that order; every candidate is verified against
the op's reference kernel (fp32 accumulation) by the sweep before it is timed. Reported per
window: best vs best, default vs default, and the ideal ratio, the count of (query, key) score
pairs of the causal problem over the windowed one's (at w=4096, nq=nk=16384: 2.29x).

Usage (GPU machine, after scripts/gpu_bundle.sh, carrying .gpu):
  python3 benchmarks/window_bench.py --ktune .gpu/bin/ktune --out $OUT [--windows 4096,1024]
  python3 benchmarks/window_bench.py --self-test      (the output parser, no GPU needed)
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

SWEEP_BEST = re.compile(r"^\s*best:\s+(\S+)\s*\n\s+([0-9.]+) us", re.M)
SWEEP_DEFAULT = re.compile(r"^\s*default:\s+(\S+)\s*\n\s+([0-9.]+) us", re.M)


def parse_sweep(text):
    """(best params, best us, default params, default us) from `ktune sweep`'s summary."""
    b, d = SWEEP_BEST.search(text), SWEEP_DEFAULT.search(text)
    if not b or not d:
        raise ValueError("no best/default lines in the sweep output:\n" + text[-2000:])
    return b.group(1), float(b.group(2)), d.group(1), float(d.group(2))


def pairs(nq, nk, window):
    """Score pairs of a causal problem (bottom-right aligned), with a left window when > 0."""
    total = 0
    for i in range(nq):
        last = i + nk - nq          # the row's diagonal key
        if last < 0:
            continue
        first = max(0, last - window + 1) if window > 0 else 0
        total += last - first + 1
    return total


def self_test():
    text = ("flash_attention bf16 ...\n  space: 88 points\n"
            "  best:    block_m=128,block_n=64,warps=4\n"
            "           1475.30 us (spread 1.2%), 400 TFLOP/s\n"
            "  default: block_m=128,block_n=64,warps=8\n"
            "           1569.50 us; tuned is 1.06x faster\n")
    assert parse_sweep(text) == ("block_m=128,block_n=64,warps=4", 1475.3,
                                 "block_m=128,block_n=64,warps=8", 1569.5)
    assert pairs(4, 4, 0) == 10 and pairs(4, 4, 2) == 7 and pairs(2, 4, 1) == 2
    r = pairs(16384, 16384, 0) / pairs(16384, 16384, 4096)
    assert abs(r - 2.2857) < 1e-3, r
    print("self-test ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ktune", default=".gpu/bin/ktune")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shape", default="b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128,causal=yes")
    ap.add_argument("--windows", default="4096,1024")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    os.makedirs(args.out, exist_ok=True)
    db = os.path.join(args.out, "window.db")
    dims = dict(kv.split("=") for kv in args.shape.split(","))
    nq, nk = int(dims["nq"]), int(dims["nk"])
    results = {}
    for w in [0] + [int(x) for x in args.windows.split(",") if x]:
        shape = args.shape + (f",window={w}" if w else "")
        start = time.time()
        p = subprocess.run([args.ktune, "sweep", "--op", "flash_attention", "--shape", shape,
                            "--dtype", args.dtype, "--db", db], capture_output=True, text=True)
        with open(os.path.join(args.out, f"sweep-w{w}.log"), "w") as f:
            f.write(p.stdout + "\n--- stderr\n" + p.stderr)
        if p.returncode != 0:
            print(f"sweep {shape}: exit {p.returncode}\n{p.stderr[-1500:]}", file=sys.stderr)
            return 1
        results[w] = parse_sweep(p.stdout) + (time.time() - start,)
        print(f"{shape}: best {results[w][1]:.1f} us, default {results[w][3]:.1f} us "
              f"({results[w][4]:.0f} s)", flush=True)
    full = results[0]
    lines = [f"# Sliding-window prefill vs the full causal kernel ({args.dtype})", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- command: `python3 benchmarks/window_bench.py --shape {args.shape} "
             f"--windows {args.windows}`",
             "- every candidate verified against the reference kernel by the sweep; medians "
             "of the sweep's timing", "",
             "| window | best us | default us | full / window (best) | (default) | "
             "ideal (pairs) |", "|---|---|---|---|---|---|",
             f"| none | {full[1]:.1f} | {full[3]:.1f} | 1.00x | 1.00x | 1.00x |"]
    for w, r in results.items():
        if w == 0:
            continue
        ideal = pairs(nq, nk, 0) / pairs(nq, nk, w)
        lines.append(f"| {w} | {r[1]:.1f} | {r[3]:.1f} | {full[1] / r[1]:.2f}x | "
                     f"{full[3] / r[3]:.2f}x | {ideal:.2f}x |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "window.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
