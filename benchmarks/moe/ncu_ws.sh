#!/usr/bin/env bash
# Where the warp-specialised MoE GEMMs lose to dense cuBLAS (issue 11's Mixtral bar), on the GPU
# machine (carry the bundle, G=.gpu by default): ncu on gemm1 and gemm2 of one whole-layer call
# (benchmarks/moe_profile.py) per (layer, tokens) in $RUNS, the configuration dispatched from
# $DB (default: the bundle's shipped database for this GPU), then the same for a dense bf16
# cuBLAS GEMM of gemm1's size through torch. Reads the L2 <-> SM throughput, the tensor pipe's
# active share and the warps' stall reasons: the question is whether gemm1 (128 x 256 weight
# columns per k-tile of 64: A 16 KiB + W 32 KiB per 4.2 MFLOP, 87 flop/byte from L2) is bound by
# L2 bandwidth (benchmarks/moe/SM90.md, "L2 traffic"). Logs under $OUT, a table last.
# SKIP_DENSE=1 leaves out the cuBLAS GEMM.
#   G=.gpu-m RUNS="mixtral:1024 mixtral:4096 deepseek:4096" benchmarks/moe/ncu_ws.sh
set -u
G=${G:-.gpu}
OUT=${OUT:-/tmp/moe_ncu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
DB=${DB:-}
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
M=lts__t_bytes.sum.per_second,lts__t_sectors_srcunit_tex_op_read.sum
M=$M,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,gpu__time_duration.sum
for r in long_scoreboard barrier wait math_pipe_throttle mio_throttle dispatch_stall sleeping; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for run in ${RUNS:-mixtral:1024 mixtral:4096}; do
  layer=${run%%:*} t=${run##*:}
  timeout ${NCU_LIMIT:-150} ncu --clock-control none --section SpeedOfLight --metrics "$M" \
    -k regex:moe_gemm --launch-skip 4 --launch-count 2 \
    python3 benchmarks/moe_profile.py --lib $G/lib/libktune.so ${DB:+--db $DB} \
    --layer "$layer" --tokens "$t" --calls 4 > "$OUT/ncu_${layer}_$t.log" 2>&1
  echo "ncu $run rc=$?"
done
if [ -z "${SKIP_DENSE:-}" ]; then
# The dense GEMM of gemm1's work at Mixtral T=1024 (2048 rows; gate and up: 28672 columns; k
# 4096) through cuBLAS: the L2 throughput and tensor share it reaches for the same flops.
cat > "$OUT/dense.py" <<'PY'
import torch
a = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(6):
    c = a @ b.t()
torch.cuda.synchronize()
PY
timeout ${NCU_LIMIT:-150} ncu --clock-control none --section SpeedOfLight --metrics "$M" \
  -k regex:"gemm|sm90|nvjet" --launch-skip 4 --launch-count 1 python3 "$OUT/dense.py" \
  > "$OUT/ncu_dense.log" 2>&1
echo "ncu dense rc=$?"
fi
KEEP="^  [a-z_]*(moe_gemm|gemm|sm90|nvjet)[^ ]*|gpu__time_duration.sum|lts__t_bytes.sum.per_second"
KEEP="$KEEP|lts__throughput|tensor_op_(g|h)mma"
KEEP="$KEEP|stalled_(long_scoreboard|barrier|wait|math_pipe|mio|dispatch|sleeping)"
for f in "$OUT"/ncu_*.log; do
  echo "== $(basename "$f")"
  grep -E "$KEEP" "$f" \
    | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' \
    | tr -s ' ' | cut -c1-120 | head -40
done
