#!/usr/bin/env python3
"""stream_cli.py: h3exec --device-memory on tiny H3 plans on the CPU backend (the ring
emulated with synchronous copies, docs/streaming.md). Per plan (bf16 with 7 layers,
--int8 on dims 256, Spectrum, Cache-DiT): the outputs at the smallest budget (read from
the error of a budget of 1 byte, which must fail with exit 1 and name it), at budgets of
1 .. 4 more blocks, and at 1 TiB (streaming off) are bitwise the resident run's; the report
gives the plan. Also H3_DEVICE_MEMORY and bad sizes (exit 2).

Usage: stream_cli.py --h3c H3C --h3exec H3EXEC --source SRC --work DIR
Standard library only."""
import argparse
import os
import re
import subprocess
import sys

failures = []


def run(cmd, env=None):
    full_env = dict(os.environ, **env) if env else None
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, env=full_env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def read(path):
    with open(path, "rb") as f:
        return f.read()


PLANS = {
    "bf16": ["--set", "layers=7", "--set", "steps=3"],
    "int8": ["--set", "dim=256", "--set", "heads=2", "--set", "head_dim=128", "--set", "ffn=256",
             "--set", "text_dim=256", "--set", "layers=5", "--set", "steps=2",
             "--int8=rotate=256,max_rows=24,min_split_n=0"],
    "spectrum": ["--set", "layers=5", "--spectrum=11:5:1.0"],
    "cachedit": ["--set", "layers=5", "--quality", "high"],
}


def one_plan(a, name, sets):
    plan = os.path.join(a.work, name + ".plan")
    rc, _, err = run([a.h3c, "compile", os.path.join(a.source, "models", "minimax_h3.g"), "--config",
                      "tiny"] + sets + ["-o", plan])
    if rc != 0:
        sys.exit(f"cannot compile {name}: {err}")
    base = [a.h3exec, plan, "--backend", "cpu", "--seed", "3"]
    ref = os.path.join(a.work, name + "_resident.safetensors")
    rc, _, err = run(base + ["--out", ref])
    check(rc == 0, f"{name}: resident run failed: {err}")
    rc, _, err = run(base + ["--device-memory", "1", "--out", os.path.join(a.work, "none.safetensors")])
    m = re.search(r"give --device-memory (\d+) \(", err)
    check(rc == 1 and m and "cannot hold what must stay resident" in err,
          f"{name}: a 1-byte budget: rc {rc}, {err}")
    check(not os.path.exists(os.path.join(a.work, "none.safetensors")), f"{name}: output written")
    if not m:
        return
    smallest = int(m.group(1))
    rc, out, err = run(base + ["--device-memory", str(smallest), "--out", ref + ".s"])
    check(rc == 0 and read(ref) == read(ref + ".s"), f"{name}: smallest budget {smallest}: rc {rc} {err}")
    blk = re.search(r"ring 1 x .*smallest budget .* \((\d+) bytes\)", out)
    check(blk and int(blk.group(1)) == smallest, f"{name}: the report names the smallest budget: {out}")
    check(re.search(r"streamed         : .* per step \(\d+ blocks\); copy", out) is not None,
          f"{name}: no 'streamed' line: {out}")
    slots_seen = set()
    for extra in range(1, 5):
        budget = smallest + extra * (smallest // 3)
        rc, out, err = run(base + ["--device-memory", str(budget), "--out", ref + ".s"])
        check(rc == 0 and read(ref) == read(ref + ".s"), f"{name}: budget {budget}: rc {rc} {err}")
        s = re.search(r"ring (\d) x", out)
        if s:
            slots_seen.add(int(s.group(1)))
    check(slots_seen, f"{name}: no budget streamed")
    rc, out, err = run(base + ["--device-memory", "1TiB", "--out", ref + ".s"])
    check(rc == 0 and read(ref) == read(ref + ".s") and "streaming        : off" in out,
          f"{name}: 1 TiB: rc {rc} {err}")
    rc, out, err = run(base + ["--out", ref + ".s"], env={"H3_DEVICE_MEMORY": str(smallest)})
    check(rc == 0 and read(ref) == read(ref + ".s") and "ring 1 x" in out,
          f"{name}: H3_DEVICE_MEMORY: rc {rc} {err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--h3c", required=True)
    ap.add_argument("--h3exec", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    for name, sets in PLANS.items():
        one_plan(a, name, sets)
    plan = os.path.join(a.work, "bf16.plan")
    for bad in ["24XB", "-3", "0", "GiB"]:
        rc, _, err = run([a.h3exec, plan, "--backend", "cpu", "--device-memory", bad])
        check(rc == 2 and "--device-memory expects a size" in err, f"--device-memory {bad}: rc {rc} {err}")
    rc, _, err = run([a.h3exec, plan, "--backend", "cpu"], env={"H3_DEVICE_MEMORY": "lots"})
    check(rc == 2 and "H3_DEVICE_MEMORY expects a size" in err, f"H3_DEVICE_MEMORY=lots: rc {rc} {err}")
    if failures:
        print(f"stream_cli: {len(failures)} failed", file=sys.stderr)
        return 1
    print("stream_cli: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
