#!/usr/bin/env python3
"""cli_errors.py: h3exec on bad flags, bad plans and bad inputs: each case checks the exit
status, that stderr holds the expected message pieces (file, place, what is wrong), that
every error is in the one error format with a hint (tests/cli/error_format.py), that
nothing crashed (no signal) and that no --out file was written. Also checks that a good run
writes its outputs, that the same seed gives the same bytes, and the --profile trace.

Usage: cli_errors.py --h3c H3C --h3exec H3EXEC --source SRC --work DIR
Standard library only (tests/exec/stfile.py writes the safetensors files)."""
import argparse
import json
import os
import re
import random
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import stfile  # noqa: E402
from error_format import unformatted  # noqa: E402

failures = []


def run(cmd, timeout=300, env=None):
    full_env = dict(os.environ, **env) if env else None
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=full_env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def compile_plan(a, model, out, sets=(), flags=()):
    base = [a.h3c, "compile", os.path.join(a.source, "models", model), "--config", "tiny"]
    for s in sets:
        base += ["--set", s]
    rc, _, err = run(base + list(flags) + ["-o", out])
    if rc != 0:
        print(err, file=sys.stderr)
        sys.exit(f"cannot compile {model}")


def case(a, name, args, rc_want, pieces, with_out=True, env=None):
    """with_out: append --out FILE (the file must not appear); False when args must end the line.
    env: variables added to the environment (fault injection)."""
    out = os.path.join(a.work, "out_" + name + ".safetensors")
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = run([a.h3exec] + args + (["--out", out] if with_out else []), env=env)
    problems = []
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    if rc != rc_want:
        problems.append(f"exit {rc}, want {rc_want}")
    for p in pieces:
        if p not in err:
            problems.append(f"stderr lacks {p!r}")
    n_errors, bad = unformatted(err)
    problems += [f"stderr line {b}" for b in bad] + (["no error on stderr"] if n_errors == 0 else [])
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


def edit_line(text, start, old, new, mark):
    """Replaces `old` by `new` in the first line that starts (after blanks) with `start`;
    returns the new text and "LINE:COL" of `mark` in that line (where the reader reports)."""
    lines = text.split("\n")
    i = next(i for i, line in enumerate(lines) if line.lstrip().startswith(start))
    assert old in lines[i], (start, old)
    lines[i] = lines[i].replace(old, new, 1)
    return "\n".join(lines), f"{i + 1}:{lines[i].index(mark) + 1}"


def ir_offset(text, start):
    """The arena offset (` at N`) of the first IR line that starts with `start`."""
    line = next(line for line in text.split("\n") if line.lstrip().startswith(start))
    return int(line.rsplit(" at ", 1)[1])


# Hand-corrupted copies of the tiny H3 plan that the reader must refuse (plan/plan_check.c):
# an offset or a kernel launch field that the executor would otherwise trust.
CORRUPT = ("offset_overflow", "offset_unaligned", "overlap", "launch_block", "launch_grid", "launch_shared")


def corrupt_plans(text):
    """name (of CORRUPT) -> (plan text, "LINE:COL" of the error, message pieces)."""
    h, r3, q1 = (ir_offset(text, s) for s in ("%h = rms_norm(%x.2,", "%3 = reshape(%q)", "%q.1 = rms_norm(%3,"))
    block = next(line for line in text.split("\n") if line.startswith("  block: ["))
    n = int(block.split("[")[1].split(",")[0])
    edits = {  # line start, old, new, the error's place in the line, message pieces
        "offset_overflow": ("%h = rms_norm(%x.2,", f" at {h}", " at 9223372036854775552", "%h",
                            ["value %h at offset 9223372036854775552 (1024 bytes) does not fit the", "arena of graph 'text'"]),
        "offset_unaligned": ("%h = rms_norm(%x.2,", f" at {h}", f" at {h + 4}", "%h",
                             [f"value %h at offset {h + 4} is not 256-byte aligned"]),
        "overlap": ("%q.1 = rms_norm(%3,", f" at {q1}", f" at {r3}", "%q.1",
                    [f"value %q.1 (offset {r3},", f"%3 (offset {r3},", "live at the same time in overlapping"]),
        "launch_block": ("block: [", f"[{n},", f"[{n // 2},", "[",
                         [f"the block has {n // 2} threads but the kernel is written for {n}"]),
        "launch_grid": ("grid: [", ", 1, 1]", ", 70000, 1]", "[", ["grid y is 70000; CUDA allows 1 to 65535"]),
        "launch_shared": ("shared_bytes: ", ": 0", ": 300000", "3",
                          ["shared_bytes is 300000; a block has 0 to 232448 bytes of shared memory"]),
    }
    return {k: edit_line(text, *edits[k][:4]) + (edits[k][4],) for k in CORRUPT}


