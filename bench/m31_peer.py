#!/usr/bin/env python3
"""m31_peer.py: the PyTorch peer of MiniMax-M3.1 (issue 17, item 3): the target model of
docs/models/minimax_m3_1.md §4 written in PyTorch in its fastest form, timed on one H200,
and checked token for token against h3's CPU executor on the tiny config.

    python3 bench/m31_peer.py bench [--config small] [--iters N] [--device cuda|cpu] [--no-compile]
    python3 bench/m31_peer.py check --weights W.safetensors --h3exec H3EXEC --plan PLAN
                                    [--config tiny] [--tokens 1,2,...] [--seed N]

bench: one JSON object per measurement on stdout, human lines on stderr:
  copy     device-to-device copy of 2 GiB: GB/s counting read + write bytes (2N/t); this is
           the bandwidth the decode floors divide by;
  prefill  one sequence of prompt_len (small: 2048) tokens from an empty cache: ms, model
           FLOPs (linear layers with the top-k routed experts, attention QK and PV over the
           keys each row attends, lm_head of the last row) and TFLOP/s;
  decode   one step at batch 1 and 64, contexts 2048 and 16384 (each row at position
           = context, caches filled with random K/V/IK up to it): ms per step (median of CUDA
           events over --iters graph replays after 3 warm-ups), and the bandwidth floor =
           the bytes a step must read / the copy's GB/s. Bytes (counted by
           bench/m31_floor.py from the model's config block): every dense weight of the
           layers (attention, indexer, router, dense MLP, shared expert), the distinct routed
           experts (min(E, batch*top_k) per sparse layer: batch 1 reads 4, batch 64 all 32),
           final norm + lm_head, the embedding rows, K/V of every key on the dense layers, K/V
           of the selected blocks (min(16*128, context+1) keys per kv head) on the sparse
           layers, and IK of every key on the sparse layers (the indexer scores each key; the
           floor would not be one without them).
check: writes random weights (h3's names and dtypes, plus the DSpark draft tensors that h3's
  weight loader requires) to --weights unless the file exists, runs the peer's prefill and
  greedy decode of max_new_tokens tokens from the prompt (--tokens or random), runs h3exec on
  the CPU (graph prefill, then the generate program) with the same weights and prompt, and
  prints the max abs / relative difference of the prefill's last-row fp32 logits and whether
  the greedy tokens agree. Exit 0 when the logits agree within bf16 tolerance and the tokens
  are equal, 1 otherwise.

Form of the peer (the fastest PyTorch form found for each part; bf16, static shapes):
  - one torch.compile'd function per mode (prefill, decode step); on CUDA the decode step is
    replayed as ONE captured torch.cuda.CUDAGraph (compiled code inside);
  - static KV cache per layer, [B, kv_heads, capacity, head_dim] (IK: [B, capacity, di]),
    written before attention as the spec requires; one block = 128 tokens of it;
  - fused input projection (qkv | index q | index k: one GEMM on sparse layers);
  - routed experts as grouped GEMMs (torch._grouped_mm over rows sorted by expert, CUTLASS on
    sm90): reads each active expert's weights once at every batch size, no padding;
  - attention in decode (m31_serve_peer.py --attention; bench/m31_peer_decode_check.py
    checks each form on the device against a plain reference from a prefilled state):
    "sdpa" (the default): SDPA over the whole cache with one boolean mask per (row, kv head)
    that keeps the keys j <= pos of the selected blocks; it reads every cached key, not only
    the 16 selected blocks (at a 16k context 8 x the keys a sparse kernel reads). "flex":
    FlexAttention with a BlockMask whose kv blocks are exactly the selected blocks, which
    would read only those; compiled and captured in a CUDA graph (torch 2.11, H200) it gives
    logits off by about 3 in every row (eager it is right), so it is not the default. Dense
    layers use the same forms with blocks 0..pos/128;
  - prefill attention: FlashAttention through SDPA (is_causal). On sparse layers a row at
    position p has floor(p/128)+1 <= 16 blocks while p < 2048, so every causal block is
    selected and sparse attention IS causal attention (spec §8.2) - the indexer scores are
    then not needed (only IK is cached). Longer prompts take the general path: block top-k
    per row and index head, SDPA with the resulting boolean mask;
  - fp32 router on fp32(h); fp32 logits from bf16 lm_head (torch.mm out_dtype=float32 on
    CUDA, no rounding to bf16).
Numerics follow §4.1 up to the order of fp32 sums inside kernels; ties in top-k go to
whatever torch.topk returns (the spec's lower-index rule only matters for exact ties).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import m31_floor  # the byte counts of the floors (bench/, beside this file)
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

def peer_config(name):
    """The `config NAME` block of models/minimax_m3_1.g (bench/m31_floor.py parses it), with the
    peer's name for the sparse block: block = sparse_block (= page, which the peer assumes)."""
    c = m31_floor.config(name, [])
    if c["sparse_block"] != c["page"]:
        raise SystemExit(f"m31_peer.py: config {name}: sparse_block {c['sparse_block']} != page {c['page']}")
    c["block"] = c["sparse_block"]
    return c


