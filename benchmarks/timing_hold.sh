#!/usr/bin/env bash
# On the GPU machine, from the repo root: the tuner's timing of short kernels with and without
# the queue hold (tuner/queue_hold.hpp). Each problem is swept exhaustively by two ktune builds,
# A B A B (BEFORE, a CLI built without the hold, then $G's; each build its own compile cache, so
# round 1 compiles while it times and round 2 does not): per build, problem and round, the
# trials' median spread (p90 - p10 over the median) and the best over the first trial (the
# default, measured first: fallback_quality.py's ratio); per problem the geometric mean over the
# configurations of the new build's median over the old one's (both rounds' medians).
#
# Usage: G=.gpu BEFORE=path/to/old/ktune [OUT=dir] [PROBLEMS="op|shape;op|shape"]
#        bash benchmarks/timing_hold.sh
set -u
OUT=${OUT:-/tmp/timing-hold}
G=${G:-.gpu}
NEW=${NEW:-$PWD/$G/bin/ktune}
BEFORE=${BEFORE:?BEFORE=path to a ktune CLI built without the queue hold}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
PROBLEMS=${PROBLEMS:-"flash_attention|b=2,hq=28,hkv=4,nq=100,nk=100,d=64,causal=yes;\
flash_attention|b=24,hq=12,hkv=12,nq=300,nk=300,d=64,causal=no;\
flash_decode|b=4,hq=16,hkv=2,nq=4,nk=2000,d=128,causal=yes;\
add_rmsnorm|m=7,n=5120;softmax|m=100,n=5120;swiglu|m=8192,n=14336"}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader |
  tee "$OUT/gpu.txt"
IFS=';' read -ra list <<< "$PROBLEMS"
for round in 1 2; do
  for item in "${list[@]}"; do
    op=${item%%|*}; shape=${item#*|}
    for build in before new; do
      bin=$BEFORE; [ $build = new ] && bin=$NEW
      db="$OUT/$build-$round.db"
      # A compile cache per build: round 1 compiles while it times (cold), round 2 does not.
      export KTUNE_CACHE_DIR=$OUT/cache-$build
      start=$(date +%s.%N)
      timeout 120 "$bin" sweep --op "$op" --shape "$shape" --strategy exhaustive --db "$db" \
        --json > "$OUT/logs/$build-$round-$op-${shape//[=,]/_}.json" 2>&1
      echo "$build round $round $op $shape rc=$? wall $(awk -v a="$start" \
        -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
    done
  done
done
python3 - "$OUT" <<'PY'
import math, sqlite3, statistics, sys
out = sys.argv[1]
def trials(build, rnd):
    con = sqlite3.connect(f"{out}/{build}-{rnd}.db")
    rows = con.execute("SELECT op, problem_key, params_key, median_us, spread_pct FROM trials "
                       "WHERE status = 'ok' ORDER BY id").fetchall()
    con.close()
    d = {}
    for op, p, k, m, s in rows:
        d.setdefault((op, p), []).append((k, m, s))
    return d
t = {(b, r): trials(b, r) for b in ("before", "new") for r in (1, 2)}
def geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"{'problem':58} {'build':6} {'spread % r1/r2':>15} {'best/first r1/r2':>17} "
      f"{'best us':>8} {'new/before':>10}")
for key in t[("new", 1)]:
    for b in ("before", "new"):
        rs = [t[(b, r)].get(key, []) for r in (1, 2)]
        if not all(rs):
            continue
        spread = "/".join(f"{statistics.median(s for _, _, s in rr):.1f}" for rr in rs)
        first = "/".join(f"{min(m for _, m, _ in rr) / rr[0][1]:.3f}" for rr in rs)
        best = min(m for rr in rs for _, m, _ in rr)
        ratio = ""
        if b == "new":
            med = {}
            for bb in ("before", "new"):
                d = {}
                for r in (1, 2):
                    for k, m, _ in t[(bb, r)].get(key, []):
                        d.setdefault(k, []).append(m)
                med[bb] = {k: statistics.median(v) for k, v in d.items()}
            common = [k for k in med["new"] if k in med["before"]]
            ratio = f"{geo([med['new'][k] / med['before'][k] for k in common]):.3f}"
        print(f"{(key[0] + ' ' + key[1])[:58]:58} {b:6} {spread:>15} {first:>17} {best:8.2f} "
              f"{ratio:>10}")
PY
