#!/usr/bin/env bash
# block_bench_cpu.sh: runs bench/block_bench.c on the cpu backend with tiny plans of 1 and 3
# layers (no GPU needed), checking that the driver times both plans, prints the block line
# and a per-op profile whose rows cover the trunk loop.
#   tests/gpu/block_bench_cpu.sh H3C BLOCK_BENCH MODELS_DIR
set -euo pipefail
h3c=$1 bench=$2 models=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
for l in 1 3; do
  "$h3c" compile "$models/minimax_h3.g" --config tiny --set layers=$l --no-kernels -o "$t/l$l.plan"
done
"$bench" "$t/l1.plan" "$t/l3.plan" --backend cpu --iters 2 --warmup 1 --profile 2 > "$t/out.txt"
cat "$t/out.txt"
grep -q '^h3bench block ' "$t/out.txt"
grep -q '^step with 3 layer(s)' "$t/out.txt"
grep -q '^totals: big GEMMs' "$t/out.txt"
# every op of the trunk body has a row: the attention and the four big linears among them
[ "$(grep -c '^[0-9]* *linear ' "$t/out.txt")" -eq 5 ]
[ "$(grep -c '^[0-9]* *attention ' "$t/out.txt")" -eq 1 ]
