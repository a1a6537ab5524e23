#!/usr/bin/env python3
"""m31_token_margins.py: greedy tokens of MiniMax-M3.1 on backend A (cuda) against backend B
(the CPU reference), by issue 17's rule: "the tokens on cuda equal the CPU backend's up to the
first position whose top-2 logit margin is below 0.05".

For each of --prompts random prompts (of the plan's prompt_len P, from --seed), backend A runs
the plan's `generate` program (N = max_new_tokens greedy tokens a[0..N-1]). Backend B then
scores A's whole sequence at once, by teacher forcing: the `verify` graph of a plan compiled
with gamma = P + N - 2 (so verify_rows = P + N - 1) run at pos0 = 0 over prompt + a[0..N-2] is
an extend from empty caches, i.e. a prefill that returns every row's fp32 logits; row P - 1 + n
holds B's logits for new token n given A's tokens before it. B's greedy run would give the same
tokens as A up to the first n where a[n] != argmax_B(row P - 1 + n); the rule holds when B's
top-2 margin is below --margin at that n or at an earlier position. One batched pass of B
replaces N sequential decode steps.
    python3 tests/gpu/m31_token_margins.py H3C H3EXEC MODEL.g PLAN WORKDIR [--config small]
        [--a cuda] [--b cpu] [--prompts 3] [--seed 1] [--margin 0.05] [--threads 16]
        [--set KEY=VALUE ...]   (the --set overrides PLAN was compiled with, for B's plan)
        [--compare-logits]      (A scores the sequence too: per-row NMSE of its logits to B's)
        [--only I]              (only prompt I of the same draws)
        [--dump-ops KINDS]      (with --compare-logits: both scorings dump these op kinds,
                                 then tests/gpu/dump_diff.py says where they part; with
                                 router_topk+operands a failing prompt names the first row
                                 whose experts differ and the reference's margin there)
Prints one line per prompt and exits 1 when a prompt breaks the rule or a run does not finish.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dump_diff  # noqa: E402


def run(cmd):
    t = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-4000:])
        raise SystemExit(f"m31_token_margins: failed: {' '.join(cmd)}")
    return time.time() - t


def config_value(plan, key):
    """A config key of a plan file (its `config:` entries, `key: value` lines)."""
    with open(plan, errors="replace") as f:
        for line in f:
            s = line.strip().lstrip("- ").strip("{}")
            for part in s.split(","):
                k, _, v = part.partition(":")
                if k.strip() == key and v.strip().lstrip("-").isdigit():
                    return int(v)
    raise SystemExit(f"m31_token_margins: {plan} has no config key {key}")


def backend_flags(backend, threads):
    return ["--backend", backend] + (["--threads", str(threads)] if backend == "cpu" else [])


def first_break(tokens, logits, margin):
    """(n, margin at n, first low-margin position or None) for the first n where tokens[n]
    differs from the argmax of logits[n]; n is None when all agree. The rule holds when the
    low-margin position exists and is <= n."""
    top2 = np.sort(logits, axis=1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    low = np.flatnonzero(margins < margin)
    low0 = int(low[0]) if low.size else None
    diff = np.flatnonzero(np.argmax(logits, axis=1) != tokens)
    n = int(diff[0]) if diff.size else None
    return n, (float(margins[n]) if n is not None else None), low0


def main():
    p = argparse.ArgumentParser()
    for name in ("h3c", "h3exec", "model", "plan", "workdir"):
        p.add_argument(name)
    p.add_argument("--config", default="small")
    p.add_argument("--a", default="cuda")
    p.add_argument("--b", default="cpu")
    p.add_argument("--prompts", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--margin", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--compare-logits", action="store_true",
                   help="also score the sequence on backend A and print the logits' distance to B's")
    p.add_argument("--only", type=int, default=-1, help="run only prompt ONLY (of the same draws)")
    p.add_argument("--dump-ops", default=None,
                   help="with --compare-logits: h3exec --dump-ops KINDS on both scorings, then dump_diff.py")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    P, N = config_value(a.plan, "prompt_len"), config_value(a.plan, "max_new_tokens")
    vocab = config_value(a.plan, "vocab")
    scorer = os.path.join(a.workdir, "teacher_forced.plan")
    sets = sum((["--set", s] for s in a.set if not s.startswith("gamma=")), [])
    run([a.h3c, "compile", a.model, "--config", a.config, *sets, "--set", f"gamma={P + N - 2}",
         "-o", scorer])
    rng = np.random.default_rng(a.seed)
    failed = ran = 0
    for i in range(a.prompts):
        prompt = rng.integers(0, vocab, size=P, dtype=np.int64)
        if a.only >= 0 and i != a.only:
            continue
        ran += 1
        pf = os.path.join(a.workdir, f"prompt{i}.txt")
        with open(pf, "w") as f:
            f.write(" ".join(str(t) for t in prompt) + "\n")
        out_a = os.path.join(a.workdir, f"a{i}.safetensors")
        ta = run([a.h3exec, a.plan, *backend_flags(a.a, a.threads), "--weights", "random", "--seed", "3",
                  "--prompt", pf, "--out", out_a])
        tokens = load_file(out_a)["tokens"].astype(np.int64)
        inputs = os.path.join(a.workdir, f"teacher{i}.safetensors")
        seq = np.concatenate([prompt, tokens[:-1]]).astype(np.int32)
        save_file({"tokens": seq, "pos0": np.zeros((), np.int32)}, inputs)
        out_b = os.path.join(a.workdir, f"b{i}.safetensors")
        dump = lambda who: ["--dump-ops", a.dump_ops, "--dump", os.path.join(a.workdir, f"{who}{i}_dump.safetensors")] \
            if a.dump_ops and a.compare_logits else []
        tb = run([a.h3exec, scorer, *backend_flags(a.b, a.threads), "--weights", "random", "--seed", "3",
                  "--graph", "verify", "--inputs", inputs, "--out", out_b, *dump("b")])
        with safe_open(out_b, framework="numpy") as f:
            logits = f.get_tensor("logits")[P - 1:]  # [N, vocab] f32: row n chose new token n
        n, m, low0 = first_break(tokens, logits, a.margin)
        if a.compare_logits:  # A's own teacher-forced logits of the same sequence against B's
            out_c = os.path.join(a.workdir, f"a{i}_scored.safetensors")
            run([a.h3exec, scorer, *backend_flags(a.a, a.threads), "--weights", "random", "--seed", "3",
                 "--graph", "verify", "--inputs", inputs, "--out", out_c, *dump("a")])
            with safe_open(out_c, framework="numpy") as f:
                la = f.get_tensor("logits")[P - 1:]
            err = ((la.astype(np.float64) - logits) ** 2).sum(axis=1) / (logits.astype(np.float64) ** 2).sum(axis=1)
            at = n if n is not None else 0
            ia, ib = np.argsort(la[at])[-2:], np.argsort(logits[at])[-2:]
            print(f"prompt {i}: {a.a} vs {a.b} teacher-forced logits: nmse per row median {np.median(err):.3g}, "
                  f"max {err.max():.3g} (row {int(err.argmax())}), rms of {a.b}'s {np.sqrt((logits ** 2).mean()):.3g}; "
                  f"rows above 1e-2: {np.flatnonzero(err > 1e-2).tolist()}, above 1e-3: {int((err > 1e-3).sum())}; "
                  f"at token {at}: {a.a} top-2 {ia[::-1].tolist()} {la[at][ia[::-1]].tolist()}, "
                  f"{a.b} top-2 {ib[::-1].tolist()} {logits[at][ib[::-1]].tolist()}", flush=True)
        cause = ""
        if dump("a"):
            sys.stdout.flush()
            subprocess.run([sys.executable, os.path.join(HERE, "dump_diff.py"), dump("a")[-1], dump("b")[-1],
                             "--top", "60"])
            flips = dump_diff.router_flips(dump_diff.load(dump("a")[-1]), dump_diff.load(dump("b")[-1]))
            if n is not None:  # the first router that chose other experts for a row the break depends on
                early = [f for f in flips if f[2] <= P - 1 + n]
                if early:
                    f = early[0]
                    cause = (f"; the runs part first at {f[1]} (execution {f[0]}): row {f[2]} takes experts {f[3]} "
                             f"on {a.a}, {f[4]} on {a.b}, whose margin between its k-th and (k+1)-th score "
                             f"is {f[6]:.3g} (|s_{a.a} - s_{a.b}| up to {f[7]:.3g} in that row)")
        low = f"first top-2 margin below {a.margin} at token {low0}" if low0 is not None else \
            f"no top-2 margin below {a.margin}"
        if n is None:
            ok, what = True, f"all {N} tokens are {a.b}'s argmax"
        else:
            ok = low0 is not None and low0 <= n
            what = f"{n} of {N} leading tokens are {a.b}'s argmax; at token {n} its margin is {m:.4g}"
        failed += not ok
        print(f"prompt {i}: {what}; {low} ({a.a} {ta:.1f} s, {a.b} teacher-forced {tb:.1f} s)"
              f"{'' if ok else ' FAIL'}{cause if not ok else ''}", flush=True)
    print(f"{ran - failed} of {ran} prompts agree by the rule")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
