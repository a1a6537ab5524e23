#!/usr/bin/env bash
# m31_decode.sh: time per output token of MiniMax-M3.1 greedy decoding on the GPU, from two
# runs of a generate program (prefill, then one decode step per new token) that differ only
# in the number of new tokens: (t(long) - t(short)) / (n_long - n_short) is the decode step
# alone, at contexts between prompt + n_short and prompt + n_long. Random weights made on the
# GPU; wall-clock medians of h3exec's own report.
#   1. with CUDA graphs (each decode call captured once, then replayed): the time per token;
#   2. with CUDA graphs off and --profile (ops timed by device timestamps, back to back): the
#      same difference per op kind, i.e. what one decode step spends in each op, and the
#      step's time without graphs;
#   3. the long plan again with CUDA graphs and --profile: the device time of each call of the
#      step graph (decode_next / decode_batch) and of the prefill graph (prefill_seq),
#      medians over the measured iterations: the step and the prefill alone, free of the
#      other's noise (1's difference carries the prefills' run-to-run spread);
#   4. 3 again with H3_SIDE_STREAM=0 (pass side-streams' branches on the main stream, in the
#      plan's order): the step call's device time without the second stream, to compare.
#   bench/m31_decode.sh H3EXEC PLAN_SHORT N_SHORT PLAN_LONG N_LONG [ITERATIONS [PROGRAM]]
# PLAN_*: `h3c compile models/minimax_m3_1.g --config small --set prompt_len=P
# --set max_new_tokens=N` (and --set seqs=B for PROGRAM generate_batch: B sequences per
# step). PROGRAM: the plan's entry program (generate) by default. Prints the medians, the
# per-op table and JSON lines on stdout; the h3exec reports go to stderr. H3_BENCH_BACKEND=cpu
# runs it on the CPU backend (a check of the script with tiny plans).
set -euo pipefail
if [ $# -lt 5 ]; then
  echo "usage: bench/m31_decode.sh H3EXEC PLAN_SHORT N_SHORT PLAN_LONG N_LONG [ITERATIONS [PROGRAM]]" >&2
  exit 2
fi
exe=$1 short=$2 ns=$3 long=$4 nl=$5 it=${6:-3} prog=${7:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # run PLAN TAG [ENV...]: the h3exec report of PLAN into $tmp/TAG.txt (also to stderr)
  local plan=$1 tag=$2
  shift 2
  local args=(--backend "${H3_BENCH_BACKEND:-cuda}" --weights random --seed 3 --warmup 1 --iterations "$it")
  [ -n "$prog" ] && args+=(--graph "$prog")
  [ "$tag" != "${tag%prof}" ] && args+=(--profile "$tmp/$tag.json")
  env "$@" "$exe" "$plan" "${args[@]}" > "$tmp/$tag.txt"
  cat "$tmp/$tag.txt" >&2
}
median() { awk '/^  min / { for (i = 1; i < NF; i++) if ($i == "median") print $(i + 1) }' "$1"; }
run "$short" short
run "$long" long
run "$short" shortprof H3_CUDA_GRAPHS=0
run "$long" longprof H3_CUDA_GRAPHS=0
run "$long" longcallsprof
run "$long" onestreamprof H3_SIDE_STREAM=0
# median device ms of the calls of graph $2 in trace $1 (events of category "control")
calls() {
  python3 -c 'import json, statistics, sys
ev = [e["dur"] / 1000 for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "control" and e["name"] == sys.argv[2]]
print(f"{statistics.median(ev):.4f} {len(ev)}" if ev else "null 0")' "$1" "$2"
}
step_graph=decode_next prefill_graph=prefill_seq
[ "${prog:-generate}" = generate_batch ] && step_graph=decode_batch
read -r cs ncs <<< "$(calls "$tmp/longcallsprof.json" $step_graph)"
read -r cp ncp <<< "$(calls "$tmp/longcallsprof.json" $prefill_graph)"
read -r c1 nc1 <<< "$(calls "$tmp/onestreamprof.json" $step_graph)"
ts=$(median "$tmp/short.txt") tl=$(median "$tmp/long.txt")
ps=$(median "$tmp/shortprof.txt") pl=$(median "$tmp/longprof.txt")
[ -n "$ts" ] && [ -n "$tl" ] && [ -n "$ps" ] && [ -n "$pl" ] ||
  { echo "m31_decode: no timing in h3exec's report" >&2; exit 1; }
n=$((nl - ns))
echo "generate ${ns} tokens: ${ts} ms; ${nl} tokens: ${tl} ms (medians of $it, CUDA graphs)"
echo "without CUDA graphs, ops timed on the device: ${ps} ms; ${pl} ms"
echo "with CUDA graphs, device time of one call (medians): ${step_graph} ${cs} ms (${ncs} calls), ${prefill_graph} ${cp} ms (${ncp} calls)"
echo "the same on one stream (H3_SIDE_STREAM=0): ${step_graph} ${c1} ms (${nc1} calls)"
echo "decode step, device time per op kind (long - short run, per step, per iteration):"
# the per-op tables: "  op count total_ms pct"; totals are over all measured iterations
awk -v n="$n" -v it="$it" '
  /^=== per-op profile/ { on = 1; next }
  /^===/ { on = 0 }
  on && NF == 4 && $2 ~ /^[0-9]+$/ { t[FILENAME == ARGV[1] ? "s" : "l", $1] = $3; ops[$1] = 1 }
  END { for (o in ops) { d = (t["l", o] - t["s", o]) / it / n; if (d > 0.0005) printf "  %-22s %8.4f ms\n", o, d } }
  ' "$tmp/shortprof.txt" "$tmp/longprof.txt" | sort -k2 -n -r | awk '{ print; sum += $2 } END { printf "  %-22s %8.4f ms\n", "(sum)", sum }'
awk -v a="$ts" -v b="$tl" -v c="$ps" -v d="$pl" -v ns="$ns" -v nl="$nl" -v prog="${prog:-generate}" \
  -v cs="$cs" -v cp="$cp" -v c1="$c1" 'BEGIN {
  printf "{\"bench\": \"m31_decode\", \"program\": \"%s\", \"n_short\": %d, \"n_long\": %d, \"ms_short\": %.3f, \"ms_long\": %.3f, \"ms_per_step\": %.4f, \"ms_per_step_no_graphs\": %.4f, \"ms_step_call\": %s, \"ms_step_call_one_stream\": %s, \"ms_prefill_call\": %s}\n", prog, ns, nl, a, b, (b - a) / (nl - ns), (d - c) / (nl - ns), cs, c1, cp }'
