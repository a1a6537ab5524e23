/* ops_norm_rope.c: CPU reference of rms_norm_rope (ops.def; made by qk-norm-rope-fusion):
 * the per-head q/k RMSNorm + RoPE of an attention block, reading x bf16[T, C] in place.
 *
 * Row (t, h) of the result bf16[T, heads, D] is computed by the row functions of the two
 * ops it replaces, so it is the unfused chain bit for bit: rms_norm's row function
 * (h3cpu_rms_norm_row: its reduction, w + offset, one rounding to bf16) on the D values
 * x[t, start + h*D ..], into a bf16 scratch row, then rope's row function (h3cpu_rope_row)
 * from that row into the result. Rows are independent and run on the worker pool (one
 * scratch row per worker).
 * The int8 form (x = i32 accumulators acc[T, C], s_x[T], s_w[C], bias?[C] as operands 4-6)
 * first dequantizes the head row's D accumulators by dequant_i8's own arithmetic
 * (h3cpu_dequant_value, ops_int8.c) rounded to bf16 into a second scratch row: the bf16
 * values the unfused dequant_i8 writes, so the rest is the same row functions on the same
 * values.
 * With sage_quant = 1 (sage-q-fusion) the result y is then quantized by sage_attention's own
 * Q rule (h3cpu_sage_quantize_q, ops_sage_q.c) into results 1 and 2: the codes sage_attention
 * would make of y, bit for bit.
 * rms_norm_rope_write (kv-write-fusion) computes the same rows and writes them into the paged
 * cache by kv_write's function: bitwise kv_write(cache, rms_norm_rope(..), slot).
 */
#include "cpu_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const h3_tensor *x, *cos, *sin;
  const float *sx, *sw, *bias; /* int8 form: [T], [C], [C] or NULL; sx NULL: bf16 x */
  uint16_t *y;      /* [T, heads, D] bf16 */
  const float *w;   /* [D] w + offset */
  uint16_t *rows;   /* per worker: a scratch row of D bf16 (and the dequantized x row) */
  int64_t C, start, heads, D, half;
  float eps;
} nr_job;

static void rows_range(void *arg, int worker, int64_t begin, int64_t end) {
  const nr_job *j = arg;
  uint16_t *n = j->rows + (size_t)worker * 2 * (size_t)j->D, *xd = n + j->D;
  for (int64_t r = begin; r < end; r++) {
    const int64_t t = r / j->heads, h = r % j->heads, c0 = t * j->C + j->start + h * j->D;
    const uint16_t *xr = (const uint16_t *)j->x->data + c0;
    if (j->sx) { /* dequant_i8 of the row, rounded to bf16 as it stores */
      const int32_t *acc = (const int32_t *)j->x->data + c0;
      const int64_t col = j->start + h * j->D;
      for (int64_t k = 0; k < j->D; k++)
        xd[k] = h3_f32_to_bf16(h3cpu_dequant_value(acc[k], j->sx[t], j->sw[col + k],
                                                   j->bias ? j->bias + col + k : NULL));
      xr = xd;
    }
    h3cpu_rms_norm_row(xr, H3_BF16, j->D, j->w, j->eps, n, H3_BF16);
    h3cpu_rope_row(n, H3_BF16, j->y + r * j->D, H3_BF16, j->D, j->half, j->cos, j->sin, t);
  }
}

/* The head rows of rms_norm_rope into y [T, heads, D] from x's columns [start, start +
 * heads*D): x = in[0], w, cos, sin = in[1..3] and, with n_in > 4, the int8 form's s_x, s_w,
 * bias? = in[4..6]; eps and offset from op. */
