/* cuda_gemm.c: linear through cuBLASLt.
 *
 * linear(x[.., K], w[N, K], bias?[N]) -> y[.., N] with M = rows of x. In cuBLASLt's
 * column-major terms y (row-major [M, N]) is D = [N, M] with ld N; w (row-major [N, K]) is
 * A = [K, N] with ld K, used transposed; x is B = [K, M] with ld K: D = Aᵀ·B, "TN" with
 * both operands K-contiguous. bf16 operands, fp32 accumulation and scale (CUBLAS_COMPUTE_32F,
 * no TF32 involved), D in bf16 or f32; a bias of D's dtype goes into the BIAS epilogue
 * (added in fp32 before the one rounding to D). Other dtype combinations (the fp32 island)
 * use the backend's own GEMM (cuda_util.c).
 * Descriptors and the algorithm are chosen once, when the op is prepared (at plan load), for
 * 16-byte aligned pointers, so the choice (and the bits of the result) does not depend on
 * where the memory plan put the tensors; a shape cuBLASLt has no algorithm for goes to the
 * own GEMM. Large GEMMs take the fastest of several candidates instead of the heuristic's
 * first pick, timed once per machine (cuda_gemm_tune.c). A linear marked `beside` (pass
 * side-streams: it runs while the other stream has work) gets its algorithm, and its tuning,
 * for the card's SMs less H3_SIDE_SM_RESERVE. A run whose pointers are less aligned asks
 * the heuristic again for that alignment (kept from then on). One fixed workspace
 * (CU_WORKSPACE_BYTES), so the calls can be captured in CUDA graphs. A fixed algorithm is
 * deterministic run to run.
 */
#include "cuda_lt.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>

struct cu_gemm {
  const h3_op *op;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  int64_t M, N, K;
  bool bias;
  unsigned align; /* pointer alignment the algorithm was chosen for */
};

h3_status cu_gemm_init(cu_state *s, h3_diag *d) {
  cublasLtHandle_t lt;
  cublasStatus_t st = cublasLtCreate(&lt);
  if (st != CUBLAS_STATUS_SUCCESS) return cu_lt_fail(d, NULL, st, "cublasLtCreate");
  s->lt = lt;
  s->workspace = s->main_workspace = cu_alloc(s, CU_WORKSPACE_BYTES);
  if (!s->workspace) {
    h3_diag_error(d, (h3_span){0}, CU_HINT_DEVICE_OOM, "cuda: out of memory for the %zu-byte GEMM workspace",
                  CU_WORKSPACE_BYTES);
    return H3_ERR;
  }
  return H3_OK;
}

void cu_gemm_shutdown(cu_state *s) {
  if (s->lt) cublasLtDestroy((cublasLtHandle_t)s->lt);
  s->lt = NULL;
}

void cu_gemm_free(cu_gemm *g) {
  if (!g) return;
  cu_lt_layouts_free(g->a, g->b, g->c);
  if (g->desc) cublasLtMatmulDescDestroy(g->desc);
  free(g);
}

