#!/usr/bin/env bash
# run_all.sh: the GPU session of the cuda backend in one command that builds nothing
# (tests/gpu/stage.sh staged the binaries, plans and kernel cache beforehand).
#   tests/gpu/run_all.sh STAGE LOG_DIR [SECTION...]
# Sections (default: all but `sample`, in this order, about 4 minutes; the 49-step sample
# takes a call of its own under the 10-minute limit: "bench block peers sample", about 6.5
# minutes on the H200):
#   env    nvidia-smi, the shared libraries the binaries resolve (a missing one is fatal)
#   tests  gpu_compile_check, test_gpu_ops (every op and fused group vs the CPU reference,
#          GPU random weights; then again with every GEMM tuned, H3_GEMM_TUNE_MIN_FLOPS=0),
#          test_gpu_model (tiny H3 step / sample vs cpu, CUDA graphs, exact tier vs unfused,
#          bitwise), test_gpu_int8 (linear_int8 vs the CPU, bitwise)
#   m31    h3exec on the tiny M3.1 plan, cuda and cpu: the generated tokens compared; cuda
#          with side-streams' branches on the main stream and without CUDA graphs: bitwise
#          the same outputs; then
#          test_gpu_m31 (the small config on cuda: verify rows vs DECODE, chunked prefill,
#          scrambled pages, MSA == dense below 2048)
#   collectives  test_gpu_collectives (each collective at one rank through NCCL vs the CPU,
#          bitwise); h3exec --backend cuda --gpus 1 (the rank processes, NCCL id and
#          communicator) bitwise the plain cuda run; with 2 GPUs (nvidia-smi -L), tiny H3 and
#          tiny M3.1 compiled for 2 ranks on cuda --gpus 2 against cpu --gpus 2 (NMSE, tokens)
#   m31small  h3exec on the small M3.1 plan (prompt 128, 32 new tokens) on cuda, and its
#          decode graph timed alone (the report's latency is the time per decode step)
#   m31smallcpu  the same 32 tokens on the CPU backend, compared with m31small's (run after it)
#   m31decode  bench/m31_decode.sh: the decode step at a 2048-token context (small config)
#   m31batch  the same for 64 sequences at once (generate_batch, 256-token prompts)
#   m31long   64 sequences at a 2048-token context, and one sequence at 16384
#   m31long16k  64 sequences at a 16384-token context (64 prefills of 16384 tokens per run)
#   m31tokens tests/gpu/m31_token_margins.py: the small plan's 256 greedy tokens on cuda scored by
#          the CPU backend (one teacher-forced extend per prompt), the top-2 margin where
#          they part (3 prompts; minutes of CPU time)
#   m31peer   bench/m31_peer.py: the PyTorch peer of the small model (about 2.5 minutes)
#   m31serve  bench/m31_serve.sh: serving 2048-token prompts, 256 new tokens, at concurrency
#          64, 1, 8, 32, h3 and the PyTorch peer on the same requests (LOG_DIR/serve/)
#   m31spec   bench/m31_spec.sh: speculative serving (DSpark) against plain decoding at
#          concurrency 1, 8, 64: the real acceptance and forced ones (bench only), tokens
#          checked against plain decoding by the margin rule
#   m31spec128 the same at concurrency 1 and 64 with the full model's 128 experts
#   m31specfp4 the same at concurrency 1 and 64 with the NVFP4 draft
#   m31specmma the same at concurrency 8 and 64 (real and forced 4) with the Markov head's
#             steps on CUDA cores (H3_MARKOV_FORM=fp32; tensor cores, the default from 8
#             sequences, in m31spec)
#   nvfp4  bench/nvfp4_bench.c: the draft's NVFP4 GEMM against cuBLASLt bf16 at M = 1 .. 576
#          and the skinny bf16 kernel (H3_LINEAR_FORM=skinny) at M <= 16, lm_head at M = 1
#   m31servecheck  tests/gpu/serve_check.py: on cuda, requests served alone by the same server
#          equal them inside a batch of 64 (bitwise); a one-row plan by the margin rule
#   faults tests/gpu/cuda_faults.py: injected launch failures, kernel faults and allocation
#          failures on cuda are reported with the op / kernel named, exit 1, no output
#   tiny   h3exec on the tiny plan: cuda with each attention implementation, and cpu;
#          outputs compared (NMSE); the small --int8 plan (weights quantized on the GPU at
#          load) on cuda vs cpu (NMSE), and its row chunks vs H3_INT8_MAX_ROWS=0 on cuda (bitwise);
#          the --quality high plans (Cache-DiT: the step graph holds a branch, run op by op,
#          its callees captured): threshold 0 on cuda equals the lossless plan on cuda
#          (bitwise, also with the CUDA graphs off), the defaults on cuda vs cpu (NMSE)
#   sage   sage_attention on cuda (issue 20): test_gpu_ops (its sage_attention cases: pv fp8
#          and bf16 at head_dim 128, and 1500 rows, against the CPU, NMSE <= 1e-6, each through
#          each form of the kernel, H3_SAGE_FORM=mma, wg1 and wg1c; the coverage line
#          `sage_attention bf16 24/1`: 8 cases x 3 forms compared, all_ops.ir's head_dim-16 case
#          reported unsupported), then attention_bench --sage: flash, sage fp8 (mma.sync), sage
#          fp8_wg1, fp8_wg1c (the default) and sage bf16 at S = 32704 (live 32700), 56 x
#          128; lines `sage fp8: N.NNx flash ... ok` (issue 20 asks >= 1.5x); then
#          h3exec on the full-dimension plan with --attention sage (3 steps) and with flash, the
#          latents compared (NMSE <= 1e-2: a sanity bound on random weights, not a quality claim);
#          and the sage plan without sage-q-fusion and attention-v-view (q quantized by the
#          attention's pre-pass, v copied out of qkv): the same latents bit for bit, so the fused
#          q norm kernel's codes and the in-place v reads are checked on the GPU
#   sol    sol_attention on cuda: test_gpu_ops (its sol_attention cases at head_dim 128: segments
#          + GQA at tau 1, thresh exact with sinks on 1500 rows, tau -inf; against the CPU,
#          NMSE <= 2e-5; the coverage line `sol_attention bf16 3/1`: 3 compared, all_ops.ir's
#          head_dim-16 case reported unsupported), then attention_bench --sol: flash, then sol
#          (tau 1) at S = 32704 (live 32700), 56 x 128: `h3 sol: ... pairs exact (P %)` (the
#          exact-block density), `sol tau 1: N.NNx flash ... ok`, `sol tau -inf: ... ok` (every
#          block exact: within bf16's NMSE of flash); then h3exec on the full-dimension plan
#          with --attention sol,dense_steps=1 (3 steps: steps 1-2 sol on blocks 2-49) and with
#          flash, the latents compared (NMSE <= 1e-2: a sanity bound on random weights)
#   bench  attention_bench --check (flash / cudnn / reference at S = 32704, 56 x 128, and the
#          four block GEMMs), then the same shapes in PyTorch and the ratio table; then
#          bench/gemm_rounds.py: the four GEMMs, h3 and PyTorch in 4 alternating rounds, medians
#          (LOG_DIR/gemm_rounds.json: the GEMM rows of the tables of `peers` and `sample`)
#   full   h3exec on the full-dimension plan (3 steps; weights made on the GPU), cudnn and
#          flash attention, with the timing report; `full1` runs only the attention of the
#          full-dimension runs: $H3_ATTENTION, default flash (h3exec's default; also in
#          spectrum, cachedit, int8sample and sample)
#   block  bench/block_bench.c: one block at full dims (step with 3 layers minus step with 1,
#          CUDA events) with the per-op profile of the block (device timestamps, then synced
#          after each op), nvidia-smi dmon (power, clocks) alongside (the table of `peers`
#          takes its attention rows from the attention_bench log of `bench`); then the
#          block once more with cuDNN's attention
#   exact  the same block at --quality exact (the lossless block must be faster)
#   int8   the same block with --int8: the plan's row splitting, then every int8 GEMM in
#          chunks of 0 (never), 4096, 8192, 16384 rows (the per-op profile gives each
#          linear_int8's time per setting: docs/int8.md's table), and the relative error
#          of one block: `step` of the 1-layer plans, int8 vs bf16
#   cachedit  h3exec on the full 49-step sample at --quality high (Cache-DiT's defaults);
#          latents kept in LOG_DIR for `sample`'s comparison
#   int8sample  h3exec on the full 49-step sample with --int8 and Spectrum 11:5:1.0
#   int8full  h3exec on the full 49-step sample with --int8 alone
#   sagesol  issue 20's composite: the full 49-step sample with --int8, Sage->Sol attention
#          (steps 0-9 sage, then blocks 0-1 sage and 2-49 sol) and Spectrum 15:5:0.5 (20 real
#          steps), then the bf16 flash sample unless `sample`, `sagesol` or `sagesample` ran
#          before in this call (one flash sample a call); the
#          latents compared (rel L2, PSNR against the bf16 sample's peak) and the speed-up
#          (`sagesol speed-up: X x`, the two runs' wall times)
#   sagesample  issue 20's bf16 sample with Sage alone: the full 49-step sample with --attention
#          sage (bf16 otherwise), then the bf16 flash sample unless `sample` or `sagesol` ran
#          before in this call; the latents compared (rel L2, PSNR) and the speed-up
#          (`sage sample speed-up: X x`)
#   peers  bench/block_peers.py: PyTorch eager and torch.compile of the same block and SDPA
#          alone, the ratio table (LOG_DIR/block_table.txt, LOG_DIR/peers.json)
#   sample h3exec on the full 49-step sample (about 4 minutes), latents (kept in LOG_DIR)
#          checked finite and compared with those of spectrum, cachedit, int8sample and
#          int8full run before in the same call, then the table again with the sample's wall time against the
#          eager estimate (LOG_DIR/block_table.txt; PyTorch measured here unless `peers`
#          ran before in the same call)
# Besides the outputs named above, two files land in LOG_DIR (the device call returns at most
# 8): run_all.log, every step's full output under a header, and summary.txt (step, exit code,
# seconds), also printed last with each step's last lines. Exit code: the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: tests/gpu/run_all.sh STAGE LOG_DIR [env|tests|m31|m31small|m31smallcpu|m31decode|m31batch|m31long|m31long16k|m31tokens|m31peer|m31serve|m31spec|m31spec128|m31specfp4|m31specmma|nvfp4|m31servecheck|faults|tiny|sage|sol|bench|full|full1|spectrum|normmod|block|exact|int8|cachedit|int8sample|int8full|sagesol|sagesample|peers|sample ...]" >&2
  exit 2
