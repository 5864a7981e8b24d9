#!/usr/bin/env bash
# Builds a Release ktune here (Boost linked statically) and installs it, with the test binaries,
# into .gpu/ (git-ignored) so the device tool can carry it to the GPU machine, which has no
# SQLite or Boost headers. There: LD_LIBRARY_PATH=.gpu/lib KTUNE_CLI=.gpu/bin/ktune .gpu/tests/<test>.
# Usage: scripts/gpu_bundle.sh [DEST (default .gpu)] [BUILD DIR (default build-gpu)]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpu}
build=${2:-build-gpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKTUNE_STATIC_BOOST=ON \
  -DCMAKE_INSTALL_PREFIX="$PWD/$dest" >/dev/null
cmake --build "$build" -j"$(nproc)"
rm -rf "$dest"
cmake --install "$build" >/dev/null
mkdir -p "$dest/tests"
for t in "$build"/tests/*_test "$build"/tests/db_writer; do
  [ -x "$t" ] && cp "$t" "$dest/tests/"
done
strip --strip-debug "$dest"/tests/* "$dest"/bin/* "$dest"/lib/*.so* 2>/dev/null || true
du -sh "$dest"
