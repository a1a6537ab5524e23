#!/usr/bin/env bash
# mini_stage.sh: a stage of a few binaries and the backend's kernel cache, for a device call
# that needs no precompiled plans (lab; e.g. call 36 of dev/pending_device_calls.sh).
#   dev/mini_stage.sh BUILD_DIR STAGE [--composite] [TARGET...]   (default targets: h3c h3exec
#   gpu_compile_check test_gpu_ops nvfp4_bench; run from a checkout at the commit to stage)
# --composite: also plans/h3_full.plan, plans/h3_full_int8_sagesol_spec.plan and
# plans/h3_full_sage.plan (issue 20's samples against the bf16 one: tests/gpu/run_all.sh sagesol,
# sagesample), with tests/gpu/stage.sh's options; needs h3c among the targets.
# --m31-ab "H3C_FLAGS": also M3.1 small's decode plans of dev/m31_decode_ab.sh (prompt 2048,
# batch 1 and 64) in plans/, and compiled again with H3C_FLAGS (e.g. "--disable-pass X") in
# STAGE/b/plans beside a hard link of bin/: dev/m31_decode_ab.sh STAGE/b STAGE R; needs h3c.
set -euo pipefail
B=$1 S=$2
shift 2
composite=0 ab=
if [ "${1:-}" = --composite ]; then composite=1; shift; fi
if [ "${1:-}" = --m31-ab ]; then ab=$2; shift 2; fi
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
  "$S/bin/h3c" compile models/minimax_h3.g --config full --attention sage -o "$S/plans/h3_full_sage.plan"
fi
if [ -n "$ab" ]; then # the decode plans, then the same with the flags (their kernels into the cache)
  export H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
  mkdir -p "$S/b/plans"
  cp -al "$S/bin" "$S/b/"
  for d in "$S/plans:" "$S/b/plans:$ab"; do
    for n in 16 80; do # shellcheck disable=SC2086 # the flags are words
      "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set max_new_tokens=$n ${d#*:} \
        -o "${d%%:*}/m31_small_p2048_n$n.plan"
    done
    for n in 8 24; do # shellcheck disable=SC2086
      "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set max_new_tokens=$n ${d#*:} \
        -o "${d%%:*}/m31_small_b64_p2048_n$n.plan"
    done
  done
fi
if [ -x "$S/bin/gpu_compile_check" ]; then H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd) "$S/bin/gpu_compile_check"; fi
du -sh "$S"
