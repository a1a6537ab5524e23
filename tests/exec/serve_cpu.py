#!/usr/bin/env python3
"""serve_cpu.py: h3exec's serving mode (--requests / --random-prompts) on the tiny M3.1 plan,
CPU backend, end to end:

  batch     96 requests (prompts of 1..70 tokens, so 1..4 prefill chunks; 1..30 new tokens;
            greedy and seeded temperature 0.7, some with an EOS id) arriving over 0.3 s,
            served 64 rows at a time; 12 of them then served alone (a plan of one row):
            tokens equal (the acceptance rule of issue 18 on the CPU, where results are
            bitwise independent of the batch); every result line well formed
  generate  a greedy request of prompt_len tokens gives the tokens of the `generate` program
  bad       a file with good lines and bad ones (malformed JSON, an unknown key, an id outside
            the vocabulary, an empty prompt, a prompt beyond the context): exit 1, each bad one
            named on stderr (in the one error format, with a hint) and answered by an error
            result, the good ones served as in `batch`
  pool      --kv-pages 4: a request that needs more pages is refused, the others wait for
            pages and are served; the report's peak stays within the pool
  mixed     the batch again with --mixed-steps (prefill chunks carry the running rows'
            decode): tokens and margins bitwise those without (the CPU computes each row alike)
  spec      --speculative dspark (DSpark rounds: draft, verify, greedy acceptance): the greedy
            requests of the batch give the tokens and margins of plain decoding, bitwise; the
            report and the summary give the acceptance; requests with a temperature are served by
            rejection sampling (well formed; alone on a one-row plan == in the batch); with
            --mixed-steps: an error. The bench-only
            --spec-force-accept A:FILE (the draft proposes the plain run's tokens, the round takes them) at A = 3
            and A = gamma + 1: still plain decoding's tokens, most rounds accept A - 1 draft
            tokens (all but those near a request's end), and the report, the summary and every result line say it was forced
  group     a plan with a prefill group of 4 prompts (serve_prefill_group): 40 requests at once
            (prompts of 1..40 tokens: one or two chunks), greedy and seeded temperature: the
            one-chunk prompts are prefilled 4 at a time, the others one by one; tokens and
            margins bitwise those of the plan without groups and of --no-prefill-group; the
            report and the summary count the groups; none at a concurrency below 4
  lastrow   the graphs that read a prompt's last row only (their last layer's q, attention
            and output part over that row: forward_rows / sparse_layer_rows) against the graphs
            that run every row through every layer, same inputs: prefill_seq's logits ==
            prefill's, serve_prefill's next token, margin and caches == serve_prefill_spec's at
            a chunk of n_valid < prompt_len rows and at a full one (bitwise), on three seeds
            (serve_prefill_group's rows: `group` checks them against serve_prefill's)
  moestats  --moe-stats (distinct experts a moe call's rows name, by row count): on the generate
            program its table equals the count of --dump-ops moe+operands' ids, call by call;
            serving with --speculative dspark at 16 rows lists the verify's 16 (gamma + 1) rows
            within [top_k, min(E, rows top_k)]; with --dump-ops: exit 2
  random    --random-prompts with --summary: the JSON report's figures
  flags     bad serving flags: exit 2 (or 1 for what only the plan can tell) with the message and
            a hint

Usage: serve_cpu.py --h3c H3C --h3exec H3EXEC --source SRC --work DIR [--case NAME]
Standard library only."""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from error_format import unformatted  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

failures = []


