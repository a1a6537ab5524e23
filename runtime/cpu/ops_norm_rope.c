/* ops_norm_rope.c: CPU reference of rms_norm_rope (ops.def; made by qk-norm-rope-fusion):
 * the per-head q/k RMSNorm + RoPE of an attention block, reading x bf16[T, C] in place.
 *
 * Row (t, h) of the result bf16[T, heads, D] is computed by the row functions of the two
 * ops it replaces, so it is the unfused chain bit for bit: rms_norm's row function
 * (h3cpu_rms_norm_row: its reduction, w + offset, one rounding to bf16) on the D values
 * x[t, start + h*D ..], into a bf16 scratch row, then rope's row function (h3cpu_rope_row)
 * from that row into the result. Rows are independent and run on the worker pool (one
 * scratch row per worker).
 */
#include "cpu_internal.h"

#include <stdlib.h>

typedef struct {
  const h3_tensor *x, *cos, *sin;
  uint16_t *y;      /* [T, heads, D] bf16 */
  const float *w;   /* [D] w + offset */
  uint16_t *rows;   /* one scratch row of D bf16 per worker */
  int64_t C, start, heads, D, half;
  float eps;
} nr_job;

static void rows_range(void *arg, int worker, int64_t begin, int64_t end) {
  const nr_job *j = arg;
  uint16_t *n = j->rows + (size_t)worker * (size_t)j->D;
  const uint16_t *x = j->x->data;
  for (int64_t r = begin; r < end; r++) {
    const int64_t t = r / j->heads, h = r % j->heads;
    h3cpu_rms_norm_row(x + t * j->C + j->start + h * j->D, H3_BF16, j->D, j->w, j->eps, n, H3_BF16);
    h3cpu_rope_row(n, H3_BF16, j->y + r * j->D, H3_BF16, j->D, j->half, j->cos, j->sin, t);
  }
}

H3_CPU_KERNEL(h3cpu_rms_norm_rope) {
  (void)n_in, (void)n_out;
  nr_job j = {.x = &in[0], .cos = &in[2], .sin = &in[3], .y = out[0].data};
  j.C = in[0].type.dims[1];
  j.start = h3_op_attr_int(op, "start", 0);
  j.heads = out[0].type.dims[1];
  j.D = out[0].type.dims[2];
  j.half = in[2].type.dims[1];
  j.eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  float *w = h3cpu_rms_weights(&in[1], j.D, (float)h3_op_attr_float(op, "offset", 0.0));
  const int workers = h3cpu_pool_size(c->pool);
  uint16_t *rows = malloc((size_t)workers * (size_t)(j.D ? j.D : 1) * sizeof *rows);
  if (!w || !rows) {
    free(w);
    free(rows);
    h3cpu_error(c, op, NULL, "out of memory");
    return H3_ERR;
  }
  j.w = w;
  j.rows = rows;
  h3cpu_parallel(c->pool, out[0].type.dims[0] * j.heads, rows_range, &j);
  free(w);
  free(rows);
  return H3_OK;
}