h3_status cu_lt_tn_desc(const h3_op *op, cublasLtMatmulDesc_t *desc, h3_diag *d) {
  LT_CHECK(d, op, cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_CHECK(d, op, cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_CHECK(d, op, cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  return H3_OK;
}

h3_status cu_lt_tn_layouts(const h3_op *op, int64_t M, int64_t N, int64_t K, cudaDataType_t out,
                           cublasLtMatrixLayout_t *a, cublasLtMatrixLayout_t *b, cublasLtMatrixLayout_t *c,
                           h3_diag *d) {
  *a = *b = *c = NULL;
  LT_CHECK(d, op, cublasLtMatrixLayoutCreate(a, CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K));
  LT_CHECK(d, op, cublasLtMatrixLayoutCreate(b, CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K));
  LT_CHECK(d, op, cublasLtMatrixLayoutCreate(c, out, (uint64_t)N, (uint64_t)M, N));
  return H3_OK;
}

void cu_lt_layouts_free(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
}

h3_status cu_lt_tn_tune(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int64_t M, int64_t N, int64_t K,
                        size_t out_bytes, cublasLtMatmulAlgo_t *algo, bool *tuned, h3_diag *d) {
  cu_lt_problem p = {desc, a, b, c, (size_t)(N * K) * 2, (size_t)(M * K) * 2, (size_t)(M * N) * out_bytes, ""};
  int32_t sms = 0; /* an SM count target (cuda_gemm.c, `beside`): its own tuning */
  size_t got = 0;
  if (cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms, &got) !=
      CUBLAS_STATUS_SUCCESS)
    sms = 0;
  int n = snprintf(p.key, sizeof p.key, "bf16 TN M %lld N %lld K %lld out %zu align 16", (long long)M,
                   (long long)N, (long long)K, out_bytes);
  if (sms > 0 && n > 0 && (size_t)n < sizeof p.key) snprintf(p.key + n, sizeof p.key - (size_t)n, " sms %d", (int)sms);
  const double flops = 2.0 * (double)M * (double)N * (double)K;
  const bool timed = cu_lt_tunes(s, &p, flops);
  h3_status st = cu_lt_tune(s, op, &p, flops, algo, d);
  if (tuned) *tuned = timed && st == H3_OK;
  return st;
}

h3_status cu_lt_fail(h3_diag *d, const h3_op *op, cublasStatus_t st, const char *call) {
  return cu_op_error(d, op, "run with --backend cpu to compare",
                     "cuBLASLt %s failed: %s (%s)", call, cublasLtGetStatusName(st),
                     cublasLtGetStatusString(st));
}

h3_status cu_lt_candidates(cu_state *s, const h3_op *op, const cu_lt_problem *p, unsigned align,
                           cublasLtMatmulHeuristicResult_t *res, int max, int *n, h3_diag *d) {
  cublasLtMatmulPreference_t pref;
  *n = 0;
  LT_CHECK(d, op, cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = CU_WORKSPACE_BYTES;
  uint32_t al = align;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const cublasLtMatmulPreferenceAttributes_t al_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < 4; i++)
    st = cublasLtMatmulPreferenceSetAttribute(pref, al_attrs[i], &al, sizeof al);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)s->lt, p->desc, p->a, p->b, p->c, p->c,
                                        pref, max, res, n);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    *n = 0;
    return H3_OK;
  }
  if (st != CUBLAS_STATUS_SUCCESS) return cu_lt_fail(d, op, st, "cublasLtMatmulAlgoGetHeuristic");
  return H3_OK;
}

h3_status cu_lt_pick_algo(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc,
                          cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                          cublasLtMatrixLayout_t c, unsigned align, cublasLtMatmulAlgo_t *algo,
                          int *found, h3_diag *d) {
  cu_lt_problem p = {.desc = desc, .a = a, .b = b, .c = c};
  cublasLtMatmulHeuristicResult_t res;
  if (cu_lt_candidates(s, op, &p, align, &res, 1, found, d) != H3_OK) return H3_ERR;
  if (*found > 0) *algo = res.algo;
  return H3_OK;
}

/* One algorithm for g at `align`-byte pointers (see cu_lt_pick_algo). */
static h3_status pick_algo(cu_state *s, cu_gemm *g, unsigned align, int *found, h3_diag *d) {
  if (cu_lt_pick_algo(s, g->op, g->desc, g->a, g->b, g->c, align, &g->algo, found, d) != H3_OK)
    return H3_ERR;
  if (*found > 0) g->align = align;
  return H3_OK;
}

