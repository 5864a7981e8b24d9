#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# Two device calls of under 10 minutes: STEP=1, then STEP=2. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   STEP=1  tuner_test's --params case; the two MoE block_m proposals (benchmarks/moe/NOTES.md,
#           stop 60) through benchmarks/given_ab.py
#   STEP=2  short_spans' three stages: fallback_quality.py --only 439-446; gpu_decode_test's
#           defaults and d=96 tiles
#   STEP=3  e4m3 early=1 and vt_smem=1 (benchmarks/attention/NOTES.md, stop 61):
#           gpu_attention_test's e4m3 cases, then each against the default over
#           benchmarks/attention/fp8_early.txt (bundle TESTS="gpu_attention_test ..." for this step)
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
  timeout 120 "$G/tests/tuner_test" --gtest_filter='Tuner.GivenPoints*' >"$OUT/tuner.log" 2>&1
  note "tuner_test GivenPoints rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tuner.log" | tr '\n' ' ')"
  for set in 12_16 29_32; do
    # shellcheck disable=SC2054  # the commas are inside each --params value
    if [ "$set" = 12_16 ]; then
      params=(--params block_m=32 --params block_m=32,bn2=64,bk2=64,warps2=2,group2=8
              --params block_m=32,bn1=128,bk1=128,warps1=4,stages1=3,bn2=128,bk2=64,warps2=4,stages2=4,group2=8)
    else
      params=(--params block_m=64
              --params block_m=64,bn1=64,bk1=64,stages1=3,bn2=128,bk2=64,warps2=4,stages2=4,group2=8
              --params block_m=64,bn1=64,bk1=64,stages1=4,impl1=2)
    fi
    python3 benchmarks/given_ab.py --ktune "$K" --problems "benchmarks/moe/rows_$set.txt" \
      "${params[@]}" --out "$OUT/moe_$set" --deadline 200 >"$OUT/moe_$set.log" 2>&1
    note "moe rows $set rc=$?: $(grep -E '^- point|not reached' "$OUT/moe_$set/given_ab.md" \
      2>/dev/null | tr '\n' ' ')"
  done
  ;;
2)
  timeout 330 python3 benchmarks/fallback_quality.py --ktune "$K" --out "$OUT/short_spans" \
    --only 439,440,441,442,443,444,445,446 --deadline 280 >"$OUT/short_spans.log" 2>&1
  note "short_spans 439-446 rc=$?: $(tail -1 "$OUT/short_spans.log")"
  timeout 200 "$G/tests/gpu_decode_test" \
    --gtest_filter='HeadDims/GpuDecode.DefaultsMatchTheReference/*:D96Tiles/*' \
    >"$OUT/decode_test.log" 2>&1
  note "gpu_decode_test rc=$? $(grep -cE '^\[       OK' "$OUT/decode_test.log") ok, \
$(grep -cE '^\[  FAILED  \] .*\(' "$OUT/decode_test.log") failed"
  ;;
3)
  timeout 240 "$G/tests/gpu_attention_test" --gtest_filter='*E4m3*:*LazyRescale*' \
    >"$OUT/e4m3_test.log" 2>&1
  note "gpu_attention_test e4m3 rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/e4m3_test.log" \
    | tr '\n' ' ')"
  python3 benchmarks/given_ab.py --ktune "$K" --problems benchmarks/attention/fp8_early.txt \
    --params early=1 --params vt_smem=1 --params early=1,vt_smem=1 \
    --out "$OUT/fp8_early" --deadline 280 >"$OUT/fp8_early.log" 2>&1
  note "fp8 early / vt_smem rc=$?: $(grep -E '^- point|not reached' "$OUT/fp8_early/given_ab.md" \
    2>/dev/null | tr '\n' ' ')"
  ;;
*) echo "STEP=1, 2 or 3" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
