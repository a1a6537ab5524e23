#!/usr/bin/env python3
"""m31_spec_table.py: bench/m31_spec.sh's table: per concurrency, plain decoding and
speculative serving (DSpark) at the real acceptance and at each forced one (BENCH ONLY:
--spec-force-accept), from the runs' summaries (h3exec --summary) and results.

Decode-phase figures: tokens after the first (which the prefill makes) over the host time of
the decode steps or rounds; speed-up = a run's decode tokens/s over plain decoding's; "agree"
= the median number of leading tokens equal to the plain run's (bitwise runs agree in all);
"margin rule" = requests whose tokens equal the plain run's up to the first position where
the plain run's top-2 margin is below 0.05 (issue 19's acceptance on cuda; the plain run
writes --margins).
    bench/m31_spec_table.py OUT_DIR"""
import glob
import json
import os
import re
import statistics
import sys


def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None


def results(p):
    try:
        return {str(r["id"]): r for r in map(json.loads, open(p))}
    except (OSError, ValueError):
        return {}


def tokens(p):
    return {i: r["tokens"] for i, r in results(p).items()}


def margin_rule(plain, got):
    """(holds, of): requests equal to plain up to plain's first margin below 0.05."""
    ok = n = 0
    for i, r in plain.items():
        if i not in got:
            continue
        m = r.get("margins") or []
        cut = next((k for k, x in enumerate(m) if x is not None and x < 0.05), len(r["tokens"]))
        n += 1
        ok += got[i][:cut + 1] == r["tokens"][:cut + 1]
    return ok, n


def decode_rate(s):
    t = s.get("decode_s") or 0
    return (s["output_tokens"] - s["completed"]) / t if t > 0 else None


def agree(a, b):
    n = [next((k for k in range(min(len(x), len(b[i]))) if x[k] != b[i][k]), min(len(x), len(b[i])))
         for i, x in a.items() if i in b]
    return statistics.median(n) if n else None


def main():
    out = sys.argv[1]
    rows = []
    for plain_p in sorted(glob.glob(os.path.join(out, "plain_*.json")),
                          key=lambda p: int(re.findall(r"(\d+)\.json$", p)[0])):
        C = int(re.findall(r"(\d+)\.json$", plain_p)[0])
        plain = load(plain_p)
        if not plain:
            continue
        base = decode_rate(plain)
        plain_res = results(os.path.join(out, f"plain_{C}.results.jsonl"))
        ref = {i: r["tokens"] for i, r in plain_res.items()}
        steps = plain["decode_steps"]
        rows.append((C, "plain decode", "1", base, 1e3 * plain["decode_s"] / steps if steps else None, 1.0,
                     "-", "-"))
        specs = glob.glob(os.path.join(out, f"spec_{C}_*.json"))
        for p in sorted(specs, key=lambda p: (not p.endswith("_real.json"), p)):
            s = load(p)
            if not s:
                continue
            sp = s.get("speculative", {})
            forced = sp.get("forced_acceptance", 0)
            label = f"forced {forced} (BENCH ONLY)" if forced else "speculative"
            r = decode_rate(s)
            got = tokens(p.replace(".json", ".results.jsonl"))
            rounds = s["decode_steps"]
            ok, n = margin_rule(plain_res, got)
            rows.append((C, label, f"{sp.get('mean_acceptance_length', 0):.2f}", r,
                         1e3 * s["decode_s"] / rounds if rounds else None,
                         r / base if r and base else None, agree(ref, got), f"{ok} of {n}"))
    print("| concurrency | run | acceptance length | decode tok/s | ms per step / round | speed-up "
          "| leading tokens equal to plain (median) | margin rule |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    f = lambda x, k: "-" if x is None else (f"{x:.{k}f}" if isinstance(x, float) else str(x))  # noqa: E731
    for C, label, acc, r, ms, up, ag, mr in rows:
        print(f"| {C} | {label} | {acc} | {f(r, 1)} | {f(ms, 3)} | {f(up, 2)} | {f(ag, 1)} | {mr} |")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
