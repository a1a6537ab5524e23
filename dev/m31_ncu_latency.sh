#!/usr/bin/env bash
# m31_ncu_latency.sh: Nsight Compute's full set on the latency-bound kernels of one batch-1
# M3.1 decode step (lab; not CI): the decode attention (h3cu_kvattm), the fused router
# (h3cu_routerf), the indexer's top-k (h3cu_topks) and the vocabulary argmax (h3_argmax),
# where each takes 18-25 us for a few MB.
#   dev/m31_ncu_latency.sh STAGE OUT
# The prompt's prefill runs routerf 3 times and argmax once; the first decode steps are
# skipped with it, then one step's launches of those kernels (4 + 3 + 3 + 1) are profiled:
# OUT/latency.txt (details), OUT/latency_src.txt (the source-level hot spots, SASS).
set -uo pipefail
S=$1 OUT=$2
x="$S/bin/h3exec"
common=(--backend cuda --weights random --seed 3 --warmup 0 --iterations 1)
k='regex:h3cu_kvattm|h3cu_routerf|h3cu_topks|h3_argmax'
timeout 200 ncu --clock-control none --set full --import-source no -k "$k" --launch-skip 26 --launch-count 11 \
  -o "$OUT/latency" "$x" "$S/plans/m31_small_p2048_n16.plan" "${common[@]}" > "$OUT/latency.log" 2>&1
echo "ncu: rc $?"
dev/ncu_digest.sh "$OUT/latency" 40 # tens of MB of report: its text and top lines are what comes back
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Memory Throughput|Block Size|Grid Size|Waves Per SM|Stall|One or More Eligible|No Eligible|Warp Cycles Per Issued" "$OUT/latency.txt"
