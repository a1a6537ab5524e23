/* test_int8_ops.c: the CPU reference of the INT8 ops (runtime/cpu/ops_int8.c) against
 * independent computations of the ops.def contracts (docs/models/accelerations.md §9 item 4-5):
 *   - H256: built here as the Kronecker product of H4 in double: symmetric, H256·H256 = I
 *     exactly; the backend's butterfly equals it (exactly on small integers), applying it
 *     twice gives the input back, and rotating x and W leaves x·Wᵀ unchanged to rounding;
 *   - quantize_rows: codes in [-128, 127], s = amax / 127, codes = rne(v / s) (rotate 0:
 *     bitwise; rotate 256: within half a step of the rotated row), zero rows, NaN, ragged K;
 *     with outlier channels the rotation lowers the GEMM error;
 *   - linear_int8: bitwise equal to an int64 sum and the fixed epilogue
 *     bf16((float(acc) * s_x) * s_w + bias); row chunks of 1024, 8192 and M-1 rows (with a
 *     remainder) bitwise equal to one chunk; shape errors;
 *   - matmul_i8 equal to the int64 sum (3-D q, chunks with a remainder), dequant_i8 of its
 *     accumulators bitwise equal to linear_int8 (bias / none, bf16 / f32); their errors.
 * Every op runs with 1 and 2 threads (bitwise equal, harness.h).
 */
#include "cpu_internal.h"
#include "harness.h"

static const double h4[4][4] = {
    {0.5, 0.5, 0.5, -0.5}, {0.5, 0.5, -0.5, 0.5}, {0.5, -0.5, 0.5, 0.5}, {-0.5, 0.5, 0.5, 0.5}};

/* H256[i][j] = prod over the 4 base-4 digits of H4[i_d][j_d] (H4⊗H4⊗H4⊗H4). */
static double h256(int i, int j) {
  double v = 1.0;
  for (int d = 0; d < 4; d++) v *= h4[(i >> (2 * d)) & 3][(j >> (2 * d)) & 3];
  return v;
}

static void test_hadamard(T *t) {
  int sym = 1, ident = 1;
  for (int i = 0; i < 256; i++)
    for (int j = 0; j < 256; j++) {
      sym &= h256(i, j) == h256(j, i);
      double s = 0;
      for (int k = 0; k < 256; k++) s += h256(i, k) * h256(k, j);
      ident &= s == (i == j ? 1.0 : 0.0);
    }
  CHECK(sym, "H256 is not symmetric");
  CHECK(ident, "H256 * H256 != I");

  float v[256], w[256];
  double worst = 0, worst2 = 0, amax = 0;
  for (int i = 0; i < 256; i++) {
    v[i] = w[i] = (float)t_uniform(t, -3, 3);
    amax = fmax(amax, fabs(v[i]));
  }
  h3cpu_hadamard256(w);
  for (int i = 0; i < 256; i++) {
    double r = 0;
    for (int j = 0; j < 256; j++) r += h256(i, j) * v[j];
    worst = fmax(worst, fabs(w[i] - r));
  }
  h3cpu_hadamard256(w);
  for (int i = 0; i < 256; i++) worst2 = fmax(worst2, fabs(w[i] - v[i]));
  CHECK(worst <= 1e-5 * amax, "butterfly vs Kronecker matrix: max error %g", worst);
  CHECK(worst2 <= 1e-5 * amax, "H256 applied twice: max error %g", worst2);

  /* small integers: every butterfly value is a multiple of 1/16, exact in fp32 */
  int exact = 1;
  for (int i = 0; i < 256; i++) v[i] = w[i] = (float)(int)t_uniform(t, -8, 9);
  h3cpu_hadamard256(w);
  for (int i = 0; i < 256; i++) {
    double r = 0;
    for (int j = 0; j < 256; j++) r += h256(i, j) * v[j];
    exact &= (double)w[i] == r;
  }
  CHECK(exact, "butterfly on integers is not exactly H256 x");

  /* x~ W~^T = x W^T: K = 512 (two groups), 4 rows of W */
  enum { K = 512, N = 4 };
  static float x[K], xr[K], wm[N][K], wr[N][K];
  for (int k = 0; k < K; k++) x[k] = xr[k] = (float)t_uniform(t, -2, 2);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) wm[n][k] = wr[n][k] = (float)t_uniform(t, -1, 1);
  for (int g = 0; g < K; g += 256) {
    h3cpu_hadamard256(xr + g);
    for (int n = 0; n < N; n++) h3cpu_hadamard256(wr[n] + g);
  }
  for (int n = 0; n < N; n++) {
    double a = 0, b = 0, mag = 0;
    for (int k = 0; k < K; k++) {
      a += (double)x[k] * wm[n][k];
      b += (double)xr[k] * wr[n][k];
      mag += fabs((double)x[k] * wm[n][k]);
    }
    CHECK(fabs(a - b) <= 1e-6 * mag, "row %d: x W^T = %g but rotated %g", n, a, b);
  }
}

