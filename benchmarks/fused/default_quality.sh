#!/usr/bin/env bash
# On the GPU machine, from the repo root (bundle of scripts/gpu_bundle.sh carried as $G): how good
# the fused ops' built-in defaults are on shapes no rule was read from. Each problem is swept
# exhaustively (`ktune sweep`, every valid point timed; the leaders and the default re-timed
# together at the end), so "best / default" compares two times of one phase, and every point's
# trial stays in $DB for reading other rules against the same sweeps (benchmarks/fused/NOTES.md).
#
# Usage: G=.gpu [SET=design|heldout|rows|check|rowdesign|rowcheck|vecdesign|veccheck|veccheck2|veccheck3|all] [DEADLINE=s: start no sweep past this] [K=ktune]
#        [BUDGET=n: 1 times only this binary's default beside the stored best] [TAG=log prefix]
#        [ROW_MS="7 100 1500 9000": the row set's m values]
#        bash benchmarks/fused/default_quality.sh
# Logs and the database go under $OUT; the table (per problem, geometric mean and worst per op)
# is last.
set -u
OUT=${OUT:-/tmp/fused-dq}
G=${G:-.gpu}
K=${K:-$G/bin/ktune}
TAG=${TAG:-}
DB=${DB:-$OUT/dq.db}
SET=${SET:-all}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$OUT/cache}
# The design set: the shapes a rule may be read from (decode-sized m up to prefill-sized m).
design=()
for m in 1 16 64 256 1024 8192; do
  for n in 2816 14336; do design+=("swiglu m=$m,n=$n"); done
  design+=("bias_act m=$m,n=4096,act=gelu_tanh")
done
# The held-out set: other widths and row counts (none a power of two), other ops of the family.
heldout=()
for m in 3 40 300 3000 20000; do
  for n in 1536 5120 8960 25600; do heldout+=("swiglu m=$m,n=$n"); done
  heldout+=("bias_act m=$m,n=3072,act=silu" "bias_act m=$m,n=10240,act=gelu_tanh")
done
# The row ops (their default rule is older than these sweeps).
rows=()
for m in ${ROW_MS:-7 100 1500 9000}; do
  for n in 1536 2880 5120 7168; do rows+=("add_rmsnorm m=$m,n=$n"); done
  rows+=("layernorm m=$m,n=2880" "layernorm m=$m,n=7168")
  rows+=("softmax m=$m,n=1000" "softmax m=$m,n=5120")
done
# The row ops' design set (2026-12-03: the rule of kRowDefaults was read from these sweeps, with
# the rows set at m = 9000) and their check set (other widths and row counts, none in the design
# set, swept after the rule was written).
rowdesign=()
for m in 1000 3000 20000; do
  for n in 1024 2048 4096 8192; do rowdesign+=("layernorm m=$m,n=$n" "softmax m=$m,n=$n"); done
done
rowdesign+=("softmax m=1000,n=32768")
for m in 3000 20000; do
  for n in 2048 8192; do rowdesign+=("add_rmsnorm m=$m,n=$n"); done
done
rowcheck=()
for m in 600 5000 40000; do
  rowcheck+=("layernorm m=$m,n=3584" "layernorm m=$m,n=6144,residual=yes" "softmax m=$m,n=1536")
  rowcheck+=("softmax m=$m,n=12288" "add_rmsnorm m=$m,n=4608")
done
rowcheck+=("softmax m=300,n=50304" "layernorm m=2000,n=768")
rowcheck+=("layernorm m=150,n=4096" "softmax m=150,n=8192" "add_rmsnorm m=200,n=5120")
# The vector-width design and check sets (2026-12-03, stop 44): widths where the many-rows rule's
# threads per row leave the last 8-wide vector round partial and 4-wide vectors would fill it.
vecdesign=()
for m in 3000 24000; do
  for n in 1280 2560; do vecdesign+=("layernorm m=$m,n=$n" "softmax m=$m,n=$n" "add_rmsnorm m=$m,n=$n"); done
  vecdesign+=("softmax m=$m,n=10240" "add_rmsnorm m=$m,n=10240" "layernorm m=$m,n=6656")
done
veccheck=("softmax m=8000,n=640" "softmax m=500,n=640" "layernorm m=20000,n=640"
  "add_rmsnorm m=30000,n=640" "add_rmsnorm m=6000,n=5120" "add_rmsnorm m=250,n=5120"
  "softmax m=6000,n=5120" "layernorm m=10000,n=4608" "layernorm m=700,n=4608"
  "layernorm m=3000,n=9216")
