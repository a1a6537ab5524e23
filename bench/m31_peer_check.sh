#!/bin/sh
# m31_peer_check.sh: checks bench/m31_peer.py against h3's CPU executor on the tiny config:
# builds h3c and h3exec into build-peer/ (git-ignored), compiles models/minimax_m3_1.g --config
# tiny, writes random weights and runs `m31_peer.py check` (prefill last-row logits within
# bf16 tolerance, max_new_tokens greedy tokens equal). Needs python3 with torch (CPU is
# enough) and safetensors. Usage: bench/m31_peer_check.sh [SEED]; exit 0 when they agree.
set -eu
cd "$(dirname "$0")/.."
seed=${1:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake -S . -B build-peer -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-peer -j2 --target h3c h3exec >/dev/null
build-peer/h3c compile models/minimax_m3_1.g --config tiny -o "$tmp/m31_tiny.plan"
python3 -W ignore bench/m31_peer.py check --config tiny --seed "$seed" \
  --weights "$tmp/weights.safetensors" --plan "$tmp/m31_tiny.plan" --h3exec build-peer/h3exec