/* quantize_rows on x [rows, K] of dtype dt; checks the contract row by row. */
static void check_quantize(T *t, h3_dtype dt, int64_t rows, int64_t K, int rotate) {
  h3_value *xv = t_in(t, "x", TY(dt, rows, K));
  h3_attr a = h3_attr_int(t->m, "rotate", rotate);
  h3_op *op = t_op(t, H3_OP_QUANTIZE_ROWS, 1, &xv, 1, &a);
  h3_tensor x = t_rand(t, TY(dt, rows, K), -2, 2), out[2];
  for (int64_t k = 3; k < K; k += 97) /* outlier channels, as DiT rows have */
    for (int64_t r = 0; r < rows; r++) t_set(&x, r * K + k, t_get(&x, r * K + k) * 40);
  for (int64_t k = 0; k < K; k++) t_set(&x, 1 * K + k, 0.0); /* row 1: all zero */
  if (rows > 2 && !rotate) t_set(&x, 2 * K + 5, NAN);       /* row 2: one NaN -> code 0 */
  CHECK(t_run(op, &x, out) == H3_OK, "quantize_rows failed");
  const int8_t *q = out[0].data;
  const float *s = out[1].data;
  int in_range = 1, exact = 1, near = 1, peak = 1;
  double *v = malloc(sizeof(double) * (size_t)K);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t k = 0; k < K; k++) v[k] = (float)t_get(&x, r * K + k);
    if (rotate)
      for (int64_t g = 0; g < K; g += 256) {
        double tmp[256];
        for (int i = 0; i < 256; i++) {
          tmp[i] = 0;
          for (int j = 0; j < 256; j++) tmp[i] += h256(i, j) * (isnan(v[g + j]) ? 0 : v[g + j]);
        }
        for (int i = 0; i < 256; i++) v[g + i] = tmp[i];
      }
    double amax = 0;
    for (int64_t k = 0; k < K; k++)
      if (!isnan(v[k])) amax = fmax(amax, fabs(v[k]));
    float want = fmaxf((float)amax / 127.0f, 1e-30f);
    if (rotate)
      CHECK(fabs(s[r] - want) <= 1e-5 * want, "row %lld: scale %g, want %g", (long long)r, s[r], want);
    else
      CHECK(s[r] == want, "row %lld: scale %.9g, want amax/127 = %.9g", (long long)r, s[r], want);
    int hit = 0;
    for (int64_t k = 0; k < K; k++) {
      int c = q[r * K + k];
      in_range &= c >= -128 && c <= 127;
      hit |= c == 127 || c == -127;
      if (isnan(v[k])) {
        exact &= c == 0;
        continue;
      }
      if (!rotate) exact &= c == (int)rintf((float)v[k] / s[r]);
      near &= fabs(c * (double)s[r] - v[k]) <= 0.5 * s[r] * (1 + 1e-4) + 1e-6 * amax;
    }
    if (amax > 0) peak &= hit;
    else exact &= s[r] == 1e-30f;
  }
  free(v);
  CHECK(in_range, "codes outside [-128, 127]");
  CHECK(exact, "codes differ from rne(v / s) (dtype %s, rotate %d)", h3_dtype_name(dt), rotate);
  CHECK(near, "a dequantized value is more than half a step off (rotate %d)", rotate);
  CHECK(peak, "a row without a +-127 code at its amax");
  free(x.data);
  t_free_all(out, 2);
}

