#!/usr/bin/env python3
"""cuda_faults.py: faults on the GPU are reported, not crashed on (needs a GPU).

    python3 tests/gpu/cuda_faults.py H3EXEC H3_PLAN M31_PLAN

Each case runs h3exec on the cuda backend with one test switch and checks the exit status
(1, never a signal), that no --out file was written and that stderr holds the promised
pieces:
  H3_FAULT_LAUNCH=N   the Nth launch of an own kernel fails: the kernel is named;
  H3_FAULT_KERNEL=N   a trapping kernel runs in its place (a real device fault, reported by a
                      later call): "a kernel faulted", the last op queued, the H3_CUDA_SYNC hint;
                      with H3_CUDA_SYNC=1 (and N past the launches that make the weights) the
                      op that faulted is named as such;
  H3_FAULT_ALLOC=N    the Nth device allocation of the runtime fails: what it was for and the
                      plan's memory figures.
Prints one line per case; exits 1 when one fails."""
import os
import subprocess
import sys
import tempfile


def main():
    h3exec, h3_plan, m31_plan = sys.argv[1:4]
    work = tempfile.mkdtemp()
    cases = [
        ("launch fault, H3 tiny", h3_plan, {"H3_FAULT_LAUNCH": "3"},
         ["injected by H3_FAULT_LAUNCH=3", "kernel h3"]),
        ("launch fault, M3.1 tiny (inside graph capture)", m31_plan, {"H3_FAULT_LAUNCH": "40"},
         ["injected by H3_FAULT_LAUNCH=40"]),
        ("kernel fault, H3 tiny", h3_plan, {"H3_FAULT_KERNEL": "5"},
         ["a kernel faulted", "the last op queued", "H3_CUDA_SYNC=1 waits after every op"]),
        ("kernel fault, M3.1 tiny", m31_plan, {"H3_FAULT_KERNEL": "40"},
         ["a kernel faulted", "the last op queued"]),
        ("kernel fault named with H3_CUDA_SYNC=1", m31_plan, {"H3_FAULT_KERNEL": "600", "H3_CUDA_SYNC": "1"},
         ["faulted (cudaError", "found by H3_CUDA_SYNC=1", "in kernel h3cu_trap", "m31_tiny.plan:"]),
        ("allocation failure", h3_plan, {"H3_FAULT_ALLOC": "2"}, ["out of cuda memory", "the plan needs"]),
    ]
    failed = 0
    for name, plan, env, pieces in cases:
        out = os.path.join(work, "out.safetensors")
        p = subprocess.run([h3exec, plan, "--backend", "cuda", "--out", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300, env=dict(os.environ, **env))
        problems = [f"exit {p.returncode}, want 1"] if p.returncode != 1 else []
        problems += [f"stderr lacks {x!r}" for x in pieces if x not in p.stderr]
        if os.path.exists(out):
            problems.append("an output file was written")
            os.remove(out)
        failed += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name}" + (f": {'; '.join(problems)}\n{p.stderr[-1500:]}"
                                                             if problems else f": {p.stderr.splitlines()[0][:160]}"))
    print(f"cuda_faults: {len(cases) - failed} of {len(cases)} cases as promised")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
