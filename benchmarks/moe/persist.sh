# The persistent warp-specialised MoE GEMMs on the GPU machine (carry .gpu): gpu_moe_op_test's
# warp-specialised cases (persistent ones on 5 CTAs among them), then a staged sweep of one
# Mixtral bucket whose trials pair each persist1/persist2=1 point with the same point at 0.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
timeout ${TEST_LIMIT:-150} stdbuf -oL .gpu/tests/gpu_moe_op_test \
  --gtest_filter='*WarpSpecialised*' > $OUT/moe_test.log 2>&1
echo "gpu_moe_op_test rc=$?"; grep -E "Failure|of .*; y" $OUT/moe_test.log | head -5; tail -2 $OUT/moe_test.log
timeout $(( ${LIMIT:-110} + 30 )) .gpu/bin/ktune sweep --op moe --dtype bf16 \
  --shape ${SHAPE:-e=8,k=2,h=4096,i=14336,routing=softmax_renorm} --tokens ${TOKENS:-1024} \
  --db $OUT/p.db --time-limit ${LIMIT:-110} > $OUT/sweep.log 2>&1
echo "sweep rc=$?"; grep -A3 "^t  " $OUT/sweep.log | cut -c1-250
.gpu/bin/ktune db export --db $OUT/p.db --format csv > $OUT/trials.csv 2>/dev/null
python3 - "$OUT/trials.csv" <<'PY'
import csv, re, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["median_us"]]
t = {(r["problem_key"], r["params_key"]): float(r["median_us"]) for r in rows}
print(len(rows), "ok trials")
for (p, k), v in sorted(t.items()):
    if "persist" in k:
        base = re.sub(r",persist[12]=1", "", k)
        b = t.get((p, base))
        print(f"{'%.1f' % b if b else '-':>9} -> {v:9.1f} us  {k[-90:]}")
PY
