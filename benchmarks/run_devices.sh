#!/usr/bin/env bash
# The issue 12 bar for --devices: a plan spread over 2 GPUs finishes in <= 0.55x the 1-GPU wall
# time, and both databases' bests agree within 2%. On a host with two GPUs of one kind (the lent
# nvidia-h200-x2), from the repo root, with a bundle from scripts/gpu_bundle.sh in $BUNDLE
# (default .gpu). Sweeps $PLAN (default plans/llama3-8b.txt) with --device 0, then with
# --devices $DEVICES (default 0,1), each into a fresh database with a fresh (cold) compile cache;
# prints both wall times, their ratio and how far the two databases' best medians are apart.
# EXTRA adds sweep options to both runs (e.g. EXTRA="--strategy model --budget 40").
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu}
OUT=${OUT:-/tmp/ktune-out}
PLAN=${PLAN:-plans/llama3-8b.txt}
DEVICES=${DEVICES:-0,1}
EXTRA=${EXTRA:-}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib:${LD_LIBRARY_PATH:-}
K=$BUNDLE/bin/ktune
nvidia-smi -L

run() {  # name, GPU options
  rm -f "$OUT/$1.db"
  local cache t0 t1 rc
  cache=$(mktemp -d)
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  KTUNE_CACHE_DIR=$cache $K sweep --plan "$PLAN" $2 --db "$OUT/$1.db" $EXTRA \
    >"$OUT/$1.txt" 2>"$OUT/$1.log"
  rc=$?
  t1=$(date +%s.%N)
  rm -rf "$cache"
  echo "$1 $t0 $t1 $rc" >>"$OUT/walls.txt"
  tail -n 1 "$OUT/$1.txt"
}

rm -f "$OUT/walls.txt"
run one "--device 0"
run two "--devices $DEVICES"
python3 - "$OUT" <<'PY'
import sqlite3, sys
out = sys.argv[1]
walls = {}
for line in open(f"{out}/walls.txt"):
    name, t0, t1, rc = line.split()
    walls[name] = (float(t1) - float(t0), int(rc))
for name, (w, rc) in walls.items():
    print(f"{name}: {w:7.1f} s (exit {rc})")
print(f"ratio two/one: {walls['two'][0] / walls['one'][0]:.3f} (bar: <= 0.55)")

def bests(name):
    c = sqlite3.connect(f"file:{out}/{name}.db?mode=ro", uri=True)
    return {r[:5]: r[5] for r in c.execute(
        "SELECT device_key, op, dtype, problem_key, template_hash, median_us FROM best")}
a, b = bests("one"), bests("two")
common = sorted(set(a) & set(b))
worst = max((abs(b[k] / a[k] - 1), k) for k in common) if common else (0, None)
print(f"bests: {len(a)} one GPU, {len(b)} two GPUs, {len(common)} in both; "
      f"largest median difference {100 * worst[0]:.2f}% (bar: within 2%) at {worst[1]}")
far = sum(abs(b[k] / a[k] - 1) > 0.02 for k in common)
print(f"{far} of {len(common)} bests differ by more than 2%")
c = sqlite3.connect(f"file:{out}/two.db?mode=ro", uri=True)
for ordinal, n in c.execute("SELECT device_ordinal, count(*) FROM trials GROUP BY 1"):
    print(f"two GPUs: {n} trials on GPU {ordinal}")
PY
