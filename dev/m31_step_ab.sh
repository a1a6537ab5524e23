#!/usr/bin/env bash
# m31_step_ab.sh: the M3.1 decode step's device time of several builds / plans in one call,
# alternating, with one h3exec run per measurement (lab; not CI): the lighter form of
# dev/m31_decode_ab.sh (which runs bench/m31_decode.sh's six runs per measurement, ~60 s).
#   dev/m31_step_ab.sh OUT ROUNDS DIR[@VAR=VALUE,...]...
# (DIR@VAR=VALUE: that build with those variables set, e.g. DIR@H3_LINEAR_FORM=stream; a form
# that sums in another order may part from the first DIR's tokens at a near-tie)
# DIR: bin/h3exec, plans/m31_small_p2048_n80.plan (optionally m31_small_b64_p2048_n24.plan),
# kcache/ (a DIR without one uses H3_AB_KCACHE's: dev/mini_stage.sh's STAGE/b). Per round and DIR: generate's 80 tokens with CUDA
# graphs and --profile, the median device time of the `decode` graph's calls (as
# bench/m31_decode.sh's "ms_step_call"); then one batch-64 run per DIR (decode_batch). Every
# DIR's tokens are compared byte for byte with the first DIR's (the builds must agree).
set -uo pipefail
OUT=$1 R=$2 BACKEND=${H3_AB_BACKEND:-cuda} # cpu: a check of the script with tiny plans
shift 2
med() { # med TRACE GRAPH: median ms of GRAPH's calls and their count
  python3 -c 'import json, statistics, sys
ev = [e["dur"] / 1000 for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "control" and e["name"] == sys.argv[2]]
print(f"{statistics.median(ev):.4f} ms ({len(ev)} calls)" if ev else "no calls")' "$1" "$2" 2>/dev/null || echo "no trace"
}
kc() { if [ -d "$1/kcache" ]; then (cd "$1/kcache" && pwd); else (cd "$H3_AB_KCACHE" && pwd); fi; }
envs() { case $1 in *@*) echo "${1#*@}" | tr ',' ' ' ;; esac; } # DIR@A=1,B=2: A=1 B=2
one() { # one DIR[@VAR=VALUE,...] PLAN GRAPH TAG [h3exec args]
  local d=${1%%@*} e plan=$2 graph=$3 tag=$4
  e=$(envs "$1")
  shift 4
  # shellcheck disable=SC2086 # the assignments are words
  env $e H3_KERNEL_CACHE_DIR="$(kc "$d")" timeout 60 "$d/bin/h3exec" "$d/plans/$plan" \
    --backend "$BACKEND" --weights random --seed 3 --warmup 1 --iterations 1 --profile "$OUT/p.json" "$@" \
    > "$OUT/run.txt" 2>&1
  local rc=$?
  echo "$tag $d${e:+ ($e)}: rc $rc $graph $(med "$OUT/p.json" "$graph")"
  [ $rc = 0 ] || tail -3 "$OUT/run.txt"
  rm -f "$OUT/p.json"
}
for r in $(seq 1 "$R"); do
  for d in "$@"; do one "$d" m31_small_p2048_n80.plan decode "b1 round $r"; done
done
i=0
for a in "$@"; do # then the tokens (one run each)
  d=${a%%@*}
  # shellcheck disable=SC2046 # the assignments are words
  env $(envs "$a") H3_KERNEL_CACHE_DIR="$(kc "$d")" timeout 60 "$d/bin/h3exec" \
    "$d/plans/m31_small_p2048_n80.plan" --backend "$BACKEND" --weights random --seed 3 --out "$OUT/tok$i.safetensors" \
    > /dev/null 2>&1 || echo "tokens of $a: h3exec failed"
  [ $i -gt 0 ] && echo "tokens $a against $1: $(python3 tests/gpu/compare_outputs.py --bitwise "$OUT/tok$i.safetensors" \
    "$OUT/tok0.safetensors" 2>&1 | tail -1)"
  i=$((i + 1))
done
rm -f "$OUT"/tok*.safetensors
for a in "$@"; do
  [ -f "${a%%@*}/plans/m31_small_b64_p2048_n24.plan" ] && one "$a" m31_small_b64_p2048_n24.plan decode_batch b64 --graph generate_batch
done
rm -f "$OUT/run.txt"
