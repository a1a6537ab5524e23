#!/usr/bin/env bash
# sage_ptxas.sh: what ptxas makes of kernels/sage_attention.cu for sm_90a (no GPU needed):
# registers, stack and spills of each kernel, and whether ptxas serialised the warpgroup MMAs
# of the warp-specialised form (warning C7513: then S(b) and P(b-1) V(b-1) no longer overlap).
# The source is the prelude + the file, as runtime/cuda/cuda_kernels.c hands it to NVRTC;
# compiled here with nvcc (NVCC, default nvcc on PATH), whose ptxas is NVRTC's.
#   dev/sage_ptxas.sh            prints ptxas's report; exit 1 on a spill or a serialisation
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat kernels/prelude.cuh kernels/sage_attention.cu > "$tmp/sage.cu"
"${NVCC:-nvcc}" -std=c++17 -arch=sm_90a -cubin -Iinclude -Xptxas -v -o "$tmp/sage.cubin" "$tmp/sage.cu" \
  > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
grep -E "Compiling entry|spill|Used|C75" "$tmp/log"
if grep -qE "C7513|[1-9][0-9]* bytes spill" "$tmp/log"; then
  echo "FAIL: spills or serialised wgmmas" >&2
  exit 1
fi