def corrupt_side_window(text):
    """The tiny M3.1 plan (compiled without kv-write-fusion: then decode's indexer runs as a
    side-stream branch beside qkv) with a side-stream branch's first linear (pass
    side-streams) moved onto the buffer of the first main-stream linear after it: in plan order the two are never
    live at once (the side linear's readers run first), but the branch may run beside the main
    ops of its window, so the reader must refuse them sharing bytes. The main linear is larger,
    so the bytes the side linear moves onto are that linear's alone.
    -> (plan text, "LINE:COL", message pieces)."""
    lines = text.split("\n")
    side_mark = re.compile(r"\bside = 1\b")  # not `beside = 1`
    i = next(i for i, line in enumerate(lines) if "= linear(" in line and side_mark.search(line))
    j = next(j for j in range(i + 1, len(lines)) if "= linear(" in lines[j] and not side_mark.search(lines[j]))
    side, main = (lines[k].strip().split(" = ")[0] for k in (i, j))
    at = int(lines[j].rsplit(" at ", 1)[1])
    lines[i] = lines[i].rsplit(" at ", 1)[0] + f" at {at}"
    loc = f"{j + 1}:{lines[j].index(main) + 1}"
    return "\n".join(lines), loc, [f"value {main} (offset {at},", f"and {side} (offset {at},", "live at the same time"]


