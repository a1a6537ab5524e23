/* test_spectrum.c: Spectrum's math and the CPU reference of the step-skipping ops
 * (passes/spectrum_math.c, runtime/cpu/ops_spectrum.c; docs/models/accelerations.md §6, §9 items
 * 7-9):
 *   - the schedule reproduces the spec's worked lists (§6.4) for 49 and 50 steps;
 *   - the running-sum forecast a(i*)^T R equals the batch ridge fit x*^T (X^T X + lam I)^-1
 *     X^T H, solved independently here (Gauss-Jordan with pivoting, fp64);
 *   - through the CPU ops spectrum_update / spectrum_forecast: a random per-element
 *     polynomial trajectory of degree <= 4 in tau is recovered with lam = 0 (up to fp32
 *     rounding), and with lam = 0.1 the forecast equals the fp64 closed-form ridge value
 *     (the ridge bias, which is visibly non-zero);
 *   - the Taylor weights of the blend (w < 1), a coefficient row outside the table,
 *     cache_dit_decide's rule (warm-up, threshold, run length, zero denominator).
 */
#include "h3/backend.h"
#include "h3/op_registry.h"
#include "spectrum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* ---- schedules ------------------------------------------------------------------------------ */
static void check_schedule(int warmup, double window, double flex, int n, const char *want) {
  h3_spectrum_options o = h3_spectrum_options_default();
  o.warmup = warmup, o.window = window, o.flex = flex;
  bool real[64];
  int count = h3_spectrum_schedule(&o, n, real);
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_spectrum_steps_text(&b, real, n, true);
  int want_count = 0; /* count the steps of the wanted text independently */
  for (const char *p = want; *p;) {
    long a = strtol(p, (char **)&p, 10), e = a;
    if (*p == '-') e = strtol(p + 1, (char **)&p, 10);
    want_count += (int)(e - a + 1);
    while (*p == ',' || *p == ' ') p++;
  }
  CHECK(b.data && strcmp(b.data, want) == 0 && count == want_count,
        "%d/%g/%g over %d: got %s (%d real), want %s (%d)", warmup, window, flex, n,
        b.data ? b.data : "", count, want, want_count);
  h3_strbuf_free(&b);
}

static void test_schedules(void) {
  for (int n = 49; n <= 50; n++) {
    check_schedule(5, 2.0, 0.75, n, "0-4, 6, 8, 11, 15, 20, 25, 31, 38, 46");
    check_schedule(11, 5, 1.0, n, "0-10, 15, 21, 28, 36, 45");
    check_schedule(15, 5, 0.5, n, "0-14, 19, 24, 30, 36, 43");
  }
  check_schedule(15, 5, 0, 49, "0-14, 19, 24, 29, 34, 39, 44");
  check_schedule(15, 5, 0, 50, "0-14, 19, 24, 29, 34, 39, 44, 49");
  h3_spectrum_options o = h3_spectrum_options_default();
  bool real[50];
  CHECK(h3_spectrum_schedule(&o, 49, real) == 14, "defaults: 14 real steps of 49");
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_spectrum_options_parse("11:5:1.0,m=3,lam=0.2,w=0.5", "--spectrum", &o, &d) == H3_OK &&
            o.warmup == 11 && o.window == 5 && o.flex == 1.0 && o.m == 3 && o.lam == 0.2 &&
            o.w == 0.5,
        "parse of a triple and keys");
  CHECK(h3_spectrum_options_parse("warmup=0", "--spectrum", &o, &d) == H3_ERR, "warmup 0");
  CHECK(h3_spectrum_options_parse("5:2,5:2", "--spectrum", &o, &d) == H3_ERR, "second triple");
  CHECK(h3_spectrum_options_parse("windw=3", "--spectrum", &o, &d) == H3_ERR, "unknown key");
  h3_diag_free(&d);
}

