#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   (none pending: stop 61 ran every check stops 60-61 wrote, on the H100 on 2026-12-05;
#   benchmarks/results/pending-checks-h100-2026-12-05-stop61.md. Add the next ones as STEP=1..)
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
case "${STEP:-}" in
*) echo "no check is pending (benchmarks/results/pending-checks-h100-2026-12-05-stop61.md)" >&2
   exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
