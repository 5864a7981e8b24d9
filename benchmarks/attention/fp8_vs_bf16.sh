#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu): e4m3 attention against our own bf16 (issue 11's
# FP8 bar: >= 1.5x at D=128, N >= 4k), and an e4m3 change against the library before it.
#   STEP=test   gpu_attention_test's e4m3 cases (FILTER to choose others)
#   STEP=sweep  per shape, in one call: the e4m3 sweep with BEFORE (a ktune CLI built from the
#               commit before the change; skipped if unset), with $G's, the bf16 sweep, then
#               $G's and BEFORE's e4m3 again (A B bf16 B A: drift of clocks and power cancels);
#               each sweep times every valid point (`ktune sweep`), the best of each is kept
# Tables to $OUT/fp8.txt, logs packed in $OUT/logs.tgz (the device tool brings back 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/ktune-fp8}
mkdir -p "$OUT"
G=${G:-.gpu}
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/$G/bin/ktune
K=$PWD/$G/bin/ktune
BEFORE=${BEFORE:-}
steps=" ${STEP:-test sweep} "
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader |
  tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
if [[ $steps == *" test "* ]]; then
  timeout ${TEST_TIMEOUT:-300} $G/tests/gpu_attention_test --gtest_filter="${FILTER:-*E4m3*}" \
    >"$OUT/test.log" 2>&1
  echo "gpu_attention_test ${FILTER:-*E4m3*} rc=$? $(grep -E '^\[  (PASSED|FAILED) ' \
    "$OUT/test.log" | tr '\n' ' ')" | tee -a "$OUT/fp8.txt"
fi
if [[ $steps == *" sweep "* ]]; then
  export KTUNE_CACHE_DIR=$(mktemp -d)
  # Best trial median of a sweep (its log's "best:" line), in us.
  best() { grep -A1 '^  best:' "$1" | grep -oE '[0-9.]+ us' | head -1 | cut -d' ' -f1; }
  run() {  # BINARY DTYPE SHAPE TAG
    local log="$OUT/sweep_$4.log"
    timeout ${SWEEP_LIMIT:-120} "$1" sweep --op flash_attention --shape "$3" --dtype "$2" \
      --db "$OUT/$4.db" >"$log" 2>&1
    echo "$(best "$log")"
  }
  printf '%-44s %12s %12s %10s %12s %12s %9s %9s\n' shape "before A" "after B" bf16 "after B'" \
    "before A'" "B/bf16" "A/bf16" | tee -a "$OUT/fp8.txt"
  i=0
  for shape in ${SHAPES:-b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128 \
      b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128 b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128 \
      b=2,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=yes}; do
    i=$((i + 1))
    a1=-; a2=-
    [ -n "$BEFORE" ] && a1=$(run "$BEFORE" e4m3 "$shape" "s${i}_a1")
    b1=$(run "$K" e4m3 "$shape" "s${i}_b1")
    h=$(run "$K" bf16 "$shape" "s${i}_bf16")
    b2=$(run "$K" e4m3 "$shape" "s${i}_b2")
    [ -n "$BEFORE" ] && a2=$(run "$BEFORE" e4m3 "$shape" "s${i}_a2")
    python3 - "$shape" "$a1" "$b1" "$h" "$b2" "$a2" <<'PY' | tee -a "$OUT/fp8.txt"
import sys
shape, *v = sys.argv[1:]
f = [float(x) if x not in ("-", "") else None for x in v]
a1, b1, h, b2, a2 = f
def mn(x, y):
    xs = [z for z in (x, y) if z]
    return min(xs) if xs else None
def r(x):
    return f"{h / x:.3f}x" if x and h else "-"
cells = [f"{x:.1f} us" if x else "-" for x in f]
print(f"{shape:44s} " + " ".join(f"{c:>12s}" for c in cells[:2]) + f" {cells[2]:>10s} " +
      " ".join(f"{c:>12s}" for c in cells[3:]) + f" {r(mn(b1, b2)):>9s} {r(mn(a1, a2)):>9s}")
PY
  done
  echo "B/bf16, A/bf16: bf16 best / e4m3 best (the better of the two e4m3 sweeps), > 1 is faster" |
    tee -a "$OUT/fp8.txt"
fi
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log *.db 2>/dev/null) 2>/dev/null
rm -f "$OUT"/*.log "$OUT"/*.db
date -u | tee -a "$OUT/fp8.txt"
