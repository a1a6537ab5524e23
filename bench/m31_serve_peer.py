#!/usr/bin/env python3
"""m31_serve_peer.py: the PyTorch peer of h3's serving benchmark of MiniMax-M3.1: the model of
bench/m31_peer.py (same code, same compiled prefill and CUDA-graph decode step) driven by the
request list that `h3exec PLAN --requests FILE.jsonl --concurrency C` serves, with static
batching, reporting the same per-request results and summary as h3.

    python3 bench/m31_serve_peer.py make-requests --n N --isl L --osl M [--vocab V] [--seed S] > reqs.jsonl
    python3 bench/m31_serve_peer.py serve --requests reqs.jsonl --concurrency C [--config small|tiny]
                                          [--device cuda|cpu] [--out results.jsonl] [--no-compile] [--seed S]
                                          [--weights W.safetensors] [--prefill-batch G]
    python3 bench/m31_serve_peer.py make-weights --out W.safetensors [--config small|tiny] [--seed S]

make-weights: the peer's random weights (m31_peer.random_weights, with the DSpark draft tensors
  h3's loader requires) in h3's names as one safetensors file, for h3exec --weights and serve
  --weights: both engines then run the same model, so they route alike (random models differ in
  how their rows spread over the experts, which sets a decode step's bytes).

make-requests: N JSON lines {"id": "0", "prompt": [ids], "max_new_tokens": M, "temperature": 0},
  L prompt ids each, uniform in [0, V) from python's random.Random(S) (V = 200064, the small
  config's vocab, S = 0 by default): the same file for the same arguments. With L = 2048,
  M = 256 this is the public sglang M3 workload's shape (random prompts, ISL 2048, OSL 256; the
  lengths are exact here).
serve: what the peer does (static batching):
  - requests in file order, C at a time (all of them arrive at t = 0);
  - each batch: every sequence is prefilled one at a time (the batch-1 compiled
    m31_peer.prefill into a scratch cache, whose K/V/IK of the prompt's positions are then
    copied into the sequence's row of the batch cache), or with --prefill-batch G up to G
    consecutive sequences of one prompt length at once (the compiled prefill of [g, T]: every
    weight read once for the g prompts, as h3's prefill groups); a first token is the argmax
    of its prefill's last-row logits; then decode steps at batch C, each one
    replay of the compiled step (m31_peer.decode_step + argmax, the token and position
    buffers advanced in the graph) captured as one CUDA graph, until every sequence of the
    batch has max_new_tokens tokens, or has met one of its "eos" ids when the request has
    "eos" (an id or a list; EOS is ignored otherwise). Rows that are done keep running as
    padding until the batch's last one is; their extra tokens are dropped. The device is
    synchronized after every prefill and every step (the tokens are read back then);
  - a partial last batch (N not a multiple of C) runs at its own size, with its own graph;
  - decoding is greedy: "temperature" is ignored (a warning when it is not 0);
  - the decode step's attention and MoE forms: --attention sdpa|flex (default sdpa) and
    --moe grouped|dense (default grouped); bench/m31_peer_decode_check.py finds which are
    right on the device (the flex form compiled into a CUDA graph was not, on the H200) and
    bench/m31_serve.sh serves with the fastest right one;
  - the static cache holds max(prompt) + max(max_new_tokens) positions rounded up to a whole
    block (small: 2048 + 256 = 2304 = 18 blocks of 128; at C = 64 1.23 GiB beside the 16.3 GiB
    of weights), not the model's max context;
  - warm-up before the clock, excluded from every number: torch.compile of the prefill at each
    distinct prompt length (run twice) and of the decode step at each batch size, and the
    CUDA graph captures;
  - weights: --weights FILE (h3's names; make-weights), else random (m31_peer.random_weights,
    as its bench mode). Give both engines the same file: a decode step's work depends on the
    weights through the experts' load balance (how many distinct experts the rows choose).
  On the CPU use --no-compile (the tiny config; in torch 2.15 inductor's CPU lowering of
  the decode step's FlexAttention form fails, the compiled prefill works).
  Timing: time.perf_counter after torch.cuda.synchronize(), from the benchmark's start. Per
  request: TTFT = its first token's time (the end of its prefill), TPOT = (last - first
  token's time) / (n - 1), inter-token latencies = the gaps between its consecutive tokens
  (the first gap includes the prefills of the batch's later sequences: static batching).
  Output: with --out, one JSON line per request in file order {id, tokens, finish_reason
  ("length" | "stop"), prompt_len, ttft_ms, tpot_ms}; on stdout ONE summary JSON object
  {engine: "pytorch-peer", mode, concurrency, requests, output_tokens, duration_s (start to
  the last token), output_tok_s, request_s, ttft_ms / tpot_ms / itl_ms: {p50, p90, p99,
  mean}, ...}; human lines on stderr. bench/m31_serve_table.py sets it beside h3's.
"""
import argparse
import json
import math
import random
import sys
import time


