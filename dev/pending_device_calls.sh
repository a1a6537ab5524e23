#!/usr/bin/env bash
# pending_device_calls.sh: the H200 measurements the code of 2026-12-03 still waits for, in
# priority order, as calls of at most ~9 minutes each (one device call per CALL argument).
#   dev/pending_device_calls.sh STAGE OUT CALL      (on the GPU machine; STAGE: tests/gpu/stage.sh's)
# Next (2026-12-07, session 40: 127 and 128 ran on an H100, dev/results/2026-12-07-h100-s40-call127-
#   128-nvfp4-wgmma.txt; NVFP4's warpgroup form is the product's default at 9-16 rows; the lab
#   now times wgc, its cluster form; stage s72 added to dev/lab_stages.sh). One call, by card:
#     if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
#       M128_TESTS=1 dev/session_call.sh $OUT build-gpu/s60:127 build-gpu/s60:121 build-gpu/s72:128
#       M126_NVFP4=0 dev/session_call.sh $OUT build-gpu/s70:126
#     else dev/session_call.sh $OUT build-gpu/s60:127 build-gpu/s60:124; fi
#   (carry s60, s61, lab, s70, s72, s63, s64, s65 / s69 (8 at most); ~9 min on an H200, ~8 on an
#   H100; short budget: 122 for 121, M124_ROUNDS=1). Then as below.
# Before (2026-12-07, session 39: no machine started, 16 refusals; stages s70 (call 126: Sage and
#   NVFP4 kernel figures) and s71 (call 84) added to dev/lab_stages.sh).
# Before (2026-12-07, session 38; 119, 120 and 122 ran on H100s: dev/results/2026-12-07-h100-side-
#   priority-branch-forms.txt, -priority-reverted-timeline.txt; the side priority lost and is
#   reverted, the branch's skinny forms lost). Stages s60-s69 and lab: dev/lab_stages.sh (~5
#   min in a fresh checkout, after scripts/setup.sh's packages; ~27 MB to carry). On an H200,
#   in this order: 121 (issue 17's figure, PDL, index-topk-early; ~4.5 min), 124 (the indexer
#   window: the k rows in the qkv GEMV, s63, against the branch's GEMVs ahead of the fork,
#   s64 / s65, and the indexer's two GEMVs as one, s69; ~7 min), 84 (issue 19's batch-1
#   rounds, ~8 min; its own stage), then 125 (o_proj's first rows warmed in the L2 beside the
#   decode attention, s66-s68; ~6 min; a poor prior: see its comment). On an H100, 124 and 125
#   (their predictions name both cards). 123 is 124 with s62 (the k rows without
#   index-topk-early) instead of s64 / s65.
# Before (2026-12-07, session 37; 113 and 116 ran on H100s: dev/results/2026-12-07-h100-one-wave-pdl-
#   hoisted.txt, -pdl-ordered-topk-early.txt): on an H200, 115 (issue 17's figure with the
#   programmatic launches, and index-topk-early there). A fresh checkout: stage s56 at HEAD
#   (dev/mini_stage.sh build-gpu/s18 build-gpu/s56 h3c h3exec test_gpu_ops; both plans into its
#   kcache) and s57 = the same binaries with plans/m31_small_p2048_n80.plan compiled
#   --enable-pass index-topk-early; run dev/session_call.sh $OUT build-gpu/s56:115 (carry s56,
#   s57, lab; ~8 min; HEAD's s56 runs the side stream at the greatest priority, unmeasured: 117
#   measures it on the same stage, so run both in one session). Then 117 (H3_SIDE_PRIORITY;
#   either card; STAGE = s56), 118 (the branch's GEMVs without a reduce launch,
#   dev/branch_skinny.patch), 111 on an H200 if s51 / s52 are wanted, 112, 84. Building a
#   stage in a fresh checkout takes ~1 min (scripts/setup.sh's packages first).
# Before (2026-12-07, session 36; 108 and 109 ran on an H100: dev/results/2026-12-07-h100-decode-round-trips-
#   gemm-gap.txt; 111 on an H100: -side-linears-beside.txt): 111 again on an H200 (issue 17's
#   figure: s51 and s52 on one card; ~8 min), 113 on build-gpu/s55 (~9 min, either card: the
#   moe's one-row GEMVs as one wave, its down GEMV and the router launched programmatically),
#   112 (~5 min), 84 on an H200. Run as: dev/session_call.sh $OUT build-gpu/s52:111 (carry
#   build-gpu/s51, s52, lab), dev/session_call.sh $OUT build-gpu/s55:113 (carry s53, s54, s55,
#   lab), dev/session_call.sh $OUT build-gpu/s55:112 (carry s55); on an H100 113 first.
# Before (2026-12-07, session 35; 103-105 ran on an H100: dev/results/2026-12-07-h100-side-reserve-norms-
#   msa-stamps.txt, 106: -topk-small-hot-loop.txt, 107: -attention-merge-cluster-reads.txt): 108 on
#   build-gpu/s51 (the day's changes against s47; ~8 min; an H200 first if one comes), then
#   84 on an H200; 109 (~3 min) on an H100 beside either.
# Before (2026-12-07, end of session 34; 99, 98, 91 and 92 ran on an H100, 100 and two short calls on an
#   H200: dev/results/2026-12-07-h100-counter-uploads-decode-next-tuning-skip-ops.txt and
#   -h200-step-timeline-split-caps.txt). Stages (each with both M3.1 plans in its kcache): s47 =
#   1f3fdfb (HEAD), s46 = the same with 8674396's codegen change reverted (the norms' two-pass form),
#   s48 = s47 with dev/msa_stamps.patch. Calls: 103 on build-gpu/s47 (carry it and build-gpu/lab,
#   which holds kernel_timeline.so and libcupti.so.13: the lines in dev/kernel_timeline.c's header;
#   ~8 min), then 104 on s47 (carry s46 and s47; ~5 min) with 105 on s48 (carry s48 and lab; ~2 min)
#   in one call, then 84 on an H200.
# Before (2026-12-07, end of session 33; 97 ran on an H100 with M97_FORMS=split and refuted the persistent
#   step: dev/results/2026-12-07-h100-persistent-split-forms-decode-next.txt; 98 ran one round and s44's
#   bench ended at its 140 s timeout: s44's plan times decode_next's step calls too, which s41's lacks, so
#   the timeout is 200 s now): 99 (~4 min; the loop counter's copies, b43f944: stage build-gpu/s45) and
#   98 again (M98_ROUNDS=1: ~6 min), then 84 on an H200, 91.
# Before (2026-12-07, end of session 32; 93, 95 and 96 ran on H100s: dev/results/2026-12-06-h100-phase-
#   remap-persistent-first-run.txt and -persistent-step-converted.txt: the persistent step converts and
#   gives equal tokens but runs 2.75 ms against 2.19): 97 first (why, and whether the split form wins;
#   stage build-gpu/s43r: git apply dev/persistent_step.patch && dev/mini_stage.sh build-gpu/s18
#   build-gpu/s43r h3c h3exec, git checkout the three files and rm runtime/cuda/cuda_persistent.c, then
#   its h3c compiles plans/m31_small_p2048_n80.plan into its kcache; carry build-gpu/s43r), packed with
#   91 (carry build-gpu/s40, build-gpu/s41): dev/session_call.sh $OUT build-gpu/s43r:97 build-gpu/s41:91
#   (~12 min: over the 600 s limit; 97 alone, then 91 in a second call). Then 98 (generate's argmax
#   inside its step graph: the time per token, stages build-gpu/s41 and build-gpu/s44), then 84 on an H200.
# Next (2026-12-06, end of session 31; 88-90 ran on H100s: dev/results/2026-12-06-h100-tuning-variants-
#   persistent-chain.txt and -persistent-chain-staged.txt; 88's first patch is in the product, 90's
#   staging refuted): 91 first (the 64-sequence step with the tuning without variants, never
#   measured), then 84 on an H200. Stages: dev/mini_stage.sh build-gpu/s18 build-gpu/s41 h3c h3exec
#   at HEAD, and build-gpu/s40 at c753748 (the tuning with variants), each with
#   plans/m31_small_p2048_n80.plan and plans/m31_small_b64_p2048_n24.plan compiled by its h3c
#   (--set seqs=64 --set max_new_tokens=24) into its kcache; run dev/pending_device_calls.sh
#   build-gpu/s41 $OUT 91 (carry s40 and s41). Then 92 (dev/skip_ops_calls.sh: the step without each
#   kind of small op, the bound of a persistent step's gain; its stage needs dev/skip_ops.patch),
#   and 93 beside either (dev/phase_remap.cu, ~10 s: a kernel file as a persistent kernel's phase),
#   then 94 on s41 (what the persistent step's first form gives up: skinny linears, the scratch
#   combine, one stream), then 95 (dev/persistent_step.patch: the first form itself, never run).
#   Packed (each ~6-9 min): dev/session_call.sh $OUT build-gpu/s43p:93 build-gpu/s43p:95 (carry
#   build-gpu/s43p, build-gpu/lab); then s41:94; then s41:91 (carry s40 too); then s42s:92.
# Before (2026-12-06, session 30; 85-87 ran on an H100: dev/results/2026-12-06-h100-cluster-forms-tuning.txt; the
#   three cluster forms lost and are gone, so 85 and 86 are history): 88 (why the tuner's picks
#   vary, and dev/tune_no_variants.patch), then 84 (issue 19's batch-1 rounds on an H200), then
#   80 / 82. Stages for 88 (a fresh checkout: scripts/setup.sh first; PATH with /usr/local/cuda/bin):
#     dev/mini_stage.sh build-gpu/s18 build-gpu/s40 h3c h3exec
#     git apply dev/tune_no_variants.patch && dev/mini_stage.sh build-gpu/s18 build-gpu/s40v h3c h3exec
#     git checkout runtime/cuda/cuda_gemm_tune.c
#     git apply dev/tune_one_block_clusters.patch && dev/mini_stage.sh build-gpu/s18 build-gpu/s40c h3c h3exec
#     git checkout runtime/cuda/cuda_gemm_tune.c
#     for v in s40 s40v s40c; do H3_KERNEL_CACHE_DIR=$PWD/build-gpu/$v/kcache build-gpu/$v/bin/h3c compile \
#       models/minimax_m3_1.g --config small --set max_new_tokens=80 -o build-gpu/$v/plans/m31_small_p2048_n80.plan; done
#   then run: dev/pending_device_calls.sh build-gpu/s40 $OUT 88 (carry build-gpu/s40, s40v, s40c).
#   89 (dev/persistent_chain.cu: is a persistent layer kernel issue 17's lever?) fits beside 88 or 84.
# Before (session 29; 83 ran on an H100: dev/results/2026-12-06-h100-s29-*.txt): 85 and 86.
#   A whole bench/m31_decode.sh takes ~130 s: measure steps with dev/m31_step_calls.sh (~25 s a
#   run) and one kernel cache folder for every build of an A/B; and not in the run that tunes
#   (call 87: a run that tunes measured 2.1340 ms, the next run on its picks 2.0942).
# Before (2026-12-06, session 28; 75-78 ran on an H100: dev/results/2026-12-06-h100-s28-*.txt):
#   79 on build-gpu/s35 (the batched verify's page table per sequence; ran: the tiled kernel's
#      groups lost, 26.93 against 26.37 ms, so they are opt-in). Next: 80 (a 64-sequence round's
#      kernel times under ncu), 82 (the same under H3_M31_ATTENTION=tile: which attention kernel
#      is faster, and by how much), then 81 (issue 17's split counts) on a stage of HEAD.
# Before (2026-12-06, end of session 27; 71-74 ran on an H100: dev/results/2026-12-06-h100-s27-*.txt):
#   75 on build-gpu/s33 (h3c, h3exec, built at the end of session 27; rebuild with dev/mini_stage.sh
#      build-gpu/s18 build-gpu/sNN h3c h3exec if the product changed): ncu of one forced
#      round at 128 experts, batch 1 (the draft at 1.49 x its floor, the round's linears at ~1.9 x their
#      bytes); then the lever it names (dev/m31-decode.md, session 27). Sage: wg1p refuted and removed
#      (dev/sage-attention.md); nothing pending there.
# Next (2026-12-06, end of session 26; 63-64 and 66-70 ran on an H100: dev/results/2026-12-06-h100-s26-*.txt):
#   71 on a stage of HEAD (dev/mini_stage.sh build-gpu/s18 build-gpu/sNN --composite $T): test_gpu_ops
#      first (wg1p's sage cases: never run on a GPU, a hang shows as the timeout; the 6-row nvfp4
#      case), attention_bench --sage (wg1p predicted 26-30 ms against wg1c's ~34: dev/sage-attention.md,
#      session 26; if it wins, make it the default and run run_all.sh sagesol sagesample), nvfp4_bench
#      --rows 5,6,7,8,16 (the row-pair form's threshold: 5-7 rows not measured); on an H200 when one is
#      given (issue 20's acceptance is the H200's; every figure since 2026-12-05 is an H100's).
# Before (end of session 25; 53-55 and 58-62 ran: dev/results/2026-12-06-h100-s25-*.txt):
#   63 on a stage of HEAD (s26: dev/mini_stage.sh build-gpu/s18 build-gpu/s26 --composite $T, then
#      h3c compile --config full --set layers=2 --attention sage -o build-gpu/s26/plans/h3_full_l2_sage.plan
#      with H3_KERNEL_CACHE_DIR=build-gpu/s26/kcache): test_gpu_ops (the sage v-view cases),
#      dev/sage_op_kernels.sh build-gpu/s26 build-gpu/s26/plans/h3_full_l2_sage.plan (colstats
#      predicted 1.98 -> ~0.3-0.4 ms; no v slice left), then run_all.sh's `sage` section on a
#      full stage (tests/gpu/stage.sh: the fused / unfused sage plans bitwise on the GPU);
#   64 run_all.sh sagesample sagesol on s26 (Sage alone predicted 1.12 -> ~1.15 x: -2 ms a call);
#   65 dev/sage_ncu.sh on s26: the pipes' activity and stalls of today's wg1c (the phase question
#      of dev/sage-attention.md) before any new Sage form;
#   66 build-gpu/lab/nvfp4_lab (52's line; carry build-gpu/lab/nvfp4_lab): skx<2,3,1> (two row
#      tiles a warp on the product's register path for x) at 8 rows, predicted 38.6 / 20.0 /
#      49.7 / 27.9 µs on an H100 against the product's 45.9 / 22.4 / 60.5 / 32.1 (dev/nvfp4-gemm.md).
# Then (session 25): 58 and 59 ran (the A/B and the samples), 60 the step profile, 62 the kernels.
# Before (2026-12-06, session 24: no machine could be started in ~80 minutes of tries; the
# whole budget went to refused starts). Sage's default kernel changed (128-key softmax blocks,
# l from the tensor cores) and has run only under host emulation and ptxas, so first:
#   54 test_gpu_ops on the new kernels (all three sage forms), attention_bench --sage A/B of
#      three stages in two rounds, then the NVFP4 lab (52's). Stages, built here (~1 min each;
#      PATH needs /usr/local/cuda/bin), T = "h3c h3exec gpu_compile_check test_gpu_ops
#      attention_bench nvfp4_bench":
#        s24old (the 64-key kernels): git worktree add /tmp/h3-old 2da2259, then in /tmp/h3-old
#          dev/mini_stage.sh build-gpu/s18 "$CHECKOUT/build-gpu/s24old" --composite $T (CHECKOUT: this checkout)
#        s24new (128-key softmax, before l moved): the same from 49cef8b
#        s24l (HEAD): dev/mini_stage.sh build-gpu/s18 build-gpu/s24l --composite $T
#      56 and 57 are 54 cut down for short budgets (57 also runs dev/pipe_rates.cu: is I2FP on
#      MUFU.EX2's pipe? build line in its header; carry build-gpu/lab/pipe_rates);
#   55 the composite with s24l (issue 20);
#   53 Sage against the fp32 reference on full H3's q, k, v (issue 20's accuracy item; s24l);
#   51 dev/nvfp4_ncu.sh and dev/sage_ncu.sh: the stall samples by SASS line.
# Never let a helper call the device (one did in session 22: ~180 s of refused starts).
# A cold start has cost 95-600 s of the budget; a refused start 15-180 s; a call taken back
# mid-run ~170 s.
# CALL (calls 1-10 ran on 2026-12-03: dev/results/2026-12-03-h200-s9-*.txt and -s10-*.txt; the
# Markov step's tensor-core form, Sage's and Sol's warp-specialised forms became defaults):
#   8  generate's prefill through prefill_seq (no captured states; predicted -0.1 ms): the m31
#      correctness section, m31decode, the sol section (the ws form now the default: the full
#      3-step sample against flash), then dev/m31_prefill_profile.sh (the prefill per kernel in
#      the one- and 64-sequence plans; ncu of the prefill's expert GEMMs)
#   9  serving at concurrency 64 with chunked prefill in mixed steps (bench/m31_serve.sh with
#      M31_SERVE_CHUNKS="512 1024"; each engine its own random weights, the peer's SDPA form):
#      predicted chunks of 512: ~10000-11000 output tokens/s (1.5 x the peer), TPOT p50 ~5.5 ms
#   11 ran on 2026-12-03 (dev/results/2026-12-03-h200-s11-sol-select-moe-units-sage-ws2.txt; ws2
#      was slower and is gone): Sol's selection pre-pass rewritten (8 query
#      blocks per thread block over staged key centroids; it took 7.4 ms of the 32.2 at tau 1)
#      and its ws kernel's flags staged as bitmasks in shared memory (the union walk read them
#      from memory on the consumers' issuing path),
#      the moe wgmma GEMMs' units reordered (each odd m-tile right after its experts' pairs:
#      their weight tiles from L2, not memory) and Sage's pipelined ws form (H3_SAGE_FORM=ws2,
#      opt-in; a hang is possible, hence the timeouts): test_gpu_ops (every sol, sage and moe
#      case against the CPU, sage through mma, wgmma, ws2), attention_bench --sol (predicted
#      sol_ws tau 1 ~25 ms, ~1.9 x flash), attention_bench --sage (predicted sage_fp8_ws2
#      ~27-35 ms, 1.4-1.8 x flash; if it wins and test_gpu_ops passes, make it the default),
#      run_all.sh m31 m31decode (predicted prefill 12.8 -> ~12.0 ms), dev/m31_prefill_profile.sh
#      (the moe's share; ncu of its GEMMs: DRAM traffic down from ~1.5 x the weights)
#   12 then run_all.sh sagesol (the 49-step composite with the new selection, predicted ~67 s:
#      ~3.3 x)
#   10 issue 20's composite 49-step sample (run_all.sh sagesol: --int8, Sage->Sol, Spectrum
#      15:5:0.5, 20 real steps) against the bf16 flash sample: predicted ~66 s against ~220 s,
#      3.3 x (goal 4.61 x), PSNR / rel L2 reported
#   13 ran on 2026-12-03 (dev/results/2026-12-03-h200-s12-l2-prefetch-serve-c8-c32-c1.txt): #18's table at concurrency 8, 32 and 1: bench/m31_serve.sh
#      (each engine its own random weights; c64 ran in call 9)
#   4  #17's table with the corrected peer: run_all.sh m31decode m31long m31peer (SDPA decode)
#   6  Sol's ws form, test_gpu_ops, attention_bench --sol, then dev/attention_ncu.sh
#   7  the NCCL side of --gpus on one GPU: run_all.sh collectives (with 2 GPUs, tiny H3 and
#      M3.1 at --gpus 2)
#   5  the kernels changed after calls 1-3: attention_bench --sol (Sol's staged pseudo-keys:
#      predicted at tau 1 40.8 -> ~27 ms), one profiled DSpark run with 128 experts at batch 64
#      (forced acceptance 4; the per-op table of a round: where the 19 ms verify goes),
#      bench/m31_decode.sh at a 2k context (#17's h3 side, no peer), then test_gpu_ops and
#      attention_bench --sage (Sage's warp-specialised form, predicted ~27 ms, 1.8 x flash), and
#      the sol / sage sections (full 3-step samples) while time is left
#   14 ran on 2026-12-03 (dev/results/2026-12-03-h200-s11-early-launch-decode-ncu-b1.txt) with
#      a build that launched every kernel with programmatic dependent launch: no gain, reverted
#   15 issue 20's composite with the new Sol selection (run_all.sh sagesol; predicted ~62 s,
#      ~3.6 x) and serving at concurrency 64 with early launch (predicted ~8100 tok/s)
#   16 dev/m31_ncu_latency.sh (ncu's full set on the batch-1 step's latency-bound kernels:
#      decode attention, router, indexer top-k, argmax), the m31 section and m31decode (the
#      argmax's 4 loads in flight per thread: predicted 18 -> ~6 us), dev/skinny_shapes.cu (the
#      GEMVs' launch shapes: predicted ~4 TB/s from ~8 waves of blocks, against 3.1 at the
#      present 1.1-1.5), dev/moe_grouped_cublas.cu (cuBLAS's grouped GEMM at the prefill's expert
#      GEMMs, against h3's 1.34 / 0.715 ms), then call 15's composite
#   17 ran on 2026-12-03 (dev/results/2026-12-03-h200-s11-router-select-evict-first-grouped-cublas.txt;
#      the evict-first loads slowed the moe GEMVs and are gone)
#   18 ran on 2026-12-03 (dev/results/2026-12-03-h200-s12-router-rolled-b1-b64-ncu-latency.txt): batch-1 decode with the router's rolled selection alone (predicted ~1.73 ms) and
#      batch 64 (~4.36 ms), then dev/m31_ncu_latency.sh (the top-k's and attention's SASS
#      stall samples); test_gpu_m31 now with cuBLASLt's first heuristic GEMMs (H3_GEMM_TUNE=0)
#   19 ran on 2026-12-03 (dev/results/2026-12-03-h200-s12-argmax-split-indexer-norm-rope-caps.txt;
#      then dev/m31_decode_ab.sh against the day's first build: -s12-ab-decode-serve-c64.txt):
#      the argmax / sample_tokens split over blocks (codegen: every kernel of
#      tests/codegen/all_ops.ir on the GPU against the CPU, h3_codegen_gpu_test copied into
#      STAGE/bin; predicted argmax 15 -> ~4 us), the indexer's q / k norm + rope fused (6 fewer
#      launches per step), test_gpu_ops, the m31 section; batch-1 decode by split caps
#      (H3_M31_ATT_SPLITS 8 / 4, H3_M31_TOPK_SPLITS 32 / 16; predicted default 1.728 ->
#      ~1.70 ms), batch 64
#   20 next: dev/graph_branches.cu (built into build-gpu/lab, carried alone: no stage): a
#      batch-1 sparse layer's stand-in, serial against two-stream graph branches; predicted
#      ~45 us less per layer (run: build-gpu/lab/graph_branches)
#   22 side-streams (the indexer beside qkv, the shared expert beside router + moe on a
#      second stream; dev/results/2026-12-04-h200-s13-graph-branches.txt measured ~36 us
#      per sparse layer on stand-ins): the m31 section (tiny on cuda against the cpu, bitwise
#      the same with H3_SIDE_STREAM=0 and without CUDA graphs; test_gpu_m31), batch-1 decode
#      at 2k with and without the second stream (predicted 1.714 -> ~1.60 ms per step),
#      batch 64, test_gpu_ops
#   23 serving at concurrency 64 with side-streams (batch-64 decode step -1.8 % in call 22:
#      predicted ~8100 tok/s, ~1.19 x the peer)
#   24 the M3.1 decode attention's tiles through a 3-stage cp.async ring per warp (registers
#      242 -> 172; two tiles in flight per warp behind its math): test_gpu_ops (its paged /
#      sparse / block attention cases against the CPU), the m31 section, then
#      dev/m31_decode_ab.sh against the build before it (build-gpu/stage_old: bin/h3exec and
#      the 4 decode plans; one kernel cache): predicted batch 64 4.33 -> ~4.13 ms (its
#      attention at ~2 TB/s -> ~3.5), batch 1 1.708 -> ~1.69 ms; and the NVFP4 GEMM's weights
#      two chunks ahead in three constant-named register buffers (ncu: the copies of loads in
#      flight stalled): nvfp4_bench --rows 1,16 of both builds, predicted M = 1 ~2-2.5 x
#      cuBLASLt (1.4-1.6 before), M = 16 ~2 x (1.1)
#   25 call 24's nvfp4_bench again (there its 60 s limit cut both runs before any line: the
#      host makes the 2.4 GB lm_head weight): the new build alone, its speed-ups over cuBLASLt
#      in the same run against the 1.1-1.6 x of docs/performance.md
#   26 dev/m31_ncu_b64.sh: ncu of the 64-row decode step's attention and top-k (stall reasons;
#      the ring of call 24 was slower: measure before the next attempt)
#   27 the session's last build (side streams join before loops / calls only; regions of
#      more than 2048 ops left alone): test_gpu_ops, the m31 section, test_gpu_model (tiny H3,
#      whose step now has a branch: the timestep embedding beside the patch projections)
#   28 the serving peer with batched prefills against h3's prefill groups (issue 18 was closed
#      at 1.24 x against a peer that prefills one prompt at a time): bench/m31_serve.sh at 64
#      with M31_SERVE_GROUPS=16 and M31_SERVE_PEER_PREFILL=16 (slim stage: m31_small_serve_s64
#      and _s64_g16); predicted peer ~7700 tok/s (its 64 prefills ~0.84 s of 4.6 -> ~0.6 s),
#      h3 8790: ~1.14 x. If below 1.2, issue 18 reopens; the lever is then the group's moe
#      (~70 ms of a 188 ms group) and the decode step
#   29 concurrency 32 and 8 with prefill groups (plans m31_small_serve_s32_g16 / _s8_g8,
#      compiled here: `--set seqs=C --set prefill_group=P`): the table's rows with groups
#   28 ran 2026-12-04 (dev/results/2026-12-04-h200-s15-gpu-ops-serve-c64-peer-batched-prefill.txt):
#      the peer with batched prefills 8024 tok/s (predicted ~7700), h3 with groups 8928: 1.11 x
#   30 the build of 2026-12-04, evening (the prefill graphs' last layer over each prompt's last
#      row only; index_topk without scores for rows of at most topk blocks; moe's cuBLASLt
#      ops without the grouped kernels): test_gpu_ops, the m31 section (tiny tokens cuda ==
#      cpu, test_gpu_m31), tests/gpu/serve_check.py (slim stage: m31_tiny,
#      m31_small_gpu_test_g8 / _g127, m31_small_serve_s64 / _s1 / _s64_g16); predicted: all pass
#   31 call 28 again on that build, twice, the second with H3_MOE_LT_TUNE=0 (the group's expert
#      GEMMs untuned, for their share; slim stage: m31_small_serve_s64 / _s64_g16): predicted a
#      group 184 -> ~135 ms (the last layer's o_proj, moe, shared expert, attention and top-k
#      over 16 rows instead of 32768: ~44 ms; index_topk's scores: ~5 ms; the expert GEMMs'
#      tuned algorithm, new since: 0-8 % of the two full moe layers' ~47 ms), h3 3.67 -> ~3.3 s,
#      ~9900 tok/s against a peer of ~8000: ~1.23 x; prompts one by one 14.9 -> ~12 ms a chunk
#   33 dev/moe_grouped_cublas.cu at a 16-prompt group's 32768 tokens and at one prompt's 2048
#      (build it into STAGE/bin: its header): the per-expert GEMMs' own rate at ~4096 rows
#      each, on 1 / 2 / 4 streams, padded into one batched GEMM, against one dense GEMM.
#      Predicted ~650-700 TFLOP/s on one stream (moe's cuBLASLt form: ~560 with its passes),
#      +3-5 % on 2-4 streams, the dense ceiling ~760; if streams win, cuda_m31_moe_lt.c takes them
#   32 concurrency 32 / 8 / 1 on that build (call 29's plans and m31_small_serve_s1; groups at
#      32 and 8) and run_all.sh m31decode (prefill 2048 12.8 -> ~10.3 ms predicted: the last
#      layer for the last row only; decode unchanged); slim stage: m31_small_serve_s1 / _s8 /
#      _s32, m31_small_p2048_n16 / _n80
#   34 the NVFP4 GEMM's skinny form (dev/nvfp4-skinny.patch, built as its header says into
#      build-nvfp4/carry/sk; carry build-nvfp4/carry, not the stage): its nvfp4_bench (tiled and
#      skinny forms and cuBLASLt in one run, M = 1, 4, 16) and its test_gpu_ops (the
#      linear_nvfp4 cases through both forms); predicted M = 1 ~1.6-1.9 x cuBLASLt, M = 16
#      ~1.2-1.4 x (dev/nvfp4-gemm.md); STAGE is then the carry folder
#   37 (its Sage and Sol parts ran on an H100 on 2026-12-05, session 22, and wg1q is gone since;
#      what is left of it is nvfp4_bench; a mini stage: dev/mini_stage.sh BUILD STAGE --composite
#      h3c h3exec gpu_compile_check test_gpu_ops nvfp4_bench attention_bench: also the plans of 39)
#      Sage's one-warpgroup forms (H3_SAGE_FORM=wg1, wg1c, wg1q, opt-in) and the NVFP4
#      dequantized form's new slabs and kernel: test_gpu_ops (every sage case through mma,
#      wgmma, wg1, wg1c, wg1q; every linear_nvfp4 case through the default and tiled forms; a
#      hang of a new form ends at the timeout), attention_bench --sage (predicted wg1 ~40 ms,
#      wg1c ~37, wg1q ~44 against the ws form's ~51: dev/sage-attention.md), attention_bench
#      --sol (Sol's wsp form, H3_SOL_FORM=wsp: two exact key blocks a turn; predicted tau 1
#      ~19.3 ms and tau -inf ~60 against ws's 21.8 / 73.9, dev/composite-budget.md),
#      nvfp4_bench at 8 / 64 / 576 rows (predicted 576-row fc ~0.33 ms against 0.61 with 64 MiB
#      slabs); then 38 (same stage): DSpark at concurrency 64 with the NVFP4 draft (now the
#      default) and the bf16 draft (predicted round ~15.8 ms against bf16's ~15.4)
#   39 (the stage of 37, which holds plans/h3_full.plan and plans/h3_full_int8_sagesol_spec.plan;
#      SAGE_FORM=the fastest fp8 form of call 37 in the environment):
#      issue 20's 49-step composite (run_all.sh sagesol: --int8, Sage->Sol, Spectrum 15:5:0.5,
#      against the bf16 flash sample in the same call, ~300 s); predicted with Sage at ~40 ms:
#      64.05 - 10 steps x 50 blocks x ~11 ms = ~58.5 s, ~3.8 x (goal 4.61)
#   41 dev/cold_code.cu first (built into build-gpu/lab/cold_code, carried too: what a short
#      kernel's cold code costs per KB after a 1 GB read; predicted 0.03-0.2 us per KB: the
#      step's ~800 KB of short-kernel code on the main stream would then be 25-160 us), then
#      the decode step of three builds alternating (dev/m31_step_ab.sh, one h3exec run each, 2
#      rounds, then each build's tokens against the first's byte for byte, then batch 64):
#      STAGE/b (93f99c9, the cache writes and residual add unfused), STAGE (93f99c9 fused),
#      build-gpu/s20 (a45f883: fused, the moe's one-row form: a block per slot, no route
#      launch; the row reductions' loops unrolled by their trip count: rms_norm, add_rms_norm,
#      argmax 12-23 KB of code instead of 17-27; the router without its unused route listing,
#      88 KB instead of 94; the page-slot arithmetic one kernel instead of two). Predicted batch 1: 1.649 / ~1.595 / ~1.575 ms; batch 64: 4.33 / ~4.28 / ~4.27
#   40 ran on 2026-12-05 (its checks passed; its A/B printed nothing) (the stage of 37 made with --m31-ab "--disable-pass kv-write-fusion,add-norm-fusion":
#      plans/ fused, b/plans/ unfused): q, k and v in one kernel with the cache writes, ik's
#      write in its norm + rope, the post-attention residual add in its norm (19 launches
#      fewer a small decode step: 16 on the main stream, 3 on the side stream): test_gpu_ops (both new ops through
#      the tiny M3.1 module), qkrope_gpu_write (the write kernel with many duplicate slots:
#      the later token's row wins, which only a GPU's concurrent stores can get wrong), the small model's 16 tokens of the fused and unfused plans
#      compared byte for byte, then dev/m31_decode_ab.sh unfused against fused, 3 rounds and
#      batch 64 (predicted batch 1 1.649 -> ~1.59-1.60 ms, -50 to -60 us; batch 64 ~-50 us)
#   36 ran on 2026-12-05 (dev/results/2026-12-05-h200-s18-nvfp4-dequant-spec64.txt) the NVFP4
#      GEMM's forms: the skinny form at <= 8 rows (default), the dequantized form above 64
#      (H3_NVFP4_FORM=dequant, opt-in until this call): test_gpu_ops (every linear_nvfp4 case
#      through the default, tiled and dequant), nvfp4_bench at 1 / 8 / 64 / 576 rows
#      (predicted 576-row fc ~0.31 ms dequantized against the tiled 1.05), and DSpark at
#      concurrency 64 (forced acceptance 4, BENCH ONLY) with the NVFP4 draft dequantized, the
#      NVFP4 draft tiled and the bf16 draft (predicted draft of a round ~7.9 / 9.35 / 7.75 ms).
#      If test_gpu_ops passes and the prediction holds: the dequantized form becomes the
#      default above 64 rows, then dev/draft-quant-default.patch (nvfp4 the default draft)
#   21 ran 2026-12-04 (dev/results/2026-12-04-h200-s13-nvfp4-ncu-test-gpu-ops.txt): dev/nvfp4_ncu.sh (ncu of the NVFP4 GEMM at M = 1 and 16: latency or issue,
#      dev/nvfp4-gemm.md) and test_gpu_ops (its new decode split-cap cases)
# The whole stage (~59 MB) overflows a call's carry with the tracked tree: dev/slim_stage.sh
# makes one with the plans a call needs (18: m31_tiny, m31_small_p2048_n16 / _n80,
# m31_small_b64_p2048_n8 / _n24; 13: m31_small_serve_s1 / _s8 / _s32).
# Each call writes OUT/callN.txt; strip machine paths before copying logs into dev/results.
set -uo pipefail
S=$1 OUT=$2 CALL=$3
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache PYTHONUNBUFFERED=1
mkdir -p "$OUT"
log=$OUT/call$CALL.txt
# The decode step of build $1 against the stage's, alternating, on one kernel cache (a copy of
# both builds' caches: an A/B's builds share one cuBLASLt tuning): batch 1 over 3 rounds, then 64
# sequences over 2 after an untimed run of each build that tunes its 64-row GEMMs. Leaves that
# cache in $kc.
step_ab() {
  kc=$(mktemp -d); cp -r "$1/kcache/." "$kc/"; cp -r "$S/kcache/." "$kc/"
  dev/m31_step_calls.sh 3 "$1:$kc" "$S:$kc"
  M31_STEP_TUNE=all M31_STEP_BATCH=1 dev/m31_step_calls.sh 2 "$1:$kc" "$S:$kc" # untimed 64-row tunings first
}
# The batch-1 step of stages $2.. over $1 rounds, alternating, on one kernel cache (their caches
# merged, left in $kc): dev/m31_step_calls.sh gives each stage its untimed tuning run first.
alternate() {
  local rounds=$1 specs=() b
  shift
  kc=$(mktemp -d)
  for b in "$@"; do cp -r "$b/kcache/." "$kc/"; specs+=("$b:$kc"); done
  dev/m31_step_calls.sh "$rounds" "${specs[@]}"
}
# One batch-1 run of build $1 (plans/m31_small_p2048_n80.plan, kernel cache $2) with
# dev/kernel_timeline.c preloaded, its records into $3 and its stdout into $4 (default: none)
timeline() {
  H3_TIMELINE=$3 LD_PRELOAD=$PWD/build-gpu/lab/kernel_timeline.so H3_KERNEL_CACHE_DIR=$2 timeout 150 \
    "$1/bin/h3exec" "$1/plans/m31_small_p2048_n80.plan" --backend cuda --weights random --seed 3 --warmup 0 \
    --iterations 1 > "${4:-/dev/null}" 2>&1
}
# bench/m31_serve.sh at concurrency C (argument 1) under a timeout of $2 s with prefill groups
# of P = min(C, 16) prompts (plan m31_small_serve_sC_gP compiled here), the peer prefilling P
# prompts at once and taking its decode moe form $3 (default dense: right from 32 rows; grouped
# is the peer's faster form at 1 and 8) without the probe
serve_groups() {
  local C=$1 P=$(($1 < 16 ? $1 : 16)) M=${3:-dense}
  "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=$C --set prefill_group=$P \
    -o "$S/plans/m31_small_serve_s${C}_g$P.plan"
  M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_GROUPS=$P M31_SERVE_PEER_PREFILL=$P \
    M31_SERVE_PEER_FORMS="--attention sdpa --moe $M" timeout "$2" bench/m31_serve.sh "$S" "$OUT/serve$C" $C
}
W30=$(mktemp -d) # serve_check's request and result files: bulky, outside OUT
case $CALL in
1) { timeout 150 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok'
   M31_SPEC_PROFILE=1 timeout 400 tests/gpu/run_all.sh "$S" "$OUT/ra" nvfp4 m31spec m31specmma; } > "$log" 2>&1 ;;
2) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" m31specfp4 m31spec128 > "$log" 2>&1 ;;
3) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" sage sol > "$log" 2>&1 ;;
4) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" m31decode m31long m31peer > "$log" 2>&1 ;;
5) { B=$S/bin W=$(mktemp -d) # bulky outputs outside OUT: only the log and the profile come back
   echo "== attention_bench --sol"; timeout 60 "$B/attention_bench" --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   M31_SPEC_PROFILE=1 M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 120 bench/m31_spec.sh "$S" \
     "$W/spec128p" 64
   cp "$W/spec128p/profile_spec_64.txt" "$OUT/" 2>/dev/null
   echo "== m31_decode p2048"; timeout 40 bench/m31_decode.sh "$B/h3exec" "$S/plans/m31_small_p2048_n16.plan" 16 \
     "$S/plans/m31_small_p2048_n80.plan" 80 3 2>&1 | grep -v "^h3exec: warning"
   # last, since a hang of the new warp-specialised Sage form would stop what follows it
   echo "== test_gpu_ops"; timeout 90 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'
   echo "== attention_bench --sage"; timeout 60 "$B/attention_bench" --sage --iters 10 2>&1 | grep -E "^(attention_flash|sage)"
   timeout 200 tests/gpu/run_all.sh "$S" "$W/ra" sol sage; cp "$W/ra/run_all.log" "$OUT/"; } > "$log" 2>&1 ;;
