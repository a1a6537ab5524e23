#!/bin/sh
# pass_docs.sh [--update] H3C DOC.md...: the generated tables of the docs agree with the pass
# registry. Each DOC holds one or more blocks
#   <!-- begin `h3c passes ARGS` (generated: sh tests/passes/pass_docs.sh --update ...) -->
#   ...the output of `h3c passes ARGS`...
#   <!-- end `h3c passes ARGS` -->
# and fails (with a diff and the command that regenerates them) when a block differs from
# what the h3c binary prints now. --update (or H3_UPDATE_DOCS=1) rewrites the blocks instead.
set -u
update=${H3_UPDATE_DOCS:-0}
if [ "${1:-}" = --update ]; then update=1; shift; fi
if [ $# -lt 2 ]; then
  echo "usage: sh tests/passes/pass_docs.sh [--update] H3C DOC.md..." >&2
  exit 2
fi
h3c=$1; shift
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
rc=0
for doc in "$@"; do
  # copy the doc, replacing every block's body by the command's output
  if ! awk -v h3c="$h3c" '
    function fail(msg) { printf "%s:%d: error: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1; exit 1 }
    /^<!-- begin `h3c passes[^`]*`/ {
      if (args != "") fail("a generated block starts inside another one")
      print; n++
      args = $0; sub(/^<!-- begin `h3c passes/, "", args); sub(/`.*/, "", args)
      if (args == "") args = " "
      fflush()
      if (system(h3c " passes" args) != 0) fail("`h3c passes" args "` failed")
      next
    }
    /^<!-- end `h3c passes[^`]*`/ { if (args == "") fail("an end marker without a begin"); args = ""; print; next }
    args == "" { print }
    END {
      if (bad) exit 1
      if (args != "") fail("a generated block has no end marker")
      if (n == 0) fail("no generated block (<!-- begin `h3c passes ...` -->)")
    }' "$doc" >"$tmp"; then
    rc=1
    continue
  fi
  if cmp -s "$doc" "$tmp"; then continue; fi
  if [ "$update" = 1 ]; then
    cp "$tmp" "$doc" && echo "pass_docs.sh: rewrote the generated tables of $doc" >&2
  else
    diff -u "$doc" "$tmp" >&2
    echo "$doc: error: its pass tables differ from the registry (h3c passes)" >&2
    echo "hint: regenerate them: sh tests/passes/pass_docs.sh --update $h3c $*" >&2
    rc=1
  fi
done
exit $rc
