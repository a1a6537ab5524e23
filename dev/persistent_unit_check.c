/* persistent_unit_check.c: the unit dev/persistent_step.patch writes, for real kernel instances
 * (the decode attention, index_topk, the moe file, a codegen-like kernel), printed to stdout so
 * that NVRTC can be tried on it without a GPU (lab; not CI).
 *   git apply dev/persistent_step.patch && cmake --build build -j2 --target h3exec
 *   gcc -std=gnu11 -I runtime/cuda -I include -I runtime -I /usr/local/cuda/include dev/persistent_unit_check.c \
 *     -Wl,--start-group build/libh3_runtime.a build/libh3_plan.a build/libh3_kernels.a build/libh3_ir.a \
 *     -Wl,--end-group -L/usr/local/cuda/lib64 -lcudart -lnvrtc -lcublasLt -lcudnn -lyaml -ljansson -lpthread -lm -ldl \
 *     -o /tmp/persistent_unit_check && /tmp/persistent_unit_check > /tmp/unit.cu
 *   then NVRTC on /tmp/unit.cu (dev/persistent_unit.py's nvrtc(), sm_90a).
 * Found 2026-12-06: NVRTC compiles it (h3v_step: 255 registers, 72 bytes of stack; 128 and 80 under
 * H3_LAB_PERSISTENT_BLOCKS=2 and 3, spilling 1.4 and 2.7 KB) once the
 * kernels' dynamic shared memory is one array of the unit (two files' block-scope externs of one
 * name clashed: they have C linkage inside extern "C" kernels). */
#include "cuda_persistent.c"
#include "cuda_m31.h"
int main(void) {
  static cu_kernel att = {.name = "h3cu_att_check"}, top = {.name = "h3cu_topk_check"}, moe = {.name = "h3cu_moe_check"},
                   moed = {.name = "h3cu_moed_check"}, fused = {.name = "h3_fused_1"};
  char defs[1024];
  cu_m31_msa_defines(defs, sizeof defs, "#define H3_KV_ATT_MMA_NAME h3cu_att_check\n", H3_BF16, H3_BF16, H3_I32, H3_BF16, 4, 4);
  att.src_file = "m31_msa.cu", att.src_defines = strdup(defs);
  cu_m31_msa_defines(defs, sizeof defs, "#define H3_TOPK_NAME h3cu_topk_check\n#define H3_TOPK_SCORE_NAME h3cu_topks_check\n#define H3_TOPK_ROWS_NAME h3cu_topkr_check\n", H3_BF16, H3_BF16, H3_I32, H3_BF16, 1, 1);
  top.src_file = "m31_msa.cu", top.src_defines = strdup(defs);
  const char *moedefs = cu_m31_check_defines("m31_moe.cu");
  moe.src_file = moed.src_file = "m31_moe.cu", moe.src_defines = strdup(moedefs), moed.src_defines = strdup(moedefs);
  fused.src_text = "extern \"C\" __global__ void __launch_bounds__(256) h3_fused_1(float *__restrict__ out0) {\n"
                   "  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < 100; c += gridDim.x * blockDim.x) out0[c] = 1.0f;\n  __syncthreads();\n}\n";
  cu_kernel *list[] = {&att, &top, &moe, &moed, &fused};
  pr_kernels ks = {list, 5, 5};
  h3_strbuf b;
  h3_strbuf_init(&b);
  const char *why = NULL;
  if (!unit_text(&ks, &b, &why)) { fprintf(stderr, "unit_text: %s\n", why); return 1; }
  fputs(b.data, stdout);
  return 0;
}
