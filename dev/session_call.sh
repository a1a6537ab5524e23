#!/usr/bin/env bash
# session_call.sh: several calls of dev/pending_device_calls.sh in one device call, each on its
# own stage, their logs printed in turn (lab).
#   dev/session_call.sh OUT STAGE:CALL [STAGE:CALL ...]
# e.g. dev/session_call.sh "$OUT" build-gpu/s43p:93 build-gpu/s43p:95   (~6 min)
set -uo pipefail
OUT=$1
shift
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for sc in "$@"; do
  st=${sc%%:*} call=${sc##*:}
  dev/pending_device_calls.sh "$st" "$OUT" "$call"
  cat "$OUT/call$call.txt"
done