6) { B=$S/bin
   echo "== test_gpu_ops"; timeout 120 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'
   echo "== attention_bench --sol"; timeout 90 "$B/attention_bench" --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   mkdir -p "$OUT/ncu"; dev/attention_ncu.sh "$S" "$OUT/ncu"; } > "$log" 2>&1 ;;
7) timeout 300 tests/gpu/run_all.sh "$S" "$OUT/ra" collectives > "$log" 2>&1 ;;
8) { timeout 330 tests/gpu/run_all.sh "$S" "$OUT/ra" m31 m31decode sol; cp "$OUT/ra/summary.txt" "$OUT/" 2>/dev/null
   timeout 250 dev/m31_prefill_profile.sh "$S" "$OUT/prof"; } > "$log" 2>&1 ;;
9) { M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_CHUNKS="512 1024" \
   M31_SERVE_PEER_FORMS="--attention sdpa --moe grouped" timeout 430 bench/m31_serve.sh "$S" "$OUT/serve" 64
   rm -f "$OUT"/serve/requests_*.jsonl; } > "$log" 2>&1 ;;
10) timeout 560 tests/gpu/run_all.sh "$S" "$OUT/ra" sagesol > "$log" 2>&1 ;;
11) { B=$S/bin # the ws2 form last everywhere: a hang there costs only what follows it
   echo "== attention_bench --sol"; timeout 90 "$B/attention_bench" --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   timeout 200 tests/gpu/run_all.sh "$S" "$OUT/ra" m31 m31decode
   timeout 150 dev/m31_prefill_profile.sh "$S" "$OUT/prof"
   echo "== test_gpu_ops"; timeout 150 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'
   echo "== attention_bench --sage"; timeout 90 "$B/attention_bench" --sage --iters 10 2>&1 | grep -E "^(attention_flash|sage)"; } > "$log" 2>&1 ;;
12) { timeout 330 tests/gpu/run_all.sh "$S" "$OUT/ra" sagesol; rm -f "$OUT"/ra/*.safetensors; } > "$log" 2>&1 ;;
13) { M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_PEER_FORMS="--attention sdpa --moe grouped" \
   timeout 560 bench/m31_serve.sh "$S" "$OUT/serve" 8 32 1; rm -f "$OUT"/serve/requests_*.jsonl; } > "$log" 2>&1 ;;
15) { timeout 330 tests/gpu/run_all.sh "$S" "$OUT/ra" sagesol; rm -f "$OUT"/ra/*.safetensors
   M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_PEER_FORMS="--attention sdpa --moe grouped" \
     timeout 240 bench/m31_serve.sh "$S" "$OUT/serve" 64; rm -f "$OUT"/serve/requests_*.jsonl; } > "$log" 2>&1 ;;
16) { mkdir -p "$OUT/ncu"; timeout 230 dev/m31_ncu_latency.sh "$S" "$OUT/ncu"
   timeout 100 tests/gpu/run_all.sh "$S" "$OUT/ra1" m31 m31decode
   echo "== dev/skinny_shapes.cu (built here: see its header; in STAGE/bin)"; timeout 60 "$S/bin/skinny_shapes"
   echo "== dev/moe_grouped_cublas.cu (in STAGE/bin)"; timeout 60 "$S/bin/moe_grouped_cublas"
   timeout 330 tests/gpu/run_all.sh "$S" "$OUT/ra" sagesol; rm -f "$OUT"/ra/*.safetensors; } > "$log" 2>&1 ;;
18) { timeout 100 tests/gpu/run_all.sh "$S" "$OUT/ra" m31 m31decode
   echo "== m31_decode p2048 b64"
   timeout 100 bench/m31_decode.sh "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n8.plan" 8 \
     "$S/plans/m31_small_b64_p2048_n24.plan" 24 1 generate_batch 2>/dev/null | grep -E '^(generate|with CUDA|\{)'
   mkdir -p "$OUT/ncu"; timeout 230 dev/m31_ncu_latency.sh "$S" "$OUT/ncu"; } > "$log" 2>&1 ;;
19) { B=$S/bin
   echo "== h3_codegen_gpu_test"; timeout 120 "$B/h3_codegen_gpu_test" "$PWD/tests/codegen/all_ops.ir" 2>&1 | tail -4
   echo "== test_gpu_ops"; timeout 150 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'
   timeout 120 tests/gpu/run_all.sh "$S" "$OUT/ra" m31
   for v in H3_NONE=1 H3_M31_ATT_SPLITS=8 H3_M31_ATT_SPLITS=4 H3_M31_TOPK_SPLITS=32 H3_M31_TOPK_SPLITS=16; do
     echo "== m31_decode p2048 b1 $v"
     env "$v" timeout 60 bench/m31_decode.sh "$B/h3exec" "$S/plans/m31_small_p2048_n16.plan" 16 \
       "$S/plans/m31_small_p2048_n80.plan" 80 3 2>/dev/null | grep -E '^(generate|with CUDA|\{)'
   done
   echo "== m31_decode p2048 b64"
   timeout 100 bench/m31_decode.sh "$B/h3exec" "$S/plans/m31_small_b64_p2048_n8.plan" 8 \
     "$S/plans/m31_small_b64_p2048_n24.plan" 24 1 generate_batch 2>/dev/null | grep -E '^(generate|with CUDA|\{)'; } > "$log" 2>&1 ;;
20) timeout 120 build-gpu/lab/graph_branches > "$log" 2>&1 ;;
21) { mkdir -p "$OUT/ncu"; timeout 330 dev/nvfp4_ncu.sh "$S" "$OUT/ncu"
   echo "== test_gpu_ops"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok'; } > "$log" 2>&1 ;;
22) { B=$S/bin
   timeout 200 tests/gpu/run_all.sh "$S" "$OUT/ra" m31; cp "$OUT/ra/summary.txt" "$OUT/" 2>/dev/null
   echo "== m31_decode p2048 b1"
   timeout 90 bench/m31_decode.sh "$B/h3exec" "$S/plans/m31_small_p2048_n16.plan" 16 \
     "$S/plans/m31_small_p2048_n80.plan" 80 3 2>/dev/null | grep -E '^(generate|with CUDA|the same|\{)'
   echo "== m31_decode p2048 b64"
   timeout 120 bench/m31_decode.sh "$B/h3exec" "$S/plans/m31_small_b64_p2048_n8.plan" 8 \
     "$S/plans/m31_small_b64_p2048_n24.plan" 24 1 generate_batch 2>/dev/null | grep -E '^(generate|with CUDA|the same|\{)'
   echo "== test_gpu_ops"; timeout 150 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'; } > "$log" 2>&1 ;;
23) { M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_PEER_FORMS="--attention sdpa --moe grouped" \
   timeout 560 bench/m31_serve.sh "$S" "$OUT/serve" 64; rm -f "$OUT"/serve/requests_*.jsonl; } > "$log" 2>&1 ;;
24) { B=$S/bin
   echo "== test_gpu_ops"; timeout 150 "$B/test_gpu_ops" models 2>&1 | grep -v '^ok'
   timeout 150 tests/gpu/run_all.sh "$S" "$OUT/ra" m31; cp "$OUT/ra/summary.txt" "$OUT/" 2>/dev/null
   for d in build-gpu/stage_old "$S"; do # the NVFP4 GEMM before and after its three buffers
     echo "== nvfp4_bench $d"; H3_KERNEL_CACHE_DIR=$S/kcache timeout 60 "$d/bin/nvfp4_bench" --rows 1,16
   done
   echo "== A: build-gpu/stage_old (before the ring), B: this stage"
   H3_AB_KCACHE=$S/kcache timeout 330 dev/m31_decode_ab.sh build-gpu/stage_old "$S" 2; } > "$log" 2>&1 ;;
25) { echo "== nvfp4_bench"; H3_KERNEL_CACHE_DIR=$S/kcache timeout 400 "$S/bin/nvfp4_bench" --rows 1,16
   echo "nvfp4_bench: rc $?"; } > "$log" 2>&1 ;;
26) { timeout 420 dev/m31_ncu_b64.sh "$S" "$OUT/ncu"; } > "$log" 2>&1 ;;
27) { echo "== test_gpu_ops"; timeout 150 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok' | tail -3
   timeout 150 tests/gpu/run_all.sh "$S" "$OUT/ra" m31; cp "$OUT/ra/summary.txt" "$OUT/" 2>/dev/null
   echo "== test_gpu_model"; timeout 120 "$S/bin/test_gpu_model" models 2>&1 | tail -4; } > "$log" 2>&1 ;;
28) { M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_GROUPS=16 M31_SERVE_PEER_PREFILL=16 \
   M31_SERVE_PEER_FORMS="--attention sdpa --moe dense" timeout 560 bench/m31_serve.sh "$S" "$OUT/serve" 64
   rm -f "$OUT"/serve/requests_*.jsonl; } > "$log" 2>&1 ;;
29) { serve_groups 32 270; serve_groups 8 270; rm -f "$OUT"/serve*/requests_*.jsonl; } > "$log" 2>&1 ;;
30) { echo "== test_gpu_ops"; timeout 150 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok' | tail -4
   timeout 330 tests/gpu/run_all.sh "$S" "$OUT/ra" m31; cp "$OUT/ra/summary.txt" "$OUT/" 2>/dev/null
   echo "== serve_check"; timeout 330 python3 tests/gpu/serve_check.py "$S/bin/h3exec" "$S/plans" "$W30" 2>&1 | grep -E "^serve_check|FAIL|alone"
   } > "$log" 2>&1 ;;
31) { for R in 1 2; do # twice: the peer moves by a few % between runs; the second run's h3
     # without the expert GEMMs' tuning (H3_MOE_LT_TUNE=0): its group time against the first's
     T=$([ $R = 2 ] && echo 0 || echo 1)
     H3_MOE_LT_TUNE=$T M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_GROUPS=16 M31_SERVE_PEER_PREFILL=16 \
       M31_SERVE_PEER_FORMS="--attention sdpa --moe dense" timeout 275 bench/m31_serve.sh "$S" "$OUT/serve$R" 64
   done; rm -f "$OUT"/serve*/requests_*.jsonl; } > "$log" 2>&1 ;;
32) { serve_groups 32 200; serve_groups 8 200
   M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_PEER_FORMS="--attention sdpa --moe dense" \
     timeout 120 bench/m31_serve.sh "$S" "$OUT/serve1" 1
   rm -f "$OUT"/serve*/requests_*.jsonl
   timeout 150 tests/gpu/run_all.sh "$S" "$OUT/ra" m31decode; } > "$log" 2>&1 ;;
33) { for T in 32768 2048; do echo "== moe_grouped_cublas $T"; timeout 120 "$S/bin/moe_grouped_cublas" $T; done
   } > "$log" 2>&1 ;;
34) { mkdir -p "$S/kcache"; export H3_KERNEL_CACHE_DIR; H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
   echo "== nvfp4_bench (skinny patch)"; timeout 150 "$S/sk/nvfp4_bench" \
     --rows 1,4,16 --no-skinny --no-lm-head --warm-seconds 0.2
   echo "rc $?"; echo "== test_gpu_ops (skinny patch)"
   timeout 200 "$S/sk/test_gpu_ops" models 2>&1 | grep -E "linear_nvfp4|FAIL|passed"
   } > "$log" 2>&1 ;;
35) { serve_groups 8 200 grouped
   M31_SERVE_WEIGHTS=random M31_SERVE_MIXED=0 M31_SERVE_PEER_FORMS="--attention sdpa --moe grouped" \
     timeout 120 bench/m31_serve.sh "$S" "$OUT/serve1" 1
   rm -f "$OUT"/serve*/requests_*.jsonl; } > "$log" 2>&1 ;;
