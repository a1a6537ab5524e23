/* sage.h: where sage_attention's q codes live (ops.def) when the norm that produces q writes
 * them (rms_norm_rope {sage_quant = 1}, made by sage-q-fusion) and sage_attention reads them
 * (its operands 3 and 4): the segments of the rows and the padded layout, one definition for
 * the type inference, the CPU reference, the kernel emitter and the cuda backend.
 *
 * The rows [0, T) of q [T, H, D] are cut at the boundaries of `segments` that lie inside
 * (0, T), as sage_attention reads them (empty segments dropped). Segment i of len_i rows is
 * padded to lp_i = len_i rounded up to 128 rows (the attention kernels' query tile); P_i is
 * lp_0 + .. + lp_{i-1} and P the sum of all. Then
 *   codes  i8 [H * P * D]:   at H * P_i * D, segment i's codes [H][lp_i][D] (rows past len_i 0);
 *   deltas f32 [H * P / 64]: at H * P_i / 64, its deltas [H][lp_i / 64], one per 64-row block
 *                            from the segment's start (1 for a block with no row);
 * the layout kernels/sage_quant.cu writes into the op's scratch for one segment at a time.
 */
#ifndef H3_SAGE_H
#define H3_SAGE_H

#include "h3/ir.h"

#include <stdbool.h>
#include <stdint.h>

enum { H3_SAGE_QBLOCK = 64, /* rows per delta of q, from the segment's start */
       H3_SAGE_TILE = 128 }; /* a segment's rows are padded to a multiple of this */

static inline int64_t h3_sage_padded(int64_t len) {
  return (len + H3_SAGE_TILE - 1) / H3_SAGE_TILE * H3_SAGE_TILE;
}

/* The next non-empty segment of T rows cut at `seg` (an ints attribute or NULL; boundaries
 * past T cut at T): start with *i = 0 and *hi = 0; each call that returns true sets [*lo,
 * *hi). The cuda backend cuts every attention op's segments so (cu_next_segment). */
static inline bool h3_sage_next_segment(const h3_attr *seg, int64_t T, int *i, int64_t *lo, int64_t *hi) {
  const int nb = seg && seg->kind == H3_ATTR_INTS ? seg->n : 0;
  *lo = *hi;
  while (*i <= nb) {
    int64_t b = *i < nb ? seg->ints[*i] : T;
    ++*i;
    if (b > T) b = T;
    if (b > *lo) {
      *hi = b;
      return true;
    }
  }
  return false;
}

/* P: the padded rows of every segment of T rows cut at seg. */
static inline int64_t h3_sage_q_rows(const h3_attr *seg, int64_t T) {
  int64_t p = 0, lo = 0, hi = 0;
  for (int i = 0; h3_sage_next_segment(seg, T, &i, &lo, &hi);) p += h3_sage_padded(hi - lo);
  return p;
}

#endif
