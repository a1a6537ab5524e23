/* cuda_m31_moe_lt.c: moe's cuBLASLt form, for many rows per expert (a prefill of many prompts
 * at once: P x 2048 rows, thousands per expert).
 *
 * There the experts' GEMMs are large dense GEMMs, and cuBLASLt runs them faster than the
 * grouped wgmma kernels (measured on the H200 at the prefill's shapes: one dense cuBLAS GEMM
 * of the same FLOPs 1.75 x faster). The form: the route kernel lists each expert's rows; their
 * counts come to the host (one synchronisation: a graph holding such a moe is never captured,
 * cu_graph_host_reads); H3_MOE_GATHER_NAME copies the rows in expert order into one buffer;
 * per expert two cuBLASLt GEMMs (bf16 operands, fp32 accumulation, bf16 results, as `linear`)
 * with H3_MOE_SWIGLU_NAME between them; H3_MOE_COMBINE_AT_NAME adds the chosen experts'
 * outputs in the reference's order. Each weight's expert GEMMs run the algorithm
 * cuda_gemm_tune.c picks once per machine for the op's mean rows per expert (where cuBLASLt
 * accepts it for an expert's rows; else the heuristic's first pick), as `linear`'s large
 * GEMMs do. The contract is the other forms': act = bf16(swigluoai(
 * bf16(h . gate), bf16(h . up))), y = bf16(act . down), out = sum of w * y in ascending
 * expert order (kernels/m31_moe.cu); only the GEMMs' summation order differs.
 */
#include "cuda_lt.h"
#include "cuda_m31.h"

#include <stdlib.h>
#include <string.h>

/* From MOE_LT_ROWS rows per expert on average (H3_MOE_LT_ROWS=N, read once per process, sets
 * N; 0 turns the form off): a prefill group of 16 prompts of 2048 rows has 4096 per expert at 32 experts, top-4;
 * one prompt 256, where the grouped kernels stay. */
enum { MOE_LT_ROWS = 1024 };

/* Read once: the scratch laid out when an op is prepared must be the one its runs use. */
static long long lt_rows(void) {
  static long long rows = -1;
  if (rows < 0) {
    const char *env = getenv("H3_MOE_LT_ROWS");
    rows = env && atoll(env) >= 0 ? atoll(env) : MOE_LT_ROWS;
  }
  return rows;
}

bool cu_m31_moe_lt(const h3_op *op) {
  if (op->code != H3_OP_MOE || op->n_operands < 5) return false;
  const h3_type *h = &op->operands[0]->type, *gu = &op->operands[1]->type, *dn = &op->operands[2]->type;
  const h3_type *ids = &op->operands[3]->type;
  if (h->rank != 2 || gu->rank != 3 || ids->rank != 2) return false;
  long long T = h->dims[0], H = h->dims[1], E = gu->dims[0], F = gu->dims[1] / 2, k = ids->dims[1];
  long long rows = lt_rows();
  return rows > 0 && h->dtype == H3_BF16 && gu->dtype == H3_BF16 && dn->dtype == H3_BF16 &&
         H % 128 == 0 && F % 128 == 0 && k <= 16 && T * k >= rows * E && T * k < (1ll << 31);
}

/* One weight's expert GEMMs (N, K) of an op: the algorithm cuda_gemm_tune.c picks for the
 * op's mean rows per expert, made odd (tuning checks its output against the heuristic's
 * pick, and an odd M puts a partial tile under that check), so that the choice is a
 * function of the op's shape alone; `tuned` false where nothing was tuned (tuning off, or
 * cuBLASLt has no algorithm): each GEMM then takes the heuristic's first pick for its rows. */
typedef struct {
  cublasLtMatmulAlgo_t algo;
  bool tuned;
} expert_algo;

/* H3_MOE_LT_TUNE=0 (read once per process): every expert GEMM takes the heuristic's pick
 * for its rows, as before the tuning (to compare the two). */
static bool lt_tune_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *env = getenv("H3_MOE_LT_TUNE");
    on = !(env && !strcmp(env, "0"));
  }
  return on;
}

