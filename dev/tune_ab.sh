#!/usr/bin/env bash
# tune_ab.sh: how much the batch-1 decode step depends on cuBLASLt's tuning (lab): for each build
# DIR, N fresh kernel cache folders (copies of DIR/kcache, no tuning in them), each timed once by
# dev/m31_step_calls.sh, which first fills a folder without tunings by an untimed run (a run that
# tunes is no measurement) and then times the step on those picks. Builds alternate.
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
