#!/usr/bin/env python3
"""tune_log_diff.py: where two cuBLASLt tunings of the same plan picked differently, and by how
much the picks' timed medians differ, from the stderr of two runs with H3_GEMM_TUNE_LOG=1 (lab).
    dev/tune_log_diff.py LOG_A LOG_B
Per GEMM key (shape, dtypes, alignment): each log's pick (the candidate with the least median)
and, from each log, the median of both picks; a pick that differs while the two medians lie
within a few percent in the same log is a coin toss, not a better algorithm."""
import re
import sys

LINE = re.compile(r"h3 gemm tune \(cuBLASLt \d+\): (.*): (?:candidate|variant) \d+ of \d+ \((.*)\): median ([0-9.]+) ms")


def medians(path):
    out = {}  # key -> {config: median ms}
    for line in open(path, errors="replace"):
        m = LINE.search(line)
        if m:
            out.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
    return out


a, b = medians(sys.argv[1]), medians(sys.argv[2])
same = 0
for key in sorted(set(a) & set(b)):
    pa = min(a[key], key=a[key].get)
    pb = min(b[key], key=b[key].get)
    if pa == pb:
        same += 1
        continue
    print(key)
    for name, p in (("A's pick", pa), ("B's pick", pb)):
        ta, tb = a[key].get(p), b[key].get(p)
        fa = f"{1e3 * ta:9.2f}" if ta is not None else "        -"
        fb = f"{1e3 * tb:9.2f}" if tb is not None else "        -"
        print(f"  {name}: {fa} us in A, {fb} us in B   ({p})")
print(f"{same} of {len(set(a) & set(b))} GEMMs picked the same; only in A: {len(set(a) - set(b))}, "
      f"only in B: {len(set(b) - set(a))}")