fi
STAGE=$(cd "$1" && pwd)
LOG=$2
shift 2
SECTIONS=${*:-env tests tiny bench full block peers}
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
WORK=$(mktemp -d)
BIN=$STAGE/bin
PLANS=$STAGE/plans
export H3_KERNEL_CACHE_DIR=$STAGE/kcache
ATT=${H3_ATTENTION:-flash} # attention of the full-dimension runs (h3exec's default)
failures=0
: > "$LOG/summary.txt"
: > "$LOG/run_all.log"

step() { # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  printf '%-24s rc=%-4s %5ss\n' "$name" "$rc" "$dt" | tee -a "$LOG/summary.txt"
  tail -n 4 "$WORK/$name.log" | sed 's/^/    /'
  { printf '===== %s (rc %s, %ss): %s\n' "$name" "$rc" "$dt" "$*"; cat "$WORK/$name.log"; } >> "$LOG/run_all.log"
  [ "$rc" -ne 0 ] && failures=$((failures + 1))
  return 0
}

cuda_vs_cpu() { # cuda_vs_cpu NAME PLAN CPU_SECONDS [CUDA_ARGS...]: h3exec on cuda and on cpu
  # (random weights, seed 3; outputs $WORK/NAME_cuda|cpu.safetensors), compared (NMSE <= 1e-2)
  local name=$1 plan=$2 cpu_s=$3
  shift 3
  step "${name}_cuda" 120 "$BIN/h3exec" "$PLANS/$plan" --backend cuda "$@" --weights random --seed 3 \
    --out "$WORK/${name}_cuda.safetensors"
  step "${name}_cpu" "$cpu_s" "$BIN/h3exec" "$PLANS/$plan" --backend cpu --weights random --seed 3 \
    --out "$WORK/${name}_cpu.safetensors"
  step "${name}_compare" 60 python3 tests/gpu/compare_outputs.py "$WORK/${name}_cuda.safetensors" \
    "$WORK/${name}_cpu.safetensors" 1e-2
}

