#!/usr/bin/env python3
"""rng_ref.py: an independent implementation of h3's random generator (include/h3/rng.h)
in Python, with exact IEEE binary32 arithmetic, compared bit for bit with h3's output.

usage: rng_ref.py IO_INTEROP_BINARY SCRATCH_DIR

Philox-4x32-10 on Python integers; every fp32 operation of rng.h's documented sequence is
done with numpy float32 scalars (one correctly rounded operation each) and fma with exact
rational arithmetic rounded once to binary32. A host compiler that contracted a*b+c in a
place where rng.h forbids it, a libm difference, or a changed constant shows up as a
mismatch. Exits 77 (skipped) when numpy or safetensors are not installed.
"""
import os
import subprocess
import sys
from fractions import Fraction

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

F = np.float32
M32 = 0xFFFFFFFF


def philox(c, k):
    c, k = list(c), list(k)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M32, (p0 >> 32) ^ c[3] ^ k[1], p0 & M32]
    return c


def fnv1a(s):
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & M32
    return h


def round_f32(q):
    """The binary32 nearest to the rational q, ties to even."""
    if q == 0:
        return F(0.0)
    c = F(float(q))  # within one ulp of the answer
    cands = [np.nextafter(c, F(-np.inf)), c, np.nextafter(c, F(np.inf))]
    best = None
    for x in cands:
        d = abs(Fraction(float(x)) - q)
        even = int(np.array(x).view(np.uint32)) & 1 == 0
        if best is None or d < best[0] or (d == best[0] and even):
            best = (d, x)
    return best[1]


def fma(a, b, c):
    return round_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def f32(x):
    return F(float.fromhex(x)) if isinstance(x, str) else F(x)


def u01(w):
    return F((((w >> 9) << 1) | 1)) * F(2.0**-24)


def sym(w):
    return F(((((w >> 9) << 1) | 1) - 0x800000)) * F(2.0**-23)


def log_(x):
    bits = int(np.array(x, dtype=F).view(np.uint32))
    e = (bits >> 23) - 127
    mant = bits & 0x7FFFFF
    mexp = 127
    if mant > 0x3504F3:
        mexp, e = 126, e + 1
    m = np.array(mant | (mexp << 23), dtype=np.uint32).view(F)[()]
    f = m + F(-1.0)
    s = f / (f + F(2.0))
    z = s * s
    p = fma(z, f32("0x1.745d18p-4"), f32("0x1.c71c72p-4"))
    for c in ("0x1.24924ap-3", "0x1.99999ap-3", "0x1.555556p-2"):
        p = fma(z, p, f32(c))
    s2 = s * F(2.0)
    logm = fma(s2, z * p, s2)
    ef = F(e)
    return ef * f32("0x1.62ep-1") + fma(ef, f32("0x1.0bfbe8p-15"), logm)


def cos2pi(u):
    v = u + F(-0.5)
    a = -v if v < 0 else v
    if a <= F(0.125):
        br, r = 0, a
    elif a <= F(0.375):
        br, r = 1, a + F(-0.25)
    else:
        br, r = 2, a + F(-0.5)
    z = r * r
    if br == 1:
        p = fma(z, f32("-0x1.e3075p+3"), f32("0x1.507834p+5"))
        for c in ("-0x1.32d2ccp+6", "0x1.466bc6p+6", "-0x1.4abbcep+5", "0x1.921fb6p+2"):
            p = fma(z, p, f32(c))
        return r * p
    p = fma(z, f32("-0x1.a6d1f2p+4"), f32("0x1.e1f506p+5"))
    for c in ("-0x1.55d3c8p+6", "0x1.03c1fp+6", "-0x1.3bd3ccp+4"):
        p = fma(z, p, f32(c))
    c = fma(z, p, F(1.0))
    return -c if br == 0 else c


def block(seed, stream, i):
    return philox([i & M32, i >> 32, stream, 0], [seed & M32, seed >> 32])


def normal(w):
    l = log_(u01(w[0]))
    r = np.sqrt(l * F(-2.0))
    return r * cos2pi(u01(w[1]))


def main():
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    n = 1500
    stream = fnv1a("interop.noise")
    scale = F(0.0371)
    mismatches = 0
    for seed in (1, 0xDEADBEEF12345678):
        path = os.path.join(scratch, f"rng_{seed}.safetensors")
        subprocess.run([binary, "rng", path, str(n), str(seed)], check=True)
        got = load_file(path)
        for i in range(n):
            w = block(seed, stream, i)
            nv = normal(w)
            want = {
                "normal": nv,
                "uniform": u01(w[0]),
                "init_normal": scale * nv,
                "init_uniform": scale * sym(w[0]),
                "init_ones_plus_normal": fma(scale, nv, F(1.0)),
            }
            for k, v in want.items():
                g = got[k][i]
                if np.array(g).view(np.uint32) != np.array(v, dtype=F).view(np.uint32):
                    mismatches += 1
                    if mismatches <= 10:
                        print(f"seed {seed} {k}[{i}]: h3 {float(g)!r} reference {float(v)!r}")
    if mismatches:
        print(f"FAIL: {mismatches} values differ")
        sys.exit(1)
    print(f"ok: {2 * n * 5} values bit-identical")


if __name__ == "__main__":
    main()