36) { echo "== test_gpu_ops"; timeout 150 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "linear_nvfp4|FAIL|passed"
   echo "== nvfp4_bench"; timeout 60 "$S/bin/nvfp4_bench" --rows 1,8,64,576 --no-skinny --no-lm-head --warm-seconds 0.2
   for Q in nvfp4:dequant nvfp4: bf16:; do # draft:H3_NVFP4_FORM
     echo "== m31_spec, draft $Q"; H3_NVFP4_FORM=${Q#*:} M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--draft-quant ${Q%:*}" \
       timeout 110 bench/m31_spec.sh "$S" "$OUT/spec_${Q%:*}${Q#*:}" 64
   done; rm -f "$OUT"/spec_*/requests_*.jsonl "$OUT"/spec_*/*.results.jsonl; } > "$log" 2>&1 ;;
37) { echo "== test_gpu_ops"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "sage|linear_nvfp4|FAIL|passed"
   echo "== attention_bench --sage"; timeout 150 "$S/bin/attention_bench" --sage --iters 10 2>&1 | grep -E "^(attention_flash|sage)"
   echo "== attention_bench --sol"; timeout 120 "$S/bin/attention_bench" --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   echo "== nvfp4_bench"; timeout 60 "$S/bin/nvfp4_bench" --rows 8,64,576 --no-skinny --no-lm-head --warm-seconds 0.2
   } > "$log" 2>&1 ;;
38) { for Q in nvfp4 bf16; do
     echo "== m31_spec, draft $Q"; M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--draft-quant $Q" \
       timeout 170 bench/m31_spec.sh "$S" "$OUT/spec_$Q" 64
   done; rm -f "$OUT"/spec_*/requests_*.jsonl "$OUT"/spec_*/*.results.jsonl "$OUT"/spec_*/*.plan; } > "$log" 2>&1 ;;
39) { echo "== composite, H3_SAGE_FORM=${SAGE_FORM:-}"; H3_SAGE_FORM=${SAGE_FORM:-} \
     tests/gpu/run_all.sh "$S" "$OUT/sagesol" sagesol 2>&1 | grep -E "rc=|speed-up|PSNR|rel L2"
   rm -f "$OUT"/sagesol/*.safetensors; } > "$log" 2>&1 ;;
41) { H3_AB_KCACHE=$S/kcache timeout 440 dev/m31_step_ab.sh "$OUT" 2 "$S/b" "$S" build-gpu/s20; } > "$log" 2>&1 ;;
42) { timeout 240 build-gpu/lab/stream_gemv; } > "$log" 2>&1 ;; # carry build-gpu/lab/stream_gemv (1.7 MB); ~100 s
43) { H3_AB_KCACHE=$S/kcache timeout 420 dev/m31_step_ab.sh "$OUT" 3 build-gpu/s21 \
       build-gpu/s21@H3_LINEAR_FORM=stream; } > "$log" 2>&1 ;; # carry build-gpu/s21; ~200 s
47) { echo "== stream_gemv (42)"; timeout 120 build-gpu/lab/stream_gemv
   echo "== decode A/B: unfused writes (s21/b), HEAD (s21: the lm_head streams), HEAD with cuBLASLt's lm_head"
   H3_AB_KCACHE=$S/kcache timeout 240 dev/m31_step_ab.sh "$OUT" 2 build-gpu/s21/b build-gpu/s21 \
     build-gpu/s21@H3_LINEAR_FORM=library
   echo "== test_gpu_ops (s21c)"; H3_KERNEL_CACHE_DIR=$(cd build-gpu/s21c/kcache && pwd) \
     timeout 130 build-gpu/s21c/bin/test_gpu_ops models 2>&1 | grep -E "sol_att|sage_att|stream|FAIL|passed"
   } > "$log" 2>&1 ;; # the H200's first call: carry build-gpu/s21 (with b/), build-gpu/s21c, build-gpu/lab/stream_gemv; ~490 s at most
48) { export H3_KERNEL_CACHE_DIR; H3_KERNEL_CACHE_DIR=$(cd build-gpu/s21c/kcache && pwd)
   echo "== attention_bench --sol"; timeout 110 build-gpu/s21c/bin/attention_bench --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   echo "== composite (the default Sage form)"; timeout 420 tests/gpu/run_all.sh build-gpu/s21c "$OUT/sagesol" sagesol 2>&1 | grep -E "rc=|speed-up|PSNR|rel L2"
   rm -f "$OUT"/sagesol/*.safetensors; } > "$log" 2>&1 ;; # carry build-gpu/s21c; ~450 s
105) { # where top-k's 19.6 us and the attention's 17.2 us go (call 100, H200): the phases of
   # h3cu_topks and h3cu_kvattm from %globaltimer stamps (dev/msa_stamps.patch: git apply, then
   # dev/mini_stage.sh build-gpu/s18 build-gpu/s48 h3c h3exec, git checkout kernels/m31_msa.cu;
   # its h3c compiles plans/m31_small_p2048_n80.plan into its kcache; carry build-gpu/s48 and
   # build-gpu/lab), read against the kernels' CUPTI start and end (dev/msa_stamps.py).
   # STAGE = build-gpu/s48. Predicted (a chain of dependent round trips of ~0.6-0.8 us each):
   # top-k's first block in within ~2 us of the start, staged +1, scored +2, the last ticket by
   # ~7 us, picked by ~9: if the record is still ~19 us, the rest is the spread of the blocks'
   # starts or the tail after the last stamp; attention sel +1, looped +4..6, done by ~10; ~2 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
     --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the run that tunes
   timeline "$S" "$kc" "$OUT/stamps.tsv" "$OUT/stamps.out"
   grep -c "^LAB" "$OUT/stamps.out"
   python3 dev/msa_stamps.py "$OUT/stamps.out" "$OUT/stamps.tsv"
   python3 dev/kernel_timeline.py "$OUT/stamps.tsv" | head -3
   } > "$log" 2>&1 ;;
128) { # the warpgroup form in the product (STAGE = build-gpu/s72: dev/mini_stage.sh build-gpu/s18
   # build-gpu/s72 test_gpu_ops nvfp4_bench gpu_compile_check at the commit that made it default at
   # 5-16 rows): nvfp4_bench (L2 emptied) at 1, 5, 8, 12, 16 rows, the default (warpgroup at 5-16)
   # and the rows column (the row-pair form) in one run, each checked against cuBLASLt by NMSE;
   # then, when M128_TESTS=1, test_gpu_ops (every form of linear_nvfp4 among its cases). Predicted
   # as call 127's wgx rows (H3_NVFP4_FORM unset: wgx<8,1,3,2> / wgx<16,1,3,2>). ~1.5 min (+2.5)
   echo "== nvfp4_bench at 1, 5, 8, 12 and 16 rows"
   timeout 100 "$S/bin/nvfp4_bench" --rows 1,5,8,12,16 --no-skinny --no-lm-head --warm-seconds 0.2 2>&1 | grep -v h3bench
   if [ "${M128_TESTS:-0}" = 1 ]; then echo "== test_gpu_ops"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -v '^ok' | tail -8; fi
   } > "$log" 2>&1 ;;
127) { # issue 19's NVFP4 GEMM at 1-16 rows on wgmma (dev/nvfp4_wgmma_lab.cu; build-gpu/lab/nvfp4_wgmma_lab,
   # dev/lab_stages.sh builds it; carry build-gpu/lab; STAGE unused): cuBLAS bf16, the product's
   # skinny / row-pair form and the wgx variants at fc, o_proj, gate_up, down, each row checked
   # against cuBLAS. Predicted (H100, x cuBLAS bf16; the product's 8 rows 1.89-2.24, 16 rows
   # 1.51-1.58): the best wgx at 8 rows fc 31-36 us, o_proj 17-21, gate_up 40-46, down 22-27
   # (2.4-2.8 x); at 16 rows within 5-10 % of its 8-row time (2.2-2.6 x); at 1 row 0-15 % slower
   # than _sk. On an H200 the same ratios within ~10 %. Refuted if no wgx<16,..> row is >= 20 %
   # faster than _sx16 at fc and gate_up: then x was not the 16-row cost. ~1 min
   # (Ran on an H100, refuted: dev/results/2026-12-07-h100-s40-call127-128-nvfp4-wgmma.txt. Since
   # then the lab times wgx<8/16,1,3,2> against wgc, the clusters that share x's staging; its
   # header has the prediction.)
   echo "== nvfp4_wgmma_lab"; timeout 150 build-gpu/lab/nvfp4_wgmma_lab
   } > "$log" 2>&1 ;;
126) { # issue 20's and 19's kernel figures on the card at hand (the H200's last were of 2026-12-06, before
   # Sage's I2FP scores, n128 products and wg1c, and before NVFP4's row-pair form; STAGE =
   # build-gpu/s70: dev/mini_stage.sh build-gpu/s18 build-gpu/s70 gpu_compile_check attention_bench
   # nvfp4_bench at HEAD). Predicted on an H200: Sage wg1c 34-37 ms against flash ~48 (1.30-1.42 x;
   # the H100 gave 1.41-1.49); NVFP4 (L2 emptied) 1 row 1.6-1.8 x, 8 rows 1.6-1.9 x, 16 rows
   # 1.2-1.5 x cuBLASLt bf16. ~3 min
   for r in 1 2; do echo "== attention_bench --sage, round $r"
     timeout 90 "$S/bin/attention_bench" --sage --iters 10 --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"
   done
   if [ "${M126_NVFP4:-1}" = 1 ]; then echo "== nvfp4_bench at 1, 8 and 16 rows"
     timeout 75 "$S/bin/nvfp4_bench" --rows 1,8,16 --no-skinny --no-lm-head --warm-seconds 0.2 2>&1 | grep -v h3bench
   fi # M126_NVFP4=0: Sage alone (call 128 times the NVFP4 forms of a later stage)
   } > "$log" 2>&1 ;;
125) { # o_proj's first rows read into the L2 beside the decode attention (STAGE = build-gpu/s60 at
   # HEAD; s66 / s67 = its binaries, plans compiled with dev/l2_warm.patch's h3c and
   # H3_LAB_L2_WARM_MB=24 / 40, s68 = 24 with H3_LAB_L2_WARM_OP=argmax; carry s60, s66, s67,
   # s68, lab): 2 rounds of s60, s66, s67, s68 on one kernel cache tuned untimed first, then
   # s66's timeline. Why: the attention (~16 us a layer,
   # ~4 MB of keys and values) leaves the DRAM idle, and the o_proj GEMV after it reads 100 MB
   # (38 us on an H100, ~27 on an H200). Prior: dev/l2_prefetch.cu's prefetch instructions
   # before a GEMV (2026-12-03) did not make it faster; these forms read the rows with loads,
   # beside the window. Predicted (low confidence, by that prior): o_proj -5..-10 us a layer
   # if its blocks' loads hit the warmed rows and the attention slows by less (the warm-up's
   # reads queue beside its loads): s66 -10..-30 us a step on either card, s67 within 10 us of s66 (the L2
   # holds ~50 MB; cuBLASLt's loads may mark the lines evict-first: then s68, whose argmax
   # kernel loads plainly, wins where s66 does not); tokens equal to s60's. ~6 min
   alternate 2 "$S" build-gpu/s66 build-gpu/s67 build-gpu/s68
   timeline build-gpu/s66 "$kc" "$OUT/tl.tsv"
   echo "== timeline build-gpu/s66"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -E "kvattm|64x16_4x1_v_bz_TNT|nvjet.*1536" "$OUT/tl.txt" | head -12
   } > "$log" 2>&1 ;;
124) { # the indexer window's forms in one call (STAGE = build-gpu/s60 at HEAD; carry s60, s61, s63,
   # s64, s65, s69): s60 (the default: the branch holds the q and k GEMVs beside the qkv
   # GEMV), s61 (index-topk-early), s63 (dev/qkv_ik_model.patch + index-topk-early: the k rows
   # in the qkv GEMV), s64 / s65 (dev/side_lead_linears.patch, H3_LAB_SIDE_LEAD_LINEARS=1 / 2
   # at compile time: the q GEMV / the q and k GEMVs alone on the main stream ahead of the
   # fork), s69 (dev/indexer_qk_model.patch: the indexer's q and k GEMVs as one, on the
   # branch), 2 rounds on one kernel cache tuned untimed first. Predicted on an H200 (the
   # branch ran ~10 us past the qkv side there, the q GEMV 17 us and its reduce 6 beside it):
   # s63 -15..-25 us, s64 -15..-25, s65 -10..-25, s69 -10..-20; on an H100 (branch 5 us
   # longer): s63 -5..+5, s64 -5..+5, s65 +0..+10, s69 -5..+5. ~7 min
   v=${M124_STAGES:-"$S build-gpu/s61 build-gpu/s63 build-gpu/s64 build-gpu/s65 build-gpu/s69"} # fewer when short
   alternate "${M124_ROUNDS:-2}" $v # M124_ROUNDS=1 for a short budget (~4.5 min)
   } > "$log" 2>&1 ;;
123) { # the k projection read with the qkv GEMV, timed before it is built (STAGE = build-gpu/s60 at
   # HEAD; s61 = its binaries, the plan compiled --enable-pass index-topk-early; s62 / s63 = its
   # binaries, the plan compiled from the model with dev/qkv_ik_model.patch applied (the sparse
   # layers' qkv weight holds the indexer's k rows: one 9344-row GEMV, ik a slice of it;
   # other weights' values, so other tokens), s63 with --enable-pass index-topk-early; carry
   # s60-s63). 2 rounds of s60, s61, s62, s63 on one kernel cache tuned untimed first.
   # Predicted: on an H200 s63 -30..-45 us against s60 (the branch is the q chain + top-k, the
   # main stream the GEMV and the fused q / k / v write, the ik write after the attention; the
   # stages' h3c has kv-write-fusion's rider rule of 2026-12-07), s62 +10..+30 (no branch:
   # the q chain's modelled cost is below side-streams' minimum); on an H100 s63 within +-5 us.
   # If s63 wins on the H200: parameters made of parts (dev/m31-decode.md, session 38). ~5 min
   alternate 2 "$S" build-gpu/s61 build-gpu/s62 build-gpu/s63
   } > "$log" 2>&1 ;;
122) { # 121 cut to ~3 min for a session's last minutes (STAGE = build-gpu/s60; carry s60, s61, lab):
   # one round of s60 default, H3_PDL=0 and s61, then s60's timeline. Predictions as 121
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"; cp -r build-gpu/s61/kcache/. "$kc/"
   for b in build-gpu/s61 "$S"; do H3_KERNEL_CACHE_DIR=$kc timeout 150 "$b/bin/h3exec" "$b/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done # both plans' keys tuned
   dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#default: #"
   H3_PDL=0 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl 0: #"
   dev/m31_step_calls.sh 1 "build-gpu/s61:$kc" | sed "s#^#index-topk-early: #"
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"; head -1 "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
121) { # issue 17's batch-1 figure on an H200 after the side priority's revert (STAGE = build-gpu/s60 at
   # HEAD; s61 = the same binaries, the plan compiled --enable-pass index-topk-early; carry both):
   # on an H100 the same runs give the step's shape without the priority. 2 rounds of s60 default (PDL on), H3_PDL=0, s61, on one
   # kernel cache tuned untimed first; then s60's timeline if build-gpu/lab is carried. Predicted: s60 ~1.50-1.55 ms (1.637 on 2026-12-06, since
   # then -36, -27..-61, -38 us on H100s); PDL -10..-25 us; index-topk-early -10..-30 (its
   # branch ran ~20 us past the qkv side on the H200). ~4.5 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"; cp -r build-gpu/s61/kcache/. "$kc/"
   for b in build-gpu/s61 "$S"; do H3_KERNEL_CACHE_DIR=$kc timeout 150 "$b/bin/h3exec" "$b/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done # both plans' keys tuned
   for r in 1 2; do
     dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#default: #"
     H3_PDL=0 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl 0: #"
     dev/m31_step_calls.sh 1 "build-gpu/s61:$kc" | sed "s#^#index-topk-early: #"
   done
   [ -f build-gpu/lab/kernel_timeline.so ] && { timeline "$S" "$kc" "$OUT/tl.tsv"
     echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"; head -1 "$OUT/tl.txt"; }
   } > "$log" 2>&1 ;;
119) { # 115, 117 and 118 at batch 1 in one call (STAGE = build-gpu/s59 = HEAD + dev/branch_skinny.patch,
   # whose switch is off unless H3_LAB_BRANCH_FORM is set; carry s56 (HEAD's test_gpu_ops), s57,
   # s59, lab): test_gpu_ops on s56, then 2 rounds of s59 default (PDL on, side stream at the
   # greatest priority, branch GEMVs on cuBLASLt), H3_PDL=0, H3_SIDE_PRIORITY=0,
   # H3_LAB_BRANCH_FORM=stream, =skinny, and s57 (index-topk-early), alternating on one kernel
   # cache tuned untimed first. Predicted (H200): PDL -10..-25 us; priority -5..-20; the skinny
   # forms -5..-15; index-topk-early -20..-30 (its branch ran ~20 us past the qkv side there);
   # tokens equal except the skinny forms (another sum order: late positions may differ). ~8 min
   echo "== test_gpu_ops (s56)"; timeout 200 build-gpu/s56/bin/test_gpu_ops models 2>&1 | grep -E "moe|router|FAIL|passed" | head -24
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"; cp -r build-gpu/s57/kcache/. "$kc/"
   for b in build-gpu/s57 "$S"; do H3_KERNEL_CACHE_DIR=$kc timeout 150 "$b/bin/h3exec" "$b/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done # both plans' keys tuned
   for r in 1 2; do
     dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#default: #"
     H3_PDL=0 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl 0: #"
     H3_SIDE_PRIORITY=0 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#priority 0: #"
     for f in stream skinny; do H3_LAB_BRANCH_FORM=$f dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#branch form $f: #"; done
     dev/m31_step_calls.sh 1 "build-gpu/s57:$kc" | sed "s#^#index-topk-early: #"
   done
   } > "$log" 2>&1 ;;
120) { # 115 and 117 at 64 sequences, and the batch-1 timeline (STAGE = build-gpu/s56, both plans in
   # its kcache; carry s56, lab): an untimed 64-row tuning, 2 rounds of default / H3_PDL=0 /
   # H3_SIDE_PRIORITY=0; then s56's batch-1 timeline (a cache tuned for batch 1 first).
   # Predicted: PDL -5..-15 us, priority -5..-15; tokens equal. ~5 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n24.plan" --graph generate_batch \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the 64-row GEMMs' tuning
   for r in 1 2; do
     M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#default: #"
     H3_PDL=0 M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl 0: #"
     H3_SIDE_PRIORITY=0 M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#priority 0: #"
   done
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
     --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # batch 1's tuning
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -A60 "^critical path" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
118) { # the indexer branch's small GEMVs without a reduce launch (STAGE = a stage of HEAD with
   # dev/branch_skinny.patch applied: git apply dev/branch_skinny.patch && dev/mini_stage.sh
   # build-gpu/s18 build-gpu/s59 h3c h3exec, both plans into its kcache, git checkout
   # runtime/cuda/cuda_skinny_gemm.c; carry it): H3_LAB_BRANCH_FORM unset (cuBLASLt: split-K
   # GEMV + a reduce kernel each), =stream (the skinny kernel's one-row streaming form) and
   # =skinny, for the branch's linears of <= 8 MiB (the q and k GEMVs of the indexer), batch 1
   # over 3 rounds on one kernel cache. Why: call 116's timeline put the q GEMV's reduce at
   # 10.1 us beside the qkv stream (1.4 alone), and the branch is the longer side by ~5 us on
   # an H100 (~20 on the H200). The skinny forms add their partials in the kernel (the last
   # ticket's thread). Predicted: -5..-15 us a step on an H100 if the skinny forms read 6 MB as
   # fast as cuBLASLt beside the stream; tokens may differ in late positions (another sum
   # order). ~5 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
     --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the tuning
   for r in 1 2 3; do for f in "" stream skinny; do
     H3_LAB_BRANCH_FORM=$f dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#branch form ${f:-library}: #"
   done; done
   } > "$log" 2>&1 ;;
117) { # the side stream at the device's greatest priority (STAGE = HEAD's: h3c, h3exec, test_gpu_ops,
   # both plans in its kcache; carry it): H3_SIDE_PRIORITY=1 (default) against 0 on the same
   # build, batch 1 over 3 rounds and 64 sequences over 2, alternating on one kernel cache;
   # then the batch-1 timeline. Why (call 116's s57 timeline, H100): in each moe window the
   # shared expert's swiglu kernel (1 block, on the branch) started 86 us after its input was
   # ready and its down GEMV 78 us after that kernel, behind the moe's 768-block GEMVs (the
   # block scheduler dispatched their pending blocks first), so the join waited 0-8 us for the
   # branch after the moe's down GEMV (layers 0 / 1 / 2: 8 / 0 / ~5). Predicted: batch 1
   # -5..-20 us (the joins' waits; the indexer branch's small kernels first beside the qkv
   # GEMV), 64 sequences -5..-15; tokens equal. ~8 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
     --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the tuning
   for r in 1 2 3; do for p in 1 0; do H3_SIDE_PRIORITY=$p dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#priority $p: #"; done; done
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n24.plan" --graph generate_batch \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the 64-row GEMMs' tuning
   for r in 1 2; do for p in 1 0; do H3_SIDE_PRIORITY=$p M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#priority $p: #"; done; done
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -E "moem|moemd|moec|nvjet.*64x1[01]|h3_fused" "$OUT/tl.txt" | head -24
   } > "$log" 2>&1 ;;
116) { # 115 cut to ~5 min for a short budget (STAGE = build-gpu/s56; carry s56, s57, lab):
   # test_gpu_ops on s56, then batch 1 over 2 rounds of s56 H3_PDL=1, s56 H3_PDL=0, s57; no 64
   # sequences, no timeline. Predictions as 115
   echo "== test_gpu_ops (s56)"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "moe|router|FAIL|passed" | head -24
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"; cp -r build-gpu/s57/kcache/. "$kc/"
   for b in build-gpu/s57 "$S"; do H3_KERNEL_CACHE_DIR=$kc timeout 150 "$b/bin/h3exec" "$b/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done # both builds' keys tuned
   for r in 1 2; do
     for p in 1 0; do H3_PDL=$p dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl $p: #"; done
     dev/m31_step_calls.sh 1 "build-gpu/s57:$kc" | sed "s#^#pdl 1: #"
   done
   } > "$log" 2>&1 ;;
115) { # 114 and index-topk-early in one call (STAGE = build-gpu/s56; carry s56, s57, lab): s57 =
   # s56 + the pass (a one-row index_topk reads the index cache before the step's write, so
   # side-streams branches the q chain + top-k beside qkv + the k chain's GEMV and runs the
   # ik write after the attention). test_gpu_ops on s56; batch 1 over 3 rounds: s56 H3_PDL=1,
   # s56 H3_PDL=0, s57 (PDL on), alternating on one kernel cache; 64 sequences one round of
   # s56 PDL 1 / 0 (the pass does not fire at 64 rows); s57's timeline. Predicted: tokens
   # equal in all three; PDL -10..-25 us (H100; H200 less); the pass -10..-20 us (H100: the
   # branch was ~5 us longer than the qkv side, now ~10 us shorter; the ik write ~4 us after
   # the attention), -20..-30 on an H200. ~8 min
   echo "== test_gpu_ops (s56)"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "moe|router|FAIL|passed" | head -24
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"; cp -r build-gpu/s57/kcache/. "$kc/"
   for b in build-gpu/s57 "$S"; do H3_KERNEL_CACHE_DIR=$kc timeout 150 "$b/bin/h3exec" "$b/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done # both builds' keys tuned
   for r in 1 2 3; do
     for p in 1 0; do H3_PDL=$p dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl $p: #"; done
     dev/m31_step_calls.sh 1 "build-gpu/s57:$kc" | sed "s#^#pdl 1: #"
   done
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n24.plan" --graph generate_batch \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the 64-row GEMMs' tuning
   for p in 1 0; do H3_PDL=$p M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#pdl $p: #"; done
   timeline build-gpu/s57 "$kc" "$OUT/tl.tsv"
   echo "== timeline build-gpu/s57"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -A24 "^critical path:" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
113) # ran 2026-12-07 on an H100 (dev/results/2026-12-07-h100-one-wave-pdl-hoisted.txt): the one wave
   # lost (+45 us) and is reverted; the programmatic down step read act before its wait (114)
   echo "call 113 ran on build-gpu/s55, since reverted: see dev/results" > "$log" ;;
112) { # the SM reserve again now that both streams' GEMVs of a window leave it free (STAGE =
   # build-gpu/s55, the newest, or s52; carry it): 8 / 16 / 32 (0 is the whole card for every GEMV), each with its
   # own tuning (an untimed run first), one kernel cache, batch 1 alternating over 2 rounds.
   # Why: with the shared expert's GEMVs on the card's SMs less 16 the router took 27 us and
   # still ended with the gate_up GEMV (call 111): bandwidth, not SMs, by that reading, so a
   # larger reserve should not help and a smaller one might give the GEMVs their rate back.
   # Predicted: 8 / 16 / 32 within 10 us of each other, 0 +20..+60 us. ~5 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   for r in 0 8 16 32; do H3_SIDE_SM_RESERVE=$r H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" \
     "$S/plans/m31_small_p2048_n80.plan" --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; done
   for round in 1 2; do
     for r in 0 8 16 32; do H3_SIDE_SM_RESERVE=$r dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#reserve $r: #"; done
   done
   } > "$log" 2>&1 ;;
111) { # the side branch's linears marked beside too (STAGE = build-gpu/s52: s51 + 9700f7c's pass
   # change; the same kernels, only the plans' beside marks differ) against build-gpu/s51: the
   # shared expert's GEMVs target the card's SMs less 16, so the router's 24 blocks find SMs
   # (the timelines: the router ends ~13 us after the shared gate_up GEMV, about its whole time
   # alone; 35-40 us beside it). Predicted: router 35-40 -> 15-20 us, the moe starts that much
   # earlier and shares the shared expert's stream: batch 1 -15..-30 us (H200: the shared
   # expert's window read at ~3 TB/s of ~4.1), 64 sequences ~0. On an H200 this is also
   # issue 17's figure (s51). ~8 min (carry build-gpu/s51, build-gpu/s52 and build-gpu/lab)
   step_ab build-gpu/s51
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -A18 "^critical path:" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
110) { # the batch-1 and 64-sequence decode step of build-gpu/s51 (cef117a) alone, for issue 17's
   # H200 figure when an H200 comes after call 108 ran on an H100 (108 there: s51 2.0486 ms
   # against s47's 2.0851, -36 us; 64 sequences -46 us). Three batch-1 rounds, two at 64 after
   # the untimed tuning runs; s51's batch-1 timeline. Predicted on an H200: ~1.59-1.60 ms (from
   # 1.637 before the day's -36 us and session 35's -27/-6/-6), 1.20 x the floor. ~4 min
   # (carry build-gpu/s51 and build-gpu/lab)
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   dev/m31_step_calls.sh 3 "$S:$kc"
   H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_b64_p2048_n24.plan" --graph generate_batch \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # the 64-row GEMMs' tuning
   M31_STEP_BATCH=1 dev/m31_step_calls.sh 2 "$S:$kc"
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -A18 "^critical path:" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
109) { # the 14 us gap before the dense layer's gate_up GEMV on H100s (STAGE = build-gpu/s51): the
   # tuned pick there (nvjet 64x8 2x1, 132 blocks, a 4-byte memset node before it) starts ~14 us
   # after that memset in every H100 timeline of 2026-12-07; the H200's pick (192x8) had neither.
   # Two timelines: the tuned kernel cache, then H3_GEMM_TUNE=0 (cuBLASLt's first heuristic pick,
   # a fresh cache), with the step times of both (one round each). Predicted: the untuned pick
   # has no memset and no gap, or the same gap (then it is the memset node, not the algorithm);
   # ~3 min (carry build-gpu/s51 and build-gpu/lab)
   for form in tuned untuned; do
     kc=$(mktemp -d)
     if [ $form = tuned ]; then cp -r "$S/kcache/." "$kc/"; export H3_GEMM_TUNE=1; else export H3_GEMM_TUNE=0; fi
     H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
       --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1 # tunes (tuned) or compiles (untuned)
     dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#$form: #"
     timeline "$S" "$kc" "$OUT/$form.tsv"
     echo "== timeline, $form"; python3 dev/kernel_timeline.py "$OUT/$form.tsv" --all | sed -n 1,16p
   done
   unset H3_GEMM_TUNE
   } > "$log" 2>&1 ;;
108) { # the day's decode changes on the card at hand, an H200 when one comes (STAGE = build-gpu/s51 at
   # cef117a: 107's s50 + rms_norm_rope's cos / sin loaded before its reduction + top-k's first
   # key row loaded before its vectors + the router's last block with its partials read 8 at a
   # time and its bias read before the ticket + the moe combine's y read with its ids + top-k's
   # selection loops rolled) against
   # build-gpu/s47 (1f3fdfb, the start of 2026-12-07's session 35): test_gpu_ops on s51 first;
   # one kernel cache; batch 1 alternating 3 rounds, 64 sequences 2 rounds; s51's timeline.
   # Predicted (H100 figures of calls 104-107): batch 1 -45..-65 us (top-k -27, attention -6,
   # norms -6, norm + rope -2, top-k's first row -3, router 0..-6, combine -2, top-k's selection
   # -6..-9), 64 sequences -45..-60 us; on an H200 the step ~1.59 ms (from
   # 1.637: 1.20 x the floor). ~8 min (carry build-gpu/s47, build-gpu/s51 and build-gpu/lab)
   echo "== test_gpu_ops (s51)"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "FAIL|passed|failed" | tail -5
   step_ab build-gpu/s47
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -A18 "^critical path:" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
107) { # the decode attention's merge and cluster combine (STAGE = build-gpu/s50: 106's s49 + the change)
   # against build-gpu/s49: the cluster combine's 8 remote reads issued at once (they waited for
   # each other: each one's sum came before the next load), the warps' merge and h3m_merge rolled
   # (the kernel's code 94 -> 65 KB; the same sums in the same order). Why: call 105's stamps put
   # 4.6 us between the key loop's end and the blob (on-chip work, ~1700 instructions of unrolled
   # merge code run once, cold) and 5.5 us in the cluster combine. test_gpu_ops first (the
   # cluster form against the CPU reference, never host-emulated). One kernel cache, batch 1
   # alternating 3 rounds, 64 sequences 2 rounds, then s50's timeline. Predicted: attention 17.8
   # -> 12-14 us, batch 1 -15..-25 us a step (4 attentions on the critical path), 64 sequences
   # -5..-15 us; tokens equal. ~8 min (carry build-gpu/s49, build-gpu/s50 and build-gpu/lab)
   echo "== test_gpu_ops (s50)"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "attention|topk|FAIL|passed" | head -20
   step_ab build-gpu/s49
   timeline "$S" "$kc" "$OUT/tl.tsv"
   echo "== timeline $S"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
   head -1 "$OUT/tl.txt"; grep -E "topks|kvattm" "$OUT/tl.txt" | head -8; grep -A14 "^critical path:" "$OUT/tl.txt"
   } > "$log" 2>&1 ;;
106) { # index_topk's decode kernel with a small hot loop (STAGE = build-gpu/s49: HEAD + the change)
   # against build-gpu/s47: each thread's key row staged in shared memory, then a rolled loop of
   # 8-element chunks (the score phase's code ~3 KB instead of ~20 KB; the same sums, bitwise).
   # Why: call 105's stamps (H100) put 11 us of top-k's 19.5 between the vectors staged and the
   # key block scored, work of ~1 us by instruction count; ncu's stall samples of the kernel sit
   # at line-aligned addresses through the unrolled loop (cold instruction fetch). One kernel
   # cache, batch 1 alternating 3 rounds, 64 sequences 2 rounds, then s49's timeline (top-k's
   # duration). Predicted: top-k 19.5 -> 11-13 us, batch 1 -20..-25 us a step (3 sparse layers,
   # top-k on the critical path), 64 sequences within +-5 us (the rows kernel there); tokens
   # equal. If top-k stays ~19 us, the cold-fetch reading is refuted. ~6 min (carry build-gpu/s47,
   # build-gpu/s49 and build-gpu/lab)
   step_ab build-gpu/s47
   for b in build-gpu/s47 "$S"; do
     timeline "$b" "$kc" "$OUT/tl.tsv"
     echo "== timeline $b"; python3 dev/kernel_timeline.py "$OUT/tl.tsv" --all > "$OUT/tl.txt"
     head -1 "$OUT/tl.txt"; grep -E "topks|kvattm" "$OUT/tl.txt" | head -8; grep -A12 "^critical path:" "$OUT/tl.txt"
   done
   } > "$log" 2>&1 ;;
104) { # rms_norm / add_rms_norm with a short row in registers (STAGE = build-gpu/s47 at 1f3fdfb) against
   # build-gpu/s46 (the same with 8674396's codegen change reverted): one round trip less in the step's nine one-block
   # norms (call 100's H200 timeline: 3.3-5.1 us each, on the critical path); tokens equal (the
   # same bits). One kernel cache, batch 1 alternating 3 rounds, 64 sequences 2 rounds.
   # Predicted: batch 1 -5..-10 us a step, 64 sequences -5..-10 us; ~5 min (carry build-gpu/s46
   # and build-gpu/s47)
   step_ab build-gpu/s46
   } > "$log" 2>&1 ;;
103) { # the GEMMs beside a branch on fewer SMs (c8a30e6: pass side-streams marks the linears of a
   # branch's window `beside`, cuda sets cuBLASLt's SM count target to the card's SMs less
   # H3_SIDE_SM_RESERVE; 1f3fdfb: only the main stream's linears; STAGE = build-gpu/s47, plans
   # compiled by its h3c; carry it and build-gpu/lab). Why: call 100's H200 timeline has the indexer's chain queued behind the qkv
   # GEMV's 132 blocks (its split-K reduce started 9-10 us after the GEMV it reduces; the chain
   # ends 55 us after the layer's input norm, the qkv side 36). Each reserve gets its own tuning
   # (an untimed run first), one kernel cache, batch 1 alternating over 2 rounds, then 64
   # sequences at 0 and 16, then the timeline at the default. Predicted (H200; H100 alike within
   # ~10 us): reserve 0 = s45's 1.637 ms; 16: -30..-50 us a step (the attention ~15 us earlier in
   # each sparse layer); 8: between; 32: within 10 us of 16; 64 sequences within +-1 %; the
   # qkv GEMV's grid <= 116 blocks in the timeline; ~8 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   tune() { H3_SIDE_SM_RESERVE=$1 H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/$2" "${@:3}" \
       --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1; }
   for r in 0 8 16 32; do tune $r m31_small_p2048_n80.plan; done
   for round in 1 2; do
     for r in 0 8 16 32; do H3_SIDE_SM_RESERVE=$r dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#reserve $r: #"; done
   done
   for r in 0 16; do tune $r m31_small_b64_p2048_n24.plan --graph generate_batch
     H3_SIDE_SM_RESERVE=$r M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#reserve $r, 64 sequences: #"; done
   timeline "$S" "$kc" "$OUT/b1.tsv"
   echo "== timeline, batch 1, default reserve"; python3 dev/kernel_timeline.py "$OUT/b1.tsv" --all
   awk -F'\t' '$1 == "K" && $5 != "0" {print $8 "\t" substr($9, 1, 60)}' "$OUT/b1.tsv" | sort | uniq -c | sort -k3
   } > "$log" 2>&1 ;;
100) { # where the decode step's time goes inside its CUDA graph: every node's start and end (CUPTI
   # activity records, dev/kernel_timeline.c preloaded; build it and copy libcupti into build-gpu/lab
   # with the lines in its header), read by dev/kernel_timeline.py: the nodes in start order and
   # the critical path (each node after the one it waited for, with the gap). Batch 1
   # (plans/m31_small_p2048_n80.plan, graph decode_next) and 64 sequences (plans/
   # m31_small_b64_p2048_n24.plan, generate_batch). STAGE = build-gpu/s45; carry it and
   # build-gpu/lab. Predicted: the tracer costs < 3 % of the step; the critical path runs through
   # the indexer's side branch (index_topk skipped: -53 us, call 92) and holds ~0.2 ms of small
   # kernels and gaps besides the weight reads (call 92: 0.213 ms without linears and moe); ~3 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   run() { H3_KERNEL_CACHE_DIR=$kc timeout 150 "$S/bin/h3exec" "$S/plans/$1" "${@:3}" --backend cuda \
       --weights random --seed 3 --warmup 0 --iterations 1 --profile "$OUT/$2.json" > "$OUT/$2.out" 2>&1; }
   for p in m31_small_p2048_n80.plan:b1 m31_small_b64_p2048_n24.plan:b64; do
     args=(); [ "${p#*:}" = b64 ] && args=(--graph generate_batch)
     run "${p%%:*}" "${p#*:}-tune" "${args[@]}"  # the run that tunes cuBLASLt: untimed
     run "${p%%:*}" "${p#*:}-plain" "${args[@]}"
     H3_TIMELINE=$OUT/${p#*:}.tsv LD_PRELOAD=$PWD/build-gpu/lab/kernel_timeline.so run "${p%%:*}" "${p#*:}-traced" "${args[@]}"
     for v in plain traced; do
       python3 -c 'import json, statistics, sys
tr = json.load(open(sys.argv[1]))["traceEvents"]
for g in ("decode_next", "decode_batch"):
    ev = [e["dur"] / 1000 for e in tr if e.get("cat") == "control" and e["name"] == g]
    if ev: print(sys.argv[2], g, f"{statistics.median(ev):.4f} ms ({len(ev)} calls)"); break' "$OUT/${p#*:}-$v.json" "${p#*:} $v"
     done
     echo "== ${p#*:}: timeline"; python3 dev/kernel_timeline.py "$OUT/${p#*:}.tsv" --all
     rm -f "$OUT/${p#*:}"-*.json
   done
   } > "$log" 2>&1 ;;
99) { # the loop counter copied to the device only where an op reads it there (STAGE = build-gpu/s45 at
   # b43f944) against the build before it (build-gpu/s44): the batch-1 decode step's device time
   # (decode_next's CUDA graph), one kernel cache tuned by an untimed run first, alternating, 3
   # rounds. Predicted: -8..-12 us a step (4 host-to-device copy nodes of 4 bytes gone from the
   # step's critical path; call 97's phase table: 2.8-3.2 us each as a phase); ~4 min
   # (carry build-gpu/s44 and build-gpu/s45)
   kc=$(mktemp -d); cp -r build-gpu/s44/kcache/. "$kc/"; cp -r "$S/kcache/." "$kc/"
   dev/m31_step_calls.sh 3 build-gpu/s44:"$kc" "$S:$kc"
   } > "$log" 2>&1 ;;
98) { # generate's step with its argmax inside the graph (decode_next, STAGE = build-gpu/s44 at HEAD of
   # 2026-12-07) against the step and an argmax launch after it (build-gpu/s41): bench/m31_decode.sh's
   # time per token (two generate runs of 16 and 80 new tokens, CUDA graphs), both stages on one
   # kernel cache (tuned by an untimed run first), alternating, 2 rounds. Predicted: -10..-30 us a
   # token (the argmax launch and its gap; README: 11-32 us on an H200), the step graph's device
   # time +3..5 us (the argmax now inside it); ~9.5 min (carry build-gpu/s41 and build-gpu/s44)
   kc=$(mktemp -d); cp -r build-gpu/s41/kcache/. "$kc/"; cp -r "$S/kcache/." "$kc/"
   H3_KERNEL_CACHE_DIR=$kc timeout 120 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n16.plan" --backend cuda \
     --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1
   for r in $(seq "${M98_ROUNDS:-2}"); do   # M98_ROUNDS=1: ~6 min
     for st in build-gpu/s41 "$S"; do
       echo "== round $r: $st"
       H3_KERNEL_CACHE_DIR=$kc timeout 200 bench/m31_decode.sh "$st/bin/h3exec" "$st/plans/m31_small_p2048_n16.plan" 16 \
         "$st/plans/m31_small_p2048_n80.plan" 80 3 2> /dev/null | grep -E "^generate|device time of one call|^\{"
     done
   done
   } > "$log" 2>&1 ;;
97) { # why the persistent step lost (call 96, H100: 77 records in 62 phases, tokens equal to the
   # switches' over 80, but 2.751-2.759 ms against 2.194): one block of 256 threads an SM, the
   # unit's registers being its heaviest phase's (255), so every GEMV phase reads with 8 warps an
   # SM. Forms (stage s43r: dev/persistent_step.patch as of this call): B1 = 96's; B2 / B3 = launch
   # bounds of 2 / 3 blocks an SM (H3_LAB_PERSISTENT_BLOCKS; ptxas: 128 / 80 registers, the heavy
   # phases spilling); B2S / B3S = the same with every kernel whose own launch needs more registers
   # than that left out of the unit and launched on its own between persistent segments
   # (H3_LAB_PERSISTENT_SPLIT=1: the decode attention at least), the replay captured as one CUDA
   # graph; R = the skinny GEMV's streaming form on at most one virtual block per block of the unit
   # (H3_LAB_PERSISTENT_REGRID=1: its bits do not depend on its grid; without it a block of B1 runs
   # two of its virtual blocks one after the other, each draining its loads before the next). A
   # conversion run each prints each phase's time in the last step (H3_LAB_PERSISTENT_TIMES=1), then
   # one step each beside the switches alone. Predicted: B1R ~2.6 ms, B2 ~2.45, B2SR / B3SR
   # ~2.15-2.25 (each split costs a launch, ~5-7 us, 4-12 of them); the phase times name what is
   # still slow against the kernels' own times (GEMV phases against their bytes); ~6.5 min
   sw="H3_LINEAR_FORM=skinny H3_M31_ATT_COMBINE=scratch"
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   P="H3_LAB_PERSISTENT=1 H3_LAB_PERSISTENT_BLOCKS"
   SR="H3_LAB_PERSISTENT_SPLIT=1 H3_LAB_PERSISTENT_REGRID=1"
   # B1 itself is call 96's 2.751 ms; B1 and B1R are left out to save device time (~2 min);
   # M97_FORMS=all puts them back
   forms=("$P=2" "$P=2 $SR" "$P=3 $SR")
   [ "${M97_FORMS:-}" = all ] && forms=("$P=1" "$P=1 H3_LAB_PERSISTENT_REGRID=1" "${forms[@]}")
   [ "${M97_FORMS:-}" = split ] && forms=("$P=2 $SR" "$P=3 $SR")   # ~4 min
   for f in "${forms[@]}"; do
     env $sw $f H3_LAB_PERSISTENT_TIMES=1 H3_KERNEL_CACHE_DIR="$kc" timeout 100 "$S/bin/h3exec" \
       "$S/plans/m31_small_p2048_n80.plan" --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 \
       > "$OUT/p97.txt" 2>&1
     echo "== $f: rc $?"; grep -E "persistent|error|  phase|  segment|  own launch" "$OUT/p97.txt" | head -110
     grep -E "^ +[0-9]+ [0-9]+ [0-9]+ " "$OUT/p97.txt" | head -1 | cut -c1-100
   done
   [ "${M97_STEPS:-1}" = 1 ] && for f in "" "${forms[@]}"; do
     env $sw $f dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#${f:-switches alone}: #"
   done
   } > "$log" 2>&1 ;;
96) { # call 95 again with the node query fixed (dev/persistent_step.patch now reads kernel nodes through
   # the driver's cuGraphKernelNodeGetParams: in call 95 the runtime's refused every node of a kernel
   # from cudaLibraryGetKernel, and its error reached the next launch). Stage s43q as 95's. One run
   # that converts (the unit's NVRTC compile goes into the kernel cache), then, only if it converted
   # and finished, the step under the switches with and without it and the default, 2 rounds.
   # Predicted: ~50-60 phases (Kahn levels of the captured DAG), tokens equal to the switches' run
   # (call 95: 67579 110919 66002 50126 44859 ...) for the first ~10, the step -50..-150 us against
   # the switches alone (call 95: 2.195 ms on an H100, the default 2.170); ~5 min
   sw="H3_LINEAR_FORM=skinny H3_M31_ATT_COMBINE=scratch"
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   env $sw H3_LAB_PERSISTENT=1 H3_KERNEL_CACHE_DIR="$kc" timeout 240 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" \
     --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > "$OUT/p96.txt" 2>&1
   echo "conversion run: rc $?"
   grep -E "persistent|error|hint|note:" "$OUT/p96.txt" | sort | uniq -c | head -12
   grep -E "^ +[0-9]+ [0-9]+ [0-9]+ " "$OUT/p96.txt" | head -1
   vs=("$sw" "")
   grep -q "records" "$OUT/p96.txt" && grep -qE "^ +[0-9]+ [0-9]+ [0-9]+ " "$OUT/p96.txt" && vs=("$sw H3_LAB_PERSISTENT=1" "${vs[@]}")
   for r in 1 2; do
     for v in "${vs[@]}"; do env $v dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#${v:-default}: #"; done
   done
   } > "$log" 2>&1 ;;
95) { # the persistent step's first form (dev/persistent_step.patch on HEAD: git apply, then
   # dev/mini_stage.sh build-gpu/s18 build-gpu/s43p h3c h3exec test_gpu_ops, git checkout the three
   # files and rm runtime/cuda/cuda_persistent.c; its h3c compiles plans/m31_small_p2048_n80.plan
   # into its kcache; carry build-gpu/s43p; STAGE = s43p). Never run before: first whether every
   # node converts (stderr's "h3 persistent (lab)" line) and the tokens against the same switches
   # without it, then the step. Predicted: N records in ~50-60 phases; tokens equal for the first
   # ~10 (FMA contraction may move later ones); the step -50..-150 us against the switches alone
   # (call 94's row), which is what must beat the default; ~4 min
   sw="H3_LINEAR_FORM=skinny H3_M31_ATT_COMBINE=scratch"
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   for r in 1 2; do
     for v in "$sw" "$sw H3_LAB_PERSISTENT=1" ""; do
       env $v H3_KERNEL_CACHE_DIR="$kc" timeout 150 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n80.plan" --backend cuda \
         --weights random --seed 3 --warmup 0 --iterations 1 2>&1 | grep -E "persistent|error|^ +[0-9]+ [0-9]+ " | head -4 |
         sed "s#^#${v:-default} (run): #"
       env $v dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#${v:-default}: #"
     done
   done
   } > "$log" 2>&1 ;;
94) { # what the persistent step's first form gives up before it gains (dev/persistent-decode.md):
   # the batch-1 step (STAGE, HEAD) with the one-row linears on the skinny GEMV, with the
   # attention's scratch combine, on one stream, and all three, one kernel cache, 2 rounds.
   # Predicted (H100, default ~2.14-2.19 ms): skinny +30..+60 us (call 44: the stream form +26,
   # the skinny kernel ~10-15 % under a plain read at 38-113 MB), scratch +27 (session 29's cluster
   # win), one stream +65 (call 88), all three +120..+150; ~5 min
   kc=$(mktemp -d); cp -r "$S/kcache/." "$kc/"
   for r in 1 2; do
     for v in "" H3_LINEAR_FORM=skinny H3_M31_ATT_COMBINE=scratch H3_SIDE_STREAM=0 \
       "H3_LINEAR_FORM=skinny H3_M31_ATT_COMBINE=scratch H3_SIDE_STREAM=0"; do
       env $v dev/m31_step_calls.sh 1 "$S:$kc" | sed "s#^#${v:-default}: #"
     done
   done
   } > "$log" 2>&1 ;;
93) { # today's kernel files as the phases of a persistent kernel, by remapping their built-ins
   # (dev/phase_remap.cu: build it here with the line in its header into build-gpu/lab; carry
   # build-gpu/lab): the decode attention as its own launch and as a phase of 132 resident
   # blocks. Predicted: bitwise equal, the phase within ~1 us of the launch; ~10 s
   timeout 60 build-gpu/lab/phase_remap
   } > "$log" 2>&1 ;;
92) { # what the batch-1 step spends in its CUDA graph on each kind of small op (dev/skip_ops_calls.sh on
   # a stage built with dev/skip_ops.patch: git apply dev/skip_ops.patch && dev/mini_stage.sh
   # build-gpu/s18 build-gpu/s42s h3c h3exec; git checkout runtime/cuda/cuda_backend.c; then its h3c
   # compiles plans/m31_small_p2048_n80.plan into its kcache; carry build-gpu/s42s; STAGE = s42s).
   # The bound of what a persistent step can win (dev/persistent-decode.md); predictions in the
   # script's header (all small ops together ~-200 us on an H100); 10 rows x 1 round, ~4 min
   timeout 540 dev/skip_ops_calls.sh "$S" 1
   } > "$log" 2>&1 ;;
91) { # the tuning without tile / cluster variants for bandwidth-bound GEMMs (STAGE, HEAD) against
   # the tuning with them (build-gpu/s40, c753748) at 64 sequences: every GEMM of a 64-row step is
   # under 1e11 FLOPs, so the change reaches it too, and only batch 1 was measured (H100: 2.138-
   # 2.158 ms against 2.156-2.256 over four tunings). Two fresh tunings each, one round on each
   # tuning's picks, then the batch-1 step of both once on their last tunings. Predicted: 64 rows
   # within +-1 % (~5.6 ms on an H100); if STAGE is slower by more than the two tunings' spread,
   # the variants come back for GEMMs of more than 16 rows; ~6 min
   for i in 1 2; do
     for st in "$S" build-gpu/s40; do
       kc=$(mktemp -d); cp -r "$st/kcache/." "$kc/"
       M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "$st:$kc" | sed "s#^#tuning $i, 64 sequences: #"
       [ $i = 2 ] && dev/m31_step_calls.sh 1 "$st:$kc" | sed "s#^#tuning $i, batch 1: #"
     done
   done
   } > "$log" 2>&1 ;;
90) { # the persistent-chain lab, second form (dev/persistent_chain.cu: build it here with the line in
   # its header into build-gpu/lab/persistent_chain; carry build-gpu/lab): five phases a layer, an
   # attention stand-in (a latency chain of 16 one-thread walkers) between qkv and o; B persistent
   # against BS, whose warps copy the next GEMV's first row bytes into shared memory before each
   # barrier. Predicted (H100, 2 blocks an SM): ATT ~13 us a layer; A ~1.46 x floor + ATT; B ~1.21 x
   # + ATT; BS 10-20 us a layer below B; BS bitwise equal to B. >= 8 % names staging as part of the
   # product's persistent layer kernel; ~1 min
   echo "== 4 layers, 2 blocks an SM, 64 steps; no attention; 8 layers; 1 block an SM; 3 blocks an SM"
   for a in "4 2 64" "4 2 0" "8 2 64" "4 1 64" "4 3 64"; do timeout 100 build-gpu/lab/persistent_chain $a; done
   } > "$log" 2>&1 ;;
89) { # the persistent-chain lab (dev/persistent_chain.cu: build it here with the line in its header
   # into build-gpu/lab/persistent_chain; carry build-gpu/lab): a sparse layer's main-stream GEMVs
   # with their glue as glue kernels + cuBLAS in a CUDA graph, against one persistent kernel with
   # grid barriers and the next phase's first rows prefetched to L2. Predicted: graph ~1.2 x the
   # floor, persistent PF 0 near it, PF 1 ~1.08-1.10 x; >= 8 % better than the graph names a
   # persistent layer kernel as issue 17's batch-1 lever; ~1 min
   echo "== persistent_chain: 4 layers, 3 blocks an SM; 8 layers; 4 layers at 2 blocks an SM"
   timeout 120 build-gpu/lab/persistent_chain 4; timeout 120 build-gpu/lab/persistent_chain 8
   timeout 120 build-gpu/lab/persistent_chain 4 2
   # and dev/cluster_placement.cu (same folder, its header's line): does a kernel in clusters of 8
   # start later than its plain blocks beside another stream's GEMVs? Predicted alone ~6-8 us both,
   # beside: plain +2-5 us, cluster +10-20 us
   echo "== cluster_placement"; timeout 60 build-gpu/lab/cluster_placement
   } > "$log" 2>&1 ;;
88) { # why cuBLASLt's picks vary (call 87: two fresh tunings of the same build gave the batch-1
   # step 2.1732 and 2.0942 ms on their picks), and two candidate fixes. Stages: STAGE (HEAD),
   # STAGEv (HEAD with dev/tune_no_variants.patch: the few-row GEMMs timed over the heuristic's
   # candidates only, no tile / cluster variants) and STAGEc (dev/tune_one_block_clusters.patch:
   # those candidates also set to clusters of one block), each with plans/m31_small_p2048_n80.plan;
   # carry all three. For each stage two fresh tunings with H3_GEMM_TUNE_LOG=1 (the run that tunes,
   # untimed), the step then timed on each one's picks (STAGE's also without the side stream,
   # H3_SIDE_STREAM=0); the heuristic's first picks (H3_GEMM_TUNE=0) once; dev/tune_log_diff.py on
   # each pair of logs.
   # Predicted: the picks differ at 2-4 of the ~12 decode GEMMs. Coin tosses within 2 % cannot add
   # up to 79 us (the decode GEMMs take ~1.5 ms in all), so the guess is that a pick timed alone runs
   # slower beside the side stream's reads, the variants with 2x1 / 1x2 clusters first (a cluster's
   # blocks wait to be placed together while the side stream holds SMs: the moe's cluster combine
   # lost 17 us a launch that way in call 85). If so: STAGE's tunings differ with two streams and
   # agree more on one; STAGEv's or STAGEc's two tunings within ~10 us of each other and of STAGE's
   # better one (~2.09-2.10 ms on an H100), and then that patch goes into the product; ~8 min
   for st in "$S" "${S}v" "${S}c"; do
     for i in 1 2; do
       kc=$(mktemp -d); cp -r "$st/kcache/." "$kc/"
       H3_GEMM_TUNE_LOG=1 H3_KERNEL_CACHE_DIR=$kc timeout 120 "$st/bin/h3exec" "$st/plans/m31_small_p2048_n80.plan" \
         --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 2> "$OUT/tune${st##*/}$i.log" > /dev/null
       dev/m31_step_calls.sh 1 "$st:$kc" | sed "s#^#tuning $i, on its picks: #"
       if [ "$st" = "$S" ]; then
         H3_SIDE_STREAM=0 dev/m31_step_calls.sh 1 "$st:$kc" | sed "s#^#tuning $i, on its picks, one stream: #"
       fi
       if [ "$st$i" = "${S}1" ]; then H3_GEMM_TUNE=0 dev/m31_step_calls.sh 1 "$st:$kc" | sed "s#^#heuristic picks: #"; fi
     done
     echo "== the picks that differ (${st##*/})"
     python3 dev/tune_log_diff.py "$OUT/tune${st##*/}1.log" "$OUT/tune${st##*/}2.log"
   done
   } > "$log" 2>&1 ;;
