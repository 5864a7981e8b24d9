#!/usr/bin/env bash
# Builds a Release ktune here (Boost linked statically) and installs it, with the test binaries,
# into .gpu/ (git-ignored) so the device tool can carry it to the GPU machine, which has no
# SQLite or Boost headers. There: LD_LIBRARY_PATH=.gpu/lib KTUNE_CLI=.gpu/bin/ktune .gpu/tests/<test>.
# Usage: scripts/gpu_bundle.sh [DEST (default .gpu)] [BUILD DIR (default build-gpu)]
# TESTS="gpu_decode_test tuner_test" builds only the CLI, the runtime library and those test
# binaries, and bundles only them (a fresh full build takes ~40 min on 2 cores, and the full
# bundle is larger than the device tool's 64 MiB carry; these take minutes and ~10 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpu}
case "$dest" in /*) ;; *) dest="$PWD/$dest" ;; esac
build=${2:-build-gpu}
tests=${TESTS:-}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKTUNE_STATIC_BOOST=ON \
  -DCMAKE_INSTALL_PREFIX="$dest" >/dev/null
if [ -n "$tests" ]; then
  # shellcheck disable=SC2086  # a list of target names
  cmake --build "$build" -j"$(nproc)" --target ktune ktune_runtime $tests
else
  cmake --build "$build" -j"$(nproc)"
fi
rm -rf "$dest"
cmake --install "$build" >/dev/null
mkdir -p "$dest/tests"
if [ -n "$tests" ]; then
  for t in $tests; do cp "$build/tests/$t" "$dest/tests/"; done
else
  for t in "$build"/tests/*_test "$build"/tests/db_writer; do
    [ -x "$t" ] && cp "$t" "$dest/tests/"
  done
fi
strip --strip-debug "$dest"/tests/* "$dest"/bin/* "$dest"/lib/*.so* 2>/dev/null || true
du -sh "$dest"
