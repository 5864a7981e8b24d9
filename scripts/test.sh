#!/usr/bin/env bash
# Installs the dependencies, builds ktune and runs the whole test suite. Without a GPU the tests
# labelled `gpu` skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=/usr/local/cuda
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
# The Python package as a user installs it (pip install .) into a fresh virtual environment, and
# its tests (those that need torch or a GPU skip, with the reason, where these are missing).
rm -rf build/venv
python3 -m venv build/venv
build/venv/bin/pip install --quiet . pytest numpy
(cd python/tests && ../../build/venv/bin/python -m pytest -q -p no:cacheprovider .)
