#!/usr/bin/env python3
"""m31_floor.py: the bytes a MiniMax-M3.1 decode step or DSpark round must move, and the card's
copy bandwidth that turns them into a floor in ms (issue 19: "at batch 1 the round within 1.2 x
the bandwidth floor of the bytes it must read ... report it, and the draft's share").

    python3 bench/m31_floor.py copy                      the device-to-device copy rate (PyTorch,
                                                         CUDA): one JSON line {"gbps": ...}
    python3 bench/m31_floor.py round [--config small] [--set KEY=V ...] [--sequences C]
                                     [--context L] [--draft-quant nvfp4|bf16] [--gbps G]
                                     [--experts-touched ROWS=MEAN ...]
                                                         one JSON line: the round's bytes by part
                                                         (and ms at G GB/s)

Dimensions come from the `config` block of models/minimax_m3_1.g with h3c's --set overrides
(e.g. --set experts=128). Bytes (bf16 weights 2 B an element, the router's fp32 4 B; NVFP4
0.5625 B: a 4-bit code and one e4m3 scale per 16 elements), each read once where a part reads
it, as an implementation without caches between kernels must:
  draft   (docs/models/minimax_m3_1.md §5.3 steps 1-4, C sequences of gamma rows) the draft
          layer (qkv_proj bf16; o_proj, gate_up_proj, down_proj NVFP4 or bf16), the target
          lm_head for the base logits, those fp32 logits written and read again by the Markov
          head, the Markov head's w2 once per chain step (z_k = base_k + w2 w1[prev]: each step
          needs the previous step's token), the draft K/V of every context position;
  verify  the target over C (gamma + 1) rows (a plain extend): every dense weight (attention,
          indexer, router, dense MLP, shared expert), the routed experts a sparse layer touches
          (measured: h3exec --moe-stats' mean for that row count, given as --experts-touched
          ROWS=MEAN; else the expectation if each row picked top_k of E uniformly, E (1 - (1 -
          top_k / E)^rows), which random weights need not follow), final norm + lm_head,
          the K/V of every key on the dense layers, of the selected blocks on the sparse ones,
          and IK of every key;
  commit  (§5.3 step 7) the draft's fc (NVFP4 or bf16) and the k / v rows of its qkv_proj.
Plain decode is `verify` at one row a sequence with no draft, the floor bench/m31_peer.py uses
(there with min(E, rows top_k) experts: equal at one row)."""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "models", "minimax_m3_1.g")
NVFP4_BYTES = 0.5625


def config(name, sets):
    """The `config NAME { ... }` block of the model as ints, with KEY=V overrides."""
    text = open(MODEL).read()
    m = re.search(r"^config " + re.escape(name) + r" \{(.*?)^\}", text, re.S | re.M)
    if not m:
        raise SystemExit(f"m31_floor.py: no config {name!r} in {MODEL}")
    c = {k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+)", m.group(1))}
    for s in sets:
        k, _, v = s.partition("=")
        if k not in c or not re.fullmatch(r"-?\d+", v):
            raise SystemExit(f"m31_floor.py: --set {s}: not KEY=INT of config {name}")
        c[k] = int(v)
    return c


def expected_experts(c, rows):
    E, k = c["experts"], c["top_k"]
    return E * (1 - (1 - k / E) ** rows)


def layer_bytes(c):
    """Weights by role (bytes): attention of one layer, dense MLP, one sparse layer's dense part
    (indexer, router, shared expert), one routed expert, lm_head + final norm."""
    H, d, nq, nkv = c["dim"], c["head_dim"], c["heads"], c["kv_heads"]
    attn = 2 * ((nq * d + 2 * nkv * d) * H + H * nq * d + 2 * H + 2 * d)
    sparse = (2 * (c["index_heads"] + 1) * c["index_dim"] * H + 4 * c["experts"] * (H + 1)
              + 2 * 3 * H * c["shared_ffn"])
    return dict(attn=attn, dense_mlp=2 * 3 * H * c["mlp_ffn"], sparse=sparse,
                expert=2 * 3 * H * c["expert_ffn"], lm_head=2 * (c["vocab"] * H + H))


