"""Shared helpers of the independent numpy references (h3_ref.py, m31_ref.py, compare.py).

Owns: bf16 round-to-nearest-even on float32 bit patterns, a minimal safetensors reader and
writer (numpy has no bf16, so bf16 tensors live in memory as float32 arrays whose values are
exactly representable in bf16), and the small numeric building blocks shared by both models
(fp32 GEMM with fp64 accumulation, RMSNorm, silu, softmax attention over a key set).
Only numpy and the standard library are used; nothing here depends on h3's C code.

Conventions: "bf16 array" = float32 array whose low 16 bits are zero (the result of bf16()).
Every op computes in fp32 (reductions accumulate in fp64, then round to fp32) and rounds
once to its result dtype, as the specs say.
"""
import json
import os
import struct

import numpy as np

# safetensors dtype string -> (numpy storage dtype, numpy in-memory dtype)
_ST_DTYPES = {
    "BF16": (np.uint16, np.float32),
    "F16": (np.float16, np.float32),
    "F32": (np.float32, np.float32),
    "F64": (np.float64, np.float64),
    "I32": (np.int32, np.int32),
    "I64": (np.int64, np.int64),
    "U8": (np.uint8, np.uint8),
    "I8": (np.int8, np.int8),
}


class RefError(Exception):
    """A user-caused error (bad file, bad shape, bad flag); the CLIs print it and exit 2."""


# ---------------------------------------------------------------- bf16 ----------------------
def bf16(x):
    """Round float32 values to the nearest bf16 (ties to even); returns float32 [same shape].

    NaN stays NaN (quiet, sign kept), +-inf stays inf, values past the largest bf16 finite
    round to inf, subnormals round on the same bit pattern rule (bf16 shares fp32's exponent).
    """
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) & 0xFFFF0000).astype(np.uint32)
    nan = np.isnan(a)
    if nan.any():
        r = np.where(nan, (a.view(np.uint32) & 0xFFFF0000) | 0x00400000, r).astype(np.uint32)
    return r.view(np.float32).reshape(a.shape)


def bf16_bits(x):
    """uint16 bit patterns of bf16(x)."""
    return (bf16(x).view(np.uint32) >> 16).astype(np.uint16)


