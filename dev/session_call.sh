#!/usr/bin/env bash
# session_call.sh: one device call of several pending items (lab; dev/pending_device_calls.sh's
# call 90, then a batch-1 step of STAGE; 84 too where the card is an H200 and WITH_84=1).
#   dev/session_call.sh STAGE OUT
set -uo pipefail
S=$1 OUT=$2
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== $gpu"
dev/pending_device_calls.sh "$S" "$OUT" 90; cat "$OUT/call90.txt"
echo "== batch-1 step of $S (its tuning run untimed first), 2 rounds"
timeout 200 dev/m31_step_calls.sh 2 "$S"
case $gpu:${WITH_84:-0} in
*H200*:1) dev/pending_device_calls.sh "$S" "$OUT" 84; cat "$OUT/call84.txt" ;;
esac