85) { # the batch-1 step's three opt-in cluster forms on build-gpu/s39 (b37c788: h3c h3exec test_gpu_ops
   # gpu_compile_check, plans/m31_small_p2048_n80.plan and _b64_p2048_n24.plan compiled by its
   # h3c). Carry build-gpu/s39.
   # Predictions on an H100 (H200 lower):
   # 1. test_gpu_ops: all pass, the one-row moe, router and index_topk cases through their
   #    cluster forms included (H3_MOE_COMBINE, H3_ROUTER_FORM, H3_TOPK_FORM = cluster: their
   #    first GPU run);
   # 2. the batch-1 step, one kernel cache, 2 rounds (2.065 ms in call 83 on this build's
   #    attention): the moe's cluster combine -10..-20 us (3 combine launches of ~6 us, y's round
   #    trip), the router's -5..-15 us (3 launches without the counter's fence and ticket, its
   #    last block's reads), index_topk's -0..-30 us (on the side stream: what of its ~20 us x 3
   #    the branch's join waits for; 8 blocks instead of 129), all three about their sum. Each
   #    that wins becomes the default (and its old form's code goes); ~7 min
   echo "== test_gpu_ops (s39)"; timeout 200 build-gpu/s39/bin/test_gpu_ops models 2>&1 | grep -E "FAIL|passed"
   echo "== batch-1 step by form, one kernel cache"
   kc=$(mktemp -d); cp -r build-gpu/s39/kcache/. "$kc/"
   all="H3_MOE_COMBINE=cluster H3_ROUTER_FORM=cluster H3_TOPK_FORM=cluster"
   for r in 1 2; do
     for v in "" "H3_MOE_COMBINE=cluster" "H3_ROUTER_FORM=cluster" "H3_TOPK_FORM=cluster" "$all"; do
       env $v dev/m31_step_calls.sh 1 "build-gpu/s39:$kc" | sed "s#^#${v:-default}: #"
     done
   done
   echo "== the step's ops, CUDA graphs off (dev/step_ops.py), default and all three forms"
   for v in "" "$all"; do
     echo "-- ${v:-default}"
     env $v H3_CUDA_GRAPHS=0 H3_KERNEL_CACHE_DIR="$kc" timeout 120 build-gpu/s39/bin/h3exec \
       build-gpu/s39/plans/m31_small_p2048_n80.plan --backend cuda --weights random --seed 3 --warmup 0 \
       --iterations 1 --profile "$kc/p.json" > /dev/null 2>&1 && python3 dev/step_ops.py "$kc/p.json" | head -45
   done
   } > "$log" 2>&1 ;;
