#!/usr/bin/env python3
"""block_peers.py: PyTorch peers of one H3 block (eager and torch.compile), of the attention
alone and of the four block GEMMs, measured in the same device run as h3's
bench/block_bench.c and bench/attention_bench.c, and one table of times and ratios against
the acceptance goals: the block, attention, the four GEMMs, and with --sample-log the whole
50-block step and the whole 49-step sample.

    python3 bench/block_peers.py H3_LOG... [--sample-log H3EXEC_LOG] [--iters N] [--rows S]
                                 [--used U] [--out FILE.json] [--torch-json FILE.json]
                                 [--gemm-json FILE.json]

H3_LOG: files holding "h3bench NAME MS ..." lines (block_bench: step_a, step_b, block,
profile_*; attention_bench: attention_cudnn, attention_flash, gemm_*). --sample-log: the
output of h3exec on the full 49-step sample plan; its wall time and GPU time are set
against the eager estimate (torch eager block x layers x steps), and its GPU time per step
against torch's blocks x layers (a lower bound of PyTorch's step: its AdaLN projections and
final layer are not counted). --torch-json reuses the PyTorch times of an earlier run's
--out file (same device run) instead of measuring again. --gemm-json takes both sides' GEMM
rows from bench/gemm_rounds.py's --out file (medians of alternating rounds; PyTorch's GEMMs
are then not measured here).

The PyTorch block is written here from the model's definition (models/minimax_h3.g, block):
AdaLN projection of a [2, 2688] -> [6, 6 * 5376] tables, RMSNorm + modulate with rows
gathered by idx, qkv GEMM, per-head q/k RMSNorm, RoPE on dims [0, 96) (cos/sin [S, 48]),
attention over live rows [0, used) and pad rows [used, S) as two SDPA calls, out_proj,
gated residual, RMSNorm + modulate, fc1, SwiGLU in fp32 rounded once, fc2, gated
residual; bf16 everywhere else, random weights. SDPA runs with the cuDNN backend (the
fastest PyTorch has on the H200; falls back to PyTorch's default choice where cuDNN
refuses). Times: medians of CUDA-event timings after warm-up (torch.compile's warm-up
includes its compilation); SDPA and the GEMMs on operands uniform in [-1, 1) after 1 s of
warm-up, as attention_bench times h3's.
"""
import argparse
import json
import os
import re
import sys

DIM, HEADS, HD, FF, TE, ROPE = 5376, 56, 128, 14336, 2688, 96


def median_ms(fn, iters, warm=3, warm_s=0.0):
    """Median CUDA-event milliseconds of `iters` runs of fn, after at least `warm` warm-up
    runs and at least warm_s seconds of them (wall time, synchronised)."""
    import time
    import torch
    t0 = time.perf_counter()
    w = 0
    while w < warm or (time.perf_counter() - t0 < warm_s and w < 100000):
        fn()
        torch.cuda.synchronize()
        w += 1
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def torch_missing():
    """Why PyTorch cannot measure here (not installed, or no GPU it can see); None when it can."""
    try:
        import torch
    except ImportError as e:
        return str(e)
    return None if torch.cuda.is_available() else "torch sees no GPU"


