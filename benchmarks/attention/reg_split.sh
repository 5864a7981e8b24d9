# The wgmma attention kernel's reg_split tunable on the GPU machine (carry .gpu): the attention
# GPU tests (planted reg_split=0 configurations among them) and the FP8 / warp-specialised MoE
# tests, then exhaustive sweeps of two shapes where reg_split=0 is valid, reporting the best
# time of each reg_split value.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [ "${TESTS:-1}" = 1 ]; then
  timeout 240 .gpu/tests/gpu_attention_test > $OUT/attention_test.log 2>&1
  echo "gpu_attention_test rc=$?"; tail -3 $OUT/attention_test.log
  timeout 200 .gpu/tests/gpu_moe_op_test --gtest_filter='*Fp8*:*WarpSpecialised*' \
    > $OUT/moe_test.log 2>&1
  echo "gpu_moe_op_test rc=$?"; tail -3 $OUT/moe_test.log
fi
for shape in ${SHAPES:-b=8,hq=16,hkv=16,nq=2048,nk=2048,d=64 b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128}; do
  timeout 150 .gpu/bin/ktune sweep --op flash_attention --shape $shape --strategy exhaustive \
    --db $OUT/rs.db > $OUT/sweep_${shape//,/_}.log 2>&1
  echo "sweep $shape rc=$?"
done
.gpu/bin/ktune db export --db $OUT/rs.db --format csv > $OUT/trials.csv 2>/dev/null
python3 - "$OUT/trials.csv" <<'PY'
import csv, sys, collections
best = collections.defaultdict(lambda: float("inf"))
for r in csv.DictReader(open(sys.argv[1])):
    if r["status"] != "ok" or not r["median_us"]:
        continue
    split = "reg_split=0" if "reg_split=0" in r["params_key"] else "reg_split=1"
    if "impl=1" not in r["params_key"]:
        split = "impl=0"
    key = (r["problem_key"], split)
    best[key] = min(best[key], float(r["median_us"]))
for (p, s), v in sorted(best.items()):
    print(f"{p:55s} {s}: {v:9.2f} us")
PY
