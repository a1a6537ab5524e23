#!/usr/bin/env python3
"""m31_peer_decode_check.py: is the PyTorch peer's decode step (bench/m31_peer.py) right on this
device, in each of its forms? (Its FlexAttention form, compiled and captured, computed wrong
logits on the H200 while right eager and on the CPU: served tokens stopped depending on the
prompt after the first one.) This check prefills B random prompts of L tokens
(small config, random weights), then takes one decode step from that state in several forms and
compares each one's fp32 logits with a plain reference written here (attention as an explicit
masked softmax over the selected keys, experts as one F.linear per (row, expert)), for the
forms in FORMS (m31_peer.set_decode_forms: attention flex | sdpa, moe grouped | dense):
    eager      m31_peer.decode_step as it is, no compile
    graph      torch.compile'd and captured as one CUDA graph (what m31_serve_peer.py replays),
               timed (median of 20 replays)
Also the ops alone (each attention and moe form against the reference on the same inputs).
Prints one line per form and mode: |logits - reference| per row (median, max, rows above
0.25), rows whose argmax differs, step time; a form is right when at most B/8 rows differ by
more than 0.25 (a router near-tie moves a row's logits that far; a wrong form moves all).
The last line is the fastest right graph form (without CUDA: the first right eager form) as
m31_serve_peer.py arguments ("--attention A --moe M"; bench/m31_serve.sh reads it), or "no
form is right" (exit 1).
    bench/m31_peer_decode_check.py [--config small] [--batch 64] [--prompt 2048] [--seed 0]"""
import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import m31_peer as P  # noqa: E402


def ref_attention(q, K, V, pos, sel, n, c):
    """q [Bt, nq, d], K/V [Bt, nkv, S, d]; keys j <= pos[b] of the blocks sel[b, g, :n[b, g]]."""
    Bt, nq, d = q.shape
    nkv, S, blk = K.shape[1], K.shape[2], c["block"]
    G = nq // nkv
    sel = sel.expand(Bt, nkv, sel.shape[2])
    n = n.expand(Bt, nkv)
    out = torch.empty_like(q)
    for b in range(Bt):
        for g in range(nkv):
            blocks = sel[b, g, :n[b, g]].tolist()
            j = torch.cat([torch.arange(x * blk, (x + 1) * blk) for x in blocks]).to(q.device)
            j = j[j <= pos[b]]
            s = q[b, g * G:(g + 1) * G].float() @ K[b, g, j].float().t() / math.sqrt(d)
            out[b, g * G:(g + 1) * G] = (s.softmax(-1) @ V[b, g, j].float()).to(q.dtype)
    return out


def ref_moe(h, L, c):
    N, k = h.shape[0], c["top_k"]
    s = torch.sigmoid(h.float() @ L["mlp.router.weight"].t())
    ids = torch.topk(s + L["mlp.router.correction_bias"], k, dim=-1).indices.sort(-1).values
    ssel = s.gather(1, ids)
    w = ssel / ssel.sum(-1, keepdim=True) * P.ROUTED_SCALE
    y = torch.zeros(N, h.shape[1], dtype=torch.float32, device=h.device)
    for r in range(N):
        for t in range(k):
            e = int(ids[r, t])
            y[r] += w[r, t] * P.mlp(h[r:r + 1], L["experts.gate_up_proj"][e], L["experts.down_proj"][e])[0].float()
    shared = P.mlp(h, L["mlp.shared_expert.gate_up_proj.weight"], L["mlp.shared_expert.down_proj.weight"])
    return (y + shared.float()).to(P.BF16)


# the forms tried: m31_serve_peer.py's default, then each op's alternative alone
FORMS = (("sdpa", "grouped"), ("flex", "grouped"), ("sdpa", "dense"))


