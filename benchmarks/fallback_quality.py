#!/usr/bin/env python3
"""How good is what the runtime dispatches for a problem nobody tuned? (issue 9)

For each held-out problem (not in the shipped database: decode, GQA, odd lengths, every head
dim), on this GPU and in one run:
  1. `ktune best` (the runtime's lookup over an empty user database and the shipped ones) says
     which configuration a user gets and how it matched (nearest_shape, other_device, default);
  2. an exhaustive `ktune sweep` of that exact problem measures every valid configuration;
  3. the ratio is (fastest configuration's median) / (dispatched configuration's median), both
     from the same sweep's trials, so both are timed the same way in the same run: 1.0 means the
     lookup found the optimum.
Reports each problem, the geometric mean and the worst (bar: geomean >= 0.95, worst >= 0.85);
the sweeps' trials are kept in fallback-sweeps.db beside the report (and, the ok ones, in
fallback-trials.csv.gz).

Usage (GPU machine, after scripts/gpu_bundle.sh, carrying .gpu):
  python3 benchmarks/fallback_quality.py --ktune .gpu/bin/ktune --out $OUT [--only N,M]
    [--deadline S]
A run stopped by --deadline goes on in a later call with --continue $OUT/fallback.json (its
problems not reached); --merge RUN1/fallback.json RUN2/fallback.json ... --out DIR writes one
report of them (no GPU).
The bundle's shipped databases (share/ktune/db) are the ones the lookup reads.
Without a GPU (ctest's fallback_problems_test): --validate checks the list itself.
The problems (HELD_OUT, each set with its draw, prediction and outcome) are in
fallback_problems.py beside this file.
"""
import argparse
import csv
import datetime
import gzip
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from fallback_problems import HELD_OUT  # the problems, with each set's history


def indices(spec):
    """--only's list: comma-separated indices and inclusive ranges ("447-452,460")."""
    out = []
    for item in spec.split(","):
        first, _, last = item.partition("-")
        out += range(int(first), int(last or first) + 1)
    bad = [i for i in out if not 0 <= i < len(HELD_OUT)]
    if bad:
        sys.exit(f"--only {spec}: no problem {bad[0]} (0 to {len(HELD_OUT) - 1})")
    return out


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


