#!/usr/bin/env bash
# m31_prefill_threads.sh: one prompt's prefill logits (small config, prompt 128) on cuda and on
# the CPU backend at two thread counts (lab; not CI): whether the CPU is the same at any thread
# count, and how far cuda's logits are from the CPU's (NMSE, top-2 of each).
#   dev/m31_prefill_threads.sh STAGE OUT [PROMPT_INDEX]   (prompt i of m31_token_margins.py's draws)
set -uo pipefail
S=$1 OUT=$2 I=${3:-1}
PLAN=$S/plans/m31_small_p128_n256.plan
python3 - "$OUT/in.safetensors" "$I" <<'PY'
import sys, numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(1)
for i in range(int(sys.argv[2]) + 1):
    p = rng.integers(0, 200064, size=128, dtype=np.int64)
save_file({"tokens": p.astype(np.int32), "pos0": np.zeros((), np.int32)}, sys.argv[1])
PY
run() { "$S/bin/h3exec" "$PLAN" --graph prefill --inputs "$OUT/in.safetensors" --weights random --seed 3 \
  --out "$OUT/$1.safetensors" "${@:2}" > "$OUT/$1.log" 2>&1; echo "$1: rc $? $(grep -m1 'min ' "$OUT/$1.log")"; }
run cuda --backend cuda
run cpu16 --backend cpu --threads 16
run cpu3 --backend cpu --threads 3
python3 - "$OUT" <<'PY'
import sys, numpy as np
from safetensors.numpy import load_file
o = sys.argv[1]
L = {k: load_file(f"{o}/{k}.safetensors")["logits"].ravel().astype(np.float64) for k in ("cuda", "cpu16", "cpu3")}
print("cpu16 == cpu3 bitwise:", bool((L["cpu16"] == L["cpu3"]).all()))
for k in ("cuda", "cpu3"):
    d = L[k] - L["cpu16"]
    print(f"{k} vs cpu16: nmse {(d ** 2).sum() / (L['cpu16'] ** 2).sum():.3g}, max |diff| {np.abs(d).max():.3g}")
for k, v in L.items():
    t = np.argsort(v)[-3:][::-1]
    print(k, "top-3", t.tolist(), [round(x, 4) for x in v[t]])
PY
