#!/usr/bin/env bash
# m31_decode_ab.sh: two builds' M3.1 decode step in one call, alternating, so that the card's
# clock drifts alike on both (lab; not CI): per round, the batch-1 step at a 2k context
# (bench/m31_decode.sh's device time of one decode call) of build A, then of build B; then
# one batch-64 step of each when their plans are there.
#   dev/m31_decode_ab.sh DIR_A DIR_B ROUNDS
# DIR: bin/h3exec, kcache/ and plans/m31_small_p2048_n16.plan, _n80.plan (optionally
# m31_small_b64_p2048_n8.plan, _n24.plan); e.g. a slim stage (dev/slim_stage.sh) of each build.
# H3_AB_KCACHE=DIR: one kernel cache for both (the union of theirs: a smaller carry).
set -uo pipefail
A=$1 B=$2 R=${3:-3}
step() { # step DIR TAG: one batch-1 measurement
  H3_KERNEL_CACHE_DIR=$(cd "${H3_AB_KCACHE:-$1/kcache}" && pwd) timeout 80 bench/m31_decode.sh "$1/bin/h3exec" \
    "$1/plans/m31_small_p2048_n16.plan" 16 "$1/plans/m31_small_p2048_n80.plan" 80 3 2>/dev/null |
    sed -n 's/^{.*"ms_step_call": \([0-9.]*\),.*"ms_prefill_call": \([0-9.]*\)}$/\1 \2/p' |
    while read -r s p; do echo "$2 b1 step $s ms prefill $p ms"; done
}
for r in $(seq 1 "$R"); do step "$A" "A$r"; step "$B" "B$r"; done
for d in "$A" "$B"; do
  [ -f "$d/plans/m31_small_b64_p2048_n8.plan" ] || continue
  H3_KERNEL_CACHE_DIR=$(cd "${H3_AB_KCACHE:-$d/kcache}" && pwd) timeout 100 bench/m31_decode.sh "$d/bin/h3exec" \
    "$d/plans/m31_small_b64_p2048_n8.plan" 8 "$d/plans/m31_small_b64_p2048_n24.plan" 24 1 generate_batch \
    2>/dev/null | grep -E '^with CUDA' | sed "s#^#$d b64: #"
done
