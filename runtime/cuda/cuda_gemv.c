/* cuda_gemv.c: linear for few rows on the cuda backend (kernels/gemv.cu): the decode steps'
 * projections and lm_head, where cuBLASLt's kernels read the weights at about 85 % of the
 * rate the card copies at. Taken for bf16 x and w, bf16 or f32 y (bias of y's type or none),
 * at most CU_GEMV_MAX_ROWS rows, K a multiple of 128 and at least CU_GEMV_MIN_N outputs (a
 * block per 32 outputs: fewer leave SMs idle, where cuBLASLt splits K), unless
 * H3_CUDA_GEMV=0; pointers not 16-byte aligned fall back to the generic kernel.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GEMV_THREADS = 256 }; /* H3G_THREADS of kernels/gemv.cu */

bool cu_gemv_takes(const h3_op *op) {
  static int off = -1;
  if (off < 0) {
    const char *e = getenv("H3_CUDA_GEMV");
    off = e && !strcmp(e, "0");
  }
  if (off || op->n_operands < 2 || op->n_results < 1) return false;
  const h3_type *x = &op->operands[0]->type, *w = &op->operands[1]->type, *y = &op->results[0]->type;
  if (x->dtype != H3_BF16 || w->dtype != H3_BF16 || (y->dtype != H3_BF16 && y->dtype != H3_F32) ||
      (op->n_operands > 2 && op->operands[2]->type.dtype != y->dtype) || x->rank < 1 || w->rank != 2)
    return false;
  int64_t K = x->dims[x->rank - 1], N = w->dims[0], M = K ? h3_type_numel(x) / K : 0;
  return K >= 128 && K % 128 == 0 && w->dims[1] == K && N >= CU_GEMV_MIN_N && M >= 1 &&
         M <= CU_GEMV_MAX_ROWS;
}

void cu_gemv_defines(char *buf, size_t len, const char *name, h3_dtype y) {
  snprintf(buf, len, "#define H3_GEMV_NAME %s\n#define Y_T %s\n", name, h3_kernel_ctype(y));
}

h3_status cu_gemv_run(cu_state *s, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                      h3_diag *d) {
  const void *x = in[0].data, *w = in[1].data, *bias = n_in > 2 ? in[2].data : NULL;
  void *y = out[0].data;
  if (((uintptr_t)x | (uintptr_t)w) % 16) return cu_linear_generic(s, op, in, n_in, out, d);
  h3_dtype ty = out[0].type.dtype;
  char name[64];
  snprintf(name, sizeof name, "h3cu_gemv_%s", h3_dtype_name(ty));
  cu_kernel *k = cu_kernel_find(s, name);
  if (k && !k->fn) return cu_op_error(d, op, NULL, "kernel %s failed to load earlier", name);
  if (!k) {
    char defs[128];
    cu_gemv_defines(defs, sizeof defs, name, ty);
    const char *names[1] = {name};
    if (cu_compile_tu(s, defs, "gemv.cu", true, 1, names, &k, d) != H3_OK) return H3_ERR;
  }
  const h3_type *xt = &in[0].type;
  long long K = xt->dims[xt->rank - 1], N = in[1].type.dims[0], M = h3_type_numel(xt) / K;
  void *args[] = {&x, &w, &bias, &y, &M, &N, &K};
  int64_t grid[3] = {(N + 31) / 32, 1, 1}, block[3] = {GEMV_THREADS, 1, 1};
  return cu_launch(s, k, grid, block, 0, args, d);
}
