/* qk_test.h: what the qk-norm-rope-fusion tests share (test-only, header-only): the check
 * counter, the state of the data generator (tests/common/case_data.h; x is drawn with
 * scaled rows of mixed magnitude, so the bf16 roundings of the norm and of the rope are
 * exercised) and the IR text of one case (the unfused chain slice -> reshape -> rms_norm ->
 * rope next to the fused rms_norm_rope on the same operands).
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



#endif
