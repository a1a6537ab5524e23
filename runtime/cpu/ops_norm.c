/* ops_norm.c: CPU reference of the last-axis reductions: rms_norm, argmax, reduce_sum.
 *
 * rms_norm(x[.., D], w[D]) {eps, offset}: per row, s = sum_k x_k^2 in fp32 with k
 * ascending; r = 1 / sqrt(s / D + eps); y_k = (x_k * r) * (w_k + offset), rounded once to
 * the result dtype. argmax: first index of the maximum (NaN never wins; an all-NaN row
 * gives 0). reduce_sum: fp32 sum, ascending. Rows are independent, so results do not
 * depend on the number of rows. rms_norm's row function (h3cpu_rms_norm_row) and weights
 * (h3cpu_rms_weights) are shared with rms_norm_rope (ops_norm_rope.c).
 */
#include "cpu_internal.h"

#include <stdlib.h>

/* The one rms_norm reduction of the CPU backend (also used by the fused norm_modulate ops,
 * so that they reproduce rms_norm bitwise): row x[0..D) of dtype xd. */
float h3cpu_rms_inv(const void *x, h3_dtype xd, int64_t row, int64_t D, float eps) {
  float s = 0.0f;
  for (int64_t k = 0; k < D; k++) {
    float v = h3cpu_ld(x, xd, row * D + k);
    s += v * v;
  }
  return 1.0f / sqrtf(s / (float)D + eps);
}

void h3cpu_rms_norm_row(const void *x, h3_dtype xd, int64_t D, const float *w, float eps, void *y,
                        h3_dtype yd) {
  float inv = h3cpu_rms_inv(x, xd, 0, D, eps);
  for (int64_t k = 0; k < D; k++) {
    float v = h3cpu_ld(x, xd, k);
    h3cpu_st(y, yd, k, (v * inv) * w[k]);
  }
}

float *h3cpu_rms_weights(const h3_tensor *w, int64_t D, float offset) {
  float *f = malloc((size_t)(D ? D : 1) * sizeof(float));
  for (int64_t k = 0; f && k < D; k++) f[k] = h3cpu_ld(w->data, w->type.dtype, k) + offset;
  return f;
}

H3_CPU_KERNEL(h3cpu_rms_norm) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t D = xt->dims[xt->rank - 1];
  int64_t rows = D ? h3cpu_numel(&in[0]) / D : 0;
  float eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  float *w = h3cpu_rms_weights(&in[1], D, (float)h3_op_attr_float(op, "offset", 0.0));
  if (!w) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  h3_dtype xd = xt->dtype, od = out[0].type.dtype;
  const size_t xs = h3_dtype_size(xd), os = h3_dtype_size(od);
  for (int64_t r = 0; r < rows; r++)
    h3cpu_rms_norm_row((const char *)in[0].data + (size_t)(r * D) * xs, xd, D, w, eps,
                       (char *)out[0].data + (size_t)(r * D) * os, od);
  free(w);
  return H3_OK;
}

/* add_rms_norm(a, b, w) -> (x, y): x = a + b as add computes it (fp32, one rounding to x's
 * dtype), then rms_norm's row function on the stored x: bitwise the two ops. */
H3_CPU_KERNEL(h3cpu_add_rms_norm) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &out[0].type;
  const int64_t D = xt->dims[xt->rank - 1], n = h3cpu_numel(&out[0]), rows = D ? n / D : 0;
  float eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  float *w = h3cpu_rms_weights(&in[2], D, (float)h3_op_attr_float(op, "offset", 0.0));
  if (!w) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  const h3_dtype d = xt->dtype;
  for (int64_t i = 0; i < n; i++)
    h3cpu_st(out[0].data, d, i, h3cpu_ld(in[0].data, d, i) + h3cpu_ld(in[1].data, d, i));
  const size_t es = h3_dtype_size(d);
  for (int64_t r = 0; r < rows; r++)
    h3cpu_rms_norm_row((const char *)out[0].data + (size_t)(r * D) * es, d, D, w, eps,
                       (char *)out[1].data + (size_t)(r * D) * es, d);
  free(w);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_argmax) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t N = xt->dims[xt->rank - 1];
  int64_t rows = N ? h3cpu_numel(&in[0]) / N : 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t best = 0;
    double bv = -INFINITY;
    int found = 0;
    for (int64_t k = 0; k < N; k++) {
      double v = h3cpu_ld64(in[0].data, xt->dtype, r * N + k);
      if (v == v && (!found || v > bv)) {
        bv = v;
        best = k;
        found = 1;
      }
    }
    h3cpu_sti(out[0].data, out[0].type.dtype, r, best);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_reduce_sum) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t N = xt->rank ? xt->dims[xt->rank - 1] : 1;
  int64_t rows = N ? h3cpu_numel(&in[0]) / N : h3cpu_numel(&out[0]);
  for (int64_t r = 0; r < rows; r++) {
    float s = 0.0f;
    for (int64_t k = 0; k < N; k++) s += h3cpu_ld(in[0].data, xt->dtype, r * N + k);
    h3cpu_st(out[0].data, out[0].type.dtype, r, s);
  }
  return H3_OK;
}
