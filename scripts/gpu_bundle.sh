#!/usr/bin/env bash
# Builds a Release ktune here (Boost linked statically) and installs it, with the test binaries,
# into .gpu/ (git-ignored) so the device tool can carry it to the GPU machine, which has no
# SQLite or Boost headers. There: LD_LIBRARY_PATH=.gpu/lib KTUNE_CLI=.gpu/bin/ktune .gpu/tests/<test>.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DKTUNE_STATIC_BOOST=ON \
  -DCMAKE_INSTALL_PREFIX="$PWD/.gpu" >/dev/null
cmake --build build-gpu -j"$(nproc)"
rm -rf .gpu
cmake --install build-gpu >/dev/null
mkdir -p .gpu/tests
for t in build-gpu/tests/*_test build-gpu/tests/db_writer; do
  [ -x "$t" ] && cp "$t" .gpu/tests/
done
strip --strip-debug .gpu/tests/* .gpu/bin/* .gpu/lib/*.so* 2>/dev/null || true
du -sh .gpu
