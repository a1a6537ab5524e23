#!/usr/bin/env python3
"""ncu_step_kernels.py: each kernel's GPU time per step, from two `ncu --metrics
gpu__time_duration.sum --csv` reports of the same request (lab): RUN with N more steps than BASE
(e.g. 9 new tokens against 1: the prefill cancels), (RUN - BASE) / N per kernel name, largest
first, and the sum: the step's kernel time without launch gaps.
    dev/ncu_step_kernels.py RUN.csv BASE.csv N"""
import collections
import csv
import sys


def kernels(path):
    t = collections.defaultdict(lambda: [0, 0.0])
    with open(path) as f:
        for r in csv.DictReader(line for line in f if line.startswith('"')):
            if r.get("Metric Name") == "gpu__time_duration.sum":
                k = t[r["Kernel Name"][:64]]
                k[0] += 1
                k[1] += float(r["Metric Value"].replace(",", "")) / 1e3  # ns -> us
    return t


run, base, n = kernels(sys.argv[1]), kernels(sys.argv[2]), float(sys.argv[3])
rows = []
for name, (c, us) in run.items():
    bc, bus = base.get(name, (0, 0.0))
    if c != bc:
        rows.append(((us - bus) / n, (c - bc) / n, name))
rows.sort(reverse=True)
print(f"{'us/step':>9} {'calls':>6}  kernel")
for us, c, name in rows:
    if abs(us) >= 0.5:
        print(f"{us:9.1f} {c:6.2f}  {name}")
print(f"{sum(r[0] for r in rows):9.1f}         sum (kernels whose count differs)")
