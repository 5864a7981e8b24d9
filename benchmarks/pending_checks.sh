#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   STEP=1 (stop 64, ~6 min): where DeepSeek-like T=128 loses its last 3 % on the H100, and
#   whether the H100's gemm1 is L2-bound as the H200's: the layer's timeline and ncu of every
#   kernel of one call on the shipped H100 rows, then benchmarks/moe/ncu_ws.sh at Mixtral T=1024
#   and 4096. Predictions in benchmarks/moe/NOTES.md (stop 64).
#   STEP=2 (stop 64, ~9 min; bundle with gpu_moe_op_test): cols1/cols2 (several column blocks
#   per CTA on the mma.sync GEMMs): their GPU cases, then each point beside the default on the
#   check set benchmarks/moe/cols_check.txt, then DeepSeek-like T=16..128 swept with them and
#   benched (graph, copy in the same process). Prediction in benchmarks/moe/NOTES.md (stop 64).
#   Earlier checks are recorded in
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
  m=$m,lts__throughput.avg.pct_of_peak_sustained_elapsed
  m=$m,sm__warps_active.avg.pct_of_peak_sustained_active
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
2)
  timeout 150 "$G/tests/gpu_moe_op_test" --gtest_filter='*ColumnBlocks*:MoeOpCases.*' \
    >"$OUT/cols_tests.log" 2>&1
  note "gpu_moe_op_test cols rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cols_tests.log" \
    | tr '\n' ' ')"
  timeout 200 python3 benchmarks/given_ab.py --ktune "$K" \
    --problems benchmarks/moe/cols_check.txt --params cols1=2 --params cols2=4 \
    --params cols1=2,cols2=4 --params cols1=4,cols2=4 \
    --out "$OUT/cols_ab" --deadline 190 >"$OUT/cols_ab.log" 2>&1
  note "cols A/B rc=$?: $(grep -E '^- point|not reached' "$OUT/cols_ab/given_ab.md" \
    2>/dev/null | tr '\n' ' ')"
  cp db/shipped/h100.db "$OUT/h100.db"
  OUT="$OUT/ds" DB="$OUT/ds.db" LAYERS=deepseek TOKENS=16,32,64,128 timeout 230 \
    benchmarks/run_moe.sh sweep >"$OUT/ds_sweep.log" 2>&1
  note "deepseek sweep rc=$?: $(tail -1 "$OUT/ds/sweeps.txt" 2>/dev/null)"
  OUT="$OUT/ds" DB="$OUT/ds.db" LAYERS=deepseek TOKENS=16,32,64,128 timeout 150 \
    benchmarks/run_moe.sh bench >"$OUT/ds_bench.log" 2>&1
  note "deepseek bench rc=$?"
  grep -E '^deepseek ' "$OUT/ds_bench.log" | tail -4
  ;;
*) echo "STEP=1 or 2" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
