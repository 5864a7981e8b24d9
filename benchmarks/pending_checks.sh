#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   (none pending: stop 63's check, the H100 short-span proposal, ran on 2026-12-05 and is
#   recorded in benchmarks/results/h100-stop63-2026-12-05.md; stops 60-61's in
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
case "${STEP:-}" in
*) echo "no check pending (add one here as STEP=1)" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
