#!/usr/bin/env bash
# setup.sh: installs what h3 needs on a fresh Debian machine (when missing) and builds it.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]     (default BUILD_DIR: build)
# Needs: the CUDA 13 toolkit at /usr/local/cuda (NVRTC and cuBLASLt; no GPU required).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; shift || true

need=()
for pkg in build-essential cmake flex bison libyaml-dev libjansson-dev clang libclang-rt-14-dev python3-pip; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! python3 -c "import numpy, safetensors" 2>/dev/null; then
  echo "setup: installing numpy and safetensors (pip)" >&2
  python3 -m pip install -q numpy safetensors 2>/dev/null ||
    python3 -m pip install -q --break-system-packages numpy safetensors
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDA_HOME:-}" ]; then
  echo "setup: error: the CUDA toolkit is not at /usr/local/cuda; set CUDA_HOME" >&2
  exit 1
fi
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