# Second check of the same rule (its only widths at m >= SMs: n = 128, 384, 640, 1280, 2560,
# 3584), other row counts, a residual and fp16; an entry's third word is its dtype (bf16 if none).
veccheck2=("layernorm m=12000,n=2560,residual=yes" "layernorm m=800,n=1280,residual=yes"
  "layernorm m=50000,n=3584 fp16" "layernorm m=7000,n=640" "layernorm m=4000,n=384"
  "layernorm m=1500,n=3584,residual=yes" "layernorm m=16000,n=1280 fp16" "layernorm m=200,n=2560")
# Third check, after the rule left out residual rows and one-warp rows (read from the first two).
veccheck3=("layernorm m=2200,n=2560 fp16" "layernorm m=9000,n=1280" "layernorm m=30000,n=2560"
  "layernorm m=400,n=3584 fp16" "layernorm m=6000,n=3584,residual=yes"
  "layernorm m=25000,n=1280,residual=yes" "layernorm m=3000,n=640 fp16")
# The check set: swept first with the elementwise rule of 2026-12-02 (read from design and
# held-out sweeps), so no rule was read from it.
check=()
for m in 2 24 120 700 5000; do
  for n in 4864 18944; do check+=("swiglu m=$m,n=$n"); done
done
for m in 9 200 6000; do
  check+=("bias_act m=$m,n=6144,act=gelu_erf" "bias_act m=$m,n=2048,act=relu")
done
case $SET in
  design) problems=("${design[@]}") ;;
  heldout) problems=("${heldout[@]}") ;;
  rows) problems=("${rows[@]}") ;;
  check) problems=("${check[@]}") ;;
  rowdesign) problems=("${rowdesign[@]}") ;;
  rowcheck) problems=("${rowcheck[@]}") ;;
  vecdesign) problems=("${vecdesign[@]}") ;;
  veccheck) problems=("${veccheck[@]}") ;;
  veccheck2) problems=("${veccheck2[@]}") ;;
  veccheck3) problems=("${veccheck3[@]}") ;;
  *) problems=("${design[@]}" "${heldout[@]}" "${rows[@]}" "${check[@]}") ;;
esac
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
: > "$OUT/${TAG}index.txt"
for p in "${problems[@]}"; do
  op=${p%% *}; rest=${p#* }; shape=${rest%% *}; dtype=bf16
  [ "$rest" != "$shape" ] && dtype=${rest#* }
  name="$TAG$op-${shape//[=,]/_}"
  [ "$dtype" != bf16 ] && name="$name-$dtype"
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - t0 + 20 )) -gt "$DEADLINE" ]; then
    echo "sweep $op $shape skipped: DEADLINE=${DEADLINE} s would pass"; continue
  fi
  start=$(date +%s.%N)
  timeout 120 $K sweep --op "$op" --dtype "$dtype" --shape "$shape" --budget ${BUDGET:-0} \
    --db "$DB" --json > "$OUT/logs/$name.json" 2> "$OUT/logs/$name.err"
  rc=$?
  echo "$op $shape $name $dtype" >> "$OUT/${TAG}index.txt"
  echo "sweep $op $shape $dtype rc=$rc wall $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
done
python3 - "$OUT/logs" "$OUT/${TAG}index.txt" <<'PY'
import json, math, sys, collections
d, index = sys.argv[1], sys.argv[2]
per_op = collections.defaultdict(list)
print(f"{'op':12} {'problem':28} {'default us':>10} {'best us':>9} {'best/default':>12}  best params")
for line in open(index):
    op, shape, name, *rest = line.split()
    if rest and rest[0] != "bf16":  # the dtype, shown where it is not the default
        shape = f"{shape} {rest[0]}"
    try:
        r = json.load(open(f"{d}/{name}.json"))
    except Exception as e:  # a sweep that died prints no JSON; its .err says why
        print(f"{op:12} {shape:28} no result ({e.__class__.__name__})")
        continue
    best, dflt = r.get("best"), r.get("default")
    if not best or not dflt:
        print(f"{op:12} {shape:28} {'-':>10} {'-':>9} {'-':>12}")
        continue
    q = best["median_us"] / dflt["median_us"]
    per_op[op].append(q)
    print(f"{op:12} {shape:28} {dflt['median_us']:10.2f} {best['median_us']:9.2f} {q:12.3f}  "
          f"{best.get('params', '')}")
for op, qs in per_op.items():
    g = math.exp(sum(map(math.log, qs)) / len(qs))
    print(f"{op}: {len(qs)} problems, geometric mean {g:.3f}, worst {min(qs):.3f}")
PY
tar czf "$OUT/${TAG}logs.tar.gz" -C "$OUT" logs
