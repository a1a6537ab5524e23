/* ops_linear.c: CPU reference of linear(x[.., K], w[N, K], bias?[N]) -> [.., N].
 *
 * y[m, n] = (sum_k x[m, k] * w[n, k]) + bias[n]: operands widened to fp32, the sum
 * accumulated in fp32 with k ascending from 0 (each product and sum rounded, never fused),
 * the bias added last, then one rounding to the result dtype. Every output element is
 * computed by the same sequence of operations whatever M is (batch invariance) and whichever
 * worker computes it. The sums come from cpu_gemm.c (register tiles over panels of w, split
 * over the pool's workers); x and the bias are widened to fp32 once, w per panel.
 */
#include "cpu_gemm.h"

#include <stdlib.h>

typedef struct {
  const float *bias; /* [N] fp32 or NULL */
  void *out;         /* [M, N] */
  h3_dtype od;
  int64_t N;
} linear_out;

static void linear_store(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s) {
  const linear_out *o = arg;
  for (int64_t j = 0; j < nn; j++) {
    float v = s[j];
    if (o->bias) v += o->bias[n0 + j];
    h3cpu_st(o->out, o->od, m * o->N + n0 + j, v);
  }
}

H3_CPU_KERNEL(h3cpu_linear) {
  (void)n_out;
  const h3_type *xt = &in[0].type, *wt = &in[1].type;
  int64_t K = xt->dims[xt->rank - 1], N = wt->dims[0];
  int64_t M = K ? h3cpu_numel(&in[0]) / K : h3cpu_numel(&out[0]) / (N ? N : 1);
  float *x = h3cpu_f32_copy(in[0].data, xt->dtype, M * K);
  float *b = n_in > 2 ? h3cpu_f32_copy(in[2].data, in[2].type.dtype, N) : NULL;
  linear_out o = {b, out[0].data, out[0].type.dtype, N};
  h3cpu_gemm_args g = {x, K, in[1].data, wt->dtype, M, N, K};
  h3_status st = x && (n_in <= 2 || b) ? h3cpu_gemm(c->pool, &g, linear_store, &o) : H3_ERR;
  free(x), free(b);
  if (st != H3_OK)
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for [%lld, %lld] x [%lld, %lld]", (long long)M,
                (long long)K, (long long)N, (long long)K);
  return st;
}
