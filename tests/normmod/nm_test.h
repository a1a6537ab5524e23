/* nm_test.h: what the norm+modulate tests share (header-only, static functions):
 *
 * - CHECK(cond, fmt, ...) that counts failures and keeps going;
 * - random inputs in the shape of DiT rows (nm_inputs): x bf16[T, H] ~ N(0, 1) with a few
 *   outlier channels 40x larger (the massive activations DiT rows carry), gamma near 1,
 *   scale ~ N(0, 0.3), shift ~ N(shift_mean, 0.3), gate ~ N(0, 0.2), update ~ N(0, 1),
 *   idx over [-1, G] so that the clamping of out-of-range rows is exercised; "grid" rows
 *   (nm_inputs_grid) whose sums of squares are exact in fp32 in any order;
 * - independent references written here from the spec's formulas: U3 (the gated residual
 *   add, bf16 roundings with bf16.h) and the fp64 evaluation of Plan A's math from the
 *   same bf16 inputs, y64 = x * r64 * (gamma + offset) * (1 + scale[g]) + shift[g];
 * - the lossless admission rule of docs/models/accelerations.md §2 rule 4 (nm_error, nm_admit;
 *   nm_qerror measures dequantized int8 rows the same way):
 *   e = y - y64 over the elements where exact, candidate and y64 are all finite;
 *   pass iff RMS_c <= 1.5 RMS_x, MAX_c <= 1.5 MAX_x and |MEAN_c| <= 0.25 RMS_c; NaN/Inf
 *   positions of the candidate must equal the exact plan's (nm_special_equal).
 */
#ifndef H3_NM_TEST_H
#define H3_NM_TEST_H

