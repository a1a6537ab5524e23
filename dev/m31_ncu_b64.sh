#!/usr/bin/env bash
# m31_ncu_b64.sh: Nsight Compute's full set on the attention and top-k kernels of a 64-row
# M3.1 decode step at a 2k context (lab; not CI), where the attention moves its 268 MB of K / V
# per layer at ~2 TB/s (dev/m31-decode.md): what bounds it.
#   dev/m31_ncu_b64.sh STAGE OUT
# The 64 prefills (one sequence each) run the tiled attention, so the first h3cu_kvattm /
# h3cu_topks launches are the decode steps' (64 rows); the first step's 4 + 3 are skipped,
# then one step's (the dense layer's paged attention, 3 sparse attentions, 3 top-k) profiled:
# OUT/b64.txt (details), OUT/b64_top.txt (the SASS lines with the most stall samples).
set -uo pipefail
S=$1 OUT=$2
mkdir -p "$OUT"
timeout 300 ncu --clock-control none --set full --import-source no -k 'regex:h3cu_kvattm|h3cu_topks' \
  --launch-skip 7 --launch-count 7 -o "$OUT/b64" "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n8.plan" \
  --graph generate_batch --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > "$OUT/b64.log" 2>&1
echo "ncu: rc $?"
dev/ncu_digest.sh "$OUT/b64" 40
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Block Size|Grid Size|Waves Per SM|No Eligible|Warp Cycles Per Issued" "$OUT/b64.txt"
