#!/usr/bin/env bash
# normmod_variants.sh: builds dev/normmod_variants.cu (with nvcc; no GPU needed) into
# BUILD_DIR/normmod_variants, with the Plan A lossless kernel of the full H3 plan as v0 and its
# Plan B kernel as b0. Run from anywhere; paths are relative to the repository root.
#   dev/normmod_variants.sh [BUILD_DIR]   (default build-nm, under the repository root; needs an
#   h3c built by scripts/setup.sh in build/, or H3C=path) then, on the GPU:
#   BUILD_DIR/normmod_variants [prof | dit]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-nm}
H3C=${H3C:-build/h3c}
mkdir -p "$B"
"$H3C" compile models/minimax_h3.g --config full --set layers=1 --no-kernels -o "$B/l1.plan"
# the prelude and the norm_modulate / residual_norm_modulate kernels, at T = 32768 rows (the plan
# has 32704)
python3 - "$B" <<'PY'
import sys, yaml
b = sys.argv[1]
plan = yaml.safe_load(open(f"{b}/l1.plan"))
k = next(k for k in plan["kernels"] if k["op"] == "norm_modulate")
src = plan["prelude"]["source"] + "\n" + k["source"].replace("32704", "32768")
src = src.replace(k["name"], "nm_plan_kernel")
body = k["source"].replace("32704", "32768")
bounds = "__launch_bounds__(%d)" % k["block"][0]
assert bounds in body
for n in (6, 7, 8):  # the same kernel with a blocks-per-SM bound (a register cap)
    src += "\n" + body.replace(k["name"], "nm_plan_kernel_lb%d" % n).replace(bounds, bounds[:-1] + ", %d)" % n)
# a4: Plan A without the `u < units` test around each chunk's body (every thread has all of its
# chunks: the staged Plan B's form): ptxas then batches the chunks' table loads
nb = k["block"][0]
guarded = "      const int u = tid + j * %d;\n      if (u < 672) {\n" % nb
assert guarded in body
src += "\n" + body.replace(guarded, "      const int u = tid + j * %d;\n      {\n" % nb).replace(
    k["name"], "nm_plan_kernel_a4")
# a256: Plan A with 256 threads per row (the lossless block before session 6; the emitted chunks
# keep their `u < units` test, so only the thread count, the partials and the stride change)
nw = nb // 32
a256 = body.replace(bounds, "__launch_bounds__(256)").replace("j * %d;" % nb, "j * 256;")
a256 = a256.replace("part[%d]" % nw, "part[8]").replace("w < %d;" % nw, "w < 8;")
assert a256.count("j * 256;") == body.count("j * %d;" % nb) > 0
src += "\n" + a256.replace(k["name"], "nm_plan_kernel_a256")
# Plan B (residual_norm_modulate) as b0
kb = next(k for k in plan["kernels"] if k["op"] == "residual_norm_modulate")
bb = kb["source"].replace("32704", "32768")
src += "\n" + bb.replace(kb["name"], "nm_planb_kernel")
src += "\n#define NM_V0_BLOCK %d\n#define NM_B0_BLOCK %d\n" % (k["block"][0], kb["block"][0])
# a1: Plan A with r by the approximate rsqrtf (no slow-path branch after the barrier, so the
# table loads may issue before r): what the correctly rounded __frsqrt_rn costs
assert body.count("__frsqrt_rn(") == 2
src += "\n" + body.replace(k["name"], "nm_plan_kernel_a1").replace("__frsqrt_rn(", "rsqrtf(")
# a2: the chunk-0 table loads (gamma, scale[g], shift[g]) issued right after the reduction's
# barrier, before r (12 registers held across r's computation), so they are not stuck behind
# r's instructions
at = body.rindex("  __syncthreads();\n") + len("  __syncthreads();\n")
pre = ("  __align__(16) h3_bf16 wr0[8], sr0[8], hr0[8];\n"
       "  if (tid < 672) { h3_ldr8<true>(in1, tid * 8, wr0); h3_ldr8<true>(scr, tid * 8, sr0);"
       " h3_ldr8<true>(shr, tid * 8, hr0); }\n")
a2 = body[:at] + pre + body[at:]
loads = ("        h3_ldr8<true>(in1, u * 8, wr);\n        h3_ldr8<true>(scr, u * 8, sr);\n"
         "        h3_ldr8<true>(shr, u * 8, hr);\n")
at2 = a2.rindex(loads)
repl = ("        if (j == 0) { *reinterpret_cast<uint4 *>(wr) = *reinterpret_cast<const uint4 *>(wr0);"
        " *reinterpret_cast<uint4 *>(sr) = *reinterpret_cast<const uint4 *>(sr0);"
        " *reinterpret_cast<uint4 *>(hr) = *reinterpret_cast<const uint4 *>(hr0); } else {\n"
        + loads + "        }\n")
src += "\n" + (a2[:at2] + repl + a2[at2 + len(loads):]).replace(k["name"], "nm_plan_kernel_a2")
open(f"{b}/nm_v0.cuh", "w").write(src)
PY
/usr/local/cuda/bin/nvcc -O3 -arch=sm_90a -std=c++17 -DNM_KERNEL_H="\"$PWD/$B/nm_v0.cuh\"" \
  -o "$B/normmod_variants" dev/normmod_variants.cu
echo "built $B/normmod_variants"
