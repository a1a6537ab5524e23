/* cuda_int8.c: linear_int8 and matmul_i8 on the cuda backend (docs/int8.md sections 5 and 6),
 * bitwise equal to the CPU reference (runtime/cpu/ops_int8.c).
 *
 * linear_int8(q i8[.., K], s_x f32[M], wq i8[N, K], s_w f32[N], bias?[N]) -> y[.., N], M =
 * rows of q, runs in row chunks of R rows (the op's `chunk_rows`, else M; capped so that one
 * chunk's accumulators fit CU_INT8_ACC_MAX_BYTES, which is bitwise neutral: every output
 * depends on its row alone). Per chunk [m0, m0 + r):
 *   1. acc[r, N] int32 = q[m0:m0+r] · wqᵀ, exact: cuBLASLt int8 "TN" GEMM (compute
 *      CUBLAS_COMPUTE_32I, scale CUDA_R_32I, alpha 1, beta 0). Column-major terms: A = wq as
 *      [K, N] ld K transposed, B = q chunk as [K, r] ld K, D = acc as [N, r] ld N (= row-major
 *      [r, N]). IMMA with the regular (non-COL32) ordering needs the TN form, the GEMM's m
 *      (= N) and k (= K) and every leading dimension multiples of 4, and 4-byte (better
 *      16-byte) aligned pointers. Shapes that miss this, or that cuBLASLt has no algorithm
 *      for, use the backend's own int32 kernel (h3cu_i8gemm: one thread per output, k
 *      ascending; int32 sums are exact, so any order gives the same acc).
 *   2. y[m0 + i, n] = dtype(((float)acc[i, n] * s_x[m0 + i]) * s_w[n] + bias[n]): the fixed
 *      epilogue, __fmul_rn, __fmul_rn, __fadd_rn (no add without a bias), one rounding
 *      (h3cu_i8dq_<bias>_<y>, an NVRTC kernel of this file, per dtype combination).
 * The accumulators live in one int32 scratch buffer of the backend (s->i8_acc), sized when
 * the ops are prepared (at h3_cuda_load_plan for a plan) to the largest chunk, so runs
 * allocate nothing and can be captured in CUDA graphs.
 * matmul_i8(q, wq) {chunk_rows?} -> i32[.., N] (int8-dequant-split's half of linear_int8; its
 * dequant_i8 is a codegen kernel, fused into the consumers) is step 1 alone, per chunk of
 * chunk_rows rows (else all M at once; no cap: there is no scratch), written straight into
 * the op's result at row m0 (m0 * N * 4 bytes: 16-byte aligned when N % 4 == 0).
 * Descriptors and algorithm are chosen once per distinct chunk shape (the full chunk and the remainder) at prepare time for
 * 16-byte aligned pointers; a run with less aligned pointers asks the heuristic again for that
 * alignment (kept from then on), as cuda_gemm.c does.
 */
#include "cuda_lt.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GEMM shape: a chunk of `rows` rows. */
typedef struct {
  int64_t rows;
  cublasLtMatrixLayout_t b, c;
  cublasLtMatmulAlgo_t algo;
  unsigned align; /* pointer alignment the algorithm was chosen for; 0: own kernel */
} i8_shape;

struct cu_int8 {
  const h3_op *op;
  bool acc_only;          /* matmul_i8: the accumulators are the result, no dequant */
  int64_t M, N, K, chunk; /* chunk: rows per GEMM actually run */
  cublasLtMatmulDesc_t desc; /* NULL: cuBLASLt cannot take the shape, own kernel */
  cublasLtMatrixLayout_t a;
  i8_shape shapes[2]; /* [0] full chunk, [1] remainder (rows 0: none) */
  cu_kernel *dequant, *own_gemm;
};

/* ---- kernels ------------------------------------------------------------------------------- */
void cu_int8_defines(char *buf, size_t len, const char *gemm_name, const char *dq_name,
                     h3_dtype bias, h3_dtype y) {
  snprintf(buf, len,
           "#define H3_I8_GEMM_NAME %s\n#define H3_I8_DQ_NAME %s\n#define H3_B_T %s\n"
           "#define H3_Y_T %s\n",
           gemm_name, dq_name, h3_kernel_ctype(bias == H3_DTYPE_COUNT ? H3_F32 : bias),
           h3_kernel_ctype(y));
}

