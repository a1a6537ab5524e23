#!/usr/bin/env python3
"""m31_serve_table.py: h3's serving benchmark of MiniMax-M3.1 beside the PyTorch peer's, one
markdown row per concurrency.

    python3 bench/m31_serve_table.py FILE...

Each FILE is a JSON object, or JSON lines among other lines (a log, a results file): the
summary objects in it, those with "engine" and "concurrency", are read ("engine": "h3" from
h3exec --requests, "pytorch-peer" from bench/m31_serve_peer.py serve; the keys output_tok_s,
ttft_ms and tpot_ms with p50 and p99); everything else is skipped. The last summary of an
engine at a concurrency wins. A side that is missing prints "—". Below the table: the issue's
goal, h3's output tokens/s at least 1.2x the peer's, at each concurrency that has both.
"""
import json
import sys

GOAL = 1.2
DASH = "—"


def summaries(path):
    with open(path) as f:
        text = f.read()
    try:
        objs = [json.loads(text)]
    except ValueError:
        objs = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    objs.append(json.loads(line))
                except ValueError:
                    pass
    for o in objs:
        for x in (o if isinstance(o, list) else [o]):
            if isinstance(x, dict) and "engine" in x and "concurrency" in x:
                yield x


def num(v, fmt):
    return format(v, fmt) if isinstance(v, (int, float)) else DASH


def pair(s, key, fmt):
    d = (s or {}).get(key) or {}
    if not isinstance(d, dict) or (d.get("p50") is None and d.get("p99") is None):
        return DASH
    return f"{num(d.get('p50'), fmt)} / {num(d.get('p99'), fmt)}"


def main(paths):
    if not paths:
        sys.exit(__doc__)
    side = {"h3": {}, "peer": {}}
    for p in paths:
        for s in summaries(p):
            key = "h3" if s["engine"] == "h3" else "peer" if s["engine"] == "pytorch-peer" else None
            if key:
                side[key][s["concurrency"]] = s
    print("| concurrency | h3 tok/s | peer tok/s | h3/peer | h3 TTFT p50/p99 ms | peer TTFT p50/p99 ms "
          "| h3 TPOT p50/p99 ms | peer TPOT p50/p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    met, missed = [], []
    for cc in sorted(set(side["h3"]) | set(side["peer"])):
        h, p = side["h3"].get(cc), side["peer"].get(cc)
        ht, pt = (h or {}).get("output_tok_s"), (p or {}).get("output_tok_s")
        r = ht / pt if isinstance(ht, (int, float)) and isinstance(pt, (int, float)) and pt > 0 else None
        if r is not None:
            (met if r >= GOAL else missed).append(str(cc))
        print(f"| {cc} | {num(ht, '.1f')} | {num(pt, '.1f')} | {num(r, '.2f')} "
              f"| {pair(h, 'ttft_ms', '.1f')} | {pair(p, 'ttft_ms', '.1f')} "
              f"| {pair(h, 'tpot_ms', '.2f')} | {pair(p, 'tpot_ms', '.2f')} |")
    if met or missed:
        said = [f"met at concurrency {', '.join(met)}"] if met else []
        said += [f"not met at concurrency {', '.join(missed)}"] if missed else []
        print(f"\ngoal h3/peer >= {GOAL}: {'; '.join(said)}")
    modes = {s.get("mode") for s in side["peer"].values()} - {None}
    for m in sorted(modes):
        print(f"\npeer: {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
