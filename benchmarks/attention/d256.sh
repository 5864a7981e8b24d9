#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu): the d=256 tile study (80-key tiles, lazy
# rescaling of O at d=256), first run on the H200 on 2026-12-01.
#   STEP=test   every gpu_attention_test case, in SHARDS processes
#   STEP=sweep  exhaustive sweeps of d=256 problems (the issue's rows and held-out ones)
#   STEP=bench  attention_bench.py on the issue's d=256 rows against cuDNN, from the sweeps
#   STEP=before the same rows with an earlier libktune (BEFORE_LIB; its built-in defaults)
#               against cuDNN in the same call
# The tables go to $OUT, the logs and the database packed in $OUT/logs.tgz (the device tool
# brings back at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/ktune-d256}
mkdir -p "$OUT"
G=${G:-.gpu}
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/$G/bin/ktune
K=$PWD/$G/bin/ktune
DB=${DB:-$OUT/d256.db}
steps=" ${STEP:-test sweep bench} "
BENCH=${BENCH:-2,16,16,4096,256,yes;2,16,16,4096,256,no;1,16,16,8192,256,yes;1,32,8,4096,256,yes;2,16,4,3000,256,no}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $steps == *" test "* ]]; then
  # Every case, in SHARDS processes on the one GPU (the cases are independent).
  n=${SHARDS:-8}
  for i in $(seq 0 $((n - 1))); do
    (GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout ${TEST_TIMEOUT:-480} \
      $G/tests/gpu_attention_test --gtest_filter="${FILTER:-*}" >"$OUT/test_$i.log" 2>&1
      echo "shard $i rc=$?" >>"$OUT/test_$i.log") &
  done
  wait
  cat "$OUT"/test_*.log >"$OUT/test.log" && rm -f "$OUT"/test_*.log
  # rc per shard as well as the per-case lines: a suite whose SetUpTestSuite throws fails
  # without a per-case FAILED line.
  echo "gpu_attention_test: $(grep -c '^\[       OK' "$OUT/test.log") ok," \
    "$(grep -c '^\[  FAILED  \] .*(' "$OUT/test.log") failed, $(grep -c '^\[  SKIPPED' \
    "$OUT/test.log") skipped, shards with rc=0: $(grep -c '^shard .* rc=0$' "$OUT/test.log")/$n"
  grep -E '^\[  FAILED  \] .*\(|SetUpTestSuite|^shard .* rc=[1-9]' "$OUT/test.log" | head -20
fi
if [[ $steps == *" sweep "* ]]; then
  export KTUNE_CACHE_DIR=$(mktemp -d)
  for shape in ${SHAPES:-b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=yes \
      b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256 b=1,hq=16,hkv=16,nq=8192,nk=8192,d=256,causal=yes \
      b=1,hq=32,hkv=8,nq=4096,nk=4096,d=256,causal=yes b=2,hq=16,hkv=4,nq=3000,nk=3000,d=256}; do
    # SHAPE[:DTYPE], bf16 unless named
    dtype=bf16
    [[ $shape == *:* ]] && dtype=${shape#*:} && shape=${shape%%:*}
    tag=$(echo "$shape" | tr ',=' '_-')  # $OUT's files come back with plain names only
    start=$(date +%s.%N)
    $K sweep --op flash_attention --shape "$shape" --dtype $dtype --db "$DB" \
      >"$OUT/sweep_${tag}_$dtype.log" 2>&1
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%-58s %-5s rc=%d %6s s  %s\n' "$shape" $dtype "$rc" "$wall" \
      "$(grep -m1 'TFLOP/s' "$OUT/sweep_${tag}_$dtype.log" | sed 's/^ *//')" |
      tee -a "$OUT/sweeps.txt"
  done
  python3 benchmarks/trials.py "$DB" --by block_n --top 2 >"$OUT/by_block_n.txt" 2>&1
  python3 benchmarks/trials.py "$DB" --by block_m --top 1 >"$OUT/by_block_m.txt" 2>&1
fi
if [[ $steps == *" bench "* ]]; then
  PYTHONUNBUFFERED=1 python3 benchmarks/attention_bench.py --lib $G/lib/libktune.so \
    --db "$DB" --out "$OUT/d256.md" \
    --shapes "$BENCH" \
    --command "STEP=bench benchmarks/attention/d256.sh" >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  grep -E '^\| [0-9]' "$OUT/d256.md" | cut -d'|' -f2-14
fi
if [[ $steps == *" before "* ]]; then
  # An empty database: "tuned" and "default" are both the earlier library's built-in default.
  PYTHONUNBUFFERED=1 python3 benchmarks/attention_bench.py --lib "$BEFORE_LIB" \
    --db "$OUT/empty.db" --out "$OUT/before.md" --shapes "$BENCH" \
    --command "STEP=before BEFORE_LIB=$BEFORE_LIB benchmarks/attention/d256.sh" \
    >"$OUT/before.log" 2>&1
  echo "before rc=$?"
  grep -E '^\| [0-9]' "$OUT/before.md" | cut -d'|' -f2-14
fi
# Everything but the tables in one archive.
tgz=$(mktemp --suffix=.tgz)
(cd "$OUT" && tar czf "$tgz" --exclude=logs.tgz --exclude='*.md' --exclude='*.json' . &&
  find . -maxdepth 1 -type f ! -name '*.md' ! -name '*.json' -delete && mv "$tgz" logs.tgz)
