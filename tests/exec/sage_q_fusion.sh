#!/bin/sh
# sage_q_fusion.sh H3C H3EXEC WORK: sage-q-fusion end to end on the CPU backend. Tiny
# MiniMax-H3 with 300 video rows (five 64-row q blocks in the live segment, the padding rows
# their own segment), 4 steps, `--attention sage`, random weights of seed 3; each plan
# compiled with the pass (h3c --report says it fused the block's q; h3exec's report lists it
# among the passes) and with `--disable-pass sage-q-fusion` (no report line), at the default
# tier, at --quality exact, with pv=bf16,smooth=0 and with --int8 (wide: q's norm reads the
# int8 qkv GEMM's dequantized columns): the latents of the two plans are the same bytes; the
# sage plan's are not the dense plan's. Also attention-v-view on sage_attention: the latents
# with v read in place equal those with `--disable-pass attention-v-view`.
set -u
h3c=$1 h3exec=$2 work=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" && cd "$work" || exit 1
fail=0
base="--set steps=4 --report"
# shellcheck source=tests/exec/tiny_h3_run.sh
. "$src/tests/exec/tiny_h3_run.sh" # run NAME FLAGS..., same A B WHY

# pair P FLAGS...: P with the pass and P_off without it; same latents.
pair() {
  p=$1
  shift
  run "$p" --attention sage "$@"
  run "${p}_off" --attention sage --disable-pass sage-q-fusion "$@"
  if ! grep -q "^# sage-q-fusion: sage_attention q quantized by its rms_norm_rope: 1 sites" "$p.clog" ||
    ! grep -q "passes .*sage-q-fusion" "$p.log"; then
    echo "FAIL: $p: h3c did not report the fused q, or h3exec does not list the pass:" >&2
    cat "$p.clog" >&2
    fail=1
  fi
  if grep -q "sage-q-fusion" "${p}_off.clog"; then
    echo "FAIL: ${p}_off: --disable-pass sage-q-fusion still ran it" >&2
    fail=1
  fi
  same "$p" "${p}_off" "the latents with sage-q-fusion and without it ($*)"
}

pair lossless
# attention-v-view's sage-v-view pattern: the block's sage_attention reads v in place from qkv
# (with the text refiner's dense attention, 2 sites); without the pass, the same latents
run vview_off --attention sage --disable-pass attention-v-view
if ! grep -q "^# attention-v-view: attention v read in place: 2" lossless.clog; then
  echo "FAIL: sage_attention with v read in place: not reported" >&2
  fail=1
fi
same lossless vview_off "sage_attention with v read in place and with v copied"
pair exact --quality exact
pair bf16 --attention sage,pv=bf16,smooth=0
pair int8 --int8 --set dim=256 --set heads=16 --set time_hidden=256
run dense
if cmp -s lossless.safetensors dense.safetensors; then
  echo "FAIL: the sage plan gave the dense latents: sage did not run" >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "sage_q_fusion: all checks passed"
exit "$fail"
