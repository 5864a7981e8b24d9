# FP8 checks on the GPU machine (carry .gpu and .whl): gpu_moe_op_test's e4m3 and graph cases
# (a line per case, so a hang names its case), then the Python package's GPU tests.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [ "${MOE:-1}" = 1 ]; then
  timeout ${MOE_LIMIT:-300} stdbuf -oL .gpu/tests/gpu_moe_op_test \
    --gtest_filter="${FILTER:-*Fp8*:*Graph*}" > $OUT/moe_test.log 2>&1
  echo "moe test rc=$?"
  grep -E "^\[ *(OK|FAILED|RUN) |Failure|PASSED" $OUT/moe_test.log | cut -c1-160 | head -30
  tail -3 $OUT/moe_test.log | cut -c1-200
fi
if [ "${PY:-1}" = 1 ]; then
  pip install -q --no-index --no-deps --target /tmp/kt .whl/*.whl > $OUT/pip.log 2>&1
  (cd python/tests && PYTHONPATH=/tmp/kt timeout ${PY_LIMIT:-240} python3 -m pytest -q \
     ${PYTEST_ARGS:-test_torch_gpu.py test_torch_ops_gpu.py} > $OUT/py.log 2>&1)
  echo "python rc=$?"
  tail -15 $OUT/py.log | cut -c1-200
fi
