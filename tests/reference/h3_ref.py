#!/usr/bin/env python3
"""Independent numpy reference of MiniMax-H3 (spec: docs/models/minimax_h3.md, §1-§6).

Written from the spec alone (no h3 code), numpy only. It computes the `text`, `step` and
`sample` graphs with the spec's exact rounding chain: bf16 round-to-nearest-even at every
point §3/§4 name, fp32 math elsewhere (GEMM/norm reductions accumulate in fp64, then round
to fp32). Used by h3's end-to-end tests (helper rt-exec) to check h3exec's outputs.

CLI (stable; exit 0 ok, 2 on a user error with a message naming the file/tensor):
  h3_ref.py --config tiny --graph text   --weights W.safetensors --inputs IN.safetensors --out OUT.safetensors
  h3_ref.py --config tiny --graph step   --weights W --inputs IN --out OUT
  h3_ref.py --config tiny --graph sample --weights W --inputs IN --out OUT [--steps 49]
  h3_ref.py --config tiny --make-inputs IN.safetensors --seed N [--graph text|step|sample]
  h3_ref.py --config tiny --make-weights W.safetensors --seed N
  optional: --set key=value (override a config number, e.g. --set video_rows=20)

Tensor names (spec §3 table):
  text   in : text_states bf16[L, text_dim]                       out: text bf16[L, dim]
  step   in : text bf16[L, dim], video f32[Nv, video_width], audio f32[Na, audio_width],
              t f32[M], tag i32[S] (-1 padding), slot i32[S], pos f32[S, 3]
         out: v_video f32[Nv, video_width], v_audio f32[Na, audio_width]
  sample in : text_states, tag, slot, pos, and the initial noise as `video` f32[Nv, vw] and
              `audio` f32[Na, aw] (h3 draws its own noise; pass the same noise here)
         out: video f32[Nv, video_width], audio f32[Na, audio_width]
  Row counts L / Na / Nv come from the tensors; S = len(tag) must be ceil(used/64)*64.
  --make-inputs writes, for --graph step (default): text, video, audio, t, tag, slot, pos;
  for text: text_states; for sample: text_states, tag, slot, pos, video, audio (noise).
  Position rule (§2, this project): text i -> (i,0,0); audio j -> (L + j//2, 0, j%2);
  video row r = (f*gh + y)*gw + x -> (L + f, y, x) on the grid video_frames x gh x gw;
  padding -> (0,0,0).
--make-weights writes every §5 name with its shape and dtype: linears N(0, 1/fan_in), biases
N(0, 0.02²), norm weights 1 + U(-0.1, 0.1), AdaLN projections N(0, 0.1²/fan_in) with bias
N(0, 0.05²) (gates ≈ 0.1), rope.inv_freq[j] = 10000^(-2j/(rope_dims/3)); numpy's RNG.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refcommon import (RefError, attention, bf16, f32, linear, need, need_rows,  # noqa: E402
                       parse_sets, rms_norm, silu, st_read, st_write)

CONFIGS = {
    "tiny": dict(layers=2, refiner_layers=1, dim=64, heads=4, head_dim=16, rope_dims=12, ffn=96,
                 time_freq=16, time_hidden=64, time_embed=32, text_dim=48, video_width=12,
                 audio_width=8, eps=1e-5, slots=2, text_rows=8, audio_rows=6, video_rows=40,
                 video_frames=2, video_h=4, video_w=5, video_shift=12.0, audio_shift=3.0,
                 sigma_points=50),
}

TAG_VIDEO, TAG_TEXT, TAG_AUDIO, TAG_PAD = 0, 1, 2, -1


# ------------------------------------------------------------------- weights ----------------
def weight_table(c):
    """[(name, shape, dtype, kind)] of spec §5; kind picks the random initialiser."""
    d, hd, nh, ffn = c["dim"], c["head_dim"], c["heads"], c["ffn"]
    aw = nh * hd
    t = [("condition_proj.weight", [d, c["text_dim"]], "BF16", "lin"),
         ("condition_proj.bias", [d], "BF16", "bias")]

    def block(p):
        return [(f"{p}.norm1.weight", [d], "BF16", "norm"), (f"{p}.norm2.weight", [d], "BF16", "norm"),
                (f"{p}.attn.qkv_proj.weight", [3 * aw, d], "BF16", "lin"),
                (f"{p}.attn.q_norm.weight", [hd], "BF16", "norm"),
                (f"{p}.attn.k_norm.weight", [hd], "BF16", "norm"),
                (f"{p}.attn.out_proj.weight", [d, aw], "BF16", "lin"),
                (f"{p}.mlp.fc1.weight", [2 * ffn, d], "BF16", "lin"),
                (f"{p}.mlp.fc2.weight", [d, ffn], "BF16", "lin")]
    for j in range(c["refiner_layers"]):
        t += block(f"token_refiner.blocks.{j}")
    t += [("final_norm.weight", [d], "BF16", "norm"),
          ("video_patch_proj.weight", [d, c["video_width"]], "F32", "lin"),
          ("video_patch_proj.bias", [d], "F32", "bias"),
          ("audio_patch_proj.weight", [d, c["audio_width"]], "F32", "lin"),
          ("audio_patch_proj.bias", [d], "F32", "bias"),
          ("time_embedder.linear_1.weight", [c["time_hidden"], c["time_freq"]], "F32", "lin"),
          ("time_embedder.linear_1.bias", [c["time_hidden"]], "F32", "bias"),
          ("time_embedder.linear_2.weight", [c["time_embed"], c["time_hidden"]], "F32", "lin"),
          ("time_embedder.linear_2.bias", [c["time_embed"]], "F32", "bias"),
          ("rope.inv_freq", [c["rope_dims"] // 6], "F32", "inv_freq")]
    for i in range(c["layers"]):
        t += [(f"blocks.{i}.adaln_proj.weight", [18 * d, c["time_embed"]], "BF16", "adaln"),
              (f"blocks.{i}.adaln_proj.bias", [18 * d], "BF16", "adaln_bias")]
        t += block(f"blocks.{i}")
    t += [("final_layer.adaln_proj.weight", [2 * d, c["time_embed"]], "BF16", "adaln"),
          ("final_layer.adaln_proj.bias", [2 * d], "BF16", "adaln_bias"),
          ("final_layer.norm.weight", [d], "BF16", "norm"),
          ("final_layer.video_out.weight", [c["video_width"], d], "F32", "lin"),
          ("final_layer.video_out.bias", [c["video_width"]], "F32", "bias"),
          ("final_layer.audio_out.weight", [c["audio_width"], d], "F32", "lin"),
          ("final_layer.audio_out.bias", [c["audio_width"]], "F32", "bias")]
    return t


def make_weights(c, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dt, kind in weight_table(c):
        if kind == "lin":
            a = rng.standard_normal(shape) / math.sqrt(shape[1])
        elif kind == "bias":
            a = rng.standard_normal(shape) * 0.02
        elif kind == "norm":
            a = 1.0 + rng.uniform(-0.1, 0.1, shape)
        elif kind == "adaln":
            a = rng.standard_normal(shape) * (0.1 / math.sqrt(shape[1]))
        elif kind == "adaln_bias":
            a = rng.standard_normal(shape) * 0.05
        else:  # rope.inv_freq, exact formula of §5
            n = c["rope_dims"] // 3
            a = np.array([10000.0 ** (-2.0 * j / n) for j in range(shape[0])])
        a = f32(a)
        out[name] = (bf16(a) if dt == "BF16" else a, dt)
    return out


def load_weights(path, c):
    st = st_read(path)
    return {name: need(st, name, shape, path, (dt,)) for name, shape, dt, _ in weight_table(c)}


# ------------------------------------------------------------------- inputs -----------------
def packed_rows(c):
    L, Na, Nv = c["text_rows"], c["audio_rows"], c["video_rows"]
    used = L + Na + Nv
    return L, Na, Nv, used, -(-used // 64) * 64


def make_metadata(c):
    """tag, slot, pos of §2 with this project's synthetic position rule."""
    L, Na, Nv, used, S = packed_rows(c)
    gh, gw = c["video_h"], c["video_w"]
    if c["video_frames"] * gh * gw != Nv:
        raise RefError(f"config: video_frames*video_h*video_w = {c['video_frames'] * gh * gw} != video_rows {Nv}")
    tag = np.full(S, TAG_PAD, np.int32)
    slot = np.zeros(S, np.int32)
    pos = np.zeros((S, 3), np.float32)
    tag[:L] = TAG_TEXT
    pos[:L, 0] = np.arange(L)
    tag[L:L + Na] = TAG_AUDIO
    slot[L:L + Na] = 1
    j = np.arange(Na)
    pos[L:L + Na, 0] = L + j // 2
    pos[L:L + Na, 2] = j % 2
    tag[L + Na:used] = TAG_VIDEO
    r = np.arange(Nv)
    pos[L + Na:used, 0] = L + r // (gh * gw)
    pos[L + Na:used, 1] = (r // gw) % gh
    pos[L + Na:used, 2] = r % gw
    return tag, slot, pos


def make_inputs(c, seed, graph):
    rng = np.random.default_rng(seed)
    L, Na, Nv, used, S = packed_rows(c)
    tag, slot, pos = make_metadata(c)
    meta = {"tag": (tag, "I32"), "slot": (slot, "I32"), "pos": (pos, "F32")}
    noise = {"video": (f32(rng.standard_normal((Nv, c["video_width"]))), "F32"),
             "audio": (f32(rng.standard_normal((Na, c["audio_width"]))), "F32")}
    text_states = {"text_states": (bf16(f32(rng.standard_normal((L, c["text_dim"])))), "BF16")}
    if graph == "text":
        return text_states
    if graph == "sample":
        return {**text_states, **meta, **noise}
    t = f32(rng.uniform(0.05, 0.95, c["slots"]))
    return {"text": (bf16(f32(rng.standard_normal((L, c["dim"])))), "BF16"), "t": (t, "F32"),
            **meta, **noise}


# ------------------------------------------------------------------- model ------------------
def split_heads(x, heads, hd):
    return x.reshape(x.shape[0], heads, hd)


def attention_block(h, W, p, c, cos=None, sin=None, segments=None):
    """Steps 3-7 of §4 on h bf16[S, dim]: qkv, q/k norm, optional RoPE, attention, out_proj."""
    nh, hd = c["heads"], c["head_dim"]
    S = h.shape[0]
    qkv = linear(h, W[f"{p}.attn.qkv_proj.weight"])
    aw = nh * hd
    q = rms_norm(split_heads(qkv[:, :aw], nh, hd), W[f"{p}.attn.q_norm.weight"], c["eps"])
    k = rms_norm(split_heads(qkv[:, aw:2 * aw], nh, hd), W[f"{p}.attn.k_norm.weight"], c["eps"])
    v = split_heads(qkv[:, 2 * aw:], nh, hd)
    if cos is not None:
        q, k = rope(q, cos, sin, c["rope_dims"]), rope(k, cos, sin, c["rope_dims"])
    seg = np.searchsorted(np.asarray(segments or [], np.int64), np.arange(S), side="right")
    mask = (seg[:, None] == seg[None, :])[None]  # [1, S, S]: rows see only their own segment
    o = attention(q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2), mask,
                  1.0 / math.sqrt(hd)).transpose(1, 0, 2)
    return linear(o.reshape(S, aw), W[f"{p}.attn.out_proj.weight"])


