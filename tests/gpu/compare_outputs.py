#!/usr/bin/env python3
"""compare_outputs.py: NMSE of every tensor of A.safetensors against B.safetensors (the
reference); fails when a tensor is not finite or above LIMIT.
    python3 tests/gpu/compare_outputs.py A.safetensors B.safetensors LIMIT
"""
import sys

import numpy as np
from safetensors.numpy import load_file


def main():
    a, b, limit = load_file(sys.argv[1]), load_file(sys.argv[2]), float(sys.argv[3])
    bad = 0
    for k in sorted(b):
        if k not in a:
            print(f"{k}: missing in {sys.argv[1]} FAIL")
            bad += 1
            continue
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        nmse = float(((x - y) ** 2).sum() / max(float((y ** 2).sum()), 1e-300))
        ok = bool(np.isfinite(x).all()) and nmse <= limit
        bad += not ok
        print(f"{k}: nmse {nmse:.3g} (limit {limit:g}) {'ok' if ok else 'FAIL'}")
    print(f"{len(b) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