def trial_medians(db, op, problem_key):
    """params_key -> median_us of the ok trials of one problem (the sweep's own measurements)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT params_key, median_us FROM trials WHERE op = ? AND dtype = 'bf16' AND "
        "problem_key = ? AND status = 'ok'", (op, problem_key)).fetchall()
    con.close()
    return dict(rows)


def validate(ktune):
    """0 if HELD_OUT holds no problem twice and ktune answers for every one (for a generic sm_90a
    GPU, no GPU needed), else 1 with the reasons: a typo in a shape costs device time."""
    seen, twice = set(), []
    for i, problem in enumerate(HELD_OUT):
        if problem in seen:
            twice.append(f"{i}: {problem[0]} {problem[1]}")
        seen.add(problem)
    with tempfile.TemporaryDirectory(prefix="ktune-fallback-validate-") as work:
        plan = os.path.join(work, "held_out.txt")
        with open(plan, "w") as f:
            f.writelines(f"{op} bf16 {shape}\n" for op, shape in HELD_OUT)
        p = subprocess.run([ktune, "best", "--plan", plan, "--arch", "sm_90a", "--no-shipped",
                            "--db", os.path.join(work, "none.db")],
                           capture_output=True, text=True)
    if twice:
        print("problems listed twice (index: problem):\n  " + "\n  ".join(twice))
    if p.returncode != 0:
        print(f"ktune best --plan over the {len(HELD_OUT)} problems failed (exit "
              f"{p.returncode}): {p.stderr.strip()[-2000:]}")
    if twice or p.returncode != 0:
        return 1
    print(f"{len(HELD_OUT)} held-out problems, none twice, every one parsed")
    return 0


def write_report(out, gpu, stamp, commands, results, skipped, unreached, deadline):
    """fallback.md and fallback.json in `out`; True when both bars hold."""
    ratios = [r["ratio"] for r in results if r["ratio"]]
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else 0.0
    worst = min(ratios) if ratios else 0.0
    lines = [f"# Fallback quality on held-out problems ({gpu}, {stamp})", ""]
    lines += [f"command: `{c}`" for c in commands]
    lines += ["", "ratio = fastest configuration / dispatched configuration, both medians of one "
              "exhaustive sweep of the exact problem (1.0: the lookup found the optimum).", "",
              "| problem | match | ratio | dispatched us | fastest us | candidates |",
              "|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else "failed"
        disp = f"{r['dispatched_us']:.1f}" if r["dispatched_us"] else "-"
        lines.append(f"| {r['op']} {r['problem']} | {r['match']} | {ratio} | {disp} | "
                     f"{r['fastest_us']:.1f} | {r['candidates']} |")
    if skipped:
        lines += ["", "not held out on this GPU (a shipped row for it: `exact`): " +
                  "; ".join(skipped)]
    if unreached:
        when = f" before --deadline {deadline:g} s" if deadline else ""
        lines += ["", f"not reached{when}: " + "; ".join(unreached)]
    lines += ["", f"geometric mean {geomean:.3f} (bar >= 0.95), worst {worst:.3f} (bar >= 0.85)"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fallback.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "fallback.json"), "w") as f:
        json.dump({"device": gpu, "date": stamp, "commands": commands, "geomean": geomean,
                   "worst": worst, "problems": results, "skipped": skipped,
                   "unreached": unreached, "deadline": deadline}, f, indent=1)
    print("\n".join(lines[-3:]))
    return geomean >= 0.95 and worst >= 0.85


def merge(paths, out):
    """One report of several runs of one GPU, in order (a run, then its --continue runs): their
    problems, each once (the last run's measurement), and as not reached the last run's list."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    devices = {r["device"] for r in runs}
    if len(devices) != 1:
        sys.exit(f"--merge: the runs are of different GPUs ({', '.join(sorted(devices))})")
    by_key, skipped = {}, []
    for r in runs:
        for p in r["problems"]:
            by_key[(p["op"], p["problem"])] = p
        skipped += [s for s in r.get("skipped", []) if s not in skipped]
    commands = [c for r in runs for c in r.get("commands", [])]
    commands.append("python3 benchmarks/fallback_quality.py --merge " + " ".join(paths))
    ok = write_report(out, runs[0]["device"], " and ".join(r["date"] for r in runs), commands,
                      list(by_key.values()), skipped, runs[-1].get("unreached", []),
                      runs[-1].get("deadline", 0))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ktune", default=".gpu/bin/ktune")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", default="",
                    help="indices into the problem list, comma-separated, ranges as A-B")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds after the start past which no further sweep starts (the "
                         "report then covers the problems measured; 0: none)")
    ap.add_argument("--shipped", nargs="*", default=None,
                    help="databases whose rows are not held out (default: db/shipped/*.db)")
    ap.add_argument("--continue", dest="cont", metavar="JSON",
                    help="sweep the problems an earlier run's fallback.json lists as not reached "
                         "(instead of --only)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no GPU: one report of several runs' fallback.json (e.g. a run and its "
                         "--continue runs) to --out, then exit")
    ap.add_argument("--validate", action="store_true",
                    help="no GPU: check that the list holds no problem twice and that ktune "
                         "parses every problem (one `ktune best --plan` over all), then exit")
    args = ap.parse_args()
    if args.validate:
        return validate(args.ktune)
    if args.merge:
        return merge(args.merge, args.out)
    problems = HELD_OUT
    if args.only:
        problems = [HELD_OUT[i] for i in indices(args.only)]
    if args.cont:
        with open(args.cont) as f:
            problems = [tuple(u.split(" ", 1)) for u in json.load(f)["unreached"]]
    env = dict(os.environ)
    env.pop("KTUNE_DB", None)
    work = tempfile.mkdtemp(prefix="ktune-fallback-")
    empty_db = os.path.join(work, "empty.db")
    sweep_db = os.path.join(work, "exact.db")

    shipped_files = args.shipped
    if shipped_files is None:
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "db", "shipped")
        shipped_files = [os.path.join(folder, f) for f in sorted(os.listdir(folder))
                         if f.endswith(".db")]
    shipped = {}  # (op, problem key) -> device of a shipped row
    for path in shipped_files:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        shipped.update({(op, key): device for op, key, device in con.execute(
            "SELECT b.op, b.problem_key, d.name FROM best b JOIN devices d "
            "ON d.key = b.device_key")})
        con.close()

    results, skipped, unreached = [], [], []
    start = time.monotonic()
    for op, shape in problems:
        if args.deadline and time.monotonic() - start > args.deadline:
            unreached.append(f"{op} {shape}")
            continue
        best = json.loads(run([args.ktune, "best", "--op", op, "--shape", shape, "--db", empty_db,
                               "--json"], env))
        key = best["problem"]
        if best["match"] == "exact":
            # Tuned for this GPU in a shipped database: not held out here.
            print(f"{key}: skipped, tuned in {best['database']} (exact)", flush=True)
            skipped.append(f"{op} {key}")
            continue
        if (op, key) in shipped:
            print(f"{key}: a shipped row of {shipped[(op, key)]} (not this GPU), still held out "
                  "here", flush=True)
        sweep = json.loads(run([args.ktune, "sweep", "--op", op, "--shape", shape, "--db", sweep_db,
                                "--strategy", "exhaustive", "--json"], env))
        medians = trial_medians(sweep_db, op, key)
        fastest_params = min(medians, key=medians.get)
        dispatched = medians.get(best["params"])
        row = {"op": op, "problem": key, "match": best["match"], "dispatched": best["params"],
               "tuned_problem": best.get("tuned_problem", ""), "fastest": fastest_params,
               "fastest_us": medians[fastest_params], "dispatched_us": dispatched,
               "candidates": len(medians), "sweep_seconds": sweep.get("seconds")}
        row["ratio"] = medians[fastest_params] / dispatched if dispatched else None
        results.append(row)
        print(f"{key}: {best['match']}, ratio {row['ratio']:.3f} (dispatched {dispatched:.1f} us "
              f"{best['params']}; fastest {row['fastest_us']:.1f} us {fastest_params})"
              if row["ratio"] else
              f"{key}: {best['match']}, dispatched configuration failed in the sweep", flush=True)

    gpu = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], env).strip()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = f"python3 benchmarks/fallback_quality.py {' '.join(sys.argv[1:])}"
    ok = write_report(args.out, gpu, stamp, [command], results, skipped, unreached,
                      args.deadline)
    # Every trial of the exact sweeps (parameters and timings only): which points come close,
    # not just the fastest, when a default is chosen from them.
    shutil.copyfile(sweep_db, os.path.join(args.out, "fallback-sweeps.db"))
    # The same ok trials as compressed CSV, a few hundred KB where the database may be too large
    # to bring back from the GPU machine.
    con = sqlite3.connect(f"file:{sweep_db}?mode=ro", uri=True)
    with gzip.open(os.path.join(args.out, "fallback-trials.csv.gz"), "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "dtype", "problem_key", "params_key", "median_us"])
        w.writerows(con.execute("SELECT op, dtype, problem_key, params_key, median_us FROM "
                                "trials WHERE status = 'ok'"))
    con.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
