#!/usr/bin/env bash
# m31_peer_cpu.sh: bench/m31_peer.py on the tiny M3.1 config on the CPU, where PyTorch is
# installed (exit 77, skipped, without it):
#   check  the peer's prefill logits and 32 greedy tokens against h3exec's (cpu backend) on
#          random weights: the peer's own verdict (bf16 tolerance, tokens equal);
#   bench  eager, one iteration: every measurement line is JSON, the decode floors are
#          bench/m31_floor.py's byte counts with the peer's expert rule (min(E, batch top_k)),
#          and they grow with the context and the batch.
#   tests/bench/m31_peer_cpu.sh H3C H3EXEC WORKDIR
set -euo pipefail
h3c=$1 h3exec=$2 work=$3
cd "$(dirname "$0")/../.."
python3 -c "import torch" 2> /dev/null || { echo "m31_peer_cpu: no PyTorch: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
"$h3c" compile models/minimax_m3_1.g --config tiny -o "$work/tiny.plan" > /dev/null
python3 -W ignore bench/m31_peer.py check --weights "$work/w.safetensors" --h3exec "$h3exec" \
  --plan "$work/tiny.plan" --config tiny 2>&1 | tail -1
out=$(python3 -W ignore bench/m31_peer.py bench --config tiny --device cpu --no-compile --iters 1 2> /dev/null)
printf '%s\n' "$out" | python3 -c '
import json, sys
sys.path.insert(0, "bench")
import m31_floor
c = m31_floor.config("tiny", [])
rows = [json.loads(l) for l in sys.stdin if l.strip()]
dec = [r for r in rows if r["name"] == "decode"]
assert [r["name"] for r in rows[:2]] == ["copy", "prefill"], rows[:2]
assert len(dec) == 4, dec
for r in dec:
    b = r["batch"]
    want = m31_floor.target_bytes(c, b, 1, r["context"], {b: min(c["experts"], b * c["top_k"])})[0]
    assert r["floor_bytes"] == want, (r, want)
    assert r["ms"] > 0 and 0 < r["floor_frac"], r
f = {(r["batch"], r["context"]): r["floor_bytes"] for r in dec}
assert f[(1, 16)] < f[(1, 128)] < f[(64, 128)] and f[(1, 16)] < f[(64, 16)], f
print("m31_peer_cpu: %d decode floors equal m31_floor.py'"'"'s counts" % len(dec))
'
