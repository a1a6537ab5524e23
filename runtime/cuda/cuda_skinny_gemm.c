/* cuda_skinny_gemm.c: linear of at most 16 rows on the skinny kernel (kernels/skinny_gemm.cu),
 * opted into with H3_LINEAR_FORM=skinny, or of one row on its streaming form with
 * H3_LINEAR_FORM=stream (docs/running.md): which linears they take (decided when the op is
 * prepared), their launch shapes (cuda_skinny_gemm.h), their scratch and their one launch. */
#include "cuda_skinny_gemm.h"

#include "cuda_m31.h"

#include <stdlib.h>
#include <string.h>

cu_skinny_shape cu_skinny_shape_of(int64_t M, int64_t N, int64_t K) {
  cu_skinny_shape sh = {0, 1, 1, 64, 0, 0};
  while (sh.mr < M) sh.mr *= 2;
  while (sh.cpb > 16 && (N + sh.cpb - 1) / sh.cpb < CU_SKINNY_SLOTS) sh.cpb /= 2;
  sh.cols = (N + sh.cpb - 1) / sh.cpb;
  const int64_t nkg = (K + CU_SKINNY_KG - 1) / CU_SKINNY_KG;
  const int64_t fit = CU_SKINNY_XSMEM / (M * 2 * CU_SKINNY_KG); /* KGs of x that fit */
  int64_t S = (CU_SKINNY_SLOTS + sh.cols - 1) / sh.cols;
  if (S > CU_SKINNY_MAX_SPLITS) S = CU_SKINNY_MAX_SPLITS;
  if (S < (nkg + fit - 1) / fit) S = (nkg + fit - 1) / fit;
  if (S > nkg) S = nkg;
  const int64_t per = (nkg + S - 1) / S; /* KGs per split */
  sh.splits = (nkg + per - 1) / per;
  sh.kr = (int)(per * CU_SKINNY_KG);
  sh.smem = (size_t)(M * (K < sh.kr ? K : sh.kr) * 2);
  return sh;
}

size_t cu_skinny_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  cu_skinny_shape sh = cu_skinny_shape_of(M, N, K);
  if (sh.splits == 1) return 0;
  return cu_align256((size_t)(sh.splits * M * N) * 4) + cu_align256((size_t)sh.cols * 4);
}

/* x [M, K] and w [N, K] of a linear, M the rows of x (0 when malformed) */
static void dims(const h3_op *op, int64_t *M, int64_t *N, int64_t *K) {
  const h3_type *x = &op->operands[0]->type;
  *K = x->rank ? x->dims[x->rank - 1] : 0;
  *M = *K ? h3_type_numel(x) / *K : 0;
  *N = op->operands[1]->type.rank == 2 ? op->operands[1]->type.dims[0] : 0;
}

int cu_skinny_takes(const h3_op *op) {
  const int form = cu_env_form("H3_LINEAR_FORM", (const char *const[]){"skinny", "stream", "library", NULL});
  if (op->n_operands < 2 || op->n_results < 1) return CU_LINEAR_LIBRARY;
  const h3_dtype yd = op->results[0]->type.dtype;
  int64_t M, N, K;
  dims(op, &M, &N, &K);
  if (op->operands[0]->type.dtype != H3_BF16 || op->operands[1]->type.dtype != H3_BF16 ||
      (yd != H3_BF16 && yd != H3_F32) || (op->n_operands > 2 && op->operands[2]->type.dtype != yd) || N < 1)
    return CU_LINEAR_LIBRARY;
  return cu_skinny_form_of(M, N, K, form);
}

int cu_skinny_form_of(int64_t M, int64_t N, int64_t K, int forced) {
  const bool streams = M == 1 && N >= 1 && K >= 256 && K % 256 == 0;
  if (forced == 1) return streams ? CU_LINEAR_STREAM : CU_LINEAR_LIBRARY;
  if (forced == 0 && M >= 1 && M <= CU_SKINNY_MAX_ROWS && K >= 1 && K % 8 == 0) return CU_LINEAR_SKINNY;
  return CU_LINEAR_LIBRARY;
}

size_t cu_skinny_op_scratch_bytes(const h3_op *op, int form) {
  int64_t M, N, K;
  dims(op, &M, &N, &K);
  return form == CU_LINEAR_STREAM ? cu_skinny_stream_scratch_bytes(N, K) : cu_skinny_scratch_bytes(M, N, K);
}

int64_t cu_skinny_stream_chunks(int64_t K) {
  const int64_t S = K / 256;
  return S % 4 == 0 ? S / 4 : S % 2 == 0 ? S / 2 : S;
}

