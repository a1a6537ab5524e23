#!/usr/bin/env bash
# m31_prefill_moe_forms.sh: the prefill moe GEMM kernels of each form under Nsight Compute
# (lab; not CI): the 6 grouped-GEMM launches of a 2048-token prefill (3 MoE layers x gate_up,
# down) with H3_MOE_GEMM=wgmma, =wgmma1 and =mma, kernel durations, and TFLOP/s of the
# layer's work.
#   dev/m31_prefill_moe_forms.sh STAGE OUT
set -uo pipefail
S=$1 OUT=$2
for m in wgmma wgmma1 mma; do
  H3_MOE_GEMM=$m timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    -k regex:'h3cu_moe_(wgmma|gemm)' --launch-count 6 "$S/bin/h3exec" "$S/plans/m31_small_p2048_n16.plan" \
    --backend cuda --weights random --seed 3 --warmup 0 --iterations 1 > "$OUT/moe_$m.csv" 2> "$OUT/moe_$m.err"
  echo "$m: ncu rc $?"
  python3 - "$OUT/moe_$m.csv" "$m" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
ns = [float(r["Metric Value"].replace(",", "")) for r in rows if r["Metric Name"] == "gpu__time_duration.sum"]
unit = rows[0]["Metric Unit"] if rows else "?"
scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3}.get(unit, 1e-9)
t = [x * scale for x in ns]
flop = 2 * 2048 * 4 * 6144 * 3072 * 3  # gate_up + down of one layer (T k H F x 3)
if t:
    per_layer = sum(t) / (len(t) / 2)
    print(f"  {sys.argv[2]}: {len(t)} launches, {[round(x * 1e3, 3) for x in t]} ms; "
          f"{per_layer * 1e3:.3f} ms per layer, {flop / per_layer / 1e12:.0f} TFLOP/s")
PY
done
