#!/usr/bin/env python3
"""Independent numpy reference of MiniMax-M3.1 tiny (spec: docs/models/minimax_m3_1.md).

Written from the spec alone (no h3 code), numpy only: prefill + greedy decode WITHOUT a KV
cache (the whole sequence is recomputed for every new token; causal attention makes row t
depend only on rows <= t, so this equals the cached decode). Numerics of §4.1: Gemma RMSNorm
x·rsqrt(mean(x²)+eps)·(1+w); per-head q/k norm before partial neox RoPE (tables computed in
fp64, stored fp32); MSA sparse attention with per-(row, index head) block top-k (current block
forced, ties to the lower block) on sparse layers and dense causal attention on dense layers;
fp32 router (sigmoid, select by s + correction_bias, weights s/Σs·2.0); swigluoai; MoE
combine in ascending expert id, then the shared expert, one bf16 rounding; fp32 logits,
greedy argmax (ties: lowest id). Used to cross-check h3's generated tokens.

CLI (stable; exit 0 ok, 2 on a user error):
  m31_ref.py --weights W.safetensors --prompt P.safetensors --max-new-tokens 32 --out tokens.safetensors
  m31_ref.py --make-weights W.safetensors --seed N      (target §3 + DSpark draft §5.4 names, bf16;
                                                          router fp32; inits of §2 "Random test weights")
  m31_ref.py --make-prompt P.safetensors --prompt-len 20 --seed N   (writes `prompt` i32[P] in [0, V-1))
  optional: --config tiny (the only one), --set key=value
Prompt file: one integer tensor (i32 or i64) named `prompt` (or `ids` / `tokens`, or the only
tensor in the file), shape [P]. Output: `tokens` i32[max_new_tokens] (generated tokens only) and
`logits` f32[max_new_tokens, V] (the row each token was taken from).
"""
import argparse
import math
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refcommon import (RefError, attention, bf16, dot_f32, f32, linear, need, parse_sets,  # noqa: E402
                       rms_norm, seqsum, sigmoid, st_read, st_write)

CONFIGS = {
    "tiny": dict(layers=3, n_dense=1, hidden=64, q_heads=4, kv_heads=2, head_dim=16, rot_dims=8,
                 theta=5e6, eps=1e-6, dense_ffn=128, experts=8, top_k=2, expert_ffn=32,
                 shared_ffn=32, routed_scale=2.0, alpha=1.702, limit=7.0, vocab=256,
                 index_heads=2, index_dim=16, block=8, topk_blocks=2, max_ctx=256,
                 draft_ffn=128, captured=3, markov_rank=8),
}


# ------------------------------------------------------------------- weights ----------------
def weight_table(c):
    """[(name, shape, dtype, kind)] of §3 (target) and §5.4 (draft, bf16 run)."""
    H, d, V = c["hidden"], c["head_dim"], c["vocab"]
    nq, nkv, ni, di = c["q_heads"], c["kv_heads"], c["index_heads"], c["index_dim"]
    E = c["experts"]
    t = [("embed_tokens.weight", [V, H], "BF16", "mat"), ("lm_head.weight", [V, H], "BF16", "mat"),
         ("norm.weight", [H], "BF16", "norm")]

    def attn(p):
        return [(f"{p}.input_layernorm.weight", [H], "BF16", "norm"),
                (f"{p}.post_attention_layernorm.weight", [H], "BF16", "norm"),
                (f"{p}.self_attn.qkv_proj.weight", [nq * d + 2 * nkv * d, H], "BF16", "mat"),
                (f"{p}.self_attn.o_proj.weight", [H, nq * d], "BF16", "mat"),
                (f"{p}.self_attn.q_norm.weight", [d], "BF16", "norm"),
                (f"{p}.self_attn.k_norm.weight", [d], "BF16", "norm")]

    def mlp(p, f):
        return [(f"{p}.gate_up_proj.weight", [2 * f, H], "BF16", "mat"),
                (f"{p}.down_proj.weight", [H, f], "BF16", "mat")]
    for i in range(c["layers"]):
        p = f"layers.{i}"
        t += attn(p)
        if i < c["n_dense"]:
            t += mlp(f"{p}.mlp", c["dense_ffn"])
            continue
        t += [(f"{p}.self_attn.indexer.q_proj.weight", [ni * di, H], "BF16", "mat"),
              (f"{p}.self_attn.indexer.k_proj.weight", [di, H], "BF16", "mat"),
              (f"{p}.self_attn.indexer.q_norm.weight", [di], "BF16", "norm"),
              (f"{p}.self_attn.indexer.k_norm.weight", [di], "BF16", "norm"),
              (f"{p}.mlp.router.weight", [E, H], "F32", "mat"),
              (f"{p}.mlp.router.correction_bias", [E], "F32", "cbias")]
        for e in range(E):
            t += mlp(f"{p}.mlp.experts.{e}", c["expert_ffn"])
        t += mlp(f"{p}.mlp.shared_expert", c["shared_ffn"])
    t += [("dspark.fc.weight", [H, c["captured"] * H], "BF16", "mat"),
          ("dspark.hidden_norm.weight", [H], "BF16", "norm")]
    t += attn("dspark.layers.0")
    t += mlp("dspark.layers.0.mlp", c["draft_ffn"])
    t += [("dspark.norm.weight", [H], "BF16", "norm"),
          ("dspark.markov.w1.weight", [V, c["markov_rank"]], "BF16", "mat"),
          ("dspark.markov.w2.weight", [V, c["markov_rank"]], "BF16", "mat")]
    return t