/* ---- the fit against an independent batch ridge solve ------------------------------------- */
/* Solves A x = b (n x n, fp64) by Gauss-Jordan elimination with partial pivoting. */
static void gauss_solve(int n, double *a, double *b) {
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
    for (int k = 0; k < n; k++) {
      double t = a[c * n + k];
      a[c * n + k] = a[p * n + k];
      a[p * n + k] = t;
    }
    double t = b[c];
    b[c] = b[p];
    b[p] = t;
    for (int r = 0; r < n; r++) {
      if (r == c) continue;
      double f = a[r * n + c] / a[c * n + c];
      for (int k = 0; k < n; k++) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  for (int c = 0; c < n; c++) b[c] /= a[c * n + c];
}

/* Batch ridge forecast at step i from the real steps j < i: x*^T (X^T X + lam I)^-1 X^T H,
 * computed as C column by column. feat[j*F + e] is the feature of step j. */
static void batch_forecast(const h3_spectrum_options *o, const bool *real, int i,
                           const double *feat, int f, double *out) {
  int p = o->m + 1;
  double xs[9], xj[9];
  h3_spectrum_basis(o->m, h3_spectrum_tau(i, o->tau_steps), xs);
  for (int e = 0; e < f; e++) {
    double a[81] = {0}, rhs[9] = {0};
    for (int j = 0; j < i; j++) {
      if (!real[j]) continue;
      h3_spectrum_basis(o->m, h3_spectrum_tau(j, o->tau_steps), xj);
      for (int r = 0; r < p; r++) {
        rhs[r] += xj[r] * feat[j * f + e];
        for (int c = 0; c < p; c++) a[r * p + c] += xj[r] * xj[c];
      }
    }
    for (int r = 0; r < p; r++) a[r * p + r] += o->lam;
    gauss_solve(p, a, rhs); /* rhs = C[:, e] */
    double v = 0;
    for (int r = 0; r < p; r++) v += xs[r] * rhs[r];
    out[e] = v;
  }
}

static void test_running_sums(void) {
  enum { N = 49, F = 7 };
  h3_spectrum_options o = h3_spectrum_options_default();
  bool real[N];
  h3_spectrum_schedule(&o, N, real);
  static double upd[N * 5], fc[N * 5], feat[N * F], r[5 * F];
  int bad = -1;
  CHECK(h3_spectrum_coefficients(&o, N, real, upd, fc, &bad) == 0, "coefficients (bad %d)", bad);
  for (int i = 0; i < N * F; i++) feat[i] = urand() * 3.0;
  memset(r, 0, sizeof r);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    if (real[i]) { /* R += x(tau_i) (x) h_i */
      for (int m = 0; m < 5; m++)
        for (int e = 0; e < F; e++) r[m * F + e] += upd[i * 5 + m] * feat[i * F + e];
      continue;
    }
    double want[F];
    batch_forecast(&o, real, i, feat, F, want);
    for (int e = 0; e < F; e++) {
      double got = 0;
      for (int m = 0; m < 5; m++) got += fc[i * 5 + m] * r[m * F + e];
      double err = fabs(got - want[e]) / (1.0 + fabs(want[e]));
      if (err > worst) worst = err;
    }
  }
  CHECK(worst < 1e-10, "running sums vs batch ridge: worst relative error %g", worst);
}

/* ---- the CPU ops on a polynomial trajectory ---------------------------------------------- */
typedef struct {
  h3_module *m;
  h3_op *upd, *fc;
} op_pair;