/* linear_int8 against an int64 sum and the fixed epilogue. */
static void check_gemm(T *t, int64_t M, int64_t N, int64_t K, bool bias, h3_dtype od) {
  h3_value *ops[5] = {t_in(t, "q", TY(H3_I8, M, K)), t_in(t, "sx", TY(H3_F32, M)),
                      t_in(t, "wq", TY(H3_I8, N, K)), t_in(t, "sw", TY(H3_F32, N)),
                      bias ? t_in(t, "b", TY(H3_BF16, N)) : NULL};
  h3_attr a = h3_attr_dtype(t->m, "dtype", od);
  h3_op *op = t_op(t, H3_OP_LINEAR_INT8, bias ? 5 : 4, ops, 1, &a);
  h3_tensor in[5] = {t_rand(t, TY(H3_I8, M, K), -128, 128), t_rand(t, TY(H3_F32, M), 1e-4, 2e-2),
                     t_rand(t, TY(H3_I8, N, K), -128, 128), t_rand(t, TY(H3_F32, N), 1e-4, 2e-2),
                     t_rand(t, TY(H3_BF16, N), -1, 1)};
  for (int64_t k = 0; k < K; k++) /* row 0 at the extremes: acc = 128 * 128 * K */
    ((int8_t *)in[0].data)[k] = ((int8_t *)in[2].data)[k] = -128;
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "linear_int8 failed");
  int64_t bad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (int64_t)((int8_t *)in[0].data)[m * K + k] * ((int8_t *)in[2].data)[n * K + k];
      float y = (float)acc * ((float *)in[1].data)[m];
      y = y * ((float *)in[3].data)[n];
      if (bias) y = y + (float)t_get(&in[4], n);
      double got = t_get(&out[0], m * N + n), want = od == H3_BF16 ? rb(y) : y;
      if (got != want && bad++ < 3)
        fprintf(stderr, "  [%lld, %lld]: %.9g, want %.9g\n", (long long)m, (long long)n, got, want);
    }
  CHECK(bad == 0, "linear_int8 [%lld, %lld, %lld]: %lld elements differ from the epilogue formula",
        (long long)M, (long long)N, (long long)K, (long long)bad);
  t_free_all(in, 5);
  t_free_all(out, 1);
}

/* The same GEMM with chunk_rows = 0 and each `chunk`: bitwise equal. */
static void check_chunks(T *t) {
  const int64_t M = 9000, N = 8, K = 256; /* 8192 and 1024 leave a remainder of 808 */
  h3_value *ops[5] = {t_in(t, "q", TY(H3_I8, 2, M / 2, K)), t_in(t, "sx", TY(H3_F32, 2, M / 2)),
                      t_in(t, "wq", TY(H3_I8, N, K)), t_in(t, "sw", TY(H3_F32, N)),
                      t_in(t, "b", TY(H3_BF16, N))};
  h3_tensor in[5] = {t_rand(t, ops[0]->type, -128, 128), t_rand(t, ops[1]->type, 1e-4, 1e-2),
                     t_rand(t, ops[2]->type, -128, 128), t_rand(t, ops[3]->type, 1e-4, 1e-2),
                     t_rand(t, ops[4]->type, -1, 1)};
  h3_op *whole = t_op(t, H3_OP_LINEAR_INT8, 5, ops, 0, NULL);
  h3_tensor ref[1];
  CHECK(t_run(whole, in, ref) == H3_OK, "unsplit linear_int8 failed");
  const int64_t chunks[] = {1024, 8192, M - 1, 1};
  for (int i = 0; i < 4; i++) {
    h3_attr a = h3_attr_int(t->m, "chunk_rows", chunks[i]);
    h3_op *op = t_op(t, H3_OP_LINEAR_INT8, 5, ops, 1, &a);
    h3_tensor out[1];
    CHECK(t_run(op, in, out) == H3_OK, "split linear_int8 failed");
    CHECK(memcmp(out[0].data, ref[0].data, (size_t)h3_type_bytes(&ref[0].type)) == 0,
          "chunk_rows = %lld differs from the unsplit GEMM", (long long)chunks[i]);
    t_free_all(out, 1);
  }
  t_free_all(in, 5);
  t_free_all(ref, 1);
}

