#!/usr/bin/env bash
# pending_device_calls.sh: the H200 measurements the code of 2026-12-03 still waits for, in
# priority order, as calls of at most ~9 minutes each (one device call per CALL argument).
#   dev/pending_device_calls.sh STAGE OUT CALL      (on the GPU machine; STAGE: tests/gpu/stage.sh's)
# CALL (calls 1-3 ran on 2026-12-03: dev/results/2026-12-03-h200-s9-nvfp4-skinny-spec-markov-
# fp4-128-sage-sol.txt; the Markov step's tensor-core form became the default from it):
#   4  #17's table with the corrected peer: run_all.sh m31decode m31long m31peer (SDPA decode)
#   5  the kernels changed after calls 1-3: run_all.sh sol sage (test_gpu_ops with Sol's staged
#      pseudo-keys and Sage's warp-specialised form; attention_bench --sol / --sage: predicted
#      sol at tau 1 40.8 -> ~27 ms), one profiled DSpark run with 128 experts at batch 64
#      (forced acceptance 4; the per-op table of a round: where the 19 ms verify goes), then
#      run_all.sh m31decode m31long (#17's h3 side, no peer)
# Each call writes OUT/callN.txt; strip machine paths before copying logs into dev/results.
set -uo pipefail
S=$1 OUT=$2 CALL=$3
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache PYTHONUNBUFFERED=1
mkdir -p "$OUT"
log=$OUT/call$CALL.txt
case $CALL in
1) { timeout 150 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok'
   M31_SPEC_PROFILE=1 timeout 400 tests/gpu/run_all.sh "$S" "$OUT/ra" nvfp4 m31spec m31specmma; } > "$log" 2>&1 ;;
2) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" m31specfp4 m31spec128 > "$log" 2>&1 ;;
3) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" sage sol > "$log" 2>&1 ;;
4) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" m31decode m31long m31peer > "$log" 2>&1 ;;
5) { timeout 300 tests/gpu/run_all.sh "$S" "$OUT/ra" sol sage
   M31_SPEC_PROFILE=1 M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 150 bench/m31_spec.sh "$S" \
     "$OUT/spec128p" 64
   timeout 120 tests/gpu/run_all.sh "$S" "$OUT/ra2" m31decode m31long; } > "$log" 2>&1 ;;
*) echo "usage: dev/pending_device_calls.sh STAGE OUT 1..5" >&2; exit 2 ;;
esac
echo "call $CALL: rc $?"
tail -40 "$log"