full_sample() { # the bf16 full-dimension 49-step sample (LOG/full_sample.safetensors), once a call
  [ -f "$WORK/full_sample.log" ] || step full_sample 420 "$BIN/h3exec" "$PLANS/h3_full.plan" --backend cuda \
    --attention "$ATT" --weights random --seed 3 --iterations 1 --out "$LOG/full_sample.safetensors"
}

sample_variant() { # sample_variant NAME LABEL: the 49-step plan h3_full_NAME against the bf16 flash
  # sample of the same call: latents (rel L2, PSNR) and `LABEL speed-up: X x` (median wall times)
  local name=$1 label=$2
  step "full_$name" 420 "$BIN/h3exec" "$PLANS/h3_full_$name.plan" --backend cuda --attention "$ATT" \
    --weights random --seed 3 --iterations 1 --out "$LOG/full_$name.safetensors"
  full_sample
  step "${name}_vs_full" 60 python3 tests/gpu/compare_outputs.py "$LOG/full_$name.safetensors" \
    "$LOG/full_sample.safetensors" 1e9
  awk -v label="$label" '/^  min / { for (i = 1; i < NF; i++) if ($i == "median") m[FILENAME] = $(i + 1) }
    END { a = m[ARGV[1]]; b = m[ARGV[2]]
      if (a > 0 && b > 0) printf "%s speed-up: %.2f x (%.1f ms vs %.1f ms, bf16 flash)\n", label, b / a, a, b }' \
    "$WORK/full_$name.log" "$WORK/full_sample.log" | tee -a "$LOG/summary.txt"
}

