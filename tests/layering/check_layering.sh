#!/usr/bin/env bash
# check_layering.sh: the layering rules of docs/architecture.md, checked on the built tree.
#   check_layering.sh SOURCE_DIR BUILD_DIR
# 1. h3exec is linked without libh3_passes and libh3_codegen (its link line);
# 2. libh3_runtime and libh3_plan reference no symbol of the optimiser (h3_pass*, h3_codegen_*,
#    h3_plan_build, h3_int8_options_parse is the plan's own and allowed);
# 3. no CUDA source under runtime/ (no __global__, no `extern "C"` kernel text): hand-written
#    kernels live in kernels/;
# 4. the command-line tools call no backend's own functions (h3_cuda_*, h3_backend_cuda_new,
#    h3_backend_cpu_new): backends are reached through their table.
set -uo pipefail
src=$1 build=$2
fail=0
bad() { echo "check_layering: $*" >&2; fail=1; }

link="$build/CMakeFiles/h3exec.dir/link.txt"
[ -f "$link" ] || bad "no link line for h3exec at $link"
if grep -Eq 'libh3_(passes|codegen)\.a' "$link" 2>/dev/null; then
  bad "h3exec links the optimiser: $(grep -Eo 'libh3_(passes|codegen)\.a' "$link" | sort -u | tr '\n' ' ')"
fi

for lib in libh3_runtime.a libh3_plan.a libh3_kernels.a; do
  f="$build/$lib"
  [ -f "$f" ] || { bad "missing $f"; continue; }
  und=$(nm -u "$f" 2>/dev/null | awk '{print $NF}' | grep -E '^(h3_pass|h3_codegen_|h3_plan_build$|h3_rewrite|h3_frontend)' | sort -u)
  [ -z "$und" ] || bad "$lib uses the compiler's side: $(echo $und)"
done

if grep -rlE '__global__|extern \\?"C\\?" __global__' "$src/runtime" >/dev/null 2>&1; then
  bad "CUDA source under runtime/: $(grep -rlE '__global__' "$src/runtime" | tr '\n' ' ') (put it in kernels/)"
fi

calls=$(grep -nE '\bh3_(cuda_[a-z_]+|backend_cuda_new|backend_cpu_new)\s*\(' "$src"/cli/*.c 2>/dev/null)
[ -z "$calls" ] || bad "the CLI calls a backend's own functions (use the backend table):
$calls"

[ $fail -eq 0 ] && echo "check_layering: h3exec links runtime, plan, kernels and ir only; no CUDA source under runtime/; the CLI uses the backend table"
exit $fail
