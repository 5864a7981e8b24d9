#!/usr/bin/env bash
# On the GPU machine, from the repo root, with a bundle from scripts/gpu_bundle.sh in $BUNDLE
# (default .gpu). Step "sweep": tunes every benchmark row into $DB (cold compile cache for the
# first sweep, whose wall time is logged). Step "bench": runs benchmarks/fused_bench.py on $DB.
# Logs under $OUT; a short table last.
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu}
OUT=${OUT:-/tmp/ktune-out}
DB=${DB:-$OUT/fused.db}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
K=$BUNDLE/bin/ktune
ops=${OPS:-add_rmsnorm layernorm bias_act swiglu softmax}
shapes=${SHAPES:-"16384x4096 16384x1024 16384x8192 1x4096 16x4096 64x4096"}
for step in ${STEPS:-sweep bench}; do
  case $step in
    sweep)
      for op in $ops; do
        for s in $shapes; do
          m=${s%x*}; n=${s#*x}
          extra=""; [ "$op" = bias_act ] && extra=",act=gelu_tanh"
          t0=$(date +%s.%N)
          $K sweep --op "$op" --shape "m=$m,n=$n$extra" --dtype bf16 --db "$DB" --json \
            >"$OUT/sweep-$op-$s.json" 2>"$OUT/sweep-$op-$s.log"
          rc=$?
          t1=$(date +%s.%N)
          python3 - "$OUT/sweep-$op-$s.json" "$op" "$s" "$rc" "$t0" "$t1" <<'PY' | tee -a "$OUT/sweeps.txt"
import json, sys
path, op, s, rc, t0, t1 = sys.argv[1:]
wall = float(t1) - float(t0)
try:
    j = json.load(open(path))
    b = j.get("best") or {}
    print(f"{op:12s} {s:11s} rc={rc} wall={wall:5.1f}s best={b.get('median_us', 0):8.2f}us "
          f"{b.get('tb_per_s', 0):.3f}TB/s copy%={j.get('percent_of_copy_bandwidth', 0):.0f} "
          f"vs default {j.get('speedup_over_default', 0):.2f}x {b.get('params', '')}")
except Exception as e:
    print(f"{op:12s} {s:11s} rc={rc} wall={wall:5.1f}s (no summary: {e})")
PY
        done
      done ;;
    bench)
      PYTHONUNBUFFERED=1 python3 benchmarks/fused_bench.py --lib "$BUNDLE/lib/libktune.so" --db "$DB" \
        --out "$OUT/fused.md" >"$OUT/bench.log" 2>&1
      echo "bench rc=$?"
      tail -n 40 "$OUT/fused.md" 2>/dev/null || tail -n 30 "$OUT/bench.log" ;;
  esac
done
