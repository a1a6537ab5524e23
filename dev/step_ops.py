#!/usr/bin/env python3
"""step_ops.py: what one call of a graph (e.g. the decode step) spends in each op, from an h3exec
--profile trace taken with CUDA graphs off (H3_CUDA_GRAPHS=0: every op its own device-timed event,
nested by time inside the call's "control" event) (lab).
    dev/step_ops.py TRACE.json [GRAPH]          (GRAPH: decode by default)
Prints, per op name (the kernel's name, or the op's), the launches a call, the median µs of one
launch and the µs a call, largest first, and the sum against the calls' median duration (the
difference: the host's launch gaps, absent inside a CUDA graph). Views (index, reshape, slice) run
no kernel: their time is the gap between their two device stamps, and a CUDA graph has no node
for them."""
import json
import statistics
import sys
from collections import defaultdict

trace = json.load(open(sys.argv[1]))["traceEvents"]
graph = sys.argv[2] if len(sys.argv) > 2 else "decode"
calls = sorted((e for e in trace if e.get("cat") == "control" and e["name"] == graph),
               key=lambda e: e["ts"])
if not calls:
    sys.exit(f"step_ops: no '{graph}' calls in {sys.argv[1]}")
ops = sorted((e for e in trace if e.get("cat") != "control"), key=lambda e: e["ts"])
per = defaultdict(list)  # name -> [durations of every launch inside a call]
i = 0
for c in calls:
    end = c["ts"] + c["dur"]
    while i < len(ops) and ops[i]["ts"] < c["ts"]:
        i += 1
    while i < len(ops) and ops[i]["ts"] < end:
        per[ops[i]["name"]].append(ops[i]["dur"])
        i += 1
n = len(calls)
rows = sorted(((sum(d) / n, k, len(d) / n, statistics.median(d)) for k, d in per.items()),
              reverse=True)
print(f"{graph}: {n} calls, median {statistics.median(c['dur'] for c in calls):.1f} us a call")
print(f"  {'op':44s} {'launches':>8s} {'us each':>8s} {'us/call':>8s}")
for us, k, cnt, med in rows:
    print(f"  {k[:44]:44s} {cnt:8.2f} {med:8.2f} {us:8.1f}")
print(f"  {'(sum)':44s} {sum(r[2] for r in rows):8.1f} {'':8s} {sum(r[0] for r in rows):8.1f}")
