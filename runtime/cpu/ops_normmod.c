/* ops_normmod.c: CPU reference of the fused RMSNorm + indexed AdaLN ops (ops.def
 * norm_modulate, residual_norm_modulate; docs/models/accelerations.md §3).
 *
 * Per row t of x bf16[T, H], with g = idx[t] clamped to [0, G) (gather's rule):
 *   r = h3cpu_rms_inv(row) (rms_norm's own reduction, so the exact tier matches it bitwise);
 *   w = gamma + offset (fp32, as rms_norm forms it).
 *   exact, modulate "bf16" (U1 + U2): h = bf16((x*r)*w); c = bf16(1 + scale[g]);
 *                                    p = bf16(h*c); y = bf16(p + shift[g])
 *   exact, modulate "f32" (the final layer): h as above; y = bf16((h*(1 + scale[g])) + shift[g])
 *   lossless (Plan A): w_eff[g] = fmaf(w, scale[g], w) (w = gamma when offset is 0) merged
 *                      once per call for all G rows; r from the lean sum (ss = fmaf(x, x, ss)
 *                      in ascending order, r = 1/sqrt(fmaf(ss, fl(1/H), eps)) rounded once,
 *                      the emitted kernel's formulas, codegen/emit_normmod.c);
 *                      y = bf16(fmaf(x*r, w_eff[g], shift[g])), one rounding.
 * residual_norm_modulate first writes residual' = bf16(residual + bf16(gate[g]*update))
 * (U3) and then runs the same row function on residual' as norm_modulate does, so Plan B
 * is (U3; Plan A) bit for bit. residual' may share residual's buffer (in place): each
 * element is read before it is written. Every product and sum is a separate IEEE fp32
 * operation (the backend is built without FMA contraction, as rms_norm's reduction
 * assumes); the lossless tier's single fused multiply-add is explicit (fmaf).
 * quantize = 1 (passes/int8_fuse_quant.c) also writes the int8 rows of y: q i8[T, H] and
 * s f32[T] by h3cpu_quantize_row (quantize_rows' arithmetic, no rotation): exact quantizes
 * the bf16 y (so the codes equal norm_modulate + quantize_rows), lossless the fp32 value
 * before its rounding (docs/models/accelerations.md §4.1 rule 4).
 * An i32 update (int8-resid-dequant: out_proj's accumulators acc[T, H] with s_x[T], s_w[H]
 * as operands 7 and 8) is first dequantized per element by dequant_i8's own arithmetic
 * (h3cpu_dequant_value, ops_int8.c) and rounded to bf16, so U3 sees the very update the
 * unfused dequant_i8 writes.
 */
#include "cpu_internal.h"

#include <stdlib.h>

typedef struct {
  int64_t T, H, G;
  int exact, mod_f32;
  float eps;
  float *w;    /* [H] gamma + offset */
  float *weff; /* [G, H] lossless merged weights; NULL at the exact tier */
  const uint16_t *scale, *shift, *gate; /* bf16 tables; gate only for Plan B */
  const int32_t *idx;
  int64_t gate_rows;
  const uint16_t *residual, *update; /* Plan B operands (residual = x for Plan A) */
  const int32_t *acc;                /* Plan B with an i32 update: [T, H], else NULL */
  const float *sx, *sw;              /* its scales [T], [H] */
  uint16_t *res_out;                 /* Plan B's residual' (NULL for Plan A) */
  uint16_t *y;
  int8_t *q;       /* quantize = 1: [T, H] codes of y, else NULL */
  float *qs;       /* [T] their scales */
  float **scratch; /* quantize = 1: one fp32 row per worker */
} nm_job;


/* The lossless tier's r of a bf16 row: squares summed by fmaf, then the reciprocal square
 * root of fmaf(ss, fl(1/H), eps) computed in double and rounded once (the kernel's
 * __frsqrt_rn; equal unless the exact value lies within a few double ulps of a float
 * rounding boundary). */
static float lean_rms_inv(const uint16_t *x, int64_t H, float eps) {
  float ss = 0.0f;
  for (int64_t k = 0; k < H; k++) {
    const float v = h3_bf16_to_f32(x[k]);
    ss = fmaf(v, v, ss);
  }
  return (float)(1.0 / sqrt((double)fmaf(ss, 1.0f / (float)H, eps)));
}

