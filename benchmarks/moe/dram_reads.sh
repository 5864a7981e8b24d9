#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu, carried): how many bytes the warp-specialised
# MoE GEMMs read from DRAM against the weights they must read once, per configuration of one
# Mixtral bucket. For each variant (the shipped H100 row with some tunables changed): a copy of
# db/shipped/h100.db with that row's parameters replaced, ncu on gemm1 and gemm2 of one layer
# call (benchmarks/moe_profile.py; ncu flushes the caches before each kernel) reading duration,
# DRAM bytes and rate, L2 sectors read by the SMs and L2 throughput; then every variant timed
# as the sweep times a point (`ktune sweep --params`, one process, interleaved re-timing).
# Written at stop 69 (benchmarks/moe/NOTES.md): Mixtral T=1024's gemm2 read 1.43 GB from DRAM
# for 0.94 GB of w2 at 80 % of DRAM peak, gemm1 2.58 GB for 1.88 GB of w1. Logs under $OUT.
#   T=1024 OUT=$OUT/dram bash benchmarks/moe/dram_reads.sh
set -uo pipefail
G=${G:-.gpu}
OUT=${OUT:-/tmp/moe_dram}
T=${T:-1024}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
SHAPE="e=8,k=2,h=4096,i=14336,t=$T,routing=softmax_renorm,n_group=1,topk_group=1"
DEV="NVIDIA H100 80GB HBM3"
best=$("$G/bin/ktune" best --db db/shipped/h100.db --op moe --shape "$SHAPE" --device "$DEV")
# A database stale for this bundle (kernels changed, rows not re-hashed) gives the built-in
# default here, and every variant would then be measured against it: stop instead.
if ! grep -q "match: exact" <<<"$best"; then
  echo "db/shipped/h100.db has no current row for $SHAPE (re-hash it for this bundle):" >&2
  echo "$best" >&2
  exit 1
fi
base=$(grep -o 'block_m=[^ ]*' <<<"$best" | head -1)
echo "base: $base"
# name|changes (key=value,... applied to the base row; key=- drops a key)
VARIANTS=${VARIANTS:-"base|
group1_8|group1=8
group2_0|group2=0
persist1_2|persist1=2,group1=8
persist2_1|persist2=1
persist2_2|persist2=2
cluster1_2|cluster1=2
cluster2_2|cluster2=2"}
apply() {  # base params, changes -> params
  python3 - "$1" "$2" <<'PY'
import sys
kv = dict(i.split("=", 1) for i in sys.argv[1].split(","))
for c in filter(None, sys.argv[2].split(",")):
    k, v = c.split("=", 1)
    if v == "-":
        kv.pop(k, None)
    else:
        kv[k] = v
print(",".join(f"{k}={v}" for k, v in kv.items()))
PY
}
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed
params=()
while IFS='|' read -r name changes; do
  [ -z "$name" ] && continue
  p=$(apply "$base" "$changes")
  params+=("$p")
  cp db/shipped/h100.db "$OUT/$name.db"
  python3 - "$OUT/$name.db" "$SHAPE" "$p" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = c.execute("update best set params_key = ? where op = 'moe' and problem_key = ?",
              (sys.argv[3], sys.argv[2])).rowcount
c.commit()
assert n >= 1, "no best row to replace"
PY
  timeout 120 ncu --clock-control none --metrics "$M" -k regex:moe_gemm --launch-skip 4 \
    --launch-count 2 python3 benchmarks/moe_profile.py --lib "$G/lib/libktune.so" \
    --db "$OUT/$name.db" --layer mixtral --tokens "$T" --calls 4 >"$OUT/ncu_$name.log" 2>&1
  echo "ncu $name rc=$?"
done <<<"$VARIANTS"
args=()
for p in "${params[@]}"; do args+=(--params "$p"); done
timeout 240 "$G/bin/ktune" sweep --op moe --shape "$SHAPE" --dtype bf16 --db "$OUT/timed.db" \
  "${args[@]}" >"$OUT/sweep.log" 2>&1
echo "sweep rc=$?"
python3 - "$OUT" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
print("| variant | kernel | us | DRAM GB | DRAM % | L2 sectors (M) | L2 % |")
print("|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(out, "ncu_*.log"))):
    name = os.path.basename(f)[4:-4]
    kern, vals = None, {}
    rows = []
    for line in open(f):
        m = re.match(r"\s+void (moe_gemm\w+)<([^>]*)>", line)
        if m:
            if kern:
                rows.append((kern, vals))
            kern, vals = m.group(1) + "<" + m.group(2) + ">", {}
            continue
        m = re.match(r"\s+(\S+)\s+(\S+)\s+([\d.,]+)$", line)
        if m and kern:
            v = float(m.group(3).replace(",", ""))
            unit = m.group(2)
            if m.group(1) == "gpu__time_duration.sum":
                v = v * 1000 if unit == "ms" else v
            if m.group(1) == "dram__bytes_read.sum":
                v = v / 1000 if unit == "Mbyte" else v
            vals[m.group(1)] = v
    if kern:
        rows.append((kern, vals))
    for k, v in rows:
        print(f"| {name} | {k[:48]} | {v.get('gpu__time_duration.sum', 0):.1f} | "
              f"{v.get('dram__bytes_read.sum', 0):.2f} | "
              f"{v.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0):.1f} | "
              f"{v.get('lts__t_sectors_srcunit_tex_op_read.sum', 0) / 1e6:.0f} | "
              f"{v.get('lts__throughput.avg.pct_of_peak_sustained_elapsed', 0):.1f} |")
PY
grep -E "^\s+(default|best|given|[0-9.]+ us)" "$OUT/sweep.log" | head -40
tail -25 "$OUT/sweep.log"
