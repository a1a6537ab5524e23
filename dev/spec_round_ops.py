#!/usr/bin/env python3
"""spec_round_ops.py: the per-op table of a step or round, from two h3exec --profile reports of
the same request served with CUDA graphs off: one with its new tokens (RUN) and one with a single
new token (BASE: the prefill and nothing after), RUN - BASE per op kind over RUN's rounds (lab).
    dev/spec_round_ops.py RUN.txt BASE.txt
RUN.txt / BASE.txt: h3exec's stdout (the "=== per-op profile" table; the serving report's
"rounds N" or "decode N steps" line gives the divisor)."""
import re
import sys


def table(path):
    ops, n, on = {}, None, False
    for line in open(path):
        m = re.match(r"(?:rounds|decode)\s+(\d+) (?:rounds|steps)", line)
        if m:
            n = int(m.group(1))
        if line.startswith("=== per-op profile"):
            on = True
            continue
        f = line.split()
        if on and len(f) == 4 and f[0] != "op":
            ops[f[0]] = (int(f[1]), float(f[2]))
    return ops, n


run, n = table(sys.argv[1])
base, _ = table(sys.argv[2])
rows = []
for k, (c, ms) in run.items():
    bc, bms = base.get(k, (0, 0.0))
    rows.append((ms - bms, k, c - bc))
rows.sort(reverse=True)
tot = sum(r[0] for r in rows)
print(f"per step / round ({n} of them): op, calls, ms, share")
for ms, k, c in rows:
    if c > 0:
        print(f"  {k:20s} {c / n:8.2f} {ms / n:9.4f} {100 * ms / tot:6.1f}%")
print(f"  {'total':20s} {'':8s} {tot / n:9.4f}")