static h3_status norm_rope_rows(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int n_in,
                                uint16_t *y, int64_t T, int64_t heads, int64_t D, int64_t start) {
  nr_job j = {.x = &in[0], .cos = &in[2], .sin = &in[3], .y = y, .heads = heads, .D = D};
  j.C = in[0].type.dims[1];
  j.start = start;
  j.half = in[2].type.dims[1];
  j.eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  float *w = h3cpu_rms_weights(&in[1], j.D, (float)h3_op_attr_float(op, "offset", 0.0));
  const int workers = h3cpu_pool_size(c->pool);
  uint16_t *rows = malloc((size_t)workers * 2 * (size_t)(j.D ? j.D : 1) * sizeof *rows);
  float *bias = n_in > 6 ? malloc((size_t)(j.C ? j.C : 1) * sizeof *bias) : NULL;
  if (!w || !rows || (n_in > 6 && !bias)) {
    free(w);
    free(rows);
    free(bias);
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  if (n_in > 4) {
    j.sx = in[4].data;
    j.sw = in[5].data;
  }
  if (bias) h3cpu_to_f32(bias, in[6].data, in[6].type.dtype, j.C);
  j.bias = bias;
  j.w = w;
  j.rows = rows;
  h3cpu_parallel(c->pool, T * heads, rows_range, &j);
  free(w);
  free(rows);
  free(bias);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_rms_norm_rope) {
  const h3_type *yt = &out[0].type;
  h3_status st = norm_rope_rows(c, op, in, n_in, out[0].data, yt->dims[0], yt->dims[1], yt->dims[2],
                                h3_op_attr_int(op, "start", 0));
  if (st != H3_OK || n_out < 3) return st;
  return h3cpu_sage_quantize_q(c, op, &out[0], out[1].data, out[2].data);
}

/* rms_norm_rope_write(cache, x, w, cos, sin, slot, vcache?, wq?): the rows into a scratch
 * tensor, then kv_write's own function (its slot checks and its order: a later row wins);
 * with the v cache, x's v columns gathered into the scratch and written the same way; with
 * wq, q's rows (rms_norm_rope's rows of q's columns) into result 2. */
H3_CPU_KERNEL(h3cpu_rms_norm_rope_write) {
  const int64_t T = in[1].type.dims[0], C = in[1].type.dims[1], D = in[2].type.dims[0];
  const int64_t heads = h3_op_attr_int(op, "heads", 1), row = heads * D;
  h3_tensor kv[3] = {in[0], in[0], in[5]}; /* kv[1]: the rows, typed below */
  uint16_t *rows = malloc((size_t)(T * row > 0 ? T * row : 1) * sizeof *rows);
  if (!rows) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  /* kv_write's x is [T, ..] of the cache's row shape */
  kv[1].data = rows;
  kv[1].type.rank = in[0].type.rank - 1;
  kv[1].type.dims[0] = T;
  for (int i = 1; i < kv[1].type.rank; i++) kv[1].type.dims[i] = in[0].type.dims[i + 1];
  h3_status st = norm_rope_rows(c, op, in + 1, 4, rows, T, heads, D, h3_op_attr_int(op, "start", 0));
  if (st == H3_OK) st = h3cpu_kv_write(c, op, kv, 3, out, 1);
  if (st == H3_OK && n_in > 6 && n_out > 1) { /* v: columns [v_start, v_start + row) of x */
    const int64_t vs = h3_op_attr_int(op, "v_start", 0);
    const uint16_t *x = in[1].data;
    for (int64_t t = 0; t < T; t++) memcpy(rows + t * row, x + t * C + vs, (size_t)row * sizeof *rows);
    kv[0] = in[6];
    st = h3cpu_kv_write(c, op, kv, 3, out + 1, 1);
  }
  if (st == H3_OK && n_in > 7 && n_out > 2) { /* q: the same rows with wq at q's columns */
    const h3_tensor q_in[4] = {in[1], in[7], in[3], in[4]};
    st = norm_rope_rows(c, op, q_in, 4, out[2].data, T, h3_op_attr_int(op, "q_heads", 1), D,
                        h3_op_attr_int(op, "q_start", 0));
  }
  free(rows);
  return st;
}
