#!/usr/bin/env bash
# sage_ncu.sh: Nsight Compute's full set on Sage's default form (wg1c) and h3's flash kernel at
# S = 32704 (lab; not CI): which instructions Sage's warps stall on (dev/sage-attention.md; on
# 2026-12-06 Sage issued ~1.3 x flash's instructions for half its tensor work, 56 % of issue
# slots busy, the tensor pipe at 39 %).
#   dev/sage_ncu.sh STAGE OUT       (STAGE: tests/gpu/stage.sh's, with bin/attention_bench)
# OUT/sage.txt (details of one launch each), OUT/sage_top.txt (per kernel, the SASS lines with
# the most stall samples: dev/ncu_source_top.py), and the summary lines here.
set -uo pipefail
S=$1 OUT=$2
mkdir -p "$OUT"
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache
H3_SAGE_FORM=wg1c timeout 400 ncu --clock-control none --set full --import-source no \
  -k 'regex:^h3cu_(flash_fwd|sage_fwd_fp8_wg1c)$' --launch-count 2 \
  -o "$OUT/sage" "$S/bin/attention_bench" --sage --iters 1 --warm-seconds 0 > "$OUT/sage.log" 2>&1
echo "ncu: rc $?"
dev/ncu_digest.sh "$OUT/sage" 40
grep -E "^  [a-z_0-9]+.*\(|Duration|Issue Slots Busy|Achieved Occupancy|Registers Per|No Eligible|Warp Cycles Per Issued|Stall" "$OUT/sage.txt"
