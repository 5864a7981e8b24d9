#!/usr/bin/env bash
# Session 36, device call 5: staged sweeps (the MoE op's default strategy) of shipped-plan MoE
# buckets into a copy of h200.db, whose rows came from the model strategy: the warm start
# measures each shipped row's configuration in the same sweep, so the two compare in one run.
set -u
G=.gpu-m
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; date -u
cp db/shipped/h200.db $OUT/m.db
sw() {  # shape tokens seconds
  local s=$(date +%s)
  timeout $(( $3 + 25 )) $G/bin/ktune sweep --op moe --dtype bf16 --tokens $2 --db $OUT/m.db \
    --shape $1 --time-limit $3 > $OUT/sw.log 2>&1
  echo "sweep ${1%%,routing*} t=$2 rc=$? wall $(( $(date +%s) - s )) s" | tee -a $OUT/sweeps.log
  grep -A2 "^op  " $OUT/sw.log | cut -c1-150 | tee -a $OUT/sweeps.log
}
for t in 256 512 32; do sw e=8,k=2,h=4096,i=14336,routing=softmax_renorm $t 90; done
for t in 16 128; do sw e=64,k=6,h=2048,i=1408,routing=softmax $t 45; done
rm -f $OUT/sw.log
