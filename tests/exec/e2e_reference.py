#!/usr/bin/env python3
"""e2e_reference.py: h3exec against the independent numpy references (tests/reference):
  - H3 tiny `step` and `text` with the same weights and inputs files: relative L2 <= 2e-2
    per output (compare.py);
  - the H3 tiny `sample` program: 49 steps, same seed -> same bytes, wall time <= 30 s;
  - M3.1 tiny greedy generation of 32 tokens from a 20-token prompt: the same tokens as the
    reference, which recomputes the whole sequence for every token (no KV cache);
  - files written by h3exec --out load with Python's safetensors package.
Exit 77 (skipped) when numpy or safetensors are missing.

Usage: e2e_reference.py --h3c H3C --h3exec H3EXEC --source SRC --work DIR"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError:
    print("numpy or safetensors missing: skipped")
    sys.exit(77)

failures = []


def run(cmd, what):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        failures.append(what)
        print(f"FAIL {what}: exit {p.returncode}\n{' '.join(cmd)}\n{p.stderr.decode()}", file=sys.stderr)
    return p.returncode == 0, p.stdout.decode(), time.time() - t0


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    for f in ("--h3c", "--h3exec", "--source", "--work"):
        ap.add_argument(f, required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    ref = os.path.join(a.source, "tests", "reference")
    py = sys.executable
    h3, m31 = W("h3.plan"), W("m31.plan")
    ok, _, _ = run([a.h3c, "compile", os.path.join(a.source, "models", "minimax_h3.g"), "--config", "tiny",
                    "-o", h3], "compile h3 tiny")
    ok2, _, _ = run([a.h3c, "compile", os.path.join(a.source, "models", "minimax_m3_1.g"), "--config", "tiny",
                     "--set", "max_new_tokens=32", "-o", m31], "compile m3.1 tiny")
    if not (ok and ok2):
        return 1

    # ---- H3 step and text vs the numpy reference ----------------------------------------------
    w = W("h3_weights.safetensors")
    run([py, os.path.join(ref, "h3_ref.py"), "--config", "tiny", "--make-weights", w, "--seed", "1"], "make weights")
    for graph in ("step", "text"):
        inp, out, exp = W(f"{graph}_in.safetensors"), W(f"{graph}_h3.safetensors"), W(f"{graph}_ref.safetensors")
        run([py, os.path.join(ref, "h3_ref.py"), "--config", "tiny", "--make-inputs", inp, "--seed", "2",
             "--graph", graph], f"make {graph} inputs")
        ok, _, _ = run([a.h3exec, h3, "--graph", graph, "--inputs", inp, "--weights", w, "--out", out],
                       f"h3exec --graph {graph}")
        ok_ref, _, _ = run([py, os.path.join(ref, "h3_ref.py"), "--config", "tiny", "--graph", graph,
                            "--weights", w, "--inputs", inp, "--out", exp], f"h3_ref {graph}")
        if ok and ok_ref:
            ok_cmp, text, _ = run([py, os.path.join(ref, "compare.py"), out, exp, "--rel-l2", "2e-2"],
                                  f"{graph} vs reference (rel L2 <= 2e-2)")
            print(text.strip())
            check(ok_cmp, f"{graph} agrees with the numpy reference")
        if ok:  # Python's safetensors reads h3exec's output (numpy has no bf16: shapes via safe_open)
            with safe_open(out, framework="numpy") as f:
                got = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}
            want = {"step": {"v_video": ("F32", (40, 12)), "v_audio": ("F32", (6, 8))},
                    "text": {"text": ("BF16", (8, 64))}}[graph]
            check(got == want, f"{graph} output opens with safetensors: {got}")
            if graph == "step":
                v = load_file(out)
                check(all(x.dtype == np.float32 and np.isfinite(x).all() for x in v.values()),
                      "step output loads with safetensors.numpy")

    # ---- H3 sample: determinism and wall time --------------------------------------------------
    s1, s2 = W("sample1.safetensors"), W("sample2.safetensors")
    ok, report, wall = run([a.h3exec, h3, "--seed", "9", "--out", s1], "h3exec sample")
    ok2, _, _ = run([a.h3exec, h3, "--seed", "9", "--out", s2], "h3exec sample again")
    if ok and ok2:
        check(open(s1, "rb").read() == open(s2, "rb").read(), "sample: same seed -> same bytes")
        m = re.search(r"total ([0-9.]+) s", report)
        secs = float(m.group(1)) if m else wall
        check(secs <= 30.0, f"sample: 49 steps in {secs:.2f} s (<= 30 s)")
        v = load_file(s1)
        check(all(np.isfinite(x).all() and np.abs(x).sum() > 0 for x in v.values()),
              "sample outputs finite and nonzero")

    # ---- M3.1: greedy tokens vs the no-cache reference ---------------------------------------------
    mw, prompt = W("m31_weights.safetensors"), W("prompt.safetensors")
    run([py, os.path.join(ref, "m31_ref.py"), "--make-weights", mw, "--make-prompt", prompt, "--prompt-len", "20",
         "--seed", "4"], "make m3.1 weights and prompt")
    th, tr = W("tokens_h3.safetensors"), W("tokens_ref.safetensors")
    ok, _, _ = run([a.h3exec, m31, "--weights", mw, "--prompt", prompt, "--max-new-tokens", "32", "--out", th],
                   "h3exec generate")
    ok_ref, _, _ = run([py, os.path.join(ref, "m31_ref.py"), "--weights", mw, "--prompt", prompt,
                        "--max-new-tokens", "32", "--out", tr], "m31_ref generate")
    if ok and ok_ref:
        got, want = load_file(th)["tokens"], load_file(tr)["tokens"]
        same = np.array_equal(got, want)
        if not same:
            first = int(np.argmax(got != want))
            lg = load_file(tr)["logits"][first]
            top = np.sort(lg)[-2:]
            print(f"first difference at token {first}: h3 {got[first]}, reference {want[first]}, "
                  f"reference top-2 margin {top[1] - top[0]:.3g}")
        print("h3  :", got.tolist())
        print("ref :", want.tolist())
        check(same, "m3.1: 32 greedy tokens equal the no-cache reference")
    if failures:
        print(f"e2e_reference: {len(failures)} failed", file=sys.stderr)
        return 1
    print("e2e_reference: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
