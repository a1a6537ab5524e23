#!/usr/bin/env python3
"""cli_errors.py: h3exec on bad flags, bad plans and bad inputs: each case checks the exit
status, that stderr holds the expected message pieces (file, place, what is wrong), that
nothing crashed (no signal) and that no --out file was written. Also checks that a good run
writes its outputs, that the same seed gives the same bytes, and the --profile trace.

Usage: cli_errors.py --h3c H3C --h3exec H3EXEC --source SRC --work DIR
Standard library only (tests/exec/stfile.py writes the safetensors files)."""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

failures = []
cases = [0]


def run(cmd, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def compile_plan(a, model, out, sets=()):
    base = [a.h3c, "compile", os.path.join(a.source, "models", model), "--config", "tiny"]
    for s in sets:
        base += ["--set", s]
    rc, _, err = run(base + ["-o", out])
    if rc != 0:
        print(err, file=sys.stderr)
        sys.exit(f"cannot compile {model}")


def case(a, name, args, rc_want, pieces, with_out=True):
    """with_out: append --out FILE (the file must not appear); False when args must end the line."""
    cases[0] += 1
    out = os.path.join(a.work, "out_" + name + ".safetensors")
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = run([a.h3exec] + args + (["--out", out] if with_out else []))
    problems = []
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    if rc != rc_want:
        problems.append(f"exit {rc}, want {rc_want}")
    for p in pieces:
        if p not in err:
            problems.append(f"stderr lacks {p!r}")
    if os.path.exists(out):
        problems.append("an output file was written")
    leftovers = [f for f in os.listdir(a.work) if f.startswith("out_" + name) and f != os.path.basename(out)]
    if leftovers:
        problems.append(f"temporary files left: {leftovers}")
    if problems:
        failures.append(name)
        print(f"FAIL {name}: {'; '.join(problems)}\n--- stderr ---\n{err}", file=sys.stderr)
    else:
        print(f"ok   {name}")


def step_inputs(path, **change):
    r = random.Random(3)
    t = {
        "text": ("BF16", [8, 64], stfile.bf16([r.uniform(-1, 1) for _ in range(8 * 64)])),
        "video": ("F32", [40, 12], stfile.f32([r.gauss(0, 1) for _ in range(40 * 12)])),
        "audio": ("F32", [6, 8], stfile.f32([r.gauss(0, 1) for _ in range(6 * 8)])),
        "t": ("F32", [2], stfile.f32([0.3, 0.7])),
        "tag": ("I32", [64], stfile.i32([1] * 8 + [2] * 6 + [0] * 40 + [-1] * 10)),
        "slot": ("I32", [64], stfile.i32([0] * 8 + [1] * 6 + [0] * 50)),
        "pos": ("F32", [64, 3], stfile.f32([float(i % 7) for i in range(64 * 3)])),
    }
    for k, v in change.items():
        if v is None:
            t.pop(k)
        else:
            t[k] = v
    stfile.write(path, t)


def main():
    ap = argparse.ArgumentParser()
    for f in ("--h3c", "--h3exec", "--source", "--work"):
        ap.add_argument(f, required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    h3, m31 = W("h3.plan"), W("m31.plan")
    compile_plan(a, "minimax_h3.g", h3)
    compile_plan(a, "minimax_m3_1.g", m31)
    text = open(h3).read()

    # ---- bad flags (exit 2) -----------------------------------------------------------------
    case(a, "flag_unknown", [h3, "--bogus"], 2, ["unknown flag '--bogus'", "h3exec --help"])
    case(a, "flag_no_plan", ["--seed", "1"], 2, ["no plan given"])
    case(a, "flag_seed_text", [h3, "--seed", "abc"], 2, ["--seed expects an integer", "'abc'"])
    case(a, "flag_backend", [h3, "--backend", "tpu"], 2, ["--backend must be cpu, cuda or auto", "'tpu'"])
    case(a, "flag_iterations_zero", [h3, "--iterations", "0"], 2, ["--iterations expects an integer in [1,"])
    case(a, "flag_missing_value", [h3, "--out", W("x.safetensors"), "--weights"], 2, ["--weights needs a value"],
         with_out=False)
    case(a, "flag_two_plans", [h3, h3], 2, ["more than one plan given"])
    case(a, "flag_prompt_both", [m31, "--prompt", W("p.txt"), "--prompt-len", "20"], 2,
         ["--prompt and --prompt-len exclude each other"])
    # ---- flags that contradict the plan (exit 1) ---------------------------------------------
    case(a, "cuda_unavailable", [h3, "--backend", "cuda"], 1,
         ["CUDA backend not available in this build/no GPU found", "--backend cpu"])
    case(a, "graph_unknown", [h3, "--graph", "nosuch"], 1,
         [f"{h3}: no graph named 'nosuch'", "the plan's graphs: ", "step", "sample"])
    case(a, "steps_mismatch", [h3, "--steps", "10"], 1,
         ["--steps 10: the plan was compiled with steps = 49", "--set steps=10"])
    case(a, "max_new_tokens_on_h3", [h3, "--max-new-tokens", "8"], 1,
         ["--max-new-tokens: the plan's model (minimax_h3) has no config key 'max_new_tokens'"])
    case(a, "max_new_tokens_mismatch", [m31, "--max-new-tokens", "32"], 1,
         ["--max-new-tokens 32: the plan was compiled with max_new_tokens = 16", "--set max_new_tokens=32"])
    case(a, "prompt_len_mismatch", [m31, "--prompt-len", "7"], 1,
         ["--prompt-len 7: the plan was compiled for a prompt of 20 tokens", "--set prompt_len=N"])

    # ---- bad plans -------------------------------------------------------------------------------
    def plan_variant(name, content):
        p = W(name + ".plan")
        with open(p, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
        return p

    case(a, "plan_missing", [W("nope.plan")], 1, [W("nope.plan")])
    case(a, "plan_empty", [plan_variant("empty", "")], 1, [W("empty.plan")])
    case(a, "plan_truncated", [plan_variant("trunc", text[:len(text) // 2])], 1, [W("trunc.plan")])
    case(a, "plan_binary", [plan_variant("binary", bytes(range(256)) * 4)], 1, [W("binary.plan")])
    case(a, "plan_version", [plan_variant("v2", text.replace("format_version: 1", "format_version: 2", 1))], 1,
         [W("v2.plan"), "plan format version 2 is not supported by this h3 (1); recompile with h3c"])
    case(a, "plan_bad_ir", [plan_variant("badir", text.replace("rms_norm(", "rms_nrom(", 1))], 1,
         [W("badir.plan"), "rms_nrom"])
    case(a, "plan_not_mapping", [plan_variant("list", "- 1\n- 2\n")], 1, [W("list.plan")])

    # ---- bad inputs files ------------------------------------------------------------------------
    good = W("step_in.safetensors")
    step_inputs(good)
    step = [h3, "--graph", "step", "--inputs"]
    bad = W("in_dtype.safetensors")
    step_inputs(bad, t=("F64", [2], struct.pack("<2d", 0.3, 0.7)))
    case(a, "inputs_dtype", step + [bad], 1, [bad, "'t'", "dtype F64, expected F32"])
    bad = W("in_shape.safetensors")
    step_inputs(bad, video=("F32", [39, 12], stfile.f32([0.5] * (39 * 12))))
    case(a, "inputs_shape", step + [bad], 1, [bad, "'video'", "[39, 12]", "[40, 12]"])
    bad = W("in_extra.safetensors")
    step_inputs(bad, bogus=("F32", [1], stfile.f32([1.0])))
    case(a, "inputs_unexpected", step + [bad], 1, [bad, "unexpected tensor", "'bogus'", "graph 'step' takes"])
    bad = W("in_trunc.safetensors")
    with open(good, "rb") as f:
        blob = f.read()
    with open(bad, "wb") as f:
        f.write(blob[:len(blob) - 100])
    case(a, "inputs_truncated", step + [bad], 1, [bad])
    bad = W("in_header.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    case(a, "inputs_header_length", step + [bad], 1, [bad])
    case(a, "inputs_missing_file", step + [W("none.safetensors")], 1, [W("none.safetensors")])
    bad = W("in_json.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 8) + b"{not js}")
    case(a, "inputs_bad_json", step + [bad], 1, [bad])
    # ---- bad prompts and weights ----------------------------------------------------------------
    with open(W("p_short.txt"), "w") as f:
        f.write("1 2 3\n")
    case(a, "prompt_count", [m31, "--prompt", W("p_short.txt")], 1,
         [W("p_short.txt"), "3 tokens, but the plan was compiled for prompt_len = 20", "--set prompt_len=3"])
    with open(W("p_vocab.txt"), "w") as f:
        f.write(" ".join(str(i) for i in range(19)) + " 999\n")
    case(a, "prompt_vocab", [m31, "--prompt", W("p_vocab.txt")], 1,
         [W("p_vocab.txt"), "token 19 (id 999) is outside the vocabulary [0, 256)"])
    with open(W("p_text.txt"), "w") as f:
        f.write("1 2 three\n")
    case(a, "prompt_not_ids", [m31, "--prompt", W("p_text.txt")], 1, [W("p_text.txt"), "'three' is not a token id"])
    stfile.write(W("p_float.safetensors"), {"prompt": ("F32", [20], stfile.f32([1.0] * 20))})
    case(a, "prompt_float", [m31, "--prompt", W("p_float.safetensors")], 1,
         [W("p_float.safetensors"), "expected exactly one integer tensor"])
    case(a, "prompt_on_h3", [h3, "--prompt", W("p_short.txt")], 1, ["--prompt: graph 'sample' has no integer input"])
    stfile.write(W("w_wrong.safetensors"), {"foo.weight": ("F32", [2], stfile.f32([1.0, 2.0]))})
    case(a, "weights_wrong_model", [h3, "--weights", W("w_wrong.safetensors")], 1,
         [W("w_wrong.safetensors"), "missing", "foo.weight"])

    # ---- good runs --------------------------------------------------------------------------------
    o1, o2, tr = W("s1.safetensors"), W("s2.safetensors"), W("trace.json")
    rc1, rep, err1 = run([a.h3exec, h3, "--seed", "5", "--out", o1, "--profile", tr])
    rc2, _, _ = run([a.h3exec, h3, "--seed", "5", "--out", o2])
    if rc1 != 0 or rc2 != 0:
        failures.append("good_runs")
        print(f"FAIL good runs: exit {rc1} / {rc2}\n{err1}", file=sys.stderr)
    else:
        same = open(o1, "rb").read() == open(o2, "rb").read()
        got = stfile.read(o1)
        names_ok = sorted(got) == ["audio", "video"] and got["video"][:2] == ("F32", [40, 12])
        ev = json.load(open(tr))["traceEvents"]
        ops = [e for e in ev if e["cat"] != "control"]
        trace_ok = len(ops) > 49 * 20 and all({"name", "cat", "ts", "dur", "ph"} <= set(e) for e in ev)
        report_ok = all(s in rep for s in ("latency", "median", "p99", "per-op profile", "linear",
                                            "quality tier", "memory plan"))
        for ok, what in ((same, "same seed gives different bytes"), (names_ok, f"outputs {list(got)}"),
                         (trace_ok, f"trace has {len(ops)} op events"), (report_ok, "report incomplete:\n" + rep)):
            if not ok:
                failures.append(what)
                print(f"FAIL {what}", file=sys.stderr)
        print("ok   good runs (same bytes, outputs, trace, report)" if same and names_ok and trace_ok and report_ok
              else "FAIL good runs")
    n = cases[0] + 1
    if failures:
        print(f"cli_errors: {len(failures)} failed: {failures}", file=sys.stderr)
        return 1
    print(f"cli_errors: all {n} cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
