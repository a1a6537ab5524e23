#!/usr/bin/env bash
# m31_topk_check.sh: builds dev/m31_topk_check.c into BUILD_DIR/m31_topk_check (no GPU needed),
# linked as CMake links test_gpu_m31 (BUILD_DIR must have built test_gpu_m31).
#   dev/m31_topk_check.sh [BUILD_DIR]      (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
cmake --build "$B" -j2 --target test_gpu_m31 > /dev/null
L=$B/tests/gpu/CMakeFiles/test_gpu_m31.dir/link.txt
# the link line's libraries: everything after "-o test_gpu_m31", paths relative to its folder
libs=$(sed -e 's/.* -o test_gpu_m31 //' -e "s#\.\./\.\./#$B/#g" "$L")
# shellcheck disable=SC2086
cc -O2 -std=gnu11 -Wall -Wextra -Werror -Iinclude -Itests/gpu -isystem /usr/local/cuda/include \
  dev/m31_topk_check.c tests/gpu/gpu_common.c -o "$B/m31_topk_check" $libs
echo "built $B/m31_topk_check"