86) { # cuBLASLt's tuning with operands rotated past the L2 (build-gpu/s39) against one copy
   # (build-gpu/s37: df2b013, its plans/m31_small_p2048_n80.plan), two fresh tunings each
   # (dev/tune_ab.sh); then the 64-sequence step with index_topk's cluster form (every row a
   # cluster of 8 blocks, no counter) against its decode blocks (16 a row). Carry both.
   # Predicted (H100): s37's tunings spread over 2.07-2.16 ms (call 83), s39's both ~2.06-2.07,
   # within 5 us of each other; the 64-sequence step (~4.2 ms) -15..-30 us with the cluster
   # form (index_topk ~35 us a layer there, a latency chain); ~5 min
   # (Re-staged in a fresh checkout without s37: three fresh rotated tunings of s39 alone; their
   # spread against call 83's 2.07-2.16 ms is the answer.)
   dev/tune_ab.sh 3 build-gpu/s39
   echo "== 64 sequences: index_topk's decode blocks / clusters, one kernel cache"
   kc=$(mktemp -d); cp -r build-gpu/s39/kcache/. "$kc/"
   for r in 1 2; do
     for v in "" "H3_TOPK_FORM=cluster"; do
       env $v M31_STEP_BATCH=1 dev/m31_step_calls.sh 1 "build-gpu/s39:$kc" | sed "s#^#${v:-default}: #"
     done
   done
   } > "$log" 2>&1 ;;
