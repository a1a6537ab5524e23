#!/usr/bin/env bash
# m31_serve_peer_check.sh: is the PyTorch serving peer (bench/m31_serve_peer.py) computing the
# model? 64 requests (ISL 2048, 24 new tokens) served compiled (CUDA graphs) and eager: the
# token diversity of each and how many requests agree. Run on the GPU machine with OUT set.
# peer sanity: compiled-graph serve vs eager serve tokens, diversity
set -u
P=bench/m31_serve_peer.py
python3 $P make-requests --n 64 --isl 2048 --osl 24 --seed 5 > $OUT/pr.jsonl
timeout 150 python3 $P serve --requests $OUT/pr.jsonl --concurrency 64 --config small --device cuda --out $OUT/peer_c.jsonl > $OUT/peer_c.json 2>$OUT/peer_c.err; echo "peer compiled rc=$?"
timeout 150 python3 $P serve --requests $OUT/pr.jsonl --concurrency 64 --config small --device cuda --no-compile --out $OUT/peer_e.jsonl > $OUT/peer_e.json 2>$OUT/peer_e.err; echo "peer eager rc=$?"
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
def load(n):
    try: return {r["id"]: r["tokens"] for r in map(json.loads, open(f"{out}/{n}"))}
    except Exception as e: print(n, e); return {}
c, e = load("peer_c.jsonl"), load("peer_e.jsonl")
for name, d in (("compiled", c), ("eager", e)):
    seqs = list(d.values())
    print(name, "requests", len(seqs), "distinct sequences", len({tuple(s) for s in seqs}),
          "distinct tokens at step 5:", len({s[5] for s in seqs if len(s) > 5}),
          "distinct tokens overall:", len({t for s in seqs for t in s}))
same = sum(c[i] == e.get(i) for i in c)
print("compiled == eager for", same, "of", len(c))
for n in ("peer_c.json", "peer_e.json"):
    try: s = json.load(open(f"{out}/{n}")); print(n, s.get("output_tok_s"), s.get("itl_ms"))
    except Exception as ex: print(n, ex)
PY
tail -3 $OUT/peer_c.err
