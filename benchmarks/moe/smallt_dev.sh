#!/usr/bin/env bash
# On the GPU machine, from the repo root (no bundle needed): the small-T weight-stream questions
# of benchmarks/moe/SM90.md ("small T wants the weights as wgmma's M operand"). Builds and runs
# stream_probe.cu (cp.async rings as the tuned GEMMs hold them, and deep rings one CTA per SM)
# and swapab_dev.cu (gemm2 with swapped operands against the tuned mma.sync gemm2, checked
# against a double reference, DeepSeek-like T = 16..128). Logs under $OUT, the tables last.
set -u
OUT=${OUT:-/tmp/smallt}
mkdir -p "$OUT"
NVCC=${NVCC:-nvcc}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
$NVCC -O3 -std=c++17 -arch=sm_90a -I templates benchmarks/moe/stream_probe.cu \
  -o "$OUT/stream_probe" > "$OUT/build.log" 2>&1 &&
  $NVCC -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
    benchmarks/moe/swapab_dev.cu -o "$OUT/swapab_dev" -lcuda >> "$OUT/build.log" 2>&1
echo "build rc=$?"
timeout ${PROBE_LIMIT:-60} "$OUT/stream_probe" 738 > "$OUT/stream_probe.log" 2>&1
echo "stream_probe rc=$?"
timeout ${DEV_LIMIT:-240} "$OUT/swapab_dev" ${TOKENS:-16,32,64,128} > "$OUT/swapab_dev.log" 2>&1
echo "swapab_dev rc=$?"
cat "$OUT/stream_probe.log" "$OUT/swapab_dev.log"
