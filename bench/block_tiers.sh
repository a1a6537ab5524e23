#!/usr/bin/env bash
# block_tiers.sh: the lossless and the exact full-dimension block, alternating, in ROUNDS rounds
# (one block = (step with 3 layers - step with 1) / 2, bench/block_bench.c), on the GPU machine
# from a staged folder (tests/gpu/stage.sh):   bench/block_tiers.sh [STAGE] [ROUNDS]
# (defaults build-gpu/stage, 3). Prints each run's step medians, the block and the per-op
# profile's sum; the tiers differ only in their norm+modulate, SwiGLU and residual-add kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
S=${1:-build-gpu/stage}
ROUNDS=${2:-3}
export H3_KERNEL_CACHE_DIR=$S/kcache
for round in $(seq "$ROUNDS"); do
  for t in lossless exact; do
    p=$S/plans/h3_full; [ "$t" = exact ] && p=${p}_exact
    echo "===== round $round $t"
    "$S/bin/block_bench" "${p}_l1.plan" "${p}_l3.plan" --iters 9 --warmup 2 --profile 3 2>&1 |
      grep -E "step with|one block|sum of ops"
  done
done
