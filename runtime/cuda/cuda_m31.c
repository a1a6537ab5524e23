/* cuda_m31.c: MiniMax-M3.1's hand kernels on the cuda backend, the shared part: which ops
 * they run, each op's device scratch, the dispatch, kernel lookup and compilation. The
 * launches are in cuda_m31_moe.c (router_topk, moe, markov_draft: kernels/m31_moe.cu) and
 * cuda_m31_msa.c (paged / block / sparse attention, index_topk: kernels/m31_msa.cu) and
 * cuda_m31_msa_tile.c (paged / sparse attention of many rows of one sequence:
 * kernels/m31_msa_tile.cu) and cuda_nvfp4.c (linear_nvfp4: kernels/nvfp4_gemm.cu).
 * Each kernel file is instantiated per dtype combination of the op (macro lines in front
 * of it), compiled through the kernel cache on first use and registered by name. Some ops
 * run in several launches, or add split partials, through a device scratch that the op's
 * record owns (allocated and zeroed when the op is prepared, at plan load;
 * cu_m31_scratch_bytes). The kernels
 * read positions, page tables, selections and expert ids on the device and clamp nothing
 * the CPU reference would report: an out-of-range id there is an error on the CPU backend
 * and undefined here (the plan's own ops produce valid ones). Nothing is allocated per
 * run, so the ops can be captured in CUDA graphs.
 */
#include "cuda_m31.h"
#include "cuda_nvfp4.h"

#include <stdio.h>
#include <string.h>

/* The n kernels `names` of `file` (instantiated by `defines`), compiled together on first use
 * (exact: the exact tier's options, else the lossless ones for sm_90a). */
static h3_status kernels(cu_state *s, const h3_op *op, const char *file, const char *defines, bool exact,
                         int n, const char *const *names, cu_kernel **out, h3_diag *d) {
  bool all = true;
  for (int i = 0; i < n; i++) {
    out[i] = cu_kernel_find(s, names[i]);
    if (out[i] && !out[i]->fn)
      return cu_op_error(d, op, CU_HINT_EARLIER, "kernel %s failed to load earlier", names[i]);
    all = all && out[i];
  }
  return all ? H3_OK : cu_compile_tu(s, defines, file, exact, n, names, out, d);
}

h3_status cu_m31_kernels(cu_state *s, const h3_op *op, const char *file, const char *defines, int n,
                        const char *const *names, cu_kernel **out, h3_diag *d) {
  return kernels(s, op, file, defines, true, n, names, out, d);
}

h3_status cu_m31_kernels_sm90a(cu_state *s, const h3_op *op, const char *file, const char *defines,
                               int n, const char *const *names, cu_kernel **out, h3_diag *d) {
  return kernels(s, op, file, defines, false, n, names, out, d);
}

/* Sets a kernel's dynamic shared memory limit when it needs more than the default 48 KiB. */
h3_status cu_m31_smem(cu_state *s, const h3_op *op, cu_kernel *k, size_t bytes, h3_diag *d) {
  /* without the attribute a launch may use 48 KiB of shared memory, its static part included:
     set it for any dynamic amount that could cross that with the kernel's own */
  if (bytes <= 16 * 1024) return H3_OK;
  if (bytes > s->smem_optin)
    return cu_op_error(d, op, CU_HINT_SMEM, "needs %zu bytes of shared memory; the device has %zu", bytes,
                       s->smem_optin);
  CU_CHECK(d, cudaKernelSetAttributeForDevice(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)bytes, s->device), k->name);
  return H3_OK;
}

