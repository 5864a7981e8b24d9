#!/usr/bin/env python3
"""Times configurations given as changes to each problem's built-in default beside that default
(`ktune sweep --params`, no search), problem after problem, and prints one table: the default's
time, each given point's time and the default's time over it (> 1: the given point is faster),
all re-timed in one phase per problem; then each given point's geometric mean and range over the
problems. This is how a candidate default rule is measured before it is written.

On the GPU machine, after scripts/gpu_bundle.sh here (carrying .gpu):
  python3 benchmarks/given_ab.py --ktune .gpu/bin/ktune --problems FILE --params "a=1" \\
      --params "a=1,b=2" --out $OUT
FILE: one problem a line, "OP DTYPE SHAPE" (`ktune sweep --plan`'s form without token lists;
'#' starts a comment). Writes given_ab.md and given_ab.json to --out, the database beside them.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time


def problems_of(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                sys.exit(f"{path}:{n}: expected 'OP DTYPE SHAPE', got {line!r}")
            out.append(tuple(parts))
    return out


def sweep(ktune, op, dtype, shape, params, db, timeout):
    cmd = [ktune, "sweep", "--op", op, "--dtype", dtype, "--shape", shape, "--db", db, "--json",
           "--no-warm-start"]
    for p in params:
        cmd += ["--params", p]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}
    res = json.loads(r.stdout)
    res = res[0] if isinstance(res, list) else res
    res["wall_s"] = round(time.time() - t0, 1)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ktune", required=True)
    ap.add_argument("--problems", required=True)
    ap.add_argument("--params", action="append", required=True,
                    help="a configuration as name=value items over each problem's default")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=0, help="seconds; 0: none")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per problem")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    db = os.path.join(args.out, "given_ab.db")
    t0 = time.time()
    rows = []
    left = []
    for op, dtype, shape in problems_of(args.problems):
        if args.deadline and time.time() - t0 > args.deadline:
            left.append(f"{op} {dtype} {shape}")
            continue
        res = sweep(args.ktune, op, dtype, shape, args.params, db, args.timeout)
        rows.append({"op": op, "dtype": dtype, "shape": shape, "result": res})
        d = res.get("default") or {}
        print(f"{op} {shape}: default {d.get('median_us', 'n/a')} us; " +
              "; ".join(f"{g.get('median_us', g.get('status'))}" for g in res.get("given", [])) +
              (f" ({res['error']})" if "error" in res else ""), flush=True)

    lines = ["# Given configurations against the built-in default (`ktune sweep --params`)", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             "- command: `python3 benchmarks/given_ab.py " + " ".join(sys.argv[1:]) + "`",
             "- given points (items over each problem's default):"]
    lines += [f"  {n + 1}. `{p}`" for n, p in enumerate(args.params)]
    lines += ["", "Default / given time (> 1: the given point is faster), both re-timed in the "
              "sweep's final phase; a status where the point did not run (invalid: not a "
              "point of the problem's space).", "",
              "| problem | device | default us | " +
              " | ".join(f"{n + 1}: us (ratio)" for n in range(len(args.params))) + " |",
              "|---|---|---|" + "---|" * len(args.params)]
    ratios = [[] for _ in args.params]
    for row in rows:
        res = row["result"]
        if "error" in res:
            lines.append(f"| {row['op']} {row['shape']} | | error: {res['error']} |")
            continue
        d = (res.get("default") or {}).get("median_us")
        out = []
        for n, g in enumerate(res.get("given", [])):  # one for each --params, in order
            if g.get("status") != "ok" or not d:
                out.append(g.get("status", "-"))
                continue
            ratio = d / g["median_us"]
            ratios[n].append(ratio)
            out.append(f"{g['median_us']:.1f} ({ratio:.3f})")
        lines.append(f"| {row['op']} {row['shape']} | {res.get('device', '')} | "
                     f"{d or 0:.1f} | " + " | ".join(out) + " |")
    lines.append("")
    for n, rs in enumerate(ratios):
        if rs:
            g = math.exp(sum(math.log(r) for r in rs) / len(rs))
            lines.append(f"- point {n + 1}: geometric mean {g:.3f} over {len(rs)} problems, "
                         f"range {min(rs):.3f}-{max(rs):.3f}")
    if left:
        lines.append("- not reached before --deadline: " + "; ".join(left))
    lines.append(f"- wall {time.time() - t0:.0f} s")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "given_ab.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "given_ab.json"), "w") as f:
        json.dump({"params": args.params, "rows": rows, "left": left}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
