#!/usr/bin/env bash
# skip_ops_calls.sh: what the batch-1 decode step spends inside its CUDA graph on each kind of
# small op, measured by leaving the ops out (lab; H3_LAB_SKIP_OPS of dev/skip_ops.patch: the ops
# are not run, their results stay stale, the tokens go wrong and are not the point).
#   dev/skip_ops_calls.sh STAGE [ROUNDS]   (STAGE built with the patch: bin/h3exec and
#                                           plans/m31_small_p2048_n80.plan; dev/m31_step_calls.sh)
# Question (dev/persistent-decode.md): a persistent decode step would keep the small ops'
# work and drop their launches and ramps; the step without them bounds what any structure can
# win there. Every row on one kernel cache (one cuBLASLt tuning, untimed run first).
# Prediction (H100, step ~2.14-2.19 ms): norms (rms_norm, add_rms_norm: 9 launches on the main
# stream) -45 us; q / k norm + rope + writes (rms_norm_rope_write, rms_norm_rope) -20; the
# attention (sparse_attention, paged_attention: 4) -80; router_topk -15 (mostly under the
# shared expert's reads); index_topk (side stream) -0..-30; fused elementwise groups (swiglu,
# the joins' adds, the position glue) -25; all of them together ~-200. And the other side: the
# step without its weight reads (linear, moe: the latency chain alone, ~0.35 ms) and without the
# moe alone (-0.45 ms: 3 x ~150 µs of expert reads, less what the shared expert's reads then
# take on their own).
set -uo pipefail
S=$1 R=${2:-2}
kc=$(mktemp -d)
cp -r "$S/kcache/." "$kc/"
groups=("" rms_norm,add_rms_norm rms_norm_rope_write,rms_norm_rope sparse_attention,paged_attention
  router_topk index_topk fused
  rms_norm,add_rms_norm,rms_norm_rope_write,rms_norm_rope,sparse_attention,paged_attention,router_topk,index_topk,fused
  moe linear,moe)
for r in $(seq 1 "$R"); do
  for g in "${groups[@]}"; do
    H3_LAB_SKIP_OPS=$g dev/m31_step_calls.sh 1 "$S:$kc" | grep decode | sed "s#^#skip ${g:-nothing}: #"
  done
done
