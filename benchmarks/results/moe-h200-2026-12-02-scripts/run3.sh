#!/usr/bin/env bash
# Session 36, device call 3: block_m 192 vs 128 per GEMM at Mixtral T=2048/4096 (ncu); decode on
# the H200: decode_scaling.py (default vs cuDNN, fixed + bytes/rate) and run_decode.sh bars 1-2.
set -u
G=.gpu-m
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; date -u
mkdir -p $OUT/x
for bm in 128 192; do
  G=$G DB=tmp36/q$bm.db RUNS="mixtral:2048 mixtral:4096" OUT=$OUT/x/ncu$bm NCU_LIMIT=80 \
    SKIP_DENSE=1 bash benchmarks/moe/ncu_ws.sh > $OUT/x/ncu$bm.txt 2>&1
  echo "== block_m=$bm"; grep -E "^== |ncu .* rc|moe_gemm|gpu__time|lts__throughput" \
    $OUT/x/ncu$bm.txt | tr -s ' ' | cut -c1-90
done
timeout 150 python3 benchmarks/decode_scaling.py --lib $G/lib/libktune.so --out $OUT \
  > $OUT/x/scaling.log 2>&1
echo "decode_scaling rc=$?"; tail -12 $OUT/x/scaling.log
BUNDLE=$G SHAPES=0,1 PAGED=1 OUT=$OUT/dec timeout 260 bash benchmarks/run_decode.sh \
  > $OUT/x/decode.txt 2>&1
echo "run_decode rc=$?"; tail -25 $OUT/x/decode.txt
cp $OUT/dec/decode.md $OUT/ 2>/dev/null
tar czf $OUT/x.tgz -C $OUT x dec 2>/dev/null; rm -rf $OUT/x $OUT/dec
