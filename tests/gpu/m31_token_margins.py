#!/usr/bin/env python3
"""m31_token_margins.py: greedy tokens of MiniMax-M3.1 on two backends, and where they part,
whether they may: issue 17's rule "the tokens on cuda equal the CPU backend's up to the first
position whose top-2 logit margin is below 0.05".

For each of --prompts random prompts (of the plan's prompt_len, from --seed), runs the plan's
`generate` program with backend A and backend B (same random weights). Where the tokens first
differ, at new-token index n, the reference (B) prefix is replayed: the `prefill` graph of a
plan compiled with prompt_len = P + n on backend B over prompt + tokens[:n] gives the fp32
logits that chose token n; their top-2 margin must be below --margin, else the prompt fails.
    python3 tests/gpu/m31_token_margins.py H3C H3EXEC MODEL.g PLAN WORKDIR [--config small]
        [--a cuda] [--b cpu] [--prompts 3] [--seed 1] [--margin 0.05] [--threads 16]
        [--set KEY=VALUE ...]   (the --set overrides PLAN was compiled with, for the replay)
Prints one line per prompt and exits 1 when a prompt fails or a run does not finish.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-4000:])
        raise SystemExit(f"m31_token_margins: failed: {' '.join(cmd)}")
    return r.stdout


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


def generate(h3exec, plan, backend, prompt_file, out, threads):
    cmd = [h3exec, plan, "--backend", backend, "--weights", "random", "--seed", "3",
           "--prompt", prompt_file, "--out", out]
    if backend == "cpu":
        cmd += ["--threads", str(threads)]
    run(cmd)
    return load_file(out)["tokens"].astype(np.int64)


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
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    P, vocab = config_value(a.plan, "prompt_len"), config_value(a.plan, "vocab")
    rng = np.random.default_rng(a.seed)
    failed = 0
    for i in range(a.prompts):
        prompt = rng.integers(0, vocab, size=P, dtype=np.int64)
        pf = os.path.join(a.workdir, f"prompt{i}.txt")
        with open(pf, "w") as f:
            f.write(" ".join(str(t) for t in prompt) + "\n")
        ta = generate(a.h3exec, a.plan, a.a, pf, os.path.join(a.workdir, f"a{i}.safetensors"), a.threads)
        tb = generate(a.h3exec, a.plan, a.b, pf, os.path.join(a.workdir, f"b{i}.safetensors"), a.threads)
        diff = np.flatnonzero(ta != tb)
        if diff.size == 0:
            print(f"prompt {i}: all {tb.size} tokens equal")
            continue
        n = int(diff[0])
        replay = os.path.join(a.workdir, f"replay{i}.plan")
        sets = sum((["--set", s] for s in a.set if not s.startswith("prompt_len=")), [])
        run([a.h3c, "compile", a.model, "--config", a.config, *sets, "--set", f"prompt_len={P + n}",
             "-o", replay])
        inputs = os.path.join(a.workdir, f"replay{i}.safetensors")
        save_file({"tokens": np.concatenate([prompt, tb[:n]]).astype(np.int32)}, inputs)
        out = os.path.join(a.workdir, f"replay{i}_out.safetensors")
        cmd = [a.h3exec, replay, "--backend", a.b, "--weights", "random", "--seed", "3",
               "--graph", "prefill", "--inputs", inputs, "--out", out]
        if a.b == "cpu":
            cmd += ["--threads", str(a.threads)]
        run(cmd)
        with safe_open(out, framework="numpy") as f:  # (its caches are bf16: not read)
            logits = f.get_tensor("logits").astype(np.float64).ravel()
        top = np.sort(logits)[-2:]
        margin = float(top[1] - top[0])
        ok = margin < a.margin and int(np.argmax(logits)) == int(tb[n])
        failed += not ok
        print(f"prompt {i}: {n} of {tb.size} leading tokens equal; at token {n} the {a.b} top-2 "
              f"margin is {margin:.4g} ({'below' if margin < a.margin else 'NOT below'} {a.margin})"
              f"{'' if ok else ' FAIL'}")
    print(f"{a.prompts - failed} of {a.prompts} prompts agree by the rule")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
