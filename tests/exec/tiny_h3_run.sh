# shellcheck shell=sh disable=SC2154,SC2034 # the caller's variables
# tiny_h3_run.sh: sourced by the tests/exec scripts that compile and run tiny MiniMax-H3 plans
# on the CPU backend (attention_schedule.sh, sage_q_fusion.sh). The caller sets h3c, h3exec,
# src (the source tree), fail (0) and base (the h3c flags every plan of the script gets) and
# works in its own directory.
# run NAME FLAGS...: compile models/minimax_h3.g (--config tiny --set video_rows=300, $base,
# --no-kernels, FLAGS) and run it with random weights of seed 3: NAME.plan, NAME.clog (h3c's
# output), NAME.log (h3exec's report) and NAME.safetensors; both logs on stderr and fail=1
# when either step fails. Sets `name`.
run() {
  name=$1
  shift
  # shellcheck disable=SC2086
  if ! "$h3c" compile "$src/models/minimax_h3.g" --config tiny --set video_rows=300 $base \
      --no-kernels "$@" -o "$name.plan" >"$name.clog" 2>&1 ||
    ! "$h3exec" "$name.plan" --backend cpu --weights random --seed 3 \
      --out "$name.safetensors" >"$name.log" 2>&1; then
    echo "FAIL: $name ($*) did not compile or run:" >&2
    cat "$name.clog" "$name.log" >&2
    fail=1
  fi
}

# same A B WHY: the latents of runs A and B are the same bytes, else a failure naming WHY.
same() {
  if ! cmp -s "$1.safetensors" "$2.safetensors"; then
    echo "FAIL: $1 != $2 bitwise: $3" >&2
    fail=1
  fi
}
