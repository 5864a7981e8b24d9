#!/usr/bin/env python3
"""The ok trials of a sweep database as a markdown table, fastest first per problem, with a
column per tunable: `trials_table.py DB NAME[,NAME...]` (each value taken from the params
key, 0 where the key leaves it out, as keys do for tunables at their first value)."""
import sqlite3
import sys


def main():
    db, names = sys.argv[1], sys.argv[2].split(",")
    rows = sqlite3.connect(db).execute(
        "select problem_key, median_us, params_key from trials where status = 'ok'"
        " order by problem_key, median_us").fetchall()
    print(f"| t | us (median) | {' | '.join(names)} | params |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for problem, us, params in rows:
        t = problem.split("t=")[1].split(",")[0]
        kv = dict(item.split("=", 1) for item in params.split(","))
        cols = " | ".join(kv.get(n, "0") for n in names)
        print(f"| {t} | {us:.1f} | {cols} | {params} |")


if __name__ == "__main__":
    main()
