#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): the GPU tests, then a
# cold-cache sweep of the default op. Logs under $OUT; a short table last.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/.gpu/bin/ktune
export KTUNE_CACHE_DIR=$(mktemp -d)
K=.gpu/bin/ktune
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
$K devices | tee -a "$OUT/gpu.txt"
summary=()
for t in ${TESTS:-core_test compiler_test gpu_fused_test tuner_test}; do
  start=$(date +%s)
  timeout 300 .gpu/tests/$t --gtest_brief=1 >"$OUT/$t.log" 2>&1
  rc=$?
  summary+=("$t rc=$rc $(( $(date +%s) - start ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/$t.log" | tr '\n' ' ')")
done
if [ -z "${NO_SWEEP:-}" ]; then
  start=$(date +%s.%N)
  $K sweep --op add_rmsnorm --shape m=16384,n=4096 --dtype bf16 --db "$OUT/sweep.db" >"$OUT/sweep.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  summary+=("sweep add_rmsnorm 16384x4096 bf16 (cold compile cache) rc=$rc wall $(echo "$end - $start" | bc) s")
  tail -12 "$OUT/sweep.log"
fi
echo "==== summary"
printf '%s\n' "${summary[@]}"