/* matmul_i8 (chunk_rows) against an int64 sum, and dequant_i8(matmul_i8(..)) bitwise equal
 * to linear_int8 with the same operands, attributes and chunks (int8-dequant-split's claim). */
static void check_split_ops(T *t, int64_t B, int64_t S, int64_t N, int64_t K, bool bias,
                            h3_dtype od, int64_t chunk) {
  h3_value *ops[5] = {t_in(t, "q", TY(H3_I8, B, S, K)), t_in(t, "sx", TY(H3_F32, B, S)),
                      t_in(t, "wq", TY(H3_I8, N, K)), t_in(t, "sw", TY(H3_F32, N)),
                      bias ? t_in(t, "b", TY(H3_BF16, N)) : NULL};
  h3_attr la[2] = {h3_attr_dtype(t->m, "dtype", od), h3_attr_int(t->m, "chunk_rows", chunk)};
  h3_op *lin = t_op(t, H3_OP_LINEAR_INT8, bias ? 5 : 4, ops, 2, la);
  h3_value *mm_ops[2] = {ops[0], ops[2]};
  h3_op *mm = t_op(t, H3_OP_MATMUL_I8, 2, mm_ops, 1, &la[1]);
  h3_value *dq_ops[4] = {mm->results[0], ops[1], ops[3], ops[4]};
  h3_op *dq = t_op(t, H3_OP_DEQUANT_I8, bias ? 4 : 3, dq_ops, 1, la);
  h3_tensor in[5] = {t_rand(t, ops[0]->type, -128, 128), t_rand(t, ops[1]->type, 1e-4, 2e-2),
                     t_rand(t, ops[2]->type, -128, 128), t_rand(t, ops[3]->type, 1e-4, 2e-2),
                     t_rand(t, TY(H3_BF16, N), -1, 1)};
  h3_tensor ref[1], acc[1], y[1];
  CHECK(t_run(lin, in, ref) == H3_OK && t_run(mm, (h3_tensor[]){in[0], in[2]}, acc) == H3_OK,
        "linear_int8 / matmul_i8 failed");
  CHECK(acc[0].type.dtype == H3_I32 && acc[0].type.rank == 3 && acc[0].type.dims[2] == N,
        "matmul_i8 result type");
  int64_t M = B * S, bad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t want = 0;
      for (int64_t k = 0; k < K; k++)
        want += (int64_t)((int8_t *)in[0].data)[m * K + k] * ((int8_t *)in[2].data)[n * K + k];
      bad += ((int32_t *)acc[0].data)[m * N + n] != want;
    }
  CHECK(bad == 0, "matmul_i8 [%lld, %lld, %lld] chunk %lld: %lld accumulators differ from the "
        "int64 sum", (long long)M, (long long)N, (long long)K, (long long)chunk, (long long)bad);
  CHECK(t_run(dq, (h3_tensor[]){acc[0], in[1], in[3], in[4]}, y) == H3_OK, "dequant_i8 failed");
  CHECK(memcmp(y[0].data, ref[0].data, (size_t)h3_type_bytes(&ref[0].type)) == 0,
        "dequant_i8(matmul_i8) differs from linear_int8 (bias %d, %s, chunk %lld)", bias,
        h3_dtype_name(od), (long long)chunk);
  t_free_all(in, 5);
  t_free_all(ref, 1);
  t_free_all(acc, 1);
  t_free_all(y, 1);
}

