/* spectrum_math.c: the host-side math of Spectrum (docs/models/accelerations.md §6.2-§6.4), all
 * computed by h3c at compile time because the schedule and every tau are static:
 *   - the schedule rule (real steps: the warm-up, then one per window that grows by flex);
 *   - tau(i) = 2i / tau_steps - 1 and the Chebyshev basis x(tau) = [T_0 .. T_m];
 *   - the running-sum fit: after the real steps j < i*, G = sum x_j x_j^T (fp64), and a
 *     forecast reads h* = sum_m a_m R_m with a = (G + lam I)^-1 x(tau*), the same as
 *     x*^T C for the batch ridge solution C = (X^T X + lam I)^-1 X^T H (G + lam I is
 *     symmetric), solved by an fp64 Cholesky;
 *   - the Taylor part of the blend (used when w < 1) as weights over the last real features.
 * The rows produced here become the `coeffs` tables of spectrum_update / spectrum_forecast.
 */
#include "spectrum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int h3_spectrum_schedule(const h3_spectrum_options *o, int n, bool *real) {
  double cur = o->window;
  int c = 0, count = 0;
  for (int i = 0; i < n; i++) {
    double f = floor(cur);
    int64_t win = f < 1.0 ? 1 : f > 1e9 ? 1000000000 : (int64_t)f;
    if (i < o->warmup) {
      real[i] = true;
    } else if ((c + 1) % win == 0) {
      real[i] = true;
      c = 0;
      cur = nearbyint((cur + o->flex) * 1000.0) / 1000.0; /* round(cur + flex, 3) */
    } else {
      real[i] = false;
      c++;
    }
    count += real[i];
  }
  return count;
}

void h3_spectrum_steps_text(h3_strbuf *b, const bool *real, int n, bool want) {
  bool first = true;
  for (int i = 0; i < n;) {
    if (real[i] != want) {
      i++;
      continue;
    }
    int j = i;
    while (j + 1 < n && real[j + 1] == want) j++;
    h3_strbuf_printf(b, "%s%d", first ? "" : ", ", i);
    if (j > i) h3_strbuf_printf(b, "%s%d", j == i + 1 ? ", " : "-", j);
    first = false;
    i = j + 1;
  }
  if (first) h3_strbuf_append(b, "none");
}

double h3_spectrum_tau(int i, int tau_steps) { return 2.0 * (double)i / (double)tau_steps - 1.0; }

void h3_spectrum_basis(int m, double tau, double *x) {
  x[0] = 1.0;
  if (m >= 1) x[1] = tau;
  for (int k = 2; k <= m; k++) x[k] = 2.0 * tau * x[k - 1] - x[k - 2];
}

int h3_spectrum_solve(int p, const double *g, double lam, const double *x, double *a) {
  double l[H3_SPECTRUM_MAX_DEGREE + 1][H3_SPECTRUM_MAX_DEGREE + 1] = {{0}};
  double y[H3_SPECTRUM_MAX_DEGREE + 1];
  if (p < 1 || p > H3_SPECTRUM_MAX_DEGREE + 1) return -1;
  /* scale of "zero" for the pivots: a pivot below 1e-12 of the largest diagonal entry
     means the system has no unique solution (too few real steps at lam = 0) */
  double dmax = 0;
  for (int i = 0; i < p; i++) dmax = fmax(dmax, g[i * p + i] + lam);
  for (int i = 0; i < p; i++)
    for (int j = 0; j <= i; j++) {
      double s = g[i * p + j] + (i == j ? lam : 0.0);
      for (int k = 0; k < j; k++) s -= l[i][k] * l[j][k];
      if (i == j) {
        if (!(s > 1e-12 * dmax)) return -1;
        l[i][i] = sqrt(s);
      } else {
        l[i][j] = s / l[j][j];
      }
    }
  for (int i = 0; i < p; i++) { /* L y = x */
    double s = x[i];
    for (int k = 0; k < i; k++) s -= l[i][k] * y[k];
    y[i] = s / l[i][i];
  }
  for (int i = p - 1; i >= 0; i--) { /* L^T a = y */
    double s = y[i];
    for (int k = i + 1; k < p; k++) s -= l[k][i] * a[k];
    a[i] = s / l[i][i];
  }
  return 0;
}

int h3_spectrum_hist_len(const h3_spectrum_options *o) { return o->w < 1.0 ? o->taylor + 1 : 0; }

/* Taylor weights over the last real features (t[0] for the latest real step b0, t[1] for
 * b1 < b0, ...): h = h_b0 + k D1 + k(k-1)/2 D2 + k(k-1)(k-2)/6 D3 with k = (i - b0)/(b0 - b1)
 * and Dn the n-th backward difference over b0, b1, ...; the order is lowered to the
 * number of earlier real steps. */
static void taylor_weights(int order, const int *last, int n_last, int i, double *t) {
  static const double diff[4][4] = {{1, 0, 0, 0}, {1, -1, 0, 0}, {1, -2, 1, 0}, {1, -3, 3, -1}};
  for (int q = 0; q <= order; q++) t[q] = 0;
  int ord = order < n_last - 1 ? order : n_last - 1;
  double k = ord >= 1 ? (double)(i - last[0]) / (double)(last[0] - last[1]) : 0.0;
  double f = 1.0; /* k (k-1) .. / n! */
  for (int n = 0; n <= ord; n++) {
    if (n > 0) f *= (k - (double)(n - 1)) / (double)n;
    for (int q = 0; q <= n; q++) t[q] += f * diff[n][q];
  }
}

int h3_spectrum_coefficients(const h3_spectrum_options *o, int n, const bool *real, double *upd,
                             double *fc, int *bad_step) {
  const int p = o->m + 1, q = h3_spectrum_hist_len(o), width = p + q;
  double g[(H3_SPECTRUM_MAX_DEGREE + 1) * (H3_SPECTRUM_MAX_DEGREE + 1)] = {0};
  double x[H3_SPECTRUM_MAX_DEGREE + 1], a[H3_SPECTRUM_MAX_DEGREE + 1];
  double t[H3_SPECTRUM_MAX_TAYLOR + 1];
  int last[H3_SPECTRUM_MAX_TAYLOR + 1], n_last = 0, n_real = 0;
  memset(upd, 0, (size_t)n * (size_t)p * sizeof *upd);
  memset(fc, 0, (size_t)n * (size_t)width * sizeof *fc);
  for (int i = 0; i < n; i++) {
    h3_spectrum_basis(o->m, h3_spectrum_tau(i, o->tau_steps), x);
    if (real[i]) {
      for (int r = 0; r < p; r++) {
        upd[(size_t)i * p + r] = x[r];
        for (int c = 0; c < p; c++) g[r * p + c] += x[r] * x[c];
      }
      for (int s = H3_SPECTRUM_MAX_TAYLOR; s > 0; s--) last[s] = last[s - 1];
      last[0] = i;
      if (n_last <= H3_SPECTRUM_MAX_TAYLOR) n_last++;
      n_real++;
      continue;
    }
    if (n_real == 0 || h3_spectrum_solve(p, g, o->lam, x, a) != 0) {
      *bad_step = i;
      return -1;
    }
    double *row = fc + (size_t)i * width;
    for (int r = 0; r < p; r++) row[r] = o->w * a[r];
    if (q > 0) {
      taylor_weights(o->taylor, last, n_last, i, t);
      for (int s = 0; s < q; s++) row[p + s] = (1.0 - o->w) * t[s];
    }
  }
  return 0;
}