def prepare(a):
    """Compiles the two tiny plans and writes every bad file the cases use (idempotent)."""
    os.makedirs(a.work, exist_ok=True)
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    compile_plan(a, "minimax_h3.g", W("h3.plan"))
    compile_plan(a, "minimax_m3_1.g", W("m31.plan"))
    compile_plan(a, "minimax_m3_1.g", W("m31_sw.plan"), flags=("--disable-pass", "kv-write-fusion"))
    # the full M3.1 (795 GiB of weights, more than any host here): its plan without kernels
    rc, _, err = run([a.h3c, "compile", os.path.join(a.source, "models", "minimax_m3_1.g"), "--config", "full",
                      "--no-kernels", "-o", W("m31_full.plan")])
    if rc != 0:
        sys.exit(f"cannot compile the full M3.1 plan:\n{err}")
    with open(W("huge.plan"), "wb") as f:  # sparse: past the 1 GiB limit of a plan, no disk used
        f.truncate((1 << 30) + 4096)
    text = open(W("h3.plan")).read()
    variants = {"empty": "", "trunc": text[:len(text) // 2], "binary": bytes(range(256)) * 4,
                "v2": text.replace("format_version: 1", "format_version: 2", 1),
                "badir": text.replace("rms_norm(", "rms_nrom(", 1), "list": "- 1\n- 2\n"}
    variants.update({"bad_" + k: v[0] for k, v in corrupt_plans(text).items()})
    variants["bad_side_window"] = corrupt_side_window(open(W("m31_sw.plan")).read())[0]
    for name, content in variants.items():
        with open(W(name + ".plan"), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    step_inputs(W("step_in.safetensors"))
    step_inputs(W("in_dtype.safetensors"), t=("F64", [2], struct.pack("<2d", 0.3, 0.7)))
    step_inputs(W("in_shape.safetensors"), video=("F32", [39, 12], stfile.f32([0.5] * (39 * 12))))
    step_inputs(W("in_extra.safetensors"), bogus=("F32", [1], stfile.f32([1.0])))
    step_inputs(W("in_nan.safetensors"), video=("F32", [40, 12], stfile.f32([float("nan")] + [0.5] * (40 * 12 - 1))))
    blob = open(W("step_in.safetensors"), "rb").read()
    raw = {"in_trunc": blob[:len(blob) - 100], "in_header": struct.pack("<Q", 1 << 40) + b"{}",
           "in_json": struct.pack("<Q", 8) + b"{not js}"}
    for name, content in raw.items():
        with open(W(name + ".safetensors"), "wb") as f:
            f.write(content)
    texts = {"p_short.txt": "1 2 3\n", "p_vocab.txt": " ".join(str(i) for i in range(19)) + " 999\n",
             "p_text.txt": "1 2 three\n"}
    for name, content in texts.items():
        with open(W(name), "w") as f:
            f.write(content)
    stfile.write(W("p_float.safetensors"), {"prompt": ("F32", [20], stfile.f32([1.0] * 20))})
    stfile.write(W("w_wrong.safetensors"), {"foo.weight": ("F32", [2], stfile.f32([1.0, 2.0]))})
    with open(W("w_trunc.safetensors"), "wb") as f:  # its tensor's last bytes cut off
        f.write(open(W("w_wrong.safetensors"), "rb").read()[:-4])


def case_table(a):
    """(name, h3exec args, exit status, stderr pieces, append --out[, env]) for every error case."""
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    h3, m31 = W("h3.plan"), W("m31.plan")
    step = [h3, "--graph", "step", "--inputs"]
    bad = corrupt_plans(open(h3).read()) if os.path.exists(h3) else {k: (None, "", []) for k in CORRUPT}
    sw = W("m31_sw.plan")
    bad["side_window"] = corrupt_side_window(open(sw).read()) if os.path.exists(sw) else (None, "", [])
    return [
        # bad flags (exit 2)
        ("flag_unknown", [h3, "--bogus"], 2, ["unknown flag '--bogus'", "h3exec --help"], True),
        ("flag_no_plan", ["--seed", "1"], 2, ["no plan given"], True),
        ("flag_seed_text", [h3, "--seed", "abc"], 2, ["--seed expects an integer", "'abc'"], True),
        ("flag_backend", [h3, "--backend", "tpu"], 2, ["--backend must be cpu, cuda or auto", "'tpu'"], True),
        ("flag_iterations_zero", [h3, "--iterations", "0"], 2, ["--iterations expects an integer in [1,"], True),
        ("flag_missing_value", [h3, "--out", W("x.safetensors"), "--weights"], 2, ["--weights needs a value"],
         False),
        ("flag_two_plans", [h3, h3], 2, ["more than one plan given"], True),
        ("flag_dump_alone", [m31, "--dump-ops", "moe"], 2, ["--dump-ops KINDS and --dump FILE go together"], True),
        ("dump_unknown_kind", [m31, "--dump-ops", "moe,bogus+operands", "--dump", W("d_bad.safetensors")], 1,
         ["--dump-ops: unknown op kind 'bogus' (before +operands)", "h3c ops lists them"], True),
        ("flag_prompt_both", [m31, "--prompt", W("p_short.txt"), "--prompt-len", "20"], 2,
         ["--prompt and --prompt-len exclude each other"], True),
        ("flag_device_memory", [h3, "--device-memory", "12XB"], 2,
         ["--device-memory expects a size such as 24GiB", "'12XB'"], True),
        # flags that contradict the plan or the machine (exit 1)
        ("cuda_unavailable", [h3, "--backend", "cuda"], 1,
         ["CUDA backend not available in this build/no GPU found", "--backend cpu"], True),
        ("attention_on_cpu", [h3, "--backend", "cpu", "--attention", "flash"], 1,
         ["--attention flash: the cpu backend has only the reference attention", "--backend cuda"], True),
        ("graph_unknown", [h3, "--graph", "nosuch"], 1,
         [f"{h3}: no graph named 'nosuch'", "the plan's graphs: ", "step", "sample"], True),
        ("steps_mismatch", [h3, "--steps", "10"], 1,
         ["--steps 10: the plan was compiled with steps = 49", "--set steps=10"], True),
        ("max_new_tokens_on_h3", [h3, "--max-new-tokens", "8"], 1,
         ["--max-new-tokens: the plan's model (minimax_h3) has no config key 'max_new_tokens'"], True),
        ("max_new_tokens_mismatch", [m31, "--max-new-tokens", "16"], 1,
         ["--max-new-tokens 16: the plan was compiled with max_new_tokens = 32", "--set max_new_tokens=16"], True),
        ("prompt_len_mismatch", [m31, "--prompt-len", "7"], 1,
         ["--prompt-len 7: the plan was compiled for a prompt of 20 tokens", "--set prompt_len=N"], True),
        ("device_memory_too_small", [h3, "--backend", "cpu", "--device-memory", "1KiB"], 1,
         ["--device-memory 1.0 KiB cannot hold what must stay resident", "give --device-memory"], True),
        ("weights_exceed_memory", [W("m31_full.plan")], 1,
         [f"{W('m31_full.plan')}: the weights take 794.4 GiB of host memory", "GiB available",
          "--config small or tiny"], True),
        # bad plans
        ("plan_missing", [W("nope.plan")], 1, [W("nope.plan")], True),
        ("plan_empty", [W("empty.plan")], 1, [W("empty.plan"), "empty"], True),
        ("plan_too_large", [W("huge.plan")], 1,
         [f"{W('huge.plan')}: error: the plan is 1.00 GiB; h3 reads plans of at most 1 GiB"], True),
        ("plan_truncated", [W("trunc.plan")], 1, [W("trunc.plan") + ":"], True),
        ("plan_binary", [W("binary.plan")], 1, [W("binary.plan") + ":1:"], True),
        ("plan_version", [W("v2.plan")], 1,
         [W("v2.plan"), "plan format version 2 is not supported by this h3 (1); recompile with h3c"], True),
        ("plan_bad_ir", [W("badir.plan")], 1, [W("badir.plan"), "unknown op 'rms_nrom'"], True),
        ("plan_not_mapping", [W("list.plan")], 1, [W("list.plan"), "mapping"], True),
    ] + [
        # offsets and launch fields the executor would trust: refused at load, at their place
        ("plan_" + k, [W(f"bad_{k}.plan")], 1,
         [f"{W(f'bad_{k}.plan')}:{bad[k][1]}: error: "] + bad[k][2] + ["recompile the plan with h3c"], True)
        for k in CORRUPT + ("side_window",)
    ] + [
        # bad inputs files
        ("inputs_dtype", step + [W("in_dtype.safetensors")], 1,
         [W("in_dtype.safetensors"), "'t'", "dtype F64, expected F32"], True),
        ("inputs_shape", step + [W("in_shape.safetensors")], 1,
         [W("in_shape.safetensors"), "'video'", "[39, 12]", "[40, 12]"], True),
        ("inputs_unexpected", step + [W("in_extra.safetensors")], 1,
         [W("in_extra.safetensors"), "unexpected tensor", "'bogus'", "graph 'step' takes"], True),
        ("check_finite", step + [W("in_nan.safetensors"), "--check-finite"], 1,
         ["--check-finite: ", "graph 'step' hold", "NaN", "video"], True),
        ("inputs_truncated", step + [W("in_trunc.safetensors")], 1, [W("in_trunc.safetensors")], True),
        ("inputs_header_length", step + [W("in_header.safetensors")], 1, [W("in_header.safetensors")], True),
        ("inputs_missing_file", step + [W("none.safetensors")], 1, [W("none.safetensors")], True),
        ("inputs_bad_json", step + [W("in_json.safetensors")], 1, [W("in_json.safetensors")], True),
        # bad prompts and weights
        ("prompt_count", [m31, "--prompt", W("p_short.txt")], 1,
         [W("p_short.txt"), "3 tokens, but the plan was compiled for prompt_len = 20", "--set prompt_len=3"], True),
        ("prompt_vocab", [m31, "--prompt", W("p_vocab.txt")], 1,
         [W("p_vocab.txt"), "token 19 (id 999) is outside the vocabulary [0, 256)"], True),
        ("prompt_not_ids", [m31, "--prompt", W("p_text.txt")], 1, [W("p_text.txt"), "'three' is not a token id"],
         True),
        ("prompt_float", [m31, "--prompt", W("p_float.safetensors")], 1,
         [W("p_float.safetensors"), "expected exactly one integer tensor"], True),
        ("prompt_on_h3", [h3, "--prompt", W("p_short.txt")], 1,
         ["--prompt: graph 'sample' has no integer input"], True),
        ("weights_wrong_model", [h3, "--weights", W("w_wrong.safetensors")], 1,
         [W("w_wrong.safetensors"), "missing", "foo.weight"], True),
        ("weights_truncated", [h3, "--weights", W("w_trunc.safetensors")], 1,
         [W("w_trunc.safetensors"), "tensor 'foo.weight'", "go beyond the data", "truncated"], True),
        # injected allocation failures (H3_FAULT_ALLOC=N fails the Nth): the buffer, its size
        # and the plan's memory figure, never a crash. The cpu backend runs on the weight
        # store's buffers (no allocation of its own for them): its first is an arena
        ("fault_alloc_arena", [h3], 1,
         ["out of cpu memory for graph 'sample''s activation arena", "the plan needs",
          "of weights", "of activation arenas", "compile a smaller plan"], True,
         {"H3_FAULT_ALLOC": "1"}),
        ("fault_alloc_run", step + [W("step_in.safetensors")], 1,
         ["out of cpu memory for input 'video'", "the plan needs"], True, {"H3_FAULT_ALLOC": "3"}),
    ]


def good_runs(a):
    """A good run writes its outputs; the same seed gives the same bytes; trace and report;
    NaN outputs are counted in the report (and written) without --check-finite."""
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    h3 = W("h3.plan")
    on = W("nan_out.safetensors")
    rcn, repn, errn = run([a.h3exec, h3, "--graph", "step", "--inputs", W("in_nan.safetensors"), "--out", on])
    ok = rcn == 0 and "outputs with NaN or Inf" in repn and "NaN" in repn and os.path.exists(on)
    print(("ok   " if ok else "FAIL ") + "good run: NaN outputs reported and written without --check-finite")
    if not ok:
        failures.append("nan report")
        print(f"exit {rcn}\n{repn}\n{errn}", file=sys.stderr)
    o1, o2, tr = W("s1.safetensors"), W("s2.safetensors"), W("trace.json")
    rc1, rep, err1 = run([a.h3exec, h3, "--seed", "5", "--out", o1, "--profile", tr])
    rc2, _, _ = run([a.h3exec, h3, "--seed", "5", "--out", o2])
    if rc1 != 0 or rc2 != 0:
        failures.append("good_runs")
        print(f"FAIL good runs: exit {rc1} / {rc2}\n{err1}", file=sys.stderr)
        return
    got = stfile.read(o1)
    ev = json.load(open(tr))["traceEvents"]
    ops = [e for e in ev if e["cat"] != "control"]
    checks = [
        (open(o1, "rb").read() == open(o2, "rb").read(), "same seed gives the same bytes"),
        (sorted(got) == ["audio", "video"] and got["video"][:2] == ("F32", [40, 12]), f"outputs {list(got)}"),
        (len(ops) > 49 * 20 and all({"name", "cat", "ts", "dur", "ph"} <= set(e) for e in ev),
         f"trace: {len(ops)} op events with name/cat/ts/dur"),
        (all(s in rep for s in ("latency", "median", "p90", "p99", "per-op profile", "linear", "quality tier",
                                "memory plan", "fused groups")), "report sections"),
    ]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + "good run: " + what)
        if not ok:
            failures.append(what)
    dump_run(a)


def dump_run(a):
    """--dump-ops: the tiny M3.1 generate's routers (with operands) and moe results, one tensor per
    execution, named op<ID>.<KIND>.L<LINE>.<a|r><I>.n<RUN>; the outputs equal those of a run
    without it."""
    W = lambda n: os.path.join(a.work, n)  # noqa: E731
    m31, dp, o1, o2 = W("m31.plan"), W("dump.safetensors"), W("m31_d1.safetensors"), W("m31_d2.safetensors")
    rc1, _, err = run([a.h3exec, m31, "--dump-ops", "router_topk+operands,moe", "--dump", dp, "--out", o1])
    rc2, _, _ = run([a.h3exec, m31, "--out", o2])
    if rc1 != 0 or rc2 != 0:
        failures.append("dump_run")
        print(f"FAIL dump run: exit {rc1} / {rc2}\n{err}", file=sys.stderr)
        return
    got = stfile.read(dp)
    kinds = {k.split(".")[1] for k in got}
    router = sorted(k for k in got if ".router_topk." in k and ".r0." in k)
    operands = [k for k in got if ".router_topk." in k and ".a1." in k]
    checks = [
        (kinds == {"router_topk", "moe"}, f"only the kinds asked for ({sorted(kinds)})"),
        (len(router) > 10 and all(got[k][0] == "I32" for k in router), f"{len(router)} router id results"),
        (len(operands) == len(router) and all(got[k][0] == "F32" for k in operands), "router operands kept"),
        (len({k.rsplit(".", 1)[1] for k in router}) > 1, "executions numbered"),
        (open(o1, "rb").read() == open(o2, "rb").read(), "outputs equal a run without --dump-ops"),
    ]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + "dump run: " + what)
        if not ok:
            failures.append(what)


