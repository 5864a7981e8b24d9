#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): `ktune sweep --op moe`
# over every token bucket of one layer, timed. A device command may run 10 minutes, so a sweep
# can take several calls: give the same DB (carried back and forth) and the next call resumes
# where the last stopped (--time-limit); the compile cache lives in .gpu-cache, so a call on a
# fresh machine compiles again (counted in its wall time).
# Usage: LAYER=mixtral|deepseek LIMIT=seconds DB=path benchmarks/moe/run_sweep.sh
set -uo pipefail
OUT=${OUT:-/tmp/ktune-out}
B=${BUNDLE:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$PWD/.gpu-cache}
LAYER=${LAYER:-mixtral}
LIMIT=${LIMIT:-0}
DB=${DB:-$OUT/moe.db}
case "$LAYER" in
  mixtral) SHAPE="e=8,k=2,h=4096,i=14336,routing=softmax_renorm" ;;
  deepseek) SHAPE="e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4" ;;
  *) echo "LAYER must be mixtral or deepseek" >&2; exit 2 ;;
esac
cached=$(find "$KTUNE_CACHE_DIR" -type f 2>/dev/null | wc -l)
echo "$(date -u +%FT%TZ) $LAYER: cache entries before: $cached; db: $DB"
start=$(date +%s.%N)
$B/bin/ktune sweep --op moe --shape "$SHAPE" ${TOKENS:+--tokens $TOKENS} --db "$DB" \
  --time-limit "$LIMIT" >"$OUT/sweep-$LAYER.txt" 2>"$OUT/sweep-$LAYER.log"
rc=$?
end=$(date +%s.%N)
echo "sweep $LAYER rc=$rc wall $(python3 -c "print(round($end - $start, 1))") s (limit $LIMIT)"
tail -22 "$OUT/sweep-$LAYER.txt"
