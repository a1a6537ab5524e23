#!/usr/bin/env bash
# compile_time.sh: wall time of `h3c compile` for both full-config models, with a cold
# kernel cache (a fresh, empty cache folder) and then warm (same folder again).
# Targets (on a 2-core machine like CI's): cold <= 10 s, warm <= 1 s.
#   bench/compile_time.sh [BUILD_DIR]      prints a table; writes dev/results/DATE-compile-time.txt
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
h3c=$build/h3c
[ -x "$h3c" ] || { echo "compile_time: $h3c not built; run scripts/setup.sh" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p dev/results
out=dev/results/$(date +%F)-compile-time.txt
now() { date +%s.%N; }
{
  echo "# h3c compile wall time, $(date -u +%FT%TZ), $(nproc) cores, $(uname -m), h3 $($h3c --version)"
  printf '%-34s %-6s %10s %10s %8s\n' model config cold_s warm_s kernels
  for spec in "models/minimax_h3.g full" "models/minimax_m3_1.g full"; do
    set -- $spec
    export H3_KERNEL_CACHE_DIR=$tmp/cache-$(basename "$1" .g)
    t0=$(now); "$h3c" compile "$1" --config "$2" --quality lossless -o "$tmp/p.plan"; t1=$(now)
    "$h3c" compile "$1" --config "$2" --quality lossless -o "$tmp/p.plan"; t2=$(now)
    nk=$(grep -c '^- name: h3_' "$tmp/p.plan" || true)
    printf '%-34s %-6s %10.3f %10.3f %8s\n' "$1" "$2" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$nk"
  done
} | tee "$out"
