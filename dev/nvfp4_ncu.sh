#!/usr/bin/env bash
# nvfp4_ncu.sh: Nsight Compute's full set on the NVFP4 W4A16 GEMM at M = 1 and 16 (lab; not
# CI): is the kernel bound by latency or by issue? (dev/nvfp4-gemm.md)
#   dev/nvfp4_ncu.sh STAGE OUT       (STAGE: tests/gpu/stage.sh's, with bin/nvfp4_bench)
# nvfp4_bench --rows 1,16 runs the draft's four weights at each M (warm-ups first); the first
# launches (warm-up and timed, about 2 per (weight, M)) are profiled: OUT/nvfp4.txt (details),
# OUT/nvfp4_top.txt (the SASS lines with the most stall samples), and the summary lines here.
set -uo pipefail
S=$1 OUT=$2
mkdir -p "$OUT"
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache
timeout 300 ncu --clock-control none --set full --import-source no -k 'regex:h3cu_nvfp4_' --launch-count 16 \
  -o "$OUT/nvfp4" "$S/bin/nvfp4_bench" --rows 1,16 --iters 1 --warm-seconds 0 > "$OUT/nvfp4.log" 2>&1
echo "ncu: rc $?"
dev/ncu_digest.sh "$OUT/nvfp4" 30
grep -E "^  [a-z_0-9]+.*\(|Duration|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Grid Size|No Eligible|Warp Cycles Per Issued|Stall" "$OUT/nvfp4.txt"
