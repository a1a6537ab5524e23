#!/bin/sh
# output_cli.sh SRC H3C H3EXEC: outputs of h3c and h3exec never destroy anything.
#   - an output that is an input (h3c: the model; h3exec: the plan, the inputs file, the
#     prompt) fails with exit 1 and "output X is the ROLE Y", and the input stays as it was;
#   - -o through a symlink replaces the file it names and the link stays a link;
#   - -o to a FIFO delivers the plan (a background reader) and the FIFO stays a FIFO;
#   - -o to a character device keeps it one (root: a node made in the scratch folder, then
#     /dev/null; the checks of the device's type need root to mean anything).
# Every plan written is byte-identical to one written to a plain file. Scratch folder under
# $TMPDIR (default /tmp), removed at the end.
set -u
src=$1 h3c=$2 h3exec=$3
case $h3c in /*) ;; *) h3c=$PWD/$h3c ;; esac # compile() runs it from other folders
tmp=$(mktemp -d "${TMPDIR:-/tmp}/h3_output_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# refused NAME ROLE INPUT COMMAND...: wants exit 1, the message, and INPUT unchanged
refused() {
  name=$1 role=$2 input=$3 out=$4
  shift 4
  cp "$input" "$tmp/before"
  "$@" >/dev/null 2>"$tmp/stderr"
  rc=$?
  [ "$rc" = 1 ] || fail "$name: exit $rc, want 1"
  grep -qF "error: output $out is the $role $input" "$tmp/stderr" ||
    fail "$name: no 'output $out is the $role $input' in: $(cat "$tmp/stderr")"
  grep -qF "hint: choose another output file" "$tmp/stderr" || fail "$name: no hint"
  cmp -s "$tmp/before" "$input" || fail "$name: $input was changed"
}

# compile DIR OUT: h3c compile of the tiny H3 model in DIR with -o OUT (same flags each time)
compile() (cd "$1" && "$h3c" compile "$src/models/minimax_h3.g" --config tiny --no-kernels -o "$2")

mkdir "$tmp/ref" "$tmp/link" "$tmp/fifo" "$tmp/dev"
compile "$tmp/ref" out.plan || fail "compile to a plain file"
cp "$tmp/ref/out.plan" "$tmp/h3.plan"

# h3c: the model itself
cp "$src/models/minimax_h3.g" "$tmp/m.g"
refused model input "$tmp/m.g" "$tmp/m.g" \
  "$h3c" compile "$tmp/m.g" --config tiny --no-kernels -o "$tmp/m.g"

# h3exec: the plan (--out, --profile), the inputs file, the prompt (each case on a fresh
# copy of the plan, so that one failure does not hide the others)
refused plan_out input "$tmp/h3.plan" "$tmp/h3.plan" "$h3exec" "$tmp/h3.plan" --out "$tmp/h3.plan"
cp "$tmp/ref/out.plan" "$tmp/h3.plan"
refused plan_profile input "$tmp/h3.plan" "$tmp/h3.plan" \
  "$h3exec" "$tmp/h3.plan" --profile "$tmp/h3.plan"
cp "$tmp/ref/out.plan" "$tmp/h3.plan"
"$h3exec" "$tmp/h3.plan" --out "$tmp/io.safetensors" >/dev/null 2>&1 || fail "h3exec --out"
refused inputs "inputs file" "$tmp/io.safetensors" "$tmp/io.safetensors" \
  "$h3exec" "$tmp/h3.plan" --graph step --inputs "$tmp/io.safetensors" --out "$tmp/io.safetensors"
"$h3c" compile "$src/models/minimax_m3_1.g" --config tiny --no-kernels -o "$tmp/m31.plan" ||
  fail "compile m3_1"
seq -s ' ' 0 19 >"$tmp/prompt.txt"
refused prompt input "$tmp/prompt.txt" "$tmp/prompt.txt" \
  "$h3exec" "$tmp/m31.plan" --prompt "$tmp/prompt.txt" --out "$tmp/prompt.txt"

# a symlink: the file it names is replaced, the link stays
echo old >"$tmp/link/real.plan"
ln -s real.plan "$tmp/link/out.plan"
compile "$tmp/link" out.plan || fail "compile through a link"
[ -L "$tmp/link/out.plan" ] && [ "$(readlink "$tmp/link/out.plan")" = real.plan ] ||
  fail "the link is not the same link any more"
cmp -s "$tmp/ref/out.plan" "$tmp/link/real.plan" || fail "the link's target is not the plan"
[ "$(ls -A "$tmp/link" | wc -l)" = 2 ] || fail "files left next to the link: $(ls -A "$tmp/link")"

# a FIFO with a reader in the background (which gives up after a minute)
mkfifo "$tmp/fifo/out.plan"
timeout 60 cat "$tmp/fifo/out.plan" >"$tmp/fifo.got" &
reader=$!
compile "$tmp/fifo" out.plan || fail "compile to a FIFO"
wait "$reader" || fail "the FIFO's reader got no end of file"
[ -p "$tmp/fifo/out.plan" ] || fail "the FIFO is not a FIFO any more"
cmp -s "$tmp/ref/out.plan" "$tmp/fifo.got" || fail "the FIFO's reader did not get the plan"

# character devices: our own /dev/null node first, so that a writer that would replace
# devices is caught before it touches the real one
if [ "$(id -u)" = 0 ] && mknod "$tmp/dev/out.plan" c 1 3 2>/dev/null; then
  compile "$tmp/dev" out.plan || fail "compile to a device node"
  [ -c "$tmp/dev/out.plan" ] || fail "the device node is not a character device any more"
fi
if [ ! -e "$tmp/dev/out.plan" ] || [ -c "$tmp/dev/out.plan" ]; then
  compile "$tmp/dev" /dev/null || fail "compile to /dev/null"
  [ -c /dev/null ] || fail "/dev/null is not a character device any more"
fi

[ "$fails" = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "ok: inputs refused, links, FIFOs and devices kept"