def make_weights(c, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dt, kind in weight_table(c):
        if kind == "mat":
            lim = 1.0 / math.sqrt(shape[1])
            a = rng.uniform(-lim, lim, shape)
        elif kind == "norm":
            a = rng.uniform(-0.1, 0.1, shape)
        else:
            a = rng.uniform(-0.01, 0.01, shape)
        a = f32(a)
        out[name] = (bf16(a) if dt == "BF16" else a, dt)
    return out


def load_weights(path, c):
    st = st_read(path)
    return {name: need(st, name, shape, path, (dt,))
            for name, shape, dt, _ in weight_table(c) if not name.startswith("dspark.")}


# ------------------------------------------------------------------- ops --------------------
def norm(x, w, c):
    """Gemma NORM: bf16(x·rsqrt(mean(x²)+eps)·(1+w)), over the last axis."""
    return rms_norm(x, w, c["eps"], offset=1.0)


def rope_tables(T, c):
    """cos/sin f32[T, R/2]: angle p·theta^(−2i/R), computed in fp64, stored fp32."""
    R = c["rot_dims"]
    inv = c["theta"] ** (-2.0 * np.arange(R // 2, dtype=np.float64) / R)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    return f32(np.cos(ang)), f32(np.sin(ang))


def rope(x, cos, sin, R):
    """x bf16[T, nh, D]: (a, b) = (x[i], x[i+R/2]) -> (a·cos − b·sin, b·cos + a·sin), bf16."""
    h = R // 2
    a, b = x[..., :h], x[..., h:R]
    cs, sn = cos[:, None, :], sin[:, None, :]
    out = x.copy()
    out[..., :h] = bf16((a * cs).astype(np.float32) - (b * sn).astype(np.float32))
    out[..., h:R] = bf16((b * cs).astype(np.float32) + (a * sn).astype(np.float32))
    return out


def swigluoai(u, c):
    """u bf16[T, 2F] (gate | up) -> bf16[T, F]: g = min(gate, 7); u = clamp(up, ±7); g·σ(α·g)·(u+1)."""
    F = u.shape[-1] // 2
    g = np.minimum(u[..., :F], np.float32(c["limit"]))
    up = np.clip(u[..., F:], np.float32(-c["limit"]), np.float32(c["limit"]))
    return bf16((g * sigmoid(np.float32(c["alpha"]) * g)).astype(np.float32) * (up + np.float32(1.0)))


def ffn(h, W, p, c):
    return linear(swigluoai(linear(h, W[f"{p}.gate_up_proj.weight"]), c), W[f"{p}.down_proj.weight"])


def topk_desc(scores, k):
    """Indices of the k largest scores, descending, ties to the lower index."""
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
    return order[:k]


def select_blocks(iq, ik, c):
    """iq bf16[T, ni, di], ik bf16[T, di] -> sel[t][h] = sorted list of kept blocks (§4.2.6)."""
    B, K = c["block"], c["topk_blocks"]
    T = iq.shape[0]
    dots = dot_f32(iq, ik)  # [T, ni, T] fp32 raw scores
    sel = []
    for t in range(T):
        nb = t // B + 1
        row = []
        for h in range(iq.shape[1]):
            sc = [float(np.max(dots[t, h, b * B:min((b + 1) * B, t + 1)])) for b in range(nb)]
            sc[t // B] = math.inf
            row.append(sorted(topk_desc(sc, min(K, nb))))
        sel.append(row)
    return sel


def block_mask(sel, c):
    """sel[t][h] = kept blocks -> bool [nh, T, T]: key j visible to row t for head h if its block is kept."""
    T, nh, B = len(sel), len(sel[0]), c["block"]
    m = np.zeros((nh, T, T), bool)
    blk = np.arange(T) // B
    for t in range(T):
        for h in range(nh):
            m[h, t] = np.isin(blk, sel[t][h])
    return m


def attn_layer(x_h, W, p, c, cos, sin, sparse):
    """Steps 2-8 of §4.2 on h bf16[T, H] (positions 0..T-1) -> o_proj output bf16[T, H]."""
    nq, nkv, d, R = c["q_heads"], c["kv_heads"], c["head_dim"], c["rot_dims"]
    T = x_h.shape[0]
    qkv = linear(x_h, W[f"{p}.self_attn.qkv_proj.weight"])
    q = qkv[:, :nq * d].reshape(T, nq, d)
    k = qkv[:, nq * d:(nq + nkv) * d].reshape(T, nkv, d)
    v = qkv[:, (nq + nkv) * d:].reshape(T, nkv, d)
    q = rope(norm(q, W[f"{p}.self_attn.q_norm.weight"], c), cos, sin, R)
    k = rope(norm(k, W[f"{p}.self_attn.k_norm.weight"], c), cos, sin, R)
    sel = None
    if sparse:
        ni, di = c["index_heads"], c["index_dim"]
        iq = linear(x_h, W[f"{p}.self_attn.indexer.q_proj.weight"]).reshape(T, ni, di)
        ik = linear(x_h, W[f"{p}.self_attn.indexer.k_proj.weight"]).reshape(T, 1, di)
        iq = rope(norm(iq, W[f"{p}.self_attn.indexer.q_norm.weight"], c), cos, sin, R)
        ik = rope(norm(ik, W[f"{p}.self_attn.indexer.k_norm.weight"], c), cos, sin, R)
        sel = select_blocks(iq, ik[:, 0], c)
    causal = np.tril(np.ones((T, T), bool))
    mask = causal[None] if sel is None else (block_mask(sel, c) & causal[None])  # [1 or nkv, T, T]
    group = nq // nkv
    head_kv = np.arange(nq) // group  # q head n uses kv head n / (nq/nkv)
    mask = mask[head_kv] if mask.shape[0] > 1 else mask
    o = attention(q.transpose(1, 0, 2), k[:, head_kv].transpose(1, 0, 2), v[:, head_kv].transpose(1, 0, 2),
                  mask, 1.0 / math.sqrt(d)).transpose(1, 0, 2)
    return linear(o.reshape(T, nq * d), W[f"{p}.self_attn.o_proj.weight"])


def router(h, W, p, c):
    """§4.2.10 -> (ids [T, k] ascending, weights f32[T, k]) with Σw = routed_scale."""
    logits = dot_f32(h, W[f"{p}.mlp.router.weight"])
    s = sigmoid(logits)
    score = (s + W[f"{p}.mlp.router.correction_bias"][None, :]).astype(np.float32)
    ids = np.array([sorted(topk_desc(list(score[t]), c["top_k"])) for t in range(h.shape[0])], np.int64)
    ssel = np.take_along_axis(s, ids, axis=1)
    w = (ssel / seqsum(ssel)[:, None]).astype(np.float32)
    return ids, (w * np.float32(c["routed_scale"])).astype(np.float32)


def moe(h, W, p, c):
    """Routed experts (ascending id) then the shared expert, fp32 sum, one bf16 rounding."""
    ids, w = router(h, W, p, c)
    acc = np.zeros(h.shape, np.float32)
    for t in range(h.shape[0]):
        for j in range(ids.shape[1]):
            y = ffn(h[t:t + 1], W, f"{p}.mlp.experts.{ids[t, j]}", c)[0]
            acc[t] = (acc[t] + w[t, j] * y).astype(np.float32)
    acc = (acc + ffn(h, W, f"{p}.mlp.shared_expert", c)).astype(np.float32)
    return bf16(acc)


def forward(ids, W, c, trace=None):
    """Full causal forward of ids [T] at positions 0..T-1 -> fp32 logits [T, V].
    When `trace` is a list, the residual x (bf16 [T, H]) before each layer and after the last is appended."""
    T = len(ids)
    cos, sin = rope_tables(T, c)
    x = W["embed_tokens.weight"][np.asarray(ids)]
    for i in range(c["layers"]):
        if trace is not None:
            trace.append(x)
        p = f"layers.{i}"
        sparse = i >= c["n_dense"]
        x = bf16(x + attn_layer(norm(x, W[f"{p}.input_layernorm.weight"], c), W, p, c, cos, sin, sparse))
        h = norm(x, W[f"{p}.post_attention_layernorm.weight"], c)
        x = bf16(x + (moe(h, W, p, c) if sparse else ffn(h, W, f"{p}.mlp", c)))
    if trace is not None:
        trace.append(x)
    return linear(norm(x, W["norm.weight"], c), W["lm_head.weight"], out_bf16=False)


def generate(prompt, W, c, max_new):
    """Greedy: token k = argmax of the last row of forward(prompt + tokens[:k])."""
    seq, toks, rows = [int(v) for v in prompt], [], []
    for _ in range(max_new):
        logits = forward(seq, W, c)[-1]
        nxt = int(np.argmax(logits))
        toks.append(nxt)
        rows.append(logits)
        seq.append(nxt)
    return np.array(toks, np.int32), np.array(rows, np.float32).reshape(max_new, c["vocab"])


def read_prompt(path, c):
    st = st_read(path)
    names = [n for n in ("prompt", "ids", "tokens") if n in st] or (list(st) if len(st) == 1 else [])
    if not names:
        raise RefError(f"{path}: no prompt tensor (name it 'prompt', 'ids' or 'tokens')")
    arr, dt = st[names[0]]
    if dt not in ("I32", "I64") or arr.ndim != 1 or arr.shape[0] < 1:
        raise RefError(f"{path}: '{names[0]}' must be a non-empty i32/i64 [P] tensor (got {dt} {list(arr.shape)})")
    if arr.min() < 0 or arr.max() >= c["vocab"]:
        raise RefError(f"{path}: token ids must lie in [0, {c['vocab']})")
    return arr.astype(np.int64)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--set", action="append", metavar="KEY=VALUE")
    ap.add_argument("--weights")
    ap.add_argument("--prompt")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--out")
    ap.add_argument("--make-weights", metavar="FILE")
    ap.add_argument("--make-prompt", metavar="FILE")
    ap.add_argument("--prompt-len", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        c = parse_sets(args.set, CONFIGS[args.config], "m31_ref.py")
        if args.make_weights or args.make_prompt:
            if args.make_weights:
                st_write(args.make_weights, make_weights(c, args.seed))
            if args.make_prompt:
                if args.prompt_len < 1:
                    raise RefError("m31_ref.py: --prompt-len must be >= 1")
                rng = np.random.default_rng(args.seed)
                st_write(args.make_prompt, {"prompt": (rng.integers(0, c["vocab"] - 1, args.prompt_len)
                                                       .astype(np.int32), "I32")})
            return 0
        if not (args.weights and args.prompt and args.out):
            raise RefError("m31_ref.py: needs --weights, --prompt and --out (or --make-weights/--make-prompt)")
        if args.max_new_tokens < 1:
            raise RefError("m31_ref.py: --max-new-tokens must be >= 1")
        prompt = read_prompt(args.prompt, c)
        if len(prompt) + args.max_new_tokens > c["max_ctx"]:
            raise RefError(f"m31_ref.py: prompt {len(prompt)} + {args.max_new_tokens} new tokens exceeds "
                           f"max context {c['max_ctx']}")
        toks, logits = generate(prompt, load_weights(args.weights, c), c, args.max_new_tokens)
        st_write(args.out, {"tokens": (toks, "I32"), "logits": (logits, "F32")})
        return 0
    except RefError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