const char *cu_m31_check_defines(const char *file) {
  static char moe[1408], msa[640], tile[256]; /* every kernel of the file, the models' dtypes */
  if (!strcmp(file, "m31_moe.cu")) {
    cu_m31_moe_defines(moe, sizeof moe,
                       "#define H3_ROUTER_NAME h3cu_router_check\n#define H3_ROUTER_SCORE_NAME h3cu_routers_check\n"
                       "#define H3_ROUTER_FUSED_NAME h3cu_routerf_check\n"
                       "#define H3_MOE_NAME h3cu_moe_check\n"
                       "#define H3_MOE_DOWN_NAME h3cu_moed_check\n#define H3_MOE_COMBINE_NAME h3cu_moec_check\n"
                       "#define H3_MOE_MMA_NAME h3cu_moem_check\n#define H3_MOE_MMA_DOWN_NAME h3cu_moemd_check\n"
                       "#define H3_MOE_ROUTE_NAME h3cu_moer_check\n#define H3_MOE_GATHER_NAME h3cu_moeg_check\n"
                       "#define H3_MOE_SWIGLU_NAME h3cu_moes_check\n#define H3_MOE_COMBINE_AT_NAME h3cu_moea_check\n"
                       "#define H3_MARKOV_STEP_NAME h3cu_markovs_check\n#define H3_MARKOV_PICK_NAME h3cu_markovp_check\n"
                       "#define H3_MARKOV_MMA_NAME h3cu_markovm_check\n"
                       "#define H3_SPEC_ACCEPT_NAME h3cu_spec_accept_check\n"
                       "#define H3_SPEC_TOP2_NAME h3cu_spec_top2_check\n",
                       H3_BF16, H3_BF16, H3_F32, H3_I32, H3_F32);
    return moe;
  }
  if (!strcmp(file, "m31_msa.cu")) {
    cu_m31_msa_defines(msa, sizeof msa,
                       "#define H3_KV_ATT_NAME h3cu_kvatt_check\n#define H3_KV_COMBINE_NAME h3cu_kvattc_check\n"
                       "#define H3_KV_ATT_MMA_NAME h3cu_kvattm_check\n"
                       "#define H3_TOPK_SCORE_NAME h3cu_topks_check\n#define H3_TOPK_ROWS_NAME h3cu_topkr_check\n"
                       "#define H3_TOPK_NAME h3cu_topk_check\n",
                       H3_BF16, H3_BF16, H3_I32, H3_BF16, 4, 4);
    return msa;
  }
  if (!strcmp(file, "m31_msa_tile.cu")) {
    cu_m31_att_tile_defines(tile, sizeof tile, "h3cu_kvattt_check", H3_I32, H3_BF16);
    return tile;
  }
  if (!strcmp(file, "nvfp4_gemm.cu")) return "#define H3_NVFP4_NAME h3cu_nvfp4_check\n#define O_T h3_bf16\n";
  if (!strcmp(file, "m31_moe_gemm.cu")) return M31_MOE_GEMM_DEFINES;
  if (!strcmp(file, "m31_moe_wgmma.cu")) return M31_MOE_WGMMA_DEFINES;
  return NULL;
}

bool cu_m31_runs(const h3_op *op) {
  switch (op->code) {
  case H3_OP_MOE: case H3_OP_ROUTER_TOPK: case H3_OP_MARKOV_DRAFT: case H3_OP_INDEX_TOPK:
  case H3_OP_PAGED_ATTENTION: case H3_OP_BLOCK_ATTENTION: case H3_OP_SPARSE_ATTENTION:
  case H3_OP_SPEC_ACCEPT: case H3_OP_LINEAR_NVFP4:
    return true;
  default:
    return false;
  }
}

size_t cu_m31_scratch_bytes(const h3_op *op) {
  switch (op->code) {
  case H3_OP_ROUTER_TOPK: return cu_m31_router_scratch_bytes(op);
  case H3_OP_MOE: return cu_m31_moe_scratch_bytes(op);
  case H3_OP_PAGED_ATTENTION: case H3_OP_BLOCK_ATTENTION: case H3_OP_SPARSE_ATTENTION:
    return cu_m31_att_scratch_bytes(op);
  case H3_OP_INDEX_TOPK: return cu_m31_topk_scratch_bytes(op);
  case H3_OP_MARKOV_DRAFT: return cu_m31_markov_scratch_bytes(op);
  case H3_OP_SPEC_ACCEPT: return cu_m31_accept_scratch_bytes(op);
  case H3_OP_LINEAR_NVFP4: {
    const h3_type *x = &op->operands[0]->type;
    int64_t K = x->dims[x->rank - 1];
    return cu_nvfp4_scratch_bytes(K ? h3_type_numel(x) / K : 0, op->operands[1]->type.dims[0], K);
  }
  default: return 0;
  }
}

h3_status cu_m31_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                     const h3_tensor *out, h3_diag *d) {
  switch (op->code) {
  case H3_OP_ROUTER_TOPK: return cu_m31_run_router(s, op, scratch, in, out, d);
  case H3_OP_MOE: return cu_m31_run_moe(s, op, scratch, in, out, d);
  case H3_OP_MARKOV_DRAFT: return cu_m31_run_markov(s, op, scratch, in, out, d);
  case H3_OP_SPEC_ACCEPT: return cu_m31_run_spec_accept(s, op, scratch, in, out, d);
  case H3_OP_LINEAR_NVFP4: return cu_nvfp4_run(s, op, scratch, in, out, d);
  case H3_OP_INDEX_TOPK: return cu_m31_run_index_topk(s, op, scratch, in, out, d);
  case H3_OP_PAGED_ATTENTION:
  case H3_OP_BLOCK_ATTENTION:
  case H3_OP_SPARSE_ATTENTION: return cu_m31_run_kv_attention(s, op, scratch, in, out, d);
  default: return cu_op_error(d, op, NULL, "not an M3.1 hand-kernel op");
  }
}
