/* cuda_lt.h: what the cuBLASLt users of the cuda backend share (cuda_gemm.c, cuda_int8.c,
 * cuda_m31_moe_lt.c): the error report of a failed cuBLASLt call, the heuristic query of one
 * algorithm, tuning, and linear's TN problem. */
#ifndef H3_CUDA_LT_H
#define H3_CUDA_LT_H

#include "cuda_internal.h"

#include <cublasLt.h>

/* Reports a failed cuBLASLt call on op (NULL: no op) and returns H3_ERR. */
h3_status cu_lt_fail(h3_diag *d, const h3_op *op, cublasStatus_t st, const char *call);

#define LT_CHECK(d, op, call)                                                              \
  do {                                                                                     \
    cublasStatus_t lt_s_ = (call);                                                         \
    if (lt_s_ != CUBLAS_STATUS_SUCCESS) return cu_lt_fail((d), (op), lt_s_, #call);        \
  } while (0)

/* Asks the heuristic for one algorithm of desc over layouts a, b, c (c also as D) with the
 * fixed workspace and `align`-byte pointers. H3_OK with *found = 1 and *algo set, or *found
 * = 0 when cuBLASLt has none (not an error: the caller decides); H3_ERR after a report. */
h3_status cu_lt_pick_algo(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc,
                          cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                          cublasLtMatrixLayout_t c, unsigned align, cublasLtMatmulAlgo_t *algo,
                          int *found, h3_diag *d);

/* One GEMM problem as cuBLASLt sees it: D = op(A)·op(B) with C = D (layout c), the bytes of
 * each operand (for scratch copies) and a text key naming shape and dtypes. */
typedef struct {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  size_t a_bytes, b_bytes, c_bytes;
  char key[160];
} cu_lt_problem;

/* Up to `max` heuristic results for p at `align`-byte pointers, best guess first; *n = 0
 * when cuBLASLt has none. */
h3_status cu_lt_candidates(cu_state *s, const h3_op *op, const cu_lt_problem *p, unsigned align,
                           cublasLtMatmulHeuristicResult_t *res, int max, int *n, h3_diag *d);

/* cuda_gemm_tune.c: for a problem of >= 1e11 FLOPs, replaces *algo (the heuristic's pick)
 * by the fastest candidate, timed once per machine and kept in the kernel cache folder. */
h3_status cu_lt_tune(cu_state *s, const h3_op *op, const cu_lt_problem *p, double flops,
                     cublasLtMatmulAlgo_t *algo, h3_diag *d);
/* Whether cu_lt_tune picks p's algorithm by timing (large enough, tuning on); else it keeps
 * the heuristic's pick. */
bool cu_lt_tunes(const cu_state *s, const cu_lt_problem *p, double flops);

/* `linear`'s TN problem y[M, N] = x[M, K] . w[N, K]^T with bf16 x and w (cuda_gemm.c): its
 * descriptor (fp32 compute and scale, w transposed) and layouts (a: w, b: x, c: y of dtype
 * out; NULL where not made); H3_ERR after a report. cu_lt_layouts_free takes NULLs. */
h3_status cu_lt_tn_desc(const h3_op *op, cublasLtMatmulDesc_t *desc, h3_diag *d);
h3_status cu_lt_tn_layouts(const h3_op *op, int64_t M, int64_t N, int64_t K, cudaDataType_t out,
                           cublasLtMatrixLayout_t *a, cublasLtMatrixLayout_t *b, cublasLtMatrixLayout_t *c,
                           h3_diag *d);
void cu_lt_layouts_free(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c);
/* cu_lt_tune of that problem at 16-byte pointers (y elements of out_bytes), keyed by its
 * shape alone, so that every GEMM of one shape shares the choice; *tuned (NULL: not wanted)
 * whether the choice was timed (or read back from an earlier timing). */
h3_status cu_lt_tn_tune(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int64_t M, int64_t N, int64_t K,
                        size_t out_bytes, cublasLtMatmulAlgo_t *algo, bool *tuned, h3_diag *d);

#endif