def mlp_block(h, W, p, c):
    """Steps 10-12: fc1 (gate half first), SwiGLU with one rounding, fc2."""
    u = linear(h, W[f"{p}.mlp.fc1.weight"])
    g = bf16(silu(u[:, :c["ffn"]]) * u[:, c["ffn"]:])
    return linear(g, W[f"{p}.mlp.fc2.weight"])


def rope(x, cos, sin, rd):
    """Neox rotate-half on dims [0, rd) of x bf16[S, H, D]; cos/sin bf16[S, rd]."""
    half = rd // 2
    xr = x[..., :rd]
    rot = np.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
    y = (xr * cos[:, None, :]).astype(np.float32) + (rot * sin[:, None, :]).astype(np.float32)
    out = x.copy()
    out[..., :rd] = bf16(y)
    return out


def rope_tables(pos, inv_freq):
    """cos/sin bf16[S, rope_dims]: angles [pos_t·f, pos_h·f, pos_w·f] duplicated (§3.3)."""
    ang = (pos[:, :, None] * inv_freq[None, None, :]).astype(np.float32).reshape(pos.shape[0], -1)
    ang = np.concatenate([ang, ang], axis=-1)
    return bf16(f32(np.cos(ang.astype(np.float64)))), bf16(f32(np.sin(ang.astype(np.float64))))