/* Plan A (either tier) on one bf16 row x, table row g, into y; with quantize, the values
 * quantized (y, or the fp32 value before rounding at lossless) go to v[H]. */
static void norm_row(const nm_job *j, const uint16_t *x, int64_t g, uint16_t *y, float *v_q) {
  const int64_t H = j->H;
  const float r = j->exact ? h3cpu_rms_inv(x, H3_BF16, 0, H, j->eps) : lean_rms_inv(x, H, j->eps);
  const uint16_t *sc = j->scale + g * H, *sh = j->shift + g * H;
  for (int64_t k = 0; k < H; k++) {
    const float v = h3_bf16_to_f32(x[k]), s = h3_bf16_to_f32(sc[k]), b = h3_bf16_to_f32(sh[k]);
    float out;
    if (!j->exact) {
      out = fmaf(v * r, j->weff[g * H + k], b);
    } else {
      const float h = h3_bf16_round((v * r) * j->w[k]);
      if (j->mod_f32) {
        const float c = 1.0f + s, p = h * c;
        out = p + b;
      } else {
        const float c = h3_bf16_round(1.0f + s), p = h3_bf16_round(h * c);
        out = p + b;
      }
    }
    y[k] = h3_f32_to_bf16(out);
    if (v_q) v_q[k] = j->exact ? h3_bf16_to_f32(y[k]) : out;
  }
}

static void rows_range(void *arg, int worker, int64_t begin, int64_t end) {
  const nm_job *j = arg;
  float *v_q = j->q ? j->scratch[worker] : NULL;
  const int64_t H = j->H;
  for (int64_t t = begin; t < end; t++) {
    const int64_t g = h3_sc_clamp_row(j->idx[t], j->G);
    const uint16_t *x = j->residual + t * H;
    if (j->res_out) { /* U3, in place allowed: residual'[k] is written after reading [k] */
      const int64_t gg = h3_sc_clamp_row(j->idx[t], j->gate_rows);
      const uint16_t *gr = j->gate + gg * H;
      uint16_t *ro = j->res_out + t * H;
      for (int64_t k = 0; k < H; k++) {
        const float u = j->acc ? h3_bf16_round(h3cpu_dequant_value(j->acc[t * H + k], j->sx[t],
                                                                   j->sw[k], NULL))
                               : h3_bf16_to_f32(j->update[t * H + k]);
        const float a = h3_bf16_round(h3_bf16_to_f32(gr[k]) * u);
        ro[k] = h3_f32_to_bf16(h3_bf16_to_f32(x[k]) + a);
      }
      x = ro;
    }
    norm_row(j, x, g, j->y + t * H, v_q);
    if (v_q) j->qs[t] = h3cpu_quantize_row(v_q, H, j->q + t * H); /* ops_q8fuse.c */
  }
}

/* Checks the dtypes the kernels assume (the verifier's inference does too; a hand-edited
 * plan is caught here) and fills the job's common part. `first` = index of gamma. */
