#!/usr/bin/env python3
"""gemm_kernels.py: the CUDA kernels PyTorch runs for the four block GEMMs of H3 at S = 32704
(torch.matmul(x, w.t()), bf16, random normal operands) with their mean device time, from
torch.profiler: which cuBLAS kernel (tile, cluster, stages) the peer of bench/peers_table.py
uses for each shape, to set against the algorithm h3's tuner keeps (H3_GEMM_TUNE_LOG=1).

    python3 bench/gemm_kernels.py [--rows S] [--iters N]
Also prints which cuBLAS / cuBLASLt libraries the process loaded and cuBLASLt's version
(h3 links /usr/local/cuda/lib64's; PyTorch may bring its own).
"""
import argparse
import ctypes

from block_peers import GEMMS  # the four block GEMMs, as the other bench drivers time them


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32704)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile
    for name, (k, n) in GEMMS:
        x = torch.randn(a.rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(x, w.t())
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.iters):
                torch.matmul(x, w.t())
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.count >= a.iters:
                print(f"{name:14s} {e.device_time_total / e.count / 1e3:8.3f} ms  {e.key}")
        del x, w


def loaded_blas():
    """(path, cublasLtGetVersion or None) of each libcublas* mapped into this process."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "libcublas" in p:
                paths.add(p)
    out = []
    for p in sorted(paths):
        ver = None
        if "libcublasLt" in p:
            try:
                ver = ctypes.CDLL(p).cublasLtGetVersion()
            except (OSError, AttributeError):
                pass
        out.append((p, ver))
    return out


if __name__ == "__main__":
    main()
    for path, ver in loaded_blas():
        print(f"loaded {path}" + (f" (cublasLtGetVersion {ver})" if ver else ""))
