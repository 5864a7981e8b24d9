#!/usr/bin/env bash
# Installs the dependencies, builds ktune and tunes the default fused op (add_rmsnorm,
# 16384 x 4096, bf16) on this machine's GPU into the default database. Extra arguments go to
# `ktune sweep` (e.g. --op softmax --shape m=4096,n=8192). Without a GPU it ends with a line
# saying that no CUDA device was found, and a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=/usr/local/cuda
cmake --build build -j"$(nproc)" --target ktune
exec build/ktune sweep "$@"
