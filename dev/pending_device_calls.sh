#!/usr/bin/env bash
# pending_device_calls.sh: the H200 measurements the code of 2026-12-03 still waits for, in
# priority order, as calls of at most ~9 minutes each (one device call per CALL argument).
#   dev/pending_device_calls.sh STAGE OUT CALL      (on the GPU machine; STAGE: tests/gpu/stage.sh's)
# CALL (test_gpu_ops passed on the H200 on 2026-12-03 with every kernel below in it; the
# streaming acceptance ran the same day):
#   1  the new kernels' correctness and speed: test_gpu_ops (the skinny GEMM's and the Markov
#      mma form's cases, new since the last H200 run), run_all.sh nvfp4 (the split-K NVFP4
#      GEMM and the skinny bf16 GEMM, H3_LINEAR_FORM=skinny, vs cuBLASLt bf16; goal NVFP4
#      >= 2.5 x at M <= 16; skinny: lm_head and o_proj at M = 1 against cuBLASLt's ~3.6 TB/s),
#      m31spec with M31_SPEC_PROFILE=1 (the draft after the live-sequence fix, and the
#      per-op table of a speculative run), m31specmma (the Markov step on tensor cores:
#      predicted ~2 -> ~0.5 ms a round at batch 64). Then make the faster forms the defaults.
#   2  DSpark with the NVFP4 draft and with 128 experts: run_all.sh m31specfp4 m31spec128
#      (goal: >= 2.3 x over plain decode at forced A = 3.5 and batch 64, 128 experts)
#   3  attention: run_all.sh sage sol (attention_bench --sage / --sol at S = 32704: goal sage
#      >= 1.5 x flash; sol's exact-block density; the full 3-step samples with sage and with
#      sol against flash)
#   4  #17's table with the corrected peer: run_all.sh m31decode m31long m31peer (SDPA decode)
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
*) echo "usage: dev/pending_device_calls.sh STAGE OUT 1..4" >&2; exit 2 ;;
esac
echo "call $CALL: rc $?"
tail -40 "$log"
