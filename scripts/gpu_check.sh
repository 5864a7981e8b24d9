#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): the GPU tests, then a
# cold-cache sweep of the default op. Logs in $OUT/logs.tar.gz; a short table last.
# TESTS="a b" picks test binaries, NO_SWEEP=1 skips the sweep, TEST_TIMEOUT=s per binary,
# JOBS=n runs n binaries at once. A name given as NAME:N runs that binary in N gtest shards
# (GTEST_TOTAL_SHARDS), each its own job: gpu_decode_test's 277 cases take more than one
# 10-minute device call in one process, `TESTS=gpu_decode_test:8 JOBS=8` about an eighth of it.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-out}
B=${BUNDLE:-.gpu}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/$B/bin/ktune
export KTUNE_CACHE_DIR=$(mktemp -d)
K=$B/bin/ktune
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
$K devices | tee -a "$OUT/gpu.txt"
summary=()
# One test binary: its log, and a summary line in $OUT/logs/<name>.sum (stdout line-buffered, so
# a binary stopped by the timeout still shows how far it got).
run_one() {
  local t=$1 name=${1%%:*} start rc
  start=$(date +%s)
  if [[ $t == *:*:* ]]; then  # NAME:N:I, shard I of N
    local n=${t#*:}
    GTEST_TOTAL_SHARDS=${n%%:*} GTEST_SHARD_INDEX=${t##*:} timeout "${TEST_TIMEOUT:-300}" \
      stdbuf -oL "$B/tests/$name" >"$OUT/logs/$t.log" 2>&1
  else
    timeout "${TEST_TIMEOUT:-300}" stdbuf -oL "$B/tests/$name" >"$OUT/logs/$t.log" 2>&1
  fi
  rc=$?
  echo "$t rc=$rc $(( $(date +%s) - start ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/logs/$t.log" | tr '\n' ' ')" \
    >"$OUT/logs/$t.sum"
}
export -f run_one
export OUT B TEST_TIMEOUT
tests=""
for t in ${TESTS:-core_test compiler_test gpu_fused_test tuner_test gpu_attention_test}; do
  if [[ $t == *:* ]]; then
    for ((i = 0; i < ${t#*:}; i++)); do tests+=" $t:$i"; done
  else
    tests+=" $t"
  fi
done
# JOBS=n runs n binaries at once (the correctness tests share the GPU fine; their double
# references are CPU-bound): the device's 16 cores then work in parallel.
printf '%s\n' $tests | xargs -P "${JOBS:-1}" -I{} bash -c 'run_one {}'
for t in $tests; do summary+=("$(cat "$OUT/logs/$t.sum")"); done
if [ -z "${NO_SWEEP:-}" ]; then
  start=$(date +%s.%N)
  $K sweep --op add_rmsnorm --shape m=16384,n=4096 --dtype bf16 --db "$OUT/sweep.db" >"$OUT/sweep.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  summary+=("sweep add_rmsnorm 16384x4096 bf16 (cold compile cache) rc=$rc wall $(python3 -c "print(round($end - $start, 1))") s")
  tail -12 "$OUT/sweep.log"
fi
# The shipped database answers for a fresh user with an empty database of their own.
$K best --op flash_attention --shape b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128 --db "$(mktemp -d)/empty.db" \
  >"$OUT/best.txt" 2>&1
summary+=("best with only the shipped db: $(tr '\n' ' ' <"$OUT/best.txt")")
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo "==== summary"
printf '%s\n' "${summary[@]}"
