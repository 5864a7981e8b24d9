#!/usr/bin/env bash
# On the GPU machine, from the repo root (after scripts/gpu_bundle.sh here, carrying .gpu):
# optionally tunes both MoE layers over every token bucket into one database (`ktune sweep --op
# moe`, wall time of each layer's sweep logged), then runs benchmarks/moe_bench.py against it:
# ktune tuned / default vs naive PyTorch vs sort + torch._grouped_mm, plain and CUDA-graph, with
# copy bandwidth and cuBLAS in the same process. moe.md, moe.json, gpu.txt and logs.tar.gz go to
# $OUT (the database too when swept there); the bench's summary is printed last.
#
# Usage: benchmarks/run_moe.sh [sweep] [bench]      (default: bench)
#   DB=path          tuned database (default $OUT/moe.db; the bench needs it unless NO_KTUNE)
#   LAYERS=mixtral,deepseek   TOKENS=1,16,128 (default: every bucket, 1..4096)
#   NO_KTUNE=1       torch baselines, correctness and ceilings only (no bundle needed)
#   BENCH_ARGS="--rounds 2 --samples 30"   more options for moe_bench.py
# A sweep resumes where an earlier one stopped (same DB), so a long one can span several calls.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-moe}
B=${BUNDLE:-.gpu}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
K=$B/bin/ktune
DB=${DB:-$OUT/moe.db}
LAYERS=${LAYERS:-mixtral,deepseek}
steps=" ${*:-bench} "
declare -A SHAPE=(
  [mixtral]="e=8,k=2,h=4096,i=14336,routing=softmax_renorm"
  [deepseek]="e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4"
  [kimi]="e=384,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=1,topk_group=1"
  [qwen3next]="e=512,k=10,h=2048,i=512,routing=softmax_renorm"
)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv >"$OUT/gpu.txt" 2>&1
summary=()
if [[ $steps == *" sweep "* ]]; then
  for layer in ${LAYERS//,/ }; do
    log="$OUT/logs/sweep-$layer.log"
    start=$(date +%s.%N)
    $K sweep --op moe --shape "${SHAPE[$layer]}" --dtype bf16 --db "$DB" \
      ${TOKENS:+--tokens "$TOKENS"} >"$log" 2>&1
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    line="sweep $layer (${SHAPE[$layer]}${TOKENS:+, tokens $TOKENS}) rc=$rc wall ${wall} s"
    echo "$line" | tee -a "$OUT/sweeps.txt"
    tail -5 "$log"
    summary+=("$line")
  done
fi
if [[ $steps == *" bench "* ]]; then
  kt=(--lib "$B/lib/libktune.so" --db "$DB")
  [ -n "${NO_KTUNE:-}" ] && kt=(--no-ktune)
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  PYTHONUNBUFFERED=1 python3 benchmarks/moe_bench.py "${kt[@]}" --out "$OUT" --layers "$LAYERS" \
    ${TOKENS:+--tokens "$TOKENS"} ${BENCH_ARGS:-} \
    --command "benchmarks/run_moe.sh${*:+ $*} (LAYERS=$LAYERS TOKENS=${TOKENS:-all} NO_KTUNE=${NO_KTUNE:-} BENCH_ARGS=${BENCH_ARGS:-})" \
    2>&1 | tee "$OUT/logs/bench.log"
  summary+=("bench rc=${PIPESTATUS[0]}")
fi
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo "==== run_moe.sh"
printf '%s\n' "${summary[@]}"