def large_inputs(a):
    """Inputs of a few MB compile in seconds, without a crash: 200000 config keys (their
    lookups were a linear scan each: 40 s), a chain of 20000 elementwise ops (one fused
    group of 20000 ops overflowed codegen's stack: SIGSEGV; groups now hold at most 1024), 10000
    small fused groups in one region (the fusion pass rebuilt its region index per group: 3
    minutes); an error in a 200 KB line quotes a window of it, not the whole line."""
    keys = os.path.join(a.work, "many_keys.g")
    with open(keys, "w") as f:
        f.write("model x\nconfig tiny {\n" + "".join(f"  k{i} = {i}\n" for i in range(200000)) +
                "}\ngraph main(x: f32[4]) -> (y: f32[4]) {\n  return x\n}\n")
    chain = os.path.join(a.work, "long_chain.g")
    with open(chain, "w") as f:
        f.write("model x\nconfig tiny { a = 1 }\ngraph main(x: f32[4]) -> (y: f32[4]) {\n  y0 = x + 1.0\n" +
                "".join(f"  y{i} = y{i - 1} + 1.0\n" for i in range(1, 20000)) + "  return y19999\n}\n")
    groups = os.path.join(a.work, "many_groups.g")  # 10000 fused groups in one region
    with open(groups, "w") as f:
        f.write("model x\nconfig tiny { a = 1 }\ngraph main(x: f32[4]) -> (y: f32[4]) {\n  y0 = x\n" +
                "".join(f"  a{i} = reshape(y{i - 1} * 2.0 + 1.0, shape = [2, 2])\n"
                        f"  y{i} = reshape(a{i} * 0.5, shape = [4])\n" for i in range(1, 5001)) +
                "  return y5000\n}\n")
    wide = os.path.join(a.work, "wide_line.g")  # an error deep in a 200 KB line: quoted as a window
    with open(wide, "w") as f:
        f.write("model x\nconfig tiny { a = 1 }\ngraph main(x: f32[4]) -> (y: f32[4]) {\n  y = " +
                "+".join(["x"] * 50000) + "+zz\n  return y\n}\n")
    rc, _, err = run([a.h3c, "compile", wide, "--config", "tiny", "-o", os.path.join(a.work, "wide.plan")])
    if rc != 1 or len(err) > 2000 or "..." not in err or "^" not in err:
        failures.append("wide_line")
        print(f"FAIL wide_line: exit {rc}, {len(err)} bytes of errors: {err[:600]}", file=sys.stderr)
    for name, src, limit in (("many_keys", keys, 20), ("long_chain", chain, 60), ("many_groups", groups, 30)):
        t0 = time.monotonic()
        rc, _, err = run([a.h3c, "compile", src, "--config", "tiny", "-o", os.path.join(a.work, name + ".plan")])
        dt = time.monotonic() - t0
        if rc != 0 or dt > limit:
            failures.append(name)
            print(f"FAIL {name}: exit {rc} after {dt:.1f} s (limit {limit} s): {err[-400:]}", file=sys.stderr)


