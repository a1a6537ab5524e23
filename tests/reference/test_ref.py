#!/usr/bin/env python3
"""Self-tests of the independent numpy references (refcommon, h3_ref, m31_ref, compare).

Run: `python3 tests/reference/test_ref.py` (exit 0 pass, 1 fail, 77 skip when numpy is missing;
the safetensors package is optional and only used for an interop check). Registered as ctest
`reference_selftest`. Checks: bf16 RNE hand cases and a brute-force nearest-value check, the σ
check values of docs/models/accelerations.md §1, RoPE properties (identity at position 0, pass-through dims,
norm kept, relative-position invariance), attention segment isolation, MoE routing (Σw = 2.0,
forced expert, raw-sigmoid weights), MSA == dense for short rows, swigluoai clamps, parameter
counts against the spec formulas, safetensors round trips, CLI runs and errors, compare.py.
"""
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:
    print("skip: numpy is not installed (pip install numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, HERE)
import h3_ref  # noqa: E402
import m31_ref  # noqa: E402
import refcommon as rc  # noqa: E402
from refcommon import bf16, f32  # noqa: E402

H3C = h3_ref.CONFIGS["tiny"]
M3C = m31_ref.CONFIGS["tiny"]


def bits_to_f32(u):
    return np.array([u], np.uint32).view(np.float32)


def rounded_bits(u):
    return int(rc.bf16_bits(bits_to_f32(u))[0])


class Bf16Test(unittest.TestCase):
    def test_hand_cases(self):
        cases = [
            (0x3F800000, 0x3F80),  # 1.0 exact
            (0x3F808000, 0x3F80),  # tie, lower is even -> down
            (0x3F818000, 0x3F82),  # tie, lower is odd -> up
            (0x3F808001, 0x3F81),  # just above the tie -> up
            (0x3F807FFF, 0x3F80),  # just below the tie -> down
            (0xBF818000, 0xBF82),  # negative tie, odd -> away from zero
            (0x7F7FFFFF, 0x7F80),  # largest fp32 -> inf
            (0x7F7F7FFF, 0x7F7F),  # below the tie at the top -> largest bf16
            (0x7F7F8000, 0x7F80),  # tie at the top, odd -> inf
            (0x7F800000, 0x7F80),  # +inf
            (0xFF800000, 0xFF80),  # -inf
            (0x80000000, 0x8000),  # -0 keeps its sign
            (0x00000001, 0x0000),  # smallest subnormal -> +0
            (0x00008000, 0x0000),  # subnormal tie, even -> down
            (0x00018000, 0x0002),  # subnormal tie, odd -> up
            (0x0000FFFF, 0x0001),  # subnormal above the tie -> up
            (0x007FFFFF, 0x0080),  # largest subnormal -> smallest normal
        ]
        for u, want in cases:
            self.assertEqual(rounded_bits(u), want, f"bf16(0x{u:08X})")

    def test_nan(self):
        for u in (0x7FC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF):
            r = rounded_bits(u)
            self.assertEqual(r & 0x7F80, 0x7F80)
            self.assertNotEqual(r & 0x007F, 0, f"NaN 0x{u:08X} must stay NaN, got 0x{r:04X}")
            self.assertEqual(r >> 15, u >> 31, "NaN keeps its sign")

    def test_brute_force_nearest(self):
        rng = np.random.default_rng(7)
        u = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
        x = u.view(np.float32)
        x = x[np.isfinite(x) & (np.abs(x) < 3.0e38)]
        got = bf16(x).astype(np.float64)
        lo = (x.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
        step = np.abs(((x.view(np.uint32) & 0xFFFF0000) + 0x10000).view(np.float32).astype(np.float64) - lo)
        hi = lo + np.sign(x.astype(np.float64)) * step
        dlo, dhi = np.abs(x - lo), np.abs(hi - x)
        even_lo = ((x.view(np.uint32) >> 16) & 1) == 0
        want = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(even_lo, lo, hi)))
        self.assertTrue(np.array_equal(got, want))

    def test_bits_round_trip(self):
        x = bf16(f32(np.random.default_rng(1).standard_normal(1000)))
        self.assertTrue(np.array_equal(rc.bf16_from_bits(rc.bf16_bits(x)), x))


