/* ops_rope.c: CPU reference of the position ops: timestep_embedding, rope_table,
 * rope_pos_table and rope.
 *
 * timestep_embedding(t f32[M]) {dim}: h = dim/2, f_j = expf((-ln 10000 * j) / h) in fp32,
 *   out[m] = [cos(t_m f_0..h-1), sin(t_m f_0..h-1)] (fp32; an odd dim leaves the last
 *   column 0).
 * rope_table(pos f32[S, A], inv_freq f32[F]): angle[s, a*F + j] = pos[s, a] * inv_freq[j]
 *   in fp32; cos/sin in fp32, rounded once to the result dtype.
 * rope_pos_table(pos i32[T]) {theta, dims}: angle = pos * theta^(-2i/dims) in fp64,
 *   cos/sin in fp64, stored as f32.
 * rope(x[T, H, D], cos[T, R/2], sin[T, R/2]): neox rotate-half on dims [0, R):
 *   (a, b) = (x[i], x[i + R/2]) -> (a*c - b*s, b*c + a*s) in fp32, one rounding each;
 *   dims [R, D) are copied (rounded to the result dtype when it differs). Its row function
 *   (h3cpu_rope_row) is shared with rms_norm_rope (ops_norm_rope.c).
 */
#include "cpu_internal.h"

H3_CPU_KERNEL(h3cpu_timestep_embedding) {
  (void)c, (void)n_in, (void)n_out;
  int64_t M = h3cpu_numel(&in[0]);
  int64_t dim = h3_op_attr_int(op, "dim", out[0].type.dims[out[0].type.rank - 1]);
  int64_t half = dim / 2;
  h3_dtype od = out[0].type.dtype;
  const float ln1e4 = 9.21034037197618f; /* ln(10000) */
  for (int64_t m = 0; m < M; m++) {
    float t = h3cpu_ld(in[0].data, in[0].type.dtype, m);
    for (int64_t j = 0; j < half; j++) {
      float f = expf((-ln1e4 * (float)j) / (float)half);
      float a = t * f;
      h3cpu_st(out[0].data, od, m * dim + j, cosf(a));
      h3cpu_st(out[0].data, od, m * dim + half + j, sinf(a));
    }
    if (dim % 2) h3cpu_st(out[0].data, od, m * dim + dim - 1, 0.0f);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_rope_table) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  const h3_type *pt = &in[0].type;
  int64_t S = pt->dims[0], A = pt->rank > 1 ? pt->dims[1] : 1;
  int64_t F = h3cpu_numel(&in[1]);
  for (int64_t s = 0; s < S; s++)
    for (int64_t a = 0; a < A; a++) {
      float p = h3cpu_ld(in[0].data, pt->dtype, s * A + a);
      for (int64_t j = 0; j < F; j++) {
        float ang = p * h3cpu_ld(in[1].data, in[1].type.dtype, j);
        int64_t o = s * A * F + a * F + j;
        h3cpu_st(out[0].data, out[0].type.dtype, o, cosf(ang));
        h3cpu_st(out[1].data, out[1].type.dtype, o, sinf(ang));
      }
    }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_rope_pos_table) {
  (void)c, (void)n_in, (void)n_out;
  int64_t T = h3cpu_numel(&in[0]);
  double theta = h3_op_attr_float(op, "theta", 10000.0);
  int64_t dims = h3_op_attr_int(op, "dims", 2 * out[0].type.dims[out[0].type.rank - 1]);
  int64_t half = dims / 2;
  for (int64_t t = 0; t < T; t++) {
    double p = (double)h3cpu_ldi(in[0].data, in[0].type.dtype, t);
    for (int64_t i = 0; i < half; i++) {
      double ang = p * pow(theta, -2.0 * (double)i / (double)dims);
      h3cpu_st64(out[0].data, out[0].type.dtype, t * half + i, cos(ang));
      h3cpu_st64(out[1].data, out[1].type.dtype, t * half + i, sin(ang));
    }
  }
  return H3_OK;
}

void h3cpu_rope_row(const void *x, h3_dtype xd, void *y, h3_dtype yd, int64_t D, int64_t half,
                    const h3_tensor *ct, const h3_tensor *st, int64_t t) {
  for (int64_t i = 0; i < half; i++) {
    float cs = h3cpu_ld(ct->data, ct->type.dtype, t * half + i);
    float sn = h3cpu_ld(st->data, st->type.dtype, t * half + i);
    float a = h3cpu_ld(x, xd, i);
    float b = h3cpu_ld(x, xd, i + half);
    float ya = a * cs - b * sn;
    float yb = b * cs + a * sn;
    h3cpu_st(y, yd, i, ya);
    h3cpu_st(y, yd, i + half, yb);
  }
  for (int64_t i = 2 * half; i < D; i++) h3cpu_st(y, yd, i, h3cpu_ld(x, xd, i));
}

H3_CPU_KERNEL(h3cpu_rope) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t T = xt->dims[0], D = xt->dims[xt->rank - 1];
  int64_t H = T && D ? h3cpu_numel(&in[0]) / (T * D) : 0;
  int64_t half = in[1].type.dims[in[1].type.rank - 1];
  h3_dtype xd = xt->dtype, od = out[0].type.dtype;
  const size_t xs = h3_dtype_size(xd), os = h3_dtype_size(od);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      int64_t base = (t * H + h) * D;
      h3cpu_rope_row((const char *)in[0].data + (size_t)base * xs, xd,
                     (char *)out[0].data + (size_t)base * os, od, D, half, &in[1], &in[2], t);
    }
  return H3_OK;
}
