#!/usr/bin/env python3
"""kernel_timeline.py: one CUDA graph's launches from dev/kernel_timeline.c's records (lab).

  dev/kernel_timeline.py OUT.tsv [--graph ID] [--skip N] [--all]

The graph: the one launched most often (or --graph). Its launches (one CUPTI correlation id
each) after the first N (default 3) give each node a median start offset from the launch's
first start, a median duration and its stream. Printed: the span of a launch (median), the
nodes in start order (--all; else only the critical path), and the critical path: from the
node that ends last, back through the node whose end lies closest before each node's start
(what it waited for; medians, so a node may seem to start up to TOL before the end of the one
it waited for), with the gap between them (launch latency and dependency wait).
"""
import argparse
import collections
import re
import statistics

TOL = 0.5  # us: a node may start this much before its predecessor's median end (medians jitter)


def kind_of(name):
    """A kernel's kind for the sums: codegen's names without their hash, cuBLASLt's by family."""
    if name.startswith("nvjet"):
        return "nvjet (cuBLASLt GEMM)"
    if "splitKreduce" in name:
        return "cuBLASLt split-K reduce"
    return re.sub(r"_[0-9a-f]{10}$", "", name)


def short(name, n=46):
    return name if len(name) <= n else name[: n - 1] + "~"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--graph", type=int)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    launches = collections.defaultdict(list)  # (graph, correlation) -> records
    for line in open(a.tsv):
        f = line.rstrip("\n").split("\t")
        if len(f) < 9 or f[4] == "0":
            continue
        kind, start, end, stream, graph, node, corr = f[0], int(f[1]), int(f[2]), f[3], int(f[4]), f[5], f[6]
        launches[(graph, corr)].append((start, end, stream, node, kind, f[8], f[7]))
    per_graph = collections.Counter(g for g, _ in launches)
    if not per_graph:
        raise SystemExit("no graph launches in " + a.tsv)
    g = a.graph if a.graph is not None else per_graph.most_common(1)[0][0]
    runs = [r for (gg, c), r in sorted(launches.items(), key=lambda kv: min(x[0] for x in kv[1])) if gg == g]
    runs = runs[a.skip:] if len(runs) > a.skip else runs
    nodes = collections.defaultdict(lambda: {"s": [], "e": [], "stream": None, "name": None})
    spans = []
    for r in runs:
        t0 = min(x[0] for x in r)
        spans.append((max(x[1] for x in r) - t0) / 1e3)
        for start, end, stream, node, kind, name, grid in r:
            d = nodes[node]
            d["s"].append((start - t0) / 1e3)
            d["e"].append((end - t0) / 1e3)
            d["stream"], d["name"] = stream, (name if kind == "K" else f"{name} ({grid} B)")
    table = []
    for node, d in nodes.items():
        s, e = statistics.median(d["s"]), statistics.median(d["e"])
        table.append({"node": node, "s": s, "e": e, "dur": statistics.median(
            [y - x for x, y in zip(d["s"], d["e"])]), "stream": d["stream"], "name": d["name"]})
    table.sort(key=lambda t: t["s"])
    streams = {}
    for t in table:
        streams.setdefault(t["stream"], len(streams))
    print(f"graph {g}: {len(runs)} launches measured ({per_graph[g]} in all), {len(table)} nodes, "
          f"span median {statistics.median(spans):.1f} us (min {min(spans):.1f})")
    if a.all:
        print(" start_us   end_us   dur_us  st  name")
        for t in table:
            print(f"{t['s']:9.1f} {t['e']:8.1f} {t['dur']:8.2f}  {streams[t['stream']]:2d}  {short(t['name'])}")
    # the critical path, backwards: each node's predecessor is the one ending latest before it starts
    path, cur = [], max(table, key=lambda t: t["e"])
    while cur:
        path.append(cur)
        before = [t for t in table if t["e"] <= cur["s"] + TOL and t is not cur]
        cur = max(before, key=lambda t: t["e"]) if before else None
    path.reverse()
    by_kind = collections.Counter()
    gaps = 0.0
    print("critical path (start order): start_us dur_us gap_before_us stream name")
    prev = None
    for t in path:
        gap = t["s"] - prev["e"] if prev else t["s"]
        gaps += gap
        by_kind[kind_of(t["name"])] += t["dur"]
        print(f"{t['s']:9.1f} {t['dur']:7.2f} {gap:6.2f}  {streams[t['stream']]:2d}  {short(t['name'])}")
        prev = t
    print(f"critical path: {len(path)} nodes, kernel time {sum(t['dur'] for t in path):.1f} us, "
          f"gaps {gaps:.1f} us")
    for k, v in by_kind.most_common():
        print(f"  {v:8.1f} us  {k}")


if __name__ == "__main__":
    main()
