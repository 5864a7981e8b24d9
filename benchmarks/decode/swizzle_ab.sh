#!/usr/bin/env bash
# On the GPU machine: decode kernels of a new K/V layout against the build before it, in one
# call (stop 54: the varlen kernels swizzled, then d=256's). Needs two bundles
# (scripts/gpu_bundle.sh): NEW (default .gpu) and OLD (default .gpu-old, bin/ lib/ share/ of a
# build before the change).
#   test   TEST (default gpu_decode_varlen_test) of NEW with FILTER (default all), 2 shards;
#   bench  for each shape (SHAPES, ';'-separated; default the four varlen problems of the first
#          run), `ktune sweep` with OLD, then NEW, then OLD again for the first shape (the drift
#          between two sweeps of one build); then, per shape, the fastest point of each build and
#          the same-point NEW / OLD median ratio; every ok trial to $OUT/ab-trials.csv.gz.
#   TIMEOUT seconds per test shard (default 300).
# d=256 (second run): SHAPES="b=8,hq=16,hkv=4,nq=1,nk=8192,d=256,causal=no;..." TEST=gpu_decode_test
# FILTER='*256*:Pages/*'.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-swizzle-ab}
NEW=${NEW:-.gpu}
OLD=${OLD:-.gpu-old}
STEP=${STEP:-test bench}
TEST=${TEST:-gpu_decode_varlen_test}
FILTER=${FILTER:-*}
TIMEOUT=${TIMEOUT:-300}  # seconds per test shard (HeadDims/* of gpu_decode_test needs ~260)
SHAPES=${SHAPES:-"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no,varlen=yes;b=8,hq=32,hkv=32,nq=1,nk=8192,d=64,causal=no,varlen=yes;b=32,hq=32,hkv=8,nq=1,nk=2048,d=128,causal=no,varlen=yes;b=4,hq=32,hkv=8,nq=4,nk=6000,d=128,causal=yes,varlen=yes"}
mkdir -p "$OUT"
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
if [[ " $STEP " == *" test "* ]]; then
  for i in 0 1; do
    LD_LIBRARY_PATH=$PWD/$NEW/lib GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout "$TIMEOUT" \
      "$NEW/tests/$TEST" --gtest_filter="$FILTER" >"$OUT/test$i.log" 2>&1 &
  done
  wait
  grep -hE '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]' "$OUT"/test*.log
fi
if [[ " $STEP " == *" bench "* ]]; then
  IFS=';' read -ra shapes <<<"$SHAPES"
  sweep() {  # build tag shape-index
    local b=$1 tag=$2 i=$3
    LD_LIBRARY_PATH=$PWD/$b/lib "$b/bin/ktune" sweep --op flash_decode --shape "${shapes[$i]}" \
      --db "$OUT/$tag.db" >"$OUT/sweep-$tag-$i.log" 2>&1 || echo "sweep $tag $i failed: $(tail -2 "$OUT/sweep-$tag-$i.log")"
  }
  for i in "${!shapes[@]}"; do sweep "$OLD" old "$i"; sweep "$NEW" new "$i"; done
  sweep "$OLD" old2 0
  python3 - "$OUT" "$SHAPES" <<'PY'
import os, sqlite3, statistics, sys
out, shapes = sys.argv[1], sys.argv[2].split(";")
def load(tag):
    path = os.path.join(out, tag + ".db")
    if not os.path.exists(path):
        return {}
    con = sqlite3.connect(path)
    rows = con.execute("SELECT problem_key, params_key, median_us FROM trials WHERE op = "
                       "'flash_decode' AND status = 'ok'").fetchall()
    by = {}
    for p, k, us in rows:
        by.setdefault(p, {})[k] = us
    return by
old, new, old2 = load("old"), load("new"), load("old2")
print("| problem | points | old fastest us | new fastest us | new / old fastest | same point new / old: median (range) |")
print("|---|---|---|---|---|---|")
for p in old:
    a, b = old[p], new.get(p, {})
    common = [k for k in a if k in b]
    if not common:
        continue
    r = sorted(b[k] / a[k] for k in common)
    print(f"| {p} | {len(common)} | {min(a.values()):.1f} | {min(b.values()):.1f} | "
          f"{min(b.values()) / min(a.values()):.3f} | {statistics.median(r):.3f} ({r[0]:.3f}-{r[-1]:.3f}) |")
for p in old2:
    a, c = old[p], old2[p]
    r = sorted(c[k] / a[k] for k in a if k in c)
    print(f"drift, two sweeps of the old build, {p}: same point median {statistics.median(r):.3f} "
          f"({r[0]:.3f}-{r[-1]:.3f}); fastest {min(c.values()) / min(a.values()):.3f}")
# Every ok trial of the three builds' sweeps in one file (the databases may be too large to
# bring back from the device).
import csv, gzip
with gzip.open(os.path.join(out, "ab-trials.csv.gz"), "wt", newline="") as f:
    w = csv.writer(f)
    w.writerow(["set", "problem_key", "params_key", "median_us"])
    for tag, by in (("old", old), ("new", new), ("old2", old2)):
        for p, points in by.items():
            for k, us in points.items():
                w.writerow([tag, p, k, us])
PY
fi