84) { # issue 19's batch-1 rounds at 128 experts against their floor on an H200 (call 76 on an
   # H100: real 4.96 ms, 1.18 x; forced 4 5.30, 1.17 x; forced 9 5.82, 1.15 x). STAGE = build-gpu/s71
   # (dev/lab_stages.sh; carry it).
   # Predicted: 1.15-1.22 x (the H200's faster reads leave the latency-bound parts a larger share)
   W=$OUT/spec; mkdir -p "$W"
   echo "== s128: C = 1"; M31_SPEC_FLOOR=1 M31_SPEC_ACCEPT="4 9" M31_SPEC_H3C="--set experts=128" timeout 420 \
     bench/m31_spec.sh "$S" "$W/s128" 1 2> "$W/s128.log" || tail -5 "$W/s128.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   } > "$log" 2>&1 ;; # ~8 min
76) { # the streaming fp32 Markov step (a row a thread, w2 through two cp.async stages): its GPU
   # cases, then the batch-1 rounds at 128 experts against their floor (call 74: forced 4 5.52 ms,
   # 1.23 x; forced 9 6.13, 1.22 x; real 5.16). Carry build-gpu/s34 (h3c, h3exec, test_gpu_ops).
   # Predicted: markovs 101 -> ~38 us a step (102 MB of w2 at ~2.9 TB/s), a round -0.5 ms: forced
   # 4 ~5.0 ms (1.12 x), forced 9 ~5.6 (1.11 x), real ~4.65
   echo "== test_gpu_ops"; timeout 220 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "markov|FAIL|passed"
   W=$OUT/spec; mkdir -p "$W"
   echo "== s128: C = 1"; M31_SPEC_FLOOR=1 M31_SPEC_ACCEPT="4 9" M31_SPEC_H3C="--set experts=128" timeout 300 \
     bench/m31_spec.sh "$S" "$W/s128" 1 2> "$W/s128.log" || tail -5 "$W/s128.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   } > "$log" 2>&1 ;; # ~8 min
80) { # where a 64-sequence forced-4 round's 26.4 ms go, in kernel time (the per-op tables of
   # call 75 ran without graphs and hold the host's launch gaps): ncu of 17 new tokens (4
   # rounds) against 1, a tuning cache filled first (call 78's protocol), each kernel's time per
   # round. Carry a stage of HEAD (h3c, h3exec). Predicted: moe ~14 ms, the two lm_heads ~4,
   # verify attention ~1.5-2.5, markov ~0.6, spec_accept ~0.2, draft NVFP4 linears ~0.9
   T=$(mktemp -d); P=$T/p.plan; export H3_KERNEL_CACHE_DIR=$T/kc; mkdir -p "$T/kc"
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set experts=128 -o "$P" 2>&1 | tail -1
   X=("$S/bin/h3exec" "$P" --backend cuda --weights random --seed 3 --concurrency 64)
   for o in 32 17 1; do
     python3 bench/m31_serve_peer.py make-requests --n 64 --isl 2048 --osl $o --vocab 200064 --seed 64 > "$T/q$o.jsonl"
   done
   "${X[@]}" --requests "$T/q32.jsonl" --out "$T/p64.jsonl" > /dev/null 2>&1
   "${X[@]}" --requests "$T/q17.jsonl" --speculative dspark --spec-force-accept "4:$T/p64.jsonl" > /dev/null 2>&1
   for o in 17 1; do
     H3_CUDA_GRAPHS=0 timeout 240 ncu --metrics gpu__time_duration.sum --csv "${X[@]}" --requests "$T/q$o.jsonl" \
       --speculative dspark --spec-force-accept "4:$T/p64.jsonl" > "$T/n$o.csv" 2> /dev/null
   done
   echo "== round kernels, forced 4 (BENCH ONLY), 64 sequences, 128 experts"
   python3 dev/ncu_step_kernels.py "$T/n17.csv" "$T/n1.csv" 4
   } > "$log" 2>&1 ;; # ~8 min (ncu over two 64-prompt prefills)
82) { # call 80 under H3_M31_ATTENTION=tile: the batched verify's attention on the row-tiled
   # kernel (groups of a sequence's 9 rows: tiles of 8 and 1) against call 80's one-row kernel,
   # kernel by kernel (the round lost 0.56 ms in call 79; a bandwidth model said it should win
   # ~1 ms: the one-row kernel's 9 rows of a sequence read its keys ~9 times through L2).
   # Carry the stage of call 80
   H3_M31_ATTENTION=tile "$0" "$S" "$OUT" 80 > /dev/null 2>&1; cat "$OUT/call80.txt"
   } > "$log" 2>&1 ;; # ~8 min
81) { # issue 17's batch-1 step against the split counts of its latency-bound kernels (call 78:
   # decode attention ~30 us a layer in ncu, index_topk ~23): bench/m31_decode.sh's step with
   # H3_M31_ATT_SPLITS = default (16), 8, 4 and H3_M31_TOPK_SPLITS = default, 8, alternating.
   # Carry a stage with dev/mini_stage.sh --m31-ab "" (its decode plans). Predicted: within
   # +-10 us a step (the splits trade a wider wave for a longer combine)
   for r in 1 2; do
     for v in "" "H3_M31_ATT_SPLITS=8" "H3_M31_ATT_SPLITS=4" "H3_M31_TOPK_SPLITS=8"; do
       echo "== ${v:-default} (round $r)"
       env $v H3_KERNEL_CACHE_DIR="$(cd "$S/kcache" && pwd)" timeout 80 bench/m31_decode.sh "$S/bin/h3exec" \
         "$S/plans/m31_small_p2048_n16.plan" 16 "$S/plans/m31_small_p2048_n80.plan" 80 3 2>/dev/null | grep -E "device time of one call"
     done
   done
   } > "$log" 2>&1 ;; # ~6 min
79) { # a batched verify's attention on the row-tiled kernel (a page table per sequence,
   # serve_verify's [seqs, pt_len]): test_gpu_ops (its grouped cases, the markov and Sage cases),
   # then the 64-sequence forced-4 round at 128 experts (26.37 ms in call 77, plain 11.98).
   # Carry build-gpu/s35. Predicted: the verify's attention 2.6 -> ~0.7 ms a round (each
   # sequence's keys read twice a kv head instead of 9 times), round ~24.5 ms, speed-up ~1.95 x
   echo "== test_gpu_ops"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "sequences x 9|markov|FAIL|passed"
   W=$OUT/spec; mkdir -p "$W"
   echo "== s128: C = 64"; M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 250 \
     bench/m31_spec.sh "$S" "$W/s128c64" 64 2> "$W/s128c64.log" || tail -5 "$W/s128c64.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   } > "$log" 2>&1 ;; # ~5 min
78) { # call 77's plain-step table again without cuBLASLt's tuning in it (call 77 timed the
   # candidate algorithms inside the 9-token run): a run first fills a fresh tuning cache, then
   # ncu times the 9-token and 1-token runs. Carry build-gpu/s34. Predicted: lm_head ~0.82 ms, moe
   # ~0.16 ms a layer, kvattm ~25 us a layer (its bytes ~1 us: latency), the other linears ~0.7
   T=$(mktemp -d); P=$T/p.plan; export H3_KERNEL_CACHE_DIR=$T/kc; mkdir -p "$T/kc"
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=1 -o "$P" 2>&1 | tail -1
   X=("$S/bin/h3exec" "$P" --backend cuda --weights random --seed 3 --concurrency 1)
   for o in 9 1; do
     python3 bench/m31_serve_peer.py make-requests --n 1 --isl 2048 --osl $o --vocab 200064 --seed 1 > "$T/r$o.jsonl"
   done
   "${X[@]}" --requests "$T/r9.jsonl" > /dev/null 2>&1
   for o in 9 1; do
     H3_CUDA_GRAPHS=0 timeout 150 ncu --metrics gpu__time_duration.sum --csv "${X[@]}" --requests "$T/r$o.jsonl" \
       > "$T/n$o.csv" 2> /dev/null
   done
   echo "== plain step kernels, small, C = 1"; python3 dev/ncu_step_kernels.py "$T/n9.csv" "$T/n1.csv" 8
   } > "$log" 2>&1 ;; # ~3 min
77) { # the streaming tensor-core Markov step at 64 sequences (call 75: markov_draft 1.53 ms a
   # round, ~190 us a step), the forced-4 round (26.79 ms in call 74); then where a plain batch-1
   # step's kernel time goes (issue 17: the step at 1.21 x its floor on an H100): ncu's time of
   # each kernel, 9 new tokens against 1 (graphs off; ncu's times hold no launch gaps), at the
   # small config. Carry build-gpu/s34. Predicted: the round ~25.7 ms (markov ~0.6 ms, spec_accept
   # -0.4); the plain step's lm_head ~0.82 ms (at its bytes), moe ~0.45, other linears ~0.7
   W=$OUT/spec; mkdir -p "$W"
   echo "== s128: C = 64"; M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 250 \
     bench/m31_spec.sh "$S" "$W/s128c64" 64 2> "$W/s128c64.log" || tail -5 "$W/s128c64.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   T=$(mktemp -d); P=$T/p.plan
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=1 -o "$P" 2>&1 | tail -1
   for o in 9 1; do
     python3 bench/m31_serve_peer.py make-requests --n 1 --isl 2048 --osl $o --vocab 200064 --seed 1 > "$T/r$o.jsonl"
     H3_CUDA_GRAPHS=0 timeout 150 ncu --metrics gpu__time_duration.sum --csv "$S/bin/h3exec" "$P" --backend cuda \
       --weights random --seed 3 --concurrency 1 --requests "$T/r$o.jsonl" > "$T/n$o.csv" 2> /dev/null
   done
   echo "== plain step kernels, small, C = 1"; python3 dev/ncu_step_kernels.py "$T/n9.csv" "$T/n1.csv" 8
   } > "$log" 2>&1 ;; # ~8 min
75) { # where the draft's 1.75 ms go (floor 1.18) and the round's linears (4.12 ms against ~2.2 of
   # bytes): ncu's duration of every kernel of a forced-9 round at 128 experts, C = 1 (the run of
   # call 73, --requests with 8 new tokens so the kernels of ~1 round and the prefill are timed)
   # Carry a stage of HEAD (h3c, h3exec). Predicted: markov step ~80 us and pick ~10 us each of 8;
   # the draft's lm_head (8 rows, f32) and the verify's (9 rows) ~1.2-1.5 ms each against 0.81 of bytes
   W=$(mktemp -d); P=$W/p.plan
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=1 --set experts=128 -o "$P" 2>&1 | tail -1
   python3 bench/m31_serve_peer.py make-requests --n 1 --isl 2048 --osl 16 --vocab 200064 --seed 1 > "$W/r.jsonl"
   X=("$S/bin/h3exec" "$P" --backend cuda --weights random --seed 3 --concurrency 1 --requests "$W/r.jsonl")
   "${X[@]}" --out "$W/plain.jsonl" > /dev/null 2>&1
   H3_CUDA_GRAPHS=0 timeout 300 ncu --metrics gpu__time_duration.sum --csv "${X[@]}" --speculative dspark \
     --spec-force-accept "9:$W/plain.jsonl" > "$W/ncu.csv" 2> /dev/null
   python3 -c 'import csv, collections, sys
t = collections.defaultdict(lambda: [0, 0.0])
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith("\"")):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        k = t[r["Kernel Name"][:60]]; k[0] += 1; k[1] += float(r["Metric Value"].replace(",", "")) / 1e3
for n, (c, us) in sorted(t.items(), key=lambda x: -x[1][1])[:40]: print(f"{us:10.1f} us {c:5d}  {n}")' "$W/ncu.csv"
   # then 64 sequences (the round at 1.61 x its floor, the plain step at 1.03 x): per-op tables of
   # a forced-4 round and a plain step minus the prompts' prefill (dev/spec_round_ops.py)
   P=$W/p64.plan; X=("$S/bin/h3exec" "$P" --backend cuda --weights random --seed 3 --concurrency 64)
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=64 --set experts=128 -o "$P" 2>&1 | tail -1
   for o in 32 1; do python3 bench/m31_serve_peer.py make-requests --n 64 --isl 2048 --osl $o --vocab 200064 --seed 64 > "$W/q$o.jsonl"; done
   "${X[@]}" --requests "$W/q32.jsonl" --out "$W/p64.jsonl" > /dev/null 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/q1.jsonl" --speculative dspark --profile "$W/b.json" > "$W/sb64.txt" 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/q1.jsonl" --profile "$W/b.json" > "$W/b64.txt" 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/q32.jsonl" --profile "$W/b.json" > "$W/pl64.txt" 2>&1
   H3_CUDA_GRAPHS=0 timeout 200 "${X[@]}" --requests "$W/q32.jsonl" --speculative dspark \
     --spec-force-accept "4:$W/p64.jsonl" --profile "$W/b.json" > "$W/s64.txt" 2>&1
   echo "== plain step, 64 sequences"; python3 dev/spec_round_ops.py "$W/pl64.txt" "$W/b64.txt"
   echo "== round, forced 4 (BENCH ONLY), 64 sequences"; python3 dev/spec_round_ops.py "$W/s64.txt" "$W/sb64.txt"
   } > "$log" 2>&1 ;; # ~8 min in all (split it if the budget is short)
74) { # spec_accept's argmax pieces (1a71abd): test_gpu_ops, then the rounds of call 72 again.
   # Carry build-gpu/s32 (h3c, h3exec, gpu_compile_check, test_gpu_ops at 1a71abd)
   echo "== test_gpu_ops"; timeout 250 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "spec_accept|FAIL|passed"
   W=$OUT/spec; mkdir -p "$W"
   echo "== s128: C = 1"; M31_SPEC_FLOOR=1 M31_SPEC_ACCEPT="4 9" M31_SPEC_H3C="--set experts=128" timeout 200 \
     bench/m31_spec.sh "$S" "$W/s128" 1 2> "$W/s128.log" || tail -5 "$W/s128.log"
   echo "== s128: C = 64"; M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 200 \
     bench/m31_spec.sh "$S" "$W/s128c64" 64 2> "$W/s128c64.log" || tail -5 "$W/s128c64.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   } > "$log" 2>&1 ;; # ~6 min. Predicted (H100, against call 72): 128 experts, C = 1, rounds forced 4
   # 6.70 -> ~5.6 ms (1.50 -> ~1.26 x the floor), forced 9 8.08 -> ~6.5, real 5.51 -> ~5.35; C = 64
   # forced 4 27.5 -> ~26 ms
73) { # where a batch-1 round and step go above their floors (call 72: both ~1.5 x): per-op tables
   # (CUDA graphs off) of plain decoding and forced rounds A = 4, 9 at 128 experts, minus a run of
   # the same prompt with one new token (dev/spec_round_ops.py). Carry build-gpu/s31
   W=$(mktemp -d); P=$W/p.plan; X=("$S/bin/h3exec" "$P" --backend cuda --weights random --seed 3 --concurrency 1)
   "$S/bin/h3c" compile models/minimax_m3_1.g --config small --set seqs=1 --set experts=128 -o "$P" 2>&1 | tail -1
   for o in 128 1; do python3 bench/m31_serve_peer.py make-requests --n 1 --isl 2048 --osl $o --vocab 200064 --seed 1 > "$W/r$o.jsonl"; done
   "${X[@]}" --requests "$W/r128.jsonl" --out "$W/plain.jsonl" > /dev/null 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/r1.jsonl" --profile "$W/b.json" > "$W/base.txt" 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/r1.jsonl" --speculative dspark --profile "$W/b.json" > "$W/sbase.txt" 2>&1
   H3_CUDA_GRAPHS=0 "${X[@]}" --requests "$W/r128.jsonl" --profile "$W/b.json" > "$W/plainp.txt" 2>&1
   echo "== plain decode step, 128 experts, C = 1"; python3 dev/spec_round_ops.py "$W/plainp.txt" "$W/base.txt"
   for A in 4 9; do
     H3_CUDA_GRAPHS=0 timeout 120 "${X[@]}" --requests "$W/r128.jsonl" --speculative dspark \
       --spec-force-accept "$A:$W/plain.jsonl" --profile "$W/b.json" > "$W/s$A.txt" 2>&1
     echo "== round, forced $A (BENCH ONLY), 128 experts, C = 1"; grep -E "^(rounds|round time|FORCED)" "$W/s$A.txt"
     python3 dev/spec_round_ops.py "$W/s$A.txt" "$W/sbase.txt"
   done
   } > "$log" 2>&1 ;; # ~3 min. Predicted (A = 9, round 8.08 ms against a 5.02 floor in call 72): the
   # verify's moe (3 calls) ~3.5 ms against its experts' 2.44 ms of bytes (21.8 x 113 MB x 3 at 3.03
   # TB/s), linear (both lm_heads, 1.62 ms of bytes) ~1.8 ms, markov_draft ~0.5 (0.27 of bytes)
72) { # issue 19's batch-1 round against its bandwidth floor (bench/m31_floor.py, experts counted by
   # h3exec --moe-stats), 32 and 128 experts, NVFP4 and bf16 drafts; then C = 64 at 128 experts
   # (the round against 1.5 x a plain step). Carry build-gpu/s31 (h3c, h3exec at edaa0ce; kcache of s30)
   W=$OUT/spec; mkdir -p "$W"
   for cfg in "s32:" "s128:--set experts=128" "s128bf16:--set experts=128 --draft-quant bf16"; do
     echo "== ${cfg%%:*}: C = 1"; M31_SPEC_FLOOR=1 M31_SPEC_ACCEPT="4 9" M31_SPEC_H3C="${cfg#*:}" timeout 200 \
       bench/m31_spec.sh "$S" "$W/${cfg%%:*}" 1 2> "$W/${cfg%%:*}.log" || tail -5 "$W/${cfg%%:*}.log"
   done
   echo "== s128: C = 64"; M31_SPEC_FLOOR=1 M31_SPEC_ACCEPT=4 M31_SPEC_H3C="--set experts=128" timeout 250 \
     bench/m31_spec.sh "$S" "$W/s128c64" 64 2> "$W/s128c64.log" || tail -5 "$W/s128c64.log"
   rm -f "$W"/*/*.plan "$W"/*/*.results.jsonl "$W"/*/requests_*.jsonl
   } > "$log" 2>&1 ;; # ~6 min. Predicted (H100, copy ~3.0 TB/s): 128 experts, C = 1, NVFP4 draft, A = 4:
   # floor ~6 ms (uniform routing: ~32 experts of the 9 verify rows; the count may differ), round
   # 1.15-1.3 x it; the draft ~25-30 % of the measured round against ~19 % of the floor
71) { # run as: dev/pending_device_calls.sh build-gpu/s30 $OUT 71 (s30: built 2026-12-06 at the wg1p
   # commit and the review fixes after it, with the composite, s3 and l2 sage plans; rebuild if the
   # product changed since)
   echo "== test_gpu_ops (wg1p's sage cases: their first run on a GPU)"
   timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "sage|nvfp4|FAIL|passed"
   for r in 1 2; do echo "== attention_bench --sage, round $r"
     timeout 90 "$S/bin/attention_bench" --sage --iters 10 --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"
   done
   echo "== nvfp4_bench at 5-8 and 16 rows (the row-pair form's threshold)"
   timeout 75 "$S/bin/nvfp4_bench" --rows 5,6,7,8,16 --no-skinny --no-lm-head --warm-seconds 0.2 2>&1 | grep -v h3bench
   } > "$log" 2>&1 ;; # carry build-gpu/s30 (14 MB); ~420 s. Predicted: wg1p 26-30 ms against wg1c ~34
   # (H100); the pairs at 5-7 rows 1.0-1.15 x the skinny form's time (single column)
70) { S=build-gpu/s29 # the NVFP4 row-pair form (two weight tiles a warp, 2-16 rows)
   echo "== test_gpu_ops (s29)"; timeout 150 $S/bin/test_gpu_ops models 2>&1 | grep -E "nvfp4|FAIL|passed"
   echo "== nvfp4_bench (single: the skinny form at 2-8 rows; tiled: the tiled kernels)"
   timeout 75 $S/bin/nvfp4_bench --rows 1,2,4,8,16 --no-skinny --no-lm-head --warm-seconds 0.2 2>&1 | grep -v h3bench
   } > "$log" 2>&1 ;; # carry build-gpu/s29 (~9 MB); ~230 s. Predicted (H100, the lab's skx rows of call 66):
   # 8 rows fc ~39, o_proj ~20.2, gate_up ~45, down ~29.6 us (1.9-2.3 x cuBLAS; the skinny form 1.7-1.8 x);
   # 16 rows 54 / 27 / 66 / 40.5 (1.4-1.6 x; tiled 1.0-1.4 x); 2 and 4 rows between 1 and 8
68) { N=build-gpu/s27 O=build-gpu/s26 # wg3: three warpgroups a block taking turns on the tensor cores
   echo "== test_gpu_ops (s27: wg3 among the sage forms)"; H3_KERNEL_CACHE_DIR=$(cd $N/kcache && pwd) \
     timeout 200 $N/bin/test_gpu_ops models 2>&1 | grep -E "sage|FAIL|passed"
   for r in 1 2; do for d in $O $N; do echo "== attention_bench --sage, ${d##*/}, round $r"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 80 $d/bin/attention_bench --sage --iters 10 \
       --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"; done; done
   } > "$log" 2>&1 ;; # carry build-gpu/s26, build-gpu/s27 (~21 MB); ~250 s. Predicted (H100): wg3
   # 24-29 ms against wg1c's 34.4 (1.65-2 x flash) if the blocks' products ran in step (call 67's
   # ncu: tensor 51 %, a block-stage the sum of the tensor and ex2 clocks); ~31-33 if the turns'
   # handoffs cost what they save
