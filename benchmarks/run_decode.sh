#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): benchmarks/decode_bench.py
# (ktune flash_decode swept and timed through ktune_attention, against torch SDPA's flash, cuDNN
# and efficient backends, in one process) and, with PAGED=1, the paged bar. decode.md and
# decode.json land in $OUT, the databases and sweep logs in $OUT/logs.tar.gz; the table is
# printed last.
# Usage: [SHAPES=0,1] [PAGED=1] [DTYPE=bf16] benchmarks/run_decode.sh
set -uo pipefail
OUT=${OUT:-/tmp/ktune-decode}
B=${BUNDLE:-.gpu}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
PYTHONUNBUFFERED=1 python3 benchmarks/decode_bench.py --ktune "$B/bin/ktune" \
  --lib "$B/lib/libktune.so" --out "$OUT/logs" --dtype "${DTYPE:-bf16}" \
  ${SHAPES:+--shapes "$SHAPES"} ${PAGED:+--paged} \
  --command "benchmarks/run_decode.sh (SHAPES=${SHAPES:-all} PAGED=${PAGED:-} DTYPE=${DTYPE:-bf16})" \
  >"$OUT/logs/bench.log" 2>&1
rc=$?
cp "$OUT/logs/decode.md" "$OUT/logs/decode.json" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo "==== run_decode.sh rc=$rc"
cat "$OUT/decode.md" 2>/dev/null || echo "no decode.md: see logs.tar.gz (bench.log)"
