#!/usr/bin/env python3
"""m31_serve_compare.py: two engines' serving results of one request list on one weights file
(bench/m31_serve.sh's OUT/h3_C.results.jsonl and OUT/peer_C.results.jsonl): per request, how
many leading tokens agree; and each engine's token diversity (distinct sequences, distinct
tokens over the first 24 tokens), which sets how many experts a decode step reads.
    bench/m31_serve_compare.py A.results.jsonl B.results.jsonl"""
import json
import statistics
import sys


def load(p):
    return {str(r["id"]): r["tokens"] for r in map(json.loads, open(p))}


a, b = load(sys.argv[1]), load(sys.argv[2])
common = [i for i in a if i in b]
agree = []
for i in common:
    x, y = a[i], b[i]
    agree.append(next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y))))
print(f"{len(common)} requests: leading tokens that agree: median {statistics.median(agree) if agree else '-'}, "
      f"all agree in {sum(k == len(a[i]) for k, i in zip(agree, common))}")
for name, d in (("A", a), ("B", b)):
    s = [t[:24] for t in d.values()]
    print(f"{name}: first 24 tokens: {len({tuple(x) for x in s})} distinct sequences of {len(s)}, "
          f"{len({t for x in s for t in x})} distinct tokens")