size_t cu_skinny_stream_scratch_bytes(int64_t N, int64_t K) {
  if (N <= 0 || K < 256) return 0;
  return cu_align256((size_t)(cu_skinny_stream_chunks(K) * N) * 4) + (size_t)((N + 1) / 2) * 4;
}

int64_t cu_skinny_stream_blocks(int64_t N, int64_t K, int sms) {
  const int64_t units = (N + 1) / 2 * cu_skinny_stream_chunks(K), want = (units + 7) / 8;
  const int64_t most = (int64_t)(sms > 0 ? sms : 1) * CU_SKINNY_STREAM_BLOCKS_PER_SM;
  return want < 1 ? 1 : want < most ? want : most;
}

/* The streaming form's one launch (M = 1): the grid holds every block at once. */
static h3_status run_stream(cu_state *s, const h3_op *op, void *scratch, const void *x, const void *w,
                            const void *bias, const h3_tensor *out, h3_diag *d) {
  char name[128], defs[256];
  snprintf(name, sizeof name, "h3cu_skinny_%s_st", DN(out[0].type.dtype));
  snprintf(defs, sizeof defs, "#define H3_SKINNY_NAME h3cu_skinny_%s\n#define O_T %s\n", DN(out[0].type.dtype),
           h3_kernel_ctype(out[0].type.dtype));
  const char *names[1] = {name};
  cu_kernel *kn;
  if (cu_m31_kernels(s, op, "skinny_gemm.cu", defs, 1, names, &kn, d) != H3_OK) return H3_ERR;
  if (!scratch) return cu_op_error(d, op, NULL, "no partials scratch (the op was not prepared)");
  int64_t M, N, K;
  dims(op, &M, &N, &K);
  void *y = out[0].data, *part = scratch;
  void *cnt = (char *)scratch + cu_align256((size_t)(cu_skinny_stream_chunks(K) * N) * 4);
  long long NN = N, KK = K;
  void *args[] = {&x, &w, &bias, &y, &part, &cnt, &NN, &KK};
  int64_t grid[3] = {cu_skinny_stream_blocks(N, K, s->sm_count), 1, 1}, block[3] = {CU_SKINNY_THREADS, 1, 1};
  return cu_launch(s, kn, grid, block, 0, args, d);
}

h3_status cu_skinny_run(cu_state *s, const h3_op *op, int form, void *scratch, const h3_tensor *in, int n_in,
                        const h3_tensor *out, h3_diag *d) {
  const void *x = in[0].data, *w = in[1].data, *bias = n_in > 2 ? in[2].data : NULL;
  if ((uintptr_t)x % 16 || (uintptr_t)w % 16) /* the kernels' 16-byte loads: another GEMM */
    return cu_linear_generic(s, op, in, n_in, out, d);
  if (form == CU_LINEAR_STREAM) return run_stream(s, op, scratch, x, w, bias, out, d);
  char base[96], name[5][128], defs[256];
  snprintf(base, sizeof base, "h3cu_skinny_%s", DN(out[0].type.dtype));
  snprintf(defs, sizeof defs, "#define H3_SKINNY_NAME %s\n#define O_T %s\n", base,
           h3_kernel_ctype(out[0].type.dtype));
  for (int i = 0; i < 5; i++) snprintf(name[i], sizeof name[i], "%s_m%d", base, 1 << i);
  const char *names[5] = {name[0], name[1], name[2], name[3], name[4]};
  cu_kernel *kns[5];
  if (cu_m31_kernels(s, op, "skinny_gemm.cu", defs, 5, names, kns, d) != H3_OK) return H3_ERR;
  int64_t M, N, K;
  dims(op, &M, &N, &K);
  const cu_skinny_shape sh = cu_skinny_shape_of(M, N, K);
  cu_kernel *kn = kns[sh.mr == 1 ? 0 : sh.mr == 2 ? 1 : sh.mr == 4 ? 2 : sh.mr == 8 ? 3 : 4];
  if (cu_m31_smem(s, op, kn, sh.smem, d) != H3_OK) return H3_ERR;
  if (sh.splits > 1 && !scratch)
    return cu_op_error(d, op, NULL, "no partials scratch (the op was not prepared)");
  void *y = out[0].data, *part = scratch;
  void *cnt = scratch ? (char *)scratch + cu_align256((size_t)(sh.splits * M * N) * 4) : NULL;
  long long MM = M, NN = N, KK = K;
  int cpb = sh.cpb, kr = sh.kr;
  void *args[] = {&x, &w, &bias, &y, &part, &cnt, &MM, &NN, &KK, &cpb, &kr};
  int64_t grid[3] = {sh.cols, sh.splits, 1}, block[3] = {CU_SKINNY_THREADS, 1, 1};
  return cu_launch(s, kn, grid, block, (int64_t)sh.smem, args, d);
}
