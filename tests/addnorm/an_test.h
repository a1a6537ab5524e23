/* an_test.h: what the add_rms_norm tests share (test-only, header-only): the state of the
 * data generator and the residual operands a, b of a case, drawn with tests/common/
 * case_data.h and scaled per row so that the rows of x = a + b have very different norms. */
#ifndef H3_AN_TEST_H
#define H3_AN_TEST_H

#include "../common/case_data.h"

#include <math.h>
#include <stdint.h>

/* the test's data generator state, one per program */
static inline uint64_t *an_rng(void) {
  static uint64_t state = 0x9d2c5680a3f1b7e5ull;
  return &state;
}

/* rows x D random non-zero values of dtype t (bf16 or f32; case_random with its mixed
 * magnitudes), row r times 2^((7r mod 17) - 8): exact, and the same factor for a and b of a
 * case, so each row of their sum keeps its own scale (2^-8 .. 2^8). */
static inline void *an_operand(h3_dtype t, int64_t rows, int64_t D) {
  void *p = case_random(an_rng(), t, rows * D, true);
  for (int64_t r = 0; p && r < rows; r++) {
    const int e = (int)(7 * r % 17) - 8;
    for (int64_t k = r * D; k < (r + 1) * D; k++) {
      if (t == H3_BF16)
        ((uint16_t *)p)[k] = h3_f32_to_bf16(ldexpf(h3_bf16_to_f32(((uint16_t *)p)[k]), e));
      else ((float *)p)[k] = ldexpf(((float *)p)[k], e);
    }
  }
  return p;
}

#endif
