#!/usr/bin/env bash
# ncu_digest.sh: an Nsight Compute report's details and its stall hot spots, then the report
# removed (lab; not CI; the ncu scripts of dev/ end with it).
#   dev/ncu_digest.sh BASE N      (BASE.ncu-rep: `ncu ... -o BASE`)
# BASE.txt: every section's text; BASE_top.txt: per kernel the N SASS lines with the most warp-
# stall samples (dev/ncu_source_top.py); the report and the source page (tens of MB) removed.
set -uo pipefail
B=$1 N=$2
ncu --import "$B.ncu-rep" --print-summary none > "$B.txt" 2>&1
ncu --import "$B.ncu-rep" --page source --csv --print-source sass > "${B}_src.csv" 2>/dev/null
echo "source page: rc $?, $(wc -l < "${B}_src.csv") lines"
python3 "$(dirname "$0")/ncu_source_top.py" "${B}_src.csv" "$N" > "${B}_top.txt" 2>&1
rm -f "${B}_src.csv" "$B.ncu-rep"