def time_embedding(t, W, c):
    """§3.2: sinusoid (cosine first), MLP in fp32, a = bf16(silu(temb)) -> [M, time_embed]."""
    half = c["time_freq"] // 2
    fr = np.exp(f32(-math.log(10000.0) * np.arange(half, dtype=np.float32) / np.float32(half)))
    arg = (t[:, None] * f32(fr)[None, :]).astype(np.float32)
    e = np.concatenate([np.cos(arg), np.sin(arg)], axis=-1).astype(np.float32)
    h1 = silu(linear(e, W["time_embedder.linear_1.weight"], W["time_embedder.linear_1.bias"], False))
    temb = linear(h1, W["time_embedder.linear_2.weight"], W["time_embedder.linear_2.bias"], False)
    return bf16(silu(temb))


def modulate(h, scale, shift):
    """§4.2: bf16(bf16(h·bf16(1+scale)) + shift) with per-row scale/shift bf16[S, dim]."""
    c1 = bf16(np.float32(1.0) + scale)
    return bf16(bf16(h * c1) + shift)


def gated_add(x, gate, a):
    return bf16(x + bf16(gate * a))


def text_graph(W, c, text_states):
    x = linear(text_states, W["condition_proj.weight"], W["condition_proj.bias"])
    for j in range(c["refiner_layers"]):
        p = f"token_refiner.blocks.{j}"
        x = bf16(x + attention_block(rms_norm(x, W[f"{p}.norm1.weight"], c["eps"]), W, p, c))
        x = bf16(x + mlp_block(rms_norm(x, W[f"{p}.norm2.weight"], c["eps"]), W, p, c))
    return rms_norm(x, W["final_norm.weight"], c["eps"])


