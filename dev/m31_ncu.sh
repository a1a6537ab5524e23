#!/usr/bin/env bash
# m31_ncu.sh: Nsight Compute readings of M3.1's decode kernels on the GPU (lab; not CI).
#   dev/m31_ncu.sh STAGE OUT
# 1. every kernel of a batch-1 generate (prompt 2048, 16 new tokens; graphs replayed, ncu
#    profiles their nodes) with its duration and DRAM bytes: OUT/b1_times.csv;
#    dev/m31_ncu_summary.py turns the last decode steps into a per-kernel table;
# 2. the moe kernels of two batch-64 decode steps with the speed-of-light, memory and
#    occupancy sections: OUT/b64_moe.txt; and of two batch-1 steps: OUT/b1_moe.txt.
set -uo pipefail
S=$1 OUT=$2
x="$S/bin/h3exec"
common=(--backend cuda --weights random --seed 3 --warmup 0 --iterations 1)
timeout 240 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum \
  "$x" "$S/plans/m31_small_p2048_n16.plan" "${common[@]}" > "$OUT/b1_times.csv" 2> "$OUT/b1_times.err"
echo "b1 times: rc $?, $(wc -l < "$OUT/b1_times.csv") lines"
sec=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats)
# 64 prefill_seq calls of 12 moe launches each (route, two products, combine; 3 MoE layers),
# then 12 per decode step: skip the prefills and one step
timeout 100 ncu --clock-control none "${sec[@]}" -k regex:h3cu_moe --launch-skip 780 --launch-count 24 \
  "$x" "$S/plans/m31_small_b64_p256_n8.plan" "${common[@]}" --graph generate_batch > "$OUT/b64_moe.txt" 2>&1
echo "b64 moe: rc $?"
# one prefill call (12 moe launches), then 12 per step
timeout 100 ncu --clock-control none "${sec[@]}" -k regex:h3cu_moe --launch-skip 24 --launch-count 24 \
  "$x" "$S/plans/m31_small_p2048_n16.plan" "${common[@]}" > "$OUT/b1_moe.txt" 2>&1
echo "b1 moe: rc $?"
