#!/usr/bin/env bash
# attention_ptxas.sh: what ptxas makes of a kernel file for sm_90a (no GPU needed; made for the
# warp-specialised attention kernels of kernels/sage_attention.cu and kernels/sol_attention.cu):
# registers, stack and spills of each kernel, and whether ptxas serialised the warpgroup MMAs
# (warnings C7510-C7520: then S and P V no longer overlap). Spills fail the warpgroup-MMA
# kernels (names ending in _ws, _wsp, _wg1 or _wg1c) only: sol_attention.cu's mma form is
# bounded to 168 registers for 3 blocks an SM and spills a few words by design. The source is
# the prelude + the file, as runtime/cuda/cuda_kernels.c hands it to NVRTC; compiled here with
# nvcc (NVCC, default nvcc on PATH), whose ptxas is NVRTC's.
#   dev/attention_ptxas.sh [FILE]   FILE under kernels/ (default sage_attention.cu; a leading
#                                   kernels/ is dropped, so a path from the root works too): prints
#                                   ptxas's report; exit 1 on a serialisation or a spill of a
#                                   warpgroup-MMA kernel
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-sage_attention.cu}
file=${file#kernels/}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat kernels/prelude.cuh "kernels/$file" > "$tmp/k.cu"
"${NVCC:-nvcc}" -std=c++17 -arch=sm_90a -cubin -Iinclude -Xptxas -v -o "$tmp/k.cubin" "$tmp/k.cu" \
  > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
grep -E "Compiling entry|spill|Used|C75" "$tmp/log"
# the entry a report line belongs to follows it ("Compiling entry function 'NAME'")
spilled=$(tac "$tmp/log" | awk "/Compiling entry function '[^']*_(ws|wsp|wg1|wg1c)'/ { if (s) print; s = 0 } \
  /Compiling entry function/ { s = 0 } /[1-9][0-9]* bytes spill/ { s = 1 }")
if grep -qE "C75(1[0-9]|20)" "$tmp/log" || [ -n "$spilled" ]; then
  echo "FAIL: spills or serialised wgmmas" >&2
  exit 1
fi