def uniform(*shape):
    """bf16 values uniform in [-1, 1) on the GPU: attention_bench's operand distribution."""
    import torch
    return torch.rand(*shape, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(torch.bfloat16)


def make_block(S, U):
    import torch
    import torch.nn.functional as F

    def rope(t, cos, sin):  # t [S, H, 128]; cos, sin [S, 48]
        c, s = cos[:, None, :], sin[:, None, :]
        half = ROPE // 2
        x1, x2 = t[..., :half], t[..., half:ROPE]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s, t[..., ROPE:]), dim=-1)

    def attention(q, k, v):  # [S, H, D] -> [S, H * D]
        qt, kt, vt = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
        parts = [F.scaled_dot_product_attention(qt[:, :, :U], kt[:, :, :U], vt[:, :, :U])]
        if S > U:
            parts.append(F.scaled_dot_product_attention(qt[:, :, U:], kt[:, :, U:], vt[:, :, U:]))
        o = torch.cat(parts, dim=2)  # [1, H, S, D]
        return o[0].transpose(0, 1).reshape(S, HEADS * HD)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            bf = torch.bfloat16

            def w(*shape, fan_in=None, std=None):
                s = std if std is not None else fan_in ** -0.5
                return torch.nn.Parameter(torch.randn(*shape, dtype=bf, device="cuda") * s,
                                          requires_grad=False)

            self.ada_w = w(18 * DIM, TE, fan_in=100 * TE)
            self.ada_b = w(18 * DIM, std=0.05)
            self.n1 = w(DIM, std=0.02)
            self.n2 = w(DIM, std=0.02)
            self.qn = w(HD, std=0.02)
            self.kn = w(HD, std=0.02)
            self.qkv = w(3 * HEADS * HD, DIM, fan_in=DIM)
            self.out = w(DIM, HEADS * HD, fan_in=HEADS * HD)
            self.fc1 = w(2 * FF, DIM, fan_in=DIM)
            self.fc2 = w(DIM, FF, fan_in=FF)
            with torch.no_grad():
                for n in (self.n1, self.n2, self.qn, self.kn):
                    n += 1

        def forward(self, x, a, idx, cos, sin):
            m = F.linear(a, self.ada_w, self.ada_b).view(6, 6 * DIM)
            sh1, sc1, g1, sh2, sc2, g2 = m.split(DIM, dim=1)
            h = F.rms_norm(x, (DIM,), self.n1, 1e-5)
            h = h * (1 + sc1[idx]) + sh1[idx]
            q, k, v = F.linear(h, self.qkv).split(HEADS * HD, dim=1)
            q = rope(F.rms_norm(q.view(S, HEADS, HD), (HD,), self.qn, 1e-5), cos, sin)
            k = rope(F.rms_norm(k.view(S, HEADS, HD), (HD,), self.kn, 1e-5), cos, sin)
            o = attention(q, k, v.view(S, HEADS, HD))
            x = x + g1[idx] * F.linear(o, self.out)
            h = F.rms_norm(x, (DIM,), self.n2, 1e-5)
            h = h * (1 + sc2[idx]) + sh2[idx]
            gate, up = F.linear(h, self.fc1).split(FF, dim=1)
            g = (F.silu(gate.float()) * up.float()).to(torch.bfloat16)
            return x + g2[idx] * F.linear(g, self.fc2)

    return Block


# the four block GEMMs: name, (K, N); x [S, K] times w [N, K] transposed
GEMMS = (("gemm_qkv", (5376, 21504)), ("gemm_out_proj", (7168, 5376)),
         ("gemm_fc1", (5376, 28672)), ("gemm_fc2", (14336, 5376)))


def gemm_peers(S, iters, warm_s, out):
    """torch.matmul(x, w.t()) for each block GEMM at M = S, and their sum gemm_block_total."""
    import torch
    total = 0.0
    for name, (k, n) in GEMMS:
        x, w = uniform(S, k), uniform(n, k)
        out[name] = median_ms(lambda: torch.matmul(x, w.t()), iters, warm=2, warm_s=warm_s)
        total += out[name]
    out["gemm_block_total"] = total


