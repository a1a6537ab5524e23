#!/usr/bin/env bash
# test.sh: sets up (scripts/setup.sh), builds, and runs every test that needs no GPU:
#   1. the release build's ctest suites;
#   2. the same suites built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the libFuzzer targets (clang; only they are built there): each for a short run (the
#      seed corpora themselves run as unit tests in stages 1 and 2).
# GPU tests (label gpu) report "skipped" on a machine without a GPU. One line per stage on
# stderr with its time; build output goes to BUILD_DIR/build.log (its tail is shown when a
# build fails), test output only for failing tests.
#   scripts/test.sh [--quick]     --quick: release build only (no sanitizer, no fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)
export H3_KERNEL_CACHE_DIR=${H3_KERNEL_CACHE_DIR:-$PWD/build/kernel-cache}
export PATH=/usr/local/cuda/bin:$PATH
start=$SECONDS

# stage NAME COMMAND...: runs COMMAND, then prints NAME with its time and the total so far
stage() {
  local name=$1 t=$SECONDS
  shift
  "$@"
  echo "test.sh: $name done in $((SECONDS - t)) s ($((SECONDS - start)) s in all)" >&2
}

# quiet_build DIR COMMAND...: COMMAND's output into DIR/build.log; its tail when it fails
quiet_build() {
  local dir=$1
  shift
  mkdir -p "$dir"
  if ! "$@" > "$dir/build.log" 2>&1; then
    tail -40 "$dir/build.log" >&2
    echo "test.sh: the build in $dir failed (full log: $dir/build.log)" >&2
    return 1
  fi
}

# suites DIR [CTEST ARGS...]: ctest's output into DIR/test.log; its summary line, and the
# output of the failing tests when some fail
suites() {
  local dir=$1
  shift
  if (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@" > test.log 2>&1); then
    grep -E "tests passed|tests failed" "$dir/test.log" >&2 || true
  else
    cat "$dir/test.log" >&2
    echo "test.sh: tests failed in $dir (log: $dir/test.log)" >&2
    return 1
  fi
}

stage "release build" quiet_build build scripts/setup.sh build
stage "release tests" suites build
[ $quick -eq 1 ] && exit 0

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "sanitizer build (ASan + UBSan)" quiet_build build-asan scripts/setup.sh build-asan \
  -DCMAKE_BUILD_TYPE=Debug -DH3_SANITIZE=ON
# the release stage's kernel cache: NVRTC compiled every kernel there already (the cache is
# content-addressed; a sanitizer build reads and writes the same entries)
stage "sanitizer tests" suites build-asan -LE slow

fuzz_targets=(fuzz_frontend fuzz_ir_parse fuzz_plan_read fuzz_safetensors fuzz_requests)
stage "fuzz build (libFuzzer, clang)" quiet_build build-fuzz bash -c \
  "CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DH3_FUZZ=ON &&
   cmake --build build-fuzz -j$jobs --target ${fuzz_targets[*]}"
stage "fuzz runs" suites build-fuzz -L fuzz -LE unit
echo "test.sh: all suites passed in $((SECONDS - start)) s" >&2
