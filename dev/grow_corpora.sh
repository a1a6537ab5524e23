#!/usr/bin/env bash
# grow_corpora.sh: runs each libFuzzer target for SECONDS from its seed corpus, then adds to that
# corpus only the inputs that reach edges it did not (set-cover merge, hit counts ignored: a few
# dozen files a target instead of hundreds). Needs scripts/test.sh's fuzz build (build-fuzz).
#   dev/grow_corpora.sh [SECONDS]      (default 170; two targets at a time)
# Afterwards: ctest -R fuzz_corpus in build (the corpus drivers run every file) and `git add
# tests/*/corpus`. A crash stops the script with the target's log; fix it before adding anything.
set -euo pipefail
T=${1:-170}
B=build-fuzz/tests
W=$(mktemp -d)
targets=(frontend:$B/frontend/fuzz_frontend ir:$B/ir/fuzz_ir_parse plan:$B/plan/fuzz_plan_read
         io:$B/io/fuzz_safetensors serve:$B/serve/fuzz_requests)
grow() { # grow NAME BIN: SECONDS of fuzzing into W/NAME from tests/NAME/corpus
  mkdir -p "$W/$1"
  "$2" -max_total_time="$T" -rss_limit_mb=2048 "$W/$1" "tests/$1/corpus" > "$W/$1.log" 2>&1 ||
    { echo "grow_corpora.sh: $1 failed:" >&2; tail -30 "$W/$1.log" >&2; exit 1; }
}
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do grow "${t%%:*}" "${t#*:}" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done # set -e: a failed target ends the script
done
for t in "${targets[@]}"; do
  n=${t%%:*}
  "${t#*:}" -set_cover_merge=1 -use_counters=0 -rss_limit_mb=2048 "tests/$n/corpus" "$W/$n" > "$W/$n.merge" 2>&1
  echo "$n: $(grep -o 'MERGE-OUTER: [0-9]* new files' "$W/$n.merge")"
done
rm -rf "$W"