# ------------------------------------------------------------------ requests ------------------
def make_requests(a):
    rng = random.Random(a.seed)
    for i in range(a.n):
        prompt = [rng.randrange(a.vocab) for _ in range(a.isl)]
        sys.stdout.write(json.dumps({"id": str(i), "prompt": prompt, "max_new_tokens": a.osl,
                                     "temperature": 0}, separators=(",", ":")) + "\n")
    return 0


def load_requests(path, vocab):
    reqs = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            p, n = r.get("prompt"), r.get("max_new_tokens")
            if not (isinstance(p, list) and p and all(isinstance(t, int) and 0 <= t < vocab for t in p)):
                sys.exit(f"m31_serve_peer.py: {path}:{ln}: prompt must be a non-empty list of ids in [0, {vocab})")
            if not (isinstance(n, int) and n >= 1):
                sys.exit(f"m31_serve_peer.py: {path}:{ln}: max_new_tokens must be an integer >= 1")
            eos = r.get("eos")
            r["eos"] = set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
            r["id"] = str(r.get("id", len(reqs)))
            reqs.append(r)
    if not reqs:
        sys.exit(f"m31_serve_peer.py: {path}: no requests")
    return reqs


def stats(xs):
    """p50 / p90 / p99 (linear between order statistics) and mean; None when xs is empty."""
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    s = sorted(xs)

    def pct(q):
        k = (len(s) - 1) * q / 100
        f = math.floor(k)
        return s[f] + (s[min(f + 1, len(s) - 1)] - s[f]) * (k - f)
    return {"p50": pct(50), "p90": pct(90), "p99": pct(99), "mean": sum(s) / len(s)}


