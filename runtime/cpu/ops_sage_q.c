/* ops_sage_q.c: sage_attention's int8 rule (ops.def) on the CPU, shared by the ops that apply
 * it: the codes of one value (round-half-even(x / delta) in [-127, 127]), the delta of a block
 * (amax / 127, 1 when every value is 0), and Q's whole rule into the padded layout of
 * include/h3/sage.h. sage_attention (ops_sage.c) quantizes its q with the latter unless it is
 * given the codes; rms_norm_rope {sage_quant = 1} (ops_norm_rope.c) writes them with the same
 * function, so the two are one computation; both cut the rows into segments with
 * h3cpu_sage_segments. Work items are (64-row block, head) pairs over
 * the pool's workers; each is computed the same way whatever the split.
 */
#include "cpu_internal.h"
#include "h3/sage.h"

#include <stdlib.h>

int8_t h3cpu_sage_code8(float x, float delta) {
  float r = nearbyintf(x / delta);
  return (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

float h3cpu_sage_delta8(const float *x, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
  return a > 0.0f ? a / 127.0f : 1.0f;
}

int64_t *h3cpu_sage_segments(const h3_cpu_ctx *c, const h3_op *op, int64_t T, int64_t *n) {
  const h3_attr *seg = h3_op_attr(op, "segments");
  int64_t lo = 0, hi = 0;
  *n = 0;
  for (int i = 0; h3_sage_next_segment(seg, T, &i, &lo, &hi);) ++*n;
  int64_t *bounds = malloc((size_t)(2 * *n + 2) * sizeof *bounds), s = 0;
  if (!bounds) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for the segments");
    return NULL;
  }
  int64_t *pad = bounds + *n + 1;
  bounds[0] = pad[0] = lo = hi = 0;
  for (int i = 0; h3_sage_next_segment(seg, T, &i, &lo, &hi); s++) {
    bounds[s + 1] = hi;
    pad[s + 1] = pad[s] + h3_sage_padded(hi - lo);
  }
  return bounds;
}

typedef struct {
  const h3_tensor *q; /* [T, H, D] */
  int64_t H, D, n_seg;
  int64_t *bounds, *pad; /* h3cpu_sage_segments' */
  int8_t *codes;
  float *deltas, *tmp; /* tmp: a block of 64 rows of D fp32 values per worker */
} q_job;

/* Block b of the padded rows (counted over every segment), head h. */
static void block(const q_job *j, int64_t b, int64_t h, float *x) {
  int64_t s = 0;
  while (s + 1 < j->n_seg && j->pad[s + 1] <= b * H3_SAGE_QBLOCK) s++;
  const int64_t len = j->bounds[s + 1] - j->bounds[s], lp = h3_sage_padded(len), D = j->D;
  const int64_t r0 = b * H3_SAGE_QBLOCK - j->pad[s];
  int64_t nb = len - r0;
  nb = nb < 0 ? 0 : nb > H3_SAGE_QBLOCK ? H3_SAGE_QBLOCK : nb;
  for (int64_t r = 0; r < nb; r++)
    for (int64_t d = 0; d < D; d++)
      x[r * D + d] = h3cpu_ld(j->q->data, j->q->type.dtype, ((j->bounds[s] + r0 + r) * j->H + h) * D + d);
  const float dq = h3cpu_sage_delta8(x, nb * D);
  j->deltas[j->H * j->pad[s] / H3_SAGE_QBLOCK + h * (lp / H3_SAGE_QBLOCK) + r0 / H3_SAGE_QBLOCK] = dq;
  int8_t *c = j->codes + (j->H * j->pad[s] + h * lp + r0) * D;
  for (int64_t i = 0; i < H3_SAGE_QBLOCK * D; i++) c[i] = i < nb * D ? h3cpu_sage_code8(x[i], dq) : 0;
}

static void block_range(void *arg, int worker, int64_t begin, int64_t end) {
  const q_job *j = arg;
  float *x = j->tmp + (size_t)worker * H3_SAGE_QBLOCK * (size_t)j->D;
  for (int64_t i = begin; i < end; i++) block(j, i / j->H, i % j->H, x);
}

h3_status h3cpu_sage_quantize_q(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *q, int8_t *codes,
                                float *deltas) {
  q_job j = {.q = q, .H = q->type.dims[1], .D = q->type.dims[2], .codes = codes, .deltas = deltas};
  j.bounds = h3cpu_sage_segments(c, op, q->type.dims[0], &j.n_seg);
  if (!j.bounds) return H3_ERR;
  j.pad = j.bounds + j.n_seg + 1;
  j.tmp = malloc(((size_t)h3cpu_pool_size(c->pool) * H3_SAGE_QBLOCK * (size_t)j.D + 1) * sizeof *j.tmp);
  if (!j.tmp) {
    free(j.bounds);
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for q's codes");
    return H3_ERR;
  }
  h3cpu_parallel(c->pool, j.pad[j.n_seg] / H3_SAGE_QBLOCK * j.H, block_range, &j);
  free(j.bounds), free(j.tmp);
  return H3_OK;
}
