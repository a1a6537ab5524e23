#!/usr/bin/env python3
"""test_bench_tables.py: the bench drivers' parsing and verdicts, without a GPU or PyTorch.

Checks bench/block_peers.py (the "h3bench" lines, the goals' verdicts, the one table with the
GEMM rows from bench/gemm_rounds.py's JSON and the sample row from an h3exec report, PyTorch's
times from a --torch-json file) and bench/gemm_rounds.py (who goes first in each round, the
medians, and its main loop with both sides faked), and bench/m31_floor.py (the byte counts of an
M3.1 decode step and a DSpark round, by hand from the model's small config). A regression there
would print a wrong ratio or verdict in the issue's table.
Exit 0: all checks pass; 1: a check failed (each failure printed).
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import types

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)

from block_peers import goal_text, read_h3_lines  # noqa: E402  (path set above)
import gemm_rounds  # noqa: E402
from gemm_rounds import first_side, medians  # noqa: E402
import m31_floor  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def test_read_h3_lines():
    h3 = read_h3_lines(["h3bench block 90.5", "noise line", "h3bench attention_flash 49.4 621.3",
                        "h3bench block 89.8", "h3bench short"])
    check(h3.get("block") == 89.8, "a later h3bench line replaces an earlier one")
    check(h3.get("attention_flash") == 49.4 and h3.get("attention_flash_tflops") == 621.3,
          "the rate of a 4-field line is kept as NAME_tflops")
    check("short" not in h3 and "block_tflops" not in h3, "short lines and 3-field rates are not invented")


def test_goal_text():
    check(goal_text("gemm_fc2", 1.029, {}) == "<= 1.03 met", "a GEMM at 1.029 meets 1.03")
    check(goal_text("gemm_fc2", 1.031, {}) == "<= 1.03 NOT met", "a GEMM at 1.031 misses 1.03")
    check(goal_text("block_compile", 0.97, {}) == "<= 0.97 met", "the block goal is inclusive")
    check(goal_text("attention_cudnn", 1.06, {}).endswith("NOT met"), "cuDNN attention at 1.06 misses")
    check(goal_text("block_eager", 0.5, {}) == "", "a row without a goal prints no verdict")
    check(goal_text("gemm_qkv", None, {}) == "", "no ratio (a side missing): no verdict")
    h3 = {"attention_flash_tflops": 621.0, "nmse_flash": 5.5e-6, "nmse_limit": 1e-4}
    t = goal_text("attention_flash", 0.58, h3)
    check(t.startswith("h3 621 TFLOP/s >= 350 met") and t.endswith("<= 1e-04 met"),
          f"flash at 621 TFLOP/s within the NMSE limit is met ({t!r})")
    h3 = {"attention_flash_tflops": 300.0, "nmse_flash": 2e-4, "nmse_limit": 1e-4}
    t = goal_text("attention_flash", 0.9, h3)
    check(t.count("NOT met") == 2, f"flash below 350 TFLOP/s and over the NMSE limit fails twice ({t!r})")


def test_rounds():
    check([first_side(r) for r in range(4)] == ["h3", "torch", "h3", "torch"],
          "the side that goes first alternates, h3 in the first round")
    keys = ["gemm_a", "gemm_b"]
    rounds = [{"h3": {"gemm_a": a, "gemm_b": b}, "torch": {"gemm_a": 2 * a, "gemm_b": 1.0}}
              for a, b in ((1.0, 5.0), (4.0, 6.0), (2.0, 9.0), (3.0, 7.0))]
    med = medians(rounds, keys)
    check(med["h3"]["gemm_a"] == 2.5 and med["h3"]["gemm_b"] == 6.5,
          f"medians of 4 rounds are the mean of the middle two ({med['h3']})")
    check(med["torch"]["gemm_a"] == 5.0 and med["torch"]["gemm_block_total"] == 6.0,
          f"PyTorch's medians and their sum ({med['torch']})")
    check(med["h3"]["gemm_block_total"] == 9.0, "gemm_block_total is the sum of the medians")


def test_rounds_main():
    """gemm_rounds.main with both sides faked: the order of the sides, the table, the JSON."""
    order, count = [], {"h3": 0, "torch": 0}
    keys = ("gemm_qkv", "gemm_out_proj", "gemm_fc1", "gemm_fc2")

    def side(name, base):
        def run(*_):
            order.append(name)
            count[name] += 1
            return {k: base * count[name] + i for i, k in enumerate(keys)}
        return run
    saved = gemm_rounds.h3_round, gemm_rounds.torch_round, sys.argv, sys.modules.get("torch")
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: True)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rounds.json")
        try:
            gemm_rounds.h3_round, gemm_rounds.torch_round = side("h3", 1.0), side("torch", 2.0)
            sys.modules["torch"] = fake
            sys.argv = ["gemm_rounds.py", "attention_bench", "--rounds", "3", "--out", out]
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                gemm_rounds.main()
        finally:
            gemm_rounds.h3_round, gemm_rounds.torch_round, sys.argv = saved[:3]
            if saved[3] is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved[3]
        check(order == ["h3", "torch", "torch", "h3", "h3", "torch"], f"the sides alternate ({order})")
        with open(out) as f:
            got = json.load(f)
    # h3's qkv: 1, 2, 3 -> median 2; torch's qkv: 2, 4, 6 -> 4; fc2 (+3): 5 and 7
    check(got["h3"]["gemm_qkv"] == 2.0 and got["torch"]["gemm_qkv"] == 4.0, "medians over the rounds")
    check(got["h3"]["gemm_block_total"] == 2 + 3 + 4 + 5, "the total of h3's medians")
    check([rd["first"] for rd in got["rounds"]] == ["h3", "torch", "h3"], "each round names its first side")
    check("gemm_fc2" in text.getvalue() and "0.714  <= 1.03 met" in text.getvalue(),
          "the table prints fc2's ratio 5 / 7 and its verdict")


def test_block_table():
    gemms = ("gemm_qkv", "gemm_out_proj", "gemm_fc1", "gemm_fc2")
    with tempfile.TemporaryDirectory() as d:
        def path(name, text):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(text)
            return p
        att = path("attention_bench.log", "h3bench attention_cudnn 53.8 570\n"
                   "h3bench attention_flash 49.4 621\nh3bench nmse_flash 5.5e-06\n"
                   "h3bench nmse_limit 1e-04\nh3bench gemm_fc2 9.9 500\n")
        blk = path("block_bench.log", "h3bench block 89.8\n")
        rounds = {"h3": dict(zip(gemms, (10.9, 3.7, 14.3, 7.5))), "torch": dict(zip(gemms, (10.9, 3.7, 14.8, 7.2)))}
        for side in rounds:
            rounds[side]["gemm_block_total"] = sum(rounds[side].values())
        gj = path("gemm_rounds.json", json.dumps({**rounds, "rounds": []}))
        tj = path("peers.json", json.dumps({"torch": {"block_compile": 95.0, "block_eager": 107.0,
                                                      "attention_cudnn": 53.7, "attention_flash": 85.2,
                                                      "gemm_fc2": 1.0}}))
        sample = path("sample.log", "=== latency (ms, wall time per iteration) ===\n"
                      "  min 220000.0  median 220000.0  mean 220000.0\n"
                      "  GPU compute time: mean 219000.0 ms per iteration (CUDA events)\n")
        out = os.path.join(d, "out.json")
        p = subprocess.run([sys.executable, os.path.join(BENCH, "block_peers.py"), att, blk,
                            "--torch-json", tj, "--gemm-json", gj, "--sample-log", sample, "--out", out],
                           capture_output=True, text=True)
        check(p.returncode == 0, f"block_peers.py exits 0 ({p.stderr.strip()})")
        lines = {ln.split("  ")[0].strip(): ln for ln in p.stdout.splitlines()}

        def row(label, *parts):
            ln = lines.get(label, "")
            check(all(x in ln for x in parts), f"row {label!r} shows {parts} (got {ln!r})")
        row("block vs torch.compile", "89.800", "95.000", "0.945", "<= 0.97 met")
        row("attention cudnn vs torch cuDNN", "53.800", "53.700", "1.002", "<= 1.05 met")
        row("GEMM fc1 (Lt vs cuBLAS)", "14.300", "14.800", "0.966", "<= 1.03 met")
        row("GEMM fc2 (Lt vs cuBLAS)", "7.500", "7.200", "1.042", "<= 1.03 NOT met")
        row("step vs torch.compile block x50", "4469.388", "4750.000", "0.941")
        check(any("h3/estimate  0.839" in ln and "goal <= 0.90 met" in ln for ln in p.stdout.splitlines()),
              "the sample row: 220 s against 107 ms x 50 x 49 = 262.15 s is 0.839, met")
        check("medians of bench/gemm_rounds.py's alternating rounds" in p.stdout,
              "the table says where its GEMM rows come from")
        with open(out) as f:
            saved = json.load(f)
        check(saved["h3"]["gemm_fc2"] == 7.5 and saved["torch"]["gemm_fc2"] == 7.2,
              "--gemm-json replaces both sides' GEMM times (attention_bench's single run and the old torch value)")
        check(abs(saved["sample"]["eager_estimate_s"] - 262.15) < 1e-9, "the eager estimate is block x 50 x 49")


def test_m31_floor():
    c = m31_floor.config("small", [])
    check((c["dim"], c["experts"], c["top_k"], c["gamma"]) == (6144, 32, 4, 8), f"small's dims read from the .g: {c}")
    r = m31_floor.round_bytes(c, 1, 2048, "bf16", {})
    # by hand: 4 layers of attention (qkv 9216 x 6144, o 6144 x 8192, norms), the dense MLP
    # (3 x 6144 x 12288), 3 sparse layers' indexer (5 x 128 x 6144), f32 router (32 x 6145),
    # shared expert (3 x 6144 x 3072) and 4 experts (3 x 6144 x 3072 each), lm_head + norm,
    # the token's embedding row; K/V of 2049 keys on the dense layer, of 2048 selected keys
    # and IK of 2049 keys on each sparse layer
    attn = 2 * (9216 * 6144 + 6144 * 8192 + 2 * 6144 + 2 * 128)
    sparse = 2 * 5 * 128 * 6144 + 4 * 32 * 6145 + 2 * 3 * 6144 * 3072
    weights = (4 * attn + 2 * 3 * 6144 * 12288 + 3 * (sparse + 4 * 2 * 3 * 6144 * 3072)
               + 2 * (200064 * 6144 + 6144) + 2 * 6144)
    cache = 2049 * 2048 + 3 * (2048 * 2048 + 2049 * 256)
    check(abs(r["plain_step"] - (weights + cache)) < 1, f"plain step bytes {r['plain_step']} vs {weights + cache}")
    check(5.4e9 < r["plain_step"] < 5.6e9, "issue 17's ~5.5 GB a batch-1 token")
    want_experts = 32 * (1 - (28 / 32) ** 9)  # 9 verify rows, uniform routing
    check(abs(r["verify_experts"] - want_experts) < 1e-9, f"uniform expectation {r['verify_experts']}")
    m = m31_floor.round_bytes(c, 1, 2048, "bf16", {9: 10.0})
    check(abs((r["verify"] - m["verify"]) - 3 * (want_experts - 10) * 2 * 3 * 6144 * 3072) < 16,
          "a measured count replaces the expectation, per sparse layer")
    q = m31_floor.round_bytes(c, 1, 2048, "nvfp4", {})
    check(abs((r["commit"] - q["commit"]) - (2 - 0.5625) * 6144 * 18432) < 1, "fc in NVFP4 in the commit")
    check(abs((r["draft"] - q["draft"]) - (2 - 0.5625) * 6144 * (8192 + 3 * 12288)) < 1,
          "o_proj, gate_up and down in NVFP4 in the draft")
    check(abs(q["round"] - (q["draft"] + q["verify"] + q["commit"])) < 1, "a round is its parts")


for test in (test_read_h3_lines, test_goal_text, test_rounds, test_rounds_main, test_block_table, test_m31_floor):
    test()
print(f"test_bench_tables: {len(failures)} failed")
sys.exit(1 if failures else 0)
