#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   STEP=1 (stop 64, ~6 min): where DeepSeek-like T=128 loses its last 3 % on the H100, and
#   whether the H100's gemm1 is L2-bound as the H200's: the layer's timeline and ncu of every
#   kernel of one call on the shipped H100 rows, then benchmarks/moe/ncu_ws.sh at Mixtral T=1024
#   and 4096. Predictions in benchmarks/moe/NOTES.md (stop 64). Earlier checks are recorded in
#   benchmarks/results/h100-stop63-2026-12-05.md and pending-checks-h100-2026-12-05-stop61.md.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-pending}
G=${G:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/$G/bin/ktune PYTHONUNBUFFERED=1
K=$PWD/$G/bin/ktune
summary=()
note() { summary+=("$1"); echo "== $1"; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader \
  | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
case "${STEP:-1}" in
1)
  cp db/shipped/h100.db "$OUT/h100.db"
  for t in 128 64; do
    timeout 120 python3 benchmarks/moe_timeline.py --lib "$G/lib/libktune.so" --db "$OUT/h100.db" \
      --layer deepseek --tokens $t --calls 20 --show 5 >"$OUT/timeline_deepseek_$t.log" 2>&1
    note "timeline deepseek T=$t rc=$?: $(tail -2 "$OUT/timeline_deepseek_$t.log" | tr '\n' ' ')"
  done
  # Every kernel of the fourth call (five kernels a call; calls 1-3 skipped as warm-up).
  m=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  m=$m,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
  timeout 200 ncu --clock-control none --metrics "$m" -k regex:moe_ --launch-skip 15 \
    --launch-count 5 python3 benchmarks/moe_profile.py --lib "$G/lib/libktune.so" \
    --db "$OUT/h100.db" --layer deepseek --tokens 128 --calls 4 >"$OUT/ncu_deepseek_128.log" 2>&1
  note "ncu deepseek T=128 rc=$?"
  grep -E '^  [a-z_]+.*\(|gpu__time_duration|dram__bytes_read|dram__throughput|lts__throughput' \
    "$OUT/ncu_deepseek_128.log" | sed 's/  */ /g' | head -40
  OUT="$OUT/ncu_ws" DB="$OUT/h100.db" G="$G" SKIP_DENSE=1 NCU_LIMIT=150 \
    RUNS="mixtral:1024 mixtral:4096" timeout 330 bash benchmarks/moe/ncu_ws.sh \
    >"$OUT/ncu_ws.log" 2>&1
  note "ncu_ws mixtral 1024/4096 rc=$?: $(tail -6 "$OUT/ncu_ws.log" | tr '\n' ' ')"
  ;;
*) echo "STEP=1 only" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
