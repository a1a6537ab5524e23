/* ops_spectrum.c: CPU reference of the step-skipping ops (ops.def, docs/step-skipping.md):
 * spectrum_update (R[m] += c_m * h), spectrum_forecast (sum_m c_m R[m] + sum_q c_q hist[q],
 * one rounding) and cache_dit_decide (the relative L1 change of block 0's residual and the
 * reuse rule).
 *
 * The coefficient row is chosen by the scalar operand k; a k outside the table is an
 * error naming the op. Arithmetic is fp32 with an explicit rounding after every product
 * and every sum (no contraction), exactly as the CUDA kernels write it with __fmul_rn and
 * __fadd_rn. The decision sums |a - b| and |b| in fp64 over fixed blocks of 65536
 * elements and adds the block sums in order, so it does not depend on the thread count.
 */
#include "cpu_internal.h"

#include <stdlib.h>

#define DECIDE_BLOCK 65536

/* The row k of a coefficient table of rows of `width`, as floats into c; -1 if k is
 * outside the table. */
static int coeff_row(const h3_cpu_ctx *cx, const h3_op *op, const h3_tensor *kt, int64_t width,
                     float *c) {
  const h3_attr *a = h3_op_attr(op, "coeffs");
  int64_t k = h3cpu_ldi(kt->data, kt->type.dtype, 0);
  int64_t rows = a && width > 0 ? a->n / width : 0;
  if (k < 0 || k >= rows) {
    h3cpu_error(cx, op, "the coefficient row comes from the loop counter the pass set up",
                "row %lld is outside the %lld-row coefficient table", (long long)k,
                (long long)rows);
    return -1;
  }
  for (int64_t j = 0; j < width; j++) c[j] = (float)a->floats[k * width + j];
  return 0;
}

typedef struct {
  const h3_tensor *r, *h, *o;
  const float *c;
  int64_t p, f;
} update_job;

static void update_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const update_job *j = arg;
  for (int64_t m = 0; m < j->p; m++)
    for (int64_t e = begin; e < end; e++) {
      volatile float prod = j->c[m] * h3cpu_ld(j->h->data, j->h->type.dtype, e);
      ((float *)j->o->data)[m * j->f + e] = ((const float *)j->r->data)[m * j->f + e] + prod;
    }
}

H3_CPU_KERNEL(h3cpu_spectrum_update) {
  (void)n_in, (void)n_out;
  int64_t p = in[0].type.dims[0], f = h3cpu_numel(&in[1]);
  float *cf = malloc((size_t)p * sizeof *cf);
  if (!cf) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  if (coeff_row(c, op, &in[2], p, cf)) {
    free(cf);
    return H3_ERR;
  }
  update_job j = {&in[0], &in[1], &out[0], cf, p, f};
  h3cpu_parallel(c->pool, f, update_range, &j);
  free(cf);
  return H3_OK;
}

typedef struct {
  const h3_tensor *r, *hist, *o;
  const float *c;
  int64_t p, q, f;
} forecast_job;

static void forecast_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const forecast_job *j = arg;
  const float *r = j->r->data;
  for (int64_t e = begin; e < end; e++) {
    float acc = 0.0f;
    for (int64_t m = 0; m < j->p; m++) {
      volatile float prod = j->c[m] * r[m * j->f + e];
      acc = acc + prod;
    }
    for (int64_t s = 0; s < j->q; s++) {
      volatile float prod = j->c[j->p + s] * h3cpu_ld(j->hist->data, j->hist->type.dtype, s * j->f + e);
      acc = acc + prod;
    }
    h3cpu_st(j->o->data, j->o->type.dtype, e, acc);
  }
}

H3_CPU_KERNEL(h3cpu_spectrum_forecast) {
  (void)n_out;
  int64_t p = in[0].type.dims[0], q = n_in == 3 ? in[2].type.dims[0] : 0;
  int64_t f = h3cpu_numel(&out[0]);
  float *cf = malloc((size_t)(p + q) * sizeof *cf);
  if (!cf) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  if (coeff_row(c, op, &in[1], p + q, cf)) {
    free(cf);
    return H3_ERR;
  }
  forecast_job j = {&in[0], n_in == 3 ? &in[2] : NULL, &out[0], cf, p, q, f};
  h3cpu_parallel(c->pool, f, forecast_range, &j);
  free(cf);
  return H3_OK;
}

typedef struct {
  const h3_tensor *a, *b;
  double *num, *den; /* per block */
  int64_t n;
} decide_job;

static void decide_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const decide_job *j = arg;
  for (int64_t blk = begin; blk < end; blk++) {
    double num = 0, den = 0;
    int64_t e1 = (blk + 1) * DECIDE_BLOCK < j->n ? (blk + 1) * DECIDE_BLOCK : j->n;
    for (int64_t e = blk * DECIDE_BLOCK; e < e1; e++) {
      float x = h3cpu_ld(j->a->data, j->a->type.dtype, e);
      float y = h3cpu_ld(j->b->data, j->b->type.dtype, e);
      num += fabsf(x - y);
      den += fabsf(y);
    }
    j->num[blk] = num;
    j->den[blk] = den;
  }
}

H3_CPU_KERNEL(h3cpu_cache_dit_decide) {
  (void)n_in, (void)n_out;
  int64_t n = h3cpu_numel(&in[0]), blocks = (n + DECIDE_BLOCK - 1) / DECIDE_BLOCK;
  double *sums = calloc((size_t)(2 * blocks + 2), sizeof *sums);
  if (!sums) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  decide_job j = {&in[0], &in[1], sums, sums + blocks + 1, n};
  h3cpu_parallel(c->pool, blocks, decide_range, &j);
  double num = 0, den = 0;
  for (int64_t b = 0; b < blocks; b++) {
    num += j.num[b];
    den += j.den[b];
  }
  free(sums);
  int64_t step = h3cpu_ldi(in[2].data, in[2].type.dtype, 0) + h3_op_attr_int(op, "offset", 0);
  int64_t cached = h3cpu_ldi(in[3].data, in[3].type.dtype, 0);
  int use = step >= h3_op_attr_int(op, "warmup", 0) && den > 0 &&
            num / den < h3_op_attr_float(op, "threshold", 0) &&
            cached < h3_op_attr_int(op, "max_consecutive", 0);
  ((int32_t *)out[0].data)[0] = use;
  return H3_OK;
}