class SigmaTest(unittest.TestCase):
    def test_check_values(self):
        v, a = h3_ref.sigma_grid(50, 12.0), h3_ref.sigma_grid(50, 3.0)
        self.assertEqual((len(v), len(a)), (50, 50))
        for got, want in ((v[:3], [1, 0.99827, 0.99647]), (v[-4:], [0.43902, 0.33803, 0.2, 0]),
                          (a[:3], [1, 0.99310, 0.98601]), (a[-3:], [0.11321, 0.05882, 0])):
            np.testing.assert_allclose(got, want, atol=6e-6)
        self.assertTrue(np.all(np.diff(v) < 0) and np.all(np.diff(a) < 0))


class RopeTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(3)
        self.inv = f32([10000.0 ** (-2.0 * j / (H3C["rope_dims"] // 3)) for j in range(H3C["rope_dims"] // 6)])

    def h3_rope(self, x, pos):
        cos, sin = h3_ref.rope_tables(f32(pos), self.inv)
        return h3_ref.rope(x, cos, sin, H3C["rope_dims"])

    def test_h3_identity_and_passthrough(self):
        x = bf16(f32(self.rng.standard_normal((5, 4, 16))))
        self.assertTrue(np.array_equal(self.h3_rope(x, np.zeros((5, 3))), x))
        y = self.h3_rope(x, self.rng.uniform(0, 30, (5, 3)))
        self.assertTrue(np.array_equal(y[..., 12:], x[..., 12:]))
        self.assertFalse(np.array_equal(y[..., :12], x[..., :12]))
        n0 = np.linalg.norm(x[..., :12].reshape(5, 4, 2, 6), axis=2)
        n1 = np.linalg.norm(y[..., :12].reshape(5, 4, 2, 6), axis=2)
        np.testing.assert_allclose(n1, n0, rtol=1e-2, atol=1e-2)

    def test_h3_relative_position(self):
        q = bf16(f32(self.rng.standard_normal((1, 1, 16))))
        k = bf16(f32(self.rng.standard_normal((1, 1, 16))))
        p1, p2, dl = f32([[3, 1, 2]]), f32([[1, 0, 4]]), f32([[5, 2, 1]])
        d0 = float(np.sum(self.h3_rope(q, p1) * self.h3_rope(k, p2)))
        d1 = float(np.sum(self.h3_rope(q, p1 + dl) * self.h3_rope(k, p2 + dl)))
        self.assertAlmostEqual(d0, d1, delta=0.05 * (abs(d0) + 1))

    def test_m31_rope(self):
        T, R = 40, M3C["rot_dims"]
        cos, sin = m31_ref.rope_tables(T, M3C)
        self.assertEqual(cos.dtype, np.float32)
        self.assertEqual((cos[0] == 1).all() and (sin[0] == 0).all(), True)
        x = bf16(f32(self.rng.standard_normal((T, 2, 16))))
        y = m31_ref.rope(x, cos, sin, R)
        self.assertTrue(np.array_equal(y[0], x[0]) and np.array_equal(y[..., R:], x[..., R:]))
        # the same vector at every position: dot(rope(q, t), rope(k, t - 5)) is constant in t
        q = bf16(np.repeat(f32(self.rng.standard_normal((1, 1, 16))), T, axis=0))
        rq = m31_ref.rope(q, cos, sin, R)
        dots = [float(np.sum(rq[t, 0] * rq[t - 5, 0])) for t in range(5, T)]
        self.assertLess(max(dots) - min(dots), 0.05 * (abs(dots[0]) + 1))


class H3Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.W = {n: a for n, (a, _) in h3_ref.make_weights(H3C, 11).items()}
        cls.inp = {n: a for n, (a, _) in h3_ref.make_inputs(H3C, 12, "step").items()}

    def step(self, **over):
        i = dict(self.inp, **over)
        return h3_ref.step_graph(self.W, H3C, i["text"], i["video"], i["audio"], i["t"], i["tag"],
                                 i["slot"], i["pos"])

    def test_metadata(self):
        tag, slot, pos = h3_ref.make_metadata(H3C)
        self.assertEqual(len(tag), 64)
        self.assertEqual(int(np.sum(tag == -1)), 10)
        idx = np.maximum(tag, 0) + 3 * slot
        self.assertTrue(idx.min() >= 0 and idx.max() < 3 * H3C["slots"])
        self.assertTrue(np.all(slot[8:14] == 1) and np.all(tag[8:14] == 2))

    def test_weight_count(self):
        c = H3C
        d, aw, f = c["dim"], c["heads"] * c["head_dim"], c["ffn"]
        blk = 2 * d + 3 * aw * d + 2 * c["head_dim"] + d * aw + 2 * f * d + d * f
        want = (d * c["text_dim"] + d + c["refiner_layers"] * blk + d
                + d * (c["video_width"] + 1) + d * (c["audio_width"] + 1)
                + c["time_hidden"] * (c["time_freq"] + 1) + c["time_embed"] * (c["time_hidden"] + 1)
                + c["rope_dims"] // 6 + c["layers"] * (blk + 18 * d * (c["time_embed"] + 1))
                + 2 * d * (c["time_embed"] + 1) + d + (c["video_width"] + c["audio_width"]) * (d + 1))
        self.assertEqual(sum(a.size for a in self.W.values()), want)

    def test_time_embedding_cos_first(self):
        W = dict(self.W)
        half = H3C["time_freq"] // 2
        e_probe = []
        W["time_embedder.linear_1.weight"] = np.eye(H3C["time_hidden"], H3C["time_freq"], dtype=np.float32)
        W["time_embedder.linear_1.bias"] = np.zeros(H3C["time_hidden"], np.float32)
        orig = h3_ref.silu
        try:
            h3_ref.silu = lambda x: (e_probe.append(x), orig(x))[1]
            h3_ref.time_embedding(f32([0.0]), W, H3C)
        finally:
            h3_ref.silu = orig
        e = e_probe[0][0, :H3C["time_freq"]]
        self.assertTrue(np.all(e[:half] == 1.0) and np.all(e[half:] == 0.0))

    def test_step_finite(self):
        vv, va = self.step()
        self.assertEqual(vv.shape, (H3C["video_rows"], H3C["video_width"]))
        self.assertEqual(va.shape, (H3C["audio_rows"], H3C["audio_width"]))
        self.assertTrue(np.all(np.isfinite(vv)) and np.all(np.isfinite(va)))
        self.assertGreater(float(np.std(vv)), 0.1)

    def test_step_depends_on_t(self):
        vv, va = self.step()
        vv2, va2 = self.step(t=self.inp["t"][::-1].copy())
        self.assertFalse(np.array_equal(vv, vv2))
        self.assertFalse(np.array_equal(va, va2))

    def test_segment_isolation(self):
        pos = self.inp["pos"].copy()
        pos[54:] = np.random.default_rng(5).uniform(0, 50, (10, 3))
        a, b = self.step(), self.step(pos=f32(pos))
        self.assertTrue(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
        # attention level: padding rows never leak into live rows, and do mix without segments
        rng = np.random.default_rng(6)
        h = bf16(f32(rng.standard_normal((64, 64))))
        h2 = h.copy()
        h2[54:] = bf16(f32(rng.standard_normal((10, 64))))
        o1 = h3_ref.attention_block(h, self.W, "blocks.0", H3C, segments=[54])
        o2 = h3_ref.attention_block(h2, self.W, "blocks.0", H3C, segments=[54])
        self.assertTrue(np.array_equal(o1[:54], o2[:54]))
        self.assertFalse(np.array_equal(o1[54:], o2[54:]))
        n1 = h3_ref.attention_block(h, self.W, "blocks.0", H3C)
        n2 = h3_ref.attention_block(h2, self.W, "blocks.0", H3C)
        self.assertFalse(np.array_equal(n1[:54], n2[:54]))

    def test_rounding_chain_close_to_exact_math(self):
        vv, va = self.step()
        ident = lambda x: np.asarray(x, np.float32)  # noqa: E731
        saved = (h3_ref.bf16, rc.bf16)
        try:
            h3_ref.bf16 = rc.bf16 = ident
            ev, ea = self.step()
        finally:
            h3_ref.bf16, rc.bf16 = saved
        for got, ref in ((vv, ev), (va, ea)):
            rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            self.assertLess(rel, 5e-2)
            self.assertGreater(rel, 0.0)

    def test_matches_naive_fp64_reading(self):
        # AdaLN ×8 so that modulation slips (swapped shift/scale, wrong table row) show up clearly;
        # the bf16 chain itself stays within ≈ 0.6 % of the exact math here.
        W = {n: bf16(a * 8) if "adaln_proj" in n else a for n, a in self.W.items()}
        i = self.inp
        vv, va = h3_ref.step_graph(W, H3C, i["text"], i["video"], i["audio"], i["t"], i["tag"], i["slot"], i["pos"])
        nv, na = naive_step(W, H3C, i["text"], i["video"], i["audio"], i["t"], i["tag"], i["slot"], i["pos"])
        for got, ref in ((vv, nv), (va, na)):
            self.assertLess(np.linalg.norm(got - ref) / np.linalg.norm(ref), 1.5e-2)

    def test_text_and_sample(self):
        i = {n: a for n, (a, _) in h3_ref.make_inputs(H3C, 13, "sample").items()}
        text = h3_ref.text_graph(self.W, H3C, i["text_states"])
        self.assertEqual(text.shape, (8, 64))
        self.assertTrue(np.array_equal(bf16(text), text) and np.all(np.isfinite(text)))
        v, a = h3_ref.sample_graph(self.W, H3C, i["text_states"], i["tag"], i["slot"], i["pos"],
                                   i["video"], i["audio"], 3)
        self.assertTrue(np.all(np.isfinite(v)) and np.all(np.isfinite(a)))
        self.assertFalse(np.array_equal(v, i["video"]))


def naive_step(W, c, text, video, audio, t, tag, slot, pos):
    """A second, loop-style fp64 reading of docs/models/minimax_h3.md §3/§4 (no bf16 rounding), to catch indexing
    slips (AdaLN table rows, head layout, RoPE axes, segments) in the vectorised h3_ref code."""
    W = {n: np.asarray(a, np.float64) for n, a in W.items()}
    d, nh, hd, rd, eps = c["dim"], c["heads"], c["head_dim"], c["rope_dims"], c["eps"]
    L, Na, Nv, S = len(text), len(audio), len(video), len(tag)
    used = L + Na + Nv
    x = np.zeros((S, d))
    x[:L] = text
    x[L:L + Na] = audio @ W["audio_patch_proj.weight"].T + W["audio_patch_proj.bias"]
    x[L + Na:used] = video @ W["video_patch_proj.weight"].T + W["video_patch_proj.bias"]
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    nrm = lambda v, g: v / np.sqrt(np.mean(v * v) + eps) * g  # noqa: E731
    half = c["time_freq"] // 2
    a = []
    for tm in t:
        e = [np.cos(tm * np.exp(-np.log(10000) * j / half)) for j in range(half)]
        e += [np.sin(tm * np.exp(-np.log(10000) * j / half)) for j in range(half)]
        h1 = silu(W["time_embedder.linear_1.weight"] @ np.array(e) + W["time_embedder.linear_1.bias"])
        a.append(silu(W["time_embedder.linear_2.weight"] @ h1 + W["time_embedder.linear_2.bias"]))
    F = rd // 6

    def rot(v, s):
        out = v.copy()
        for i in range(rd // 2):
            ang = pos[s, i // F] * W["rope.inv_freq"][i % F]
            out[i] = v[i] * np.cos(ang) - v[i + rd // 2] * np.sin(ang)
            out[i + rd // 2] = v[i + rd // 2] * np.cos(ang) + v[i] * np.sin(ang)
        return out
    for blk in range(c["layers"]):
        p = f"blocks.{blk}"
        mods = []
        for s in range(S):
            g = max(int(tag[s]), 0) + 3 * int(slot[s])
            m = W[f"{p}.adaln_proj.weight"] @ a[g // 3] + W[f"{p}.adaln_proj.bias"]
            mods.append(m[(g % 3) * 6 * d:(g % 3 + 1) * 6 * d].reshape(6, d))
        h = np.array([nrm(x[s], W[f"{p}.norm1.weight"]) * (1 + mods[s][1]) + mods[s][0] for s in range(S)])
        qkv = h @ W[f"{p}.attn.qkv_proj.weight"].T
        o = np.zeros((S, nh * hd))
        for n in range(nh):
            q = [rot(nrm(qkv[s, n * hd:(n + 1) * hd], W[f"{p}.attn.q_norm.weight"]), s) for s in range(S)]
            k = [rot(nrm(qkv[s, (nh + n) * hd:(nh + n + 1) * hd], W[f"{p}.attn.k_norm.weight"]), s)
                 for s in range(S)]
            for i in range(S):
                js = [j for j in range(S) if (j < used) == (i < used)]
                lg = np.array([q[i] @ k[j] / np.sqrt(hd) for j in js])
                pr = np.exp(lg - lg.max())
                pr /= pr.sum()
                o[i, n * hd:(n + 1) * hd] = sum(pj * qkv[j, (2 * nh + n) * hd:(2 * nh + n + 1) * hd]
                                                for pj, j in zip(pr, js))
        att = o @ W[f"{p}.attn.out_proj.weight"].T
        x = np.array([x[s] + mods[s][2] * att[s] for s in range(S)])
        h = np.array([nrm(x[s], W[f"{p}.norm2.weight"]) * (1 + mods[s][4]) + mods[s][3] for s in range(S)])
        u = h @ W[f"{p}.mlp.fc1.weight"].T
        mm = (silu(u[:, :c["ffn"]]) * u[:, c["ffn"]:]) @ W[f"{p}.mlp.fc2.weight"].T
        x = np.array([x[s] + mods[s][5] * mm[s] for s in range(S)])
    fin = [W["final_layer.adaln_proj.weight"] @ am + W["final_layer.adaln_proj.bias"] for am in a]
    h = np.array([nrm(x[s], W["final_layer.norm.weight"]) * (1 + fin[slot[s]][d:]) + fin[slot[s]][:d]
                  for s in range(S)])
    return (h[L + Na:used] @ W["final_layer.video_out.weight"].T + W["final_layer.video_out.bias"],
            h[L:L + Na] @ W["final_layer.audio_out.weight"].T + W["final_layer.audio_out.bias"])


def naive_m31_layer(x, li, W, c):
    """Loop-style fp64 reading of M3.1 §4.2 (no bf16 rounding): layer li on x [T, H] at positions
    0..T-1 -> new x; li = c["layers"] applies the final norm and lm_head (-> logits [T, V])."""
    W = {n: np.asarray(a, np.float64) for n, a in W.items()}
    d, R, nq, nkv, B = c["head_dim"], c["rot_dims"], c["q_heads"], c["kv_heads"], c["block"]
    nrm = lambda v, w: v / np.sqrt(np.mean(v * v, -1, keepdims=True) + c["eps"]) * (1 + w)  # noqa: E731

    def rope(v, t):  # v [.., D] at position t
        out = v.copy()
        for i in range(R // 2):
            ang = t * c["theta"] ** (-2.0 * i / R)
            out[..., i] = v[..., i] * np.cos(ang) - v[..., i + R // 2] * np.sin(ang)
            out[..., i + R // 2] = v[..., i + R // 2] * np.cos(ang) + v[..., i] * np.sin(ang)
        return out

    def mlp(h, p):
        u = h @ W[f"{p}.gate_up_proj.weight"].T
        F = u.shape[-1] // 2
        g, up = np.minimum(u[..., :F], 7.0), np.clip(u[..., F:], -7.0, 7.0)
        return (g / (1 + np.exp(-1.702 * g)) * (up + 1)) @ W[f"{p}.down_proj.weight"].T
    x = np.array(x, np.float64)
    T = len(x)
    if li == c["layers"]:
        return nrm(x, W["norm.weight"]) @ W["lm_head.weight"].T
    p = f"layers.{li}.self_attn"
    h = nrm(x, W[f"layers.{li}.input_layernorm.weight"])
    qkv = h @ W[f"{p}.qkv_proj.weight"].T
    q = [rope(nrm(qkv[t, :nq * d].reshape(nq, d), W[f"{p}.q_norm.weight"]), t) for t in range(T)]
    k = [rope(nrm(qkv[t, nq * d:(nq + nkv) * d].reshape(nkv, d), W[f"{p}.k_norm.weight"]), t) for t in range(T)]
    v = [qkv[t, (nq + nkv) * d:].reshape(nkv, d) for t in range(T)]
    o = np.zeros((T, nq * d))
    for t in range(T):
        for n in range(nq):
            g = n // (nq // nkv)
            keys = list(range(t + 1))
            if li >= c["n_dense"]:
                iq = rope(nrm((h[t] @ W[f"{p}.indexer.q_proj.weight"].T).reshape(-1, c["index_dim"])[g],
                              W[f"{p}.indexer.q_norm.weight"]), t)
                ik = [rope(nrm(h[j] @ W[f"{p}.indexer.k_proj.weight"].T, W[f"{p}.indexer.k_norm.weight"]), j)
                      for j in range(t + 1)]
                sc = {b: max(iq @ ik[j] for j in keys if j // B == b) for b in range(t // B + 1)}
                sc[t // B] = np.inf
                kept = sorted(sc, key=lambda b: (-sc[b], b))[:c["topk_blocks"]]
                keys = [j for j in keys if j // B in kept]
            lg = np.array([q[t][n] @ k[j][g] for j in keys]) / np.sqrt(d)
            pr = np.exp(lg - lg.max())
            o[t, n * d:(n + 1) * d] = sum(pj * v[j][g] for pj, j in zip(pr / pr.sum(), keys))
    x = x + o @ W[f"{p}.o_proj.weight"].T
    h = nrm(x, W[f"layers.{li}.post_attention_layernorm.weight"])
    if li < c["n_dense"]:
        return x + mlp(h, f"layers.{li}.mlp")
    pm = f"layers.{li}.mlp"
    for t in range(T):
        s = 1 / (1 + np.exp(-(W[f"{pm}.router.weight"] @ h[t])))
        top = sorted(range(c["experts"]), key=lambda e: (-(s[e] + W[f"{pm}.router.correction_bias"][e]), e))
        top = top[:c["top_k"]]
        x[t] = x[t] + sum(s[e] / sum(s[top]) * 2.0 * mlp(h[t], f"{pm}.experts.{e}") for e in top) \
            + mlp(h[t], f"{pm}.shared_expert")
    return x


class M31Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.W = {n: a for n, (a, _) in m31_ref.make_weights(M3C, 21).items()}

    def test_param_counts(self):
        c = M3C
        H, d, V, nq, nkv = c["hidden"], c["head_dim"], c["vocab"], c["q_heads"], c["kv_heads"]
        attn = 2 * H + (nq + 2 * nkv) * d * H + H * nq * d + 2 * d
        dense = attn + 3 * c["dense_ffn"] * H
        sparse = (attn + (c["index_heads"] + 1) * c["index_dim"] * H + 2 * c["index_dim"]
                  + c["experts"] * (H + 1) + (c["experts"] * c["expert_ffn"] + c["shared_ffn"]) * 3 * H)
        target = 2 * V * H + H + c["n_dense"] * dense + (c["layers"] - c["n_dense"]) * sparse
        draft = 3 * H * H + H + attn + 3 * c["draft_ffn"] * H + H + 2 * V * c["markov_rank"]
        got_t = sum(a.size for n, a in self.W.items() if not n.startswith("dspark."))
        got_d = sum(a.size for n, a in self.W.items() if n.startswith("dspark."))
        self.assertEqual((target, draft), (212592, 53536))
        self.assertEqual((got_t, got_d), (target, draft))

    def test_router(self):
        h = bf16(f32(np.random.default_rng(2).standard_normal((30, 64))))
        ids, w = m31_ref.router(h, self.W, "layers.1", M3C)
        np.testing.assert_allclose(np.sum(w, axis=1), 2.0, atol=1e-6)
        self.assertTrue(np.all(w >= 0))
        self.assertTrue(all(len(set(r)) == M3C["top_k"] and list(r) == sorted(r) for r in ids))
        W = dict(self.W)
        W["layers.1.mlp.router.correction_bias"] = W["layers.1.mlp.router.correction_bias"].copy()
        W["layers.1.mlp.router.correction_bias"][5] = 100.0
        ids2, w2 = m31_ref.router(h, W, "layers.1", M3C)
        self.assertTrue(np.all(np.any(ids2 == 5, axis=1)))
        s = rc.sigmoid(rc.dot_f32(h, W["layers.1.mlp.router.weight"]))
        sel = np.take_along_axis(s, ids2, axis=1)
        np.testing.assert_allclose(w2, sel / sel.sum(1, keepdims=True) * 2.0, rtol=1e-6)

    def test_swigluoai(self):
        u = f32([[10.0, 0.0, 0.5, 3.0, -20.0, 2.0, 9.0, -9.0]])  # gate 10,0,0.5,3 | up -20,2,9,-9
        out = m31_ref.swigluoai(u, M3C)
        ref = m31_ref.swigluoai(f32([[7.0, 0.0, 0.5, 3.0, -7.0, 2.0, 7.0, -7.0]]), M3C)
        self.assertTrue(np.array_equal(out, ref))
        self.assertEqual(float(out[0, 1]), 0.0)
        g = 0.5
        self.assertAlmostEqual(float(out[0, 2]), g / (1 + np.exp(-1.702 * g)) * 8.0, delta=0.02)

    def test_msa_equals_dense_short(self):
        rng = np.random.default_rng(4)
        T = M3C["block"] * M3C["topk_blocks"]
        h = bf16(f32(rng.standard_normal((T, 64))))
        cos, sin = m31_ref.rope_tables(T, M3C)
        sp = m31_ref.attn_layer(h, self.W, "layers.1", M3C, cos, sin, True)
        de = m31_ref.attn_layer(h, self.W, "layers.1", M3C, cos, sin, False)
        self.assertTrue(np.array_equal(sp, de))

    def test_block_selection_long(self):
        rng = np.random.default_rng(8)
        T, B, K = 45, M3C["block"], M3C["topk_blocks"]
        iq = bf16(f32(rng.standard_normal((T, 2, 16))))
        ik = bf16(f32(rng.standard_normal((T, 16))))
        sel = m31_ref.select_blocks(iq, ik, M3C)
        for t in range(T):
            for blocks in sel[t]:
                self.assertEqual(len(set(blocks)), min(K, t // B + 1))
                self.assertIn(t // B, blocks)
                self.assertEqual(blocks, sorted(blocks))
        h = bf16(f32(rng.standard_normal((T, 64))))
        cos, sin = m31_ref.rope_tables(T, M3C)
        self.assertFalse(np.array_equal(m31_ref.attn_layer(h, self.W, "layers.1", M3C, cos, sin, True),
                                        m31_ref.attn_layer(h, self.W, "layers.1", M3C, cos, sin, False)))

    def test_matches_naive_fp64_reading(self):
        ids = np.random.default_rng(10).integers(0, 255, 40)  # 40 > topk·block: sparse selection matters
        trace = []
        logits = m31_ref.forward(ids, self.W, M3C, trace)
        self.assertTrue(np.array_equal(trace[0], self.W["embed_tokens.weight"][ids]))
        # layer by layer from the same input, so a flip does not cascade: bf16 noise can flip a
        # near-tied expert or block choice on a row (sigmoid scores lie close together); such rows
        # differ a lot, all others must agree closely
        for li, out in enumerate(trace[1:] + [logits]):
            ref = naive_m31_layer(trace[li], li, self.W, M3C)
            base = trace[li] if li < M3C["layers"] else 0
            rel = np.linalg.norm(out - ref, axis=1) / np.linalg.norm(ref - base, axis=1)
            self.assertLess(float(np.median(rel)), 1.5e-2, f"layer {li}")
            self.assertGreaterEqual(float(np.mean(rel < 3e-2)), 0.9, f"layer {li}")

    def test_causal_prefix_invariance(self):
        ids = np.random.default_rng(9).integers(0, 255, 30)
        full = m31_ref.forward(ids, self.W, M3C)
        pre = m31_ref.forward(ids[:21], self.W, M3C)
        self.assertTrue(np.array_equal(full[:21], pre))
        self.assertTrue(np.all(np.isfinite(full)))


def run_cli(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True)


class CliTest(unittest.TestCase):
    def test_h3_cli_and_compare(self):
        with tempfile.TemporaryDirectory() as d:
            W, IN, OUT, OUT2 = (os.path.join(d, n) for n in ("w.st", "in.st", "out.st", "out2.st"))
            h3 = os.path.join(HERE, "h3_ref.py")
            cmp_ = os.path.join(HERE, "compare.py")
            r = run_cli(h3, "--config", "tiny", "--make-weights", W, "--make-inputs", IN, "--seed", "5")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run_cli(h3, "--config", "tiny", "--graph", "step", "--weights", W, "--inputs", IN, "--out", OUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = rc.st_read(OUT)
            self.assertEqual(sorted(out), ["v_audio", "v_video"])
            self.assertEqual(run_cli(cmp_, OUT, OUT).returncode, 0)
            vv = out["v_video"][0].copy()
            vv[0, 0] += 10.0 * np.linalg.norm(vv)
            rc.st_write(OUT2, {"v_video": (vv, "F32"), "v_audio": out["v_audio"]})
            r = run_cli(cmp_, OUT2, OUT, "--rel-l2", "2e-2")
            self.assertEqual(r.returncode, 1)
            self.assertIn("FAIL  v_video", r.stdout)
            vv[1, 1] = np.nan
            rc.st_write(OUT2, {"v_video": (out["v_video"][0], "F32"), "v_audio": (np.where(
                np.arange(out["v_audio"][0].size).reshape(out["v_audio"][0].shape) == 3, np.nan,
                out["v_audio"][0]), "F32")})
            r = run_cli(cmp_, OUT2, OUT)
            self.assertEqual(r.returncode, 1)
            self.assertIn("NaN/Inf", r.stdout)
            # a missing tensor is a user error naming the file and the tensor
            st = rc.st_read(IN)
            del st["pos"]
            rc.st_write(IN, st)
            r = run_cli(h3, "--graph", "step", "--weights", W, "--inputs", IN, "--out", OUT2)
            self.assertEqual(r.returncode, 2)
            self.assertIn("'pos'", r.stderr)

    def test_m31_cli(self):
        with tempfile.TemporaryDirectory() as d:
            W, P, T, T2 = (os.path.join(d, n) for n in ("w.st", "p.st", "t.st", "t2.st"))
            m = os.path.join(HERE, "m31_ref.py")
            r = run_cli(m, "--make-weights", W, "--make-prompt", P, "--prompt-len", "12", "--seed", "3")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run_cli(m, "--weights", W, "--prompt", P, "--max-new-tokens", "6", "--out", T)
            self.assertEqual(r.returncode, 0, r.stderr)
            toks = rc.st_read(T)["tokens"][0]
            self.assertEqual((toks.dtype, toks.shape), (np.int32, (6,)))
            logits = rc.st_read(T)["logits"][0]
            self.assertTrue(np.array_equal(np.argmax(logits, axis=1), toks))
            rc.st_write(T2, {"tokens": (toks[::-1].copy(), "I32"), "logits": (logits, "F32")})
            r = run_cli(os.path.join(HERE, "compare.py"), T2, T)
            self.assertEqual(r.returncode, 0 if np.array_equal(toks, toks[::-1]) else 1)
            rc.st_write(P, {"prompt": (np.array([3, 999], np.int32), "I32")})
            r = run_cli(m, "--weights", W, "--prompt", P, "--out", T)
            self.assertEqual(r.returncode, 2)
            self.assertIn("token ids", r.stderr)


class SafetensorsTest(unittest.TestCase):
    def test_round_trip(self):
        rng = np.random.default_rng(0)
        t = {"a": (bf16(f32(rng.standard_normal((3, 5)))), "BF16"), "b": (f32(rng.standard_normal(7)), "F32"),
             "c": (np.arange(6, dtype=np.int32).reshape(2, 3), "I32"), "d": (np.arange(4, dtype=np.int64), "I64"),
             "e": (np.float32(2.5), "F32")}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.safetensors")
            rc.st_write(p, t)
            back = rc.st_read(p)
            for n, (a, dt) in t.items():
                self.assertEqual(back[n][1], dt)
                self.assertTrue(np.array_equal(back[n][0], a), n)
            try:
                from safetensors import safe_open
            except ImportError:
                return
            with safe_open(p, framework="numpy") as f:
                self.assertEqual(sorted(f.keys()), sorted(t))
                self.assertTrue(np.array_equal(f.get_tensor("b"), t["b"][0]))
                self.assertTrue(np.array_equal(f.get_tensor("c"), t["c"][0]))

    def test_bad_files(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "bad.safetensors")
            for blob in (b"\x01\x02", b"\xff" * 8 + b"{}", b"\x04\x00\x00\x00\x00\x00\x00\x00{no}"):
                with open(p, "wb") as f:
                    f.write(blob)
                with self.assertRaises(rc.RefError):
                    rc.st_read(p)


if __name__ == "__main__":
    unittest.main(verbosity=1)
