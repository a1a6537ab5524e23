#!/usr/bin/env bash
# m31_spec.sh: speculative serving (DSpark) against plain decoding on the GPU (issue 19, item 4),
# h3 against itself on one request list per batch size: the measured speed-up curve over the
# acceptance length. Per concurrency C: C requests (random prompts of M31_SPEC_ISL tokens,
# M31_SPEC_OSL new tokens, all at once, greedy) served plainly (h3exec --requests: its results
# are the oracle), then with --speculative dspark at the acceptance each round really has
# (random weights: about 1) and at forced acceptance lengths A (the BENCH-ONLY
# --spec-force-accept A:plain results, M31_SPEC_ACCEPT, default "2 4 6 gamma+1"); each run's
# tokens are compared with the plain run's (bench/m31_serve_compare.py: leading tokens that
# agree). bench/m31_spec_table.py prints decode-phase tokens/s, ms per step or round and the
# speed-up. Outputs: OUT/plain_C.*, OUT/spec_C_A.* (A = "real" for the unforced run).
#   bench/m31_spec.sh STAGE OUT_DIR [CONCURRENCY...]      (default: 1 8 64)
# STAGE: tests/gpu/stage.sh's folder; the plans plans/m31_small_serve_sC.plan (compiled here
# when missing, or with M31_SPEC_H3C="OPTIONS" as more h3c compile options: `--set
# experts=128` gives the full model's expert count, about 50 GB of weights; `--draft-quant
# bf16` the bf16 draft instead of the default NVFP4 one). Weights: random (--seed 3), the same for every run. M31_SPEC_CONFIG=tiny and
# M31_SPEC_BACKEND=cpu (with a small ISL) try the script without a GPU. M31_SPEC_PROFILE=1 adds,
# per concurrency, an unforced speculative run with every op timed (OUT/profile_spec_C.txt).
# M31_SPEC_FLOOR=1 adds the bandwidth floor of each run (bench/m31_floor.py: the card's copy rate
# once, OUT/copy.json, PyTorch needed) from the experts its moe calls touched: each run again
# with h3exec --moe-stats (no CUDA graphs; OUT/moe_C_A.txt, A = plain for plain decoding), and
# m31_spec_table.py's second table (the measured step or round against its floor, the draft's
# share of both); M31_SPEC_GBPS=G takes G GB/s as the copy rate instead (to try it without a GPU).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/m31_spec.sh STAGE OUT_DIR [CONCURRENCY...]" >&2
  exit 2
fi
S=$(cd "$1" && pwd)
OUT=$2
shift 2
CS=${*:-1 8 64}
ISL=${M31_SPEC_ISL:-2048} OSL=${M31_SPEC_OSL:-128}
CONFIG=${M31_SPEC_CONFIG:-small} BACKEND=${M31_SPEC_BACKEND:-cuda}
read -r -a SETS <<< "${M31_SPEC_H3C:-}" # more h3c compile options (--set experts=128, --draft-quant bf16)
mkdir -p "$OUT"
export H3_KERNEL_CACHE_DIR=$S/kcache
here=$(cd "$(dirname "$0")" && pwd)
# gamma and the vocabulary of the config (its block in the .g)
cfg() { sed -n "/^config $CONFIG {/,/^}/s/.*\b$1 = \([0-9]*\).*/\1/p" "$here/../models/minimax_m3_1.g"; }
gamma=$(cfg gamma) vocab=$(cfg vocab)
AS=${M31_SPEC_ACCEPT:-$(for a in 2 4 6; do [ "$a" -le "$gamma" ] && echo "$a"; done) $((gamma + 1))}
fail=0
floor=${M31_SPEC_FLOOR:-}
if [ -n "$floor" ]; then # the copy rate the floors divide by, and what the table needs to count bytes
  if [ -n "${M31_SPEC_GBPS:-}" ]; then echo "{\"gbps\": $M31_SPEC_GBPS}" > "$OUT/copy.json" # a given rate (no GPU)
  else python3 "$here/m31_floor.py" copy > "$OUT/copy.json" || { echo "m31_spec.sh: no copy rate: no floors" >&2; rm -f "$OUT/copy.json"; floor=; }
  fi
  python3 -c 'import json, sys; print(json.dumps(dict(config=sys.argv[1], isl=int(sys.argv[2]), osl=int(sys.argv[3]), h3c=sys.argv[4:])))' \
    "$CONFIG" "$ISL" "$OSL" "${SETS[@]}" > "$OUT/floor_args.json"
