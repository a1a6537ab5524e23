"""stfile.py: a minimal safetensors reader/writer for the h3exec tests (standard library only,
so the error tests run without numpy). Tensors are (dtype string, shape list, raw bytes)."""
import json
import struct

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I8": 1, "I32": 4, "I64": 8, "U8": 1}


def write(path, tensors, header_patch=None):
    """tensors: {name: (dtype, shape, bytes)}; header_patch(dict) may edit the header."""
    header, data, off = {}, b"", 0
    for name in sorted(tensors):
        dt, shape, raw = tensors[name]
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    if header_patch:
        header_patch(header)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], blob[8 + n + b:8 + n + end])
    return out


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def i32(values):
    return struct.pack("<%di" % len(values), *values)


def bf16(values):
    raw = struct.pack("<%df" % len(values), *values)
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))  # truncation is fine for tests