# ------------------------------------------------------------------ serve ---------------------
def serve(a):
    import torch
    import m31_peer as P

    c = P.CONFIGS[a.config]
    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    C = a.concurrency
    reqs = load_requests(a.requests, c["vocab"])
    if any(r.get("temperature", 0) not in (0, None) for r in reqs):
        P.log("m31_serve_peer.py: warning: the peer decodes greedily; temperature is ignored")
    max_t = max(len(r["prompt"]) for r in reqs)
    max_n = max(r["max_new_tokens"] for r in reqs)
    if max_t + max_n > c["max_ctx"]:
        sys.exit(f"m31_serve_peer.py: prompt {max_t} + {max_n} new tokens exceed max_ctx {c['max_ctx']}")
    batches = [reqs[i:i + C] for i in range(0, len(reqs), C)]
    lengths = sorted({len(r["prompt"]) for r in reqs})
    sizes = sorted({len(b) for b in batches})
    cuda = dev == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    P.set_decode_forms(a.attention, a.moe)
    torch.manual_seed(a.seed)
    torch._dynamo.config.cache_size_limit = max(64, len(lengths) + len(sizes) + 8)
    compile_ = (lambda f: torch.compile(f, dynamic=False)) if a.compile else (lambda f: f)
    t0 = time.perf_counter()
    if a.weights:
        from safetensors.torch import load_file
        W = {k: v for k, v in load_file(a.weights, device=dev).items() if not k.startswith("dspark.")}
    else:
        W = P.random_weights(c, dev, a.seed)
    M = P.pack_model(W, c)
    cap = P.capacity_for(c, max_t + max_n)
    rows = min(C, len(reqs))                   # the widest batch
    cache = P.new_cache(c, rows, cap, dev, fill=False)
    G = a.prefill_batch
    if G < 1:
        sys.exit(f"m31_serve_peer.py: --prefill-batch {G}: give at least 1")
    scratch = P.new_cache(c, G, P.capacity_for(c, max_t), dev, fill=False)
    sync()
    P.log(f"{a.config} on {dev}: {'weights of ' + a.weights if a.weights else 'random weights'} in {time.perf_counter() - t0:.1f} s; cache of {rows} x {cap} "
          f"positions, {sum(t.numel() * 2 for L in cache for t in L if t is not None) / 2**30:.2f} GiB; "
          f"{len(reqs)} requests in {len(batches)} batches")

    prefill_fn = compile_(lambda tok: P.prefill(M, tok, scratch, c).argmax(-1))
    decode_fn = compile_(lambda tok, pos, kv: P.decode_step(M, tok, pos, kv, c).argmax(-1))

    def prefill(prompts, row):
        """First tokens of g sequences of one length T (prompts [g, T]); their K/V/IK land in
        rows row .. row + g - 1 of the batch cache."""
        g, T = prompts.shape
        first = prefill_fn(prompts)
        for dst, src in zip(cache, scratch):
            for d, s in zip(dst, src):
                if d is not None:
                    d[row:row + g, ..., :T, :].copy_(s[:g, ..., :T, :])
        return first

    def groups(batch):
        """The batch's prefill groups: runs of at most G consecutive requests of one prompt
        length, as (first row, requests)."""
        out, row = [], 0
        while row < len(batch):
            n = 1
            while n < G and row + n < len(batch) and len(batch[row + n]["prompt"]) == len(batch[row]["prompt"]):
                n += 1
            out.append((row, batch[row:row + n]))
            row += n
        return out

    def stepper(r):
        """(tok, pos, run) of batch size r: run() = one decode step over cache rows 0..r-1,
        tok <- its greedy tokens, pos += 1 (a CUDA graph replay on cuda)."""
        tok = torch.zeros(r, dtype=torch.int64, device=dev)
        pos = torch.zeros(r, dtype=torch.int64, device=dev)
        kv = cache if r == rows else [tuple(None if t is None else t[:r] for t in L) for L in cache]

        def step():
            tok.copy_(decode_fn(tok, pos, kv))
            pos.add_(1)
        run = P.graph_of(step, dev)  # on cuda: compiled in its warm-up runs, then captured
        if not cuda:
            run()                    # the first call (compilation with torch.compile)
        return tok, pos, run

    t0 = time.perf_counter()
    shapes = sorted({(len(g), len(g[0]["prompt"])) for b in batches for _, g in groups(b)})
    for g, T in shapes:
        for _ in range(2):
            prefill(torch.zeros(g, T, dtype=torch.int64, device=dev), 0)
    sync()
    t1 = time.perf_counter()
    steppers = {r: stepper(r) for r in sizes}
    sync()
    warm_s = time.perf_counter() - t0
    P.log(f"warm-up (excluded): prefill of {len(shapes)} shape(s) (sequences, length) {t1 - t0:.1f} s, "
          f"decode at batch {', '.join(map(str, sizes))} {warm_s - (t1 - t0):.1f} s")

    res = []                                   # per request, in file order
    sync()
    start = time.perf_counter()
    for bi, batch in enumerate(batches):
        tok, pos, run = steppers[len(batch)]
        out = []
        for row, group in groups(batch):
            first = prefill(torch.tensor([r["prompt"] for r in group], dtype=torch.int64, device=dev), row)
            sync()
            t = time.perf_counter() - start
            out += [dict(r=r, tokens=[int(v)], times=[t]) for r, v in zip(group, first.tolist())]
        for o in out:
            o["done"] = len(o["tokens"]) >= o["r"]["max_new_tokens"] or o["tokens"][-1] in o["r"]["eos"]
        tok.copy_(torch.tensor([o["tokens"][0] for o in out], dtype=torch.int64))
        pos.copy_(torch.tensor([len(o["r"]["prompt"]) for o in out], dtype=torch.int64))
        steps = 0
        while not all(o["done"] for o in out):
            run()
            sync()
            t = time.perf_counter() - start
            steps += 1
            for o, v in zip(out, tok.tolist()):
                if not o["done"]:
                    o["tokens"].append(v)
                    o["times"].append(t)
                    o["done"] = len(o["tokens"]) >= o["r"]["max_new_tokens"] or v in o["r"]["eos"]
        res += out
        P.log(f"batch {bi + 1}/{len(batches)}: {len(batch)} sequences, {steps} decode steps, "
              f"at {time.perf_counter() - start:.2f} s")
    duration = max(o["times"][-1] for o in res)

    results, itl = [], []
    for r, o in zip(reqs, res):
        ts, n = o["times"], len(o["tokens"])
        itl += [(b - a_) * 1e3 for a_, b in zip(ts, ts[1:])]
        results.append({"id": r["id"], "tokens": o["tokens"],
                        "finish_reason": "stop" if o["tokens"][-1] in r["eos"] else "length",
                        "prompt_len": len(r["prompt"]), "ttft_ms": ts[0] * 1e3,
                        "tpot_ms": (ts[-1] - ts[0]) * 1e3 / (n - 1) if n > 1 else None})
    if a.out:
        with open(a.out, "w") as f:
            for x in results:
                f.write(json.dumps(x) + "\n")
    n_out = sum(len(x["tokens"]) for x in results)
    summary = {
        "engine": "pytorch-peer",
        "mode": ("static batching: requests in file order, `concurrency` at a time; prefill "
                 + ("one sequence at a time (batch-1 compiled prefill" if G == 1 else
                    f"up to {G} sequences of one length at a time (compiled batched prefill") +
                 ", KV copied into the batch cache); decode at batch "
                 f"`concurrency`, one {'CUDA graph' if cuda else 'call'} per step, until the batch's last "
                 "sequence is done (done rows run on as padding); a partial last batch at its own size; greedy"),
        "concurrency": C, "requests": len(reqs), "output_tokens": n_out,
        "duration_s": duration, "output_tok_s": n_out / duration, "request_s": len(reqs) / duration,
        "ttft_ms": stats([x["ttft_ms"] for x in results]),
        "tpot_ms": stats([x["tpot_ms"] for x in results if x["tpot_ms"] is not None]),
        "itl_ms": stats(itl),
        "config": a.config, "device": dev, "compiled": a.compile,
        "decode_forms": {"attention": a.attention, "moe": a.moe},
        "prompt_tokens": sum(x["prompt_len"] for x in results), "warmup_s": warm_s,
    }
    print(json.dumps(summary), flush=True)
    f = lambda s: "-" if s["p50"] is None else f"{s['p50']:.2f} / {s['p99']:.2f}"  # noqa: E731
    P.log(f"peer, concurrency {C}: {len(reqs)} requests, {n_out} output tokens in {duration:.2f} s: "
          f"{summary['output_tok_s']:.1f} tok/s; TTFT p50/p99 {f(summary['ttft_ms'])} ms, "
          f"TPOT p50/p99 {f(summary['tpot_ms'])} ms, ITL p50/p99 {f(summary['itl_ms'])} ms")
    return 0


