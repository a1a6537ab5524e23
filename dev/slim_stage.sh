#!/usr/bin/env bash
# slim_stage.sh: a copy of tests/gpu/stage.sh's folder with only the named plans, hard-linked,
# for a device call whose carry (64 MiB with the tracked tree) the whole stage overflows (lab).
#   dev/slim_stage.sh STAGE SLIM PLAN...      (PLAN: a name in STAGE/plans, without .plan)
# e.g. dev/slim_stage.sh build-gpu/stage build-gpu/stage_m31 m31_tiny m31_small_p2048_n16 \
#        m31_small_p2048_n80 m31_small_b64_p2048_n8 m31_small_b64_p2048_n24
set -euo pipefail
S=$1 D=$2
shift 2
rm -rf "$D"
mkdir -p "$D/plans"
cp -al "$S/bin" "$S/kcache" "$D/"
for p in "$@"; do cp -al "$S/plans/$p.plan" "$D/plans/"; done
du -sh "$D"
