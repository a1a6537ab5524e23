#!/bin/sh
# parallel_cpu.sh H3C H3EXEC WORK: `h3c compile --gpus N` and `h3exec --backend cpu --gpus N`
# (docs/parallel.md) end to end on tiny MiniMax-H3 (4 heads, 64 packed rows), random weights,
# seed 5. Every N-rank run must be BITWISE the one-rank run: the rows of the block stack are
# split (row-local ops compute each row alone), attention runs per head on all rows (its
# per-head math is unchanged) and the collectives only move data. Checks:
#   - the 49-step sample at N = 2 and 4 == N = 1, and with --quality high (Cache-DiT: its
#     reuse decision reads the gathered residual, so every rank decides as one rank does),
#     --spectrum, --quality exact, --attention sage and --int8 (dim 256, so the linears are
#     int8) at N = 2;
#   - one block (layers = 1, graph step) at N = 2 and 4 == N = 1;
#   - the IR after sequence-parallel holds 4 all_to_all, 1 all_gather and 4 shard (the
#     report line), and the report of an N-rank run says N;
#   - M3.1 (tensor-parallel): generate's greedy tokens at N = 2 and 4 equal N = 1, the
#     all_reduces in the IR, moe over each rank's experts, the caches per rank;
#   - refused with a message and a hint: --gpus 3 (4 heads; at the attention's file:line:col),
#     M3.1 at --gpus 4 (2 kv heads), with 6 experts or at --quality exact (the all_reduce sums
#     in another order: not bitwise, the exact tier's promise), a 2-rank plan run without --gpus or with --gpus 4, a one-rank plan with
#     --gpus 2; nothing written by a refused run;
#   - --backend cuda --gpus 2 without a GPU: each rank process fails with its error, the
#     supervisor reports every rank's exit status, exit 1 at once.
set -u
h3c=$1 h3exec=$2 work=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" && cd "$work" || exit 1
rm -f ./*.safetensors
fail=0

# plan NAME FLAGS...: compile NAME.plan from tiny H3 (NAME.clog).
plan() {
  p_name=$1
  shift
  if ! "$h3c" compile "$src/models/minimax_h3.g" --config tiny --no-kernels "$@" \
      -o "$p_name.plan" >"$p_name.clog" 2>&1; then
    echo "FAIL: $p_name ($*) did not compile:" >&2
    cat "$p_name.clog" >&2
    fail=1
  fi
}

# run NAME N FLAGS...: run NAME.plan on N ranks (NAME.safetensors, NAME.log).
run() {
  r_name=$1 r_n=$2
  shift 2
  if ! "$h3exec" "$r_name.plan" --backend cpu --gpus "$r_n" --weights random --seed 5 \
      --out "$r_name.safetensors" "$@" >"$r_name.log" 2>&1; then
    echo "FAIL: $r_name did not run on $r_n ranks:" >&2
    cat "$r_name.log" >&2
    fail=1
  fi
}

# same A B WHY: the outputs of A and B are the same bytes.
same() {
  if ! cmp -s "$1.safetensors" "$2.safetensors"; then
    echo "FAIL: $1 != $2 bitwise: $3" >&2
    fail=1
  fi
}

# refused WHAT TEXT CMD...: CMD exits 1 and its stderr holds TEXT and a hint.
refused() {
  what=$1 text=$2
  shift 2
  "$@" >refused.out 2>refused.err
  rc=$?
  if [ $rc -ne 1 ] || ! grep -qF -- "$text" refused.err || ! grep -q "^hint: " refused.err; then
    echo "FAIL: $what: expected exit 1 with '$text' and a hint, got $rc:" >&2
    cat refused.err >&2
    fail=1
  fi
}

for n in 1 2 4; do
  plan sample$n --gpus $n
  run sample$n $n
  plan block$n --gpus $n --set layers=1
  run block$n $n --graph step
done
same sample1 sample2 "the sample on 2 ranks"
same sample1 sample4 "the sample on 4 ranks"
same block1 block2 "one block on 2 ranks"
same block1 block4 "one block on 4 ranks"

wide="--set dim=256 --set heads=16 --set time_hidden=256"
for v in "cachedit --quality high" "spectrum --spectrum" "exact --quality exact" \
         "sage --attention sage" "int8 --int8 $wide"; do
  # shellcheck disable=SC2086
  set -- $v
  name=$1
  shift
  plan ${name}1 "$@"
  plan ${name}2 --gpus 2 "$@"
  run ${name}1 1
  run ${name}2 2
  same ${name}1 ${name}2 "$* on 2 ranks"
done
if ! grep -q "cached: " cachedit2.log; then
  echo "FAIL: the Cache-DiT run cached no step, so it shows nothing about the decisions" >&2
  fail=1
fi

# M3.1 (pass tensor-parallel): greedy `generate` tokens at N = 2 (tiny: 2 kv heads) and at
# N = 4 (8 heads, 4 kv and index heads) equal N = 1. The all_reduced sums (o_proj, down_proj,
# the shared expert's down_proj, moe with its experts split) are added in another order than
# one rank's, so only their bf16 roundings are equal (docs/parallel.md); on this seed the
# tokens are the same.
m31_wide="--set heads=8 --set kv_heads=4 --set index_heads=4"
m31() {
  m_name=$1 m_n=$2
  shift 2
  if ! "$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels --gpus "$m_n" "$@" \
      -o "$m_name.plan" >"$m_name.clog" 2>&1; then
    echo "FAIL: $m_name ($*) did not compile:" >&2
    cat "$m_name.clog" >&2
    fail=1
  fi
  run "$m_name" "$m_n"
}
m31 m31_1 1
m31 m31_2 2
# shellcheck disable=SC2086
m31 m31w_1 1 $m31_wide
# shellcheck disable=SC2086
m31 m31w_4 4 $m31_wide
same m31_1 m31_2 "M3.1 generate's tokens on 2 ranks"
same m31w_1 m31w_4 "M3.1 (4 kv heads) generate's tokens on 4 ranks"
"$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels --gpus 2 \
  --print-ir-after=tensor-parallel -o m31ir.plan >/dev/null 2>m31ir.txt
# 12 graphs hold the layer stacks (a loop per kind of layer); per graph: the dense stack's
# o_proj and down_proj, the sparse stack's o_proj, shared expert down_proj and moe = 5; the 4
# that read each prompt's last row only (prefill_seq, serve_prefill, serve_prefill_group,
# serve_mixed) run the last layer in a stack of its own (last_stack): 3 more each
got=$(grep -c "= all_reduce(" m31ir.txt)
if [ "$got" != "72" ]; then
  echo "FAIL: the IR after tensor-parallel holds $got all_reduce, expected 72" >&2
  fail=1
fi
if ! grep -q "moe(.*ranks = 2" m31ir.txt || ! grep -q "graph @decode(.*%k_cache: bf16\[3, 35, 8, 1, 16\]" m31ir.txt; then
  echo "FAIL: tensor-parallel: no moe over 2 ranks' experts, or decode's cache not per rank" >&2
  fail=1
fi

# the collectives in the IR and the reports
"$h3c" compile "$src/models/minimax_h3.g" --config tiny --no-kernels --gpus 2 \
  --print-ir-after=sequence-parallel -o ir2.plan >/dev/null 2>ir2.txt
for want in "all_to_all 4" "all_gather 1" "shard 4"; do
  set -- $want
  got=$(grep -c "= $1(" ir2.txt)
  if [ "$got" != "$2" ]; then
    echo "FAIL: the IR after sequence-parallel holds $got $1, expected $2" >&2
    fail=1
  fi
done
if ! "$h3c" compile "$src/models/minimax_h3.g" --config tiny --no-kernels --gpus 2 \
    --report=sequence-parallel -o ir2.plan 2>&1 |
    grep -q "sequence-parallel: 2 ranks: 1 trunk loop split by rows; 4 all_to_all, 1 all_gather, 4 shard"; then
  echo "FAIL: no sequence-parallel report" >&2
  fail=1
fi
if ! grep -q "^  ranks            : 4 " sample4.log; then
  echo "FAIL: the report of a 4-rank run does not say 4 ranks" >&2
  fail=1
fi

# the block attention's line in the model file (the error points at its attention call)
at_line=$(grep -n "o = attention(q, k, v, scale = 1.0 / sqrt(head_dim), segments" "$src/models/minimax_h3.g" | head -1 | cut -d: -f1)
refused "--gpus 3" "minimax_h3.g:$at_line:7: error: sequence-parallel: attention has 4 query and 4 key heads" \
  "$h3c" compile "$src/models/minimax_h3.g" --config tiny --no-kernels --gpus 3 -o bad.plan
# the decode attention's line in the model file (the error points at its paged_attention call)
pa_line=$(grep -n "return paged_attention(q, kc, vc, pos, pt" "$src/models/minimax_m3_1.g" | head -1 | cut -d: -f1)
refused "M3.1 --gpus 4" "minimax_m3_1.g:$pa_line:10: error: tensor-parallel: attention has 4 query and 2 kv heads" \
  "$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels --gpus 4 -o bad.plan
refused "M3.1 --gpus 4, 6 experts" "tensor-parallel: moe has 6 experts" \
  "$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels --gpus 4 $m31_wide \
  --set experts=6 -o bad.plan
refused "M3.1 --gpus 2 --quality exact" "at --quality exact: tensor-parallel sums" \
  "$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels --gpus 2 --quality exact -o bad.plan
refused "2-rank plan, no --gpus" "the plan was compiled for 2 ranks (h3c compile --gpus 2), not 1" \
  "$h3exec" sample2.plan --backend cpu --out bad.safetensors
refused "2-rank plan, --gpus 4" "the plan was compiled for 2 ranks (h3c compile --gpus 2), not 4" \
  "$h3exec" sample2.plan --backend cpu --gpus 4 --out bad.safetensors
refused "1-rank plan, --gpus 2" "the plan was compiled for 1 rank" \
  "$h3exec" sample1.plan --backend cpu --gpus 2 --out bad.safetensors
# --backend cuda --gpus 2 forks two rank processes; without a GPU both fail at their backend
# and the supervisor reports them (at once: no rank waits for another). On a machine with a
# GPU this case is the GPU session's (tests/gpu/run_all.sh collectives).
refused "--backend cuda --gpus 2" "exited with status 1" \
  timeout 60 "$h3exec" sample2.plan --backend cuda --gpus 2 --out bad.safetensors
if grep -q "no usable GPU" refused.err; then
  for r in 0 1; do
    grep -q "^h3exec (rank $r): error: cuda: no usable GPU" refused.err ||
      { echo "FAIL: --backend cuda --gpus 2: no error of rank $r:" >&2; cat refused.err >&2; fail=1; }
  done
  # whichever rank ended first is the error; the other a note (it failed too, or was stopped)
  grep -q "^h3exec: error: --gpus 2: rank [01] exited with status 1$" refused.err &&
    grep -qE "^h3exec: note: --gpus 2: rank [01] (exited with status 1|was killed by signal 15 .*) after rank [01] failed" refused.err ||
    { echo "FAIL: --backend cuda --gpus 2: the ranks' ends not reported:" >&2; cat refused.err >&2; fail=1; }
fi
if [ -e bad.plan ] || [ -e bad.safetensors ]; then
  echo "FAIL: a refused run wrote its output" >&2
  fail=1
fi
[ $fail -eq 0 ] && echo "parallel_cpu: every N-rank run equal to the one-rank run; bad N refused"
exit $fail