static h3_status tune_experts(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, int64_t mean_rows,
                              int64_t N, int64_t K, expert_algo *ea, h3_diag *d) {
  const int64_t M = mean_rows | 1;
  cublasLtMatrixLayout_t a, b, c;
  ea->tuned = false;
  if (!lt_tune_on()) return H3_OK;
  h3_status st = cu_lt_tn_layouts(op, M, N, K, CUDA_R_16BF, &a, &b, &c, d);
  int found = 0;
  if (st == H3_OK) st = cu_lt_pick_algo(s, op, desc, a, b, c, 16, &ea->algo, &found, d);
  if (st == H3_OK && found) st = cu_lt_tn_tune(s, op, desc, a, b, c, M, N, K, 2, &ea->algo, &ea->tuned, d);
  cu_lt_layouts_free(a, b, c);
  return st;
}

/* y[M, N] = x[M, K] . w[N, K]^T, bf16 in and out, fp32 accumulation: `linear`'s TN problem
 * (cuda_gemm.c) for 16-byte aligned pointers, by ea's tuned algorithm where cuBLASLt accepts
 * it for M rows, else the heuristic's first pick for them. */
static h3_status lt_gemm(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, const expert_algo *ea,
                         const void *x, const void *w, void *y, int64_t M, int64_t N, int64_t K, h3_diag *d) {
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  int found = 0;
  h3_status st = cu_lt_tn_layouts(op, M, N, K, CUDA_R_16BF, &a, &b, &c, d);
  if (st == H3_OK) {
    cublasLtMatmulHeuristicResult_t chk;
    if (ea->tuned && cublasLtMatmulAlgoCheck((cublasLtHandle_t)s->lt, desc, a, b, c, c, &ea->algo, &chk) ==
                         CUBLAS_STATUS_SUCCESS &&
        chk.workspaceSize <= CU_WORKSPACE_BYTES)
      algo = ea->algo, found = 1, st = H3_OK;
    else
      st = cu_lt_pick_algo(s, op, desc, a, b, c, 16, &algo, &found, d);
  }
  if (st == H3_OK && !found)
    st = cu_op_error(d, op, "set H3_MOE_LT_ROWS=0 (the grouped kernels take every moe)",
                     "cuBLASLt has no algorithm for an expert GEMM of %lld x %lld x %lld",
                     (long long)M, (long long)N, (long long)K);
  float one = 1.0f, zero = 0.0f;
  cublasStatus_t r = CUBLAS_STATUS_SUCCESS;
  if (st == H3_OK)
    r = cublasLtMatmul((cublasLtHandle_t)s->lt, desc, &one, w, a, x, b, &zero, y, c, y, c, &algo,
                       s->workspace, CU_WORKSPACE_BYTES, s->stream);
  cu_lt_layouts_free(a, b, c);
  if (st == H3_OK && r != CUBLAS_STATUS_SUCCESS) return cu_lt_fail(d, op, r, "cublasLtMatmul");
  return st;
}

/* Per expert e with rows: GEMM of its rows [off, off + n) of `from` (ld K) by weight e of
 * `w` ([E, N, K]) into the same rows of `to` (ld N). */
static h3_status expert_gemms(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, const expert_algo *ea,
                              const int *counts, int64_t E, const char *from, const char *w,
                              char *to, int64_t N, int64_t K, h3_diag *d) {
  int64_t off = 0;
  for (int64_t e = 0; e < E; e++) {
    int64_t n = counts[e];
    if (n > 0 && lt_gemm(s, op, desc, ea, from + off * K * 2, w + e * N * K * 2, to + off * N * 2, n, N,
                         K, d) != H3_OK)
      return H3_ERR;
    off += n;
  }
  return H3_OK;
}

