#!/usr/bin/env bash
# run.sh: the main job. Sets up a fresh machine (scripts/setup.sh), builds h3, compiles both
# models at full size into plans (checking every kernel with NVRTC), then runs MiniMax-H3's
# 49-step sampler: at full size on the GPU when one is present, else the tiny config on the CPU.
#   scripts/run.sh            outputs in out/: *.plan, latents.safetensors, report on stderr
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
mkdir -p out
echo "== h3c compile (full configs) ==" >&2
build/h3c compile models/minimax_h3.g --config full --quality lossless -o out/h3.plan
build/h3c compile models/minimax_m3_1.g --config full --quality lossless -o out/m3_1.plan
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== h3exec: full H3 sample on the GPU ==" >&2
  build/h3exec out/h3.plan --backend cuda --weights random --seed 0 --out out/latents.safetensors
else
  echo "== no GPU: tiny H3 sample on the CPU ==" >&2
  build/h3c compile models/minimax_h3.g --config tiny -o out/h3-tiny.plan
  build/h3exec out/h3-tiny.plan --backend cpu --weights random --seed 0 --out out/latents.safetensors
fi
echo "run.sh: latents in out/latents.safetensors" >&2
