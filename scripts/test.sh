#!/usr/bin/env bash
# test.sh: sets up (scripts/setup.sh), builds, and runs every test that needs no GPU:
#   1. the release build's ctest suites;
#   2. the same suites built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the libFuzzer build (clang): each fuzz target for a short run (ctest label fuzz).
# GPU tests (label gpu) report "skipped" on a machine without a GPU.
#   scripts/test.sh [--quick]     --quick: release build only (no sanitizer, no fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)
export H3_KERNEL_CACHE_DIR=${H3_KERNEL_CACHE_DIR:-$PWD/build/kernel-cache}

scripts/setup.sh build
(cd build && ctest --output-on-failure -j"$jobs")
[ $quick -eq 1 ] && exit 0

echo "== sanitizer build (ASan + UBSan) ==" >&2
scripts/setup.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DH3_SANITIZE=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && H3_KERNEL_CACHE_DIR=$PWD/kernel-cache ctest --output-on-failure -j"$jobs" -LE slow)

echo "== fuzz targets (libFuzzer, clang; each runs briefly over its seed corpus) ==" >&2
CC=clang scripts/setup.sh build-fuzz -DCMAKE_BUILD_TYPE=Debug -DH3_FUZZ=ON
(cd build-fuzz && ctest --output-on-failure -L fuzz)
echo "test.sh: all suites passed" >&2
