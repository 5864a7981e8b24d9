#!/usr/bin/env bash
# On the GPU machine, from the repo root: the host cost per ktune_add_rmsnorm call of two builds
# of libktune.so, run alternately (base, new, base, new, ...) on the same GPU, so drift hits both.
#   BASE=path/to/old/libktune.so NEW=path/to/new/libktune.so benchmarks/run_host_overhead.sh
# Build the binary here with: g++ -O2 -std=c++17 -o .gpu/host_overhead benchmarks/host_overhead.cpp -ldl
# Logs under $OUT; a short table last.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-out}
BIN=${BIN:-.gpu/host_overhead}
ROUNDS=${ROUNDS:-5}
SHAPES=${SHAPES:-"1x4096 16x4096"}
mkdir -p "$OUT"
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
log=$OUT/host_overhead.log
: >"$log"
for s in $SHAPES; do
  m=${s%x*}; n=${s#*x}
  for r in $(seq "$ROUNDS"); do
    for which in base new; do
      lib=$BASE; [ "$which" = new ] && lib=$NEW
      line=$(KTUNE_DB_PATH= "$BIN" "$lib" "$m" "$n" 400 200) || { echo "$which failed: $line"; exit 1; }
      echo "$which $s round $r: $line" | tee -a "$log"
    done
  done
done
echo
echo "median of the per-round medians (ns per call):"
for s in $SHAPES; do
  for which in base new; do
    v=$(grep "^$which $s " "$log" | sed 's/.*median \([0-9]*\) ns.*/\1/' | sort -n |
        awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf "  %-8s %-5s %6s\n" "$s" "$which" "$v"
  done
done