def dit_block(x, W, i, c, a, idx, M, cos, sin, used):
    p, d = f"blocks.{i}", c["dim"]
    m = linear(a, W[f"{p}.adaln_proj.weight"], W[f"{p}.adaln_proj.bias"])  # bf16[M, 18·dim]
    tab = m.reshape(3 * M, 6 * d)
    sh_msa, sc_msa, g_msa, sh_mlp, sc_mlp, g_mlp = (tab[idx, k * d:(k + 1) * d] for k in range(6))
    h = modulate(rms_norm(x, W[f"{p}.norm1.weight"], c["eps"]), sc_msa, sh_msa)
    x = gated_add(x, g_msa, attention_block(h, W, p, c, cos, sin, [used]))
    h = modulate(rms_norm(x, W[f"{p}.norm2.weight"], c["eps"]), sc_mlp, sh_mlp)
    return gated_add(x, g_mlp, mlp_block(h, W, p, c))


def check_rows(L, Na, Nv, t, tag, slot, pos, where):
    """Validate the row metadata against the row counts; -> (used, S)."""
    S = tag.shape[0]
    used = L + Na + Nv
    if S != -(-used // 64) * 64:
        raise RefError(f"{where}: tag has {S} rows; expected ceil(used/64)*64 = {-(-used // 64) * 64} "
                       f"for used = {L}+{Na}+{Nv}")
    if slot.shape != (S,) or pos.shape != (S, 3):
        raise RefError(f"{where}: slot must be i32[{S}] and pos f32[{S}, 3]")
    if t.ndim != 1 or t.shape[0] < 1:
        raise RefError(f"{where}: t must be f32[M] with M >= 1")
    if np.any(slot < 0) or np.any(slot >= t.shape[0]) or np.any((tag < -1) | (tag > 2)):
        raise RefError(f"{where}: slot must lie in [0, M={t.shape[0]}) and tag in {{-1, 0, 1, 2}}")
    return used, S


def step_graph(W, c, text, video, audio, t, tag, slot, pos, where="step"):
    L, Na, Nv = text.shape[0], audio.shape[0], video.shape[0]
    used, S = check_rows(L, Na, Nv, t, tag, slot, pos, where)
    M, d = t.shape[0], c["dim"]
    ev = linear(video, W["video_patch_proj.weight"], W["video_patch_proj.bias"])
    ea = linear(audio, W["audio_patch_proj.weight"], W["audio_patch_proj.bias"])
    x = np.concatenate([text, ea, ev, np.zeros((S - used, d), np.float32)], axis=0)
    a = time_embedding(t, W, c)
    cos, sin = rope_tables(pos, W["rope.inv_freq"])
    idx = np.maximum(tag, 0) + 3 * slot
    for i in range(c["layers"]):
        x = dit_block(x, W, i, c, a, idx, M, cos, sin, used)
    fm = linear(a, W["final_layer.adaln_proj.weight"], W["final_layer.adaln_proj.bias"])
    shift, scale = fm[:, :d][slot], fm[:, d:][slot]
    hn = rms_norm(x, W["final_layer.norm.weight"], c["eps"])
    h = bf16((hn * (np.float32(1.0) + scale)).astype(np.float32) + shift)
    v_video = linear(h[L + Na:used], W["final_layer.video_out.weight"], W["final_layer.video_out.bias"], False)
    v_audio = linear(h[L:L + Na], W["final_layer.audio_out.weight"], W["final_layer.audio_out.bias"], False)
    return v_video, v_audio


def sigma_grid(n, shift):
    """§6: b = linspace(1, 0, n); σ = s·b / (1 + (s−1)·b), fp64, rounded to fp32."""
    b = 1.0 - np.arange(n, dtype=np.float64) / (n - 1)
    return f32(shift * b / (1.0 + (shift - 1.0) * b))


def sample_graph(W, c, text_states, tag, slot, pos, video, audio, steps):
    """§6: text once, then `steps` Euler steps over σ grids of steps+1 points (fp32 state)."""
    text = text_graph(W, c, text_states)
    sv, sa = sigma_grid(steps + 1, c["video_shift"]), sigma_grid(steps + 1, c["audio_shift"])
    video, audio = f32(video).copy(), f32(audio).copy()
    for k in range(steps):
        t = f32([np.float32(1.0) - sv[k], np.float32(1.0) - sa[k]])
        vv, va = step_graph(W, c, text, video, audio, t, tag, slot, pos, f"sample step {k}")
        video = (video + (sv[k] - sv[k + 1]) * vv).astype(np.float32)
        audio = (audio + (sa[k] - sa[k + 1]) * va).astype(np.float32)
    return video, audio


# ------------------------------------------------------------------- CLI --------------------
def run_graph(args, c):
    W = load_weights(args.weights, c)
    st = st_read(args.inputs)
    src = args.inputs
    if args.graph == "text":
        return {"text": (text_graph(W, c, need_rows(st, "text_states", [c["text_dim"]], src, ("BF16",))), "BF16")}
    tag = need_rows(st, "tag", [], src, ("I32",))
    slot = need_rows(st, "slot", [], src, ("I32",))
    pos = need_rows(st, "pos", [3], src, ("F32",))
    video = need_rows(st, "video", [c["video_width"]], src, ("F32",))
    audio = need_rows(st, "audio", [c["audio_width"]], src, ("F32",))
    if args.graph == "sample":
        ts = need_rows(st, "text_states", [c["text_dim"]], src, ("BF16",))
        check_rows(ts.shape[0], audio.shape[0], video.shape[0], f32([0.5, 0.5]), tag, slot, pos, src)
        vo, ao = sample_graph(W, c, ts, tag, slot, pos, video, audio, args.steps)
        return {"video": (vo, "F32"), "audio": (ao, "F32")}
    text = need_rows(st, "text", [c["dim"]], src, ("BF16",))
    t = need_rows(st, "t", [], src, ("F32",))
    vv, va = step_graph(W, c, text, video, audio, t, tag, slot, pos, src)
    return {"v_video": (vv, "F32"), "v_audio": (va, "F32")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config number")
    ap.add_argument("--graph", default="step", choices=["text", "step", "sample"])
    ap.add_argument("--weights")
    ap.add_argument("--inputs")
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=None, help="sample: Euler steps (default 49)")
    ap.add_argument("--make-inputs", metavar="FILE")
    ap.add_argument("--make-weights", metavar="FILE")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        c = parse_sets(args.set, CONFIGS[args.config], "h3_ref.py")
        if args.steps is None:
            args.steps = c["sigma_points"] - 1
        if args.steps < 1:
            raise RefError("h3_ref.py: --steps must be >= 1")
        if args.make_weights or args.make_inputs:
            if args.make_weights:
                st_write(args.make_weights, make_weights(c, args.seed))
            if args.make_inputs:
                st_write(args.make_inputs, make_inputs(c, args.seed, args.graph))
            return 0
        if not (args.weights and args.inputs and args.out):
            raise RefError("h3_ref.py: --graph needs --weights, --inputs and --out "
                           "(or use --make-weights / --make-inputs)")
        st_write(args.out, run_graph(args, c))
        return 0
    except RefError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
