#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu): the call's two fixed ends at small T, each
# against the shipped H100 row it modifies, at DeepSeek-like T in $TS (default 16 32 64 128):
#   fuse_route=2    routing and alignment in the route kernel's grid, no align kernel
#                   (templates/moe/route_sort.cuh; stop 67)
#   fuse_combine=1  the combine inside gemm2, no combine kernel (moe_gemm_kernel's COMBINE;
#                   stop 68)
# and both together. Predictions in benchmarks/moe/NOTES.md (stops 67 and 68).
#   1. The four points timed by `ktune sweep --params` in one process per problem (the layer's
#      median, as the sweep times it); the database keeps the fastest per T. Table: $OUT/pairs.md.
#   2. The layer bench (graph-captured, copy in the same process) on that database: the bar.
#   3. The per-kernel timeline at T=128 of the fastest point and of the shipped row.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-fusion}
G=${G:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
K=${KTUNE:-$G/bin/ktune}
SHAPE="e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4"
for t in ${TS:-16 32 64 128}; do
  # The H100 row of db/shipped/h100.db at this bucket (its match printed: it must be exact).
  "$K" best --db db/shipped/h100.db --op moe --shape "$SHAPE,t=$t" --dtype bf16 \
    --device 'NVIDIA H100 80GB HBM3' >"$OUT/row-t$t.txt" 2>&1
  p=$(head -1 "$OUT/row-t$t.txt" | sed 's/.*: //')
  # fuse_combine leaves combine_vec at its first value (no combine kernel).
  c=$(echo "$p" | sed 's/combine_vec=[0-9]*/combine_vec=4/'),fuse_combine=1
  echo "t=$t $(grep match "$OUT/row-t$t.txt") $p"
  "$K" sweep --op moe --shape "$SHAPE,t=$t" --dtype bf16 --db "$OUT/fusion.db" \
    --params "$p" --params "$p,fuse_route=2" --params "$c" --params "$c,fuse_route=2" \
    >"$OUT/sweep-t$t.log" 2>&1
  echo "t=$t rc=$?"
  if [ "$t" = 128 ]; then
    "$K" sweep --op moe --shape "$SHAPE,t=$t" --dtype bf16 --db "$OUT/plain128.db" \
      --params "$p" >"$OUT/sweep-plain128.log" 2>&1
  fi
done
python3 benchmarks/moe/trials_table.py "$OUT/fusion.db" fuse_route,fuse_combine \
  >"$OUT/pairs.md" 2>&1
cat "$OUT/pairs.md"
TSL=$(echo ${TS:-16 32 64 128} | tr ' ' ',')
DB="$OUT/fusion.db" LAYERS=deepseek TOKENS="$TSL" OUT="$OUT/bench" BUNDLE="$G" \
  timeout 200 bash benchmarks/run_moe.sh bench >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E "^\| deepseek|copy|cuBLAS" "$OUT/bench/moe.md" | head -20
for db in fusion plain128; do
  timeout 60 python3 benchmarks/moe_timeline.py --lib "$G/lib/libktune.so" --db "$OUT/$db.db" \
    --layer deepseek --tokens 128 >"$OUT/timeline-$db.log" 2>&1
  echo "timeline $db rc=$?"
  tail -8 "$OUT/timeline-$db.log"
done
