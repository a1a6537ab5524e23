/* qk_test.h: what the qk-norm-rope-fusion tests share (test-only, header-only): the check
 * counter, the state of the data generator (tests/common/case_data.h; x is drawn with
 * scaled rows of mixed magnitude, so the bf16 roundings of the norm and of the rope are
 * exercised), the IR text of one case (the unfused chain slice -> reshape -> rms_norm ->
 * rope next to the fused rms_norm_rope on the same operands) and the tolerance of a
 * kernel's rows against the CPU backend's (count_far).
 */
#ifndef H3_QK_TEST_H
#define H3_QK_TEST_H

#include "../common/case_data.h"
#include "../common/check.h"

#include "h3/bf16.h"
#include "h3/ir.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One case: x bf16[T, C] read at [start, start + H*D); w [D]; cos/sin [T, half]. */
typedef struct {
  const char *name;
  int64_t T, C, start, H, D, half;
  h3_dtype wd, cd; /* w's dtype; cos/sin's dtype */
  double offset;   /* NaN: no offset attribute */
  double eps;
} qk_case;

/* the test's data generator state (tests/common/case_data.h), one per program */
static inline uint64_t *qk_rng(void) {
  static uint64_t state = 0x2545f4914f6cdd1dull;
  return &state;
}

/* The IR of case c: graph @g with %y (the chain) and %f (the fused op), both returned. */
static inline char *qk_ir(const qk_case *c) {
  char off[64] = "";
  if (!isnan(c->offset)) /* a float literal: with a '.' or an exponent */
    snprintf(off, sizeof off, ", offset = %.17g%s", c->offset,
             c->offset == floor(c->offset) && fabs(c->offset) < 1e15 ? ".0" : "");
  const char *wd = case_dtype(c->wd), *cd = case_dtype(c->cd);
  long long T = c->T, C = c->C, S = c->start, H = c->H, D = c->D, F = c->half;
  size_t cap = 4096;
  char *s = malloc(cap);
  if (!s) return NULL;
  snprintf(s, cap,
           "module @qk config \"test\" {\n"
           "  graph @g(%%x: bf16[%lld, %lld], %%w: %s[%lld], %%c: %s[%lld, %lld], %%s: %s[%lld, %lld])"
           " -> (y: bf16[%lld, %lld, %lld], f: bf16[%lld, %lld, %lld]) {\n"
           "    %%q = slice(%%x) {axis = 1, start = %lld, len = %lld} : bf16[%lld, %lld]\n"
           "    %%q3 = reshape(%%q) {shape = [%lld, %lld, %lld]} : bf16[%lld, %lld, %lld]\n"
           "    %%n = rms_norm(%%q3, %%w) {eps = %.17g%s} : bf16[%lld, %lld, %lld]\n"
           "    %%y = rope(%%n, %%c, %%s) : bf16[%lld, %lld, %lld]\n"
           "    %%f = rms_norm_rope(%%x, %%w, %%c, %%s) {start = %lld, heads = %lld, eps = %.17g%s}"
           " : bf16[%lld, %lld, %lld]\n"
           "    return %%y, %%f\n  }\n}\n",
           T, C, wd, D, cd, T, F, cd, T, F, T, H, D, T, H, D, S, H * D, T, H * D, T, H, D, T, H, D,
           c->eps, off, T, H, D, T, H, D, S, H, c->eps, off, T, H, D);
  return s;
}

/* Distance in bf16 units in the last place (large for specials that differ). */
static inline int64_t ulps(uint16_t a, uint16_t b) {
  if (!isfinite(h3_bf16_to_f32(a)) || !isfinite(h3_bf16_to_f32(b))) return a == b ? 0 : 1 << 20;
  int64_t ia = a & 0x8000 ? -(int64_t)(a & 0x7fff) : a, ib = b & 0x8000 ? -(int64_t)(b & 0x7fff) : b;
  return ia > ib ? ia - ib : ib - ia;
}

/* Elements of y[rows, D] farther from c than 2 ulps and 2^-6 of c's row maximum (the GPU
 * sums x^2 in a tree, the CPU in ascending order; one ulp of the normed value moves a
 * rotated output by up to that). */
static inline int64_t count_far(const uint16_t *y, const uint16_t *c, int64_t rows, int64_t D,
                                int64_t *max_ulps) {
  int64_t bad = 0;
  *max_ulps = 0;
  for (int64_t r = 0; r < rows; r++) {
    double rowmax = 0;
    for (int64_t k = 0; k < D; k++) rowmax = fmax(rowmax, fabs(h3_bf16_to_f32(c[r * D + k])));
    for (int64_t k = 0; k < D; k++) {
      const uint16_t a = y[r * D + k], b = c[r * D + k];
      if (ulps(a, b) > *max_ulps) *max_ulps = ulps(a, b);
      if (ulps(a, b) <= 2) continue;
      bad += fabs((double)h3_bf16_to_f32(a) - h3_bf16_to_f32(b)) > rowmax * 0x1p-6;
    }
  }
  return bad;
}

#endif