def clone_cache(cache):
    return [tuple(None if t is None else t.clone() for t in L) for L in cache]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="small")
    ap.add_argument("--batch", type=int, default=64, help="sequences (rows of the decode step)")
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    c = P.CONFIGS[a.config]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    M = P.pack_model(P.random_weights(c, dev, a.seed), c)
    B, T = a.batch, a.prompt
    cache = P.new_cache(c, B, P.capacity_for(c, T + 16), dev, fill=False)
    first = []
    for b in range(B):
        scratch = P.new_cache(c, 1, P.capacity_for(c, T), dev, fill=False)
        first.append(int(P.prefill(M, torch.randint(0, c["vocab"], (T,), device=dev), scratch, c).argmax(-1)))
        for dst, src in zip(cache, scratch):
            for d_, s_ in zip(dst, src):
                if d_ is not None:
                    d_[b, ..., :T, :].copy_(s_[0, ..., :T, :])
    tok = torch.tensor(first, device=dev)
    pos = torch.full((B,), T, device=dev, dtype=torch.int64)
    print(f"{a.config} on {dev}: {B} prompts of {T}, first tokens {first}")

    # the reference step: m31_peer's step with the two ops replaced by the plain ones above
    P.decode_attention, P.decode_moe = ref_attention, ref_moe
    ref = P.decode_step(M, tok, pos, clone_cache(cache), c)

    # the ops alone on layer n_dense's inputs
    L = M["layers"][c["n_dense"]]
    h = (torch.randn(B, c["dim"], device=dev) * 0.5).to(P.BF16)
    for name, form in P.MOE_FORMS.items():
        d = (form(h, L, c).float() - ref_moe(h, L, c).float()).abs().max().item()
        print(f"op moe [{name}]: max |diff| vs reference {d:.4f}")
    q = torch.randn(B, c["heads"], c["head_dim"], device=dev).to(P.BF16)
    K, V, IK = cache[c["n_dense"]]
    iq = torch.randn(B, c["index_heads"], c["index_dim"], device=dev).to(P.BF16)
    sel, n = P.select_blocks(iq, IK, pos - 1, c)
    for name, form in P.ATTENTION_FORMS.items():
        d = (form(q, K, V, pos - 1, sel, n, c).float() - ref_attention(q, K, V, pos - 1, sel, n, c).float()).abs().max().item()
        print(f"op attention [{name}]: max |diff| vs reference {d:.4f}")

    best = None
    for attn, moe in FORMS:
        P.set_decode_forms(attn, moe)
        fn = lambda t, p, kv: P.decode_step(M, t, p, kv, c)  # noqa: E731
        for mode in ("eager", "graph") if dev == "cuda" else ("eager",):
            kv = clone_cache(cache)
            ms = None
            try:
                if mode == "graph":  # compiled, captured, replayed: m31_serve_peer.py's step
                    f = torch.compile(fn, dynamic=False)
                    out = torch.empty(B, c["vocab"], device=dev)
                    run = P.graph_of(lambda: out.copy_(f(tok, pos, kv)), dev)
                    ms = P.Timer(dev).median_ms(run, 20)
                    lg = out
                else:
                    lg = fn(tok, pos, kv)
            except Exception as e:  # a form that does not run here is reported, not fatal
                print(f"step [{attn}, {moe}] {mode}: failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            rows = (lg - ref).abs().amax(-1)
            far = int((rows > 0.25).sum())
            bad = int((lg.argmax(-1) != ref.argmax(-1)).sum())
            ok = far <= B // 8
            print(f"step [{attn}, {moe}] {mode}: |logits - reference| per row: median {rows.median().item():.4f}, "
                  f"max {rows.max().item():.4f}, {far} of {B} rows above 0.25; argmax differs in {bad}"
                  + (f", {ms:.3f} ms per step" if ms else "") + ("" if ok else "  WRONG"), flush=True)
            if ok and (mode == "graph" or dev != "cuda") and (best is None or (ms or 0) < best[0]):
                best = (ms or 0, attn, moe)  # without CUDA: the first right eager form
    if best:
        print(f"--attention {best[1]} --moe {best[2]}")
    else:
        print("no form is right on this device")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