def target_bytes(c, seqs, rows_per_seq, context, touched):
    """The target over seqs x rows_per_seq rows at positions context .. (plain decode: 1 row);
    touched: measured experts per sparse layer by row count."""
    w, n_sparse = layer_bytes(c), c["n_layers"] - c["n_dense"]
    rows = seqs * rows_per_seq
    keys = context + rows_per_seq
    kv_tok = 2 * 2 * c["kv_heads"] * c["head_dim"]
    sel = min(c["topk_blocks"] * c["sparse_block"], keys)
    experts = touched.get(rows, expected_experts(c, rows))
    weights = (c["n_layers"] * w["attn"] + c["n_dense"] * w["dense_mlp"]
               + n_sparse * (w["sparse"] + experts * w["expert"]) + w["lm_head"] + rows * 2 * c["dim"])
    cache = seqs * (c["n_dense"] * keys * kv_tok + n_sparse * (sel * kv_tok + keys * 2 * c["index_dim"]))
    return weights + cache, experts


def round_bytes(c, seqs, context, quant, touched):
    H, d, nq, nkv, g = c["dim"], c["head_dim"], c["heads"], c["kv_heads"], c["gamma"]
    q = NVFP4_BYTES if quant == "nvfp4" else 2
    w = layer_bytes(c)
    draft = (2 * (nq * d + 2 * nkv * d) * H + q * (H * nq * d + 3 * H * c["draft_ffn"])
             + w["lm_head"] + 2 * 4 * seqs * g * c["vocab"] + g * 2 * c["vocab"] * c["markov_rank"]
             + seqs * context * 2 * 2 * nkv * d)
    verify, experts = target_bytes(c, seqs, g + 1, context, touched)
    commit = q * H * 3 * H + 2 * 2 * nkv * d * H
    plain, plain_experts = target_bytes(c, seqs, 1, context, touched)
    return dict(draft=draft, verify=verify, commit=commit, round=draft + verify + commit,
                verify_experts=experts, plain_step=plain, plain_experts=plain_experts)


def copy_gbps():
    try:
        import torch  # only here: the byte counts need no PyTorch
    except ImportError:
        raise SystemExit("m31_floor.py copy: needs PyTorch (with CUDA) to time the copy")
    if not torch.cuda.is_available():
        raise SystemExit("m31_floor.py copy: PyTorch sees no CUDA device")
    n = 2 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return 2 * n / times[len(times) // 2] / 1e6  # read + write bytes over the median ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["copy", "round"])
    ap.add_argument("--config", default="small")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=V")
    ap.add_argument("--sequences", type=int, default=1)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--draft-quant", choices=["nvfp4", "bf16"], default="nvfp4")
    ap.add_argument("--gbps", type=float, help="the copy rate (read + write GB/s) for ms figures")
    ap.add_argument("--experts-touched", action="append", default=[], metavar="ROWS=MEAN",
                    help="measured distinct experts per sparse layer of a call of ROWS rows")
    a = ap.parse_args()
    if a.mode == "copy":
        print(json.dumps({"gbps": round(copy_gbps(), 1)}))
        return 0
    if a.sequences < 1 or a.context < 0:
        ap.error("--sequences >= 1 and --context >= 0")
    touched = {}
    for t in a.experts_touched:
        rows, _, mean = t.partition("=")
        try:
            touched[int(rows)] = float(mean)
        except ValueError:
            ap.error(f"--experts-touched {t}: ROWS=MEAN, e.g. 9=31.4")
    c = config(a.config, a.set)
    r = round_bytes(c, a.sequences, a.context, a.draft_quant, touched)
    g1 = a.sequences * (c["gamma"] + 1)
    out = dict(config=a.config, sets=a.set, sequences=a.sequences, context=a.context,
               draft_quant=a.draft_quant, experts_source={
                   "verify": "measured" if g1 in touched else "uniform",
                   "plain": "measured" if a.sequences in touched else "uniform"},
               **{k: round(v, 1) for k, v in r.items()})
    if a.gbps:
        out.update({f"{k}_ms": round(r[k] / a.gbps / 1e6, 4)
                    for k in ("draft", "verify", "commit", "round", "plain_step")})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
