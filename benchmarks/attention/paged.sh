# Paged K/V on the prefill kernels, on the GPU machine (carry .gpu, and .whl for STEP=bench).
# STEP=test: gpu_attention_test's paged cases (and the varlen ones, which share the producer's
#   copy loop) in SHARDS processes at once, then gpu_attention_entry_test (automatic routing of
#   paged calls to both ops). STEP=bench: benchmarks/paged_prefill_bench.py through the Python
#   package (defaults; paged against contiguous, cuDNN where nq == nk), then the package's paged
#   GPU tests.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [ "${STEP:-test}" = test ]; then
  n=${SHARDS:-8}
  for i in $(seq 0 $((n - 1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i KTUNE_CACHE_DIR=$(mktemp -d) \
      timeout ${LIMIT:-480} .gpu/tests/gpu_attention_test \
      --gtest_filter="${FILTER:-Paged/*:Varlen/*}" > $OUT/attention_$i.log 2>&1 &
  done
  timeout ${LIMIT:-480} .gpu/tests/gpu_attention_entry_test > $OUT/entry.log 2>&1
  echo "entry rc=$?"
  wait
  grep -h -E "^\[  (PASSED|FAILED) " $OUT/attention_*.log $OUT/entry.log | sort | uniq -c
  grep -h -E "Failure|^\[  FAILED  \] [A-Z]" $OUT/attention_*.log $OUT/entry.log | head -20 |
    cut -c1-220
  for i in $(seq 0 $((n - 1))); do tail -1 $OUT/attention_$i.log | cut -c1-120; done
fi
if [ "${STEP:-test}" = bench ]; then
  pip install -q --no-index --no-deps --target /tmp/kt .whl/*.whl > $OUT/pip.log 2>&1
  export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
  PYTHONPATH=/tmp/kt timeout ${LIMIT:-400} python3 benchmarks/paged_prefill_bench.py \
    --out $OUT/paged_prefill.json ${SHAPES:+--shapes "$SHAPES"} 2>&1 | tail -20
  if [ "${PY:-1}" = 1 ]; then
    (cd python/tests && PYTHONPATH=/tmp/kt timeout ${PY_LIMIT:-200} python3 -m pytest -q \
       -k "${PYTEST_K:-paged}" test_torch_gpu.py > $OUT/py.log 2>&1)
    echo "python rc=$?"
    tail -8 $OUT/py.log | cut -c1-200
  fi
fi
