#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): kv_split's first run
# (d=96's K/V tiles in two parts; benchmarks/decode/NOTES.md). Steps (STEP="test bench", the
# default, or one of them):
#   test   gpu_decode_test's D96Tiles (kv_split=1 gives kv_split=0's bits, tile for tile, and the
#          double reference) and Pages (the paged default's tile split in two) cases, 2 shards;
#   bench  benchmarks/decode_bench.py on multi-head d=80 and d=96 and GQA d=96 and d=72 (SHAPES,
#          default 7,9,11,12): each sweep times every tile with both layouts, then SDPA and the
#          runtime; then, from the sweeps' trials (benchmarks/trials.py), each tile's kv_split=0
#          time over its kv_split=1 time and the fastest point of each layout.
# Results land in $OUT; the tables are printed last. The sweeps of d = 72-96 time both layouts
# (about twice the points of before), so run the two steps as two device calls (STEP=test, then
# STEP=bench) to stay under a call's 10 minutes.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-kv-split}
B=${BUNDLE:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
STEP=${STEP:-test bench}
if [[ " $STEP " == *" test "* ]]; then
  for i in 0 1; do
    GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 400 "$B/tests/gpu_decode_test" \
      --gtest_filter='D96Tiles/*:Pages/*' >"$OUT/test$i.log" 2>&1 &
  done
  wait
  grep -hE '^\[  (PASSED|FAILED|SKIPPED)' "$OUT"/test*.log
fi
if [[ " $STEP " == *" bench "* ]]; then
  PYTHONUNBUFFERED=1 python3 benchmarks/decode_bench.py --ktune "$B/bin/ktune" \
    --lib "$B/lib/libktune.so" --out "$OUT" --shapes "${SHAPES:-7,9,11,12}" \
    --command "benchmarks/decode/kv_split.sh (SHAPES=${SHAPES:-7,9,11,12})" >"$OUT/bench.log" 2>&1
  echo "decode_bench rc=$?"
  cat "$OUT/decode.md" 2>/dev/null
  # Same tile, each kv_split=1 point against kv_split=0's (time(0) / time(1): above 1, the
  # split layout is faster), then the fastest points of each layout.
  python3 benchmarks/trials.py "$OUT/decode.db" --op flash_decode --pairs kv_split
  python3 benchmarks/trials.py "$OUT/decode.db" --op flash_decode --by kv_split --top 1
fi
