/* ops_int8.c: CPU reference of the INT8 linear lowering ops (ops.def, docs/int8.md):
 * quantize_rows (symmetric per-row int8 with the optional 256-wide Hadamard rotation),
 * linear_int8 (exact int32 accumulation, the fixed epilogue, row chunks) and its two halves
 * matmul_i8 (the accumulators) and dequant_i8 (the epilogue), which share its code.
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
 * operations either way, so the results are bitwise equal. The multiplies and the add are
 * separate fp32 operations (no FMA contraction on the baseline x86-64 target h3 builds for).
 * matmul_i8 writes acc (int32, chunk by chunk the same way); dequant_i8 applies the same
 * epilogue to given accumulators and rounds y to its IR dtype even when a lossless fused
 * group hands it an f32 temporary (ops.def), so the pair is bitwise linear_int8.
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
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for a row of %lld elements", (long long)K);
  }
  for (int w = 0; scratch && w < workers; w++) free(scratch[w]);
  free(scratch);
  return st;
}

/* ---- linear_int8, matmul_i8, dequant_i8 ---------------------------------------------------- */
/* The exact int32 dot product of one q row and one wq row (any order gives this value). */
static int32_t dot_i8(const int8_t *qr, const int8_t *wr, int64_t K) {
  int32_t acc = 0;
  for (int64_t k = 0; k < K; k++) acc += (int32_t)qr[k] * (int32_t)wr[k];
  return acc;
}

/* The fixed epilogue: (float(acc) * sx) * sw (+ bias), separate fp32 operations. */
static float dequant(int32_t acc, float sx, float sw, const float *bias) {
  float y = (float)acc * sx;
  y = y * sw;
  if (bias) y = y + *bias;
  return y;
}

float h3cpu_dequant_value(int32_t acc, float sx, float sw, const float *bias) {
  return dequant(acc, sx, sw, bias);
}

/* y rounded to the bf16 / f16 grid of the IR dtype rd (dequant_i8 rounds in every tier,
 * also when a lossless fused group gives it an f32 temporary). */
static float round_to(float y, h3_dtype rd) {
  if (rd == H3_BF16) return h3_bf16_round(y);
  if (rd == H3_F16) return h3_f16_to_f32(h3_f32_to_f16(y));
  return y;
}

/* Rows [0, rows) of one chunk: linear_int8 (q given, y out), matmul_i8 (q given, acc_out)
 * or dequant_i8 (acc given, y out). */
typedef struct {
  const int8_t *q, *w; /* q: this chunk's first row */
  const int32_t *acc;  /* dequant_i8: the accumulators */
  const float *sx, *sw, *bias;
  int64_t N, K;
  int32_t *acc_out;    /* matmul_i8: this chunk's first result row */
  void *out;           /* linear_int8 / dequant_i8: this chunk's first output row */
  h3_dtype od, rd;     /* out's dtype; rd: the IR result dtype, rounded to first */
} gemm_job;

static void gemm_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const gemm_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t m = i / j->N, n = i % j->N;
    int32_t acc = j->acc ? j->acc[i] : dot_i8(j->q + m * j->K, j->w + n * j->K, j->K);
    if (j->acc_out) {
      j->acc_out[i] = acc;
      continue;
    }
    float y = dequant(acc, j->sx[m], j->sw[n], j->bias ? j->bias + n : NULL);
    h3cpu_st(j->out, j->od, i, round_to(y, j->rd));
  }
}

/* bias[N] widened to fp32 into *bias (malloc'd), or NULL without one. */
static h3_status load_bias(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *b, int64_t N,
                           float **bias) {
  *bias = NULL;
  if (!b) return H3_OK;
  *bias = malloc((size_t)(N + 1) * sizeof **bias);
  if (!*bias) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for the bias");
    return H3_ERR;
  }
  h3cpu_to_f32(*bias, b->data, b->type.dtype, N);
  return H3_OK;
}

/* linear_int8 (out y) and matmul_i8 (out acc): the rows chunk by chunk. */
static h3_status run_gemm(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *q,
                          const h3_tensor *w, const float *sx, const float *sw, const float *bias,
                          const h3_tensor *out) {
  const h3_type *qt = &q->type;
  int64_t K = qt->dims[qt->rank - 1], N = w->type.dims[0];
  int64_t M = K ? h3cpu_numel(q) / K : h3cpu_numel(out) / (N ? N : 1);
  int64_t chunk = h3_op_attr_int(op, "chunk_rows", 0);
  if (chunk <= 0 || chunk > M) chunk = M;
  bool acc_out = op->code == H3_OP_MATMUL_I8;
  size_t osize = h3_dtype_size(out->type.dtype);
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    int64_t rows = M - m0 < chunk ? M - m0 : chunk;
    char *o = (char *)out->data + (size_t)(m0 * N) * osize;
    gemm_job j = {.q = (const int8_t *)q->data + m0 * K,
                  .w = w->data,
                  .sx = sx ? sx + m0 : NULL,
                  .sw = sw,
                  .bias = bias,
                  .N = N,
                  .K = K,
                  .acc_out = acc_out ? (int32_t *)o : NULL,
                  .out = acc_out ? NULL : o,
                  .od = out->type.dtype,
                  .rd = out->type.dtype};
    h3cpu_parallel(c->pool, rows * N, gemm_range, &j);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_linear_int8) {
  (void)n_out;
  int64_t N = in[2].type.dims[0];
  float *bias;
  if (load_bias(c, op, n_in > 4 ? &in[4] : NULL, N, &bias) != H3_OK) return H3_ERR;
  h3_status st = run_gemm(c, op, &in[0], &in[2], in[1].data, in[3].data, bias, &out[0]);
  free(bias);
  return st;
}

H3_CPU_KERNEL(h3cpu_matmul_i8) {
  (void)n_in, (void)n_out;
  return run_gemm(c, op, &in[0], &in[1], NULL, NULL, NULL, &out[0]);
}

H3_CPU_KERNEL(h3cpu_dequant_i8) {
  (void)n_out;
  const h3_type *at = &in[0].type;
  int64_t N = at->dims[at->rank - 1], n = h3cpu_numel(&in[0]);
  float *bias;
  if (load_bias(c, op, n_in > 3 ? &in[3] : NULL, N, &bias) != H3_OK) return H3_ERR;
  gemm_job j = {.acc = in[0].data,
                .sx = in[1].data,
                .sw = in[2].data,
                .bias = bias,
                .N = N ? N : 1,
                .out = out[0].data,
                .od = out[0].type.dtype,
                .rd = op->results[0]->type.dtype};
  if (N) h3cpu_parallel(c->pool, n, gemm_range, &j);
  free(bias);
  return H3_OK;
}
