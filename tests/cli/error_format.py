#!/usr/bin/env python3
"""error_format.py: every error in the golden corpora (tests/cli/cases/*.expected: h3c's
stderr for bad command lines; tests/diagnostics/*.expected: the front end's diagnostics for
broken programs) has the one format the README promises: `FILE:LINE:COL: error: MESSAGE`
when it points into a file, `FILE: error: MESSAGE` for a whole file, `TOOL: error: MESSAGE`
otherwise (TOOL h3c or h3exec), each followed by a `hint:` line.
  error_format.py SOURCE_DIR
tests/exec's drivers import unformatted() to hold h3exec's stderr to the same rule."""
import glob
import os
import re
import sys

FORMAT = re.compile(r"^((h3c|h3exec): error: \S|[^ :][^:]*:\d+:\d+: error: \S|[^ :][^:]*: error: \S)")


def unformatted(text):
    """(number of errors in text, the error lines not in the format or without a hint, each as
    "LINE: [no hint: ]TEXT")."""
    lines = text.split("\n")
    errors, bad = 0, []
    for i, line in enumerate(lines):
        if "error:" not in line or line.startswith((" ", "hint:")):
            continue
        errors += 1
        if not FORMAT.match(line):
            bad.append(f"{i + 1}: {line}")
        rest = lines[i + 1:i + 6]
        end = next((k for k, r in enumerate(rest) if "error:" in r and not r.startswith((" ", "hint:"))),
                   len(rest))
        if not any(r.startswith("hint:") for r in rest[:end]):
            bad.append(f"{i + 1}: no hint: {line}")
    return errors, bad


def main():
    src = sys.argv[1]
    files = sorted(glob.glob(os.path.join(src, "tests/cli/cases/*.expected")) +
                   glob.glob(os.path.join(src, "tests/diagnostics/*.expected")))
    errors, bad = 0, []
    for f in files:
        n, b = unformatted(open(f, encoding="utf-8").read())
        errors += n
        bad += [f"{os.path.relpath(f, src)}:{x}" for x in b]
    for b in bad:
        print("not in the one error format:", b, file=sys.stderr)
    print(f"error_format: {errors} errors in {len(files)} files, {len(bad)} not in the format or without a hint")
    return 1 if bad or errors == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