static h3_status job_init(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int first,
                          nm_job *j) {
  memset(j, 0, sizeof *j);
  const h3_type *x = &in[0].type;
  for (int i = 0; i < first + 3; i++)
    if ((in[i].type.dtype != H3_BF16 && !(first == 3 && i == 1 && in[i].type.dtype == H3_I32)) || (i != first && in[i].type.rank != 2)) {
      h3cpu_error(c, op, "recompile the plan with h3c", "operand %d must be bf16 (x and the tables 2-D, gamma 1-D)", i);
      return H3_ERR;
    }
  if (x->rank != 2 || in[first + 3].type.dtype != H3_I32) {
    h3cpu_error(c, op, "recompile the plan with h3c", "x must be bf16[T, H] and idx i32[T]");
    return H3_ERR;
  }
  if (in[first + 1].type.dims[0] < 1 || (first == 3 && in[2].type.dims[0] < 1)) {
    h3cpu_error(c, op, "recompile the plan with h3c", "an AdaLN table has no rows");
    return H3_ERR;
  }
  j->T = x->dims[0];
  j->H = x->dims[1];
  j->G = in[first + 1].type.dims[0];
  j->exact = h3_op_attr_tier(op, "tier", H3_TIER_EXACT) != H3_TIER_LOSSLESS;
  j->mod_f32 = strcmp(h3_op_attr_string(op, "modulate", "bf16"), "f32") == 0;
  j->eps = (float)h3_op_attr_float(op, "eps", 1e-5);
  j->scale = in[first + 1].data;
  j->shift = in[first + 2].data;
  j->idx = in[first + 3].data;
  const int64_t H = j->H, G = j->G;
  j->w = malloc((size_t)(H ? H : 1) * sizeof(float));
  j->weff = j->exact ? NULL : malloc((size_t)(G * H > 0 ? G * H : 1) * sizeof(float));
  if (!j->w || (!j->exact && !j->weff)) {
    free(j->w);
    free(j->weff);
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  const float off = (float)h3_op_attr_float(op, "offset", 0.0);
  const uint16_t *gamma = in[first].data;
  for (int64_t k = 0; k < H; k++) j->w[k] = h3_bf16_to_f32(gamma[k]) + off;
  for (int64_t g = 0; j->weff && g < G; g++) /* Plan A's merge: once for every table row */
    for (int64_t k = 0; k < H; k++) {
      const float w = off == 0.0f ? h3_bf16_to_f32(gamma[k]) : j->w[k]; /* the kernel's w */
      j->weff[g * H + k] = fmaf(w, h3_bf16_to_f32(j->scale[g * H + k]), w);
    }
  return H3_OK;
}

static void job_free(nm_job *j, int workers) {
  free(j->w);
  free(j->weff);
  for (int w = 0; j->scratch && w < workers; w++) free(j->scratch[w]);
  free(j->scratch);
}

/* quantize = 1: the results q, s at out[first_q], out[first_q + 1] and the row buffers. */
static h3_status job_quant(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *out, int first_q,
                           nm_job *j) {
  if (!h3_op_attr_int(op, "quantize", 0)) return H3_OK;
  const int workers = h3cpu_pool_size(c->pool);
  j->q = out[first_q].data;
  j->qs = out[first_q + 1].data;
  j->scratch = calloc((size_t)workers, sizeof *j->scratch);
  h3_status st = j->scratch ? H3_OK : H3_ERR;
  for (int w = 0; st == H3_OK && w < workers; w++)
    if (!(j->scratch[w] = malloc((size_t)(j->H + 1) * sizeof(float)))) st = H3_ERR;
  if (st != H3_OK) {
    job_free(j, workers);
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for a row of %lld elements", (long long)j->H);
  }
  return st;
}

static void job_run(const h3_cpu_ctx *c, nm_job *j) {
  h3cpu_parallel(c->pool, j->T, rows_range, j);
  job_free(j, h3cpu_pool_size(c->pool));
}

H3_CPU_KERNEL(h3cpu_norm_modulate) {
  (void)n_in, (void)n_out;
  nm_job j;
  if (job_init(c, op, in, 1, &j) != H3_OK || job_quant(c, op, out, 1, &j) != H3_OK) return H3_ERR;
  j.residual = in[0].data;
  j.y = out[0].data;
  job_run(c, &j);
  return H3_OK;
}

/* A hand-edited plan the kernel cannot run: frees the job and reports. */
static void nm_job_abort(const h3_cpu_ctx *c, const h3_op *op, nm_job *j, const char *what) {
  job_free(j, h3cpu_pool_size(c->pool));
  h3cpu_error(c, op, "recompile the plan with h3c", "%s", what);
}

H3_CPU_KERNEL(h3cpu_residual_norm_modulate) {
  (void)n_out;
  nm_job j;
  if (job_init(c, op, in, 3, &j) != H3_OK || job_quant(c, op, out, 2, &j) != H3_OK) return H3_ERR;
  j.residual = in[0].data;
  j.gate = in[2].data;
  if (in[1].type.dtype == H3_I32) { /* out_proj's accumulators (the verifier checked s_x, s_w) */
    if (n_in != 9) {
      nm_job_abort(c, op, &j, "an i32 update needs s_x and s_w (operands 7 and 8)");
      return H3_ERR;
    }
    j.acc = in[1].data;
    j.sx = in[7].data;
    j.sw = in[8].data;
  } else {
    j.update = in[1].data;
  }
  j.gate_rows = in[2].type.dims[0];
  j.res_out = out[0].data;
  j.y = out[1].data;
  job_run(c, &j);
  return H3_OK;
}
