# benchmarks/moe_fp8_bench.py on the GPU machine (carry .whl): the Python package from the wheel,
# bf16 against e4m3 MoE weights, graph-captured, defaults.
set -u
pip install -q --no-index --no-deps --target /tmp/kt .whl/*.whl > $OUT/pip.log 2>&1
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=/tmp/kt timeout ${LIMIT:-400} python3 benchmarks/moe_fp8_bench.py \
  --tokens ${TOKENS:-16,128,1024,4096} --out $OUT/moe_fp8.json 2>&1 | tail -20