/* The own GEMM and the dequant kernel for (bias dtype or H3_DTYPE_COUNT, y dtype). */
static h3_status int8_kernels(cu_state *s, cu_int8 *g, h3_dtype bias, h3_dtype y, h3_diag *d) {
  char gname[96], dname[96];
  snprintf(gname, sizeof gname, "h3cu_i8gemm_%s_%s", bias == H3_DTYPE_COUNT ? "nobias" :
           h3_dtype_name(bias), h3_dtype_name(y));
  snprintf(dname, sizeof dname, "h3cu_i8dq_%s_%s", bias == H3_DTYPE_COUNT ? "nobias" :
           h3_dtype_name(bias), h3_dtype_name(y));
  cu_kernel *ks[2] = {cu_kernel_find(s, gname), cu_kernel_find(s, dname)};
  if (ks[0] && ks[1]) {
    if (!ks[0]->fn || !ks[1]->fn)
      return cu_op_error(d, g->op, CU_HINT_EARLIER, "kernel %s failed to load earlier", dname);
  } else {
    char defs[512];
    cu_int8_defines(defs, sizeof defs, gname, dname, bias, y);
    const char *names[2] = {gname, dname};
    if (cu_compile_tu(s, defs, "int8_gemm.cu", true, 2, names, ks, d) != H3_OK) return H3_ERR;
  }
  g->own_gemm = ks[0];
  g->dequant = ks[1];
  return H3_OK;
}

static void grid_1d(const cu_state *s, int64_t work, int64_t grid[3], int64_t block[3]) {
  int64_t g = (work + 255) / 256, cap = (int64_t)(s->sm_count > 0 ? s->sm_count : 1) * 32;
  grid[0] = g < 1 ? 1 : (g > cap ? cap : g);
  grid[1] = grid[2] = 1;
  block[0] = 256;
  block[1] = block[2] = 1;
}

/* ---- cuBLASLt ------------------------------------------------------------------------------ */
/* One algorithm of shape sh at `align`-byte pointers (see cu_lt_pick_algo). */
static h3_status pick_algo(cu_state *s, cu_int8 *g, i8_shape *sh, unsigned align, int *found,
                           h3_diag *d) {
  if (cu_lt_pick_algo(s, g->op, g->desc, g->a, sh->b, sh->c, align, &sh->algo, found, d) != H3_OK)
    return H3_ERR;
  if (*found > 0) sh->align = align;
  return H3_OK;
}

/* Descriptors and algorithms for every shape; leaves g->desc NULL (own kernel) when
 * cuBLASLt cannot take one of them. */
