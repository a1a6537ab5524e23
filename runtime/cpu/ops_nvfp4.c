/* ops_nvfp4.c: CPU reference of linear_nvfp4(x bf16[.., K], packed u8[N, K/2],
 * scale u8[N, K/16], global f32[1]) -> [.., N] (ops.def, docs/models/minimax_m3_1.md §6).
 *
 * The weight is dequantized once to bf16 w_b[n, k] = e2m1(code) * e4m3(s_b) (exact:
 * include/h3/nvfp4.h), the sums come from cpu_gemm.c over x and w_b (fp32, k ascending, the
 * chain of linear), and the epilogue multiplies each sum by g once and rounds it to the
 * result dtype: the formula the Hopper kernel computes, with bf16 activations.
 */
#include "cpu_gemm.h"

#include "h3/nvfp4.h"

#include <stdlib.h>

typedef struct {
  float g;
  void *out; /* [M, N] */
  h3_dtype od;
  int64_t N;
} nvfp4_out;

static void nvfp4_store(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s) {
  const nvfp4_out *o = arg;
  for (int64_t j = 0; j < nn; j++) h3cpu_st(o->out, o->od, m * o->N + n0 + j, s[j] * o->g);
}

H3_CPU_KERNEL(h3cpu_linear_nvfp4) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t K = xt->dims[xt->rank - 1], N = in[1].type.dims[0];
  int64_t M = h3cpu_numel(&in[0]) / K;
  const uint8_t *packed = in[1].data, *scale = in[2].data;
  uint16_t *wb = malloc((size_t)(N * K + 1) * sizeof *wb); /* [N, K] bf16 w_b */
  float *x = h3cpu_f32_copy(in[0].data, xt->dtype, M * K);
  h3_status st = H3_ERR;
  if (wb && x) {
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++)
        wb[n * K + k] = h3_f32_to_bf16(h3_nvfp4_unscaled(packed, scale, K, n, k));
    nvfp4_out o = {*(const float *)in[3].data, out[0].data, out[0].type.dtype, N};
    h3cpu_gemm_args g = {x, K, wb, H3_BF16, M, N, K};
    st = h3cpu_gemm(c->pool, &g, nvfp4_store, &o);
  }
  free(wb), free(x);
  if (st != H3_OK)
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for [%lld, %lld] x [%lld, %lld]", (long long)M,
                (long long)K, (long long)N, (long long)K);
  return st;
}
