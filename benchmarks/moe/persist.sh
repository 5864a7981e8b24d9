# The warp-specialised MoE GEMMs' variants on the GPU machine (carry the bundle, G=.gpu by
# default): gpu_hopper_test's multicast case (when the bundle has it) and gpu_moe_op_test's
# warp-specialised and graph cases (persistent ones on 5 CTAs, clusters of two among them), then
# a staged sweep per token bucket whose trials pair each persist1/persist2 = 1 or 2 and
# cluster1/cluster2 = 2 point with the same point at the default, and the best point of each
# block_m (192: three consumer warpgroups), then the layer bench from that database against the
# default. STEP: any of "test sweep bench" (default all).
set -u
G=${G:-.gpu}
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
STEP=${STEP:-test sweep bench}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [[ $STEP == *test* ]]; then
  if [ -x $G/tests/gpu_hopper_test ]; then
    timeout 60 $G/tests/gpu_hopper_test --gtest_filter='*Multicast*' > $OUT/hopper_test.log 2>&1
    echo "gpu_hopper_test *Multicast* rc=$?"; grep -E "Failure|^\[  (PASSED|FAILED)" \
      $OUT/hopper_test.log | head -5
  fi
  timeout ${TEST_LIMIT:-300} stdbuf -oL $G/tests/gpu_moe_op_test \
    --gtest_filter='*WarpSpecialised*:*Graph*' > $OUT/moe_test.log 2>&1
  echo "gpu_moe_op_test rc=$?"; grep -E "Failure|of .*; y" $OUT/moe_test.log | head -5
  grep -E "^\[  (PASSED|FAILED) " $OUT/moe_test.log
fi
if [[ $STEP == *sweep* ]]; then
  for t in ${TOKENS:-1024}; do
    timeout $(( ${LIMIT:-110} + 30 )) $G/bin/ktune sweep --op moe --dtype bf16 \
      --shape ${SHAPE:-e=8,k=2,h=4096,i=14336,routing=softmax_renorm} --tokens $t \
      --db $OUT/p.db --time-limit ${LIMIT:-110} > $OUT/sweep-$t.log 2>&1
    echo "sweep t=$t rc=$?"; grep -A3 "^op  " $OUT/sweep-$t.log | cut -c1-200
  done
  $G/bin/ktune db export --db $OUT/p.db --format csv > $OUT/trials.csv 2>/dev/null
  python3 - "$OUT/trials.csv" <<'PY'
import csv, re, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["median_us"]]
t = {(r["problem_key"], r["params_key"]): float(r["median_us"]) for r in rows}
print(len(rows), "ok trials; each variant point against the same point at the default:")
for prob in sorted({p for p, _ in t}):
    best = min((v, k) for (p, k), v in t.items() if p == prob)
    print(prob.split(",routing")[0], "best %.1f us" % best[0],
          ",".join(re.findall(r"(?:persist|cluster)\d=\d", best[1])) or "no variant")
    variants = ["persist1=1", "persist1=2", "persist2=1", "persist2=2", "cluster1=2",
                "cluster2=2"]
    # The best point of each block_m (192: three consumer warpgroups) in the same sweep.
    per_bm = {}
    for (p, k), v in t.items():
        if p == prob:
            bm = re.search(r"block_m=(\d+)", k).group(1)
            per_bm[bm] = min(per_bm.get(bm, v), v)
    print("  best per block_m: " + ", ".join(
        f"{bm}: {v:.1f} us" for bm, v in sorted(per_bm.items(), key=lambda x: int(x[0]))))
    for variant in variants:
        r = [v / t[(p, k.replace("," + variant, ""))] for (p, k), v in t.items()
             if p == prob and variant in k and (p, k.replace("," + variant, "")) in t]
        if r:
            print(f"  {variant}: {len(r):3d} pairs, time ratio median "
                  f"{statistics.median(r):.3f} min {min(r):.3f} max {max(r):.3f}")
PY
fi
if [[ $STEP == *bench* ]]; then
  python3 benchmarks/moe_bench.py --lib $G/lib/libktune.so --db $OUT/p.db --out $OUT \
    --layers ${LAYERS:-mixtral} --tokens $(echo ${TOKENS:-1024} | tr ' ' ,) --rounds 2 \
    --command "STEP=bench benchmarks/moe/persist.sh" > $OUT/bench.log 2>&1
  echo "bench rc=$?"; tail -${BENCH_TAIL:-25} $OUT/bench.log
fi
