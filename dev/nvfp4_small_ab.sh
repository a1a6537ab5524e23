#!/usr/bin/env bash
# nvfp4_small_ab.sh CARRY: on the GPU machine, the small-M NVFP4 kernel (dev/nvfp4-small-m.patch,
# built into CARRY/new) against the product's (CARRY/old) in one call, then the patched
# test_gpu_ops (its linear_nvfp4 cases against the CPU reference, and every other op). Staging:
# the patch's header. Logs under $OUT (else /tmp): nvfp4-ab.txt (the two benches at the
# draft's four weights, M = 1, 4, 16, each NMSE against cuBLASLt checked by the bench, new
# first, then old, then new again: the card's clock drifts under load) and gpu-ops.txt.
# ~300 s of device time: each bench ~60 s (host weight generation, NVRTC on first use),
# test_gpu_ops ~100 s.
set -u
C=${1:?usage: dev/nvfp4_small_ab.sh CARRY}
O=${OUT:-/tmp}
export H3_KERNEL_CACHE_DIR=$PWD/$C/kcache
mkdir -p "$H3_KERNEL_CACHE_DIR"
A="--rows 1,4,16 --no-skinny --no-lm-head --warm-seconds 0.2"
for b in new old new; do
  echo "== $b"
  timeout 100 "$C/$b/nvfp4_bench" $A
  echo "rc $?"
done > "$O/nvfp4-ab.txt" 2>&1
grep -vE "^h3bench" "$O/nvfp4-ab.txt"
echo "== test_gpu_ops (patched)"
timeout 150 "$C/new/test_gpu_ops" models > "$O/gpu-ops.txt" 2>&1
echo "rc $?"
grep -E "linear_nvfp4|FAIL|passed" "$O/gpu-ops.txt" | tail -20