def make_weights(a):
    import torch
    import m31_peer as P
    from safetensors.torch import save_file
    c = P.CONFIGS[a.config]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    W = {k: v.contiguous().cpu() for k, v in P.random_weights(c, dev, a.seed, draft=True).items()}
    save_file(W, a.out, metadata={"h3_model": "minimax_m3_1", "h3_config": a.config})
    P.log(f"wrote {len(W)} random tensors ({sum(v.numel() * v.element_size() for v in W.values()) / 2**30:.2f} GiB) to {a.out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    mk = sub.add_parser("make-requests", help="write a random request list on stdout")
    mk.add_argument("--n", type=int, required=True)
    mk.add_argument("--isl", type=int, required=True)
    mk.add_argument("--osl", type=int, required=True)
    mk.add_argument("--vocab", type=int, default=200064)
    mk.add_argument("--seed", type=int, default=0)
    sv = sub.add_parser("serve", help="serve a request list with static batching")
    sv.add_argument("--requests", required=True)
    sv.add_argument("--concurrency", type=int, required=True)
    sv.add_argument("--config", choices=["small", "tiny"], default="small")
    sv.add_argument("--device", choices=["cuda", "cpu"])
    sv.add_argument("--out", help="results JSONL, one line per request")
    sv.add_argument("--no-compile", dest="compile", action="store_false")
    sv.add_argument("--seed", type=int, default=0, help="random weights' seed")
    sv.add_argument("--weights", help="safetensors weights in h3's names (make-weights), else random")
    sv.add_argument("--prefill-batch", type=int, default=1,
                    help="prefill up to G consecutive sequences of one prompt length at once (default 1)")
    sv.add_argument("--attention", choices=["flex", "sdpa"], default="sdpa",
                    help="the decode step's attention form (bench/m31_peer_decode_check.py checks them)")
    sv.add_argument("--moe", choices=["grouped", "dense"], default="grouped",
                    help="the decode step's MoE form (grouped: torch._grouped_mm; dense: every expert on every row)")
    mw = sub.add_parser("make-weights", help="write the peer's random weights for both engines")
    mw.add_argument("--out", required=True)
    mw.add_argument("--config", choices=["small", "tiny"], default="small")
    mw.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.mode == "make-weights":
        return make_weights(a)
    if a.mode == "make-requests":
        if a.n < 0 or a.isl < 1 or a.osl < 1 or a.vocab < 1:
            ap.error("make-requests needs n >= 0, isl, osl, vocab >= 1")
        return make_requests(a)
    if a.concurrency < 1:
        ap.error("--concurrency must be >= 1")
    return serve(a)


if __name__ == "__main__":
    sys.exit(main())
