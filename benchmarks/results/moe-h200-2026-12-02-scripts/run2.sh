#!/usr/bin/env bash
# Session 36, device call 2: block_m=192 tests; 192 vs 128 per GEMM (ncu) and layer (bench);
# DeepSeek-like small-T sweeps into a copy of the shipped db, then the small-T bench.
set -u
G=.gpu-m
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; date -u
KTUNE_MOE_OP_CASE=block_m=192 timeout 120 stdbuf -oL $G/tests/gpu_moe_op_test \
  --gtest_filter='*WarpSpecialised*' > $OUT/moe192_test.log 2>&1
echo "gpu_moe_op_test block_m=192 rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure" $OUT/moe192_test.log
for bm in 128 192; do
  G=$G DB=tmp36/p$bm.db RUNS=mixtral:1024 OUT=$OUT/ncu$bm NCU_LIMIT=80 SKIP_DENSE=1 \
    bash benchmarks/moe/ncu_ws.sh > $OUT/ncu$bm.txt 2>&1
  grep -E "moe_gemm|gpu__time|lts__throughput|gmma" $OUT/ncu$bm.txt | tr -s ' ' | cut -c1-110
  python3 benchmarks/moe_bench.py --lib $G/lib/libktune.so --db tmp36/p$bm.db --out $OUT/b$bm \
    --layers mixtral --tokens 1024 --rounds 2 > $OUT/bench$bm.log 2>&1
  echo "bench $bm rc=$?"; grep -E "^mixtral " $OUT/bench$bm.log
done
cp db/shipped/h200.db $OUT/small.db
for t in 1 16 128; do
  timeout 75 $G/bin/ktune sweep --op moe --dtype bf16 --tokens $t --db $OUT/small.db \
    --shape e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4 \
    --time-limit 55 > $OUT/sweep_ds$t.log 2>&1
  echo "sweep deepseek t=$t rc=$?"
done
python3 benchmarks/moe_bench.py --lib $G/lib/libktune.so --db $OUT/small.db --out $OUT \
  --layers mixtral,deepseek --tokens 1,16,32,64,128 --rounds 2 \
  --command "tmp36/run2.sh (session 36)" > $OUT/bench_small.log 2>&1
echo "bench small rc=$?"; tail -14 $OUT/bench_small.log
