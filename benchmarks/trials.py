#!/usr/bin/env python3
"""The trials of a ktune database, grouped: per (op, dtype, problem) and per value of one tunable
(default impl), the fastest ok trial and how many failed, with the first failures' details.
Answers "which kernel variant won, by how much, and did any candidate fail" after a sweep.

Usage: python3 benchmarks/trials.py DB [--by impl] [--op flash_attention] [--top 3]
       python3 benchmarks/trials.py DB --pairs kv_apart   (each point with the tunable at a
       non-zero value beside the same point with it at 0 or unset, in the same database)
"""
import argparse
import collections
import math
import sqlite3


def value_of(params, name):
    for item in params.split(","):
        key, _, value = item.partition("=")
        if key == name:
            return value
    return "-"


def without(params, name):
    """`params` with the item `name=...` left out (a key-default tunable may be absent)."""
    return ",".join(i for i in params.split(",") if i.partition("=")[0] != name)


def print_pairs(rows, name):
    """Per problem: every ok trial with `name` set to a non-zero value against the same point
    with it 0 or unset, as time(0) / time(value): above 1 means the value is faster."""
    timed = collections.defaultdict(dict)
    for op, dtype, problem, params, status, _, median in rows:
        if status == "ok":
            timed[(op, dtype, problem)][params] = median
    for key in sorted(timed):
        trials = timed[key]
        base = {}
        for params, median in trials.items():
            if value_of(params, name) in ("-", "0"):
                base[without(params, name)] = median
        pairs = []
        for params, median in trials.items():
            if value_of(params, name) not in ("-", "0") and without(params, name) in base:
                pairs.append((base[without(params, name)] / median, median, params))
        if not pairs:
            continue
        pairs.sort(reverse=True)
        ratios = [r for r, _, _ in pairs]
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        best = min(trials.values())
        print(f"{key[0]} {key[1]} {key[2]}: {len(pairs)} pairs, time({name}=0)/time({name}) "
              f"geometric mean {geo:.3f}, range {ratios[-1]:.3f}-{ratios[0]:.3f}")
        for r, median, params in pairs[:3]:
            print(f"    {r:5.3f}  {median:10.2f} us  {median / best:5.2f}x of the problem's best"
                  f"  {params}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("db")
    ap.add_argument("--by", default="impl", help="tunable to group by (default impl)")
    ap.add_argument("--op", default=None)
    ap.add_argument("--top", type=int, default=3, help="fastest trials listed per group")
    ap.add_argument("--pairs", metavar="NAME", help="pair each point with NAME set against 0")
    args = ap.parse_args()
    con = sqlite3.connect(args.db)
    query = "SELECT op, dtype, problem_key, params_key, status, detail, median_us FROM trials"
    rows = con.execute(query + (" WHERE op = ?" if args.op else ""),
                       (args.op,) if args.op else ()).fetchall()
    if args.pairs:
        print_pairs(rows, args.pairs)
        return
    groups = collections.defaultdict(list)
    for op, dtype, problem, params, status, detail, median in rows:
        groups[(op, dtype, problem, value_of(params, args.by))].append(
            (status, median, params, detail))
    best_of_problem = {}
    for (op, dtype, problem, _), trials in groups.items():
        ok = [t[1] for t in trials if t[0] == "ok"]
        if ok:
            key = (op, dtype, problem)
            best_of_problem[key] = min(best_of_problem.get(key, float("inf")), min(ok))
    for key in sorted(groups):
        op, dtype, problem, value = key
        trials = groups[key]
        ok = sorted((t for t in trials if t[0] == "ok"), key=lambda t: t[1])
        failed = [t for t in trials if t[0] != "ok"]
        best = best_of_problem.get((op, dtype, problem))
        print(f"{op} {dtype} {problem} {args.by}={value}: {len(ok)} ok, {len(failed)} not ok")
        for status, median, params, _ in ok[:args.top]:
            print(f"    {median:10.2f} us  {median / best:5.2f}x of the problem's best  {params}")
        for status, _, params, detail in failed[:3]:
            print(f"    {status}: {params}: {detail[:200]}")


if __name__ == "__main__":
    main()
