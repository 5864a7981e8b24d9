#!/bin/bash
# One device call: the mma.sync ceiling and then every timing kernel on the Mixtral and
# DeepSeek-like layers (GPU quiet; TIME_ARGS, e.g. "tmin=1024", narrows the points), then check
# every configuration (12 processes) while compute-sanitizer memchecks two ($MEMCHECK: indices of
# check_kernels() pairs), then ncu on the pairs named in $PROF ("layer t g1 g2;...": every
# metric of the sections below, raw, in $OUT/ncu_raw.log). Logs go to $OUT; a short table ends
# stdout. BIN: a prebuilt harness (nvcc 13 on x86-64 builds the same binary here and there);
# without one it is built here.
set -o pipefail
OUT=${OUT:-/tmp/moe_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
date -u
BIN=${BIN:-.gpu_moe/gemm_dev}
if [ ! -x "$BIN" ]; then
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
    benchmarks/moe/gemm_dev.cu -o /tmp/gemm_dev || exit 1
  BIN=/tmp/gemm_dev
fi
timeout ${TIME_LIMIT:-600} "$BIN" peak time ${LAYER:+layer=$LAYER} $TIME_ARGS > "$OUT/time.log" 2>&1
echo "time rc=$?"

for i in $(seq 0 11); do
  timeout ${CHECK_LIMIT:-600} "$BIN" check part=$i/12 > "$OUT/check_$i.part" 2>&1 &
done
for n in ${MEMCHECK:-1 8}; do
  timeout ${CHECK_LIMIT:-240} compute-sanitizer --tool memcheck --print-limit 5 "$BIN" check only=$n \
    > "$OUT/memcheck$n.log" 2>&1 &
done
wait
cat "$OUT"/check_*.part > "$OUT/check.log" && rm -f "$OUT"/check_*.part
echo "check: $(grep -c '^ok' "$OUT/check.log") ok, $(grep -c '^FAIL' "$OUT/check.log") FAIL"
grep '^FAIL' "$OUT/check.log" | head -5
for n in ${MEMCHECK:-1 8}; do
  echo "memcheck only=$n: $(grep -E 'ERROR SUMMARY|check:' "$OUT/memcheck$n.log" | tr '\n' ' ')"
done

if [ -n "$PROF" ]; then
  IFS=';' read -ra runs <<< "$PROF"
  for r in "${runs[@]}"; do
    set -- $r
    timeout ${NCU_LIMIT:-150} ncu --clock-control none --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy \
      --section InstructionStats --section LaunchStats \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      -k regex:moe_gemm --launch-skip 2 --launch-count 2 --page raw \
      "$BIN" prof layer=$1 t=$2 g1=$3 g2=$4 >> "$OUT/ncu_raw.log" 2>&1
    echo "ncu $r rc=$?"
  done
  grep -E "moe_gemm_kernel|gpu__time_duration.sum|dram__bytes_(read|write).sum |pipe_tensor.*pct|sm__cycles_elapsed.avg.per_second|smsp__issue_active.avg.pct|l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_(ld|st).sum |l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct" \
    "$OUT/ncu_raw.log" | sed -E 's/void ktune::moe_gemm_kernel<ktune::bf16, //' | tr -s ' ' | cut -c1-110 | head -40
fi
grep '^mma.sync peak' "$OUT/time.log"
sed -n '/^layer /,$p' "$OUT/time.log"
