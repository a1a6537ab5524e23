#!/usr/bin/env python3
"""error_format.py: every error in the golden corpora (tests/cli/cases/*.expected: h3c's
stderr for bad command lines; tests/diagnostics/*.expected: the front end's diagnostics for
broken programs) has the one format the README promises: `FILE:LINE:COL: error: MESSAGE`
when it points into a file, `FILE: error: MESSAGE` for a whole file, `TOOL: error: MESSAGE`
otherwise (TOOL h3c or h3exec), each followed by a `hint:` line.
  error_format.py SOURCE_DIR"""
import glob
import os
import re
import sys

FORMAT = re.compile(r"^((h3c|h3exec): error: \S|[^ :][^:]*:\d+:\d+: error: \S|[^ :][^:]*: error: \S)")


def main():
    src = sys.argv[1]
    files = sorted(glob.glob(os.path.join(src, "tests/cli/cases/*.expected")) +
                   glob.glob(os.path.join(src, "tests/diagnostics/*.expected")))
    errors, bad, hinted = 0, [], 0
    for f in files:
        lines = open(f, encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            if "error:" not in line or line.startswith((" ", "hint:")):
                continue
            errors += 1
            if not FORMAT.match(line):
                bad.append(f"{os.path.relpath(f, src)}:{i + 1}: {line}")
            rest = lines[i + 1:i + 6]
            end = next((k for k, r in enumerate(rest) if "error:" in r and not r.startswith((" ", "hint:"))),
                       len(rest))
            if any(r.startswith("hint:") for r in rest[:end]):
                hinted += 1
            else:
                bad.append(f"{os.path.relpath(f, src)}:{i + 1}: no hint: {line}")
    for b in bad:
        print("not in the one error format:", b, file=sys.stderr)
    print(f"error_format: {errors} errors in {len(files)} files, {hinted} with a hint, {len(bad)} not in the "
          f"format")
    return 1 if bad or errors == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