CONFIGS = {name: peer_config(name) for name in ("small", "tiny")}
EPS, ALPHA, LIMIT, ROUTED_SCALE = 1e-6, 1.702, 7.0, 2.0
BF16 = torch.bfloat16


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ weights (§3, §5.4) --------
def weight_table(c, draft=True):
    """[(name, shape, dtype, init)] in h3's names; init: ('mat', fan_in) | ('bound', b)."""
    H, d, V, E = c["dim"], c["head_dim"], c["vocab"], c["experts"]
    nq, nkv, ni, di = c["heads"], c["kv_heads"], c["index_heads"], c["index_dim"]
    norm, cb = ("bound", 0.1), ("bound", 0.01)
    t = [("embed_tokens.weight", [V, H], BF16, ("mat", H)),
         ("lm_head.weight", [V, H], BF16, ("mat", H)), ("norm.weight", [H], BF16, norm)]

    def attn(p):
        return [(f"{p}.input_layernorm.weight", [H], BF16, norm),
                (f"{p}.post_attention_layernorm.weight", [H], BF16, norm),
                (f"{p}.self_attn.qkv_proj.weight", [nq * d + 2 * nkv * d, H], BF16, ("mat", H)),
                (f"{p}.self_attn.o_proj.weight", [H, nq * d], BF16, ("mat", nq * d)),
                (f"{p}.self_attn.q_norm.weight", [d], BF16, norm),
                (f"{p}.self_attn.k_norm.weight", [d], BF16, norm)]

    def mlp(p, f):
        return [(f"{p}.gate_up_proj.weight", [2 * f, H], BF16, ("mat", H)),
                (f"{p}.down_proj.weight", [H, f], BF16, ("mat", f))]
    for i in range(c["n_layers"]):
        p = f"layers.{i}"
        t += attn(p)
        if i < c["n_dense"]:
            t += mlp(f"{p}.mlp", c["mlp_ffn"])
            continue
        t += [(f"{p}.self_attn.indexer.q_proj.weight", [ni * di, H], BF16, ("mat", H)),
              (f"{p}.self_attn.indexer.k_proj.weight", [di, H], BF16, ("mat", H)),
              (f"{p}.self_attn.indexer.q_norm.weight", [di], BF16, norm),
              (f"{p}.self_attn.indexer.k_norm.weight", [di], BF16, norm),
              (f"{p}.mlp.router.weight", [E, H], torch.float32, ("mat", H)),
              (f"{p}.mlp.router.correction_bias", [E], torch.float32, cb)]
        for e in range(E):
            t += mlp(f"{p}.mlp.experts.{e}", c["expert_ffn"])
        t += mlp(f"{p}.mlp.shared_expert", c["shared_ffn"])
    if draft:
        t += [("dspark.fc.weight", [H, 3 * H], BF16, ("mat", 3 * H)),
              ("dspark.hidden_norm.weight", [H], BF16, norm)]
        t += attn("dspark.layers.0") + mlp("dspark.layers.0.mlp", c["draft_ffn"])
        t += [("dspark.norm.weight", [H], BF16, norm),
              ("dspark.markov.w1.weight", [V, c["markov_rank"]], BF16, ("mat", c["markov_rank"])),
              ("dspark.markov.w2.weight", [V, c["markov_rank"]], BF16, ("mat", c["markov_rank"]))]
    return t


def random_weights(c, device, seed, draft=False):
    """§2 random test weights (the distribution, not h3's Philox bits): name -> tensor."""
    g = torch.Generator(device=device).manual_seed(seed)
    out = {}
    for name, shape, dt, (kind, v) in weight_table(c, draft):
        b = 1.0 / math.sqrt(v) if kind == "mat" else v
        out[name] = torch.empty(shape, dtype=torch.float32 if dt == BF16 and device == "cpu" else dt,
                                device=device).uniform_(-b, b, generator=g).to(dt)
    return out