/* Builds spectrum_update / spectrum_forecast over R f32[P, F] with the given tables. */
static op_pair make_ops(int p, int f, int n, const double *upd, const double *fc, int width) {
  op_pair o = {h3_module_new("t", "t"), NULL, NULL};
  h3_graph *g = h3_module_add_graph(o.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  int64_t rd[2] = {p, f}, hd[1] = {f};
  h3_value *r = h3_graph_add_input(o.m, g, "r", h3_type_make(H3_F32, 2, rd), (h3_span){0});
  h3_value *h = h3_graph_add_input(o.m, g, "h", h3_type_make(H3_F32, 1, hd), (h3_span){0});
  h3_value *k = h3_graph_add_input(o.m, g, "k", h3_type_make(H3_I32, 0, NULL), (h3_span){0});
  h3_builder b = {.m = o.m, .region = &g->body};
  h3_diag d;
  h3_diag_init(&d);
  h3_value *uops[3] = {r, h, k}, *fops[2] = {r, k};
  h3_attr ua = h3_attr_floats(o.m, "coeffs", n * p, upd);
  h3_attr fa[2] = {h3_attr_floats(o.m, "coeffs", n * width, fc), h3_attr_dtype(o.m, "dtype", H3_F32)};
  o.upd = h3_build_op(&b, H3_OP_SPECTRUM_UPDATE, 3, uops, 1, &ua, 0, &d);
  o.fc = h3_build_op(&b, H3_OP_SPECTRUM_FORECAST, 2, fops, 2, fa, 0, &d);
  h3_diag_print(&d, stderr);
  CHECK(o.upd && o.fc && !d.errors, "building the ops");
  h3_diag_free(&d);
  return o;
}

/* Runs the schedule on trajectory traj[i*F + e] through the ops (fp32); returns the worst
 * ratio of a forecast's error against want(i, e) to its fp32 rounding bound
 * 8 u max|h| (1 + A_i), u = 2^-24, A_i = sum_m |c_m| sum_{real j < i} |x_m(tau_j)|: the
 * amplification of the rounding in R by the forecast (large right after the warm-up,
 * where five close taus are extrapolated: about 1e8 at step 5 of the defaults). */
static double run_ops(const h3_spectrum_options *o, int n, int f, const float *traj,
                      const double *want) {
  int p = o->m + 1;
  bool real[64];
  h3_spectrum_schedule(o, n, real);
  double *upd = calloc((size_t)n * p, sizeof *upd), *fc = calloc((size_t)n * p, sizeof *fc);
  int bad = -1;
  CHECK(h3_spectrum_coefficients(o, n, real, upd, fc, &bad) == 0, "coefficients (bad %d)", bad);
  op_pair ops = make_ops(p, f, n, upd, fc, p);
  float *r = calloc((size_t)p * f, sizeof *r), *out = calloc((size_t)f, sizeof *out);
  int64_t rd[2] = {p, f}, hd[1] = {f};
  h3_type rt = h3_type_make(H3_F32, 2, rd), ht = h3_type_make(H3_F32, 1, hd);
  h3_type kt = h3_type_make(H3_I32, 0, NULL);
  double worst = 0, scale = 0;
  for (int i = 0; i < n * f; i++) scale = fmax(scale, fabs(traj[i]));
  h3_diag d;
  h3_diag_init(&d);
  for (int i = 0; i < n && ops.upd; i++) {
    int32_t k = i;
    if (real[i]) {
      h3_tensor in[3] = {{rt, r}, {ht, (void *)(traj + (size_t)i * f)}, {kt, &k}};
      h3_tensor res = {rt, r}; /* in place, as the memory plan places it */
      CHECK(h3_cpu_run_op(ops.upd, in, 3, &res, 1, 2, 0, &d) == H3_OK, "update step %d", i);
      continue;
    }
    h3_tensor in[2] = {{rt, r}, {kt, &k}};
    h3_tensor res = {ht, out};
    CHECK(h3_cpu_run_op(ops.fc, in, 2, &res, 1, 2, 0, &d) == H3_OK, "forecast step %d", i);
    double amp = 0;
    for (int m = 0; m < p; m++) {
      double sx = 0;
      for (int j = 0; j < i; j++) sx += real[j] ? fabs(upd[j * p + m]) : 0.0;
      amp += fabs(fc[i * p + m]) * sx;
    }
    double bound = 8.0 * ldexp(1.0, -24) * scale * (1.0 + amp);
    for (int e = 0; e < f; e++) worst = fmax(worst, fabs(out[e] - want[i * f + e]) / bound);
  }
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  h3_module_free(ops.m);
  free(upd), free(fc), free(r), free(out);
  return worst;
}

static void test_polynomial(void) {
  enum { N = 49, F = 16 };
  static float traj[N * F];
  static double exact[N * F], ridge[N * F], feat[N * F];
  for (int e = 0; e < F; e++) { /* degree e % 5 per element, random coefficients */
    double c[5];
    for (int k = 0; k < 5; k++) c[k] = k <= e % 5 ? urand() * 2.0 : 0.0;
    for (int i = 0; i < N; i++) {
      double t = h3_spectrum_tau(i, 50), v = 0, pw = 1;
      for (int k = 0; k < 5; k++, pw *= t) v += c[k] * pw;
      exact[i * F + e] = v;
      traj[i * F + e] = (float)v;
    }
  }
  for (int i = 0; i < N * F; i++) feat[i] = traj[i]; /* what the ops see */
  h3_spectrum_options o = h3_spectrum_options_default();
  o.lam = 0;
  { /* the math in fp64: running sums of the exact values, forecast with the rows */
    bool real[N];
    static double upd[N * 5], fc[N * 5], r[5 * F], poly[N * F];
    for (int e = 0; e < F; e++) /* the same polynomials, evaluated in fp64 */
      for (int i = 0; i < N; i++) poly[i * F + e] = exact[i * F + e];
    h3_spectrum_schedule(&o, N, real);
    int bad = -1;
    CHECK(h3_spectrum_coefficients(&o, N, real, upd, fc, &bad) == 0, "lam 0 rows (bad %d)", bad);
    memset(r, 0, sizeof r);
    double worst = 0, scale = 0;
    for (int i = 0; i < N * F; i++) scale = fmax(scale, fabs(poly[i]));
    for (int i = 0; i < N; i++)
      for (int e = 0; e < F; e++) {
        double v = 0;
        for (int m = 0; m < 5; m++) {
          if (real[i]) r[m * F + e] += upd[i * 5 + m] * poly[i * F + e];
          v += fc[i * 5 + m] * r[m * F + e];
        }
        if (!real[i]) worst = fmax(worst, fabs(v - poly[i * F + e]) / scale);
      }
    CHECK(worst < 1e-6, "lam = 0, fp64: the polynomial is recovered (worst error %g)", worst);
  }
  double err0 = run_ops(&o, N, F, traj, exact);
  CHECK(err0 <= 1.0, "lam = 0, fp32 ops: worst error %g of the fp32 rounding bound", err0);
  /* lam = 0.1: the ops equal the closed-form ridge value, which is off the polynomial */
  o.lam = 0.1;
  bool real[N];
  h3_spectrum_schedule(&o, N, real);
  double bias = 0, scale = 0;
  for (int i = 0; i < N; i++)
    if (!real[i]) batch_forecast(&o, real, i, feat, F, ridge + i * F);
  for (int i = 0; i < N * F; i++) scale = fmax(scale, fabs(traj[i]));
  for (int i = 0; i < N; i++)
    for (int e = 0; !real[i] && e < F; e++)
      bias = fmax(bias, fabs(ridge[i * F + e] - exact[i * F + e]) / scale);
  double err1 = run_ops(&o, N, F, traj, ridge);
  CHECK(err1 <= 1.0, "lam = 0.1 equals the fp64 ridge solution: worst error %g of the bound", err1);
  CHECK(bias > 1e-3, "the ridge bias at lam = 0.1 is visible (%g)", bias);
}

static void test_taylor(void) {
  h3_spectrum_options o = h3_spectrum_options_default();
  o.w = 0.25;
  o.taylor = 1;
  enum { N = 12 };
  bool real[N];
  h3_spectrum_schedule(&o, N, real); /* real 0-4, 6, 8, 11 */
  double upd[N * 5], fc[N * 7];
  int bad = -1;
  CHECK(h3_spectrum_hist_len(&o) == 2, "Q = taylor + 1 when w < 1");
  CHECK(h3_spectrum_coefficients(&o, N, real, upd, fc, &bad) == 0, "coefficients");
  /* step 7: last real steps b = 6, a = 4: k = (7 - 6) / (6 - 4) = 0.5;
     h_taylor = (1 + k) h_6 - k h_4; weight 1 - w = 0.75 */
  CHECK(fabs(fc[7 * 7 + 5] - 0.75 * 1.5) < 1e-15 && fabs(fc[7 * 7 + 6] + 0.75 * 0.5) < 1e-15,
        "taylor weights at step 7: %g %g", fc[7 * 7 + 5], fc[7 * 7 + 6]);
  /* the Chebyshev part is w times the forecast of w = 1 */
  h3_spectrum_options o1 = o;
  o1.w = 1.0;
  double fc1[N * 5];
  h3_spectrum_coefficients(&o1, N, real, upd, fc1, &bad);
  CHECK(fabs(fc[7 * 7 + 2] - 0.25 * fc1[7 * 5 + 2]) < 1e-12, "chebyshev part scaled by w");
}

/* ---- op errors and the Cache-DiT rule ------------------------------------------------------ */
static int decide(h3_op *op, const float *rf, const float *prev, int n, int32_t step, int32_t cached,
                  h3_status *st) {
  int64_t dims[1] = {n};
  h3_type t = h3_type_make(H3_F32, 1, dims), s = h3_type_make(H3_I32, 0, NULL);
  h3_tensor in[4] = {{t, (void *)rf}, {t, (void *)prev}, {s, &step}, {s, &cached}};
  int32_t use = -1;
  h3_tensor out = {s, &use};
  h3_diag d;
  h3_diag_init(&d);
  *st = h3_cpu_run_op(op, in, 4, &out, 1, 3, 0, &d);
  h3_diag_free(&d);
  return use;
}

static void test_ops_misc(void) {
  double tab[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  op_pair ops = make_ops(5, 3, 2, tab, tab, 5);
  float r[15] = {0}, h[3] = {1, 2, 3};
  int32_t k = 2; /* the table has 2 rows */
  int64_t rd[2] = {5, 3}, hd[1] = {3};
  h3_type rt = h3_type_make(H3_F32, 2, rd), ht = h3_type_make(H3_F32, 1, hd);
  h3_tensor in[3] = {{rt, r}, {ht, h}, {h3_type_make(H3_I32, 0, NULL), &k}}, res = {rt, r};
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_cpu_run_op(ops.upd, in, 3, &res, 1, 1, 0, &d) == H3_ERR && d.errors == 1,
        "row 2 of a 2-row table is an error");
  h3_diag_free(&d);
  k = 1;
  h3_diag_init(&d);
  CHECK(h3_cpu_run_op(ops.upd, in, 3, &res, 1, 1, 0, &d) == H3_OK && r[0] == 6 && r[14] == 30,
        "update row 1: R[0][0] = 6 * 1 = %g, R[4][2] = 10 * 3 = %g", r[0], r[14]);
  h3_diag_free(&d);
  h3_module_free(ops.m);

  /* cache_dit_decide {warmup 4, threshold 0.1, max_consecutive 1} */
  h3_module *m = h3_module_new("t", "t");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  int64_t dims[1] = {70000}; /* two fixed blocks of 65536 */
  h3_value *a = h3_graph_add_input(m, g, "a", h3_type_make(H3_F32, 1, dims), (h3_span){0});
  h3_value *b = h3_graph_add_input(m, g, "b", h3_type_make(H3_F32, 1, dims), (h3_span){0});
  h3_value *s = h3_graph_add_input(m, g, "s", h3_type_make(H3_I32, 0, NULL), (h3_span){0});
  h3_value *n = h3_graph_add_input(m, g, "n", h3_type_make(H3_I32, 0, NULL), (h3_span){0});
  h3_builder bl = {.m = m, .region = &g->body};
  h3_value *ops4[4] = {a, b, s, n};
  h3_attr at[3] = {h3_attr_int(m, "warmup", 4), h3_attr_float(m, "threshold", 0.1),
                   h3_attr_int(m, "max_consecutive", 1)};
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&bl, H3_OP_CACHE_DIT_DECIDE, 4, ops4, 3, at, 0, &d);
  h3_diag_free(&d);
  float *x = malloc(70000 * sizeof *x), *y = malloc(70000 * sizeof *y), *z = calloc(70000, 4);
  double num = 0, den = 0;
  for (int i = 0; i < 70000; i++) {
    y[i] = (float)urand();
    x[i] = y[i] + (float)(0.05 * urand());
    num += fabs((double)x[i] - y[i]), den += fabs(y[i]);
  }
  h3_status st;
  int close = num / den < 0.1; /* an independent d: about 0.05 */
  CHECK(close, "test data: d = %g", num / den);
  CHECK(op && decide(op, x, y, 70000, 4, 0, &st) == 1 && st == H3_OK, "step 4, d < thr: reuse");
  CHECK(op && decide(op, x, y, 70000, 3, 0, &st) == 0, "step 3 < warmup: full");
  CHECK(op && decide(op, x, y, 70000, 9, 1, &st) == 0, "one cached already: full");
  CHECK(op && decide(op, x, z, 70000, 9, 0, &st) == 0, "zero denominator: full");
  for (int i = 0; i < 70000; i++) x[i] = y[i] * 1.5f;
  CHECK(op && decide(op, x, y, 70000, 9, 0, &st) == 0, "d = 0.5 >= thr: full");
  free(x), free(y), free(z);
  h3_module_free(m);
}

int main(void) {
  test_schedules();
  test_running_sums();
  test_polynomial();
  test_taylor();
  test_ops_misc();
  printf("test_spectrum: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
