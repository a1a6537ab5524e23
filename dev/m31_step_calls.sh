#!/usr/bin/env bash
# m31_step_calls.sh: the decode step's device time (median over the step graph's calls, CUDA
# graphs on, --profile) of several builds, alternating, one h3exec run each (lab; the short form
# of bench/m31_decode.sh's step 3, ~25 s a run instead of ~130 s for the whole script).
#   dev/m31_step_calls.sh ROUNDS DIR[:KCACHE] ...
# DIR: bin/h3exec and the plan. Batch 1 by default (plans/m31_small_p2048_n80.plan, graph decode);
# M31_STEP_BATCH=1 for 64 sequences (plans/m31_small_b64_p2048_n24.plan, program generate_batch,
# graph decode_batch). Give every build of an A/B one KCACHE: each kernel cache folder holds its
# own cuBLASLt tuning, which alone moved the batch-1 step by up to 0.1 ms (2026-12-06). A folder
# without tunings gets one untimed run first (the run that tunes).
set -uo pipefail
R=$1
shift
plan=m31_small_p2048_n80.plan graph=decode_next,decode prog=() # decode: plans of generate before decode_next
if [ "${M31_STEP_BATCH:-0}" = 1 ]; then
  plan=m31_small_b64_p2048_n24.plan graph=decode_batch prog=(--graph generate_batch)
fi
t=$(mktemp -d)
# A kernel cache folder without cuBLASLt tunings is tuned by the first run that reads it, and a run
# that tunes is no measurement (2026-12-06: 2.1340 ms in it, 2.0942 on its picks in the next run):
# one untimed run first for each folder that holds no tuning yet, and for each build after the
# first on a shared folder, whose plan may hold GEMM keys of its own (2026-12-07: an A/B whose
# builds differed in `beside` marks tuned the second build's keys in its round 1).
# M31_STEP_TUNE=all: an untimed run of every build (a folder tuned for another batch size).
seen=" "
for spec in "$@"; do
  d=${spec%%:*} kc=${spec#*:}
  [ "$kc" = "$spec" ] && kc=$d/kcache
  if [[ $seen != *" $kc "* && ${M31_STEP_TUNE:-} != all ]]; then
    seen+="$kc "
    compgen -G "$kc/lt-*.algo" > /dev/null && continue
  fi
  H3_KERNEL_CACHE_DIR=$(cd "$kc" && pwd) timeout 120 "$d/bin/h3exec" "$d/plans/$plan" "${prog[@]}" \
    --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > /dev/null 2>&1
done
for r in $(seq 1 "$R"); do
  for spec in "$@"; do
    d=${spec%%:*} kc=${spec#*:}
    [ "$kc" = "$spec" ] && kc=$d/kcache
    H3_KERNEL_CACHE_DIR=$(cd "$kc" && pwd) timeout 120 "$d/bin/h3exec" "$d/plans/$plan" "${prog[@]}" \
      --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 --profile "$t/p.json" > "$t/out.txt" 2>&1
    python3 -c 'import json, statistics, sys
tr = json.load(open(sys.argv[1]))["traceEvents"]
for g in sys.argv[4].split(","):
    ev = [e["dur"] / 1000 for e in tr if e.get("cat") == "control" and e["name"] == g]
    if ev: break
print(f"{sys.argv[2]} round {sys.argv[3]}: {g} {statistics.median(ev):.4f} ms ({len(ev)} calls)" if ev else sys.argv[2] + ": no step calls")' \
      "$t/p.json" "$d" "$r" "$graph" 2>/dev/null || { echo "$d: failed"; tail -3 "$t/out.txt"; }
    grep -E "^ +[0-9]+ [0-9]+ [0-9]+ " "$t/out.txt" | head -1 | cut -c1-80 | sed "s#^#$d tokens: #"
  done
done
rm -rf "$t"
