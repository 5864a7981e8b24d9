#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   STEP=1  on an H100: the short-span proposal for the H100 (benchmarks/decode/NOTES.md, stop
#           61): 64-key tiles of 4 warps at 3 stages over benchmarks/decode/short_spans_h100.txt
#   (stops 60-61's checks ran on the H100 on 2026-12-05:
#   benchmarks/results/pending-checks-h100-2026-12-05-stop61.md)
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
  python3 benchmarks/given_ab.py --ktune "$K" --problems benchmarks/decode/short_spans_h100.txt \
    --params block_n=64,warps=4,stages=3,splits=8 --params block_n=64,warps=4,stages=3,splits=4 \
    --params block_n=64,warps=4,stages=3 --out "$OUT/short_spans_h100" --deadline 400 \
    >"$OUT/short_spans_h100.log" 2>&1
  note "short spans H100 rc=$?: $(grep -E '^- point|not reached' \
    "$OUT/short_spans_h100/given_ab.md" 2>/dev/null | tr '\n' ' ')"
  ;;
*) echo "STEP=1 only" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
