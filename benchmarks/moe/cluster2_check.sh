#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu, carried): gemm2 in clusters of two
# (cluster2=2) against the shipped H100 rows at Mixtral T = 1024, 2048 and 4096, since its early
# weight loads (stop 69, benchmarks/moe/NOTES.md). Per T: `ktune sweep --params` with the
# shipped row and the same row with cluster2=2 (one process, re-timed interleaved), into
# $OUT/c2.db; then a copy of the shipped database with each row whose cluster2=2 point was
# faster replaced by it ($OUT/h100c.db: a bench database, not a shipped one: a re-shipped row
# comes from a sweep of its bucket), and benchmarks/run_moe.sh bench at T = 1024 and 4096 on
# the shipped rows and on those (graph-captured; Triton's figures, sort + torch._grouped_mm and
# cuBLAS in the same process). Tables under $OUT, a summary last. ~6 min.
set -uo pipefail
G=${G:-.gpu}
OUT=${OUT:-/tmp/moe_c2}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
DEV="NVIDIA H100 80GB HBM3"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader \
  | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
cp db/shipped/h100.db "$OUT/h100c.db"
for t in ${TS:-1024 2048 4096}; do
  shape="e=8,k=2,h=4096,i=14336,t=$t,routing=softmax_renorm,n_group=1,topk_group=1"
  best=$("$G/bin/ktune" best --db db/shipped/h100.db --op moe --shape "$shape" --device "$DEV")
  grep match <<<"$best" | tee -a "$OUT/rows.txt"
  if ! grep -q "match: exact" <<<"$best"; then
    echo "no current shipped row for t=$t (re-hash db/shipped/h100.db for this bundle)" >&2
    exit 1
  fi
  row=$(grep -o 'block_m=[^ ]*' <<<"$best" | head -1)
  timeout 200 "$G/bin/ktune" sweep --op moe --shape "$shape" --dtype bf16 --db "$OUT/c2.db" \
    --params "$row" --params "$row,cluster2=2" --json >"$OUT/sweep-$t.json" \
    2>"$OUT/sweep-$t.log"
  echo "sweep t=$t rc=$?"
  python3 - "$OUT/sweep-$t.json" "$OUT/h100c.db" "$shape" "$row" <<'PY'
import json, sqlite3, sys
path, dst, shape, row = sys.argv[1:]
res = json.load(open(path))
res = res[0] if isinstance(res, list) else res
given = {g["params"]: g["median_us"] for g in res.get("given", []) if "median_us" in g}
clus = row + ",cluster2=2"
a, b = given.get(row), given.get(clus)
t = shape.split("t=")[1].split(",")[0]
print(f"t={t}: shipped row {a} us, cluster2=2 {b} us, ratio {a / b:.3f}" if a and b
      else f"t={t}: missing re-timed points: {given}")
if a and b and b < a:
    c = sqlite3.connect(dst)
    c.execute("update best set params_key = ?, median_us = ? where op = 'moe' and "
              "problem_key = ?", (clus, b, shape))
    c.commit()
PY
done
for db in shipped c2; do
  d=db/shipped/h100.db
  [ "$db" = c2 ] && d=$OUT/h100c.db
  OUT=$OUT/bench-$db BUNDLE=$G DB=$d LAYERS=mixtral TOKENS=1024,4096 \
    timeout 150 benchmarks/run_moe.sh bench >"$OUT/bench-$db.log" 2>&1
  echo "bench $db rc=$?"
done
tar czf "$OUT/logs.tgz" -C "$OUT" . --exclude=logs.tgz 2>/dev/null
for db in shipped c2; do
  echo "== bench on $db rows"
  grep -E "^(layer|mixtral|copy|cuBLAS)|TFLOP" "$OUT/bench-$db.log" | cut -c1-160 | head -16
done