attention_variant() { # attention_variant NAME BENCH_LINES: sage_attention or sol_attention on
  # cuda (test_gpu_ops' cases), attention_bench --NAME, the full 3-step sample with
  # --attention NAME (plan h3_full_NAME_s3) against flash (NMSE <= 1e-2); test_gpu_ops and the flash
  # sample run once per call (a section before this one may have run them)
  local name=$1 lines=$2
  [ -f "$WORK/test_gpu_ops.log" ] || step test_gpu_ops 420 "$BIN/test_gpu_ops" models
  grep -E "${name}_attention|FAIL" "$WORK/test_gpu_ops.log" | head -20
  step "${name}_bench" 300 "$BIN/attention_bench" "--$name" --iters 10
  grep -E "$lines" "$WORK/${name}_bench.log"
  step "full_${name}_cuda" 280 "$BIN/h3exec" "$PLANS/h3_full_${name}_s3.plan" --backend cuda --weights random \
    --seed 3 --steps 3 --iterations 1 --out "$WORK/full_$name.safetensors"
  [ -f "$WORK/full_flash.safetensors" ] || step full_flash_cuda 280 "$BIN/h3exec" "$PLANS/h3_full_s3.plan" --backend cuda --attention flash \
    --weights random --seed 3 --steps 3 --iterations 1 --out "$WORK/full_flash.safetensors"
  step "full_${name}_vs_flash" 60 python3 tests/gpu/compare_outputs.py "$WORK/full_$name.safetensors" \
    "$WORK/full_flash.safetensors" 1e-2
}

