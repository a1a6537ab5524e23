#!/usr/bin/env python3
"""interop.py: h3's safetensors files against Python's safetensors library, both ways.

usage: interop.py IO_INTEROP_BINARY SCRATCH_DIR

1. `io_interop write` writes a file; safetensors.numpy.load_file reads it and every tensor
   must equal the values computed here (same formulas as tests/io/io_test.h io_hash and
   io_interop.c make_data; f16 through numpy's own float16 rounding). BF16 (which numpy
   lacks) is checked through safe_open's slice metadata and the raw bytes against a bf16
   rounding done here independently.
2. safetensors.numpy.save_file writes the same tensors (bf16 excepted); `io_interop read`
   must accept the file and find every byte.
Exits 77 (skipped) when numpy or safetensors are not installed.
"""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # the CI installs them; a bare machine skips
    print(f"skipped: {e}")
    sys.exit(77)

M32 = 0xFFFFFFFF


def io_hash(i, salt):
    h = (i * 0x9E3779B1 + salt * 0x85EBCA77 + 1) & M32
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & M32
    h ^= h >> 12
    return h


def io_value(i, salt):
    return np.float32(((io_hash(i, salt) >> 8) - 0x800000) * 2.0**-20)


def bf16_bits(x):
    """Nearest bf16 of float32 x, ties to even, from the two candidates (no bit tricks)."""
    b = int(np.float32(x).view(np.uint32))
    lo = b & 0xFFFF0000
    hi = lo + 0x10000
    flo = float(np.uint32(lo).view(np.float32))
    fhi = float(np.uint32(hi).view(np.float32))
    dl, dh = abs(float(x) - flo), abs(fhi - float(x))
    if dl < dh or (dl == dh and not (lo >> 16) & 1):
        return lo >> 16
    return hi >> 16


SPECS = [  # name, numpy dtype, shape, salt
    ("f32", np.float32, (3, 5), 1),
    ("f64", np.float64, (7,), 2),
    ("f16", np.float16, (4, 4), 3),
    ("i8", np.int8, (9,), 5),
    ("i32", np.int32, (2, 3), 6),
    ("i64", np.int64, (5,), 7),
    ("u8", np.uint8, (11,), 8),
    ("scalar", np.float32, (), 9),
    ("empty", np.float32, (0, 3), 10),
]


def expected(name, dtype, shape, salt):
    n = int(np.prod(shape)) if shape else 1
    vals = []
    for i in range(n):
        h = io_hash(i, salt)
        v = io_value(i, salt)
        if name in ("f32", "scalar", "empty"):
            vals.append(v)
        elif name == "f64":
            vals.append(float(v) * 1.5)
        elif name == "f16":
            vals.append(np.float16(v * np.float32(0.125)))
        elif name == "i8":
            vals.append(np.uint8(h & 0xFF).view(np.int8))
        elif name == "i32":
            vals.append(np.uint32(h).view(np.int32))
        elif name == "i64":
            vals.append(np.uint64(((h << 31) ^ i) & 0xFFFFFFFFFFFFFFFF).view(np.int64))
        elif name == "u8":
            vals.append(np.uint8(h >> 24))
    return np.array(vals, dtype=dtype).reshape(shape)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_h3_written(binary, path):
    subprocess.run([binary, "write", path], check=True)
    # load_file would reject the bf16 tensor (numpy has no bf16): read through safe_open
    with safe_open(path, framework="np") as f:
        keys = sorted(f.keys())
        if keys != sorted([s[0] for s in SPECS] + ["bf16"]):
            fail(f"keys {keys}")
        if f.metadata() != {"writer": "h3"}:
            fail(f"metadata {f.metadata()}")
        got = {k: f.get_tensor(k) for k in keys if k != "bf16"}
        sl = f.get_slice("bf16")
        if sl.get_dtype() != "BF16" or list(sl.get_shape()) != [6]:
            fail(f"bf16 slice {sl.get_dtype()} {sl.get_shape()}")
    for name, dtype, shape, salt in SPECS:
        want = expected(name, dtype, shape, salt)
        g = got[name]
        if g.dtype != want.dtype or g.shape != want.shape or g.tobytes() != want.tobytes():
            fail(f"tensor {name}: {g!r} != {want!r}")
    # bf16 from the raw bytes: the header says where it is
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    if n % 8 or (8 + n) % 8:
        fail(f"header length {n} is not a multiple of 8")
    hdr = json.loads(raw[8 : 8 + n])
    b, e = hdr["bf16"]["data_offsets"]
    bits = struct.unpack("<6H", raw[8 + n + b : 8 + n + e])
    want = [bf16_bits(io_value(i, 4) * np.float32(1.37)) for i in range(6)]
    if list(bits) != want:
        fail(f"bf16 bits {bits} != {want}")
    print(f"h3 -> python: {len(SPECS) + 1} tensors equal")


def check_python_written(binary, path):
    tensors = {name: expected(name, dt, shape, salt) for name, dt, shape, salt in SPECS}
    save_file(tensors, path, metadata={"writer": "python"})
    again = load_file(path)
    assert all(again[k].tobytes() == v.tobytes() for k, v in tensors.items())
    r = subprocess.run([binary, "read", path])
    if r.returncode != 0:
        fail("h3 could not read the file written by Python")
    print(f"python -> h3: {len(SPECS)} tensors equal")


def main():
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    check_h3_written(binary, os.path.join(scratch, "from_h3.safetensors"))
    check_python_written(binary, os.path.join(scratch, "from_python.safetensors"))
    # a file written by h3 without bf16 loads with load_file directly
    subprocess.run([binary, "rng", os.path.join(scratch, "rng.safetensors"), "16", "1"], check=True)
    t = load_file(os.path.join(scratch, "rng.safetensors"))
    if sorted(t) != ["init_normal", "init_ones_plus_normal", "init_uniform", "normal", "uniform"]:
        fail(f"rng file keys {sorted(t)}")
    print("ok")


if __name__ == "__main__":
    main()
