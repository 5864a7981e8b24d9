#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_bundle.sh here, carrying .gpu): sweeps every row of the
# ANCHORS attention table into one database, logging each sweep's wall time, then runs
# benchmarks/attention_bench.py against it. Results, the database and a log archive go to $OUT.
#
# Usage: benchmarks/run_attention.sh [sweep] [bench]      (default: both)
#   COLD=1: a fresh compile cache for every sweep (each sweep's time is a cold-cache time);
#           otherwise one fresh cache for the run, so rows that share d and causal reuse kernels.
#   DB=path: the database (default $OUT/attention.db); ROWS="0,3": bench only these rows.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-attention}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
K=$PWD/.gpu/bin/ktune
DB=${DB:-$OUT/attention.db}
steps=" ${*:-sweep bench} "
# B H N D causal, as in ../shared/ANCHORS.md
rows=(
  "16 16 512 64 no" "8 16 1024 64 no" "4 16 2048 64 no" "2 16 4096 64 no" "1 16 8192 64 no"
  "2 16 4096 64 yes" "1 16 8192 64 yes" "16 16 512 128 no" "8 16 1024 128 no"
  "2 16 4096 128 no" "1 16 8192 128 no" "1 16 16384 128 no" "2 16 4096 128 yes"
  "1 16 8192 128 yes" "1 16 16384 128 yes"
)
summary=()
if [[ $steps == *" sweep "* ]]; then
  export KTUNE_CACHE_DIR=$(mktemp -d)
  for row in "${rows[@]}"; do
    read -r b h n d c <<<"$row"
    [ -n "${COLD:-}" ] && export KTUNE_CACHE_DIR=$(mktemp -d)
    shape="b=$b,hq=$h,hkv=$h,nq=$n,nk=$n,d=$d,causal=$c"
    log="$OUT/logs/sweep_${b}_${h}_${n}_${d}_${c}.log"
    start=$(date +%s.%N)
    $K sweep --op flash_attention --shape "$shape" --dtype bf16 --db "$DB" >"$log" 2>&1
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    best=$(grep -m1 'TFLOP/s' "$log" | sed 's/^ *//')
    faster=$(grep -m1 'faster' "$log" | sed 's/.*tuned is //')
    line=$(printf '%-52s rc=%d %6s s  %s  (%s)' "$shape" "$rc" "$wall" "$best" "$faster")
    echo "$line" | tee -a "$OUT/sweeps.txt"
    summary+=("$line")
  done
fi
if [[ $steps == *" bench "* ]]; then
  PYTHONUNBUFFERED=1 python3 benchmarks/attention_bench.py --lib .gpu/lib/libktune.so --db "$DB" \
    --out "$OUT/attention.md" ${ROWS:+--rows "$ROWS"} \
    --command "benchmarks/run_attention.sh (python3 benchmarks/attention_bench.py --lib .gpu/lib/libktune.so --db attention.db)" \
    >"$OUT/logs/bench.log" 2>&1
  summary+=("bench rc=$?")
  if [ -f "$OUT/sweeps.txt" ] && [ -f "$OUT/attention.md" ]; then
    {
      echo
      echo "## Sweeps: \`ktune sweep --op flash_attention --shape ... --dtype bf16\`, wall time each"
      echo
      echo "Compile cache: $([ -n "${COLD:-}" ] && echo "fresh for every sweep (cold)" ||
        echo "fresh at the first sweep, then shared: the first sweep of each (d, causal) is cold")."
      echo
      echo '```'
      cat "$OUT/sweeps.txt"
      echo '```'
    } >>"$OUT/attention.md"
  fi
  sed -n '/^| B /,$p' "$OUT/attention.md" 2>/dev/null
fi
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo "==== summary"
printf '%s\n' "${summary[@]}"
