#!/usr/bin/env bash
# Session 36, device call 4: longer staged sweeps of the small-T buckets that miss 95 % of copy on
# the H200 (Mixtral T=128, DeepSeek-like T=16..128) into a copy of the shipped h200.db, then the
# layer bench from it.
set -u
G=.gpu-m
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; date -u
cp db/shipped/h200.db $OUT/s.db
sw() {  # shape tokens seconds
  local s=$(date +%s)
  timeout $(( $3 + 25 )) $G/bin/ktune sweep --op moe --dtype bf16 --tokens $2 --db $OUT/s.db \
    --shape $1 --time-limit $3 > $OUT/sw.log 2>&1
  echo "sweep ${1%%,routing*} t=$2 rc=$? wall $(( $(date +%s) - s )) s" | tee -a $OUT/sweeps.log
  grep -A2 "^op  " $OUT/sw.log | cut -c1-150 | tee -a $OUT/sweeps.log
}
sw e=8,k=2,h=4096,i=14336,routing=softmax_renorm 128 120
for t in 16 32 64 128; do
  sw e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4 $t 50
done
rm -f $OUT/sw.log
python3 benchmarks/moe_bench.py --lib $G/lib/libktune.so --db $OUT/s.db --out $OUT \
  --layers mixtral,deepseek --tokens 16,32,64,128 --rounds 2 \
  --command "tmp36/run4.sh (session 36)" > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -11 $OUT/bench.log
