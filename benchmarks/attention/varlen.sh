# Variable-length batches on the wgmma attention kernel, on the GPU machine (carry the bundle
# as BUNDLE, default .gpu): the attention GPU tests (the varlen cases run planted impl=1 points)
# and, unless TESTS=0, the FP8 / warp-specialised MoE tests; then exhaustive sweeps of varlen
# problems (both kernels in one space; the tuner's cu_seqlens, lengths in [1, nq]) and, per
# problem, the best time of impl=0, of impl=1 and the default's, all from the same sweep.
set -u
B=${BUNDLE:-.gpu}
export LD_LIBRARY_PATH=$PWD/$B/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 $B/tests/gpu_attention_test > $OUT/attention_test.log 2>&1
  echo "gpu_attention_test rc=$?"; grep -E "FAILED|PASSED" $OUT/attention_test.log | tail -8
  timeout 200 $B/tests/gpu_moe_op_test --gtest_filter='*Fp8*:*WarpSpecialised*' \
    > $OUT/moe_test.log 2>&1
  echo "gpu_moe_op_test rc=$?"; tail -3 $OUT/moe_test.log
fi
SHAPES=${SHAPES:-"b=8,hq=32,hkv=8,nq=4096,nk=4096,d=128,causal=yes,varlen=yes
b=16,hq=16,hkv=16,nq=1024,nk=1024,d=64,causal=no,varlen=yes
b=4,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=yes,varlen=yes"}
for shape in $SHAPES; do
  timeout 200 $B/bin/ktune sweep --op flash_attention --shape $shape --strategy exhaustive \
    --db $OUT/varlen.db > $OUT/sweep_${shape//,/_}.log 2>&1
  echo "sweep $shape rc=$?"; tail -2 $OUT/sweep_${shape//,/_}.log
done
$B/bin/ktune db export --db $OUT/varlen.db --format csv > $OUT/trials.csv 2>/dev/null
python3 - "$OUT/trials.csv" <<'PY'
import csv, sys, collections
best = collections.defaultdict(lambda: (float("inf"), ""))
for r in csv.DictReader(open(sys.argv[1])):
    if r["status"] != "ok" or not r["median_us"]:
        continue
    kind = "impl=1" if "impl=1" in r["params_key"] else "impl=0"
    key = (r["problem_key"], kind)
    best[key] = min(best[key], (float(r["median_us"]), r["params_key"]))
for (p, kind), (us, params) in sorted(best.items()):
    print(f"{p}\n  best {kind}: {us:9.2f} us  {params}")
PY