def kernel_limits(a):
    """Ops stay within what the executor and a kernel launch take: an elementwise group with 10
    outputs (the executor runs ops of at most 8 results) and one of 100 inputs (a launch takes
    at most 64 arguments) compiled into plans that failed to run; now each kernel has at most 64
    arguments, and the outputs are bitwise those of the plan without fusion. A concat of 100
    operands is an error at compile time that names the limit and says what to write."""
    src = {"many_outputs": "model x\nconfig tiny { a = 1 }\ngraph main(x: f32[4]) -> (" +
           ", ".join(f"y{i}: f32[4]" for i in range(10)) + ") {\n  t = x * 2.0\n" +
           "".join(f"  y{i} = t + {i}.0\n" for i in range(10)) +
           "  return " + ", ".join(f"y{i}" for i in range(10)) + "\n}\n",
           "many_inputs": "model x\nconfig tiny { a = 1 }\ngraph main(" +
           ", ".join(f"x{i}: f32[4]" for i in range(100)) + ") -> (y: f32[4]) {\n  y = " +
           " * 0.5 + ".join(f"x{i}" for i in range(100)) + "\n  return y\n}\n"}
    for name, text in src.items():
        g = os.path.join(a.work, name + ".g")
        with open(g, "w") as f:
            f.write(text)
        outs = []
        for tag, extra in (("fused", []), ("unfused", ["--disable-pass", "elementwise-fusion"])):
            plan = os.path.join(a.work, f"{name}_{tag}.plan")
            out = os.path.join(a.work, f"{name}_{tag}.safetensors")
            rc, _, err = run([a.h3c, "compile", g, "--config", "tiny", "-o", plan] + extra)
            if rc == 0:
                rc, _, err = run([a.h3exec, plan, "--backend", "cpu", "--graph", "main", "--out", out])
            if rc != 0:
                failures.append(f"{name}_{tag}")
                print(f"FAIL {name} ({tag}): exit {rc}: {err[-400:]}", file=sys.stderr)
                break
            if tag == "fused":
                with open(plan) as f:
                    widest = max((line.count(",") + 1 for line in f if line.startswith("  args: [")), default=0)
                if widest > 64:
                    failures.append(f"{name}_args")
                    print(f"FAIL {name}: a kernel of {widest} arguments (at most 64)", file=sys.stderr)
            with open(out, "rb") as f:
                outs.append(f.read())
        if len(outs) == 2 and outs[0] != outs[1]:
            failures.append(f"{name}_outputs")
            print(f"FAIL {name}: fused outputs differ from the unfused plan's", file=sys.stderr)
    # a concat wider than a kernel: an error naming the limit, with a hint (was "please report it")
    g = os.path.join(a.work, "wide_concat.g")
    with open(g, "w") as f:
        f.write("model x\nconfig tiny { a = 1 }\ngraph main(" + ", ".join(f"x{i}: f32[4]" for i in range(100)) +
                ") -> (y: f32[400]) {\n  y = concat(" + ", ".join(f"x{i}" for i in range(100)) +
                ", axis = 0)\n  return y\n}\n")
    rc, _, err = run([a.h3c, "compile", g, "--config", "tiny", "-o", os.path.join(a.work, "wide_concat.plan")])
    if rc != 1 or "100 operands; one kernel takes at most 62" not in err or "hint: concatenate in groups" not in err:
        failures.append("wide_concat")
        print(f"FAIL wide_concat: exit {rc}: {err[-400:]}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    for f in ("--h3c", "--h3exec", "--source", "--work"):
        ap.add_argument(f, required=True)
    ap.add_argument("--setup", action="store_true", help="only compile the plans and write the files")
    ap.add_argument("--case", help="run one case (after --setup), or 'good_runs'")
    ap.add_argument("--list", action="store_true", help="print the case names")
    a = ap.parse_args()
    if a.list:
        print("\n".join([c[0] for c in case_table(a)] + ["good_runs", "large_inputs", "kernel_limits"]))
        return 0
    if a.setup or not a.case:
        prepare(a)
        if a.setup:
            return 0
    table = {c[0]: c for c in case_table(a)}
    names = [a.case] if a.case else list(table) + ["good_runs", "large_inputs", "kernel_limits"]
    for name in names:
        if name == "good_runs":
            good_runs(a)
        elif name == "large_inputs":
            large_inputs(a)
        elif name == "kernel_limits":
            kernel_limits(a)
        elif name in table:
            _, args, rc, pieces, with_out, *env = table[name]
            case(a, name, args, rc, pieces, with_out, env[0] if env else None)
        else:
            sys.exit(f"unknown case {name}")
    if failures:
        print(f"cli_errors: {len(failures)} failed: {failures}", file=sys.stderr)
        return 1
    print(f"cli_errors: all {len(names)} cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
