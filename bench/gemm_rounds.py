#!/usr/bin/env python3
"""gemm_rounds.py: h3's four block GEMMs against PyTorch's in alternating rounds, and the
ratio table of their medians.

    python3 bench/gemm_rounds.py ATTENTION_BENCH [--rounds R] [--rows S] [--iters N]
                                 [--warm-seconds W] [--out FILE.json]

One measurement of a GEMM on the H200 moves by several percent with the power and clock
state the card is in (PyTorch's qkv took 9.4 to 11.6 ms over the runs of 2026-11-30), so a
single h3 run set against a single PyTorch run decides a 3 % goal by chance. Here each
round times the four GEMMs on both sides with the same protocol (bf16 operands uniform in
[-1, 1), at least 2 warm-up runs and W = 1 s of the op, median of N = 10 CUDA-event runs):
h3 through `ATTENTION_BENCH --gemm-only` (a fresh process: its plan-load tuning included),
PyTorch through torch.matmul(x, w.t()) in this process. The side that goes first alternates
from round to round (R = 4: h3 first in rounds 1 and 3), and each side's time per GEMM is
the median over the rounds. Prints every round, then the table with the project's goal (each
GEMM within 3 %); --out keeps {"h3": {...}, "torch": {...}, "rounds": [...]} (milliseconds
by GEMM name and gemm_block_total) for bench/block_peers.py --gemm-json.
Needs torch with CUDA; prints why and exits 0 when it is missing.
"""
import argparse
import json
import statistics
import subprocess
import sys

from block_peers import GEMMS, gemm_peers, goal_text, read_h3_lines, torch_missing


def h3_round(binary, a):
    cmd = [binary, "--gemm-only", "--rows", str(a.rows), "--used", str(a.rows),
           "--iters", str(a.iters), "--warm-seconds", str(a.warm_seconds)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gemm_rounds: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return read_h3_lines(p.stdout.splitlines())


def torch_round(a):
    out = {}
    gemm_peers(a.rows, a.iters, a.warm_seconds, out)
    return out


def first_side(r):
    """The side timed first in round r (0-based): h3 in even rounds, PyTorch in odd ones."""
    return "torch" if r % 2 else "h3"


def medians(rounds, keys):
    """{side: {key: median over the rounds, gemm_block_total: their sum}} for h3 and torch."""
    med = {side: {k: statistics.median(rd[side][k] for rd in rounds) for k in keys}
           for side in ("h3", "torch")}
    for side in med:
        med[side]["gemm_block_total"] = sum(med[side][k] for k in keys)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attention_bench")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rows", type=int, default=32704)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warm-seconds", type=float, default=1.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.rounds < 1 or a.iters < 1 or a.rows < 1:
        sys.exit("gemm_rounds: need --rounds, --iters and --rows >= 1")
    missing = torch_missing()
    if missing:
        print(f"gemm_rounds: PyTorch unavailable ({missing}); nothing to set h3 against")
        return
    keys = [k for k, _ in GEMMS]
    rounds = []
    for r in range(a.rounds):
        first = first_side(r)
        run = {"h3": lambda: h3_round(a.attention_bench, a), "torch": lambda: torch_round(a)}
        got = {side: run[side]() for side in (first, "torch" if first == "h3" else "h3")}
        rounds.append({"first": first, **got})
        print(f"round {r + 1} ({first} first): " + "  ".join(
            f"{k.replace('gemm_', '')} {got['h3'][k]:.3f}/{got['torch'][k]:.3f}" for k in keys), flush=True)
    med = medians(rounds, keys)
    print(f"\n== four block GEMMs at M = {a.rows}: medians of {a.rounds} alternating rounds ==")
    print(f"{'GEMM':<18} {'h3 ms':>9} {'torch ms':>9} {'h3/torch':>9}  goal")
    for k in keys + ["gemm_block_total"]:
        h, t = med["h3"][k], med["torch"][k]
        print(f"{k:<18} {h:9.3f} {t:9.3f} {h / t:9.3f}  {goal_text(k, h / t, {})}".rstrip())
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"h3": med["h3"], "torch": med["torch"], "rounds": rounds}, f, indent=1)


if __name__ == "__main__":
    main()
