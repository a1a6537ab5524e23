#!/usr/bin/env python3
"""dump_diff.py: where two runs of one plan part, from their `h3exec --dump-ops KINDS --dump
FILE` files (e.g. the cuda backend against the CPU reference on the same inputs).

    python3 tests/gpu/dump_diff.py A.safetensors B.safetensors [--top 40] [--rows-from R]

Walks the tensors both files hold in execution order (execution n, then op id) and prints,
per op result: floats the NMSE of A against B and the row of the largest one; integers how
many rows differ. For router_topk dumped with its operands (router_topk+operands), each row
whose chosen experts differ gets both runs' margins: the gap between the k-th and the
(k+1)-th largest s + bias (s = sigmoid(h . w^T), from each run's own h), so that a flip at a
near-tie (both backends right within bf16) is told from a bug. --rows-from R reports router
rows >= R only. Exits 0 (a report, not a test).
"""
import argparse
import json
import re
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "I8": np.int8,
      "U8": np.uint8, "F16": np.float16, "BF16": np.uint16}
NAME = re.compile(r"op(\d+)\.(\w+)\.L(\d+)\.([ar])(\d+)\.n(\d+)$")


def load(path):
    """{name: array} of a safetensors file; BF16 widened to float32."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=DT[v["dtype"]]).reshape(v["shape"])
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[k] = a
    return out


def router_scores(h, w, bias):
    """s + bias [T, E] in float64 (the op's contract: s = sigmoid(fp32(h) . w^T))."""
    z = h.reshape(h.shape[0], -1).astype(np.float64) @ w.astype(np.float64).T
    return 1.0 / (1.0 + np.exp(-z)) + bias.astype(np.float64)


def margin(scores, k):
    top = np.sort(scores, axis=1)[:, ::-1]
    return top[:, k - 1] - top[:, k]


def router_flips(A, B):
    """[(run, op name, row, ids A, ids B, margin A, margin B, |s_A - s_B| max)] for every
    router_topk result 0 in both dumps with its operands, in execution order."""
    out = []
    for k in sorted(A.keys() & B.keys(), key=lambda k: (int(NAME.match(k).group(6)), int(NAME.match(k).group(1)))
                    if NAME.match(k) else (0, 0)):
        m = NAME.match(k)
        if not m or m.group(2) != "router_topk" or m.group(4) != "r" or m.group(5) != "0":
            continue
        run, pre = int(m.group(6)), k.rsplit(".", 2)[0]
        ops = [f"{pre}.a{i}.n{run}" for i in range(3)]
        if not all(x in A and x in B for x in ops):
            continue
        ids_a, ids_b = A[k], B[k]
        sa, sb = router_scores(*(A[x] for x in ops)), router_scores(*(B[x] for x in ops))
        ma, mb = margin(sa, ids_a.shape[1]), margin(sb, ids_a.shape[1])
        for t in np.flatnonzero((ids_a != ids_b).any(axis=1)):
            out.append((run, pre, int(t), ids_a[t].tolist(), ids_b[t].tolist(), float(ma[t]), float(mb[t]),
                        float(np.abs(sa[t] - sb[t]).max())))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--top", type=int, default=40, help="print at most this many op results")
    p.add_argument("--rows-from", type=int, default=0)
    o = p.parse_args()
    A, B = load(o.a), load(o.b)
    keys = []
    for k in A.keys() & B.keys():
        m = NAME.match(k)
        if m and m.group(4) == "r":
            keys.append((int(m.group(6)), int(m.group(1)), int(m.group(5)), m.group(2), k))
    keys.sort()
    print(f"{len(keys)} op results in both files ({len(A)} and {len(B)} tensors)")
    shown = 0
    for run, op, res, kind, k in keys:
        a, b = A[k], B[k]
        if a.shape != b.shape:
            print(f"{k}: shapes differ {a.shape} vs {b.shape}")
            continue
        if np.issubdtype(a.dtype, np.floating):
            a2 = a.reshape(a.shape[0], -1).astype(np.float64) if a.ndim else a.reshape(1, 1)
            b2 = b.reshape(a2.shape).astype(np.float64)
            den = (b2 ** 2).sum(axis=1)
            err = ((a2 - b2) ** 2).sum(axis=1) / np.where(den > 0, den, 1)
            line = f"nmse {float(((a2 - b2) ** 2).sum() / max((b2 ** 2).sum(), 1e-300)):.3g}, " \
                   f"row max {err.max():.3g} at row {int(err.argmax())}"
        else:
            rows = np.flatnonzero((a.reshape(a.shape[0], -1) != b.reshape(b.shape[0], -1)).any(axis=1)) \
                if a.ndim else np.flatnonzero(a != b)
            line = f"{rows.size} rows differ" + (f" (first {rows[:8].tolist()})" if rows.size else "")
        if shown < o.top:
            print(f"{k}: {line}")
            shown += 1
        if kind == "router_topk" and res == 0:
            flips = [f for f in router_flips({x: A[x] for x in A if x.startswith(k.rsplit(".", 2)[0])},
                                             {x: B[x] for x in B if x.startswith(k.rsplit(".", 2)[0])})
                     if f[0] == run and f[2] >= o.rows_from]
            if flips:
                print(f"  {len(flips)} rows choose other experts:")
            for f in flips[:16]:
                print(f"    row {f[2]}: A {f[3]} margin {f[5]:.3g}, B {f[4]} margin {f[6]:.3g}; "
                      f"|s_A - s_B| max {f[7]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