static h3_status build(cu_state *s, cu_gemm *g, cudaDataType_t dt, int *found, h3_diag *d) {
  if (cu_lt_tn_desc(g->op, &g->desc, d) != H3_OK) return H3_ERR;
  /* a `beside` linear runs while the other stream has work: an algorithm for fewer SMs, so
     that the other stream's kernels find SMs free (the heuristic, the tuning and the launch) */
  int32_t sms = h3_op_attr_int(g->op, "beside", 0) && s->side.sm_reserve > 0 ? s->sm_count - s->side.sm_reserve : 0;
  if (sms > 0)
    LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
  if (g->bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    int32_t bt = dt;
    LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
  }
  if (cu_lt_tn_layouts(g->op, g->M, g->N, g->K, dt, &g->a, &g->b, &g->c, d) != H3_OK) return H3_ERR;
  if (pick_algo(s, g, 16, found, d) != H3_OK) return H3_ERR;
  if (!*found && sms > 0) { /* none for fewer SMs: the whole card's, not the own GEMM */
    sms = 0;
    LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    if (pick_algo(s, g, 16, found, d) != H3_OK) return H3_ERR;
  }
  if (!*found || g->bias) return H3_OK; /* (a bias GEMM would need a scratch bias to time) */
  return cu_lt_tn_tune(s, g->op, g->desc, g->a, g->b, g->c, g->M, g->N, g->K, dt == CUDA_R_16BF ? 2 : 4,
                       &g->algo, NULL, d);
}

h3_status cu_gemm_prepare(cu_state *s, const h3_op *op, cu_gemm **out, h3_diag *d) {
  *out = NULL;
  if (op->n_operands < 2 || op->n_results < 1) return cu_op_error(d, op, NULL, "malformed linear");
  const h3_type *x = &op->operands[0]->type, *w = &op->operands[1]->type;
  const h3_type *y = &op->results[0]->type;
  bool bias = op->n_operands > 2;
  if (x->dtype != H3_BF16 || w->dtype != H3_BF16 || (y->dtype != H3_BF16 && y->dtype != H3_F32) ||
      (bias && op->operands[2]->type.dtype != y->dtype) || x->rank < 1 || w->rank != 2)
    return H3_OK; /* the backend's own GEMM takes it */
  int64_t K = x->dims[x->rank - 1], N = w->dims[0];
  int64_t M = K ? h3_type_numel(x) / K : 0;
  if (M < 1 || N < 1 || K < 1) return H3_OK;
  cu_gemm *g = calloc(1, sizeof *g);
  if (!g) return cu_op_error(d, op, H3_HINT_OOM, "out of memory");
  g->op = op;
  g->M = M;
  g->N = N;
  g->K = K;
  g->bias = bias;
  int found = 0;
  if (build(s, g, y->dtype == H3_BF16 ? CUDA_R_16BF : CUDA_R_32F, &found, d) != H3_OK) {
    cu_gemm_free(g);
    return H3_ERR;
  }
  if (!found) cu_gemm_free(g); /* no cuBLASLt algorithm: the backend's own GEMM takes it */
  else *out = g;
  return H3_OK;
}

static unsigned ptr_align(const void *p) {
  uintptr_t v = (uintptr_t)p;
  unsigned a = 16;
  while (a > 2 && v % a) a /= 2;
  return a;
}

h3_status cu_gemm_run(cu_state *s, cu_gemm *g, const h3_tensor *in, int n_in, const h3_tensor *out,
                      h3_diag *d) {
  unsigned al = ptr_align(in[0].data);
  unsigned a2 = ptr_align(in[1].data), a3 = ptr_align(out[0].data);
  if (a2 < al) al = a2;
  if (a3 < al) al = a3;
  if (al < g->align) {
    int found = 0;
    if (pick_algo(s, g, al, &found, d) != H3_OK) return H3_ERR;
    if (!found)
      return cu_op_error(d, g->op, CU_HINT_UNSUPPORTED,
                         "cuBLASLt has no algorithm for [%lld, %lld] x [%lld, %lld]ᵀ "
                         "at %u-byte aligned pointers",
                         (long long)g->M, (long long)g->K, (long long)g->N, (long long)g->K, al);
  }
  if (g->bias && n_in > 2) {
    const void *bp = in[2].data;
    LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
  }
  float alpha = 1.0f, beta = 0.0f;
  LT_CHECK(d, g->op, cublasLtMatmul((cublasLtHandle_t)s->lt, g->desc, &alpha, in[1].data, g->a,
                                    in[0].data, g->b, &beta, out[0].data, g->c, out[0].data, g->c,
                                    &g->algo, s->workspace, CU_WORKSPACE_BYTES, s->stream));
  return H3_OK;
}
