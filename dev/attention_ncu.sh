#!/usr/bin/env bash
# attention_ncu.sh: Nsight Compute readings of H3's attention kernels on the GPU (lab; not CI):
# where Sage's and Sol's time goes against flash's. One launch of each kernel at S = 32704, 56 heads x 128 (attention_bench's
# inputs; its timing loop is cut to one iteration), with the sections that answer "which pipe
# or stall bounds it": speed of light, compute workload (pipe use: tensor, FMA, XU/conversion),
# warp state statistics (stall reasons), memory workload, launch stats, occupancy.
#   dev/attention_ncu.sh STAGE OUT
# OUT/flash.txt (h3cu_flash_fwd, the reference point), OUT/sage.txt (h3cu_sage_fwd_fp8_wg1c),
# OUT/sol.txt and OUT/sol_ws.txt (h3cu_sol_fwd and, when built, h3cu_sol_fwd_ws at tau 1,
# plus the pre-passes h3cu_sol_centroids / _kstats / _select).
set -uo pipefail
S=$1 OUT=$2
b="$S/bin/attention_bench"
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache
sec=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
  --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy)
run() { # run NAME KERNEL_REGEX COUNT ENV... -- BENCH_ARGS...: the first COUNT launches that
  # match into OUT/NAME.txt
  local name=$1 k=$2 n=$3
  shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  timeout 150 env "${envs[@]}" ncu --clock-control none "${sec[@]}" -k "regex:$k" --launch-count "$n" \
    "$b" --iters 1 --warm-seconds 0 "$@" > "$OUT/$name.txt" 2>&1
  echo "$name: rc $?, $(grep -c 'Section:' "$OUT/$name.txt") sections"
}
run flash '^h3cu_flash_fwd$' 1 H3_SAGE_FORM=wg1c -- --sage
run sage 'h3cu_sage_fwd_fp8_wg1c' 1 H3_SAGE_FORM=wg1c -- --sage
run sol 'h3cu_sol_(fwd|centroids|kstats|select)$' 4 H3_SOL_FORM=mma -- --sol
run sol_ws 'h3cu_sol_fwd_ws' 1 H3_SOL_FORM=ws -- --sol
