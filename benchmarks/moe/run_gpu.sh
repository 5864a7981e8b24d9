#!/bin/bash
# One device call: build the harness, check every configuration, memcheck two of them, time the
# Mixtral gemm1/gemm2 at T=1024. Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/moe_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
date -u
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
  benchmarks/moe/gemm_dev.cu -o /tmp/gemm_dev || exit 1
/tmp/gemm_dev check > "$OUT/check.log" 2>&1; echo "check rc=$?"
grep -c '^ok' "$OUT/check.log"; grep -v '^ok' "$OUT/check.log" | head -20
for n in 1 3; do
  timeout 60 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gemm_dev check only=$n > "$OUT/memcheck$n.log" 2>&1
  echo "memcheck only=$n rc=$?"; grep -E "ERROR SUMMARY|Invalid|check:" "$OUT/memcheck$n.log" | head -5
done
/tmp/gemm_dev time 2>&1 | tee "$OUT/time.log"
