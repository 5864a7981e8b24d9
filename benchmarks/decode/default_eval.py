#!/usr/bin/env python3
"""Today's flash_decode defaults against recorded exhaustive sweeps, without a GPU (computed).

For every flash_decode problem of the given trials files (the `*-trials.csv.gz` that
benchmarks/fallback_quality.py writes beside its report: every ok trial's parameters and median
of an exhaustive sweep), asks `ktune best` which configuration today's built-in defaults give
on that file's GPU (`--device`, from a copy of that GPU's shipped database with its best rows
removed, so only the defaults answer), and reports fastest / default from the recorded medians:
1.0 when the default is the sweep's fastest point. A default the sweep did not time (a tunable
value added after it, or a point invalid then) is reported as `not recorded`, never guessed.

These ratios are computed from old measurements: a kernel changed since a sweep makes its
medians stale. They say which problems a candidate rule moves and by about how much; a rule is
still checked on problems swept after it was written (fallback_quality.py's check sets).

Usage:
  python3 benchmarks/decode/default_eval.py --ktune build/ktune [--ktune OTHER ...] \\
      [--gpu h100=FILE.csv.gz,...] [--gpu h200=...] [--rows-min N] [--rows-max N] [--list]
  python3 benchmarks/decode/default_eval.py --changed --ktune MAIN --ktune CANDIDATE
      (only the problems whose defaults the candidate changes, where the sweep timed both)
  A --ktune value may start with VAR=VALUE words for that binary's environment:
  --ktune "KTUNE_DECODE_COST_MODEL=0 build/ktune" --ktune build/ktune (the rules, the model).
With no --gpu, every trials file under benchmarks/results whose name says h100 or h200.
"""
import argparse
import collections
import csv
import glob
import gzip
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEVICES = {"h100": ("NVIDIA H100 80GB HBM3", "h100.db"), "h200": ("NVIDIA H200", "h200.db")}


def packed_rows(problem):
    """Query rows a KV head packs: (hq / hkv) x nq."""
    dims = dict(item.split("=") for item in problem.split(","))
    return int(dims["hq"]) // int(dims["hkv"]) * int(dims["nq"])


def load_trials(paths, min_points):
    """(dtype, problem) -> {params: median_us} over the files. A problem in several files keeps
    the file that timed the most points (an A/B of a few points must not stand in for an
    exhaustive sweep); problems with fewer than `min_points` are left out: their fastest is no
    sweep's fastest."""
    out = {}
    for path in paths:
        per = collections.defaultdict(dict)
        with gzip.open(path, "rt", newline="") as f:
            reader = csv.DictReader(f)
            if "build" in reader.fieldnames:
                continue  # an A/B of two kernel builds, not one exhaustive sweep
            problem = "problem_key" if "problem_key" in reader.fieldnames else "problem"
            params = "params_key" if "params_key" in reader.fieldnames else "params"
            for r in reader:
                if r["op"] == "flash_decode":
                    per[(r["dtype"], r[problem])][r[params]] = float(r["median_us"])
        for key, medians in per.items():
            if len(medians) > len(out.get(key, {})):
                out[key] = medians
    return {key: medians for key, medians in out.items() if len(medians) >= min_points}


def ktune_env(ktune):
    """(environment, binary) of a --ktune value: a path, optionally after VAR=VALUE words
    ("KTUNE_DECODE_COST_MODEL=0 build/ktune": the rules' defaults without the cost model)."""
    words = ktune.split()
    env = dict(os.environ)
    for w in words[:-1]:
        var, eq, value = w.partition("=")
        if not eq or not var:
            sys.exit(f"--ktune {ktune!r}: expected [VAR=VALUE ...] PATH")
        env[var] = value
    return env, words[-1]


