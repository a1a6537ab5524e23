#!/bin/sh
# run_case.sh H3C CASE.cmd: runs `h3c ARGS` (ARGS = the case file's one line, with @SRC@
# replaced by the source tree and @TMP@ by a fresh folder) and compares its stderr (the fresh
# folder written back as @TMP@) plus a final "exit: N" line with CASE.expected, byte for
# byte. H3_UPDATE_GOLDEN=1 rewrites it.
set -u
h3c=$1; case_file=$2; src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
args=$(sed -e "s|@SRC@|$src|g" -e "s|@TMP@|$tmp|g" "$case_file")
expected=${case_file%.cmd}.expected
cd "$src"
# shellcheck disable=SC2086
eval "\"$h3c\" $args" >/dev/null 2>"$tmp/stderr.raw"
echo "exit: $?" >>"$tmp/stderr.raw"
sed "s|$tmp|@TMP@|g" "$tmp/stderr.raw" >"$tmp/stderr" # the fresh folder's name as in the case
if [ "${H3_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$tmp/stderr" "$expected"; exit 0; fi
if ! diff -u "$expected" "$tmp/stderr"; then
  echo "FAIL: $case_file: stderr differs from $expected" >&2
  exit 1
fi