/* quantize x and W, int8 GEMM, against x·Wᵀ in fp64; returns the relative L2 error. */
static double int8_error(T *t, const h3_tensor *x, const h3_tensor *w, int rotate) {
  h3_value *xv = t_in(t, "x", x->type), *wv = t_in(t, "w", w->type);
  h3_attr a = h3_attr_int(t->m, "rotate", rotate);
  h3_op *qx = t_op(t, H3_OP_QUANTIZE_ROWS, 1, &xv, 1, &a);
  h3_op *qw = t_op(t, H3_OP_QUANTIZE_ROWS, 1, &wv, 1, &a);
  h3_value *gv[4] = {qx->results[0], qx->results[1], qw->results[0], qw->results[1]};
  h3_op *g = t_op(t, H3_OP_LINEAR_INT8, 4, gv, 0, NULL);
  h3_tensor xq[2], wq[2], y[1];
  CHECK(t_run(qx, x, xq) == H3_OK && t_run(qw, w, wq) == H3_OK, "quantize failed");
  h3_tensor gin[4] = {xq[0], xq[1], wq[0], wq[1]};
  CHECK(t_run(g, gin, y) == H3_OK, "gemm failed");
  int64_t M = x->type.dims[0], K = x->type.dims[1], N = w->type.dims[0];
  double num = 0, den = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double r = 0;
      for (int64_t k = 0; k < K; k++) r += t_get(x, m * K + k) * t_get(w, n * K + k);
      double e = t_get(&y[0], m * N + n) - r;
      num += e * e;
      den += r * r;
    }
  t_free_all(xq, 2);
  t_free_all(wq, 2);
  t_free_all(y, 1);
  return sqrt(num / den);
}

static void test_accuracy(T *t) {
  const int64_t M = 16, N = 32, K = 512;
  h3_tensor x = t_rand(t, TY(H3_BF16, M, K), -1, 1), w = t_rand(t, TY(H3_BF16, N, K), -1, 1);
  double e0 = int8_error(t, &x, &w, 0), e1 = int8_error(t, &x, &w, 256);
  printf("  int8 GEMM relative L2 vs fp64, plain rows: rotate 0 %.3e, rotate 256 %.3e\n", e0, e1);
  CHECK(e0 < 2e-2 && e1 < 2e-2, "int8 error too large: %g, %g", e0, e1);
  for (int64_t m = 0; m < M; m++) /* outlier channels in x: the case ConvRot is for */
    for (int64_t k = 7; k < K; k += 128) t_set(&x, m * K + k, t_get(&x, m * K + k) * 100);
  double o0 = int8_error(t, &x, &w, 0), o1 = int8_error(t, &x, &w, 256);
  printf("  int8 GEMM relative L2 vs fp64, outlier channels: rotate 0 %.3e, rotate 256 %.3e\n", o0,
         o1);
  CHECK(o1 < o0, "the rotation does not help with outliers: %g vs %g", o1, o0);
  free(x.data);
  free(w.data);
}

static const char *infer_error(T *t, h3_opcode c, int n, h3_value **ops, int na, const h3_attr *a) {
  static char why[256];
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&t->b, c, n, ops, na, a, 0, &d);
  snprintf(why, sizeof why, "%s", op ? "(built)" : d.head ? d.head->message : "?");
  h3_diag_free(&d);
  return why;
}

