#!/usr/bin/env bash
# Installs the dependencies, builds ktune and runs the whole test suite. Without a GPU the tests
# labelled `gpu` skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=/usr/local/cuda
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
