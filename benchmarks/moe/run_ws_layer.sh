#!/bin/bash
# One device call after scripts/gpu_bundle.sh .gpu-moe: the GEMM harness (gemm_ws_dev.cu, impl 1
# and 2 per GEMM), then the whole layer (benchmarks/run_moe.sh bench, both layers, T = 1024 and
# 4096) twice: with .gpu-moe/w1.db (tuned = the wgmma tiles on impl 1) and .gpu-moe/w2.db (the
# same tiles on impl 2); "default" is the built-in default in both. GPU clocks, power and
# throttle reasons are logged between the steps. Logs under $OUT; tables last.
set -o pipefail
OUT=${OUT:-/tmp/moe_ws_layer}
mkdir -p "$OUT/w1" "$OUT/w2" /tmp/kc
export LD_LIBRARY_PATH=$PWD/.gpu-moe/lib KTUNE_CACHE_DIR=/tmp/kc
q() {
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader
}
echo "start: $(q)"; date -u
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
  benchmarks/moe/gemm_ws_dev.cu -o /tmp/gemm_ws_dev -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
timeout 120 /tmp/gemm_ws_dev time > "$OUT/ws_time.log" 2>&1
echo "harness rc=$?; now: $(q)"
for w in w1 w2; do
  BUNDLE=.gpu-moe OUT=$OUT/$w DB=.gpu-moe/$w.db LAYERS=mixtral,deepseek TOKENS=1024,4096 \
    timeout 150 benchmarks/run_moe.sh bench > "$OUT/$w/run.log" 2>&1
  echo "bench $w rc=$?; now: $(q)"
  rm -f "$OUT/$w/gpu.txt" "$OUT/$w/moe.json"
done
sed -n '/^summary/,$p' "$OUT/ws_time.log"
for w in w1 w2; do echo "== $w"; sed -n '/==== summary/,/correctness/p' "$OUT/$w/run.log" | cut -c1-130; grep "ceilings" "$OUT/$w/moe.md" | cut -c1-200; done
