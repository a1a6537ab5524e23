/* ops_int8.c: CPU reference of the INT8 linear lowering ops (ops.def, docs/int8.md):
 * quantize_rows (symmetric per-row int8 with the optional 256-wide Hadamard rotation) and
 * linear_int8 (exact int32 accumulation, the fixed epilogue, row chunks).
 *
 * quantize_rows(x[.., K]) -> (q i8[.., K], s f32[..]), per row, in fp32:
 *   v = fp32(x row); rotate = 256: h3cpu_hadamard256 on every 256-group of v;
 *   amax = max_k |v_k| (fmaxf: NaN ignored); s = amax / 127, raised to 1e-30;
 *   q_k = clamp(rne(v_k / s), -128, 127), NaN -> 0.
 * The same op quantizes weights per output channel (a row of W[N, K]) at load.
 * linear_int8(q, s_x, wq, s_w, bias?) -> [.., N]: acc = sum_k q[m, k] * wq[n, k] in int32
 * (exact: |acc| <= 128 * 128 * K < 2^31 for K <= 131071), y = (float(acc) * s_x[m]) *
 * s_w[n] (+ bias[n]), one rounding to the result dtype. With chunk_rows > 0 the rows run
 * chunk by chunk, each reading its own q rows and s_x[m0:m1] and writing its slice of the
 * output, as the CUDA backend's split GEMMs do; every element is computed by the same
 * operations either way, so the results are bitwise equal. The multiplies and the add are separate fp32
 * operations (no FMA contraction on the baseline x86-64 target h3 builds for).
 * Rows are split over the pool's workers; results never depend on the thread count.
 */
#include "cpu_internal.h"

#include <stdlib.h>

void h3cpu_hadamard256(float *v) {
  for (int s = 1; s < 256; s *= 4)
    for (int base = 0; base < 256; base += 4 * s)
      for (int j = 0; j < s; j++) {
        float *p = v + base + j;
        float a = p[0], b = p[s], c = p[2 * s], d = p[3 * s];
        float ab = a + b, cmd = c - d, amb = a - b, cpd = c + d;
        p[0] = 0.5f * (ab + cmd);
        p[s] = 0.5f * (ab - cmd);
        p[2 * s] = 0.5f * (amb + cpd);
        p[3 * s] = 0.5f * (cpd - amb);
      }
}

/* ---- quantize_rows ------------------------------------------------------------------------ */
typedef struct {
  const void *x;
  h3_dtype xd;
  int64_t K;
  int rotate;
  int8_t *q;
  float *s;
  float **scratch; /* one row buffer per worker */
} quant_job;

static void quant_range(void *arg, int worker, int64_t begin, int64_t end) {
  const quant_job *j = arg;
  float *v = j->scratch[worker];
  for (int64_t r = begin; r < end; r++) {
    h3cpu_to_f32(v, (const char *)j->x + (size_t)(r * j->K) * h3_dtype_size(j->xd), j->xd, j->K);
    if (j->rotate)
      for (int64_t g = 0; g < j->K; g += j->rotate) h3cpu_hadamard256(v + g);
    j->s[r] = h3cpu_quantize_row(v, j->K, j->q + r * j->K); /* ops_q8fuse.c */
  }
}

H3_CPU_KERNEL(h3cpu_quantize_rows) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  int64_t K = xt->dims[xt->rank - 1];
  int64_t rows = K ? h3cpu_numel(&in[0]) / K : 0;
  int rotate = (int)h3_op_attr_int(op, "rotate", 0);
  if (rotate && (rotate != 256 || K % rotate)) {
    h3cpu_error(c, op, "recompile the plan with h3c", "rotate = %d does not fit K = %lld", rotate,
                (long long)K);
    return H3_ERR;
  }
  int workers = h3cpu_pool_size(c->pool);
  float **scratch = calloc((size_t)workers, sizeof *scratch);
  h3_status st = scratch ? H3_OK : H3_ERR;
  for (int w = 0; st == H3_OK && w < workers; w++)
    if (!(scratch[w] = malloc((size_t)(K + 1) * sizeof(float)))) st = H3_ERR;
  if (st == H3_OK) {
    quant_job j = {in[0].data, xt->dtype, K, rotate, out[0].data, out[1].data, scratch};
    h3cpu_parallel(c->pool, rows, quant_range, &j);
  } else {
    h3cpu_error(c, op, NULL, "out of memory for a row of %lld elements", (long long)K);
  }
  for (int w = 0; scratch && w < workers; w++) free(scratch[w]);
  free(scratch);
  return st;
}

/* ---- linear_int8 -------------------------------------------------------------------------- */
typedef struct {
  const int8_t *q, *w; /* q: this chunk's first row */
  const float *sx, *sw, *bias;
  int64_t N, K;
  void *out; /* this chunk's first output row */
  h3_dtype od;
} gemm_job;

static void gemm_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const gemm_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t m = i / j->N, n = i % j->N;
    const int8_t *qr = j->q + m * j->K, *wr = j->w + n * j->K;
    int32_t acc = 0;
    for (int64_t k = 0; k < j->K; k++) acc += (int32_t)qr[k] * (int32_t)wr[k];
    float y = (float)acc * j->sx[m];
    y = y * j->sw[n];
    if (j->bias) y = y + j->bias[n];
    h3cpu_st(j->out, j->od, i, y);
  }
}

H3_CPU_KERNEL(h3cpu_linear_int8) {
  (void)n_out;
  const h3_type *qt = &in[0].type;
  int64_t K = qt->dims[qt->rank - 1], N = in[2].type.dims[0];
  int64_t M = K ? h3cpu_numel(&in[0]) / K : h3cpu_numel(&out[0]) / (N ? N : 1);
  int64_t chunk = h3_op_attr_int(op, "chunk_rows", 0);
  if (chunk <= 0 || chunk > M) chunk = M;
  float *bias = NULL;
  if (n_in > 4) {
    bias = malloc((size_t)(N + 1) * sizeof *bias);
    if (!bias) {
      h3cpu_error(c, op, NULL, "out of memory for the bias");
      return H3_ERR;
    }
    h3cpu_to_f32(bias, in[4].data, in[4].type.dtype, N);
  }
  size_t osize = h3_dtype_size(out[0].type.dtype);
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    int64_t rows = M - m0 < chunk ? M - m0 : chunk;
    gemm_job j = {(const int8_t *)in[0].data + m0 * K,
                  in[2].data,
                  (const float *)in[1].data + m0,
                  in[3].data,
                  bias,
                  N,
                  K,
                  (char *)out[0].data + (size_t)(m0 * N) * osize,
                  out[0].type.dtype};
    h3cpu_parallel(c->pool, rows * N, gemm_range, &j);
  }
  free(bias);
  return H3_OK;
}