def defaults(ktune, gpu, problems, work):
    """(dtype, problem) -> params the built-in defaults give on `gpu` (one `ktune best --plan`)."""
    name, db_file = DEVICES[gpu]
    db = os.path.join(work, f"{gpu}-defaults.db")
    shutil.copyfile(os.path.join(ROOT, "db", "shipped", db_file), db)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM best")
    con.commit()
    con.close()
    plan = os.path.join(work, f"{gpu}-plan.txt")
    with open(plan, "w") as f:
        f.writelines(f"flash_decode {dtype} {problem}\n" for dtype, problem in problems)
    env, binary = ktune_env(ktune)
    p = subprocess.run([binary, "best", "--plan", plan, "--device", name, "--no-shipped", "--db",
                        db, "--json"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"ktune best --plan failed (exit {p.returncode}): {p.stderr.strip()[-1000:]}")
    answers = json.loads(p.stdout)["problems"]
    return {(a["dtype"], a["problem"]): (a["match"], a["params"]) for a in answers}


def compare(ktunes, gpu, keys, trials, work, listing):
    """Two builds' defaults, only where they differ and the sweep timed both: each problem's
    fastest / default for the first and the second, and their geometric means over those
    problems. (Over all problems, a sweep older than a tunable value leaves one side `not
    recorded` and the two summaries count different problems.)"""
    a, b = (defaults(k, gpu, keys, work) for k in ktunes)
    pairs, missing = [], 0
    for key in keys:
        (ma, pa), (mb, pb) = a[key], b[key]
        medians = trials[key]
        if ma != "default" or mb != "default" or pa == pb:
            continue
        if pa not in medians or pb not in medians:
            missing += 1
            if listing:
                print(f"{gpu} {key[0]} {key[1]}: not recorded "
                      f"({pa if pa not in medians else pb})")
            continue
        best = min(medians.values())
        pairs.append((best / medians[pa], best / medians[pb]))
        print(f"{gpu} {key[0]} {key[1]} rows {packed_rows(key[1])}: {pairs[-1][0]:.3f} -> "
              f"{pairs[-1][1]:.3f} ({pa} -> {pb})")
    if not pairs:
        print(f"{gpu}: no problem whose two defaults differ and were both timed "
              f"({missing} differ, one side not recorded)")
        return
    geo = [math.exp(sum(math.log(p[i]) for p in pairs) / len(pairs)) for i in (0, 1)]
    print(f"{gpu}: {len(pairs)} problems changed, geometric mean {geo[0]:.3f} -> {geo[1]:.3f}, "
          f"worst {min(p[0] for p in pairs):.3f} -> {min(p[1] for p in pairs):.3f}; "
          f"{missing} more differ with one side not recorded")


def files_for(gpu):
    pattern = os.path.join(ROOT, "benchmarks", "results", f"*{gpu}*trials*.csv.gz")
    return sorted(glob.glob(pattern))


def evaluate(ktune, gpu, keys, trials, work, label, listing):
    """Prints `label`'s ratio per problem (with listing) and its summary line."""
    answer = defaults(ktune, gpu, keys, work)
    ratios, missing = [], []
    for key in keys:
        match, params = answer[key]
        if match != "default":
            continue
        medians = trials[key]
        head = f"{label} {key[0]} {key[1]} rows {packed_rows(key[1])}"
        if params not in medians:
            missing.append(key)
            if listing:
                print(f"{head}: not recorded ({params})")
            continue
        ratios.append(min(medians.values()) / medians[params])
        if listing:
            print(f"{head}: {ratios[-1]:.3f} ({params})")
    if not ratios:
        print(f"{label}: no default recorded in the sweeps ({len(missing)} problems)")
        return
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{label}: {len(ratios)} problems, geometric mean {geo:.3f}, worst {min(ratios):.3f}, "
          f"under 0.85: {sum(r < 0.85 for r in ratios)}; not recorded: {len(missing)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ktune", action="append", default=[],
                    help="ktune binary (repeatable: each one's defaults against the same "
                         "sweeps, e.g. main and a candidate rule; default build/ktune)")
    ap.add_argument("--gpu", action="append", default=[],
                    help="GPU=FILE[,FILE...] with GPU h100 or h200 (repeatable)")
    ap.add_argument("--rows-min", type=int, default=0, help="only problems of >= N packed rows")
    ap.add_argument("--rows-max", type=int, default=1 << 30, help="... and <= N")
    ap.add_argument("--list", action="store_true", help="print every problem, not only a summary")
    ap.add_argument("--changed", action="store_true",
                    help="with two --ktune: only the problems whose defaults differ, both timed")
    ap.add_argument("--min-points", type=int, default=30,
                    help="leave out problems whose recording has fewer points (A/Bs; default 30)")
    args = ap.parse_args()
    ktunes = args.ktune or [os.path.join(ROOT, "build", "ktune")]
    if args.changed and len(ktunes) != 2:
        sys.exit(f"--changed compares two builds: give --ktune twice (got {len(ktunes)})")
    sets = {}
    for item in args.gpu:
        gpu, _, files = item.partition("=")
        if gpu not in DEVICES or not files:
            sys.exit(f"--gpu {item!r}: expected h100=FILE[,FILE...] or h200=...")
        sets[gpu] = files.split(",")
    if not sets:
        sets = {gpu: files_for(gpu) for gpu in DEVICES}
    work = tempfile.mkdtemp(prefix="ktune-default-eval-")
    try:
        for gpu, files in sets.items():
            trials = load_trials(files, args.min_points)
            keys = [k for k in sorted(trials)
                    if args.rows_min <= packed_rows(k[1]) <= args.rows_max]
            if not keys:
                print(f"{gpu}: no flash_decode problems in {len(files)} files")
                continue
            print(f"{gpu}: {len(keys)} flash_decode problems in {len(files)} files")
            if args.changed:
                compare(ktunes, gpu, keys, trials, work, args.list)
                continue
            for ktune in ktunes:
                label = gpu if len(ktunes) == 1 else f"{gpu} ({ktune})"
                evaluate(ktune, gpu, keys, trials, work, label, args.list)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