static void test_infer(T *t) {
  h3_value *x = t_in(t, "x", TY(H3_BF16, 4, 300));
  h3_attr r7 = h3_attr_int(t->m, "rotate", 7), r256 = h3_attr_int(t->m, "rotate", 256);
  const char *e = infer_error(t, H3_OP_QUANTIZE_ROWS, 1, &x, 1, &r7);
  CHECK(strstr(e, "rotate = 7, expected 0 (off) or 256"), "got: %s", e);
  e = infer_error(t, H3_OP_QUANTIZE_ROWS, 1, &x, 1, &r256);
  CHECK(strstr(e, "needs K % 256 == 0, but x has K = 300"), "got: %s", e);
  h3_value *big[4] = {t_in(t, "q", TY(H3_I8, 2, 131072)), t_in(t, "sx", TY(H3_F32, 2)),
                      t_in(t, "w", TY(H3_I8, 3, 131072)), t_in(t, "sw", TY(H3_F32, 3))};
  e = infer_error(t, H3_OP_LINEAR_INT8, 4, big, 0, NULL);
  CHECK(strstr(e, "K = 131072 exceeds 131071"), "got: %s", e);
  h3_value *bad[4] = {t_in(t, "q", TY(H3_I8, 2, 256)), t_in(t, "sx", TY(H3_F32, 3)),
                      t_in(t, "w", TY(H3_I8, 3, 256)), t_in(t, "sw", TY(H3_F32, 3))};
  e = infer_error(t, H3_OP_LINEAR_INT8, 4, bad, 0, NULL);
  CHECK(strstr(e, "s_x must be f32[2]"), "got: %s", e);
  h3_value *mbig[2] = {big[0], big[2]};
  e = infer_error(t, H3_OP_MATMUL_I8, 2, mbig, 0, NULL);
  CHECK(strstr(e, "matmul_i8: K = 131072 exceeds 131071"), "got: %s", e);
  h3_value *dbad[3] = {t_in(t, "acc", TY(H3_I32, 2, 3)), t_in(t, "sx", TY(H3_F32, 3)),
                       t_in(t, "sw", TY(H3_F32, 3))};
  e = infer_error(t, H3_OP_DEQUANT_I8, 3, dbad, 0, NULL);
  CHECK(strstr(e, "dequant_i8: s_x must be f32[2]"), "got: %s", e);
  dbad[0] = t_in(t, "acc", TY(H3_BF16, 2, 3));
  e = infer_error(t, H3_OP_DEQUANT_I8, 3, dbad, 0, NULL);
  CHECK(strstr(e, "acc must be i32[.., N]"), "got: %s", e);
  h3_value *dok[3] = {t_in(t, "acc", TY(H3_I32, 2, 3)), t_in(t, "sx", TY(H3_F32, 2)),
                      t_in(t, "sw", TY(H3_F32, 3))};
  h3_attr di = h3_attr_dtype(t->m, "dtype", H3_I32);
  e = infer_error(t, H3_OP_DEQUANT_I8, 3, dok, 1, &di);
  CHECK(strstr(e, "dequant_i8: dtype = i32, expected a float"), "got: %s", e);
}

int main(void) {
  T t;
  t_init(&t, 8);
  test_hadamard(&t);
  check_quantize(&t, H3_BF16, 9, 512, 0);
  check_quantize(&t, H3_F32, 9, 512, 0);
  check_quantize(&t, H3_BF16, 9, 512, 256);
  check_quantize(&t, H3_BF16, 5, 300, 0); /* K not a multiple of 256: no rotation needed */
  check_gemm(&t, 37, 24, 512, true, H3_BF16);
  check_gemm(&t, 5, 7, 2048, false, H3_F32);
  check_chunks(&t);
  check_split_ops(&t, 3, 13, 24, 512, true, H3_BF16, 0);
  check_split_ops(&t, 3, 13, 24, 512, true, H3_BF16, 5); /* 39 rows: 7 x 5 + 4 */
  check_split_ops(&t, 1, 9, 40, 256, false, H3_F32, 4);
  check_split_ops(&t, 2, 4, 8, 1024, false, H3_BF16, 1);
  test_accuracy(&t);
  test_infer(&t);
  t_free(&t);
  return t_report("test_int8_ops");
}
