#!/usr/bin/env bash
# m31_serve.sh: serving MiniMax-M3.1 (small config, random weights) on the GPU, h3 against
# the PyTorch peer driven by the same request list (issue 18, item 5): the public sglang M3
# workload (random prompts, ISL 2048, OSL 256) at concurrency 64, and at 1, 8 and 32.
#   bench/m31_serve.sh STAGE OUT_DIR [CONCURRENCY...]        (default: 64 1 8 32)
# STAGE: tests/gpu/stage.sh's folder (bin/h3c, bin/h3exec, kcache/, and the plans
# plans/m31_small_serve_sC.plan, `--set seqs=C`: the decode step's rows; a missing one is
# compiled here, its kernels then by NVRTC on this machine). Per concurrency C: 2 C
# requests (at least 4), all arriving at once, made by bench/m31_serve_peer.py make-requests
# (seeded); h3exec --requests serves them (continuous batching, C rows) and writes
# OUT/h3_C.json (its report as JSON) and OUT/h3_C.results.jsonl, then again with
# --mixed-steps (OUT/h3mixed_C.*); the peer serves the same
# file (static batches of C) into OUT/peer_C.json. Last, bench/m31_serve_table.py prints the
# table. Both engines run one model: the peer's random weights written once by
# m31_serve_peer.py make-weights into M31_SERVE_WEIGHTS (default $TMPDIR/m31_small_weights.safetensors,
# 17 GiB, kept for later calls; M31_SERVE_WEIGHTS=random: each engine its own random weights).
# ISL / OSL / the number of requests: M31_SERVE_ISL, M31_SERVE_OSL, M31_SERVE_REQUESTS
# (a count, instead of 2 C). M31_SERVE_MIXED=0 skips the --mixed-steps runs.
# M31_SERVE_CHUNKS="R ...": also serve with --mixed-steps from a plan whose prefill chunks are
# R rows (`--set prompt_len=R`: a prompt in ceil(ISL / R) chunks, each carrying the running
# rows; plans/m31_small_serve_sC_kR.plan, else compiled here) into OUT/h3mixedkR_C.*.
# M31_SERVE_GROUPS="P ...": also serve from a plan that prefills P one-chunk prompts per call
# (`--set prefill_group=P`; plans/m31_small_serve_sC_gP.plan, else compiled here) into
# OUT/h3groupP_C.*.
# M31_SERVE_PEER_PREFILL=G: the peer prefills up to G sequences of one length at once
# (m31_serve_peer.py --prefill-batch G; default 1: one at a time).
# The peer's decode forms: M31_SERVE_PEER_FORMS (default: what bench/m31_peer_decode_check.py
# finds right and fastest on this device, e.g. "--attention sdpa --moe grouped"; the probe
# takes about a minute; "none" skips it: the peer's defaults).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/m31_serve.sh STAGE OUT_DIR [CONCURRENCY...]" >&2
  exit 2
fi
S=$(cd "$1" && pwd)
OUT=$2
shift 2
CS=${*:-64 1 8 32}
ISL=${M31_SERVE_ISL:-2048} OSL=${M31_SERVE_OSL:-256}
mkdir -p "$OUT"
export H3_KERNEL_CACHE_DIR=$S/kcache
here=$(cd "$(dirname "$0")" && pwd)
fail=0
W=${M31_SERVE_WEIGHTS:-${TMPDIR:-/tmp}/m31_small_weights.safetensors}
if [ "$W" = random ]; then
  h3w=(--weights random --seed 3) peerw=()
else
  [ -f "$W" ] || python3 "$here/m31_serve_peer.py" make-weights --out "$W" || fail=1
  h3w=(--weights "$W") peerw=(--weights "$W")
fi
forms=${M31_SERVE_PEER_FORMS:-}
if [ -z "$forms" ]; then
  echo "=== the peer's decode forms on this device (bench/m31_peer_decode_check.py)" >&2
  forms=$(python3 "$here/m31_peer_decode_check.py" 2> "$OUT/peer_probe.err" | tee "$OUT/peer_probe.txt" | tail -1)
  cat "$OUT/peer_probe.txt" >&2
  case $forms in
    --attention*) ;;
    *) echo "m31_serve.sh: no decode form of the peer is right on this device: its defaults, figures not valid" >&2
       forms='' fail=1 ;;
  esac
