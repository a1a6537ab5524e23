#!/usr/bin/env python3
"""serve_check.py: serving on cuda keeps a request's tokens whatever else is in the batch
(issue 18's acceptance on CUDA): 64 requests (prompts of 64..1024 tokens, 16..64 new
tokens, half greedy and half at temperature 0.8, some with a seed of their own) arriving
over half a second are served 64 rows at a time; 8 of them are then served alone by the
same server (the same plan, --concurrency 1: the only request of every step, the other rows
padding). Every row of a step is computed as if it were alone (GEMMs of the same shape,
per-row attention, routing and sampling), so the tokens and margins must be bitwise those
of the batch: this is checked. Informative: the same 8 on a plan of one row, whose GEMMs
round differently; they are compared by the rule "equal up to the first position where
either run's decision margin (h3exec --margins: top-1 minus top-2 of the scores the sampler
compared) is below 0.05" and reported, not failed: a router near-tie inside the model can
part two runs at a token whose final margin is larger (docs/models/minimax_m3_1.md §4.1).
Last, where PLANS_DIR has them, the plans with prefill groups of 16 and 32 prompts
(m31_small_serve_s64_g16 / _g32.plan) serve all 64 at once: the margin rule against the
batch must hold for at least 3 requests in 4 (an indexing fault parts them all); so must the
batch served with --mixed-steps (prefill chunks carrying the decode rows).

    serve_check.py H3EXEC PLANS_DIR WORK_DIR
PLANS_DIR holds m31_small_serve_s64.plan and m31_small_serve_s1.plan (tests/gpu/stage.sh).
Exit 0 when the 8 requests alone equal them in the batch, 1 otherwise. Standard library only."""
import json
import os
import random
import subprocess
import sys

RULE = 0.05


def serve(h3exec, plan, reqs, work, name, concurrency, extra=()):
    rq, res = os.path.join(work, name + ".jsonl"), os.path.join(work, name + ".results.jsonl")
    with open(rq, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    cmd = [h3exec, plan, "--backend", "cuda", "--weights", "random", "--seed", "3", "--requests", rq,
           "--concurrency", str(concurrency), "--margins", "--out", res, *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=400)
    sys.stdout.write(p.stdout.decode(errors="replace"))
    if p.returncode != 0:
        sys.exit(f"{name}: h3exec exit {p.returncode}\n{p.stderr.decode(errors='replace')[-3000:]}")
    return {r["id"]: r for r in map(json.loads, open(res))}


def first_near_tie(*margins):
    """The first position where any run's margin is below RULE (len when none)."""
    n = min(len(m) for m in margins)
    for k in range(n):
        if any(m[k] is None or m[k] < RULE for m in margins):
            return k
    return n


def margin_rule(a, b):
    """Two runs' results of one request: tokens equal up to the first position where either
    margin is below RULE. Returns (holds, what was found)."""
    ta, tb = a["tokens"], b["tokens"]
    k = next((i for i in range(min(len(ta), len(tb))) if ta[i] != tb[i]), None)
    if k is None:
        return len(ta) == len(tb), f"all {len(ta)} tokens equal"
    tie = first_near_tie(a["margins"], b["margins"])
    return tie <= k, f"equal up to token {k}; first margin below {RULE} at token {tie}"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    h3exec, plans, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    rnd = random.Random(11)
    reqs = []
    for i in range(64):
        r = {"id": f"q{i}", "prompt": [rnd.randrange(200064) for _ in range(rnd.randint(64, 1024))],
             "max_new_tokens": rnd.randint(16, 64), "arrival": round(rnd.uniform(0, 0.5), 3)}
        if i % 2:
            r["temperature"] = 0.8
            if i % 4 == 1:
                r["seed"] = rnd.randrange(1 << 40)
        reqs.append(r)
    batch = serve(h3exec, os.path.join(plans, "m31_small_serve_s64.plan"), reqs, work, "batch", 64)
    picked = [dict(r, arrival=0) for r in reqs[::8]]
    alone = serve(h3exec, os.path.join(plans, "m31_small_serve_s64.plan"), picked, work, "alone", 1)
    bad = 0
    for r in picked:
        a, b = alone[r["id"]], batch[r["id"]]
        ok = a["tokens"] == b["tokens"] and a["margins"] == b["margins"]
        print(f"{r['id']}: T {r.get('temperature', 0)}, prompt {len(r['prompt'])}, {len(a['tokens'])} tokens: "
              f"alone {'==' if ok else '!='} in the batch {'ok' if ok else 'FAIL'}")
        bad += not ok
    one_row = serve(h3exec, os.path.join(plans, "m31_small_serve_s1.plan"), picked, work, "one_row", 1)
    held = 0
    for r in picked:
        a, b = one_row[r["id"]], batch[r["id"]]
        ok, what = margin_rule(a, b)
        held += ok
        print(f"  one-row plan {r['id']}: {what} ({'holds' if ok else 'does not hold'})")
    print(f"serve_check: {len(picked) - bad} of {len(picked)} requests alone == in the batch; "
          f"the margin rule holds for {held} of {len(picked)} on the one-row plan (informative)")
    for g in (16, 32):
        gp = os.path.join(plans, f"m31_small_serve_s64_g{g}.plan")
        if not os.path.exists(gp):
            continue
        grouped = serve(h3exec, gp, [dict(r, arrival=0) for r in reqs], work, f"group{g}", 64)
        held = sum(margin_rule(grouped[r["id"]], batch[r["id"]])[0] for r in reqs)
        # an indexing fault in a group parts every request at its first tokens; near-ties part a few
        ok = held >= 0.75 * len(reqs)
        print(f"serve_check: prefill groups of {g}: the margin rule holds for {held} of {len(reqs)} "
              f"requests against the batch without groups ({'ok' if ok else 'FAIL'}: at least 3 in 4)")
        bad += not ok
    # mixed steps (the chunk's rows and the decode rows in one pass, the last layer for the
    # rows read only): other GEMM shapes than the batch's, so the margin rule, 3 in 4
    mixed = serve(h3exec, os.path.join(plans, "m31_small_serve_s64.plan"), reqs, work, "mixed", 64,
                  ["--mixed-steps"])
    held = sum(margin_rule(mixed[r["id"]], batch[r["id"]])[0] for r in reqs)
    ok = held >= 0.75 * len(reqs)
    print(f"serve_check: mixed steps: the margin rule holds for {held} of {len(reqs)} requests against "
          f"the batch without them ({'ok' if ok else 'FAIL'}: at least 3 in 4)")
    bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
