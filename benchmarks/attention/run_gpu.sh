#!/bin/bash
# One device call: correctness, timing, torch baselines, a short ncu look. Expects the harness
# prebuilt at .gpu/attention/fa_dev (carried); builds it if missing. Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/fa_out}
mkdir -p "$OUT"
BIN=.gpu/attention/fa_dev
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
if [ ! -x "$BIN" ]; then
  mkdir -p .gpu/attention
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
    benchmarks/attention/fa_dev.cu -o "$BIN" || exit 1
fi
$BIN check big > "$OUT/check.log" 2>&1; echo "check rc=$?"
grep -v '^ok \|^  ' "$OUT/check.log" | tail -25
$BIN time csv="$OUT/ours1.csv" > "$OUT/time1.log" 2>&1; echo "time rc=$?"
$BIN time csv="$OUT/ours.csv" > "$OUT/time.log" 2>&1; echo "time (repeat) rc=$?"
if [ -n "$PROFILE" ]; then
  M=""
  for r in barrier long_scoreboard short_scoreboard math_pipe_throttle mio_throttle wait \
           not_selected selected dispatch_stall lg_throttle no_instruction branch_resolving \
           tex_throttle drain membar sleeping; do
    M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  M="${M#,},sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
  M="$M,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
  timeout 150 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --metrics "$M" \
    -k regex:flash_attention -s 1 -c 1 $BIN profile=$PROFILE > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
  grep -E "stalled|hmma|pipe_xu|issue_active" "$OUT/ncu.log" | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $NF}' | tr '\n' ' '; echo
fi
PYTHONUNBUFFERED=1 python3 benchmarks/attention/sdpa_bench.py "$OUT/ours.csv" "$OUT/torch.csv" \
  2> "$OUT/torch_err.log" | tee "$OUT/summary.txt"