h3_status cu_m31_run_moe_lt(cu_state *s, const h3_op *op, const cu_m31_moe_parts *p, h3_diag *d) {
  const h3_tensor *in = p->in;
  long long T = in[0].type.dims[0], H = in[0].type.dims[1], F = in[1].type.dims[1] / 2;
  long long E = in[1].type.dims[0];
  int k = (int)in[3].type.dims[1];
  static const char *const part[4] = {"r", "g", "s", "a"};
  static const char *const macro[4] = {"MOE_ROUTE", "MOE_GATHER", "MOE_SWIGLU", "MOE_COMBINE_AT"};
  cu_kernel *kn[4];
  if (cu_m31_moe_kernels(s, op, in, p->out, part, macro, kn, d) != H3_OK) return H3_ERR;
  if (T == 0) return H3_OK;
  const void *h = in[0].data, *ids = p->ids, *w = in[4].data;
  void *lists = p->lists, *counts = p->counts, *xs = p->y, *at = p->at, *o = p->out->data;
  void *u = p->u, *act = p->act, *y = p->y;
  int64_t b256[3] = {256, 1, 1}, ge[3] = {E, 1, 1};
  void *ar[] = {&ids, &lists, &counts, &T, &k};
  if (cu_launch(s, kn[0], ge, b256, 0, ar, d) != H3_OK) return H3_ERR;
  /* slots the lists do not hold (a row's second slot of one expert, another rank's) point at
     row 0: the combine may load them, never adds them */
  CU_CHECK(d, cudaMemsetAsync(at, 0, (size_t)(T * k) * sizeof(int), s->stream), "moe: slot rows");
  int *hc = malloc((size_t)E * sizeof *hc);
  if (!hc) return cu_op_error(d, op, H3_HINT_OOM, "out of host memory for %lld expert counts", E);
  cudaError_t ce = cudaMemcpyAsync(hc, counts, (size_t)E * sizeof *hc, cudaMemcpyDeviceToHost, s->stream);
  if (ce == cudaSuccess) ce = cudaStreamSynchronize(s->stream);
  if (ce != cudaSuccess) {
    free(hc);
    return cu_op_error(d, op, NULL, "moe: reading the expert counts: %s", cudaGetErrorString(ce));
  }
  long long rows = 0;
  for (long long e = 0; e < E; e++) rows += hc[e];
  int64_t gg[3] = {E, 64, 1};
  void *ag[] = {&h, &lists, &counts, &xs, &at, &T, &H, &k};
  cublasLtMatmulDesc_t desc = NULL;
  float alpha = (float)h3_op_attr_float(op, "alpha", 1.702), limit = (float)h3_op_attr_float(op, "limit", 7.0);
  long long twoF = 2 * F;
  int64_t blocks = (rows * F / 2 + 255) / 256;
  int64_t gs[3] = {blocks < 8 * s->sm_count ? (blocks > 0 ? blocks : 1) : 8 * s->sm_count, 1, 1};
  void *as[] = {&u, &act, &rows, &F, &alpha, &limit};
  void *a3[] = {&ids, &w, &y, &at, &o, &H, &k};
  int64_t g3[3] = {T, (H + 2047) / 2048, 1};
  h3_status st = cu_launch(s, kn[1], gg, b256, 0, ag, d);
  if (st == H3_OK) st = cu_lt_tn_desc(op, &desc, d);
  /* the algorithms, for the op's mean rows per expert (its shape, not this run's routing) */
  expert_algo ea[2];
  const int64_t mean_rows = (T * k + E - 1) / E;
  if (st == H3_OK) st = tune_experts(s, op, desc, mean_rows, twoF, H, &ea[0], d);
  if (st == H3_OK) st = tune_experts(s, op, desc, mean_rows, H, F, &ea[1], d);
  if (st == H3_OK)
    st = expert_gemms(s, op, desc, &ea[0], hc, E, xs, in[1].data, u, twoF, H, d); /* xs . gate_up */
  if (st == H3_OK && rows) st = cu_launch(s, kn[2], gs, b256, 0, as, d);
  if (st == H3_OK) st = expert_gemms(s, op, desc, &ea[1], hc, E, act, in[2].data, y, H, F, d); /* . down */
  if (st == H3_OK) st = cu_launch(s, kn[3], g3, b256, 0, a3, d);
  if (desc) cublasLtMatmulDescDestroy(desc);
  free(hc);
  return st;
}
