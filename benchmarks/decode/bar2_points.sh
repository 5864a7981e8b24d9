#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu, carried): where issue 9's bar-2 decode shape
# (b=1, hq=64, hkv=8, nk=32768, d=128, 134 MB of K/V) spends its time. An exhaustive sweep into
# $OUT/bar2.db, then the fastest points overall and the fastest of each (splits, merge), then
# ncu of the tuned configuration through ktune_attention (each kernel's duration, DRAM rate and
# SM busy cycles: avg / max / min). Tables under $OUT, a summary last. ~2-3 min.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-bar2}
G=${G:-.gpu}
SHAPE=${SHAPE:-b=1,hq=64,hkv=8,nq=1,nk=32768,d=128}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader \
  | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
timeout 300 "$G/bin/ktune" sweep --op flash_decode --shape "$SHAPE" --db "$OUT/bar2.db" \
  >"$OUT/sweep.log" 2>&1
echo "sweep rc=$?"
python3 - "$OUT/bar2.db" >"$OUT/points.md" <<'PY'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select median_us, params_key from trials where status = 'ok' order by median_us").fetchall()
print(f"{len(rows)} ok trials\n\n| us | params |\n|---|---|")
for us, p in rows[:12]:
    print(f"| {us:.1f} | {p} |")
best = {}
for us, p in rows:
    kv = dict(i.split("=", 1) for i in p.split(","))
    key = (int(kv.get("splits", "1")), int(kv.get("merge", "0")))
    best.setdefault(key, (us, p))
print("\n| splits | merge | best us | params |\n|---|---|---|---|")
for (s, m), (us, p) in sorted(best.items()):
    print(f"| {s} | {m} | {us:.1f} | {p} |")
PY
cat "$OUT/points.md"
B=${SHAPE//[a-z=]/}
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.avg
M=$M,launch__grid_size,launch__cluster_dim_x
timeout 200 ncu --launch-skip 4 --launch-count 4 --metrics "$M" \
  python3 benchmarks/decode_profile.py --backend ktune --lib "$G/lib/libktune.so" \
  --db "$OUT/bar2.db" --shape "${B%,}" >"$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
grep -E "flash_decode|gpu__time|dram__|sm__cycles|launch__" "$OUT/ncu.log" | head -60
