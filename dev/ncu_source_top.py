#!/usr/bin/env python3
"""ncu_source_top.py: the SASS lines with the most warp-stall samples, per kernel, from
`ncu --import REP --page source --csv --print-source sass` (lab; not CI; the full page of a few
kernels is tens of MB).
   dev/ncu_source_top.py SOURCE.csv [N]      (N lines per kernel, default 40)
The page repeats a header per kernel; a kernel's lines are ranked by the column whose name
starts with "Warp Stall Sampling (All" and printed with their address, SASS and that count."""
import csv, sys

n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
kernel, head, rows = None, None, []


def flush():
    if head is None or not rows:
        return
    col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    if col is None:
        print(f"{kernel}: no stall-sampling column in {head}")
        return
    total = sum(float(r[col] or 0) for r in rows)
    print(f"== {kernel}: {len(rows)} SASS lines, {total:.0f} stall samples")
    for r in sorted(rows, key=lambda r: -float(r[col] or 0))[:n]:
        print(f"  {float(r[col] or 0):8.0f} {100 * float(r[col] or 0) / max(total, 1):5.1f}%  " + "  ".join(r[:2]))


for rec in csv.reader(open(sys.argv[1], newline="")):
    if len(rec) == 1 and rec[0].startswith("Kernel"):
        flush()
        kernel, head, rows = rec[0], None, []
    elif rec and rec[0] in ("Address", "# Address"):
        flush()
        head, rows = rec, []
    elif head is not None and len(rec) == len(head):
        rows.append(rec)
flush()