def pack_model(W, c):
    """h3 names -> per-layer dicts in the peer's layout: sparse layers get one fused input
    projection (qkv | index q | index k) and stacked experts [E, 2Fe, H] / [E, H, Fe] (the
    `.g` file's `mlp.experts[experts]` params). The source tensors are released."""
    layers = []
    for i in range(c["n_layers"]):
        p = f"layers.{i}."
        L = {k[len(p):]: W.pop(k) for k in [k for k in W if k.startswith(p)]}
        if i >= c["n_dense"]:
            L["in_proj"] = torch.cat([L.pop("self_attn.qkv_proj.weight"),
                                      L.pop("self_attn.indexer.q_proj.weight"),
                                      L.pop("self_attn.indexer.k_proj.weight")])
            for part in ("gate_up_proj", "down_proj"):
                L[f"experts.{part}"] = torch.stack(
                    [L.pop(f"mlp.experts.{e}.{part}.weight") for e in range(c["experts"])])
        else:
            L["in_proj"] = L.pop("self_attn.qkv_proj.weight")
        layers.append(L)
    return dict(embed=W.pop("embed_tokens.weight"), lm_head=W.pop("lm_head.weight"),
                norm=W.pop("norm.weight"), layers=layers)


# ------------------------------------------------------------------ ops (§4.1) ----------------
def rms(x, w):
    """Gemma NORM in fp32, bf16 out: x * rsqrt(mean(x^2) + eps) * (1 + w)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS) * (1.0 + w.float())).to(BF16)


def rope_table(pos, c):
    """cos, sin fp32 [N, R/2] of positions pos [N]: angles in fp64, stored fp32."""
    R = c["rope_dims"]
    inv = c["rope_theta"] ** (-2.0 * torch.arange(R // 2, device=pos.device, dtype=torch.float64) / R)
    ang = pos.double()[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def norm_rope(x, w, n, cos, sin, c):
    """NORM_HEAD then partial neox ROPE: x bf16 [N, n*D] -> bf16 [N, n, D]."""
    h = c["rope_dims"] // 2
    xf = rms(x.unflatten(-1, (n, -1)), w).float()
    a, b = xf[..., :h], xf[..., h:2 * h]
    cs, sn = cos[:, None], sin[:, None]
    return torch.cat([a * cs - b * sn, b * cs + a * sn, xf[..., 2 * h:]], -1).to(BF16)


def swigluoai(gu):
    """gate | up halves (bf16) -> bf16 g * sigmoid(1.702 g) * (u + 1), g = min(gate, 7), u = clamp(up, +-7)."""
    g, u = gu.float().chunk(2, dim=-1)
    g = g.clamp(max=LIMIT)
    return (g * torch.sigmoid(ALPHA * g) * (u.clamp(-LIMIT, LIMIT) + 1.0)).to(BF16)


def mlp(h, gate_up, down):
    return F.linear(swigluoai(F.linear(h, gate_up)), down)


def matmul_f32(a, b):
    """bf16 a [(B,) M, K] @ b [(B,) K, N] with an fp32 result (fp32 accumulation, no bf16 rounding)."""
    if a.is_cuda:
        return (torch.bmm if a.dim() == 3 else torch.mm)(a, b, out_dtype=torch.float32)
    return a.float() @ b.float()


def route(h, L, c):
    """§4.2 step 10: fp32 router -> chosen expert ids [N, k] (ascending) and their weights [N, k]."""
    s = torch.sigmoid(h.float() @ L["mlp.router.weight"].t())
    ids = torch.topk(s + L["mlp.router.correction_bias"], c["top_k"], dim=-1).indices.sort(-1).values
    ssel = s.gather(1, ids)
    return ids, ssel / ssel.sum(-1, keepdim=True) * ROUTED_SCALE


def shared_expert(h, L):
    return mlp(h, L["mlp.shared_expert.gate_up_proj.weight"], L["mlp.shared_expert.down_proj.weight"])


def moe_grouped(h, L, c):
    """§4.2 steps 10-13 minus the residual: fp32 router, routed experts as grouped GEMMs over the
    (row, expert) pairs sorted by expert, fp32 weighted sum (ids ascending) plus the shared expert."""
    N, E, k = h.shape[0], c["experts"], c["top_k"]
    ids, w = route(h, L, c)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum((flat[:, None] == torch.arange(E, device=h.device)).sum(0), 0).to(torch.int32)
    xs = h[order // k]
    gu = torch._grouped_mm(xs, L["experts.gate_up_proj"].transpose(-2, -1), offs=offs)
    ys = torch._grouped_mm(swigluoai(gu), L["experts.down_proj"].transpose(-2, -1), offs=offs)
    y = torch.empty_like(ys).index_copy_(0, order, ys).view(N, k, -1)
    return ((w[..., None] * y.float()).sum(1) + shared_expert(h, L).float()).to(BF16)


def moe_dense(h, L, c):
    """The same sum with every expert run on every row (bmm over the stacked experts), the
    unchosen ones weighted 0: no data-dependent shapes, E / k times the FLOPs of moe_grouped."""
    ids, w = route(h, L, c)
    E = c["experts"]
    xs = h[None].expand(E, -1, -1)
    ys = torch.bmm(swigluoai(torch.bmm(xs, L["experts.gate_up_proj"].transpose(-2, -1))),
                   L["experts.down_proj"].transpose(-2, -1))                       # [E, N, H]
    y = ys.transpose(0, 1).gather(1, ids[..., None].expand(-1, -1, ys.shape[-1]))  # [N, k, H]
    return ((w[..., None] * y.float()).sum(1) + shared_expert(h, L).float()).to(BF16)


def project(x, L, cos, sin, c, sparse):
    """Steps 1-4: h, then q [N, nq, d], k, v [N, nkv, d] and, on sparse layers, iq [N, ni, di], ik [N, di]."""
    nq, nkv, d, ni, di = c["heads"], c["kv_heads"], c["head_dim"], c["index_heads"], c["index_dim"]
    z = F.linear(rms(x, L["input_layernorm.weight"]), L["in_proj"])
    q, k, v, iqk = z.split([nq * d, nkv * d, nkv * d, z.shape[1] - (nq + 2 * nkv) * d], dim=1)
    q = norm_rope(q, L["self_attn.q_norm.weight"], nq, cos, sin, c)
    k = norm_rope(k, L["self_attn.k_norm.weight"], nkv, cos, sin, c)
    v = v.unflatten(1, (nkv, d))
    if not sparse:
        return q, k, v, None, None
    iq = norm_rope(iqk[:, :ni * di], L["self_attn.indexer.q_norm.weight"], ni, cos, sin, c)
    ik = norm_rope(iqk[:, ni * di:], L["self_attn.indexer.k_norm.weight"], 1, cos, sin, c)[:, 0]
    return q, k, v, iq, ik


def finish_layer(x, o, L, c, sparse, moe=None):
    """Steps 8-13: o_proj + residual, then MoE (sparse; `moe`, default moe_grouped) or the dense
    MLP + residual."""
    x = (x.float() + F.linear(o.flatten(1), L["self_attn.o_proj.weight"]).float()).to(BF16)
    h = rms(x, L["post_attention_layernorm.weight"])
    y = (moe or moe_grouped)(h, L, c) if sparse else mlp(h, L["mlp.gate_up_proj.weight"], L["mlp.down_proj.weight"])
    return (x.float() + y.float()).to(BF16)


def logits_of(x, M):
    return matmul_f32(rms(x, M["norm"]), M["lm_head"].t())


# ------------------------------------------------------------------ prefill -------------------
def prefill(M, tokens, cache, c):
    """Bp sequences (cache batch rows 0..Bp-1) of T tokens each, tokens [Bp, T] (or [T]: one
    sequence), at positions 0..T-1 from an empty cache; returns each sequence's last row's fp32
    logits [Bp, V]. Every linear, norm and MoE runs over all Bp * T rows at once, the attention
    per sequence (SDPA's batch). cache: per layer (K, V, IK or None)."""
    tokens = tokens.reshape(-1, tokens.shape[-1])
    (Bp, T), B, G = tokens.shape, c["block"], c["heads"] // c["kv_heads"]
    pos = torch.arange(T, device=tokens.device).repeat(Bp)
    cos, sin = rope_table(pos, c)
    x = M["embed"][tokens.flatten()]
    seqs = lambda t: t.unflatten(0, (Bp, T))                   # noqa: E731  rows -> [Bp, T, ..]
    for i, L in enumerate(M["layers"]):
        sparse = i >= c["n_dense"]
        q, k, v, iq, ik = project(x, L, cos, sin, c, sparse)
        K, V, IK = cache[i]
        K[:Bp, :, :T] = seqs(k).transpose(1, 2)                 # step 5, before attention
        V[:Bp, :, :T] = seqs(v).transpose(1, 2)
        mask = None
        if sparse:
            IK[:Bp, :T] = seqs(ik)
            nb = (T + B - 1) // B
            if nb > c["topk_blocks"]:                            # else every causal block is kept
                mask = torch.stack([prefill_block_mask(a, b, c) for a, b in zip(seqs(iq), seqs(ik))])
                mask = mask.repeat_interleave(G, dim=1)
        qh, kh, vh = (seqs(t).transpose(1, 2) for t in (q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)))
        o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, is_causal=mask is None,
                                           scale=1.0 / math.sqrt(c["head_dim"]))
        x = finish_layer(x, o.transpose(1, 2).flatten(0, 1), L, c, sparse)
    return logits_of(seqs(x)[:, -1], M)


