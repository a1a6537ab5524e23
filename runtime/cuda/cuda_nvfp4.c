/* cuda_nvfp4.c: linear_nvfp4 on the cuda backend (kernels/nvfp4_gemm.cu): its launch shape
 * (cuda_nvfp4.h), its scratch and its one launch. */
#include "cuda_nvfp4.h"

#include "cuda_lt.h"
#include "cuda_m31.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cu_nvfp4_shape cu_nvfp4_shape_of(int64_t M, int64_t N, int64_t K) {
  const int mt = M <= 16 ? 1 : M <= 32 ? 2 : 4;
  const int64_t nch = (K + CU_NVFP4_KC - 1) / CU_NVFP4_KC, rows = M < 16 * mt ? M : 16 * mt;
  cu_nvfp4_shape sh = {(N + CU_NVFP4_COLS - 1) / CU_NVFP4_COLS, 1, (M + rows - 1) / rows, mt, (int)nch, 0};
  sh.smem = (size_t)(3 * rows * CU_NVFP4_RS * 16);
  if (M > CU_NVFP4_ROWS) return sh;
  /* time in bytes per slot: a block's chunk reads 128 x 256 x 0.5625 weight bytes; splits add
     their partials (written once, read once) spread over the slots */
  const double chunk = CU_NVFP4_COLS * CU_NVFP4_KC * 0.5625;
  double best = -1;
  for (int64_t S = 1; S <= CU_NVFP4_MAX_SPLITS && S <= nch; S++) {
    const int64_t cps = (nch + S - 1) / S, used = (nch + cps - 1) / cps;
    const int64_t waves = (sh.cols * used + CU_NVFP4_SLOTS - 1) / CU_NVFP4_SLOTS;
    const double t = (double)(waves * cps) * chunk + (used > 1 ? 8.0 * (double)(used * M * N) / CU_NVFP4_SLOTS : 0);
    if (best < 0 || t < best) best = t, sh.splits = used, sh.cps = (int)cps;
  }
  return sh;
}

bool cu_nvfp4_skinny_applies(int64_t M, int64_t K, bool aligned) {
  return M >= 1 && M <= CU_NVFP4_SK_ROWS && K % CU_NVFP4_KC == 0 && aligned;
}

bool cu_nvfp4_rows_applies(int64_t M, int64_t K, bool aligned) {
  return M >= CU_NVFP4_SX_MIN && M <= CU_NVFP4_SX_ROWS && K % CU_NVFP4_KC == 0 && aligned;
}

int64_t cu_nvfp4_rows_cols(int64_t N) { return (N + CU_NVFP4_SX_COLS - 1) / CU_NVFP4_SX_COLS; }

