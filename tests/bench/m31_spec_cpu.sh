#!/usr/bin/env bash
# m31_spec_cpu.sh: bench/m31_spec.sh end to end on the tiny M3.1 config and the cpu backend, with
# the bandwidth-floor table (M31_SPEC_FLOOR, the copy rate given): every run's moe experts
# counted by h3exec --moe-stats (none "uniform: not measured"), the forced run named BENCH ONLY
# in both tables, and the script's exit 0.
#   tests/bench/m31_spec_cpu.sh H3C H3EXEC WORK
set -uo pipefail
H3C=$1 H3EXEC=$2 WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK/stage/bin" "$WORK/stage/kcache"
ln -s "$(cd "$(dirname "$H3C")" && pwd)/$(basename "$H3C")" "$WORK/stage/bin/h3c"
ln -s "$(cd "$(dirname "$H3EXEC")" && pwd)/$(basename "$H3EXEC")" "$WORK/stage/bin/h3exec"
here=$(cd "$(dirname "$0")" && pwd)
M31_SPEC_CONFIG=tiny M31_SPEC_BACKEND=cpu M31_SPEC_ISL=20 M31_SPEC_OSL=8 M31_SPEC_FLOOR=1 \
  M31_SPEC_GBPS=100 M31_SPEC_ACCEPT=3 "$here/../../bench/m31_spec.sh" "$WORK/stage" "$WORK/out" 2 \
  > "$WORK/table.md" 2> "$WORK/log.txt"
rc=$?
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ $rc = 0 ] || { bad "m31_spec.sh exit $rc"; tail -5 "$WORK/log.txt"; }
floor=$(sed -n '/^Bandwidth floor/,$p' "$WORK/table.md")
[ -n "$floor" ] || bad "no floor table"
[ "$(grep -c '^| 2 |' <<< "$floor")" = 3 ] || bad "the floor table has not 3 rows at concurrency 2: $floor"
grep -q 'uniform: not measured' <<< "$floor" && bad "a run without its --moe-stats count: $floor"
grep -q '^| 2 | forced 3 (BENCH ONLY) |' <<< "$floor" || bad "the forced run is not named BENCH ONLY: $floor"
grep -q '| 2 | speculative | [0-9.]* of 8 (10) |' <<< "$floor" || bad "the verify's 10 rows not counted: $floor"
[ $fail = 0 ] && echo "m31_spec_cpu: passed"
exit $fail
