#!/usr/bin/env python3
"""peers_table.py: PyTorch peers of bench/attention_bench.c, measured in the same run, and
the ratio table.

    python3 bench/peers_table.py H3BENCH_LOG [--rows S] [--used U] [--heads H] [--iters N]
                                 [--warm-seconds W]

Reads the "h3bench NAME MS TFLOPS" lines that attention_bench printed into H3BENCH_LOG,
measures the same shapes with PyTorch (SDPA with the flash and the cuDNN backends on the
live segment plus the pad segment; torch.matmul for the four block GEMMs; bf16 operands
uniform in [-1, 1) as attention_bench's; CUDA-event medians of N = 10 runs after at least
2 warm-up runs and W = 1 s of the op, as attention_bench times h3's) and prints one table:
h3 ms, PyTorch ms, h3 / PyTorch (< 1: h3 is faster) and the project's goal where there is one
(cuDNN attention within 5 %, h3's flash kernel at least 350 TFLOP/s; each GEMM within 3 % is
judged on bench/gemm_rounds.py's medians of alternating rounds, not on this one run). Needs
torch with CUDA; prints why and exits 0 when it is missing, so the GPU script goes on.
"""
import argparse

# shared by the bench drivers
from block_peers import attention_peers, gemm_peers, goal_text, read_h3, torch_missing


def peers(rows, used, heads, iters, warm_s):
    out = {}
    attention_peers(rows, used, iters, out, heads=heads, warm_s=warm_s)
    gemm_peers(rows, iters, warm_s, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--rows", type=int, default=32704)
    ap.add_argument("--used", type=int, default=32700)
    ap.add_argument("--heads", type=int, default=56)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warm-seconds", type=float, default=1.0)
    a = ap.parse_args()
    h3 = read_h3([a.log])
    timed = {k for k in h3 if k + "_tflops" in h3}  # attention_bench's rows (name ms tflops)
    missing = torch_missing()
    if missing:
        print(f"peers: PyTorch unavailable ({missing}); h3 numbers only")
    peer = {} if missing else peers(a.rows, a.used, a.heads, a.iters, a.warm_seconds)
    print(f"{'work':<22} {'h3 ms':>10} {'torch ms':>10} {'h3/torch':>9}  goal")
    for name in sorted(timed | set(peer)):
        hm, pm = h3.get(name), peer.get(name)
        r = hm / pm if hm and pm and pm > 0 else None
        ratio = f"{r:9.3f}" if r is not None else f"{'-':>9}"
        hs = f"{hm:10.3f}" if hm is not None else f"{'-':>10}"
        ps = f"{pm:10.3f}" if pm is not None else f"{'-':>10}"
        if name.startswith("gemm_"):
            goal = "one run; judged on bench/gemm_rounds.py's medians"
        else:
            goal = goal_text(name, r, h3)
        print(f"{name:<22} {hs} {ps} {ratio}  {goal}".rstrip())


if __name__ == "__main__":
    main()