int64_t cu_nvfp4_rows_splits(int64_t N, int64_t K) {
  const int64_t nch = K / CU_NVFP4_KC, cols = cu_nvfp4_rows_cols(N), warps = 4;
  int64_t best = 1, cost = -1;
  for (int64_t S = 1; S <= CU_NVFP4_MAX_SPLITS && S <= (nch + warps - 1) / warps; S++) {
    const int64_t c = (cols * S + CU_NVFP4_SX_SLOTS - 1) / CU_NVFP4_SX_SLOTS * ((nch + warps * S - 1) / (warps * S));
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}

/* the tiled kernels' scratch: partials and counters with splits, else none */
static size_t tiled_scratch(int64_t M, int64_t N, int64_t K) {
  cu_nvfp4_shape sh = cu_nvfp4_shape_of(M, N, K);
  if (sh.splits == 1) return 0;
  return cu_align256((size_t)(sh.splits * M * N) * 4) + cu_align256((size_t)(sh.cols * sh.mblocks) * 4);
}

int64_t cu_nvfp4_wg_cols(int64_t N) { return (N + CU_NVFP4_WG_COLS - 1) / CU_NVFP4_WG_COLS; }

int64_t cu_nvfp4_wg_splits(int64_t N, int64_t K) {
  const int64_t nch = K / CU_NVFP4_KC, cols = cu_nvfp4_wg_cols(N);
  int64_t best = 1, cost = -1;
  for (int64_t S = 1; S <= CU_NVFP4_MAX_SPLITS && S <= nch; S++) {
    const int64_t cps = (nch + S - 1) / S;
    if ((S - 1) * cps >= nch) continue; /* an empty split */
    const int64_t c = (cols * S + CU_NVFP4_SX_SLOTS - 1) / CU_NVFP4_SX_SLOTS * cps;
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}

size_t cu_nvfp4_wg_smem(int64_t M) { return (size_t)(1024 + 3 * (M <= 8 ? 8 : 16) * 512); }

size_t cu_nvfp4_rows_part(int64_t M, int64_t N, int64_t K) { return tiled_scratch(M, N, K); }

/* the larger of the row-pair and warpgroup forms' splits */
static int64_t rows_max_splits(int64_t N, int64_t K) {
  const int64_t a = cu_nvfp4_rows_splits(N, K), b = cu_nvfp4_wg_splits(N, K);
  return a > b ? a : b;
}

size_t cu_nvfp4_rows_counters(int64_t M, int64_t N, int64_t K) {
  return cu_nvfp4_rows_part(M, N, K) + cu_align256((size_t)(rows_max_splits(N, K) * M * N) * 4);
}

bool cu_nvfp4_dequant_applies(int64_t M, int64_t K, bool aligned) {
  return M > CU_NVFP4_DQ_ROWS && K % CU_NVFP4_KC == 0 && aligned;
}

/* H3_NVFP4_FORM (read at every run, to compare the forms): "tiled" runs the tiled kernels
 * where another form would run; "skinny" the skinny form at 1-8 rows and the tiled kernels at
 * 9-16; "rows" the row-pair form at 5-16 rows, "wg" the warpgroup form there. By default: the
 * skinny form at 1-4 rows, the row-pair form at 5-8 and the warpgroup form at 9-16 (on an
 * H100 at the draft's shapes the row-pair form ran 1.06-1.30 x the skinny form at 8 rows, the
 * warpgroup form 1.02-1.18 x the row-pair form at 16 rows, 0.96-1.17 x at 12, 0.92-1.05 x at 5 and 8;
 * dev/results/2026-12-06-h100-s26-call70-nvfp4-row-pairs.txt, 2026-12-07-h100-s40-call127-128-
 * nvfp4-wgmma.txt), the dequantized form above 64 (on the H200 1.7-1.8 x the tiled kernels at
 * 576 rows), the tiled kernels in between and where none applies. */
enum { FORM_DEFAULT = -1, FORM_TILED = 0, FORM_SKINNY = 1, FORM_ROWS = 2, FORM_WG = 3 };
static int nvfp4_form(void) {
  return cu_env_form("H3_NVFP4_FORM", (const char *const[]){"tiled", "skinny", "rows", "wg", NULL});
}

size_t cu_nvfp4_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  if (cu_nvfp4_dequant_applies(M, K, true)) return cu_align256((size_t)(cu_nvfp4_slab_rows(N, K) * K) * 2) + 256;
  if (cu_nvfp4_rows_applies(M, K, true) && rows_max_splits(N, K) > 1)
    return cu_nvfp4_rows_counters(M, N, K) +
           cu_align256((size_t)cu_nvfp4_rows_cols(N) * 4);
  return tiled_scratch(M, N, K);
}

int64_t cu_nvfp4_slab_rows(int64_t N, int64_t K) {
  const int64_t cap = CU_NVFP4_SLAB_BYTES / (2 * (K > 0 ? K : 1)) / 128 * 128; /* rows in the bytes */
  if (cap < 128) return N < 128 ? N : 128;
  const int64_t slabs = (N + cap - 1) / cap, rows = ((N + slabs - 1) / slabs + 127) / 128 * 128;
  return rows < N ? rows : N;
}

/* The cuBLASLt problem of a slab of ns weight rows: linear's TN layouts of y[:, n0 .. n0 + ns)
 * = g * (x . w_b[n0 .. n0 + ns)^T), whose output columns sit in y's rows of N (ld N), and its
 * algorithm; the slabs of one op share it but for a shorter last one. */
typedef struct {
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  int64_t ns; /* 0: none yet */
} slab_problem;

static h3_status slab_problem_for(cu_state *s, const h3_op *op, cublasLtMatmulDesc_t desc, bool f32, int64_t M,
                                  int64_t N, int64_t K, int64_t ns, slab_problem *p, h3_diag *d) {
  cu_lt_layouts_free(p->a, p->b, p->c);
  *p = (slab_problem){.ns = ns};
  int found = 0;
  h3_status st = cu_lt_tn_layouts(op, M, ns, K, f32 ? CUDA_R_32F : CUDA_R_16BF, &p->a, &p->b, &p->c, d);
  if (st == H3_OK &&
      cublasLtMatrixLayoutSetAttribute(p->c, CUBLASLT_MATRIX_LAYOUT_LD, &N, sizeof N) != CUBLAS_STATUS_SUCCESS)
    st = cu_op_error(d, op, NULL, "cuBLASLt refused the output's row stride %lld", (long long)N);
  if (st == H3_OK) st = cu_lt_pick_algo(s, op, desc, p->a, p->b, p->c, 16, &p->algo, &found, d);
  if (st == H3_OK && !found)
    st = cu_op_error(d, op, "set H3_NVFP4_FORM=tiled (the tiled kernels take every shape)",
                     "cuBLASLt has no algorithm for %lld x %lld x %lld", (long long)M, (long long)ns,
                     (long long)K);
  return st;
}

/* The dequantized form, slab by slab of cu_nvfp4_slab_rows weight rows: kernel dq writes the
 * slab's w_b into scratch, then cuBLASLt its columns of y (alpha = g and beta = 0 read from the
 * device: desc in device pointer mode). */
static h3_status run_dequantized(cu_state *s, const h3_op *op, cu_kernel *dq, void *scratch, const h3_tensor *in,
                                 const h3_tensor *out, long long M, long long N, long long K, h3_diag *d) {
  if (!scratch) return cu_op_error(d, op, NULL, "no weight scratch (the op was not prepared)");
  const int64_t slab = cu_nvfp4_slab_rows(N, K);
  const bool f32 = out[0].type.dtype == H3_F32;
  void *wb = scratch, *beta = (char *)scratch + cu_align256((size_t)(slab * K) * 2);
  cublasLtMatmulDesc_t desc = NULL;
  slab_problem p = {0};
  const cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_DEVICE;
  h3_status st = cu_lt_tn_desc(op, &desc, d);
  if (st == H3_OK &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode) !=
          CUBLAS_STATUS_SUCCESS)
    st = cu_op_error(d, op, NULL, "cuBLASLt refused alpha and beta in device memory");
  for (long long n0 = 0; n0 < N && st == H3_OK; n0 += slab) {
    long long ns = N - n0 < slab ? N - n0 : slab;
    const void *pk = (const char *)in[1].data + n0 * (K / 2), *sc = (const char *)in[2].data + n0 * (K / 16);
    void *args[] = {&pk, &sc, &wb, &ns, &K};
    int64_t grid[3] = {(ns * (K / 8) + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    st = cu_launch(s, dq, grid, block, 0, args, d);
    if (st == H3_OK && ns != p.ns) st = slab_problem_for(s, op, desc, f32, M, N, K, ns, &p, d);
    if (st == H3_OK) {
      void *y = (char *)out[0].data + n0 * (f32 ? 4 : 2);
      cublasStatus_t r = cublasLtMatmul((cublasLtHandle_t)s->lt, desc, in[3].data, wb, p.a, in[0].data, p.b, beta,
                                        y, p.c, y, p.c, &p.algo, s->workspace, CU_WORKSPACE_BYTES, s->stream);
      if (r != CUBLAS_STATUS_SUCCESS) st = cu_lt_fail(d, op, r, "cublasLtMatmul");
    }
  }
  cu_lt_layouts_free(p.a, p.b, p.c);
  if (desc) cublasLtMatmulDescDestroy(desc);
  return st;
}

h3_status cu_nvfp4_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                       const h3_tensor *out, h3_diag *d) {
  const h3_type *xt = &in[0].type;
  long long K = xt->dims[xt->rank - 1], M = K ? h3_type_numel(xt) / K : 0, N = in[1].type.dims[0];
  if (xt->dtype != H3_BF16 || K % 16)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "x must be bf16 with K a multiple of 16 (got %s, K %lld)",
                       h3_dtype_name(xt->dtype), K);
  char base[96], name[9][128], defs[256];
  snprintf(base, sizeof base, "h3cu_nvfp4_%s", DN(out[0].type.dtype));
  snprintf(defs, sizeof defs, "#define H3_NVFP4_NAME %s\n#define O_T %s\n", base,
           h3_kernel_ctype(out[0].type.dtype));
  for (int i = 0; i < 3; i++) snprintf(name[i], sizeof name[i], "%s_m%d", base, 1 << i);
  snprintf(name[3], sizeof name[3], "%s_sk", base);
  snprintf(name[4], sizeof name[4], "%s_dq", base);
  snprintf(name[5], sizeof name[5], "%s_sx", base);
  snprintf(name[6], sizeof name[6], "%s_sx16", base);
  snprintf(name[7], sizeof name[7], "%s_wg", base);
  snprintf(name[8], sizeof name[8], "%s_wg16", base);
  const char *names[9] = {name[0], name[1], name[2], name[3], name[4], name[5], name[6], name[7], name[8]};
  cu_kernel *kns[9];
  /* the file's sm_90 build; the warpgroup form's two kernels (wgmma) from its sm_90a build, on
     the first run that takes them */
  if (cu_m31_kernels(s, op, "nvfp4_gemm.cu", defs, 7, names, kns, d) != H3_OK) return H3_ERR;
  if (M == 0 || N == 0) return H3_OK;
  const void *x = in[0].data, *pk = in[1].data, *sc = in[2].data, *gs = in[3].data;
  void *y = out[0].data;
  /* vector loads: whole chunks, 16-byte aligned rows of x and codes, 4-byte scale words */
  int vec = K % CU_NVFP4_KC == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)pk % 16 == 0 &&
            (uintptr_t)sc % 4 == 0;
  const int form = nvfp4_form();
  if (cu_nvfp4_rows_applies(M, K, vec) && (form == FORM_DEFAULT || form == FORM_ROWS || form == FORM_WG)) {
    /* the warpgroup form, else the row-pair form */
    const bool wg = form == FORM_WG || (form == FORM_DEFAULT && M >= CU_NVFP4_WG_MIN);
    const int64_t splits = wg ? cu_nvfp4_wg_splits(N, K) : cu_nvfp4_rows_splits(N, K);
    const int64_t cols = wg ? cu_nvfp4_wg_cols(N) : cu_nvfp4_rows_cols(N);
    if (splits > 1 && !scratch) return cu_op_error(d, op, NULL, "no partials scratch (the op was not prepared)");
    void *part = splits > 1 ? (char *)scratch + cu_nvfp4_rows_part(M, N, K) : NULL;
    void *cnt = splits > 1 ? (char *)scratch + cu_nvfp4_rows_counters(M, N, K) : NULL;
    void *rargs[] = {&x, &pk, &sc, &gs, &y, &part, &cnt, &M, &N, &K};
    int64_t rgrid[3] = {cols, splits, 1}, rblock[3] = {CU_NVFP4_SK_THREADS, 1, 1};
    if (wg && cu_m31_kernels_sm90a(s, op, "nvfp4_gemm.cu", defs, 2, names + 7, kns + 7, d) != H3_OK) return H3_ERR;
    cu_kernel *kn = kns[wg ? (M <= 8 ? 7 : 8) : (M <= 8 ? 5 : 6)];
    const int64_t smem = wg ? (int64_t)cu_nvfp4_wg_smem(M) : 0;
    if (wg && cu_m31_smem(s, op, kn, (size_t)smem, d) != H3_OK) return H3_ERR;
    return cu_launch(s, kn, rgrid, rblock, smem, rargs, d);
  }
  if (cu_nvfp4_skinny_applies(M, K, vec) && form != FORM_TILED) {
    void *sargs[] = {&x, &pk, &sc, &gs, &y, &M, &N, &K};
    int64_t sgrid[3] = {(N + 15) / 16, 1, 1}, sblock[3] = {CU_NVFP4_SK_THREADS, 1, 1};
    return cu_launch(s, kns[3], sgrid, sblock, 0, sargs, d);
  }
  const bool y_ok = (uintptr_t)y % 16 == 0 && (out[0].type.dtype == H3_BF16 || out[0].type.dtype == H3_F32);
  if (cu_nvfp4_dequant_applies(M, K, vec && y_ok) && form != FORM_TILED)
    return run_dequantized(s, op, kns[4], scratch, in, out, M, N, K, d);
  cu_nvfp4_shape sh = cu_nvfp4_shape_of(M, N, K);
  cu_kernel *kn = kns[sh.mt == 1 ? 0 : sh.mt == 2 ? 1 : 2];
  if (cu_m31_smem(s, op, kn, sh.smem, d) != H3_OK) return H3_ERR;
  if (sh.splits > 1 && !scratch)
    return cu_op_error(d, op, NULL, "no partials scratch (the op was not prepared)");
  /* the partials and counters only with splits (else the scratch, if any, is the dequantized
     form's) */
  void *part = sh.splits > 1 ? scratch : NULL;
  void *cnt = sh.splits > 1 ? (char *)scratch + cu_align256((size_t)(sh.splits * M * N) * 4) : NULL;
  int cps = sh.cps;
  void *args[] = {&x, &pk, &sc, &gs, &y, &part, &cnt, &M, &N, &K, &cps, &vec};
  int64_t grid[3] = {sh.cols, sh.splits, sh.mblocks}, block[3] = {CU_NVFP4_THREADS, 1, 1};
  return cu_launch(s, kn, grid, block, (int64_t)sh.smem, args, d);
}