def attention_peers(S, U, iters, out, heads=HEADS, warm_s=1.0):
    """SDPA alone on [1, heads, S, 128] contiguous bf16 (uniform in [-1, 1) and warmed for
    warm_s seconds, as attention_bench times h3's), live + pad segments, with the cuDNN and
    the flash backends (a backend that refuses is reported and left out)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (uniform(1, heads, S, HD) for _ in range(3))
    for name, be in (("attention_cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("attention_flash", SDPBackend.FLASH_ATTENTION)):
        def run():
            with sdpa_kernel(be):
                F.scaled_dot_product_attention(q[:, :, :U], k[:, :, :U], v[:, :, :U])
                if S > U:
                    F.scaled_dot_product_attention(q[:, :, U:], k[:, :, U:], v[:, :, U:])
        try:
            out[name] = median_ms(run, iters, warm_s=warm_s)
        except RuntimeError as e:
            print(f"peers: {name}: {str(e).splitlines()[0]}", file=sys.stderr)


def peers(S, U, iters, gemms=True):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    out = {}
    attention_peers(S, U, iters, out)
    if gemms:
        gemm_peers(S, iters, 1.0, out)
    blk = make_block(S, U)()
    x = torch.randn(S, DIM, device=dev, dtype=bf)
    a = torch.nn.functional.silu(torch.randn(2, TE, device=dev)).to(bf)
    idx = torch.randint(0, 6, (S,), device=dev)
    ang = torch.rand(S, ROPE // 2, device=dev) * 6.28
    cos, sin = ang.cos().to(bf), ang.sin().to(bf)
    compiled = torch.compile(blk)
    with torch.inference_mode():
        for name, fn in (("block_eager", blk), ("block_compile", compiled)):
            try:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    out[name] = median_ms(lambda: fn(x, a, idx, cos, sin), iters)
            except Exception as e:  # cuDNN refused: PyTorch's own SDPA choice
                print(f"peers: {name} with cuDNN SDPA: {str(e).splitlines()[0]}; default SDPA",
                      file=sys.stderr)
                out[name] = median_ms(lambda: fn(x, a, idx, cos, sin), iters)
    return out


# the acceptance goals of the CUDA backend, by row key: h3 / PyTorch at most
# RATIO_GOALS[key]; h3's own rate at least MIN_TFLOPS[key] (and within the NMSE limit
# attention_bench --check logged, where it did)
RATIO_GOALS = {"block_compile": 0.97, "attention_cudnn": 1.05, "gemm_qkv": 1.03,
               "gemm_out_proj": 1.03, "gemm_fc1": 1.03, "gemm_fc2": 1.03}
MIN_TFLOPS = {"attention_flash": 350.0}


def met(ok):
    return "met" if ok else "NOT met"


def goal_text(key, r, h3):
    """The verdict of row `key` (h3 / PyTorch = r) against its goal; "" without one."""
    if key in MIN_TFLOPS and h3.get(key + "_tflops"):
        t, lo = h3[key + "_tflops"], MIN_TFLOPS[key]
        text = f"h3 {t:.0f} TFLOP/s >= {lo:.0f} {met(t >= lo)}"
        e, lim = h3.get("nmse_" + key.replace("attention_", "")), h3.get("nmse_limit")
        if e is not None and lim:
            text += f"; nmse vs reference {e:.2g} <= {lim:.0e} {met(e <= lim)}"
        return text
    goal = RATIO_GOALS.get(key)
    return "" if goal is None or r is None else f"<= {goal:.2f} {met(r <= goal)}"


def read_h3_lines(lines):
    """{name: ms, name_tflops: rate} from "h3bench NAME MS [TFLOPS]" lines (later lines win)."""
    h3 = {}
    for line in lines:
        p = line.split()
        if len(p) >= 3 and p[0] == "h3bench":
            h3[p[1]] = float(p[2])
            if len(p) >= 4:  # attention_bench: the rate too
                h3[p[1] + "_tflops"] = float(p[3])
    return h3


def read_h3(paths):
    h3 = {}
    for path in paths:
        with open(path) as f:
            h3.update(read_h3_lines(f))
    return h3


def read_sample(path):
    """(wall seconds per run, GPU seconds per run) from an h3exec report."""
    wall = gpu = None
    with open(path) as f:
        for line in f:
            m = re.search(r"min [0-9.]+\s+median ([0-9.]+)", line)
            if m and "latency" not in line:
                wall = float(m.group(1)) / 1e3
            m = re.search(r"GPU compute time: mean ([0-9.]+) ms", line)
            if m:
                gpu = float(m.group(1)) / 1e3
    return wall, gpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="*")
    ap.add_argument("--sample-log")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rows", type=int, default=32704)
    ap.add_argument("--used", type=int, default=32700)
    ap.add_argument("--layers", type=int, default=50)
    ap.add_argument("--steps", type=int, default=49)
    ap.add_argument("--out")
    ap.add_argument("--torch-json", help="reuse the PyTorch times of an earlier --out file")
    ap.add_argument("--gemm-json", help="the GEMM rows from bench/gemm_rounds.py --out (both sides)")
    a = ap.parse_args()
    h3 = read_h3(a.logs)
    if a.torch_json:
        with open(a.torch_json) as fi:
            peer = json.load(fi)["torch"]
    else:
        peer = measure_peers(a, gemms=not a.gemm_json)
    if a.gemm_json:
        with open(a.gemm_json) as fi:
            g = json.load(fi)
        h3.update(g["h3"])
        peer.update(g["torch"])
    table(a, h3, peer)


def measure_peers(a, gemms=True):
    missing = torch_missing()
    if missing:
        print(f"peers: PyTorch unavailable ({missing}); h3 numbers only")
        return {}
    import torch
    print(f"peers: torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    return peers(a.rows, a.used, a.iters, gemms)


def table(a, h3, peer):
    def f(v, w=10, p=3):
        return f"{v:{w}.{p}f}" if v is not None else f"{'-':>{w}}"

    print(f"\n== one H3 block, S = {a.rows} (live {a.used}), full dims, bf16; h3 and PyTorch in one run ==")
    print(f"{'work':<32} {'h3 ms':>10} {'peer ms':>10} {'h3/peer':>8}  goal")
    rows = []  # (label, row key, h3 ms, peer ms)
    for name, key in (("block vs torch.compile", "block_compile"), ("block vs torch eager", "block_eager")):
        rows.append((name, key, h3.get("block"), peer.get(key)))
    for name, key in (("attention cudnn vs torch cuDNN", "attention_cudnn"),
                      ("attention flash vs torch flash", "attention_flash")):
        rows.append((name, key, h3.get(key), peer.get(key)))
    for key, _ in GEMMS:
        rows.append((key.replace("gemm_", "GEMM ") + " (Lt vs cuBLAS)", key, h3.get(key), peer.get(key)))
    rows.append(("the four GEMMs together", "gemm_block_total", h3.get("gemm_block_total"),
                 peer.get("gemm_block_total")))
    wall = gpu = None
    if a.sample_log:
        wall, gpu = read_sample(a.sample_log)
        step = gpu / a.steps * 1e3 if gpu else None
        for name, key in (("step vs torch.compile block x50", "block_compile"),
                          ("step vs torch eager block x50", "block_eager")):
            rows.append((name, "step", step, peer[key] * a.layers if peer.get(key) else None))
    for name, key, hm, pm in rows:
        r = hm / pm if hm and pm else None
        print(f"{name:<32} {f(hm)} {f(pm)} {f(r, 8, 3)}  {goal_text(key, r, h3)}".rstrip())
    print("  (GEMM rows: " + (f"medians of bench/gemm_rounds.py's alternating rounds, "
                             f"{os.path.basename(a.gemm_json)})" if a.gemm_json else "one run each)"))
    for k in ("profile_gemm", "profile_attention", "profile_other"):
        if k in h3:
            print(f"{'  h3 ' + k + ' (traced)':<32} {f(h3[k])}")
    result = {"h3": h3, "torch": peer}
    if a.sample_log:
        eager = peer.get("block_eager")
        est = eager * a.layers * a.steps / 1e3 if eager else None
        print(f"\n== full {a.steps}-step sample ({a.layers} layers) ==")
        print(f"h3 wall {f(wall, 8, 1)} s, GPU {f(gpu, 8, 1)} s; eager estimate (block x {a.layers} x "
              f"{a.steps}) {f(est, 8, 1)} s; h3/estimate {f(wall / est if wall and est else None, 6, 3)}"
              f"  goal <= 0.90 {met(bool(wall and est and wall / est <= 0.90))}")
        result["sample"] = {"wall_s": wall, "gpu_s": gpu, "eager_estimate_s": est}
    if a.out:
        with open(a.out, "w") as fo:
            json.dump(result, fo, indent=1)


if __name__ == "__main__":
    main()