fi
# moe_stats TAG ARGS...: the run again with --moe-stats, its experts table kept (M31_SPEC_FLOOR)
moe_stats() {
  local tag=$1
  shift
  [ -n "$floor" ] || return 0
  "$@" --moe-stats > "$OUT/moe_$tag.run.txt" 2>&1 || { fail=1; tail -3 "$OUT/moe_$tag.run.txt" >&2; }
  sed -n '/^=== moe experts touched/,/^===/p' "$OUT/moe_$tag.run.txt" | grep -v '^=== [^m]' > "$OUT/moe_$tag.txt"
}
for C in $CS; do
  req=$OUT/requests_c$C.jsonl
  python3 "$here/m31_serve_peer.py" make-requests --n "$C" --isl "$ISL" --osl "$OSL" --vocab "$vocab" \
    --seed "$C" > "$req" || fail=1
  plan=$S/plans/m31_${CONFIG}_serve_s$C.plan
  if [ ! -f "$plan" ] || [ "$ISL" != 2048 ] || [ ${#SETS[@]} -gt 0 ]; then
    plan=$OUT/m31_${CONFIG}_serve_s$C.plan
    "$S/bin/h3c" compile "$here/../models/minimax_m3_1.g" --config "$CONFIG" --set seqs="$C" \
      --set prompt_len="$ISL" "${SETS[@]}" -o "$plan" || fail=1
  fi
  run=("$S/bin/h3exec" "$plan" --backend "$BACKEND" --weights random --seed 3 --requests "$req" --concurrency "$C")
  echo "=== plain decoding, concurrency $C ($C requests, ISL $ISL, OSL $OSL)" >&2
  "${run[@]}" --margins --out "$OUT/plain_$C.results.jsonl" --summary "$OUT/plain_$C.json" >&2 || fail=1
  moe_stats "${C}_plain" "${run[@]}"
  for A in real $AS; do
    force=()
    [ "$A" = real ] || force=(--spec-force-accept "$A:$OUT/plain_$C.results.jsonl")
    echo "=== speculative, concurrency $C, acceptance $A" >&2
    "${run[@]}" --speculative dspark "${force[@]}" --out "$OUT/spec_${C}_$A.results.jsonl" \
      --summary "$OUT/spec_${C}_$A.json" >&2 || fail=1
    python3 "$here/m31_serve_compare.py" "$OUT/plain_$C.results.jsonl" \
      "$OUT/spec_${C}_$A.results.jsonl" | sed -n "1s/^/C $C A $A: /p" >&2
    moe_stats "${C}_$A" "${run[@]}" --speculative dspark "${force[@]}"
  done
  if [ -n "${M31_SPEC_PROFILE:-}" ]; then
    # one more unforced speculative run with every op timed (no CUDA graphs, so slower than
    # the runs above): the per-op table by op kind, after the report
    echo "=== speculative, concurrency $C, acceptance real, per-op profile (CUDA graphs off)" >&2
    H3_CUDA_GRAPHS=0 "${run[@]}" --speculative dspark --profile "$OUT/profile_spec_$C.json" \
      > "$OUT/profile_spec_$C.txt" || fail=1
    sed -n '/^=== per-op profile/,/^===/p' "$OUT/profile_spec_$C.txt" | head -40 >&2
  fi
  [ "$plan" = "$OUT/m31_${CONFIG}_serve_s$C.plan" ] && rm -f "$plan"
done
python3 "$here/m31_spec_table.py" "$OUT" || fail=1
exit $fail
