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

With M31_SPEC_FLOOR's files (copy.json, floor_args.json, moe_C_A.txt) a second table: each run's
step or round against the bandwidth floor of the bytes it must read (bench/m31_floor.py, with
the distinct experts its moe calls touched, as h3exec --moe-stats counted them in a twin run),
and the draft's share of the measured round and of the floor. Context: the prompt plus half the
new tokens (the mean over the decode).
    bench/m31_spec_table.py OUT_DIR"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import m31_floor  # noqa: E402  (path set above)


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


def touched(path):
    """--moe-stats' table of a run: {rows: mean distinct experts per moe call}."""
    t = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) == 6 and f[0].isdigit():
                t[int(f[0])] = float(f[2])
    except OSError:
        pass
    return t


def floor_table(out, runs):
    """The second table, from M31_SPEC_FLOOR's files; [] without them."""
    gb, fa = load(os.path.join(out, "copy.json")), load(os.path.join(out, "floor_args.json"))
    if not gb or not fa:
        return []
    h3c = fa["h3c"]
    sets = [h3c[i + 1] for i, x in enumerate(h3c[:-1]) if x == "--set"]
    quant = next((h3c[i + 1] for i, x in enumerate(h3c[:-1]) if x == "--draft-quant"), "nvfp4")
    c = m31_floor.config(fa["config"], sets)
    ctx = fa["isl"] + fa["osl"] // 2
    lines = [f"Bandwidth floor (copy {gb['gbps']:.0f} GB/s; {' '.join([fa['config']] + sets)}, "
             f"draft {quant}, context {ctx}; experts per sparse layer as --moe-stats counted them):",
             "",
             "| concurrency | run | experts touched (rows) | floor ms (draft + verify + commit) | measured ms "
             "| measured / floor | draft share: measured / floor |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for C, tag, label, s in runs:
        t = touched(os.path.join(out, f"moe_{C}_{tag}.txt"))
        r = m31_floor.round_bytes(c, C, ctx, quant, t)
        ms = lambda b: 1e3 * b / (gb["gbps"] * 1e9)  # noqa: E731
        steps = s["decode_steps"]
        got = 1e3 * s["decode_s"] / steps if steps else None
        if tag == "plain":
            rows, n = C, r["plain_experts"]
            fl, share = ms(r["plain_step"]), "-"
            parts = f"{fl:.3f}"
        else:
            rows, n = C * (c["gamma"] + 1), r["verify_experts"]
            fl = ms(r["round"])
            parts = f"{fl:.3f} ({ms(r['draft']):.3f} + {ms(r['verify']):.3f} + {ms(r['commit']):.3f})"
            sp = s.get("speculative", {})
            d = 1e3 * sp.get("draft_s", 0) / steps if steps else 0
            share = f"{d / got:.2f} / {ms(r['draft']) / fl:.2f}" if got else "-"
        src = "" if rows in t else " (uniform: not measured)"
        lines.append(f"| {C} | {label} | {n:.1f} of {c['experts']} ({rows}){src} "
                     f"| {parts} | {got:.3f} | {got / fl:.2f} | {share} |" if got else
                     f"| {C} | {label} | - | {parts} | - | - | - |")
    return lines


def main():
    out = sys.argv[1]
    runs = []  # (C, the runs' file tag, label, summary) for the floor table
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
        runs.append((C, "plain", "plain decode", plain))
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
            runs.append((C, re.findall(rf"spec_{C}_(.+)\.json$", p)[0], label, s))
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
    ft = floor_table(out, runs)
    if ft:
        print()
        print("\n".join(ft))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
