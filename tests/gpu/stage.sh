#!/usr/bin/env bash
# stage.sh: builds, here on the machine without a GPU, everything tests/gpu/run_all.sh needs
# on the GPU machine, into one folder that travels with the device call (name it in carry):
#   STAGE/bin/     h3c, h3exec, gpu_compile_check, test_gpu_ops, test_gpu_model, attention_bench, nvfp4_bench,
#                  block_bench, normmod_gpu_test, test_gpu_int8, test_gpu_collectives
#   STAGE/plans/   h3_tiny.plan (lossless), m31_tiny.plan (M3.1 tiny, lossless), m31_small_p128.plan (M3.1 small, prompt 128, 32 new tokens; _n256: 256 new tokens), m31_small_gpu_test_g8 / _g127.plan (test_gpu_m31's plans), m31_small_p2048_n16 / _n80.plan (prompt 2048, 16 / 80 new tokens: bench/m31_decode.sh; _n1: the prefill alone), m31_small_b64_p256_n8 / _n24.plan, _p2048_ and _p16384_ (64 sequences, prompt 256, 2048 and 16384), m31_small_p16384_n16 / _n80.plan (prompt 16384), m31_small_serve_s1 / _s8 / _s32 / _s64.plan, _s64_k512 / _k1024.plan and _s64_g16 / _g32.plan (serving: bench/m31_serve.sh), h3_tiny_high.plan and h3_tiny_high0.plan (tiny at
#                  --quality high: Cache-DiT with its defaults, and with threshold 0), h3_small_int8.plan (tiny with dims 256 and 2 layers,
#                  --int8 with rotation and row chunks of 24 rows: every linear is int8; and
#                  h3_small_int8_r0.plan without rotation, so the norm+modulate kernels quantize), h3_full_s3.plan (full dims, 3 denoising steps; h3_full_sage_s3.plan the same with --attention sage (h3_full_sage_s3_unfused.plan without sage-q-fusion and attention-v-view), h3_full_sol_s3.plan with --attention sol,dense_steps=1),
#                  h3_full.plan (full dims, the 49-step sample), h3_full_l1.plan and
#                  h3_full_l3.plan (full dims with 1 and 3 layers: bench/block_bench.c), the same
#                  with --int8 (h3_full_int8_l1/l3; and h3_full_int8_rR_l1/l3 with every int8
#                  GEMM split into R-row chunks, R = 0 (never), 4096, 8192, 16384) and at
#                  --quality exact (h3_full_exact_l1/l3),
#                  h3_full_int8.plan and h3_full_int8_spec.plan (49 steps, --int8, without and
#                  with Spectrum 11:5:1.0), h3_full_high.plan (49 steps, Cache-DiT's defaults),
#                  h3_full_int8_sagesol_spec.plan (49 steps, --int8, Sage->Sol, Spectrum 15:5:0.5),
#                  h3_full_sage.plan (49 steps, bf16, --attention sage),
#                  h3_full_int8_s3.plan, h3_tiny_l7.plan, h3_small_int8_l5.plan,
#                  h3_tiny_high_l5.plan, h3_tiny_spec_l5.plan, h3_mid_l4.plan
#                  (dev/stream_device_check.sh)
#   STAGE/kcache/  the NVRTC kernel cache, filled by compiling the plans and the backend's
#                  own kernels, so the GPU machine only loads CUBINs
#   tests/gpu/stage.sh [BUILD_DIR]      (default build-gpu; STAGE = BUILD_DIR/stage; BUILD_DIR
#   may be absolute: a branch checked out in a worktree can stage into a folder of the main
#   checkout, e.g. build-gpu/alt, that travels in the same device call)
# H3_STAGE_BUILD_TYPE picks the CMake build type (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
S=$B/stage
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE="${H3_STAGE_BUILD_TYPE:-RelWithDebInfo}" > /dev/null
cmake --build "$B" -j2 --target h3c h3exec gpu_compile_check test_gpu_ops test_gpu_model test_gpu_m31 attention_bench nvfp4_bench \
  block_bench normmod_gpu_test test_gpu_int8 test_gpu_collectives
