#!/usr/bin/env python3
"""compare_outputs.py: NMSE of every tensor of A.safetensors against B.safetensors (the
reference); fails when a tensor is not finite or above LIMIT. Each line also gives the
relative L2 error (sqrt of the NMSE) and the PSNR, 10 log10(peak^2 / MSE) with peak the
largest |B|, the figures of a sample's quality against a reference sample. With --finite: checks that
every tensor of A is finite (and prints its shape, mean and RMS), no reference. With
--tokens: the generated token ids of A against B, position by position; prints how many
leading tokens agree (greedy decoding may part where two logits nearly tie) and fails only
when the shapes differ or A holds ids outside [0, VOCAB). With --bitwise: every tensor of A
holds the bytes of B's (any dtype, bf16 included: read from the files' own layout).
    python3 tests/gpu/compare_outputs.py A.safetensors B.safetensors LIMIT
    python3 tests/gpu/compare_outputs.py --finite A.safetensors
    python3 tests/gpu/compare_outputs.py --tokens A.safetensors B.safetensors VOCAB
    python3 tests/gpu/compare_outputs.py --bitwise A.safetensors B.safetensors
"""
import json
import struct
import sys

import numpy as np
from safetensors.numpy import load_file


def finite(path):
    a = load_file(path)
    bad = 0
    for k in sorted(a):
        x = a[k].astype(np.float64)
        ok = bool(np.isfinite(x).all()) and x.size > 0
        bad += not ok
        rms = float(np.sqrt((x ** 2).mean())) if x.size else 0.0
        print(f"{k}: {list(a[k].shape)} {a[k].dtype} mean {x.mean():.4g} rms {rms:.4g} "
              f"{'finite' if ok else 'NOT finite FAIL'}")
    print(f"{len(a) - bad} finite, {bad} failed")
    return 1 if bad or not a else 0


def tokens(path_a, path_b, vocab):
    a, b = load_file(path_a), load_file(path_b)
    bad = 0
    for k in sorted(b):
        x, y = a.get(k), b[k]
        if x is None or x.shape != y.shape:
            print(f"{k}: shape {None if x is None else list(x.shape)} vs {list(y.shape)} FAIL")
            bad += 1
            continue
        if ((x < 0) | (x >= vocab)).any():
            print(f"{k}: ids outside [0, {vocab}) FAIL")
            bad += 1
            continue
        diff = np.flatnonzero(x.ravel() != y.ravel())
        lead = int(diff[0]) if diff.size else x.size
        print(f"{k}: {lead} of {x.size} leading tokens equal; {x.size - diff.size} equal in all")
    return 1 if bad else 0


def raw_tensors(path):
    """name -> (dtype, shape, bytes) from a safetensors file: an 8-byte little-endian header
    length, the JSON header, then the data (offsets relative to its start)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in head.items() if k != "__metadata__"}


def bitwise(path_a, path_b):
    a, b = raw_tensors(path_a), raw_tensors(path_b)
    bad = 0
    for k in sorted(b):
        same = k in a and a[k] == b[k]
        bad += not same
        print(f"{k}: {b[k][0]} {b[k][1]} {'bitwise equal' if same else 'DIFFERS FAIL'}")
    print(f"{len(b) - bad} passed, {bad} failed")
    return 1 if bad or not b else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--bitwise":
        return bitwise(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "--finite":
        return finite(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[1] == "--tokens":
        return tokens(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    a, b, limit = load_file(sys.argv[1]), load_file(sys.argv[2]), float(sys.argv[3])
    bad = 0
    for k in sorted(b):
        if k not in a:
            print(f"{k}: missing in {sys.argv[1]} FAIL")
            bad += 1
            continue
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        sq = float(((x - y) ** 2).sum())
        nmse = sq / max(float((y ** 2).sum()), 1e-300)
        mse, peak = sq / max(x.size, 1), float(np.abs(y).max()) if y.size else 0.0
        if mse == 0.0:
            psnr = "inf"
        elif peak == 0.0:
            psnr = "-inf"
        else:
            psnr = f"{10.0 * np.log10(peak * peak / mse):.2f}"
        ok = bool(np.isfinite(x).all()) and nmse <= limit
        bad += not ok
        print(f"{k}: nmse {nmse:.3g} (limit {limit:g}) {'ok' if ok else 'FAIL'}; rel L2 {np.sqrt(nmse):.4g}, "
              f"PSNR {psnr} dB")
    print(f"{len(b) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
