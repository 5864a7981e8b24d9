#!/usr/bin/env python3
"""Prints one line per kernel of `ncu --csv --page details` files: id, name, duration (us), DRAM
throughput (% of peak), SM throughput, grid, block, registers.
Usage: scripts/ncu_table.py FILE.csv..."""
import csv
import sys

for path in sys.argv[1:]:
    rows = [r for r in csv.reader(open(path, errors="replace")) if len(r) > 10]
    heads = [r for r in rows if r[0] == "ID"]
    print("==", path)
    if not heads:
        print("   no kernels profiled")
        continue
    h = heads[0]
    col = {name: h.index(name) for name in
           ("ID", "Kernel Name", "Grid Size", "Block Size", "Metric Name", "Metric Value")}
    kernels = {}
    for r in rows:
        if not r[0].isdigit():
            continue
        key = (r[col["ID"]], r[col["Kernel Name"]][:48], r[col["Grid Size"]], r[col["Block Size"]])
        kernels.setdefault(key, {})[r[col["Metric Name"]]] = r[col["Metric Value"]]
    for (kid, name, grid, block), m in kernels.items():
        dur = m.get("Duration", "?").replace(",", "")
        dur = f"{float(dur) / 1000:.1f}" if dur.replace(".", "").isdigit() else dur
        print(f"   {kid:>3} {name:48} {dur:>8} us dram {m.get('DRAM Throughput', '?'):>6}% "
              f"sm {m.get('Compute (SM) Throughput', '?'):>6}% grid {grid} block {block} "
              f"regs {m.get('Registers Per Thread', '?')}")