rm -rf "$S"
mkdir -p "$S/bin" "$S/plans" "$S/kcache"
cp "$B/h3c" "$B/h3exec" "$S/bin/"
for t in gpu_compile_check test_gpu_ops test_gpu_model test_gpu_m31 attention_bench nvfp4_bench block_bench test_gpu_int8 test_gpu_collectives; do cp "$B/tests/gpu/$t" "$S/bin/"; done
cp "$B/tests/normmod/normmod_gpu_test" "$S/bin/"
strip --strip-debug "$S"/bin/*
export H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
"$S/bin/gpu_compile_check"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny -o "$S/plans/h3_tiny.plan"
"$S/bin/h3c" compile models/minimax_m3_1.g --config tiny -o "$S/plans/m31_tiny.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --gpus 2 -o "$S/plans/h3_tiny_g2.plan"
"$S/bin/h3c" compile models/minimax_m3_1.g --config tiny --gpus 2 -o "$S/plans/m31_tiny_g2.plan"
"$S/bin/h3c" compile models/minimax_m3_1.g --config small --set prompt_len=128 --set max_new_tokens=32 \
  -o "$S/plans/m31_small_p128.plan"
"$S/bin/h3c" compile models/minimax_m3_1.g --config small --set prompt_len=128 --set max_new_tokens=256 \
  -o "$S/plans/m31_small_p128_n256.plan"
# the plans test_gpu_m31 builds itself (their kernels into the cache): prompt 200, 4096-token
# context, two sequences, 9 and 128 verify rows
for g in 8 127; do
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set prompt_len=200 --set max_ctx=4096 \
    --set seqs=2 --set gamma=$g --set max_new_tokens=2 -o "$S/plans/m31_small_gpu_test_g$g.plan"
done
for n in 1 16 80; do # n1: generate is the prefill alone (dev/m31_prefill_profile.sh)
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set max_new_tokens=$n \
    -o "$S/plans/m31_small_p2048_n$n.plan"
done
for n in 8 24; do
  for p in 256 2048 16384; do
    "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set prompt_len=$p \
      --set max_new_tokens=$n -o "$S/plans/m31_small_b64_p${p}_n$n.plan"
  done
done
# the serving plans of bench/m31_serve.sh (chunks of 2048 prompt rows, C decode rows)
for c in 1 8 32 64; do
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=$c -o "$S/plans/m31_small_serve_s$c.plan"
done
# its M31_SERVE_GROUPS plans at concurrency 64 (prefill groups of 16 and 32 prompts; also
# tests/gpu/serve_check.py's)
for g in 16 32; do
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set prefill_group=$g \
    -o "$S/plans/m31_small_serve_s64_g$g.plan"
done
# and its M31_SERVE_CHUNKS plans at concurrency 64: chunks of 512 and 1024 prompt rows
for r in 512 1024; do
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set prompt_len=$r \
    -o "$S/plans/m31_small_serve_s64_k$r.plan"
done
for n in 16 80; do
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set prompt_len=16384 \
    --set max_new_tokens=$n -o "$S/plans/m31_small_p16384_n$n.plan"
done
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set dim=256 --set heads=2 --set head_dim=128 \
  --set ffn=256 --set text_dim=256 --set layers=2 --int8=rotate=256,max_rows=24,min_split_n=0 \
  -o "$S/plans/h3_small_int8.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set dim=256 --set heads=2 --set head_dim=128 \
  --set ffn=256 --set text_dim=256 --set layers=2 --int8=max_rows=24,min_split_n=0 \
  -o "$S/plans/h3_small_int8_r0.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --quality high -o "$S/plans/h3_tiny_high.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --quality high --cache-dit-threshold 0 \
  -o "$S/plans/h3_tiny_high0.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --set steps=3 -o "$S/plans/h3_full_s3.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --set steps=3 --attention sage \
  -o "$S/plans/h3_full_sage_s3.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --set steps=3 --attention sage \
  --disable-pass sage-q-fusion,attention-v-view -o "$S/plans/h3_full_sage_s3_unfused.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --set steps=3 --attention sol,dense_steps=1 \
  -o "$S/plans/h3_full_sol_s3.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full -o "$S/plans/h3_full.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --spectrum=11:5:1.0 -o "$S/plans/h3_tiny_spec.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --spectrum=11:5:1.0 -o "$S/plans/h3_full_spec.plan"
for l in 1 3; do
  "$S/bin/h3c" compile models/minimax_h3.g --config full --set layers=$l -o "$S/plans/h3_full_l$l.plan"
  "$S/bin/h3c" compile models/minimax_h3.g --config full --set layers=$l --int8 \
    -o "$S/plans/h3_full_int8_l$l.plan"
  "$S/bin/h3c" compile models/minimax_h3.g --config full --set layers=$l --quality exact \
    -o "$S/plans/h3_full_exact_l$l.plan"
  for r in 0 4096 8192 16384; do # the row-split table (docs/int8.md): every int8 GEMM split at r
    "$S/bin/h3c" compile models/minimax_h3.g --config full --set layers=$l \
      --int8=max_rows=$r,min_split_n=0 -o "$S/plans/h3_full_int8_r${r}_l$l.plan"
  done
done
"$S/bin/h3c" compile models/minimax_h3.g --config full --int8 -o "$S/plans/h3_full_int8.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --int8 --spectrum=11:5:1.0 \
  -o "$S/plans/h3_full_int8_spec.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --quality high -o "$S/plans/h3_full_high.plan"
# issue 20's composite: --int8, Sage->Sol attention, Spectrum 15:5:0.5 (run_all.sh sagesol)
"$S/bin/h3c" compile models/minimax_h3.g --config full --int8 --attention sol,dense_backend=sage \
  --spectrum=15:5:0.5 -o "$S/plans/h3_full_int8_sagesol_spec.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config full --attention sage -o "$S/plans/h3_full_sage.plan"
# dev/stream_device_check.sh (h3exec --device-memory): 3-step full int8, tiny plans with more blocks
"$S/bin/h3c" compile models/minimax_h3.g --config full --set steps=3 --int8 -o "$S/plans/h3_full_int8_s3.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set layers=7 --set steps=3 -o "$S/plans/h3_tiny_l7.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set dim=256 --set heads=2 --set head_dim=128 \
  --set ffn=256 --set text_dim=256 --set layers=5 --set steps=2 --int8=rotate=256,max_rows=24,min_split_n=0 \
  -o "$S/plans/h3_small_int8_l5.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set layers=5 --quality high -o "$S/plans/h3_tiny_high_l5.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set dim=2048 --set heads=16 --set head_dim=128 \
  --set ffn=4096 --set layers=4 --set text_dim=256 --set steps=2 -o "$S/plans/h3_mid_l4.plan"
"$S/bin/h3c" compile models/minimax_h3.g --config tiny --set layers=5 --spectrum=11:5:1.0 \
  -o "$S/plans/h3_tiny_spec_l5.plan"
du -sh "$S"
echo "staged $S: carry it and run tests/gpu/run_all.sh $S \$OUT"
