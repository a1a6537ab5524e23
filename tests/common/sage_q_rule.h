/* sage_q_rule.h: sage_attention's Q rule (ops.def) written out for the tests of sage-q-fusion
 * (tests/cpu/test_ops_sage_q.c, tests/qkrope/test_emu_sage.c, tests/gpu/test_gpu_ops.c): per
 * segment, q head and 64-row block from the segment's start, delta = amax / 127 (1 when 0) and
 * codes round-half-even(q / delta) in [-127, 127], in include/h3/sage.h's padded layout with
 * zero codes past a segment's rows. Test-only, header-only. */
#ifndef H3_TESTS_SAGE_Q_RULE_H
#define H3_TESTS_SAGE_Q_RULE_H

#include "h3/bf16.h"
#include "h3/sage.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The codes i8[H*P*D] and deltas f32[H*P/64] of q bf16[T, H, D] cut at seg (an ints attribute
 * or NULL). */
static inline void sage_q_rule(const uint16_t *q, int64_t T, int64_t H, int64_t D, const h3_attr *seg,
                               int8_t *codes, float *deltas) {
  int64_t lo = 0, hi = 0, pad = 0;
  for (int i = 0; h3_sage_next_segment(seg, T, &i, &lo, &hi);) {
    const int64_t len = hi - lo, lp = h3_sage_padded(len);
    for (int64_t h = 0; h < H; h++)
      for (int64_t b = 0; b < lp / 64; b++) {
        float a = 0.0f;
        for (int64_t r = b * 64; r < b * 64 + 64 && r < len; r++)
          for (int64_t d = 0; d < D; d++) a = fmaxf(a, fabsf(h3_bf16_to_f32(q[((lo + r) * H + h) * D + d])));
        const float delta = a > 0.0f ? a / 127.0f : 1.0f;
        deltas[H * pad / 64 + h * (lp / 64) + b] = delta;
        for (int64_t r = b * 64; r < b * 64 + 64; r++)
          for (int64_t d = 0; d < D; d++) {
            float c = r < len ? nearbyintf(h3_bf16_to_f32(q[((lo + r) * H + h) * D + d]) / delta) : 0.0f;
            codes[(H * pad + h * lp + r) * D + d] = (int8_t)fminf(127.0f, fmaxf(-127.0f, c));
          }
      }
    pad += lp;
  }
}

/* How many of codes and deltas differ from the rule's (-1 when out of memory). */
static inline int64_t sage_q_rule_diff(const uint16_t *q, int64_t T, int64_t H, int64_t D, const h3_attr *seg,
                                       const int8_t *codes, const float *deltas) {
  const int64_t P = h3_sage_q_rows(seg, T), nc = H * P * D, nd = H * P / 64;
  int8_t *c = malloc((size_t)nc + 1);
  float *d = malloc((size_t)(nd + 1) * sizeof *d);
  int64_t bad = -1;
  if (c && d) {
    sage_q_rule(q, T, H, D, seg, c, d);
    bad = 0;
    for (int64_t i = 0; i < nc; i++) bad += c[i] != codes[i];
    for (int64_t i = 0; i < nd; i++) bad += d[i] != deltas[i];
  }
  free(c), free(d);
  return bad;
}

#endif
