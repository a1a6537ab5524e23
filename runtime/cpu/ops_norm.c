/* ops_norm.c: CPU reference of the last-axis reductions: rms_norm, argmax, reduce_sum.
 *
 * rms_norm(x[.., D], w[D]) {eps, offset}: per row, s = sum_k x_k^2 in fp32 with k
 * ascending; r = 1 / sqrt(s / D + eps); y_k = (x_k * r) * (w_k + offset), rounded once to
 * the result dtype. argmax: first index of the maximum (NaN never wins; an all-NaN row
 * gives 0). reduce_sum: fp32 sum, ascending. Rows are independent, so results do not
 * depend on the number of rows.
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

H3_CPU_KERNEL(h3cpu_rms_norm) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t D = xt->dims[xt->rank - 1];
  int64_t rows = D ? h3cpu_numel(&in[0]) / D : 0;
  float eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  float off = (float)h3_op_attr_float(op, "offset", 0.0);
  float *w = malloc((size_t)(D ? D : 1) * sizeof(float));
  if (!w) {
    h3cpu_error(c, op, NULL, "out of memory");
    return H3_ERR;
  }
  for (int64_t k = 0; k < D; k++) w[k] = h3cpu_ld(in[1].data, in[1].type.dtype, k) + off;
  h3_dtype xd = xt->dtype, od = out[0].type.dtype;
  for (int64_t r = 0; r < rows; r++) {
    float inv = h3cpu_rms_inv(in[0].data, xd, r, D, eps);
    for (int64_t k = 0; k < D; k++) {
      float v = h3cpu_ld(in[0].data, xd, r * D + k);
      h3cpu_st(out[0].data, od, r * D + k, (v * inv) * w[k]);
    }
  }
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
