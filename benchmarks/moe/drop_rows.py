#!/usr/bin/env python3
"""Copies each SRC database to DIR with its best rows for the problems that AB re-timed removed,
so that `ktune db merge OUT AB DIR/*` keeps AB's row for those problems: AB timed them against
each other in one process, interleaved, while the rows it replaces were timed in other runs
(first timings on a cooler GPU read up to 10 % fast, benchmarks/moe/NOTES.md).
Usage: benchmarks/moe/drop_rows.py AB DIR SRC..."""
import os
import shutil
import sqlite3
import sys

ab, out_dir, srcs = sys.argv[1], sys.argv[2], sys.argv[3:]
keys = sqlite3.connect(ab).execute(
    "select device_key, op, dtype, problem_key from best").fetchall()
os.makedirs(out_dir, exist_ok=True)
for src in srcs:
    dst = os.path.join(out_dir, os.path.basename(src))
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    n = sum(con.execute("delete from best where device_key = ? and op = ? and dtype = ? and "
                        "problem_key = ?", k).rowcount for k in keys)
    con.commit()
    print(f"{dst}: {n} best rows dropped (re-timed in {ab})")
