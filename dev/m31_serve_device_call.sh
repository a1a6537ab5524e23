#!/usr/bin/env bash
# m31_serve_device_call.sh: one device call's serving comparison on a shared weights file:
# bench/m31_serve.sh at concurrency 64 (the peer's decode forms checked first), then at 8 when
# less than LIMIT/2 seconds have gone, each followed by bench/m31_serve_compare.py (h3 vs peer).
#   dev/m31_serve_device_call.sh STAGE OUT [LIMIT_SECONDS]     (on the GPU machine)
set -u
S=$1 OUT=$2 LIMIT=${3:-400}
export H3_KERNEL_CACHE_DIR=$S/kcache PYTHONUNBUFFERED=1 M31_SERVE_MIXED=${M31_SERVE_MIXED:-0}
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
timeout "$LIMIT" bash bench/m31_serve.sh "$S" "$OUT/c64" 64 > "$OUT/c64.txt" 2>&1
echo "concurrency 64: rc $? after $(( $(date +%s) - t0 )) s"
python3 bench/m31_serve_compare.py "$OUT/c64/h3_64.results.jsonl" "$OUT/c64/peer_64.results.jsonl"
left=$(( LIMIT - ($(date +%s) - t0) ))
if [ "$left" -gt $(( LIMIT / 2 )) ]; then
  forms=$(tail -1 "$OUT/c64/peer_probe.txt" 2>/dev/null)
  case $forms in --attention*) ;; *) forms=none ;; esac
  M31_SERVE_PEER_FORMS=$forms timeout "$left" bash bench/m31_serve.sh "$S" "$OUT/c8" 8 > "$OUT/c8.txt" 2>&1
  echo "concurrency 8: rc $? after $(( $(date +%s) - t0 )) s"
  python3 bench/m31_serve_compare.py "$OUT/c8/h3_8.results.jsonl" "$OUT/c8/peer_8.results.jsonl"
fi
rm -f "$OUT"/c*/*.plan "$OUT"/c*/requests_*.jsonl
for f in "$OUT"/c64.txt "$OUT"/c8.txt; do
  [ -f "$f" ] && grep -E "^(step|op|--attention|no form|===|\||h3 prefill|decode  |prefill  |m31_serve)" "$f"
done
