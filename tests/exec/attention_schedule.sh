#!/bin/sh
# attention_schedule.sh H3C H3EXEC WORK: the Sage->Sol schedule of `--attention sol`
# (docs/models/accelerations.md §5) end to end on the CPU backend. Tiny MiniMax-H3 with
# 300 video rows (320 packed rows: five 64-row blocks, so sol skips blocks at tau 1), 3
# blocks and 12 steps (the --int8 plans: dim 256, so that the linears become int8, and 8
# steps); every plan runs with random weights, seed 3. Checks:
#   - sol with tau=-inf computes every block exactly: bitwise the dense latents, at every
#     step (dense_steps=0,dense_layers=0) and with the default schedule (the loops split at
#     step 10 and block 2 keep their numerics);
#   - dense_steps = steps is bitwise dense_backend alone (dense, and sage);
#   - split loops without sol (dense_steps=3,dense_layers=3) are bitwise dense;
#   - with --spectrum, --quality high (Cache-DiT) and --int8, sol at tau=-inf is bitwise the
#     plan without --attention; --spectrum --int8 with dense_backend=sage runs;
#   - sol at tau 1 changes the latents (blocks skipped), h3exec reports the schedule and
#     its profile counts the calls of each op as scheduled.
set -u
h3c=$1 h3exec=$2 work=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" && cd "$work" || exit 1
fail=0
base="--set layers=3 --set steps=12"
# shellcheck source=tests/exec/tiny_h3_run.sh
. "$src/tests/exec/tiny_h3_run.sh" # run NAME FLAGS..., same A B WHY

# calls NAME SOL DENSE WHY: h3exec's profile of NAME counts SOL sol_attention calls and
# DENSE attention calls.
calls() {
  if ! grep -qE "^  sol_attention +$2 " "$1.log" || ! grep -qE "^  attention +$3 " "$1.log"; then
    echo "FAIL: $1: expected $2 sol_attention and $3 attention calls ($4):" >&2
    grep -E "^  (sol_)?attention " "$1.log" >&2
    fail=1
  fi
}

run dense
run sage --attention sage
run spectrum --spectrum
run cachedit --quality high
wide="--set dim=256 --set heads=16 --set time_hidden=256 --set steps=8"
# shellcheck disable=SC2086
run int8 --int8 $wide

run sol_inf_all --attention sol,tau=-inf,dense_steps=0,dense_layers=0
same sol_inf_all dense "sol at tau=-inf at every (step, block)"
run sol_inf --attention sol,tau=-inf
same sol_inf dense "sol at tau=-inf with the default schedule"
run ds_all --attention sol,dense_steps=12
same ds_all dense "dense_steps = steps, dense_backend=dense"
run ds_all_sage --attention sol,dense_steps=12,dense_backend=sage
same ds_all_sage sage "dense_steps = steps, dense_backend=sage"
run split_dense --attention sol,dense_steps=3,dense_layers=3
same split_dense dense "the sampling loop split at step 3, no sol block"
# Spectrum's 12 steps: real 0-4, 6, 8, 11; step 3 splits a real segment, step 10 a
# forecast one (their coefficient rows read at counter + shift)
run spectrum_sol --spectrum --attention sol,tau=-inf,dense_steps=3,dense_layers=1
same spectrum_sol spectrum "--spectrum with sol at tau=-inf from step 3"
run spectrum_sol10 --spectrum --attention sol,tau=-inf,dense_steps=10,dense_layers=1
same spectrum_sol10 spectrum "--spectrum with sol at tau=-inf from step 10"
run cachedit_sol --quality high --attention sol,tau=-inf,dense_steps=6,dense_layers=1
same cachedit_sol cachedit "Cache-DiT with sol at tau=-inf"
# shellcheck disable=SC2086
run int8_sol --int8 $wide --attention sol,tau=-inf,dense_steps=4,dense_layers=1
same int8_sol int8 "--int8 with sol at tau=-inf"
# shellcheck disable=SC2086
run spectrum_int8_sage --spectrum --int8 $wide --attention sol,dense_backend=sage,dense_steps=4,dense_layers=1
if ! grep -q "int8 for" int8_sol.log || ! grep -q "int8 for" spectrum_int8_sage.log; then
  echo "FAIL: the --int8 plans have no int8 linear" >&2
  fail=1
fi

run sol --attention sol
if cmp -s sol.safetensors dense.safetensors; then
  echo "FAIL: sol at tau 1 gave the dense latents: no block was skipped" >&2
  fail=1
fi
want="attention plan   : steps 0-9: blocks 0-2 dense; steps 10-11: blocks 0-1 dense, blocks 2 sol"
if ! grep -qF "$want" sol.log; then
  echo "FAIL: h3exec's report lacks '$want':" >&2
  cat sol.log >&2
  fail=1
fi
# the profile's calls: sol in block 2 at steps 10-11, dense in the others and the refiner
calls sol 2 35 "10*3 + 2*2 + 1 refiner"
# Spectrum runs the stack at real steps 0-2 (dense) and 3, 4, 6, 8, 11 (block 0 dense, 1-2 sol)
calls spectrum_sol 10 15 "3*3 + 5*1 + 1 refiner"
[ "$fail" = 0 ] && echo "attention_schedule: all checks passed"
exit "$fail"