fi
[ "$forms" = none ] && forms=
for C in $CS; do
  n=${M31_SERVE_REQUESTS:-$((2 * C < 4 ? 4 : 2 * C))}
  req=$OUT/requests_c$C.jsonl
  python3 "$here/m31_serve_peer.py" make-requests --n "$n" --isl "$ISL" --osl "$OSL" --seed "$C" > "$req" || fail=1
  plan=$S/plans/m31_small_serve_s$C.plan
  if [ ! -f "$plan" ] || [ "$ISL" != 2048 ]; then
    plan=$OUT/m31_small_serve_s$C.plan
    "$S/bin/h3c" compile "$here/../models/minimax_m3_1.g" --config small --set seqs="$C" \
      --set prompt_len="$ISL" -o "$plan" || fail=1
  fi
  echo "=== h3, concurrency $C, $n requests (ISL $ISL, OSL $OSL)" >&2
  "$S/bin/h3exec" "$plan" --backend cuda "${h3w[@]}" --requests "$req" \
    --concurrency "$C" --out "$OUT/h3_$C.results.jsonl" --summary "$OUT/h3_$C.json" >&2 || fail=1
  if [ "${M31_SERVE_MIXED:-1}" != 0 ]; then
    echo "=== h3 with --mixed-steps, concurrency $C" >&2
    "$S/bin/h3exec" "$plan" --backend cuda "${h3w[@]}" --requests "$req" --mixed-steps \
      --concurrency "$C" --out "$OUT/h3mixed_$C.results.jsonl" --summary "$OUT/h3mixed_$C.json" >&2 || fail=1
  fi
  for R in ${M31_SERVE_CHUNKS:-}; do
    kplan=$S/plans/m31_small_serve_s${C}_k$R.plan
    if [ ! -f "$kplan" ]; then
      kplan=$OUT/m31_small_serve_s${C}_k$R.plan
      "$S/bin/h3c" compile "$here/../models/minimax_m3_1.g" --config small --set seqs="$C" \
        --set prompt_len="$R" -o "$kplan" || fail=1
    fi
    echo "=== h3 with --mixed-steps and chunks of $R rows, concurrency $C" >&2
    "$S/bin/h3exec" "$kplan" --backend cuda "${h3w[@]}" --requests "$req" --mixed-steps \
      --concurrency "$C" --out "$OUT/h3mixedk${R}_$C.results.jsonl" --summary "$OUT/h3mixedk${R}_$C.json" >&2 || fail=1
    [ "$kplan" = "$OUT/m31_small_serve_s${C}_k$R.plan" ] && rm -f "$kplan"
    cat "$OUT/h3mixedk${R}_$C.json" 2>/dev/null
  done
  for P in ${M31_SERVE_GROUPS:-}; do
    gplan=$S/plans/m31_small_serve_s${C}_g$P.plan
    if [ ! -f "$gplan" ] || [ "$ISL" != 2048 ]; then
      gplan=$OUT/m31_small_serve_s${C}_g$P.plan
      "$S/bin/h3c" compile "$here/../models/minimax_m3_1.g" --config small --set seqs="$C" \
        --set prompt_len="$ISL" --set prefill_group="$P" -o "$gplan" || fail=1
    fi
    echo "=== h3 with prefill groups of $P prompts, concurrency $C" >&2
    "$S/bin/h3exec" "$gplan" --backend cuda "${h3w[@]}" --requests "$req" \
      --concurrency "$C" --out "$OUT/h3group${P}_$C.results.jsonl" --summary "$OUT/h3group${P}_$C.json" >&2 || fail=1
    [ "$gplan" = "$OUT/m31_small_serve_s${C}_g$P.plan" ] && rm -f "$gplan"
    cat "$OUT/h3group${P}_$C.json" 2>/dev/null
  done
  echo "=== PyTorch peer, concurrency $C ${forms:+($forms)}" >&2
  # shellcheck disable=SC2086 # forms: the probe's flags, word-split on purpose
  python3 "$here/m31_serve_peer.py" serve --requests "$req" --concurrency "$C" --config small \
    --device cuda "${peerw[@]}" $forms --prefill-batch "${M31_SERVE_PEER_PREFILL:-1}" \
    --out "$OUT/peer_$C.results.jsonl" > "$OUT/peer_$C.json" || fail=1
  [ "$plan" = "$OUT/m31_small_serve_s$C.plan" ] && rm -f "$plan"
  cat "$OUT/h3_$C.json" "$OUT/h3mixed_$C.json" "$OUT/peer_$C.json" 2>/dev/null # the figures so far
done
echo "h3 prefill first (the default):"
python3 "$here/m31_serve_table.py" "$OUT"/h3_*.json "$OUT"/peer_*.json || fail=1
if [ "${M31_SERVE_MIXED:-1}" != 0 ]; then
  echo "h3 with --mixed-steps:"
  python3 "$here/m31_serve_table.py" "$OUT"/h3mixed_*.json "$OUT"/peer_*.json || fail=1
fi
for R in ${M31_SERVE_CHUNKS:-}; do
  echo "h3 with --mixed-steps, chunks of $R rows:"
  python3 "$here/m31_serve_table.py" "$OUT"/h3mixedk"${R}"_*.json "$OUT"/peer_*.json || fail=1
done
for P in ${M31_SERVE_GROUPS:-}; do
  echo "h3 with prefill groups of $P prompts:"
  python3 "$here/m31_serve_table.py" "$OUT"/h3group"${P}"_*.json "$OUT"/peer_*.json || fail=1
done
exit $fail