static h3_status build_lt(cu_state *s, cu_int8 *g, h3_diag *d) {
  if (!s->lt || g->N % 4 || g->K % 4) return H3_OK; /* IMMA: m, k, ld multiples of 4 */
  LT_CHECK(d, g->op, cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_CHECK(d, g->op, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LT_CHECK(d, g->op, cublasLtMatrixLayoutCreate(&g->a, CUDA_R_8I, (uint64_t)g->K, (uint64_t)g->N, g->K));
  for (int i = 0; i < 2; i++) {
    i8_shape *sh = &g->shapes[i];
    if (!sh->rows) continue;
    LT_CHECK(d, g->op, cublasLtMatrixLayoutCreate(&sh->b, CUDA_R_8I, (uint64_t)g->K, (uint64_t)sh->rows, g->K));
    LT_CHECK(d, g->op, cublasLtMatrixLayoutCreate(&sh->c, CUDA_R_32I, (uint64_t)g->N, (uint64_t)sh->rows, g->N));
    int found = 0;
    if (pick_algo(s, g, sh, 16, &found, d) != H3_OK) return H3_ERR;
    if (!found) { /* no algorithm: the whole op runs on the own kernel */
      cublasLtMatmulDescDestroy(g->desc);
      g->desc = NULL;
      return H3_OK;
    }
  }
  return H3_OK;
}

void cu_int8_free(cu_int8 *g) {
  if (!g) return;
  for (int i = 0; i < 2; i++) {
    if (g->shapes[i].b) cublasLtMatrixLayoutDestroy(g->shapes[i].b);
    if (g->shapes[i].c) cublasLtMatrixLayoutDestroy(g->shapes[i].c);
  }
  if (g->a) cublasLtMatrixLayoutDestroy(g->a);
  if (g->desc) cublasLtMatmulDescDestroy(g->desc);
  free(g);
}

/* Makes s->i8_acc hold at least `bytes`. */
static h3_status reserve_acc(cu_state *s, const h3_op *op, size_t bytes, h3_diag *d) {
  if (bytes <= s->i8_acc_bytes) return H3_OK;
  if (cu_graph_capturing(s))
    return cu_op_error(d, op, "load the plan (h3_cuda_load_plan) before capturing graphs",
                       "the int8 accumulator buffer cannot grow while a CUDA graph is captured");
  if (s->i8_acc) {
    CU_CHECK(d, cudaStreamSynchronize(s->stream), "int8 accumulator buffer");
    cu_release(s, s->i8_acc);
  }
  s->i8_acc = cu_alloc(s, bytes);
  s->i8_acc_bytes = s->i8_acc ? bytes : 0;
  if (!s->i8_acc)
    return cu_op_error(d, op, "lower H3_INT8_MAX_ROWS to shrink it",
                       "out of device memory for the %zu-byte int8 accumulator buffer", bytes);
  return H3_OK;
}

h3_status cu_int8_prepare(cu_state *s, const h3_op *op, cu_int8 **out, h3_diag *d) {
  *out = NULL;
  bool acc_only = op->code == H3_OP_MATMUL_I8;
  if (op->n_operands < (acc_only ? 2 : 4) || op->n_results < 1)
    return cu_op_error(d, op, "recompile the plan with h3c", "malformed %s",
                       h3_opcode_name(op->code));
  const h3_type *q = &op->operands[0]->type, *w = &op->operands[acc_only ? 1 : 2]->type;
  const h3_type *y = &op->results[0]->type;
  h3_dtype bias = !acc_only && op->n_operands > 4 ? op->operands[4]->type.dtype : H3_DTYPE_COUNT;
  bool scales_ok = acc_only ? y->dtype == H3_I32
                            : op->operands[1]->type.dtype == H3_F32 &&
                                  op->operands[3]->type.dtype == H3_F32;
  if (q->dtype != H3_I8 || w->dtype != H3_I8 || !scales_ok || q->rank < 1 || w->rank != 2 ||
      w->dims[1] != q->dims[q->rank - 1])
    return cu_op_error(d, op, "recompile the plan with h3c",
                       acc_only ? "expects q i8[.., K], wq i8[N, K] -> i32[.., N]"
                                : "expects q i8[.., K], s_x f32, wq i8[N, K], s_w f32[N]");
  cu_int8 *g = calloc(1, sizeof *g);
  if (!g) return cu_op_error(d, op, H3_HINT_OOM, "out of memory");
  g->op = op;
  g->acc_only = acc_only;
  g->K = q->dims[q->rank - 1];
  g->N = w->dims[0];
  g->M = g->K ? h3_type_numel(q) / g->K : 0;
  int64_t chunk = h3_op_attr_int(op, "chunk_rows", 0);
  if (chunk <= 0 || chunk > g->M) chunk = g->M;
  int64_t cap = g->N ? (int64_t)(CU_INT8_ACC_MAX_BYTES / ((size_t)g->N * 4)) : chunk;
  if (!acc_only && cap < chunk) chunk = cap >= 8 ? cap / 8 * 8 : (cap < 1 ? 1 : cap);
  g->chunk = chunk;
  if (g->M > 0 && g->N > 0) {
    g->shapes[0].rows = chunk;
    g->shapes[1].rows = g->M % chunk;
  }
  /* matmul_i8 needs only the own GEMM of the template (the same in every combination) */
  h3_status st = g->M > 0 && g->N > 0
                     ? int8_kernels(s, g, bias, acc_only ? H3_F32 : y->dtype, d)
                     : H3_OK;
  if (st == H3_OK && !acc_only && g->M > 0 && g->N > 0)
    st = reserve_acc(s, op, (size_t)(chunk * g->N) * 4, d);
  if (st == H3_OK && g->M > 0 && g->N > 0 && g->K > 0) st = build_lt(s, g, d);
  if (st != H3_OK) {
    cu_int8_free(g);
    return H3_ERR;
  }
  *out = g;
  return H3_OK;
}

static unsigned ptr_align(const void *p) {
  uintptr_t v = (uintptr_t)p;
  unsigned a = 16;
  while (a > 1 && v % a) a /= 2;
  return a;
}

/* acc[rows, N] = q[rows, K] · wqᵀ (acc: s->i8_acc, or matmul_i8's result at the chunk). */
static h3_status chunk_gemm(cu_state *s, cu_int8 *g, i8_shape *sh, const int8_t *q,
                            const int8_t *wq, void *acc, h3_diag *d) {
  unsigned al = ptr_align(q), a2 = ptr_align(wq), a3 = ptr_align(acc);
  if (a2 < al) al = a2;
  if (a3 < al) al = a3;
  if (g->desc && al >= 4 && al < sh->align) {
    int found = 0;
    if (pick_algo(s, g, sh, al, &found, d) != H3_OK) return H3_ERR;
    if (!found) sh->align = 0; /* the own kernel from now on */
  }
  if (g->desc && al >= 4 && sh->align) {
    int32_t alpha = 1, beta = 0;
    LT_CHECK(d, g->op, cublasLtMatmul((cublasLtHandle_t)s->lt, g->desc, &alpha, wq, g->a, q,
                                      sh->b, &beta, acc, sh->c, acc, sh->c, &sh->algo,
                                      s->workspace, CU_WORKSPACE_BYTES, s->stream));
    return H3_OK;
  }
  long long rows = sh->rows, N = g->N, K = g->K;
  void *args[] = {&q, &wq, &acc, &rows, &N, &K};
  int64_t grid[3], block[3];
  grid_1d(s, rows * N, grid, block);
  return cu_launch(s, g->own_gemm, grid, block, 0, args, d);
}

static i8_shape *shape_of(cu_int8 *g, int64_t rows) {
  return rows == g->shapes[0].rows ? &g->shapes[0] : &g->shapes[1];
}

/* matmul_i8: the chunks' GEMMs straight into acc [M, N] int32 (device). */
static h3_status run_acc_only(cu_state *s, cu_int8 *g, const h3_tensor *in, int32_t *acc,
                              h3_diag *d) {
  if (g->K == 0)
    CU_CHECK(d, cudaMemsetAsync(acc, 0, (size_t)(g->M * g->N) * 4, s->stream), "int8 accumulators");
  for (int64_t m0 = 0; g->K > 0 && m0 < g->M; m0 += g->chunk) {
    int64_t r = g->M - m0 < g->chunk ? g->M - m0 : g->chunk;
    if (chunk_gemm(s, g, shape_of(g, r), (const int8_t *)in[0].data + m0 * g->K, in[1].data,
                   acc + m0 * g->N, d) != H3_OK)
      return H3_ERR;
  }
  return H3_OK;
}

h3_status cu_int8_run(cu_state *s, cu_int8 *g, const h3_tensor *in, int n_in, const h3_tensor *out,
                      h3_diag *d) {
  if (g->M == 0 || g->N == 0) return H3_OK;
  if (g->acc_only) return run_acc_only(s, g, in, out[0].data, d);
  size_t osize = h3_dtype_size(out[0].type.dtype);
  long long N = g->N;
  const void *sw = in[3].data, *bias = n_in > 4 ? in[4].data : NULL;
  if (g->K == 0) /* acc = 0 everywhere */
    CU_CHECK(d, cudaMemsetAsync(s->i8_acc, 0, (size_t)(g->chunk * g->N) * 4, s->stream),
             "int8 accumulators");
  for (int64_t m0 = 0; m0 < g->M; m0 += g->chunk) {
    int64_t r = g->M - m0 < g->chunk ? g->M - m0 : g->chunk;
    if (g->K > 0 &&
        chunk_gemm(s, g, shape_of(g, r), (const int8_t *)in[0].data + m0 * g->K, in[2].data,
                   s->i8_acc, d) != H3_OK)
      return H3_ERR;
    const void *acc = s->i8_acc, *sx = (const float *)in[1].data + m0;
    void *y = (char *)out[0].data + (size_t)(m0 * g->N) * osize;
    long long rows = r;
    void *args[] = {&acc, &sx, &sw, &bias, &y, &rows, &N};
    int64_t grid[3], block[3];
    grid_1d(s, r * g->N, grid, block);
    if (cu_launch(s, g->dequant, grid, block, 0, args, d) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}

h3_status cu_int8_accumulators(cu_state *s, cu_int8 *g, const h3_tensor *in, int32_t *acc,
                               h3_diag *d) {
  if (g->M == 0 || g->N == 0) return H3_OK;
  if (g->acc_only) return run_acc_only(s, g, in, acc, d);
  if (g->K == 0)
    CU_CHECK(d, cudaMemsetAsync(acc, 0, (size_t)(g->M * g->N) * 4, s->stream), "int8 accumulators");
  for (int64_t m0 = 0; g->K > 0 && m0 < g->M; m0 += g->chunk) {
    int64_t r = g->M - m0 < g->chunk ? g->M - m0 : g->chunk;
    if (chunk_gemm(s, g, shape_of(g, r), (const int8_t *)in[0].data + m0 * g->K, in[2].data,
                   s->i8_acc, d) != H3_OK)
      return H3_ERR;
    CU_CHECK(d, cudaMemcpyAsync(acc + m0 * g->N, s->i8_acc, (size_t)(r * g->N) * 4,
                                cudaMemcpyDeviceToDevice, s->stream), "int8 accumulators");
  }
  return H3_OK;
}

bool cu_int8_uses_cublaslt(const cu_int8 *g) { return g->desc != NULL; }
