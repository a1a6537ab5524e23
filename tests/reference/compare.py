#!/usr/bin/env python3
"""Compare two safetensors files tensor by tensor (h3 output vs the numpy reference).

CLI (stable):
  compare.py A.safetensors B.safetensors [--rel-l2 2e-2] [--only NAME,NAME] [--ignore-missing]
B is the reference: rel_l2 = ||A − B||₂ / ||B||₂ (the absolute L2 when ||B|| = 0).
One line per tensor:  `ok|FAIL  NAME  dtype shape  rel_l2=.. max_abs=.. [reason]`.
A tensor fails when: it is missing from one file (unless --ignore-missing), shapes differ,
either side has NaN/Inf, float rel_l2 > --rel-l2, or (integer tensors, e.g. tokens) any
element differs (the first mismatching index is printed).
Exit status: 0 all ok, 1 some tensor failed, 2 usage or file error.
"""
import argparse
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refcommon import RefError, st_read  # noqa: E402

INT_DTYPES = ("I32", "I64", "U8", "I8")


def compare_one(name, a, da, b, db, tol):
    """-> (ok, line) for one tensor present in both files."""
    head = f"{name}  {da} {list(a.shape)}"
    if list(a.shape) != list(b.shape):
        return False, f"FAIL  {head}  shape differs from reference {db} {list(b.shape)}"
    if da in INT_DTYPES or db in INT_DTYPES:
        diff = np.flatnonzero(a.astype(np.int64).ravel() != b.astype(np.int64).ravel())
        if diff.size:
            i = int(diff[0])
            return False, (f"FAIL  {head}  {diff.size} of {a.size} elements differ; first at flat index {i}: "
                           f"{a.ravel()[i]} vs reference {b.ravel()[i]}")
        return True, f"ok    {head}  exact"
    x, y = a.astype(np.float64), b.astype(np.float64)
    bad = [f"{side} has {int(n)} NaN/Inf" for side, n in (("A", np.sum(~np.isfinite(x))),
                                                          ("reference", np.sum(~np.isfinite(y)))) if n]
    if bad:
        return False, f"FAIL  {head}  {'; '.join(bad)}"
    err = np.linalg.norm((x - y).ravel())
    ref = np.linalg.norm(y.ravel())
    rel = err / ref if ref > 0 else err
    mx = float(np.max(np.abs(x - y))) if x.size else 0.0
    ok = rel <= tol
    tail = "" if ok else f"  rel_l2 above {tol:g}"
    return ok, f"{'ok  ' if ok else 'FAIL'}  {head}  rel_l2={rel:.3e} max_abs={mx:.3e}{tail}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="file under test")
    ap.add_argument("b", help="reference file")
    ap.add_argument("--rel-l2", type=float, default=2e-2)
    ap.add_argument("--only", help="comma-separated tensor names to compare")
    ap.add_argument("--ignore-missing", action="store_true",
                    help="skip tensors present in only one of the files")
    args = ap.parse_args(argv)
    try:
        A, B = st_read(args.a), st_read(args.b)
    except RefError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    names = sorted(set(A) | set(B))
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
    if not names:
        print("error: nothing to compare (both files are empty)", file=sys.stderr)
        return 2
    failed = 0
    for n in names:
        if n not in A or n not in B:
            where = args.a if n not in A else args.b
            if args.ignore_missing and not args.only:
                print(f"skip  {n}  missing in {where}")
                continue
            print(f"FAIL  {n}  missing in {where}")
            failed += 1
            continue
        ok, line = compare_one(n, A[n][0], A[n][1], B[n][0], B[n][1], args.rel_l2)
        print(line)
        failed += not ok
    print(f"{len(names) - failed} of {len(names)} tensors ok" if not failed else
          f"{failed} of {len(names)} tensors FAILED", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
