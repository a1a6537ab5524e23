#!/usr/bin/env python3
"""nvfp4_draft.py: `h3c compile --draft-quant nvfp4` end to end on the CPU (docs/nvfp4.md).

The tiny M3.1 plan compiled with and without --draft-quant nvfp4 runs the DSpark draft
graphs through h3exec on one seed of random weights (the nvfp4 plan's draft weights are the
bf16 plan's, quantized at load): `draft` (o_proj, gate_up_proj, down_proj) and
`draft_commit` (fc). Their outputs must differ only by the quantization: the NMSE of the
Markov logits z and of the written draft K/V is nonzero and below 0.2 (measured 0.036
for z with seed 7), the draft tokens are valid ids; the nvfp4 plan's report names the pass, the plan
holds linear_nvfp4 ops and no bf16 copy of the four weights. Standard library only.
"""
import argparse
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

failures = []


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        failures.append(what)
        print(f"FAIL {what}: exit {p.returncode}\n{' '.join(cmd)}\n{p.stderr.decode()}", file=sys.stderr)
    return p


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def values(t):
    dt, _, raw = t
    if dt == "F32":
        return struct.unpack("<%df" % (len(raw) // 4), raw)
    if dt == "BF16":
        return struct.unpack("<%df" % (len(raw) // 2), b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2)))
    if dt == "I32":
        return struct.unpack("<%di" % (len(raw) // 4), raw)
    raise ValueError(dt)


def nmse(a, b):
    e = sum((x - y) ** 2 for x, y in zip(a, b))
    r = sum(y * y for y in b)
    return e / r if r else e


def main():
    ap = argparse.ArgumentParser()
    for f in ("--h3c", "--h3exec", "--source", "--work"):
        ap.add_argument(f, required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    g = os.path.join(a.source, "models", "minimax_m3_1.g")
    plans = {"bf16": W("bf16.plan"), "nvfp4": W("nvfp4.plan")}
    for q, plan in plans.items():
        p = run([a.h3c, "compile", g, "--config", "tiny", "--draft-quant", q, "--report", "-o", plan], "compile " + q)
        if p.returncode:
            return 1
        if q == "nvfp4":
            check("4 draft weights quantized to NVFP4: 81920 B bf16 -> 23056 B" in p.stderr.decode(),
                  "the pass reports the four weights and the 48,208-byte draft of §2 (23,056 B quantized)")
            text = open(plan).read()
            check(text.count("= linear_nvfp4(") >= 4 and "@dspark.fc.weight :" not in text
                  and "quant nvfp4_scale \"dspark.fc.weight\"" in text,
                  "the plan holds linear_nvfp4 ops and the NVFP4 parameters, not the bf16 weights")
    # without --draft-quant: nvfp4 for M3.1 (its plan the nvfp4 one, byte for byte), nothing for H3
    p = run([a.h3c, "compile", g, "--config", "tiny", "-o", W("default.plan")], "compile (no --draft-quant)")
    if p.returncode:
        return 1
    body = lambda f: [ln for ln in open(f, "rb").read().split(b"\n") if not ln.startswith(b"flags:")]  # noqa: E731
    check(body(W("default.plan")) == body(plans["nvfp4"]),
          "without --draft-quant the tiny M3.1 plan is the --draft-quant nvfp4 one (but for its flags line)")
    h3 = os.path.join(a.source, "models", "minimax_h3.g")
    p = run([a.h3c, "compile", h3, "--config", "tiny", "--report", "-o", W("h3.plan")], "compile H3")
    check(p.returncode == 0 and "draft-quant-nvfp4" not in p.stderr.decode(),
          "H3 (no draft) compiles without the pass when no --draft-quant is given")
    for graph, outs in (("draft", ("z",)), ("draft_commit", ("kd_cache", "vd_cache"))):
        res = {}
        for q, plan in plans.items():
            out = W(f"{graph}_{q}.safetensors")
            p = run([a.h3exec, plan, "--backend", "cpu", "--weights", "random", "--seed", "7", "--graph", graph,
                     "--out", out], f"run {graph} ({q})")
            if p.returncode:
                return 1
            res[q] = stfile.read(out)
        for o in outs:
            e = nmse(values(res["nvfp4"][o]), values(res["bf16"][o]))
            check(0 < e < 0.2, f"{graph}: {o} NMSE nvfp4 vs bf16 = {e:.4f} (nonzero, below 0.2)")
        if graph == "draft":
            ids = values(res["nvfp4"]["draft"])
            check(all(0 <= i < 256 for i in ids), f"draft tokens are vocabulary ids: {list(ids)}")
    if failures:
        print(f"{len(failures)} failed: {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
