#!/bin/sh
# pass_files.sh H3C SRC: pass names, files and records agree. Pass `foo-bar` (a name that
# `h3c passes` lists) is defined in SRC/passes/foo_bar.c by
#   const h3_pass h3_pass_foo_bar = {
#       .name = "foo-bar",
# and registered by the line X(foo_bar) of SRC/passes/registry.c; and every record defined
# in SRC/passes/ is registered (a pass file without its registry line is an error).
set -u
h3c=$1; src=$2
rc=0
names=$("$h3c" passes --markdown | sed -n 's/^| `\([^`]*\)` |.*/\1/p')
if [ -z "$names" ]; then
  echo "pass_files.sh: error: '$h3c passes --markdown' lists no pass" >&2
  exit 1
fi
for name in $names; do
  id=$(echo "$name" | tr - _)
  file=$src/passes/$id.c
  if [ ! -f "$file" ]; then
    echo "$file: error: pass '$name' must be defined in passes/$id.c" >&2
    echo "hint: git mv its file to passes/$id.c (or rename the pass)" >&2
    rc=1
  elif ! grep -q "^const h3_pass h3_pass_$id = {" "$file" ||
       ! grep -q "^ *\.name = \"$name\"," "$file"; then
    echo "$file: error: pass '$name' must be the record 'const h3_pass h3_pass_$id' with" \
         ".name = \"$name\"" >&2
    rc=1
  fi
done
for file in "$src"/passes/*.c; do
  for id in $(sed -n 's/^const h3_pass h3_pass_\([a-z0-9_]*\) = {.*/\1/p' "$file"); do
    name=$(echo "$id" | tr _ -)
    if ! echo "$names" | grep -qx -- "$name"; then
      echo "$file: error: the record h3_pass_$id is not in the pass table" >&2
      echo "hint: add the line X($id) to passes/registry.c where the pass must run" >&2
      rc=1
    fi
  done
done
exit $rc
