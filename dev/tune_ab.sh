#!/usr/bin/env bash
# tune_ab.sh: how much the batch-1 decode step depends on cuBLASLt's tuning (lab): for each build
# DIR, N fresh kernel cache folders (copies of DIR/kcache, no tuning in them), one run each
# (dev/m31_step_calls.sh): the run tunes the decode's GEMMs, then the step's median shows what
# those picks give. Two builds whose tuning differs (e.g. operands rotated past the L2 or not)
# alternate.
#   dev/tune_ab.sh N DIR...
set -uo pipefail
N=$1
shift
for i in $(seq 1 "$N"); do
  for d in "$@"; do
    kc=$(mktemp -d)
    cp -r "$d/kcache/." "$kc/"
    dev/m31_step_calls.sh 1 "$d:$kc" 2>&1 | sed "s#^#tuning $i: #"
    rm -rf "$kc"
  done
done
