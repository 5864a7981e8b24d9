# fuse_route (routing and alignment in one block) on the GPU machine (carry .gpu; each step fits
# one 10-minute device call):
#   STEP=test      the fused cases of gpu_moe_route_test (the one-block kernel against the route
#                  kernel then the align kernel, every output bit for bit) and of gpu_moe_op_test
#                  (the layer against both references and against fuse_route=0 bit for bit,
#                  graph capture), then the route test's times: route + align against the fused
#                  kernel.
#   STEP=sweep     staged sweeps of DeepSeek-like T=16 and 128 and Mixtral T=16: the route group
#                  times fuse_route 0 and 1 at each route_lanes x route_vec with every other
#                  tunable held, in one sweep process; each fuse_route=1 trial is printed beside
#                  the same point at 0. LIMIT_DS, LIMIT_MX: seconds per layer (240, 150).
#   STEP=timeline  moe_timeline.py at DeepSeek-like T=128 (TOKENS) with the swept database, then
#                  with the built-in default (needs torch).
# The database is $DB (default .gpu-fuse/f.db: ignored by git and not carried, so it stays on a
# warm machine between the sweep and the timeline), copied to $OUT after the sweep.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
STEP=${STEP:-test}
if [ "$STEP" = test ]; then
  timeout 200 stdbuf -oL .gpu/tests/gpu_moe_route_test \
    --gtest_filter="${ROUTE_FILTER:-*Fused*:GpuMoeRoute.Times}" > $OUT/route_test.log 2>&1
  echo "gpu_moe_route_test rc=$?"
  grep -E "Failure|FAILED|PASSED|fused launches checked|seed" $OUT/route_test.log | head -8
  grep -E "^route\+align" $OUT/route_test.log | cut -c1-130
  timeout 330 stdbuf -oL .gpu/tests/gpu_moe_op_test \
    --gtest_filter="${OP_FILTER:-*Fused*:*Graph*}" > $OUT/op_test.log 2>&1
  echo "gpu_moe_op_test rc=$?"
  grep -E "Failure|differs|FAILED|PASSED" $OUT/op_test.log | cut -c1-200 | head -12
  exit 0
fi
DB=${DB:-.gpu-fuse/f.db}
mkdir -p "$(dirname "$DB")"
if [ "$STEP" = timeline ]; then
  for db in "$DB" ""; do
    timeout 150 python3 benchmarks/moe_timeline.py --lib .gpu/lib/libktune.so ${db:+--db $db} \
      --layer deepseek --tokens ${TOKENS:-128} --calls 20 --show 3 > $OUT/timeline.log 2>&1
    echo "timeline ${db:-default} rc=$?"; head -1 $OUT/timeline.log | cut -c1-250
    tail -4 $OUT/timeline.log | cut -c1-250
  done
  exit 0
fi
DS=e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4
MX=e=8,k=2,h=4096,i=14336,routing=softmax_renorm
for run in "DS 16,128 ${LIMIT_DS:-240}" "MX 16 ${LIMIT_MX:-150}"; do
  set -- $run
  timeout $(( $3 + 40 )) .gpu/bin/ktune sweep --op moe --dtype bf16 --shape ${!1} --tokens $2 \
    --db "$DB" --time-limit $3 > $OUT/sweep_$1.log 2>&1
  echo "sweep $1 t=$2 rc=$?"; grep -A3 "^t  " $OUT/sweep_$1.log | cut -c1-250
done
cp "$DB" $OUT/
.gpu/bin/ktune db export --db "$DB" --format csv > $OUT/trials.csv 2>/dev/null
python3 - "$OUT/trials.csv" <<'PY'
import csv, re, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["median_us"]]
t = {(r["problem_key"], r["params_key"]): float(r["median_us"]) for r in rows}
print(len(rows), "ok trials")
ratios = {}
for (p, k), v in sorted(t.items()):
    if "fuse_route=1" in k:
        b = t.get((p, k.replace(",fuse_route=1", "")))
        if b:
            ratios.setdefault(p, []).append(b / v)
        tokens = re.search(r"(?:^|,)t=(\d+)", p).group(1)
        print(f"{'%.1f' % b if b else '-':>9} -> {v:9.1f} us  t={tokens:>4}  {k[-110:]}")
for p, r in ratios.items():
    print(f"fuse_route=0 / =1, median of {len(r)} pairs: {statistics.median(r):.4f}  {p}")
PY
