#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu: TESTS="gpu_decode_test tuner_test"
# scripts/gpu_bundle.sh .gpu here, carried): the checks written before any run that are still
# waiting for a GPU, each with its own time limit, logs and tables under $OUT, a summary last.
# One device call of under 10 minutes a STEP. Remove a check once its outcome is
# recorded (results file, notes) and add new ones here.
#   STEP=1 (stop 64, ~4 min): whether the H100's gemm1 is L2-bound as the H200's:
#   benchmarks/moe/ncu_ws.sh at Mixtral T=1024 and 4096 on the shipped H100 rows. Prediction in
#   benchmarks/moe/NOTES.md (stop 64). (Its DeepSeek-like timeline and ncu ran at stop 65.)
#   STEP=3 (stop 68, ~1 min): benchmarks/moe/gridid_probe.cu: whether %gridid is fresh at every
#   launch (plain, programmatic, graph replays, two streams), a barrier tagged with it from
#   garbage slots (20000 launches), and its cost against a zero kernel + counting barrier.
#   Prediction in benchmarks/moe/NOTES.md (stop 68).
#   Earlier checks are recorded in benchmarks/results/h100-stop68-2026-12-06.md (the
#   route-grid sort and the combine inside gemm2), h100-stop66-2026-12-05.md (the read
#   ceiling and the pre-wait probe), h100-stop65-2026-12-05.md, h100-stop63-2026-12-05.md and
#   pending-checks-h100-2026-12-05-stop61.md.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-pending}
G=${G:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CLI=$PWD/$G/bin/ktune PYTHONUNBUFFERED=1
summary=()
note() { summary+=("$1"); echo "== $1"; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader \
  | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
case "${STEP:-1}" in
1)
  cp db/shipped/h100.db "$OUT/h100.db"
  # DB first: an assignment on the same line sees OUT's new value.
  DB="$OUT/h100.db" OUT="$OUT/ncu_ws" G="$G" SKIP_DENSE=1 NCU_LIMIT=150 \
    RUNS="mixtral:1024 mixtral:4096" timeout 330 bash benchmarks/moe/ncu_ws.sh \
    >"$OUT/ncu_ws.log" 2>&1
  note "ncu_ws mixtral 1024/4096 rc=$?: $(tail -6 "$OUT/ncu_ws.log" | tr '\n' ' ')"
  tail -60 "$OUT/ncu_ws.log"
  ;;
3)
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
    benchmarks/moe/gridid_probe.cu -o "$OUT/gridid_probe" >"$OUT/gridid.log" 2>&1 &&
    timeout 120 "$OUT/gridid_probe" >>"$OUT/gridid.log" 2>&1
  note "gridid_probe rc=$?"
  tail -30 "$OUT/gridid.log" | cut -c1-200
  ;;
*) echo "STEP=1 or 3" >&2; exit 2 ;;
esac
echo "==== pending_checks.sh STEP=${STEP:-1}"
printf '%s\n' "${summary[@]}"
