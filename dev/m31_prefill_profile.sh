#!/usr/bin/env bash
# m31_prefill_profile.sh: where one 2048-token prefill of MiniMax-M3.1 small spends its device
# time, per op kind, in the one-sequence plan and in the 64-sequence plan (lab; not CI). The
# batch plan's prefill_seq took 15.2 ms where the one-sequence plan's prefill took 13.2, with
# the same ops over larger caches: this says which ops differ.
#   dev/m31_prefill_profile.sh STAGE OUT
# For each plan: h3exec with CUDA graphs off and --profile (ops timed on the device), then the
# op events inside the last prefill_seq call of the trace, summed by kernel (generated kernels
# by name less their hash; library calls and deferred ops one row each; the trace's "control"
# events enclose the ops they ran).
set -uo pipefail
S=$1 OUT=$2
mkdir -p "$OUT"
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache
for p in m31_small_p2048_n16 m31_small_b64_p2048_n8; do
  prog=()
  [ "$p" != "${p#m31_small_b64}" ] && prog=(--graph generate_batch)
  H3_CUDA_GRAPHS=0 timeout 200 "$S/bin/h3exec" "$S/plans/$p.plan" --backend cuda --weights random --seed 3 \
    --warmup 1 --iterations 1 "${prog[@]}" --profile "$OUT/$p.json" > "$OUT/$p.txt" 2>&1
  echo "== $p: rc $?"
  python3 - "$OUT/$p.json" <<'EOF'
import json, re, sys
from collections import defaultdict
ev = json.load(open(sys.argv[1]))["traceEvents"]
calls = [e for e in ev if e.get("cat") == "control" and e["name"] == "prefill_seq"]
if not calls:
    sys.exit("no prefill_seq call in the trace")
c = calls[-1]
t0, t1 = c["ts"], c["ts"] + c["dur"]
per = defaultdict(lambda: [0, 0.0])
for e in ev:
    if e.get("cat") != "control" and t0 <= e["ts"] and e["ts"] + e["dur"] <= t1:
        name = re.sub(r"_[0-9a-f]{10}$", "", e["name"]) + " (" + e.get("cat", "") + ")"
        per[name][0] += 1
        per[name][1] += e["dur"] / 1000
print(f"prefill_seq call: {c['dur'] / 1000:.3f} ms ({len(calls)} calls in the trace, the last one)")
for name, (n, ms) in sorted(per.items(), key=lambda kv: -kv[1][1])[:40]:
    print(f"  {name:44s} {n:5d} {ms:9.3f} ms")
print(f"  {'(sum of all)':44s} {'':5s} {sum(v[1] for v in per.values()):9.3f} ms")
EOF
  rm -f "$OUT/$p.json"
done
# the prefill per op kind: h3exec's own per-op table (device times, graphs off) of the plan whose
# generate is the prefill alone (one new token)
if [ -f "$S/plans/m31_small_p2048_n1.plan" ]; then
  H3_CUDA_GRAPHS=0 timeout 120 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n1.plan" --backend cuda --weights random \
    --seed 3 --warmup 1 --iterations 3 --profile "$OUT/n1.json" > "$OUT/n1.txt" 2>&1
  echo "== the prefill per op kind (3 iterations): rc $?"
  sed -n '/^=== per-op profile/,/^  total/p' "$OUT/n1.txt"
  rm -f "$OUT/n1.json"
fi
# the prefill's grouped expert GEMMs under Nsight Compute: the first gate_up and down launches
# of the one-sequence plan (layer 1 of the first prefill: 2048 rows x 4 experts over 32)
timeout 200 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  -k "regex:^h3cu_moe_wgmma(_down)?$" --launch-count 2 \
  "$S/bin/h3exec" "$S/plans/m31_small_p2048_n16.plan" --backend cuda --weights random --seed 3 \
  --warmup 0 --iterations 1 > "$OUT/ncu_moe_prefill.txt" 2>&1
echo "== ncu moe prefill: rc $?, $(grep -c 'Section:' "$OUT/ncu_moe_prefill.txt") sections"
grep -E "h3cu_moe|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A|Registers Per|Achieved Occupancy|L2 Hit|DRAM Through" \
  "$OUT/ncu_moe_prefill.txt" | head -40
