/* cuda_lt.h: what the cuBLASLt users of the cuda backend share (cuda_gemm.c, cuda_int8.c):
 * the error report of a failed cuBLASLt call and the heuristic query of one algorithm. */
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

#endif
