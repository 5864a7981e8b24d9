#!/bin/bash
# One device call for the warp-specialised GEMMs (gemm_ws_dev.cu): build with nvcc, check every
# ws configuration against the double references, then time impl 1 and 2 on the Mixtral and
# DeepSeek-like layers at T = 1024 and 4096. Logs go to $OUT; the summary ends stdout.
set -o pipefail
OUT=${OUT:-/tmp/moe_ws_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
date -u
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
  benchmarks/moe/gemm_ws_dev.cu -o /tmp/gemm_ws_dev -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
timeout ${CHECK_LIMIT:-150} /tmp/gemm_ws_dev check > "$OUT/ws_check.log" 2>&1
echo "check rc=$? ($(grep -c '^ok' "$OUT/ws_check.log") ok, $(grep -c '^FAIL' "$OUT/ws_check.log") FAIL)"
grep '^FAIL' "$OUT/ws_check.log" | cut -c1-240 | head -12
timeout ${TIME_LIMIT:-150} /tmp/gemm_ws_dev time > "$OUT/ws_time.log" 2>&1
echo "time rc=$?"
sed -n '/^summary/,$p' "$OUT/ws_time.log"
