#!/usr/bin/env python3
"""m31_ncu_summary.py: per-kernel table of the last decode steps of an ncu CSV (lab; not CI).
   dev/m31_ncu_summary.py b1_times.csv STEPS
   dev/m31_ncu_summary.py b1_times.csv prefill
A decode step ends with the argmax kernel; the launches of the last STEPS steps (between
the argmax launches) are grouped by kernel name: count per step, microseconds per step,
DRAM GB/s. With `prefill`: the launches up to the first argmax (the prompt's prefill), as
one "step"."""
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
prefill = sys.argv[2] == "prefill"
steps = 1 if prefill else int(sys.argv[2])
kern = collections.OrderedDict()
for r in rows:
    kid = r["ID"]
    k = kern.setdefault(kid, {"name": r["Kernel Name"], "grid": r.get("Grid Size", ""), "m": {}})
    v = r["Metric Value"].replace(",", "")
    k["m"][r["Metric Name"]] = (float(v), r["Metric Unit"])
ks = list(kern.values())
ends = [i for i, k in enumerate(ks) if "argmax" in k["name"]]
lo, hi = (0, ends[0] + 1) if prefill else (ends[-steps - 1] + 1, ends[-1] + 1)
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
def us(m):
    v, u = m
    return v / 1000.0 if u in ("ns", "nsecond") else v if u == "usecond" else v * 1000.0
def gb(m):
    v, u = m
    return v * {"byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1.0, "KB": 1e-6, "MB": 1e-3, "GB": 1.0}.get(u, 0)
for k in ks[lo:hi]:
    a = agg[k["name"].split("(")[0]]
    a[0] += 1
    a[1] += us(k["m"]["gpu__time_duration.sum"])
    a[2] += gb(k["m"]["dram__bytes_read.sum"])
tot = sum(a[1] for a in agg.values())
print(f"{hi - lo} launches in {steps} steps; {tot / steps:.1f} us of kernel time per step")
print(f"{'kernel':60s} {'n/step':>6s} {'us/step':>9s} {'GB/s':>7s}")
for name, a in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"{name[:60]:60s} {a[0] / steps:6.1f} {a[1] / steps:9.1f} {a[2] / (a[1] * 1e-6) if a[1] else 0:7.0f}")