67) { # A/B of 2^x's share on the FMA pipe (H3S_FMA_EXP of 8; s26 is HEAD before it: 0 of 8)
   for r in 1 2; do for d in build-gpu/s26 build-gpu/s27_2 build-gpu/s27_3 build-gpu/s27_4; do
     echo "== attention_bench --sage, ${d##*/}, round $r"; H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) \
       timeout 60 $d/bin/attention_bench --sage --iters 10 --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"
   done; done
   for d in build-gpu/s27_2 build-gpu/s27_3; do echo "== test_gpu_ops, ${d##*/}"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 150 $d/bin/test_gpu_ops models 2>&1 | grep -E "sage|FAIL|passed"
   done
   echo "== ncu of s27_2's wg1c"; d=build-gpu/s27_2; H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) H3_SAGE_FORM=wg1c \
     timeout 120 ncu --clock-control none --set full -k 'regex:^h3cu_sage_fwd_fp8_wg1c$' --launch-count 1 \
     -o "$OUT/ncu27" $d/bin/attention_bench --sage --iters 1 --warm-seconds 0 > /dev/null 2>&1
   ncu --import "$OUT/ncu27.ncu-rep" --page details 2>&1 | grep -E "Duration|Issue Slots Busy|Shared is|Tensor|Eligible|Warp Cycles Per Issued"
   rm -f "$OUT/ncu27.ncu-rep"; } > "$log" 2>&1 ;; # carry build-gpu/s26, s27_2, s27_3, s27_4 (~38 MB); ~420 s.
   # Predicted (H100): wg1c 35.3 ms -> 2 of 8: ~31.5-32.5 (MUFU 66 -> 50 ex2 a warp a stage, +128 issue);
   # 3 of 8: ~31-32.5 (or worse than 2 if issue binds); 4 of 8: no better than 3
63) { S=build-gpu/s26
   echo "== the sage step's kernels (colstats predicted 1.98 -> ~0.3-0.4 ms a call; no v slice)"
   timeout 170 dev/sage_op_kernels.sh $S $S/plans/h3_full_l2_sage.plan 2>&1 | grep -E "ncu|sage|slice|norm_rope"
   echo "== run_all.sh sage (test_gpu_ops' sage cases, the bench, the 3-step plans: sage vs flash, fused vs unfused bitwise)"
   timeout 400 tests/gpu/run_all.sh $S "$OUT/sage" sage 2>&1 | grep -E "rc=|sage_att|sage fp8|bitwise|FAIL|nmse"
   rm -f "$OUT"/sage/*.safetensors; } > "$log" 2>&1 ;; # carry build-gpu/s26 (built 2026-12-06 at the
   # session's last product commit, with the l2 and s3 sage plans); ~350 s
58) { O=build-gpu/s24l N=build-gpu/s25
   echo "== test_gpu_ops (s25)"; H3_KERNEL_CACHE_DIR=$(cd $N/kcache && pwd) \
     timeout 200 $N/bin/test_gpu_ops models 2>&1 | grep -E "sage|nvfp4|norm_rope|FAIL|passed"
   for r in 1 2; do for d in $O $N; do echo "== attention_bench --sage, ${d##*/}, round $r"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 100 $d/bin/attention_bench --sage --iters 10 \
       --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"; done; done
   for d in $O $N; do echo "== nvfp4_bench, ${d##*/}"; H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) \
     timeout 60 $d/bin/nvfp4_bench --rows 1,8 --no-skinny --no-lm-head --warm-seconds 0.2; done
   echo "== nvfp4_lab"; timeout 150 build-gpu/lab/nvfp4_lab
   } > "$log" 2>&1 ;; # carry build-gpu/s24l, build-gpu/s25 (HEAD: dev/mini_stage.sh build-gpu/s18 build-gpu/s25
   # --composite $T), build-gpu/lab/nvfp4_lab; ~400 s. Predicted (H100): wg1c 37.3 -> 33-35 ms (1.4-1.45 x flash:
   # dev/sage-attention.md, session 25), the NVFP4 skinny form at M = 1 3-15 % faster (the lab's skv<1,1>)
59) { echo "== samples (s25): the composite and the bf16 sample with Sage alone, against the bf16 flash sample"
   timeout 580 tests/gpu/run_all.sh build-gpu/s25 "$OUT/samples" sagesol sagesample 2>&1 | grep -E "rc=|speed-up|PSNR|rel L2"
   rm -f "$OUT"/samples/*.safetensors; } > "$log" 2>&1 ;; # carry build-gpu/s25; ~520 s. Predicted (H100):
   # composite ~3.85-3.9 x (57.2 s: the Sage steps' attention ~10 % faster); Sage alone at 1.4 x flash
   # attention, 54 % of a bf16 block: ~1.18 x (issue 20 asks 1.2 x)
57) { O=build-gpu/s24old L=build-gpu/s24l
   echo "== test_gpu_ops (s24l)"; H3_KERNEL_CACHE_DIR=$(cd $L/kcache && pwd) \
     timeout 120 $L/bin/test_gpu_ops models 2>&1 | grep -E "sage_att|FAIL|passed"
   for d in $O $L $O $L; do echo "== attention_bench --sage, ${d##*/}"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 45 $d/bin/attention_bench --sage --iters 5 \
       --warm-seconds 0.2 2>&1 | grep -E "^(attention_flash|sage)"; done
   echo "== pipe_rates"; timeout 30 build-gpu/lab/pipe_rates
   } > "$log" 2>&1 ;; # call 56 cut again (the last ~300 s of a budget): carry build-gpu/s24old, build-gpu/s24l,
   # build-gpu/lab/pipe_rates (dev/pipe_rates.cu: is I2FP on the XU pipe with MUFU.EX2?)
56) { O=build-gpu/s24old L=build-gpu/s24l
   echo "== test_gpu_ops (s24l)"; H3_KERNEL_CACHE_DIR=$(cd $L/kcache && pwd) \
     timeout 150 $L/bin/test_gpu_ops models 2>&1 | grep -E "sage_att|FAIL|passed"
   for r in 1 2; do for d in $O $L; do echo "== attention_bench --sage, ${d##*/}, round $r"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 70 $d/bin/attention_bench --sage --iters 10 \
       --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"; done; done
   } > "$log" 2>&1 ;; # call 54 cut to what a short budget allows: carry build-gpu/s24old, build-gpu/s24l; ~300 s
55) { echo "== composite (s24l: the 128-key softmax, l from the tensor cores)"
   timeout 560 tests/gpu/run_all.sh build-gpu/s24l "$OUT/sagesol" sagesol 2>&1 | grep -E "rc=|speed-up|PSNR|rel L2"
   rm -f "$OUT"/sagesol/*.safetensors; } > "$log" 2>&1 ;; # carry build-gpu/s24l; ~450 s. Predicted on the
   # H200 (H100 of 2026-12-06: 60.6 s against 220.0, 3.63 x): the Sage steps (10 of 20 real steps' trunk, the
   # dense_backend's 2 blocks of the rest) ~15 % faster in attention: ~57-58 s, ~3.8 x
54) { N=build-gpu/s24new O=build-gpu/s24old L=build-gpu/s24l
   echo "== test_gpu_ops (s24l: the 128-key softmax, l by the tensor cores)"; H3_KERNEL_CACHE_DIR=$(cd $L/kcache && pwd) \
     timeout 150 $L/bin/test_gpu_ops models 2>&1 | grep -E "sage_att|FAIL|passed"
   for r in 1 2; do for d in $O $N $L; do echo "== attention_bench --sage, ${d##*/}, round $r"
     H3_KERNEL_CACHE_DIR=$(cd $d/kcache && pwd) timeout 100 $d/bin/attention_bench --sage --iters 10 \
       --warm-seconds 0.5 2>&1 | grep -E "^(attention_flash|sage)"; done; done
   echo "== nvfp4_lab (52)"; timeout 150 build-gpu/lab/nvfp4_lab
   } > "$log" 2>&1 ;; # carry build-gpu/s24old (the 64-key softmax), build-gpu/s24new (128-key), build-gpu/s24l
   # (and l as P times ones), build-gpu/lab/nvfp4_lab; ~500 s at most. Predicted (H100 figures of 2026-12-06: wg1c
   # 39.4 ms by ncu, 42.5 by the bench): s24new's wg1c ~0.87 x s24old's (SASS: ~10.1 instructions a score against
   # ~11.5), s24l's ~0.82 x (~9.4), ~1.35 x flash
53) { export H3_KERNEL_CACHE_DIR; H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
   "$S/bin/h3c" compile models/minimax_h3.g --config full --set layers=2 --disable-pass attention-v-view \
     -o /tmp/acc.plan && timeout 200 "$S/bin/h3exec" /tmp/acc.plan --graph step --backend cuda --weights random \
     --seed 5 --dump-ops attention+operands --dump /tmp/qkv.safetensors | tail -3
   echo "== Sage on the model's q, k, v against the fp32 reference (issue 20: cosine >= 0.999, rel L1 <= 0.03)"
   timeout 200 "$S/bin/attention_bench" --qkv /tmp/qkv.safetensors --sage --accuracy --iters 3 --warm-seconds 0.2
   rm -f /tmp/qkv.safetensors /tmp/acc.plan; } > "$log" 2>&1 ;; # a stage with h3c, h3exec, attention_bench
   # (e.g. --composite's); ~250 s. Issue 20's accuracy item, not measured before on the model's tensors
   # (NMSE vs flash 1e-3 on random inputs: predicted cosine ~0.9995, rel L1 ~0.02-0.03)
52) { timeout 300 build-gpu/lab/nvfp4_lab; } > "$log" 2>&1 ;; # carry build-gpu/lab/nvfp4_lab (2.4 MB;
   # nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include -I dev dev/nvfp4_lab.cu -lcublas -o build-gpu/lab/nvfp4_lab):
   # the skinny NVFP4 form against its variants (x one turn ahead, two accumulators, the copies of before
   # 2026-12-06; at 16 rows the skinny loop over two n-tiles), cuBLAS bf16 and the plain read, weights rotated
   # past the L2; ~150 s. Predictions in its header
51) { echo "== ncu: the NVFP4 skinny form's stall samples"; timeout 330 dev/nvfp4_ncu.sh "$S" "$OUT/nvfp4"
   echo "== ncu: Sage wg1c and flash, stall samples"; timeout 420 dev/sage_ncu.sh "$S" "$OUT/sage"
   } > "$log" 2>&1 ;; # the next session's first call (any card; a stage with nvfp4_bench and attention_bench,
   # e.g. build-gpu/s21c): where the two kernels' warps wait, by SASS line, before more code
   # (dev/nvfp4-gemm.md, dev/sage-attention.md). ~500 s at most
50) { echo "== decode A/B: unfused writes (s21/b), HEAD (s21: the lm_head streams), HEAD with cuBLASLt's lm_head"
   H3_AB_KCACHE=$S/kcache timeout 300 dev/m31_step_ab.sh "$OUT" 2 build-gpu/s21/b build-gpu/s21 \
     build-gpu/s21@H3_LINEAR_FORM=library
   echo "== stream_gemv (42)"; timeout 150 build-gpu/lab/stream_gemv
   } > "$log" 2>&1 ;; # call 47 without its test_gpu_ops (call 49 ran them): carry build-gpu/s21 (with b/),
   # build-gpu/lab/stream_gemv; ~420 s at most. Predicted on the H200: s21 1.62-1.64 ms, -5 to -15 us against
   # s21@library (the lm_head alone streamed), s21/b +15-30 us
49) { # ran 2026-12-06 on an H100 (dev/results/2026-12-06-h100-s23-*); the ring form lost and was removed
   export H3_KERNEL_CACHE_DIR; H3_KERNEL_CACHE_DIR=$(cd build-gpu/s21c/kcache && pwd); B=build-gpu/s21c/bin
   echo "== test_gpu_ops (s21c)"; timeout 150 $B/test_gpu_ops models 2>&1 | grep -E "linear_nvfp4|sol_att|stream|FAIL|passed"
   echo "== nvfp4_bench, the L2 emptied before every run"
   timeout 150 $B/nvfp4_bench --rows 1,8,16 --no-lm-head --warm-seconds 0.1 --iters 15
   echo "== nvfp4_bench --hot (back to back, as the earlier tables)"
   timeout 60 $B/nvfp4_bench --rows 1,16 --no-lm-head --no-skinny --hot --warm-seconds 0.1 --iters 15 | grep -v "^h3bench"
   echo "== attention_bench --sol"; timeout 110 $B/attention_bench --sol --iters 10 2>&1 | grep -E "^(attention_flash|sol|h3 sol)"
   echo "== ncu, the ring form at M = 1 and 16"
   H3_NVFP4_FORM=ring timeout 100 ncu --clock-control none --section SpeedOfLight --section Occupancy \
     --section WarpStateStats --section LaunchStats -k 'regex:h3cu_nvfp4_bf16_r' --launch-skip 2 --launch-count 4 \
     $B/nvfp4_bench --rows 1,16 --iters 1 --warm-seconds 0 --no-skinny --no-lm-head --hot 2>&1 |
     grep -E "^  h3cu|Duration|Memory Throughput|DRAM Throughput|Issue Slots|Achieved Occ|Registers Per|Grid Size|No Eligible|Warp Cycles Per Issued|Stall"
   } > "$log" 2>&1 ;; # carry build-gpu/s21c; ~420 s at most. Predicted, L2 emptied, ring vs cuBLASLt bf16:
   # M = 1: fc ~22 us (~2.8 x), o_proj ~11 (~3.5 x), gate_up ~28 (~2.8 x), down ~15 (~3.4 x); M = 16 fc ~25 us (~2.8 x);
   # the skinny form (default at M <= 8) cold 10-30 % slower than hot on o_proj / down (28 / 42 MB fit the L2)
44) { echo "== stream_gemv (42)"; timeout 150 build-gpu/lab/stream_gemv
   echo "== decode A/B, s21 against its stream form (43)"
   H3_AB_KCACHE=$S/kcache timeout 260 dev/m31_step_ab.sh "$OUT" 3 build-gpu/s21 build-gpu/s21@H3_LINEAR_FORM=stream
   echo "== attention_bench --sage (37's; s21c)"; H3_KERNEL_CACHE_DIR=$(cd build-gpu/s21c/kcache && pwd) \
     timeout 130 build-gpu/s21c/bin/attention_bench --sage --iters 10 2>&1 | grep -E "^(attention_flash|sage)"
   } > "$log" 2>&1 ;; # carry build-gpu/s21, build-gpu/s21c, build-gpu/lab/stream_gemv; ~540 s at most
40) { export H3_KERNEL_CACHE_DIR; H3_KERNEL_CACHE_DIR=$(cd "$S/kcache" && pwd)
   echo "== test_gpu_ops"; timeout 200 "$S/bin/test_gpu_ops" models 2>&1 | grep -E "rms_norm_rope_write|add_rms_norm|FAIL|passed"
   echo "== qkrope_gpu_write"; timeout 120 "$S/bin/qkrope_gpu_write_test" tests/qkrope/kernels/emu_write.ir 2>&1 | tail -3
   for d in "$S" "$S/b"; do # the fused plan and the unfused one: the same bytes out
     timeout 90 "$d/bin/h3exec" "$d/plans/m31_small_p2048_n16.plan" --backend cuda --weights random --seed 3 \
       --out "$OUT/tok_${d##*/}.safetensors" 2>&1 | tail -1
   done
   echo "== fused against unfused, bitwise"
   python3 tests/gpu/compare_outputs.py --bitwise "$OUT/tok_${S##*/}.safetensors" "$OUT/tok_b.safetensors"
   rm -f "$OUT"/tok_*.safetensors
   echo "== A: unfused (STAGE/b), B: fused (STAGE)"
   H3_AB_KCACHE=$S/kcache timeout 330 dev/m31_decode_ab.sh "$S/b" "$S" 3; } > "$log" 2>&1 ;;
*) echo "usage: dev/pending_device_calls.sh STAGE OUT 11..13, 15, 16, 18..44, 47..57" >&2; exit 2 ;;
esac
echo "call $CALL: rc $?"
tail -40 "$log"