for section in $SECTIONS; do
  case $section in
  env)
    step nvidia-smi 60 nvidia-smi
    step ldd 60 bash -c "ldd $BIN/h3exec $BIN/test_gpu_ops; ! ldd $BIN/h3exec $BIN/test_gpu_ops | grep -q 'not found'"
    ;;
  tests)
    step gpu_compile_check 120 "$BIN/gpu_compile_check"
    step test_gpu_ops 420 "$BIN/test_gpu_ops" models
    # every bias-free bf16 GEMM of the suite through the tuner: each algorithm it keeps (the
    # heuristic's candidates and their tile / cluster variants) is checked against the CPU
    step test_gpu_ops_tuned 420 env H3_GEMM_TUNE_MIN_FLOPS=0 "$BIN/test_gpu_ops" models
    step test_gpu_model 300 "$BIN/test_gpu_model" models
    step test_gpu_int8 420 "$BIN/test_gpu_int8"
    ;;
  m31)
    # M3.1 tiny on cuda (the hand kernels of runtime/cuda/cuda_m31.c) and on cpu: the tokens
    step m31_tiny_cuda 120 "$BIN/h3exec" "$PLANS/m31_tiny.plan" --backend cuda --weights random \
      --seed 3 --out "$WORK/m31_tiny_cuda.safetensors"
    step m31_tiny_cpu 120 "$BIN/h3exec" "$PLANS/m31_tiny.plan" --backend cpu --weights random \
      --seed 3 --out "$WORK/m31_tiny_cpu.safetensors"
    step m31_tiny_tokens 60 python3 tests/gpu/compare_outputs.py --tokens \
      "$WORK/m31_tiny_cuda.safetensors" "$WORK/m31_tiny_cpu.safetensors" 256
    # pass side-streams' branches on the second stream change no bit: the same run with
    # them on the main stream, and without CUDA graphs (op by op, fork / join as events)
    step m31_tiny_one_stream 120 env H3_SIDE_STREAM=0 "$BIN/h3exec" "$PLANS/m31_tiny.plan" \
      --backend cuda --weights random --seed 3 --out "$WORK/m31_tiny_one_stream.safetensors"
    step m31_tiny_side_same 60 python3 tests/gpu/compare_outputs.py \
      "$WORK/m31_tiny_cuda.safetensors" "$WORK/m31_tiny_one_stream.safetensors" 0
    step m31_tiny_no_graphs 120 env H3_CUDA_GRAPHS=0 "$BIN/h3exec" "$PLANS/m31_tiny.plan" \
      --backend cuda --weights random --seed 3 --out "$WORK/m31_tiny_no_graphs.safetensors"
    step m31_tiny_no_graphs_same 60 python3 tests/gpu/compare_outputs.py \
      "$WORK/m31_tiny_cuda.safetensors" "$WORK/m31_tiny_no_graphs.safetensors" 0
    for side in 1 0; do # one decode step's logits and caches, two streams and one
      step m31_tiny_decode_side$side 120 env H3_SIDE_STREAM=$side "$BIN/h3exec" \
        "$PLANS/m31_tiny.plan" --graph decode --backend cuda --weights random --seed 3 \
        --out "$WORK/m31_tiny_decode_side$side.safetensors"
    done
    step m31_tiny_decode_same 60 python3 tests/gpu/compare_outputs.py --bitwise \
      "$WORK/m31_tiny_decode_side1.safetensors" "$WORK/m31_tiny_decode_side0.safetensors"
    step test_gpu_m31 300 "$BIN/test_gpu_m31" models
    ;;
  collectives)
    # the NCCL side (docs/parallel.md): the collectives at one rank against the CPU; the rank
    # processes at --gpus 1 (launcher, NCCL id, communicator, teardown) bitwise the plain run;
    # with 2 GPUs, tiny H3 and M3.1 compiled for 2 ranks on cuda against the cpu's 2 thread ranks
    step test_gpu_collectives 120 "$BIN/test_gpu_collectives"
    step coll_plain 120 "$BIN/h3exec" "$PLANS/h3_tiny.plan" --backend cuda --weights random --seed 3 \
      --out "$WORK/coll_plain.safetensors"
    step coll_gpus1 120 "$BIN/h3exec" "$PLANS/h3_tiny.plan" --backend cuda --gpus 1 --weights random \
      --seed 3 --out "$WORK/coll_gpus1.safetensors"
    step coll_gpus1_same 60 python3 tests/gpu/compare_outputs.py "$WORK/coll_gpus1.safetensors" \
      "$WORK/coll_plain.safetensors" 0
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
      step coll_h3_g2_cuda 180 "$BIN/h3exec" "$PLANS/h3_tiny_g2.plan" --backend cuda --gpus 2 \
        --weights random --seed 3 --out "$WORK/coll_h3_g2_cuda.safetensors"
      step coll_h3_g2_cpu 300 "$BIN/h3exec" "$PLANS/h3_tiny_g2.plan" --backend cpu --gpus 2 \
        --weights random --seed 3 --out "$WORK/coll_h3_g2_cpu.safetensors"
      step coll_h3_g2_compare 60 python3 tests/gpu/compare_outputs.py "$WORK/coll_h3_g2_cuda.safetensors" \
        "$WORK/coll_h3_g2_cpu.safetensors" 1e-2
      step coll_m31_g2_cuda 180 "$BIN/h3exec" "$PLANS/m31_tiny_g2.plan" --backend cuda --gpus 2 \
        --weights random --seed 3 --out "$WORK/coll_m31_g2_cuda.safetensors"
      step coll_m31_g2_cpu 180 "$BIN/h3exec" "$PLANS/m31_tiny_g2.plan" --backend cpu --gpus 2 \
        --weights random --seed 3 --out "$WORK/coll_m31_g2_cpu.safetensors"
      step coll_m31_g2_tokens 60 python3 tests/gpu/compare_outputs.py --tokens \
        "$WORK/coll_m31_g2_cuda.safetensors" "$WORK/coll_m31_g2_cpu.safetensors" 256
    else
      echo "collectives: fewer than 2 GPUs: the 2-rank runs are skipped" | tee -a "$LOG/summary.txt"
    fi
    ;;
  m31small)
    # M3.1 at the small config (every real width, 4 layers, 32 experts; weights made on the
    # GPU): generate 32 tokens after a 128-token prompt, then the decode graph timed alone
    step m31_small_generate 300 "$BIN/h3exec" "$PLANS/m31_small_p128.plan" --backend cuda \
      --weights random --seed 3 --out "$WORK/m31_small.safetensors"
    step m31_small_decode 300 "$BIN/h3exec" "$PLANS/m31_small_p128.plan" --backend cuda \
      --weights random --seed 3 --graph decode --warmup 2 --iterations 10
    ;;
  m31smallcpu)
    # the small plan's 32 tokens on the CPU backend (16 threads), compared with m31small's
    step m31_small_cpu 600 "$BIN/h3exec" "$PLANS/m31_small_p128.plan" --backend cpu --threads 16 \
      --weights random --seed 3 --out "$WORK/m31_small_cpu.safetensors"
    step m31_small_tokens 60 python3 tests/gpu/compare_outputs.py --tokens \
      "$WORK/m31_small.safetensors" "$WORK/m31_small_cpu.safetensors" 200064
    ;;
  m31decode)
    # the decode step at a 2048-token context: generate 16 and 80 tokens after the prompt
    step m31_decode_p2048 580 bench/m31_decode.sh "$BIN/h3exec" "$PLANS/m31_small_p2048_n16.plan" 16 \
      "$PLANS/m31_small_p2048_n80.plan" 80 3
    ;;
  m31batch)
    # batched decode: 64 sequences of a 256-token prompt, 8 and 24 new tokens (generate_batch)
    step m31_decode_b64 580 bench/m31_decode.sh "$BIN/h3exec" "$PLANS/m31_small_b64_p256_n8.plan" 8 \
      "$PLANS/m31_small_b64_p256_n24.plan" 24 1 generate_batch
    ;;
  m31long)
    # the issue's contexts: 64 sequences at a 2048-token context (medians of 3: each run holds
    # 64 prefills of 2048 tokens, whose noise is spread over only 16 steps); one at 16384
    step m31_decode_b64_p2048 580 bench/m31_decode.sh "$BIN/h3exec" "$PLANS/m31_small_b64_p2048_n8.plan" 8 \
      "$PLANS/m31_small_b64_p2048_n24.plan" 24 3 generate_batch
    step m31_decode_p16384 580 bench/m31_decode.sh "$BIN/h3exec" "$PLANS/m31_small_p16384_n16.plan" 16 \
      "$PLANS/m31_small_p16384_n80.plan" 80 2
    ;;
  m31long16k)
    # 64 sequences at a 16384-token context (64 prefills of 16384 tokens per run)
    step m31_decode_b64_p16384 580 bench/m31_decode.sh "$BIN/h3exec" "$PLANS/m31_small_b64_p16384_n8.plan" 8 \
      "$PLANS/m31_small_b64_p16384_n24.plan" 24 1 generate_batch
    ;;
  m31tokens)
    # greedy tokens on cuda against the CPU backend (3 prompts of 128, 256 new tokens; the CPU
    # scores each cuda sequence in one teacher-forced extend): equal up to the first position
    # whose CPU top-2 logit margin is below 0.05; cuda scores the sequences too, both dumping
    # the routers (h3exec --dump-ops), so that a failing prompt names where the runs part
    step m31_token_margins 590 python3 tests/gpu/m31_token_margins.py "$BIN/h3c" "$BIN/h3exec" \
      models/minimax_m3_1.g "$PLANS/m31_small_p128_n256.plan" "$WORK/m31_tokens" \
      --set prompt_len=128 --set max_new_tokens=256 --compare-logits --dump-ops router_topk+operands
    ;;
  m31peer)
    # the PyTorch peer of the small model (bench/m31_peer.py): copy bandwidth, prefill 2048,
    # decode at batch 1 / 64 and contexts 2048 / 16384, with the bandwidth floors
    step m31_peer 420 env PYTHONUNBUFFERED=1 python3 -W ignore bench/m31_peer.py bench --iters 10
    ;;
  m31serve)
    # serving (bench/m31_serve.sh): random prompts of 2048 tokens, 256 new tokens each, at
    # concurrency 64, 1, 8 and 32; h3 and the PyTorch peer on the same request lists
    step m31_serve 590 env PYTHONUNBUFFERED=1 bench/m31_serve.sh "$STAGE" "$LOG/serve"
    ;;
  nvfp4)
    step nvfp4_bench 300 "$BIN/nvfp4_bench"
    ;;
  m31spec)
    step m31_spec 590 env PYTHONUNBUFFERED=1 bench/m31_spec.sh "$STAGE" "$LOG/spec"
    ;;
  m31specmma)
    # the Markov head's steps on CUDA cores (H3_MARKOV_FORM=fp32; tensor cores are the default
    # from 8 sequences), batch 8 and 64, the real acceptance and forced 4: against m31spec's
    step m31_spec_mma 590 env PYTHONUNBUFFERED=1 H3_MARKOV_FORM=fp32 M31_SPEC_ACCEPT=4 bench/m31_spec.sh \
      "$STAGE" "$LOG/specmma" 8 64
    ;;
  m31spec128)
    # the same with the full model's 128 experts (about 50 GB of weights), batch 1 and 64
    step m31_spec_128 590 env PYTHONUNBUFFERED=1 M31_SPEC_H3C="--set experts=128" bench/m31_spec.sh \
      "$STAGE" "$LOG/spec128" 1 64
    ;;
  m31specfp4)
    # the same with the NVFP4 draft (--draft-quant nvfp4), batch 1 and 64
    step m31_spec_nvfp4 590 env PYTHONUNBUFFERED=1 M31_SPEC_H3C="--draft-quant nvfp4" bench/m31_spec.sh \
      "$STAGE" "$LOG/specfp4" 1 64
    ;;
  m31servecheck)
    # serving on cuda: requests alone vs inside a batch of 64 (tests/gpu/serve_check.py)
    step m31_serve_check 420 python3 tests/gpu/serve_check.py "$BIN/h3exec" "$PLANS" "$LOG/serve_check"
    ;;
  faults)
    # test switches that fail a launch, fault a kernel (trap) or fail an allocation on cuda:
    # exit 1 with the op / kernel named, no output written (tests/gpu/cuda_faults.py)
    step cuda_faults 300 python3 tests/gpu/cuda_faults.py "$BIN/h3exec" "$PLANS/h3_tiny.plan" "$PLANS/m31_tiny.plan"
    ;;
  tiny)
    for att in cudnn flash reference; do
      step "tiny_cuda_$att" 120 "$BIN/h3exec" "$PLANS/h3_tiny.plan" --backend cuda --attention "$att" \
        --weights random --seed 3 --warmup 1 --iterations 3 --out "$WORK/tiny_cuda_$att.safetensors"
    done
    step tiny_cpu 300 "$BIN/h3exec" "$PLANS/h3_tiny.plan" --backend cpu --weights random --seed 3 \
      --out "$WORK/tiny_cpu.safetensors"
    for att in cudnn flash reference; do
      step "tiny_compare_$att" 60 python3 tests/gpu/compare_outputs.py "$WORK/tiny_cuda_$att.safetensors" \
        "$WORK/tiny_cpu.safetensors" 1e-2
    done
    step tiny_high0_cuda 120 "$BIN/h3exec" "$PLANS/h3_tiny_high0.plan" --backend cuda --attention cudnn \
      --weights random --seed 3 --warmup 1 --iterations 3 --out "$WORK/tiny_high0_cuda.safetensors"
    step tiny_high0_cuda_nograph 120 env H3_CUDA_GRAPHS=0 "$BIN/h3exec" "$PLANS/h3_tiny_high0.plan" \
      --backend cuda --attention cudnn --weights random --seed 3 \
      --out "$WORK/tiny_high0_cuda_nograph.safetensors"
    for v in high0_cuda high0_cuda_nograph; do
      step "tiny_${v}_bitwise" 60 python3 tests/gpu/compare_outputs.py "$WORK/tiny_$v.safetensors" \
        "$WORK/tiny_cuda_cudnn.safetensors" 0
    done
    cuda_vs_cpu tiny_high h3_tiny_high.plan 300 --attention cudnn --warmup 1 --iterations 3
    cuda_vs_cpu tiny_int8 h3_small_int8.plan 300 --warmup 1 --iterations 3
    step tiny_int8_cuda_unsplit 120 env H3_INT8_MAX_ROWS=0 "$BIN/h3exec" "$PLANS/h3_small_int8.plan" \
      --backend cuda --weights random --seed 3 --out "$WORK/tiny_int8_cuda_unsplit.safetensors"
    step tiny_int8_split_bitwise 60 python3 tests/gpu/compare_outputs.py "$WORK/tiny_int8_cuda.safetensors" \
      "$WORK/tiny_int8_cuda_unsplit.safetensors" 0
    # without rotation: the norm+modulate kernels write the int8 rows (int8-fuse-quant)
    cuda_vs_cpu tiny_int8r0 h3_small_int8_r0.plan 300
    ;;
  sage)
    attention_variant sage '^(attention_flash|sage)'
    step full_sage_unfused_cuda 280 "$BIN/h3exec" "$PLANS/h3_full_sage_s3_unfused.plan" --backend cuda \
      --weights random --seed 3 --steps 3 --iterations 1 --out "$WORK/full_sage_unfused.safetensors"
    step full_sage_fused_bitwise 60 python3 tests/gpu/compare_outputs.py --bitwise "$WORK/full_sage.safetensors" \
      "$WORK/full_sage_unfused.safetensors"
    ;;
  sol)
    attention_variant sol '^(attention_flash|sol|h3 sol)'
    ;;
  bench)
    step attention_bench 300 "$BIN/attention_bench" --check --iters 10
    step peers_table 300 python3 bench/peers_table.py "$WORK/attention_bench.log"
    cat "$WORK/peers_table.log"
    step gemm_rounds 300 python3 bench/gemm_rounds.py "$BIN/attention_bench" --out "$LOG/gemm_rounds.json"
    sed -n '/^== four block GEMMs/,$p' "$WORK/gemm_rounds.log"
    ;;
  full)
    for att in cudnn flash; do
      step "full_cuda_$att" 280 "$BIN/h3exec" "$PLANS/h3_full_s3.plan" --backend cuda --attention "$att" \
        --weights random --seed 3 --steps 3 --iterations 1
    done
    ;;
  full1)
    step full_cuda_$ATT 280 "$BIN/h3exec" "$PLANS/h3_full_s3.plan" --backend cuda --attention "$ATT" \
      --weights random --seed 3 --steps 3 --iterations 1 --out "$WORK/full_s3.safetensors"
    step full_s3_finite 60 python3 tests/gpu/compare_outputs.py --finite "$WORK/full_s3.safetensors"
    ;;
  spectrum)
    # tiny: the Spectrum program on cuda equals cpu; then full dims, 49 steps with the H3
    # recipe 11/5/1.0 and without Spectrum, for the speed-up and the latents' relative L2
    cuda_vs_cpu tiny_spec h3_tiny_spec.plan 120
    step full_spec 300 "$BIN/h3exec" "$PLANS/h3_full_spec.plan" --backend cuda --attention "$ATT" \
      --weights random --seed 3 --iterations 1 --out "$LOG/full_spec.safetensors"
    ;;
  normmod)
    step normmod_gpu 300 "$BIN/normmod_gpu_test" --iters 200
    ;;
  block)
    nvidia-smi dmon -s pc -d 1 > "$WORK/dmon.log" 2>&1 &
    dmon=$!
    step block_bench 240 "$BIN/block_bench" "$PLANS/h3_full_l1.plan" "$PLANS/h3_full_l3.plan" --iters 9 \
      --warmup 2 --profile 3
    step block_bench_sync_trace 240 "$BIN/block_bench" "$PLANS/h3_full_l1.plan" "$PLANS/h3_full_l3.plan" \
      --iters 3 --warmup 1 --profile 3 --sync-trace
    # the 3-layer plan profiled (its trunk loop runs 3 blocks back to back)
    step block_bench_l3_profile 240 "$BIN/block_bench" "$PLANS/h3_full_l3.plan" "$PLANS/h3_full_l1.plan" \
      --iters 3 --warmup 1 --profile 3
    # the same block with cuDNN's attention, for the comparison of the two
    step block_bench_cudnn 240 "$BIN/block_bench" "$PLANS/h3_full_l1.plan" "$PLANS/h3_full_l3.plan" \
      --iters 5 --warmup 1 --attention cudnn
    kill "$dmon" 2> /dev/null
    { echo "===== nvidia-smi dmon -s pc during block_bench"; cat "$WORK/dmon.log"; } >> "$LOG/run_all.log"
    ;;
  exact)
    step block_bench_exact 240 "$BIN/block_bench" "$PLANS/h3_full_exact_l1.plan" \
      "$PLANS/h3_full_exact_l3.plan" --iters 5 --warmup 2 --profile 3
    ;;
  int8)
    # one int8 block (weights quantized on the GPU at load) with its per-op profile, for the
    # plan's row-split defaults, then with every int8 GEMM in R-row chunks (0: never split)
    step block_bench_int8 240 "$BIN/block_bench" "$PLANS/h3_full_int8_l1.plan" \
      "$PLANS/h3_full_int8_l3.plan" --iters 5 --warmup 2 --profile 3
    for r in 0 4096 8192 16384; do
      step "block_bench_int8_rows$r" 240 "$BIN/block_bench" "$PLANS/h3_full_int8_r${r}_l1.plan" \
        "$PLANS/h3_full_int8_r${r}_l3.plan" --iters 3 --warmup 1 --profile 7
    done
    # one block's error: `step` of the 1-layer plans (embed, one block, final layer), int8 vs
    # bf16, same weights and inputs (nmse = relative L2 squared)
    for v in full_l1 full_int8_l1; do
      step "step_$v" 120 "$BIN/h3exec" "$PLANS/h3_$v.plan" --backend cuda --graph step --weights random \
        --seed 3 --iterations 1 --out "$WORK/step_$v.safetensors"
    done
    step int8_step_vs_bf16 60 python3 tests/gpu/compare_outputs.py "$WORK/step_full_int8_l1.safetensors" \
      "$WORK/step_full_l1.safetensors" 1e9
    ;;
  cachedit)
    step full_high 420 "$BIN/h3exec" "$PLANS/h3_full_high.plan" --backend cuda --attention "$ATT" \
      --weights random --seed 3 --iterations 1 --out "$LOG/full_high.safetensors"
    ;;
  int8sample)
    step full_int8_spec 300 "$BIN/h3exec" "$PLANS/h3_full_int8_spec.plan" --backend cuda --attention "$ATT" \
      --weights random --seed 3 --iterations 1 --out "$LOG/full_int8_spec.safetensors"
    ;;
  sagesol)
    sample_variant int8_sagesol_spec sagesol
    ;;
  sagesample)
    sample_variant sage "sage sample"
    ;;
  int8full)
    step full_int8 420 "$BIN/h3exec" "$PLANS/h3_full_int8.plan" --backend cuda --attention "$ATT" \
      --weights random --seed 3 --iterations 1 --out "$LOG/full_int8.safetensors"
    ;;
  peers)
    gemm_src=()
    [ -f "$LOG/gemm_rounds.json" ] && gemm_src=(--gemm-json "$LOG/gemm_rounds.json")
    step block_peers 300 python3 bench/block_peers.py $(ls "$WORK"/attention_bench.log "$WORK"/block_bench.log 2>/dev/null) \
      ${gemm_src[@]+"${gemm_src[@]}"} --out "$LOG/peers.json"
    sed -n '/^== one H3 block/,$p' "$WORK/block_peers.log" | tee "$LOG/block_table.txt"
    ;;
  sample)
    full_sample
    step full_sample_finite 60 python3 tests/gpu/compare_outputs.py --finite "$LOG/full_sample.safetensors"
    for v in spec high int8_spec int8; do # latents of the same call against these (nmse = rel L2 squared)
      [ -f "$LOG/full_$v.safetensors" ] || continue
      step "${v}_vs_full" 60 python3 tests/gpu/compare_outputs.py "$LOG/full_$v.safetensors" \
        "$LOG/full_sample.safetensors" 1e9
    done
    peers_src=()
    [ -f "$LOG/peers.json" ] && peers_src=(--torch-json "$LOG/peers.json")
    [ -f "$LOG/gemm_rounds.json" ] && peers_src+=(--gemm-json "$LOG/gemm_rounds.json")
    step sample_table 300 python3 bench/block_peers.py $(ls "$WORK"/attention_bench.log "$WORK"/block_bench.log 2>/dev/null) \
      ${peers_src[@]+"${peers_src[@]}"} --sample-log "$WORK/full_sample.log"
    sed -n '/^== one H3 block/,$p' "$WORK/sample_table.log" | tee "$LOG/block_table.txt"
    ;;
  *)
    echo "run_all.sh: unknown section '$section' (env tests tiny bench full full1 spectrum normmod block exact int8 cachedit int8sample int8full peers sample)" >&2
    failures=$((failures + 1))
    ;;
  esac
done
echo "== summary ($failures failed) =="
cat "$LOG/summary.txt"
rm -rf "$WORK"
exit "$failures"
