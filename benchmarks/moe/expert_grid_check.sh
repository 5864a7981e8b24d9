#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu): expert_grid=1 against expert_grid=0 at
# DeepSeek-like T=64 and T=128, each point timed by `ktune sweep --params` in one process per
# problem (the layer's median, as the sweep times it), block_m one and two sizes up for the
# expert grid (TS="128" for one problem). Written for stop 66 (benchmarks/moe/NOTES.md);
# table in $OUT/expert_grid.md.
set -uo pipefail
OUT=${OUT:-/tmp/ktune-eg}
G=${G:-.gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
SHAPE="e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4"
tail=",prefetch1=0,impl1=0,bk2=128,prefetch2=0,impl2=0,align_chunk=0,route_lanes=32"
tail+=",route_vec=1,combine_vec=8,split2=1"
g1_32="bn1=64,bk1=128,warps1=4,warps_m1=1,stages1=4,group1=8,epi1=1"
g2_32="bn2=32,warps2=4,warps_m2=2,stages2=3,group2=8,epi2=0"
t64="block_m=16,bn1=64,bk1=128,warps1=4,warps_m1=1,stages1=2,group1=0,epi1=0,bn2=32,warps2=2"
t64+=",warps_m2=1,stages2=4,group2=0,epi2=0$tail"
declare -A POINTS=(
  [128]="block_m=32,$g1_32,$g2_32$tail
block_m=32,$g1_32,$g2_32$tail,expert_grid=1
block_m=64,$g1_32,$g2_32$tail,expert_grid=1
block_m=64,$g1_32,${g2_32/stages2=3/stages2=2}$tail,expert_grid=1
block_m=64,${g1_32/stages1=4/stages1=3},$g2_32$tail,expert_grid=1"
  [64]="$t64
$t64,expert_grid=1
block_m=32,$g1_32,$g2_32$tail,expert_grid=1
block_m=32,$g1_32,${g2_32/stages2=3/stages2=2}$tail,expert_grid=1"
)
for t in ${TS:-128 64}; do
  args=()
  while read -r p; do args+=(--params "$p"); done <<<"${POINTS[$t]}"
  "${KTUNE:-$G/bin/ktune}" sweep --op moe --shape "$SHAPE,t=$t" --dtype bf16 \
    --db "$OUT/eg.db" "${args[@]}" >"$OUT/sweep-t$t.log" 2>&1
  echo "t=$t rc=$?"
done
python3 benchmarks/moe/trials_table.py "$OUT/eg.db" expert_grid >"$OUT/expert_grid.md" 2>&1
cat "$OUT/expert_grid.md"
