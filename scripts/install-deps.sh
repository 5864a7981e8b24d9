#!/usr/bin/env bash
# Installs ktune's build and test dependencies from Debian/Ubuntu packages. The CUDA toolkit
# (NVRTC and cuda.h, at /usr/local/cuda) must already be installed; no GPU is needed to build.
set -euo pipefail
packages=(cmake g++ make libsqlite3-dev libboost-program-options-dev libeigen3-dev libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "install-deps: the CUDA toolkit was not found at /usr/local/cuda (NVRTC and cuda.h are needed)" >&2
  exit 1
fi
