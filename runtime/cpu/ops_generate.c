/* ops_generate.c: CPU reference of the generator ops: randn and sigma_schedule.
 *
 * randn() {shape, stream} -> f32[shape]: element i = h3_rng_normal(seed, FNV-1a(stream), i)
 *   (include/h3/rng.h), the request seed coming from the backend (h3exec --seed); the GPU
 *   computes the same bits.
 * sigma_schedule() {n, shift} -> f32[n]: b_i = 1 - i/(n-1) (b_0 = 1 when n = 1);
 *   sigma_i = s*b_i / (1 + (s-1)*b_i), in fp64, rounded once to the result dtype.
 */
#include "cpu_internal.h"
#include "h3/rng.h"

#include <stdlib.h>

H3_CPU_KERNEL(h3cpu_randn) {
  (void)in, (void)n_in, (void)n_out;
  const char *stream = h3_op_attr_string(op, "stream", "");
  uint32_t sid = h3_rng_stream_id(stream);
  int64_t n = h3cpu_numel(&out[0]);
  if (out[0].type.dtype == H3_F32) {
    h3_rng_fill_normal(c->seed, sid, 0, (size_t)n, out[0].data);
    return H3_OK;
  }
  float *tmp = malloc((size_t)(n + 1) * sizeof(float));
  if (!tmp) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  h3_rng_fill_normal(c->seed, sid, 0, (size_t)n, tmp);
  for (int64_t i = 0; i < n; i++) h3cpu_st(out[0].data, out[0].type.dtype, i, tmp[i]);
  free(tmp);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_sigma_schedule) {
  (void)c, (void)in, (void)n_in, (void)n_out;
  int64_t n = h3cpu_numel(&out[0]);
  double s = h3_op_attr_float(op, "shift", 1.0);
  for (int64_t i = 0; i < n; i++) {
    double b = n > 1 ? 1.0 - (double)i / (double)(n - 1) : 1.0;
    h3cpu_st64(out[0].data, out[0].type.dtype, i, s * b / (1.0 + (s - 1.0) * b));
  }
  return H3_OK;
}
