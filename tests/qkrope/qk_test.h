/* qk_test.h: what the qk-norm-rope-fusion tests share (test-only, header-only): the check
 * counter, a seeded generator of bf16/f16/f32 data that is never zero (rows of mixed
 * magnitude, so the bf16 roundings of the norm and of the rope are exercised), the IR text
 * of one case (the unfused chain slice -> reshape -> rms_norm -> rope next to the fused
 * rms_norm_rope on the same operands) and the parse of IR text.
 */
#ifndef H3_QK_TEST_H
#define H3_QK_TEST_H

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

static uint64_t qk_rng = 0x2545f4914f6cdd1dull;
static inline double qk_uniform(double lo, double hi) {
  qk_rng ^= qk_rng << 13;
  qk_rng ^= qk_rng >> 7;
  qk_rng ^= qk_rng << 17;
  return lo + (hi - lo) * (double)(qk_rng >> 11) * 0x1p-53;
}

/* n random non-zero values of dtype t: |v| in [0.05, 2] times a per-64-element scale of
 * 2^-6 .. 2^6 (x rows of very different norms), sign random. */
static inline void *qk_random(h3_dtype t, int64_t n, bool scaled) {
  void *p = malloc((size_t)(n ? n : 1) * h3_dtype_size(t) + 16);
  double scale = 1.0;
  for (int64_t i = 0; p && i < n; i++) {
    if (scaled && i % 64 == 0) scale = ldexp(1.0, (int)floor(qk_uniform(-6, 7)));
    double v = qk_uniform(0.05, 2.0) * scale * (qk_uniform(0, 1) < 0.5 ? -1 : 1);
    if (t == H3_BF16) ((uint16_t *)p)[i] = h3_f32_to_bf16((float)v);
    else if (t == H3_F16) ((uint16_t *)p)[i] = h3_f32_to_f16((float)v);
    else ((float *)p)[i] = (float)v;
  }
  return p;
}

static inline const char *qk_dtype(h3_dtype t) {
  return t == H3_BF16 ? "bf16" : t == H3_F16 ? "f16" : "f32";
}

/* The IR of case c: graph @g with %y (the chain) and %f (the fused op), both returned. */
static inline char *qk_ir(const qk_case *c) {
  char off[64] = "";
  if (!isnan(c->offset)) /* a float literal: with a '.' or an exponent */
    snprintf(off, sizeof off, ", offset = %.17g%s", c->offset,
             c->offset == floor(c->offset) && fabs(c->offset) < 1e15 ? ".0" : "");
  const char *wd = qk_dtype(c->wd), *cd = qk_dtype(c->cd);
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

static inline h3_module *qk_parse(const char *text, h3_diag *d) {
  return h3_module_parse("qk_case.ir", text, strlen(text), d);
}

/* The op of graph g whose first result is named `name`. */
static inline h3_op *qk_op(h3_graph *g, const char *name) {
  for (h3_op *op = g->body.first; op; op = op->next)
    if (op->n_results && op->results[0]->name && strcmp(op->results[0]->name, name) == 0)
      return op;
  return NULL;
}

#endif