def run(cmd, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


compiled = set()


def plan(a, seqs, group=1):
    """The tiny M3.1 plan of `seqs` decode rows and prefill groups of `group` prompts, compiled
    once per run (never a stale one)."""
    out = os.path.join(a.work, f"m31_seqs{seqs}" + (f"_g{group}" if group > 1 else "") + ".plan")
    if out not in compiled:
        compiled.add(out)
        rc, _, err = run([a.h3c, "compile", os.path.join(a.source, "models", "minimax_m3_1.g"),
                          "--config", "tiny", "--set", f"seqs={seqs}", "--set", f"prefill_group={group}",
                          "-o", out])
        if rc != 0:
            sys.exit(f"cannot compile the tiny M3.1 plan:\n{err}")
    return out


def write_requests(path, reqs):
    with open(path, "w") as f:
        for r in reqs:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def serve(a, plan_file, reqs, name, extra=()):
    """Serves reqs; returns (rc, stdout, stderr, {id: result})."""
    rq = os.path.join(a.work, name + ".jsonl")
    res = os.path.join(a.work, name + ".results.jsonl")
    write_requests(rq, reqs)
    if os.path.exists(res):
        os.remove(res)
    rc, out, err = run([a.h3exec, plan_file, "--backend", "cpu", "--requests", rq, "--out", res]
                       + list(extra))
    check(rc >= 0, f"{name}: killed by signal {-rc}")
    results = {}
    if os.path.exists(res):
        for line in open(res):
            r = json.loads(line)
            results[r["id"]] = r
    return rc, out, err, results


def batch_requests(seed=1, n=96):
    rnd = random.Random(seed)
    reqs = []
    for i in range(n):
        r = {"id": f"r{i}", "prompt": [rnd.randrange(256) for _ in range(rnd.randint(1, 70))],
             "max_new_tokens": rnd.randint(1, 30), "arrival": round(rnd.uniform(0, 0.3), 3)}
        if i % 2:
            r["temperature"] = 0.7
            if i % 4 == 1:
                r["seed"] = rnd.randrange(1 << 40)
        if i % 5 == 0:
            r["eos"] = rnd.randrange(256)
        reqs.append(r)
    return reqs


def well_formed(name, r, req):
    check(r["finish_reason"] in ("length", "eos"), f"{name}: {r['id']} finished by {r['finish_reason']}")
    n = len(r["tokens"])
    check(1 <= n <= req["max_new_tokens"], f"{name}: {r['id']} has {n} tokens")
    check(all(0 <= t < 256 for t in r["tokens"]), f"{name}: {r['id']} has ids outside the vocabulary")
    if r["finish_reason"] == "length":
        check(n == req["max_new_tokens"], f"{name}: {r['id']} ended by length at {n} tokens")
    else:
        check(r["tokens"][-1] == req.get("eos"), f"{name}: {r['id']} ended by eos on another id")
    check("eos" not in req or req["eos"] not in r["tokens"][:-1], f"{name}: {r['id']} ran past its eos")
    check(r["prompt_len"] == len(req["prompt"]), f"{name}: {r['id']} prompt_len")
    check(r["ttft_ms"] is not None and r["ttft_ms"] >= 0, f"{name}: {r['id']} ttft")
    if "margins" in r:
        m = r["margins"]
        check(len(m) == n and all(x is None or x >= 0 for x in m), f"{name}: {r['id']} margins {m}")


def case_batch(a):
    reqs = batch_requests()
    rc, out, err, res = serve(a, plan(a, 64), reqs, "batch", ["--concurrency", "64", "--margins"])
    check(rc == 0, f"batch: exit {rc}: {err[-2000:]}")
    check(len(res) == len(reqs), f"batch: {len(res)} results of {len(reqs)}")
    for r in reqs:
        if r["id"] in res:
            well_formed("batch", res[r["id"]], r)
    check("=== serving ===" in out and "TTFT" in out, "batch: no report")
    alone_plan = plan(a, 1)
    for r in reqs[::8]:
        r = dict(r, arrival=0)
        rc, _, err, one = serve(a, alone_plan, [r], "alone_" + r["id"], ["--margins"])
        check(rc == 0, f"alone {r['id']}: exit {rc}: {err[-1000:]}")
        got, want = one.get(r["id"], {}), res.get(r["id"], {})
        check(got.get("tokens") == want.get("tokens"),
              f"{r['id']}: alone {got.get('tokens')} vs in the batch {want.get('tokens')}")
        check(got.get("margins") == want.get("margins"), f"{r['id']}: margins alone differ from the batch's")


def case_mixed(a):
    reqs = batch_requests(seed=5, n=48)
    args = ["--concurrency", "16", "--margins"]
    rc, _, err, plain = serve(a, plan(a, 64), reqs, "plain", args)
    check(rc == 0, f"mixed: plain run exit {rc}: {err[-1000:]}")
    rc, out, err, mixed = serve(a, plan(a, 64), reqs, "mixed", args + ["--mixed-steps"])
    check(rc == 0, f"mixed: exit {rc}: {err[-1000:]}")
    check("mixed steps" in out and "decode rows" in out, "mixed: the report has no mixed steps")
    for r in reqs:
        p, m = plain.get(r["id"], {}), mixed.get(r["id"], {})
        check((p.get("tokens"), p.get("margins")) == (m.get("tokens"), m.get("margins")),
              f"mixed: {r['id']} {m.get('tokens')} vs {p.get('tokens')} without mixed steps")


def case_group(a):
    rnd = random.Random(13)
    reqs = [dict(r, prompt=r["prompt"][:rnd.randint(1, 40)], arrival=0) for r in batch_requests(seed=13, n=40)]
    args = ["--concurrency", "32", "--margins"]
    rc, _, err, plain = serve(a, plan(a, 32), reqs, "group_plain", args)
    check(rc == 0, f"group: plain plan exit {rc}: {err[-1000:]}")
    summ = os.path.join(a.work, "group_summary.json")
    rc, out, err, grouped = serve(a, plan(a, 32, group=4), reqs, "group", args + ["--summary", summ])
    check(rc == 0, f"group: exit {rc}: {err[-1000:]}")
    one_chunk = sum(len(r["prompt"]) <= 20 for r in reqs[:32])  # the tiny prompt_len: 20
    s = json.load(open(summ)) if os.path.exists(summ) else {}
    check(s.get("group_prompts") == 4 and s.get("prefill_groups", 0) >= one_chunk // 4 > 0,
          f"group: summary {s} ({one_chunk} one-chunk prompts among the first 32)")
    check("prefill groups  " in out and "groups of 4 one-chunk prompts" in out, f"group: report {out[-900:]}")
    rc, out, err, single = serve(a, plan(a, 32, group=4), reqs, "group_off", args + ["--no-prefill-group"])
    check(rc == 0 and "prefill groups" not in out, f"group: --no-prefill-group exit {rc}: {err[-1000:]}")
    rc, out, err, _ = serve(a, plan(a, 32, group=4), reqs[:6], "group_c3", ["--concurrency", "3"])
    check(rc == 0 and "prefill groups" not in out, f"group: concurrency 3 < 4 ran groups: exit {rc}: {out[-600:]}")
    for r in reqs:
        p, g, o = plain.get(r["id"], {}), grouped.get(r["id"], {}), single.get(r["id"], {})
        check((g.get("tokens"), g.get("margins")) == (p.get("tokens"), p.get("margins")) ==
              (o.get("tokens"), o.get("margins")),
              f"group: {r['id']} {g.get('tokens')} in a group, {p.get('tokens')} without one, "
              f"{o.get('tokens')} with --no-prefill-group")
        if r["id"] in grouped:
            well_formed("group", grouped[r["id"]], r)


def run_graph(a, plan_file, graph, inputs, name):
    """Runs one graph of plan_file on inputs {name: (dtype, shape, bytes)}; its outputs."""
    inp, out = os.path.join(a.work, name + "_in.safetensors"), os.path.join(a.work, name + "_out.safetensors")
    stfile.write(inp, inputs)
    rc, _, err = run([a.h3exec, plan_file, "--graph", graph, "--inputs", inp, "--out", out])
    check(rc == 0, f"lastrow: {graph} exit {rc}: {err[-800:]}")
    return stfile.read(out) if rc == 0 else {}


def case_lastrow(a):
    p, L, pt_len = plan(a, 1), 20, 34  # the tiny config: prompt_len 20, 34 pages per table
    def scalar(v):
        return ("I32", [], struct.pack("<i", v))
    for seed in (1, 2, 3):
        rnd = random.Random(seed)
        toks = [rnd.randrange(256) for _ in range(L)]
        tokens = ("I32", [L], struct.pack(f"<{L}i", *toks))
        full = run_graph(a, p, "prefill", {"tokens": tokens, "pos0": scalar(0)}, f"lr_prefill{seed}")
        last = run_graph(a, p, "prefill_seq", {"tokens": tokens, "seq": scalar(0)}, f"lr_seq{seed}")
        check(full.get("logits") is not None and full.get("logits") == last.get("logits"),
              f"lastrow: seed {seed}: prefill_seq's logits differ from prefill's")
        for n_valid in (rnd.randint(1, L - 1), L):
            ins = {"tokens": tokens, "pos0": scalar(0), "n_valid": scalar(n_valid),
                   "page_table": ("I32", [pt_len], struct.pack(f"<{pt_len}i", *range(1, pt_len + 1))),
                   "temperature": ("F32", [1], struct.pack("<f", 0.0)), "seed": ("I32", [1], struct.pack("<i", seed))}
            one = run_graph(a, p, "serve_prefill", ins, f"lr_serve{seed}_{n_valid}")
            every = run_graph(a, p, "serve_prefill_spec", ins, f"lr_spec{seed}_{n_valid}")
            got = [one.get(k) for k in ("next", "margin", "k_cache", "v_cache", "ik_cache")]
            want = [every.get(k) for k in ("next", "margin", "k_cache", "v_cache", "ik_cache")]
            check(None not in got and got == want,
                  f"lastrow: seed {seed}, n_valid {n_valid}: serve_prefill's next token / margin / "
                  f"caches differ from serve_prefill_spec's")


def greedy_requests(seed, n):
    """batch_requests without temperatures (speculative serving decodes greedily)."""
    return [{k: v for k, v in r.items() if k not in ("temperature", "seed")}
            for r in batch_requests(seed=seed, n=n)]


def case_spec(a):
    reqs = greedy_requests(7, 40)
    args = ["--concurrency", "16", "--margins"]
    p = plan(a, 16)
    rc, _, err, plain = serve(a, p, reqs, "spec_plain", args)
    check(rc == 0, f"spec: plain run exit {rc}: {err[-1000:]}")
    summ = os.path.join(a.work, "spec_summary.json")
    rc, out, err, spec = serve(a, p, reqs, "spec", args + ["--speculative", "dspark", "--summary", summ])
    check(rc == 0, f"spec: exit {rc}: {err[-1000:]}")
    for r in reqs:
        x, y = plain.get(r["id"], {}), spec.get(r["id"], {})
        check((x.get("tokens"), x.get("margins")) == (y.get("tokens"), y.get("margins")),
              f"spec: {r['id']} {y.get('tokens')} vs {x.get('tokens')} without speculation")
        if r["id"] in spec:
            well_formed("spec", spec[r["id"]], r)
    check("speculative (DSpark)" in out and "acceptance" in out and "round time" in out,
          f"spec: the report has no speculative lines: {out[-800:]}")
    s = json.load(open(summ)) if os.path.exists(summ) else {}
    sp = s.get("speculative", {})
    check(sp.get("gamma") == 4 and sp.get("rounds", 0) > 0 and len(sp.get("accepted_hist", [])) == 5,
          f"spec: summary {sp}")
    check(sum(sp.get("accepted_hist", [])) == sp.get("request_rounds"), f"spec: histogram {sp}")
    # requests with a temperature: rejection sampling; each result the same alone as in the batch
    mixed_t = batch_requests(seed=11, n=24)
    rc, _, err, samp = serve(a, p, mixed_t, "spec_sampled", ["--concurrency", "16", "--speculative", "dspark"])
    check(rc == 0, f"spec sampled: exit {rc}: {err[-1000:]}")
    for r in mixed_t:
        if r["id"] in samp:
            well_formed("spec sampled", samp[r["id"]], r)
    for r in mixed_t[1::6]:
        rc, _, err, one = serve(a, plan(a, 1), [dict(r, arrival=0)], "spec_alone_" + r["id"],
                                ["--speculative", "dspark"])
        check(one.get(r["id"], {}).get("tokens") == samp.get(r["id"], {}).get("tokens"),
              f"spec sampled: {r['id']} alone {one.get(r['id'], {}).get('tokens')} vs in the batch "
              f"{samp.get(r['id'], {}).get('tokens')}")
    rc, _, err, _ = serve(a, p, reqs[:2], "spec_mixed", ["--speculative", "dspark", "--mixed-steps"])
    check(rc == 1 and "cannot be combined" in err, f"spec: with --mixed-steps: exit {rc}: {err[-300:]}")
    oracle = os.path.join(a.work, "spec_plain.results.jsonl")
    for A in (3, 5):
        summ = os.path.join(a.work, f"spec_forced{A}.json")
        rc, out, err, forced = serve(a, p, reqs, f"spec_forced{A}", args + [
            "--speculative", "dspark", "--spec-force-accept", f"{A}:{oracle}", "--summary", summ])
        check(rc == 0, f"spec forced {A}: exit {rc}: {err[-1000:]}")
        check("BENCH-ONLY" in err and "FORCED" in out, f"spec forced {A}: not marked as bench-only")
        for r in reqs:
            x, y = plain.get(r["id"], {}), forced.get(r["id"], {})
            check((x.get("tokens"), x.get("margins")) == (y.get("tokens"), y.get("margins")),
                  f"spec forced {A}: {r['id']} {y.get('tokens')} vs {x.get('tokens')}")
            check(y.get("forced_acceptance") == A, f"spec forced {A}: {r['id']} result line not marked")
        sp = json.load(open(summ)).get("speculative", {}) if os.path.exists(summ) else {}
        hist = sp.get("accepted_hist", [])
        # rounds near a request's end take fewer (the oracle has no more tokens to force)
        check(sp.get("forced_acceptance") == A and len(hist) == 5 and hist[A - 1] >= 0.6 * sum(hist) > 0,
              f"spec forced {A}: summary {sp}")
        # the CPU's verify rows equal its decode bitwise: every forced round's own acceptance agrees
        check(sp.get("forced_agreed_request_rounds") == sp.get("request_rounds"), f"spec forced {A}: summary {sp}")
    rc, _, err, _ = serve(a, p, reqs[:2], "spec_forced9", ["--speculative", "dspark", "--spec-force-accept",
                                                           f"6:{oracle}"])
    check(rc == 1 and "at most gamma + 1" in err, f"spec: forced 6 > gamma + 1: exit {rc}: {err[-300:]}")


def case_generate(a):
    p1 = plan(a, 1)
    prompt = [random.Random(7).randrange(256) for _ in range(20)]  # the tiny prompt_len
    pf = os.path.join(a.work, "prompt.txt")
    with open(pf, "w") as f:
        f.write(" ".join(map(str, prompt)))
    rc, out, err = run([a.h3exec, p1, "--backend", "cpu", "--prompt", pf])
    check(rc == 0, f"generate: exit {rc}: {err[-1000:]}")
    lines = out.split("=== generated tokens ===")
    want = [int(t) for t in lines[-1].split()] if len(lines) > 1 else None
    rc, _, err, res = serve(a, p1, [{"id": 1, "prompt": prompt, "max_new_tokens": 32}], "generate")
    check(rc == 0, f"generate: serving exit {rc}: {err[-1000:]}")
    got = res.get(1, {}).get("tokens")
    check(got == want, f"generate: serving gives {got}, the generate program {want}")


def moe_table(out):
    """--moe-stats' table: {rows: (calls, mean, min, max, experts)}."""
    part = out.split("=== moe experts touched")
    rows = {}
    for line in part[1].splitlines()[2:] if len(part) > 1 else []:
        f = line.split()
        if len(f) != 6 or not f[0].isdigit():
            break
        rows[int(f[0])] = (int(f[1]), float(f[2]), int(f[3]), int(f[4]), int(f[5]))
    return rows


def case_moestats(a):
    p1 = plan(a, 1)
    pf = os.path.join(a.work, "moestats_prompt.txt")
    with open(pf, "w") as f:
        f.write(" ".join(str(random.Random(3).randrange(256)) for _ in range(20)))
    dump = os.path.join(a.work, "moestats.safetensors")
    rc, _, err = run([a.h3exec, p1, "--backend", "cpu", "--prompt", pf, "--dump-ops", "moe+operands",
                      "--dump", dump])
    check(rc == 0, f"moestats: --dump-ops run exit {rc}: {err[-500:]}")
    want = {}  # rows -> distinct experts of each call, from the dumped ids (operand 3, i32 [rows, k])
    for name, (dt, shape, raw) in (stfile.read(dump).items() if rc == 0 else []):
        if ".a3." in name and dt == "I32":
            ids = struct.unpack(f"<{len(raw) // 4}i", raw)
            want.setdefault(shape[0], []).append(len({e for e in ids if 0 <= e < 8}))
    rc, out, err = run([a.h3exec, p1, "--backend", "cpu", "--prompt", pf, "--moe-stats"])
    check(rc == 0, f"moestats: exit {rc}: {err[-500:]}")
    got = moe_table(out)
    check(set(got) == set(want) and len(want) >= 2, f"moestats: row counts {sorted(got)} vs dumped {sorted(want)}")
    for rows, calls in want.items():
        g = got.get(rows)
        exp = (len(calls), sum(calls) / len(calls), min(calls), max(calls), 8)
        check(g is not None and g[0] == exp[0] and abs(g[1] - exp[1]) < 0.006 and g[2:] == exp[2:],
              f"moestats: {rows} rows: {g} vs the dump's {exp}")
    rc, out, err, _ = serve(a, plan(a, 16), greedy_requests(5, 16), "moestats_spec",
                            ["--concurrency", "16", "--speculative", "dspark", "--moe-stats"])
    check(rc == 0, f"moestats spec: exit {rc}: {err[-500:]}")
    t = moe_table(out)
    v = t.get(16 * 5)  # the verify: 16 sequences of gamma + 1 = 5 rows
    check(v is not None and v[0] > 0 and 2 <= v[2] <= v[1] <= v[3] <= 8,
          f"moestats spec: the verify's row: {v} in {t}")
    rc, _, err = run([a.h3exec, p1, "--backend", "cpu", "--moe-stats", "--dump-ops", "moe", "--dump", dump])
    check(rc == 2 and "exclude each other" in err, f"moestats: with --dump-ops: exit {rc}: {err[-300:]}")


def case_bad(a):
    good = batch_requests(seed=3, n=6)
    bad = ['{"id": "m", "prompt": [1, 2', '{"id": "k", "prompt": [1], "max_new_tokens": 2, "colour": 1}',
           {"id": "oov", "prompt": [1, 256], "max_new_tokens": 2},
           {"id": "empty", "prompt": [], "max_new_tokens": 2},
           {"id": "long", "prompt": [3] * 250, "max_new_tokens": 10}]
    reqs = good[:3] + bad + good[3:]
    rc, out, err, res = serve(a, plan(a, 64), reqs, "bad")
    check(rc == 1, f"bad: exit {rc}, want 1")
    for name in ("oov", "empty", "long"):
        check(f'request "{name}"' in err, f"bad: stderr does not name request '{name}'")
        check(res.get(name, {}).get("finish_reason") == "error", f"bad: no error result for '{name}'")
    check("bad.jsonl:4:" in err and "bad.jsonl:5:" in err, "bad: the malformed lines' places are not on stderr")
    check("5 of 11 requests failed" in err, "bad: the failure count is not reported")
    check(unformatted(err) == (6, []), f"bad: not 6 errors in the one format with a hint: {unformatted(err)}")
    _, _, _, ok = serve(a, plan(a, 64), good, "bad_good_only")
    for r in good:
        check(res.get(r["id"], {}).get("tokens") == ok.get(r["id"], {}).get("tokens"),
              f"bad: good request {r['id']} differs beside bad ones")


def case_pool(a):
    small = [{"id": f"s{i}", "prompt": [i + 1] * 9, "max_new_tokens": 6} for i in range(5)]  # 2 pages each
    big = {"id": "big", "prompt": [5] * 30, "max_new_tokens": 10}  # 5 pages
    rc, out, err, res = serve(a, plan(a, 64), small + [big], "pool", ["--kv-pages", "4"])
    check(rc == 1, f"pool: exit {rc}, want 1")
    check(not unformatted(err)[1], f"pool: an error not in the one format or without a hint: {err[-500:]}")
    check("'big' needs 5 KV pages" in err and 'pool.jsonl:6:1: error: request "big"' in err and "the pool holds 3" in err, f"pool: no refusal of 'big': {err[-500:]}")
    for r in small:
        check(res.get(r["id"], {}).get("finish_reason") == "length", f"pool: {r['id']} not served")
    check("peak 2 in use" in out, "pool: the report's peak is not 2 pages (one request at a time)")


def case_random(a):
    summ = os.path.join(a.work, "summary.json")
    rc, out, err = run([a.h3exec, plan(a, 64), "--backend", "cpu", "--random-prompts", "5", "--prompt-len", "12",
                        "--output-len", "6", "--summary", summ, "--concurrency", "4"])
    check(rc == 0, f"random: exit {rc}: {err[-1000:]}")
    s = json.load(open(summ)) if os.path.exists(summ) else {}
    check(s.get("engine") == "h3" and s.get("requests") == 5 and s.get("output_tokens") == 30,
          f"random: summary {s}")
    check(s.get("concurrency") == 4 and s.get("ttft_ms", {}).get("p50", -1) >= 0, f"random: summary {s}")
    check(s.get("schedule") == "prefill-first", f"random: summary {s}")
    # --profile: the serving's ops in a Chrome trace and a per-op table after the report
    prof = os.path.join(a.work, "serve_profile.json")
    rc, out, err = run([a.h3exec, plan(a, 64), "--backend", "cpu", "--random-prompts", "2", "--prompt-len", "12",
                        "--output-len", "4", "--profile", prof])
    ev = json.load(open(prof)) if rc == 0 and os.path.exists(prof) else None
    check(rc == 0 and "per-op profile (the serving" in out and " moe " in out and ev,
          f"random --profile: exit {rc}, trace {type(ev)}: {out[-600:]} {err[-300:]}")


def case_flags(a):
    p = plan(a, 64)
    for args, rc_want, piece in [
        (["--random-prompts", "3"], 2, "needs --prompt-len"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--graph", "decode"], 2,
         "serving takes none of"),
        (["--concurrency", "2"], 2, "are for serving"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--concurrency", "65"], 1,
         "--set seqs=65"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--kv-pages", "999999"], 1,
         "the plan's caches hold"),
        (["--requests", os.path.join(a.work, "missing.jsonl")], 1, "missing.jsonl"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--speculative", "medusa"], 2,
         "--speculative takes dspark"),
        (["--speculative", "dspark"], 2, "are for serving"),
        (["--no-prefill-group"], 2, "are for serving"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--spec-force-accept", "2:x"], 2,
         "needs --speculative"),
        (["--random-prompts", "3", "--prompt-len", "4", "--output-len", "2", "--speculative", "dspark",
          "--spec-force-accept", "two"], 2, "takes A:FILE"),
    ]:
        rc, _, err = run([a.h3exec, p, "--backend", "cpu"] + args)
        check(rc == rc_want and piece in err and not unformatted(err)[1],
              f"flags {args}: exit {rc} (want {rc_want}), stderr {err[-300:]!r}")


CASES = {"lastrow": case_lastrow, "batch": case_batch, "mixed": case_mixed, "generate": case_generate, "bad": case_bad, "pool": case_pool,
         "random": case_random, "flags": case_flags, "spec": case_spec, "group": case_group,
         "moestats": case_moestats}


def main():
    ap = argparse.ArgumentParser()
    for k in ("--h3c", "--h3exec", "--source", "--work"):
        ap.add_argument(k, required=True)
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    for name in a.case or CASES:
        CASES[name](a)
    if failures:
        sys.exit(f"{len(failures)} failures")
    print("serve_cpu: all cases passed")


if __name__ == "__main__":
    main()