def bf16_from_bits(b):
    """float32 values of uint16 bf16 bit patterns."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32(x):
    return np.asarray(x, dtype=np.float32)


# ---------------------------------------------------------- safetensors ---------------------
def st_read(path):
    """Read a safetensors file -> {name: (array, dtype_str)}; bf16/f16 come back as float32."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise RefError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) < 8:
        raise RefError(f"{path}: too short for a safetensors file (need an 8-byte header length)")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise RefError(f"{path}: header length {hlen} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RefError(f"{path}: header is not valid JSON: {e}") from None
    data = raw[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info.get("dtype")
        if dt not in _ST_DTYPES:
            raise RefError(f"{path}: tensor '{name}': dtype {dt} not supported here")
        store, _ = _ST_DTYPES[dt]
        shape = [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if e - b != n * np.dtype(store).itemsize or e > len(data):
            raise RefError(f"{path}: tensor '{name}': offsets [{b}, {e}) do not match shape {shape}")
        arr = np.frombuffer(data[b:e], dtype=np.dtype(store).newbyteorder("<")).reshape(shape)
        if dt == "BF16":
            arr = bf16_from_bits(arr)
        elif dt == "F16":
            arr = arr.astype(np.float32)
        else:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        out[name] = (np.array(arr), dt)
    return out


def st_write(path, tensors):
    """Write {name: (array, dtype_str)} as safetensors (names sorted, 8-byte aligned header).

    bf16 arrays are rounded with bf16() first (a no-op for values already rounded). The file is
    written to a temporary name and renamed, so a failed run never leaves a partial output.
    """
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        arr, dt = tensors[name]
        store, _ = _ST_DTYPES[dt]
        a = np.asarray(arr)
        buf = (bf16_bits(a) if dt == "BF16" else a.astype(np.dtype(store).newbyteorder("<"))).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(buf)]}
        blobs.append(buf)
        off += len(buf)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise RefError(f"{path}: cannot write: {e.strerror}") from None


def need(tensors, name, shape, where, dtypes=None):
    """Fetch tensor `name` from a st_read dict, checking its shape (and dtype when given)."""
    if name not in tensors:
        raise RefError(f"{where}: missing tensor '{name}' (expected shape {list(shape)})")
    arr, dt = tensors[name]
    if list(arr.shape) != list(shape):
        raise RefError(f"{where}: tensor '{name}' has shape {list(arr.shape)}, expected {list(shape)}")
    if dtypes is not None and dt not in dtypes:
        raise RefError(f"{where}: tensor '{name}' has dtype {dt}, expected one of {dtypes}")
    return arr


def need_rows(tensors, name, tail, where, dtypes=None):
    """Like need(), for a tensor with any leading row count: shape [N, *tail]."""
    if name not in tensors:
        raise RefError(f"{where}: missing tensor '{name}' (expected shape [N{''.join(', %d' % t for t in tail)}])")
    return need(tensors, name, [tensors[name][0].shape[0] if tensors[name][0].ndim else -1] + list(tail),
                where, dtypes)


# ---------------------------------------------------------------- math ----------------------
# Reductions follow the specs' reference order: fp32 accumulation, ascending index, one add at a
# time (a C loop `acc += x[k] * w[k]`). Products of two bf16 values are exact in fp32, so for
# bf16 operands the result does not depend on FMA contraction either.
def seqsum(x, axis=-1):
    """fp32 sum along `axis`, ascending, one rounding per add."""
    x = np.asarray(x, np.float32)
    if x.shape[axis] == 0:
        return np.zeros(np.delete(x.shape, axis % x.ndim), np.float32)
    return np.add.accumulate(x, axis=axis, dtype=np.float32).take(-1, axis=axis)


def dot_f32(x, w):
    """x[.., K] · w[N, K]ᵀ, fp32 accumulation over k ascending -> f32[.., N]."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    acc = np.zeros(x.shape[:-1] + (w.shape[0],), np.float32)
    for k in range(x.shape[-1]):
        acc += x[..., k, None] * w[:, k]
    return acc


def linear(x, w, b=None, out_bf16=True):
    """y = x·wᵀ (+ b): fp32 accumulation, bias added in fp32, one rounding (bf16 unless
    out_bf16 is False, then the fp32 value)."""
    y = dot_f32(x, w)
    if b is not None:
        y = (y + np.asarray(b, np.float32)).astype(np.float32)
    return bf16(y) if out_bf16 else y


def rms_scale(x, eps):
    """r = 1/sqrt(sum_k(x_k²)/D + eps) over the last axis (fp32, k ascending) -> f32[.., 1]."""
    x = np.asarray(x, np.float32)
    ms = (seqsum(x * x) / np.float32(x.shape[-1])).astype(np.float32)
    return (np.float32(1.0) / np.sqrt(ms + np.float32(eps)))[..., None].astype(np.float32)


def rms_norm(x, w, eps, offset=0.0):
    """bf16((x·r)·(w + offset)) with r from rms_scale; offset 1.0 gives the Gemma norm."""
    x = np.asarray(x, np.float32)
    ww = (np.asarray(w, np.float32) + np.float32(offset)).astype(np.float32)
    return bf16((x * rms_scale(x, eps)) * ww)


def sigmoid(x):
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore"):
        return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32)


def silu(x):
    x = np.asarray(x, np.float32)
    return (x * sigmoid(x)).astype(np.float32)


def attention(q, k, v, mask, scale):
    """Masked softmax attention, per head: q [H, Tq, D], k/v [H, Tk, D] (bf16 arrays),
    mask bool [H or 1, Tq, Tk] (True = the key is visible; every row needs one) -> bf16 [H, Tq, D].

    Logits fp32 (dot over D ascending, then ×scale); softmax fp32 with the max over visible keys
    subtracted; masked keys get p = 0 exactly, so they add nothing to the ascending sums; P·V
    accumulated in fp32 over keys ascending; output rounded to bf16 once.
    """
    q, k, v = (np.asarray(a, np.float32) for a in (q, k, v))
    s = np.zeros(q.shape[:-1] + (k.shape[-2],), np.float32)
    for dd in range(q.shape[-1]):
        s += q[..., :, dd, None] * k[..., None, :, dd]
    s = (s * np.float32(scale)).astype(np.float32)
    s = np.where(mask, s, np.float32(-np.inf))
    s = s - np.max(s, axis=-1, keepdims=True)
    e = np.where(mask, np.exp(s), np.float32(0.0)).astype(np.float32)
    p = (e / seqsum(e)[..., None]).astype(np.float32)
    o = np.zeros(q.shape, np.float32)
    for j in range(k.shape[-2]):
        o += p[..., :, j, None] * v[..., None, j, :]
    return bf16(o)


def parse_sets(items, cfg, where):
    """Apply `--set key=value` overrides (ints or floats) to a config dict copy."""
    cfg = dict(cfg)
    for it in items or []:
        if "=" not in it:
            raise RefError(f"{where}: --set '{it}': expected key=value")
        k, v = it.split("=", 1)
        if k not in cfg:
            raise RefError(f"{where}: --set '{k}': unknown config key (known: {', '.join(sorted(cfg))})")
        try:
            num = float(v)
        except ValueError:
            raise RefError(f"{where}: --set {k}={v}: not a number") from None
        if isinstance(cfg[k], int) and num != int(num):
            raise RefError(f"{where}: --set {k}={v}: '{k}' takes an integer")
        cfg[k] = int(num) if isinstance(cfg[k], int) else num
    return cfg