def prefill_block_mask(iq, ik, c):
    """§4.2 step 6 for T rows at 0..T-1 -> bool [ni, T, T]: key j is kept for (head, row t)
    when j <= t and its block is among the row's top-k (current block forced)."""
    T, B = iq.shape[0], c["block"]
    nb = (T + B - 1) // B
    causal = torch.ones(T, T, dtype=torch.bool, device=iq.device).tril()
    sc = torch.einsum("thd,jd->htj", iq.float(), ik.float()).masked_fill(~causal, -math.inf)
    sc = F.pad(sc, (0, nb * B - T), value=-math.inf).unflatten(-1, (nb, B)).amax(-1)  # [ni, T, nb]
    cur = torch.arange(T, device=iq.device) // B
    sc[:, torch.arange(T, device=iq.device), cur] = math.inf
    top = torch.topk(sc, c["topk_blocks"], dim=-1)
    keep = torch.zeros_like(sc, dtype=torch.bool).scatter_(-1, top.indices, top.values > -math.inf)
    blk = torch.arange(T, device=iq.device) // B
    return keep[:, :, blk] & causal


# ------------------------------------------------------------------ decode --------------------
def decode_step(M, tokens, pos, cache, c):
    """One DECODE row per sequence: tokens, pos [Bt] (row b of the cache, at position pos[b]);
    returns fp32 logits [Bt, V]. The caches are updated in place."""
    Bt, blk = tokens.shape[0], c["block"]
    rows = torch.arange(Bt, device=tokens.device)
    cos, sin = rope_table(pos, c)
    x = M["embed"][tokens]
    for i, L in enumerate(M["layers"]):
        sparse = i >= c["n_dense"]
        q, k, v, iq, ik = project(x, L, cos, sin, c, sparse)
        K, V, IK = cache[i]
        K[rows, :, pos] = k                                      # step 5, before attention
        V[rows, :, pos] = v
        nblk = K.shape[2] // blk
        if sparse:
            IK[rows, pos] = ik
            sel, n = select_blocks(iq, IK, pos, c)               # [Bt, nkv, k], [Bt, nkv]
        else:
            sel = torch.arange(nblk, device=x.device).expand(Bt, 1, nblk)
            n = (pos // blk + 1)[:, None]
        o = decode_attention(q, K, V, pos, sel, n, c)
        x = finish_layer(x, o, L, c, sparse, decode_moe)
    return logits_of(x, M)


def select_blocks(iq, IK, pos, c):
    """§4.2 step 6 for one row per sequence: iq [Bt, ni, di], IK [Bt, S, di] ->
    the top-k block ids per index head [Bt, ni, k] (valid ones first) and their count [Bt, ni]."""
    blk = c["block"]
    S = IK.shape[1]
    nblk = S // blk
    sc = matmul_f32(IK, iq.transpose(1, 2))                               # [Bt, S, ni]
    j = torch.arange(S, device=IK.device)
    sc = sc.masked_fill((j[None, :] > pos[:, None])[..., None], -math.inf)
    bs = sc.unflatten(1, (nblk, blk)).amax(2).transpose(1, 2)            # [Bt, ni, nblk]
    cur = (pos // blk)[:, None, None]
    bs = torch.where(torch.arange(nblk, device=IK.device) == cur, math.inf, bs)
    top = torch.topk(bs, min(c["topk_blocks"], nblk), dim=-1)
    return top.indices, (top.values > -math.inf).sum(-1)


def block_attention_flex(q, K, V, pos, sel, n, c):
    """Attention of one query row per sequence over the kv blocks sel[b, g, :n[b, g]] of each
    kv head g (sel [Bt, 1 or nkv, k]: one list for all kv heads on dense layers), keys
    j <= pos[b]. q [Bt, nq, d], K/V [Bt, nkv, S, d] -> o [Bt, nq, d]. Each (sequence, kv head)
    is one FlexAttention batch entry holding its G query heads: a BlockMask with one head lets
    FlexAttention use its decoding kernel (query heads of a kv head packed in one program)."""
    Bt, nq, d = q.shape
    nkv, S, blk = K.shape[1], K.shape[2], c["block"]
    G, nblk, BH = nq // nkv, S // blk, Bt * nkv
    sel = sel.expand(Bt, nkv, sel.shape[2]).reshape(BH, -1)
    n = n.expand(Bt, nkv).reshape(BH, 1)
    kv_idx = F.pad(sel, (0, nblk - sel.shape[1])).view(BH, 1, 1, nblk).to(torch.int32)
    keep = torch.zeros(BH, nblk, dtype=torch.bool, device=q.device)
    keep.scatter_(1, sel, torch.arange(sel.shape[1], device=q.device) < n)
    last = pos.repeat_interleave(nkv)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= last[b]) & keep[b, kv_idx // blk]
    bm = BlockMask.from_kv_blocks(n.view(BH, 1, 1).to(torch.int32), kv_idx, BLOCK_SIZE=blk,
                                  mask_mod=mask_mod, seq_lengths=(1, S))
    o = flex_attention(q.view(BH, G, 1, d), K.view(BH, 1, S, d), V.view(BH, 1, S, d), block_mask=bm,
                       scale=1.0 / math.sqrt(c["head_dim"]), enable_gqa=G > 1)
    return o.view(Bt, nq, d)


def block_attention_sdpa(q, K, V, pos, sel, n, c):
    """block_attention_flex's contract with one dense boolean mask over the whole cache and
    scaled_dot_product_attention: reads every cached key (S per kv head), no FlexAttention."""
    Bt, nq, d = q.shape
    nkv, S, blk = K.shape[1], K.shape[2], c["block"]
    G, nblk = nq // nkv, S // blk
    sel = sel.expand(Bt, nkv, sel.shape[2])
    keep = torch.zeros(Bt, nkv, nblk, dtype=torch.bool, device=q.device)
    keep.scatter_(2, sel, torch.arange(sel.shape[2], device=q.device) < n.expand(Bt, nkv)[..., None])
    j = torch.arange(S, device=q.device)
    mask = keep[..., j // blk] & (j <= pos[:, None, None])                            # [Bt, nkv, S]
    o = F.scaled_dot_product_attention(q.view(Bt, nkv, G, d), K, V, attn_mask=mask[:, :, None, :],
                                       scale=1.0 / math.sqrt(c["head_dim"]))
    return o.reshape(Bt, nq, d)


# The decode step's forms of its two data-dependent ops (m31_serve_peer.py --attention / --moe;
# bench/m31_peer_decode_check.py checks each against a plain reference on the device).
ATTENTION_FORMS = {"flex": block_attention_flex, "sdpa": block_attention_sdpa}
MOE_FORMS = {"grouped": moe_grouped, "dense": moe_dense}
decode_attention, decode_moe = block_attention_sdpa, moe_grouped


def set_decode_forms(attention="sdpa", moe="grouped"):
    """Picks decode_step's forms (the prefill keeps SDPA and moe_grouped)."""
    global decode_attention, decode_moe
    decode_attention, decode_moe = ATTENTION_FORMS[attention], MOE_FORMS[moe]


# ------------------------------------------------------------------ caches --------------------
def new_cache(c, batch, capacity, device, fill):
    """Per layer (K, V, IK or None): K/V bf16 [batch, nkv, capacity, d], IK bf16 [batch, capacity, di];
    zeros, or standard normal when fill (stands for the K/V/IK of an earlier context)."""
    make = (lambda *s: torch.randn(*s, device=device, dtype=BF16)) if fill else \
        (lambda *s: torch.zeros(*s, device=device, dtype=BF16))
    kv = (batch, c["kv_heads"], capacity, c["head_dim"])
    return [(make(*kv), make(*kv), make(batch, capacity, c["index_dim"]) if i >= c["n_dense"] else None)
            for i in range(c["n_layers"])]


def capacity_for(c, n_pos):
    """Cache capacity holding positions 0..n_pos-1, a whole number of blocks."""
    return -(-n_pos // c["block"]) * c["block"]


# ------------------------------------------------------------------ bench ---------------------
class Timer:
    """Median milliseconds of fn() over iters runs after warm runs (CUDA events on cuda)."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def median_ms(self, fn, iters, warm=3):
        for _ in range(warm):
            fn()
        self.sync()
        ts = []
        for _ in range(iters):
            if self.cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def decode_floor_bytes(config_name, batch, ctx):
    """The bytes a decode step of `batch` one-row sequences at context ctx must read
    (bench/m31_floor.py's count from the model's config block), with min(E, batch * top_k)
    routed experts per sparse layer: every expert the rows name taken as distinct."""
    c = m31_floor.config(config_name, [])
    touched = {batch: min(c["experts"], batch * c["top_k"])}
    return m31_floor.target_bytes(c, batch, 1, ctx, touched)[0]


def prefill_flops(c, T):
    """Model FLOPs of a prefill of T tokens from position 0 (see the header)."""
    H, d, nq, nkv = c["dim"], c["head_dim"], c["heads"], c["kv_heads"]
    n_sparse = c["n_layers"] - c["n_dense"]
    attn_w = H * (nq + 2 * nkv) * d + nq * d * H
    idx_w = H * (c["index_heads"] + 1) * c["index_dim"]
    mlp_w = lambda f: 3 * H * f  # noqa: E731
    per_tok = (c["n_dense"] * (attn_w + mlp_w(c["mlp_ffn"]))
               + n_sparse * (attn_w + idx_w + H * c["experts"]
                             + (c["top_k"] * mlp_w(c["expert_ffn"]) + mlp_w(c["shared_ffn"]))))
    keys = sum(min(t + 1, c["topk_blocks"] * c["block"]) for t in range(T)) if n_sparse else 0
    causal = T * (T + 1) // 2
    attn = 4 * nq * d * (c["n_dense"] * causal + n_sparse * keys)
    return 2 * T * per_tok + attn + 2 * H * c["vocab"]


def copy_ms(tm, dev, n, iters):
    src = torch.empty(n, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return tm.median_ms(lambda: dst.copy_(src), iters)


def prefill_ms(M, c, dev, tm, iters, compile_):
    T = c["prompt_len"]
    tokens = torch.randint(0, c["vocab"], (T,), device=dev)
    cache = new_cache(c, 1, capacity_for(c, T), dev, fill=False)
    step = compile_(lambda tok: prefill(M, tok, cache, c))
    t0 = time.perf_counter()
    step(tokens)
    tm.sync()
    log(f"prefill: first call (with compilation) {time.perf_counter() - t0:.1f} s")
    return tm.median_ms(lambda: step(tokens), iters)


def decode_ms(decode, c, dev, tm, iters, batch, ctx):
    """One decode step of `batch` rows at position ctx over caches filled up to it."""
    cache = new_cache(c, batch, capacity_for(c, ctx + 1), dev, fill=True)
    tok = torch.randint(0, c["vocab"], (batch,), device=dev)
    pos = torch.full((batch,), ctx, device=dev, dtype=torch.int64)
    t0 = time.perf_counter()
    run = graph_of(lambda: decode(tok, pos, cache), dev)
    log(f"decode batch {batch} context {ctx}: compile + capture {time.perf_counter() - t0:.1f} s")
    return tm.median_ms(run, iters)


def bench(args):
    c = CONFIGS[args.config]
    dev = args.device
    torch.manual_seed(args.seed)
    compile_ = (lambda f: torch.compile(f, dynamic=False)) if args.compile else (lambda f: f)
    tm = Timer(dev)
    emit = lambda **kw: print(json.dumps(dict(config=args.config, device=dev, **kw)), flush=True)  # noqa: E731

    n = (2 << 30) if dev == "cuda" else (64 << 20)
    ms = copy_ms(tm, dev, n, args.iters)
    gbps = 2 * n / ms / 1e6
    emit(name="copy", bytes=n, ms=ms, gbps=gbps)
    log(f"copy {n >> 20} MiB: {ms:.3f} ms, {gbps:.0f} GB/s (read + write)")

    t0 = time.perf_counter()
    M = pack_model(random_weights(c, dev, args.seed), c)
    nbytes = sum(math.prod(s) * (4 if dt == torch.float32 else 2) for _, s, dt, _ in weight_table(c, False))
    log(f"weights: {nbytes / 2**30:.2f} GiB of random target weights in {time.perf_counter() - t0:.1f} s")

    T = c["prompt_len"]
    ms = prefill_ms(M, c, dev, tm, args.iters, compile_)
    fl = prefill_flops(c, T)
    emit(name="prefill", tokens=T, ms=ms, flops=fl, tflops=fl / ms / 1e9)
    log(f"prefill {T} tokens: {ms:.2f} ms, {fl / 1e12:.2f} TFLOP, {fl / ms / 1e9:.1f} TFLOP/s")

    decode = compile_(lambda tok, p, kv: decode_step(M, tok, p, kv, c))
    for batch in (1, 64):
        for ctx in ((2048, 16384) if args.config == "small" else (16, 128)):
            ms = decode_ms(decode, c, dev, tm, args.iters, batch, ctx)
            fb = decode_floor_bytes(args.config, batch, ctx)
            floor = fb / gbps / 1e6
            emit(name="decode", batch=batch, context=ctx, ms=ms, floor_bytes=fb, floor_ms=floor,
                 floor_frac=floor / ms)
            log(f"decode batch {batch:2d} context {ctx:5d}: {ms:.3f} ms/step, floor {floor:.3f} ms "
                f"({fb / 1e9:.2f} GB), {100 * floor / ms:.0f} % of it")
            if dev == "cuda":
                torch.cuda.empty_cache()


def graph_of(fn, dev):
    """fn (compiled) warmed up, then on cuda captured once as a CUDA graph: returns a replay."""
    if dev != "cuda":
        return fn
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


# ------------------------------------------------------------------ check ---------------------
def check(args):
    from safetensors.torch import load_file, save_file
    c = CONFIGS[args.config]
    if not os.path.exists(args.weights):
        save_file({k: v.contiguous() for k, v in random_weights(c, "cpu", args.seed, draft=True).items()},
                  args.weights, metadata={"h3_model": "minimax_m3_1", "h3_config": args.config})
        log(f"wrote random weights to {args.weights}")
    W = {k: v for k, v in load_file(args.weights).items() if not k.startswith("dspark.")}
    M = pack_model(W, c)
    P, N = c["prompt_len"], c["max_new_tokens"]
    if args.tokens:
        prompt = torch.tensor([int(t) for t in args.tokens.split(",")])
    else:
        prompt = torch.randint(0, c["vocab"], (P,), generator=torch.Generator().manual_seed(args.seed + 1))
    if prompt.numel() != P:
        sys.exit(f"m31_peer.py: the plan's prefill takes prompt_len = {P} tokens, got {prompt.numel()}")

    cache = new_cache(c, 1, capacity_for(c, P + N), "cpu", fill=False)
    logits0 = prefill(M, prompt, cache, c)
    toks = [int(logits0.argmax())]
    for k in range(N - 1):
        lg = decode_step(M, torch.tensor([toks[-1]]), torch.tensor([P + k]), cache, c)
        toks.append(int(lg.argmax()))

    with tempfile.TemporaryDirectory() as tmp:
        inp, out_p, out_g, pr = (os.path.join(tmp, f) for f in ("in.safetensors", "pre.safetensors", "gen.safetensors", "prompt.safetensors"))
        save_file({"tokens": prompt.to(torch.int32), "pos0": torch.tensor(0, dtype=torch.int32)}, inp)
        save_file({"prompt": prompt.to(torch.int32)}, pr)
        base = [args.h3exec, args.plan, "--backend", "cpu", "--weights", args.weights]
        for cmd in (base + ["--graph", "prefill", "--inputs", inp, "--out", out_p],
                    base + ["--prompt", pr, "--max-new-tokens", str(N), "--out", out_g]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"m31_peer.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
        h3_logits = load_file(out_p)["logits"]
        h3_toks = load_file(out_g)["tokens"].tolist()

    diff = (logits0 - h3_logits).abs()
    scale = h3_logits.abs().max()
    res = dict(name="check", config=args.config, prompt_len=P, new_tokens=N,
               logits_max_abs_diff=float(diff.max()), logits_max_abs=float(scale),
               logits_rel_err=float(diff.max() / scale),
               prefill_argmax_equal=int(logits0.argmax()) == int(h3_logits.argmax()),
               tokens_equal=toks == h3_toks,
               first_token_difference=next((i for i, (a, b) in enumerate(zip(toks, h3_toks)) if a != b), None),
               peer_tokens=toks, h3_tokens=h3_toks)
    print(json.dumps(res), flush=True)
    ok = res["logits_rel_err"] <= 2e-2 and res["tokens_equal"]
    log(f"check {args.config}: prefill logits max |diff| {res['logits_max_abs_diff']:.3g} "
        f"(max |logit| {res['logits_max_abs']:.3g}, rel {res['logits_rel_err']:.3g}); "
        f"{N} greedy tokens {'equal' if res['tokens_equal'] else 'DIFFER'}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["bench", "check"])
    ap.add_argument("--config", choices=sorted(CONFIGS))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--device", choices=["cuda", "cpu"])
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", help="check: safetensors weights (written first when absent)")
    ap.add_argument("--tokens", help="check: prompt ids, comma separated (default: random)")
    ap.add_argument("--h3exec", default="build-peer/h3exec")
    ap.add_argument("--plan", help="check: h3c plan of the same config")
    args = ap.parse_args()
    if args.mode == "bench":
        args.config = args.config or "small"
        args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch._dynamo.config.cache_size_limit = 64
        bench(args)
        return 0
    args.config = args.config or "tiny"
    if not (args.weights and args.plan):
        ap.error("check needs --weights and --plan")
    torch.set_num_threads(2)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
