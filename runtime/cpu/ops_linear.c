/* ops_linear.c: CPU reference of linear(x[.., K], w[N, K], bias?[N]) -> [.., N].
 *
 * y[m, n] = (sum_k x[m, k] * w[n, k]) + bias[n]: operands widened to fp32, the sum
 * accumulated in fp32 with k ascending from 0, the bias added last, then one rounding to
 * the result dtype. Every output element is computed by the same sequence of operations
 * whatever M is (batch invariance) and whichever worker computes it; the M*N outputs are
 * split into contiguous ranges over the pool's workers.
 */
#include "cpu_internal.h"

#include <stdlib.h>

typedef struct {
  const float *x, *w, *bias;
  int64_t N, K;
  void *out;
  h3_dtype od;
} linear_job;

static void linear_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const linear_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t m = i / j->N, n = i % j->N;
    const float *xr = j->x + m * j->K, *wr = j->w + n * j->K;
    float s = 0.0f;
    for (int64_t k = 0; k < j->K; k++) s += xr[k] * wr[k];
    if (j->bias) s += j->bias[n];
    h3cpu_st(j->out, j->od, i, s);
  }
}

H3_CPU_KERNEL(h3cpu_linear) {
  (void)n_out;
  const h3_type *xt = &in[0].type, *wt = &in[1].type;
  int64_t K = xt->dims[xt->rank - 1], N = wt->dims[0];
  int64_t M = K ? h3cpu_numel(&in[0]) / K : h3cpu_numel(&out[0]) / (N ? N : 1);
  float *x = malloc((size_t)(M * K + 1) * sizeof(float));
  float *w = malloc((size_t)(N * K + 1) * sizeof(float));
  float *b = n_in > 2 ? malloc((size_t)(N + 1) * sizeof(float)) : NULL;
  if (!x || !w || (n_in > 2 && !b)) {
    free(x), free(w), free(b);
    h3cpu_error(c, op, NULL, "out of memory for [%lld, %lld] x [%lld, %lld]", (long long)M,
                (long long)K, (long long)N, (long long)K);
    return H3_ERR;
  }
  h3cpu_to_f32(x, in[0].data, xt->dtype, M * K);
  h3cpu_to_f32(w, in[1].data, wt->dtype, N * K);
  if (b) h3cpu_to_f32(b, in[2].data, in[2].type.dtype, N);
  linear_job j = {x, w, b, N, K, out[0].data, out[0].type.dtype};
  h3cpu_parallel(c->pool, M * N, linear_range, &j);
  free(x), free(w), free(b);
  return H3_OK;
}
