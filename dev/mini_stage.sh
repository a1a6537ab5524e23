#!/usr/bin/env bash
# mini_stage.sh: a stage of a few binaries and the backend's kernel cache, for a device call
# that needs no precompiled plans (lab; e.g. call 36 of dev/pending_device_calls.sh).
#   dev/mini_stage.sh BUILD_DIR STAGE [--composite] [TARGET...]   (default targets: h3c h3exec
#   gpu_compile_check test_gpu_ops nvfp4_bench; run from a checkout at the commit to stage)
# --composite: also plans/h3_full.plan and plans/h3_full_int8_sagesol_spec.plan (issue 20's
# composite against the bf16 sample: tests/gpu/run_all.sh sagesol), with tests/gpu/stage.sh's
# options; needs h3c among the targets.
set -euo pipefail
B=$1 S=$2
shift 2
composite=0
if [ "${1:-}" = --composite ]; then composite=1; shift; fi
T=("$@")
[ ${#T[@]} -gt 0 ] || T=(h3c h3exec gpu_compile_check test_gpu_ops nvfp4_bench)
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$B" -j2 --target "${T[@]}"
rm -rf "$S"
mkdir -p "$S/bin" "$S/plans" "$S/kcache"
for t in "${T[@]}"; do
  f=$(find "$B" -maxdepth 3 -type f -name "$t" -perm -u+x | head -1)
  cp "$f" "$S/bin/"
done
strip --strip-debug "$S"/bin/*
if [ $composite = 1 ]; then # their kernels into the stage's cache
  export H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
  "$S/bin/h3c" compile models/minimax_h3.g --config full -o "$S/plans/h3_full.plan"
  "$S/bin/h3c" compile models/minimax_h3.g --config full --int8 --attention sol,dense_backend=sage \
    --spectrum=15:5:0.5 -o "$S/plans/h3_full_int8_sagesol_spec.plan"
fi
H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd) "$S/bin/gpu_compile_check"
du -sh "$S"
