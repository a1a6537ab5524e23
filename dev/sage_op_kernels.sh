#!/usr/bin/env bash
# sage_op_kernels.sh: the duration of every kernel of one full-dimension step (2 layers) with
# --attention sage, by Nsight Compute's gpu__time_duration (lab; not CI): how sage_attention's
# ~40 ms a call (h3exec --profile, 2026-12-06) splits into its pre-passes (k's column stats,
# k's and v's quantization) and the attention kernel, beside the step's other kernels.
#   dev/sage_op_kernels.sh STAGE PLAN      (STAGE: dev/mini_stage.sh's, with bin/h3exec; PLAN:
#                                           e.g. STAGE/plans/h3_full_l2_sage.plan)
# Prints one line per kernel launch (name, duration in µs), then the totals per kernel name.
set -uo pipefail
S=$1 PLAN=$2
export H3_KERNEL_CACHE_DIR=$(cd "$S" && pwd)/kcache
export H3_GEMM_TUNE=0 # cuBLASLt's first heuristic: no tuning launches among the GEMM rows
tmp=$(mktemp -d)
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  "$S/bin/h3exec" "$PLAN" --graph step --backend cuda --weights random --seed 5 --iterations 1 \
  > "$tmp/raw.csv" 2> "$tmp/err.log"
echo "ncu: rc $?"
python3 - "$tmp/raw.csv" <<'PY'
import csv, sys, collections
lines = open(sys.argv[1]).read().splitlines()  # h3exec's own output comes first
at = [i for i, l in enumerate(lines) if l.startswith('"ID",')]
if not at:
    sys.exit("no ncu rows")
rows = list(csv.reader(lines[at[0]:]))
head = rows[0]
name_i = head.index("Kernel Name")
dur_i = head.index("gpu__time_duration.sum")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[rows[1][dur_i]]
tot = collections.OrderedDict()
for r in rows[2:]:  # rows[1]: the units
    try:
        us = float(r[dur_i].replace(",", "")) * scale
    except ValueError:
        continue
    n = r[name_i].split("(")[0]
    c, t = tot.get(n, (0, 0.0))
    tot[n] = (c + 1, t + us)
for n, (c, t) in sorted(tot.items(), key=lambda kv: -kv[1][1]):
    print(f"{t:12.1f} us {c:5d} launches  {n}")
PY
tail -3 "$tmp/err.log"
rm -rf "$tmp"
