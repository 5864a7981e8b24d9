# FP8 (e4m3) MoE on the GPU machine (development runs; carry .gpu): STEP=test runs the e4m3 and
# graph cases of gpu_moe_op_test, STEP=sweep sweeps both layers at T=16 and 128 (TOKENS), e4m3
# and bf16 (DTYPES), both layers (LAYERS: DS MX), each sweep within LIMIT seconds and BUDGET
# candidates per bucket (0: no limit).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [ "${STEP:-test}" = test ]; then
  timeout 540 .gpu/tests/gpu_moe_op_test --gtest_filter="${FILTER:-*Fp8*:*Graph*}" > $OUT/fp8_test.log 2>&1
  echo "test rc=$?"
  grep -E "e4m3|FAILED|PASSED|Failure" $OUT/fp8_test.log | cut -c1-200 | head -40
  exit 0
fi
DS=e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4
MX=e=8,k=2,h=4096,i=14336,routing=softmax_renorm
for dt in ${DTYPES:-e4m3 bf16}; do
  for l in ${LAYERS:-DS MX}; do
    timeout $(( ${LIMIT:-45} + 40 )) .gpu/bin/ktune sweep --op moe --dtype $dt --shape ${!l} \
      --tokens ${TOKENS:-16,128} --db $OUT/s.db --time-limit ${LIMIT:-45} \
      --budget ${BUDGET:-0} > $OUT/${l}_$dt.log 2>&1
    echo "$l $dt rc=$?"
  done
done
for dt in ${DTYPES:-e4m3 bf16}; do
  for l in ${LAYERS:-DS MX}; do
    f=${l}_$dt; echo "== $f"; grep -A4 "^t  " $OUT/$f.log | cut -c1-250; tail -1 $OUT/$f.log
  done
done
