#!/usr/bin/env bash
# tune_ab.sh: how much the batch-1 decode step depends on cuBLASLt's tuning (lab): for each build
# DIR, N fresh kernel cache folders (copies of DIR/kcache, no tuning in them), each filled by one
# untimed run that tunes the decode's GEMMs, then one run on those picks (dev/m31_step_calls.sh):
# the step's median shows what the picks give. Never time the run that tunes: on an H100 one
# measured 2.1340 ms and the next run on its picks 2.0942 (2026-12-06). Builds alternate.
#   dev/tune_ab.sh N DIR...
set -uo pipefail
N=$1
shift
for i in $(seq 1 "$N"); do
  for d in "$@"; do
    kc=$(mktemp -d)
    cp -r "$d/kcache/." "$kc/"
    H3_KERNEL_CACHE_DIR=$kc timeout 120 "$d/bin/h3exec" "$d/plans/m31_small_p2048_n80.plan" --backend cuda \
      --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 || echo "$d: the tuning run failed"
    dev/m31_step_calls.sh 1 "$d:$kc" 2>&1 | sed "s#^#tuning $i: #"
    rm -rf "$kc"
  done
done
