#!/usr/bin/env bash
# lab_stages.sh: the stages of calls 121-128 and 84 (dev/pending_device_calls.sh) in a fresh checkout,
# from HEAD and the lab patches (lab; ~5 min on 2 cores). Every stage holds HEAD's h3exec
# (hard links of s60's) and the batch-1 plan (prompt 2048, 80 new tokens) compiled into its own
# kernel cache:
#   s60  HEAD (h3c, h3exec, test_gpu_ops; also the 64-sequence plan)
#   s61  --enable-pass index-topk-early
#   s62  dev/qkv_ik_model.patch's model;  s63  the same with index-topk-early
#   s64  dev/side_lead_linears.patch's h3c, H3_LAB_SIDE_LEAD_LINEARS=1;  s65  =2
#   s66  dev/l2_warm.patch's h3c, H3_LAB_L2_WARM_MB=24;  s67  =40;  s68  =24, H3_LAB_L2_WARM_OP=argmax
#   s69  dev/indexer_qk_model.patch's model (the indexer's q and k projections as one GEMV)
#   s70  HEAD's attention_bench and nvfp4_bench with the backend's kernels (call 126)
#   s71  s60's binaries and kernels, the 128-expert serving plan's kernels too (call 84)
#   s72  HEAD's test_gpu_ops and nvfp4_bench with the backend's kernels (call 128)
#   lab  dev/kernel_timeline.c's preload library and the CUPTI it links (the calls' timelines)
#   dev/lab_stages.sh [BUILD_DIR]   (default build-gpu/s18; run from the repository root, clean tree)
set -euo pipefail
B=${1:-build-gpu/s18}
G=build-gpu
export PATH=/usr/local/cuda/bin:$PATH
[ -z "$(git status --porcelain -- models passes)" ] || { echo "lab_stages.sh: models/ or passes/ has changes" >&2; exit 2; }
dev/mini_stage.sh "$B" $G/s60 h3c h3exec test_gpu_ops > /dev/null
plan() { # plan STAGE H3C [h3c options]: the batch-1 plan of STAGE by H3C into STAGE's kcache
  local s=$1 c=$2; shift 2
  H3_KERNEL_CACHE_DIR=$PWD/$G/$s/kcache "$c" compile models/minimax_m3_1.g --config small \
    --set max_new_tokens=80 "$@" -o $G/$s/plans/m31_small_p2048_n80.plan | tail -1
}
stage() { rm -rf "${G:?}/$1"; mkdir -p $G/$1/plans $G/$1/kcache; [ "$1" = s60 ] || cp -al $G/s60/bin $G/$1/; }
patched_h3c() { # patched_h3c PATCH: an h3c built with PATCH applied, at $G/lab-h3c
  git apply "$1"
  cmake --build "$B" -j2 --target h3c > /dev/null
  cp "$(find "$B" -maxdepth 3 -type f -name h3c -perm -u+x | head -1)" $G/lab-h3c
  git checkout -- passes models
  cmake --build "$B" -j2 --target h3c > /dev/null
}
mkdir -p $G/s60/plans $G/s60/kcache
plan s60 $G/s60/bin/h3c
H3_KERNEL_CACHE_DIR=$PWD/$G/s60/kcache $G/s60/bin/h3c compile models/minimax_m3_1.g --config small \
  --set seqs=64 --set max_new_tokens=24 -o $G/s60/plans/m31_small_b64_p2048_n24.plan | tail -1
stage s61; plan s61 $G/s60/bin/h3c --enable-pass index-topk-early
git apply dev/qkv_ik_model.patch
stage s62; plan s62 $G/s60/bin/h3c
stage s63; plan s63 $G/s60/bin/h3c --enable-pass index-topk-early
git checkout -- models
git apply dev/indexer_qk_model.patch
stage s69; plan s69 $G/s60/bin/h3c
git checkout -- models
patched_h3c dev/side_lead_linears.patch
stage s64; H3_LAB_SIDE_LEAD_LINEARS=1 plan s64 $G/lab-h3c
stage s65; H3_LAB_SIDE_LEAD_LINEARS=2 plan s65 $G/lab-h3c
patched_h3c dev/l2_warm.patch
stage s66; H3_LAB_L2_WARM_MB=24 plan s66 $G/lab-h3c
stage s67; H3_LAB_L2_WARM_MB=40 plan s67 $G/lab-h3c
stage s68; H3_LAB_L2_WARM_MB=24 H3_LAB_L2_WARM_OP=argmax plan s68 $G/lab-h3c
rm -f $G/lab-h3c
dev/mini_stage.sh "$B" $G/s70 gpu_compile_check attention_bench nvfp4_bench > /dev/null
dev/mini_stage.sh "$B" $G/s72 test_gpu_ops nvfp4_bench gpu_compile_check > /dev/null
rm -rf $G/s71; mkdir -p $G/s71/plans; cp -r $G/s60/bin $G/s60/kcache $G/s71/
H3_KERNEL_CACHE_DIR=$PWD/$G/s71/kcache $G/s71/bin/h3c compile models/minimax_m3_1.g --config small --set seqs=1 \
  --set prompt_len=2048 --set experts=128 -o "$(mktemp)" | tail -1
mkdir -p $G/lab
cc -O2 -shared -fPIC -o $G/lab/kernel_timeline.so dev/kernel_timeline.c -I/usr/local/cuda/include \
  -L/usr/local/cuda/lib64 -lcupti -Wl,-rpath,'$ORIGIN'
cp /usr/local/cuda/lib64/libcupti.so.13 $G/lab/
/usr/local/cuda/bin/nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I kernels -I include -I dev \
  dev/nvfp4_wgmma_lab.cu -lcublas -o $G/lab/nvfp4_wgmma_lab
du -sh $G/s6? $G/s7? $G/lab
