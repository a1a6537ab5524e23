#!/usr/bin/env python3
"""peers_table.py: PyTorch peers of bench/attention_bench.c, measured in the same run, and
the ratio table.

    python3 bench/peers_table.py H3BENCH_LOG [--rows S] [--used U] [--heads H] [--iters N]

Reads the "h3bench NAME MS TFLOPS" lines that attention_bench printed into H3BENCH_LOG,
measures the same shapes with PyTorch (SDPA with the flash and the cuDNN backends on the
live segment plus the pad segment; torch.matmul for the four block GEMMs; bf16, CUDA-event
medians after warm-up) and prints one table: h3 ms, PyTorch ms, PyTorch / h3 (> 1: h3 is
faster). Needs torch with CUDA; prints why and exits 0 when it is missing, so the GPU
script goes on.
"""
import argparse
import sys

from block_peers import median_ms  # CUDA-event median, shared by the bench drivers


def peers(rows, used, heads, iters):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev = "cuda"
    q, k, v = (torch.randn(1, heads, rows, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))
    out = {}
    for name, backend in (("attention_flash", SDPBackend.FLASH_ATTENTION),
                          ("attention_cudnn", SDPBackend.CUDNN_ATTENTION)):
        def run():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q[:, :, :used], k[:, :, :used], v[:, :, :used])
                if rows > used:
                    F.scaled_dot_product_attention(q[:, :, used:], k[:, :, used:], v[:, :, used:])
        try:
            out[name] = median_ms(run, iters, warm=2)
        except RuntimeError as e:
            print(f"peers: {name}: {e}".splitlines()[0], file=sys.stderr)
    total = 0.0
    for name, (kk, n) in (("gemm_qkv", (5376, 21504)), ("gemm_out_proj", (7168, 5376)),
                          ("gemm_fc1", (5376, 28672)), ("gemm_fc2", (14336, 5376))):
        x = torch.randn(rows, kk, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, kk, device=dev, dtype=torch.bfloat16)
        out[name] = median_ms(lambda: torch.matmul(x, w.t()), iters, warm=2)
        total += out[name]
        del x, w
    out["gemm_block_total"] = total
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--rows", type=int, default=32704)
    ap.add_argument("--used", type=int, default=32700)
    ap.add_argument("--heads", type=int, default=56)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    h3 = {}
    with open(a.log) as f:
        for line in f:
            p = line.split()
            if len(p) == 4 and p[0] == "h3bench":
                h3[p[1]] = float(p[2])
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch sees no GPU")
        peer = peers(a.rows, a.used, a.heads, a.iters)
    except ImportError as e:
        print(f"peers: PyTorch unavailable ({e}); h3 numbers only")
        peer = {}
    print(f"{'work':<22} {'h3 ms':>10} {'torch ms':>10} {'torch/h3':>9}")
    for name in sorted(set(h3) | set(peer)):
        hm, pm = h3.get(name), peer.get(name)
        ratio = f"{pm / hm:9.2f}" if hm and pm and hm > 0 else f"{'-':>9}"
        hs = f"{hm:10.3f}" if hm is not None else f"{'-':>10}"
        ps = f"{pm:10.3f}" if pm is not None else f"{'-':>10}"
        print(f"{name:<22} {hs} {ps} {ratio}")


if __name__ == "__main__":
    main()