#include "h3/bf16.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nm_failures, nm_checks;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    nm_checks++;                                                                                   \
    if (!(cond)) {                                                                                 \
      nm_failures++;                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

static inline int nm_report(const char *name) {
  fprintf(stderr, "%s: %d checks, %d failed\n", name, nm_checks, nm_failures);
  return nm_failures ? 1 : 0;
}

/* ---- random numbers ----------------------------------------------------------------------- */
typedef struct {
  uint64_t s;
} nm_rng;

static inline uint64_t nm_next(nm_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static inline double nm_uniform(nm_rng *r) { return (double)(nm_next(r) >> 11) * 0x1p-53; }
static inline double nm_normal(nm_rng *r) {
  double u = nm_uniform(r), v = nm_uniform(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline uint16_t nm_bf16(double v) { return h3_f32_to_bf16((float)v); }
static inline float nm_f(uint16_t b) { return h3_bf16_to_f32(b); }

/* ---- inputs ----------------------------------------------------------------------------- */
typedef struct {
  int64_t T, H, G;
  uint16_t *x, *gamma, *scale, *shift, *gate, *update; /* bf16 bits */
  int32_t *idx;
} nm_inputs;

static inline void nm_inputs_free(nm_inputs *in) {
  free(in->x), free(in->gamma), free(in->scale), free(in->shift), free(in->gate), free(in->update);
  free(in->idx);
  memset(in, 0, sizeof *in);
}

/* Random DiT-like inputs (see the header comment); false when out of memory. */
static inline int nm_inputs_make(nm_inputs *in, int64_t T, int64_t H, int64_t G, double shift_mean,
                                 uint64_t seed) {
  nm_rng r = {seed * 0x9e3779b97f4a7c15ull + 1};
  in->T = T, in->H = H, in->G = G;
  in->x = malloc((size_t)(T * H) * 2);
  in->update = malloc((size_t)(T * H) * 2);
  in->gamma = malloc((size_t)H * 2);
  in->scale = malloc((size_t)(G * H) * 2);
  in->shift = malloc((size_t)(G * H) * 2);
  in->gate = malloc((size_t)(G * H) * 2);
  in->idx = malloc((size_t)T * 4);
  if (!in->x || !in->update || !in->gamma || !in->scale || !in->shift || !in->gate || !in->idx)
    return 0;
  const int64_t outliers[4] = {3 % H, 77 % H, (H / 3) | 1, H - 5};
  for (int64_t t = 0; t < T; t++)
    for (int64_t k = 0; k < H; k++) {
      double v = nm_normal(&r);
      for (int o = 0; o < 4; o++)
        if (k == outliers[o]) v = 40.0 * v + (o % 2 ? -30.0 : 30.0);
      in->x[t * H + k] = nm_bf16(v);
      in->update[t * H + k] = nm_bf16(nm_normal(&r));
    }
  for (int64_t k = 0; k < H; k++) in->gamma[k] = nm_bf16(1.0 + 0.1 * nm_normal(&r));
  for (int64_t i = 0; i < G * H; i++) {
    in->scale[i] = nm_bf16(0.3 * nm_normal(&r));
    in->shift[i] = nm_bf16(shift_mean + 0.3 * nm_normal(&r));
    in->gate[i] = nm_bf16(0.2 * nm_normal(&r));
  }
  for (int64_t t = 0; t < T; t++) in->idx[t] = (int32_t)(nm_next(&r) % (uint64_t)(G + 2)) - 1;
  return 1;
}

static inline int64_t nm_row(int32_t i, int64_t G) { return i < 0 ? 0 : i >= G ? G - 1 : i; }

/* "Grid" rows for bitwise checks against the CPU backend, over nm_inputs_make's: x = k/16
 * (|k| in 1..8) with the same outlier channels at +-m/8 (m in 128..255), update = j/16
 * (|j| in 1..8), gate = +-0.5 (gamma, the tables and idx stay). x and Plan B's residual'
 * lie on a 2^-5 grid, so every x^2 is a multiple of 2^-10, and for H <= 5376 every partial
 * sum stays below 2^14: exact in fp32 in any order, so the kernels' tree reduction and the
 * CPU's sequential sum give the same r bit for bit. */
static inline void nm_inputs_grid(nm_inputs *in) {
  nm_rng r = {0x5eedull * (uint64_t)in->H + 3};
  const int64_t T = in->T, H = in->H, outliers[4] = {3 % H, 77 % H, (H / 3) | 1, H - 5};
  for (int64_t i = 0; i < T * H; i++) {
    const double sx = nm_next(&r) & 1 ? -1.0 : 1.0, su = nm_next(&r) & 1 ? -1.0 : 1.0;
    in->x[i] = nm_bf16(sx * (double)(1 + nm_next(&r) % 8) / 16.0);
    in->update[i] = nm_bf16(su * (double)(1 + nm_next(&r) % 8) / 16.0);
    for (int o = 0; o < 4; o++)
      if (i % H == outliers[o]) in->x[i] = nm_bf16(sx * (double)(128 + nm_next(&r) % 128) / 8.0);
  }
  for (int64_t i = 0; i < in->G * H; i++) in->gate[i] = nm_bf16(nm_next(&r) & 1 ? 0.5 : -0.5);
}

/* ---- references --------------------------------------------------------------------------- */
/* U3: res'[t, k] = bf16(res + bf16(gate[g] * update)), the gated residual add. */
static inline void nm_u3(const nm_inputs *in, const uint16_t *res, uint16_t *out) {
  for (int64_t t = 0; t < in->T; t++) {
    int64_t g = nm_row(in->idx[t], in->G);
    for (int64_t k = 0; k < in->H; k++) {
      float a = h3_bf16_round(nm_f(in->gate[g * in->H + k]) * nm_f(in->update[t * in->H + k]));
      out[t * in->H + k] = h3_f32_to_bf16(nm_f(res[t * in->H + k]) + a);
    }
  }
}

/* Plan A's math in fp64 on bf16 rows x (the same inputs the kernels read). */
static inline void nm_ref64(const nm_inputs *in, const uint16_t *x, double eps, double offset,
                            double *y) {
  const int64_t H = in->H;
  for (int64_t t = 0; t < in->T; t++) {
    int64_t g = nm_row(in->idx[t], in->G);
    double ss = 0;
    for (int64_t k = 0; k < H; k++) ss += (double)nm_f(x[t * H + k]) * nm_f(x[t * H + k]);
    double r = 1.0 / sqrt(ss / (double)H + eps);
    for (int64_t k = 0; k < H; k++)
      y[t * H + k] = (double)nm_f(x[t * H + k]) * r * ((double)nm_f(in->gamma[k]) + offset) *
                         (1.0 + (double)nm_f(in->scale[g * H + k])) +
                     (double)nm_f(in->shift[g * H + k]);
  }
}

/* ---- the admission rule --------------------------------------------------------------------- */
typedef struct {
  double rms, max, mean;
  int64_t n;
} nm_err;

/* Error of y (bf16 bits) against y64 over elements where y, y64 and `also` (the other plan's
 * output, may be NULL) are finite. */
static inline nm_err nm_error(const uint16_t *y, const uint16_t *also, const double *y64,
                              int64_t n) {
  nm_err e = {0, 0, 0, 0};
  double s2 = 0, s1 = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = nm_f(y[i]);
    if (!isfinite(v) || !isfinite(y64[i]) || (also && !isfinite((double)nm_f(also[i])))) continue;
    double d = v - y64[i];
    s2 += d * d;
    s1 += d;
    if (fabs(d) > e.max) e.max = fabs(d);
    e.n++;
  }
  if (e.n) {
    e.rms = sqrt(s2 / (double)e.n);
    e.mean = s1 / (double)e.n;
  }
  return e;
}

/* Error of the dequantized int8 rows q[t, k] * s[t] (quantize = 1's codes and scales)
 * against y64, over the elements where the dequantized value and y64 are finite. */
static inline nm_err nm_qerror(const int8_t *q, const float *s, int64_t H, const double *y64,
                               int64_t n) {
  nm_err e = {0, 0, 0, 0};
  double s2 = 0, s1 = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = (double)q[i] * s[i / H];
    if (!isfinite(v) || !isfinite(y64[i])) continue;
    double d = v - y64[i];
    s2 += d * d;
    s1 += d;
    if (fabs(d) > e.max) e.max = fabs(d);
    e.n++;
  }
  if (e.n) {
    e.rms = sqrt(s2 / (double)e.n);
    e.mean = s1 / (double)e.n;
  }
  return e;
}

typedef struct {
  bool rms_ok, max_ok, mean_ok;
} nm_verdict;

static inline nm_verdict nm_admit(nm_err exact, nm_err cand) {
  nm_verdict v = {cand.rms <= 1.5 * exact.rms, cand.max <= 1.5 * exact.max,
                  fabs(cand.mean) <= 0.25 * cand.rms};
  return v;
}

static inline bool nm_passes(nm_verdict v) { return v.rms_ok && v.max_ok && v.mean_ok; }

/* NaN / Inf positions (and kinds) of two bf16 outputs agree. */
static inline int64_t nm_special_mismatch(const uint16_t *a, const uint16_t *b, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float x = nm_f(a[i]), y = nm_f(b[i]);
    if (isnan(x) != isnan(y) || (isinf(x) != isinf(y)) || (isinf(x) && x != y)) bad++;
  }
  return bad;
}

/* a and b are bitwise equal except that any two NaNs count as equal (a GPU writes the
 * canonical NaN where the host keeps the operand's payload). */
static inline bool nm_equal_nan(const uint16_t *a, const uint16_t *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (a[i] != b[i] && !(isnan(nm_f(a[i])) && isnan(nm_f(b[i])))) return false;
  return true;
}

static inline void nm_print_err(const char *what, nm_err e) {
  fprintf(stderr, "  %-34s RMS %.4e  MAX %.4e  MEAN %+.4e  (n %lld)\n", what, e.rms, e.max, e.mean,
          (long long)e.n);
}

#endif
