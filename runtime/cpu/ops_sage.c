/* ops_sage.c: CPU reference of `sage_attention` (ops.def; docs/models/accelerations.md §5):
 * attention with SageAttention's quantization emulated exactly, every rounding as the ops.def
 * contract fixes it, so that a GPU kernel can be checked against it.
 *
 * Per segment [s0, s1) and kv head, a prologue builds the quantized keys once: the smoothed
 * keys kt = fp32(k) - kbar (kbar the segment's key mean, or 0), their int8 codes and one
 * delta per 64-key block; with pv = fp8 also the per-dim value scales delta_v and the e4m3
 * value codes (decoded to fp32, exact). q's codes and deltas are the op's operands 3 and 4
 * when it has them (sage-q-fusion: the norm that made q wrote them), else made here by the same
 * function (h3cpu_sage_quantize_q, ops_sage_q.c), in include/h3/sage.h's padded layout either
 * way. Then every (query row, q head) pair: the row's int8 codes with its 64-row block's delta,
 * int32 dot products with the key codes, the scores, and the online softmax over the 128-key
 * blocks in order with P and V as the contract says. v is read through the op's v_view
 * (row stride and first column) when it has one. Work items are (segment, kv head) for the
 * prologue and (row, q head) for the rows, split over the pool's workers; each is computed the
 * same way whatever the split.
 */
#include "cpu_internal.h"
#include "h3/bf16.h"
#include "h3/nvfp4.h"
#include "h3/sage.h"

#include <stdlib.h>
#include <string.h>

enum { SAGE_BLOCK = H3_SAGE_QBLOCK, /* rows per quantization block of q and of the smoothed k */
       SAGE_SOFTMAX_KEYS = 128 };   /* keys per block of the online softmax: two k blocks */

typedef struct {
  const h3_tensor *q, *k, *v, *out;
  int64_t T, Hq, Hk, D, n_seg;
  int64_t v_row, v_off; /* v's row stride and first column: Hk*D and 0, or the op's v_view */
  int64_t *seg; /* n_seg + 1 boundaries, 0 and T included */
  int64_t *pad; /* per segment: the padded q rows before it (include/h3/sage.h's P_i) */
  const int8_t *qc; /* q's codes and deltas in include/h3/sage.h's layout */
  const float *qd;
  float scale;
  bool fp8, smooth;
  /* per kv head, over all T rows (each segment fills its rows): key codes [Hk][T][D],
     key deltas [Hk][T] (each key's block's), value codes decoded [Hk][T][D] (fp8) and value
     scales [Hk][T][D] (each key's segment's delta_v, fp8) */
  int8_t *kc;
  float *kd, *vq, *vs;
  /* per worker scratch: the longest segment's smoothed keys, scores, O */
  int64_t longest;
  float *tmp, *sc, *o;
} sage_job;

static int64_t seg_of(const sage_job *j, int64_t t) {
  int64_t s = 0;
  while (j->seg[s + 1] <= t) s++;
  return s;
}

/* The element of v at row r, kv head h, dim d (ops.def: in place through v_view, if any). */
static int64_t v_at(const sage_job *j, int64_t r, int64_t h, int64_t d) { return r * j->v_row + j->v_off + h * j->D + d; }

/* The keys (and values) of segment s, kv head h. */
static void prologue(const sage_job *j, int64_t s, int64_t h, float *tmp) {
  int64_t s0 = j->seg[s], s1 = j->seg[s + 1], n = s1 - s0, D = j->D;
  for (int64_t d = 0; d < D; d++) {
    float sum = 0.0f;
    for (int64_t r = s0; r < s1 && j->smooth; r++) sum += h3cpu_ld(j->k->data, j->k->type.dtype, (r * j->Hk + h) * D + d);
    float kbar = j->smooth && n ? sum / (float)n : 0.0f;
    for (int64_t r = s0; r < s1; r++)
      tmp[(r - s0) * D + d] = h3cpu_ld(j->k->data, j->k->type.dtype, (r * j->Hk + h) * D + d) - kbar;
  }
  for (int64_t b0 = 0; b0 < n; b0 += SAGE_BLOCK) {
    int64_t nb = n - b0 < SAGE_BLOCK ? n - b0 : SAGE_BLOCK;
    float dk = h3cpu_sage_delta8(tmp + b0 * D, nb * D);
    for (int64_t r = b0; r < b0 + nb; r++) {
      j->kd[h * j->T + s0 + r] = dk;
      for (int64_t d = 0; d < D; d++) j->kc[(h * j->T + s0 + r) * D + d] = h3cpu_sage_code8(tmp[r * D + d], dk);
    }
  }
  if (!j->fp8) return;
  for (int64_t d = 0; d < D; d++) {
    float a = 0.0f;
    for (int64_t r = s0; r < s1; r++) a = fmaxf(a, fabsf(h3cpu_ld(j->v->data, j->v->type.dtype, v_at(j, r, h, d))));
    float dv = a > 0.0f ? a / 448.0f : 1.0f;
    for (int64_t r = s0; r < s1; r++) {
      float x = h3cpu_ld(j->v->data, j->v->type.dtype, v_at(j, r, h, d));
      j->vq[(h * j->T + r) * D + d] = h3_e4m3_to_f32(h3_e4m3_from_f32(x / dv));
      j->vs[(h * j->T + r) * D + d] = dv;
    }
  }
}

static void prologue_range(void *arg, int worker, int64_t begin, int64_t end) {
  const sage_job *j = arg;
  float *tmp = j->tmp + (size_t)worker * (size_t)(j->longest * j->D);
  for (int64_t i = begin; i < end; i++) prologue(j, i / j->Hk, i % j->Hk, tmp);
}

/* Query row t, q head n. */
static void row(const sage_job *j, int64_t t, int64_t n, float *sc, float *o) {
  int64_t D = j->D, h = n / (j->Hq / j->Hk), s = seg_of(j, t), s0 = j->seg[s], s1 = j->seg[s + 1];
  /* row t's codes and its 64-row block's delta in the padded layout of segment s */
  const int64_t lp = h3_sage_padded(s1 - s0), r = t - s0;
  const int8_t *qc = j->qc + (j->Hq * j->pad[s] + n * lp + r) * D;
  const float dq = j->qd[j->Hq * j->pad[s] / SAGE_BLOCK + n * (lp / SAGE_BLOCK) + r / SAGE_BLOCK];
  float m = -INFINITY, l = 0.0f;
  for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
  for (int64_t k0 = s0; k0 < s1; k0 += SAGE_SOFTMAX_KEYS) {
    int64_t k1 = k0 + SAGE_SOFTMAX_KEYS < s1 ? k0 + SAGE_SOFTMAX_KEYS : s1;
    float mt = m;
    for (int64_t jk = k0; jk < k1; jk++) {
      const int8_t *kc = j->kc + (h * j->T + jk) * D;
      int32_t dot = 0;
      for (int64_t d = 0; d < D; d++) dot += (int32_t)qc[d] * (int32_t)kc[d];
      sc[jk - k0] = (float)dot * (dq * j->kd[h * j->T + jk]) * j->scale;
      mt = fmaxf(mt, sc[jk - k0]);
    }
    float alpha = expf(m - mt);
    l *= alpha;
    for (int64_t d = 0; d < D; d++) o[d] *= alpha;
    for (int64_t jk = k0; jk < k1; jk++) {
      float p = expf(sc[jk - k0] - mt);
      if (j->fp8) { /* l sums the P that multiply V (scaled by 448) */
        float pq = h3_e4m3_to_f32(h3_e4m3_from_f32(p * 448.0f));
        l += pq;
        for (int64_t d = 0; d < D; d++) o[d] += pq * j->vq[(h * j->T + jk) * D + d];
      } else {
        float pb = h3_bf16_to_f32(h3_f32_to_bf16(p));
        l += p;
        for (int64_t d = 0; d < D; d++) o[d] += pb * h3cpu_ld(j->v->data, j->v->type.dtype, v_at(j, jk, h, d));
      }
    }
    m = mt;
  }
  for (int64_t d = 0; d < D; d++) {
    float y = j->fp8 ? o[d] * j->vs[(h * j->T + s0) * D + d] / l : o[d] / l;
    h3cpu_st(j->out->data, j->out->type.dtype, (t * j->Hq + n) * D + d, y);
  }
}

static void row_range(void *arg, int worker, int64_t begin, int64_t end) {
  const sage_job *j = arg;
  size_t w = (size_t)worker, D = (size_t)j->D;
  for (int64_t i = begin; i < end; i++) row(j, i / j->Hq, i % j->Hq, j->sc + w * SAGE_SOFTMAX_KEYS, j->o + w * D);
}

H3_CPU_KERNEL(h3cpu_sage_attention) {
  (void)n_out;
  sage_job j = {.q = &in[0], .k = &in[1], .v = &in[2], .out = &out[0], .T = in[0].type.dims[0],
                .Hq = in[0].type.dims[1], .Hk = in[1].type.dims[1], .D = in[0].type.dims[2],
                .scale = (float)h3_op_attr_float(op, "scale", 1.0),
                .fp8 = strcmp(h3_op_attr_string(op, "pv", "fp8"), "bf16") != 0,
                .smooth = h3_op_attr_int(op, "smooth", 1) != 0};
  j.v_row = j.Hk * j.D;
  h3_op_v_view(op, &j.v_off, &j.v_row);
  j.seg = h3cpu_sage_segments(c, op, j.T, &j.n_seg);
  if (!j.seg) return H3_ERR;
  j.pad = j.seg + j.n_seg + 1;
  const bool given = n_in == 5; /* q's codes from the norm that made q (sage-q-fusion) */
  const int64_t P = j.pad[j.n_seg];
  size_t kv = (size_t)(j.Hk * j.T * j.D), W = (size_t)h3cpu_pool_size(c->pool), D = (size_t)j.D;
  for (int64_t s = 0; s < j.n_seg; s++)
    if (j.seg[s + 1] - j.seg[s] > j.longest) j.longest = j.seg[s + 1] - j.seg[s];
  j.kc = malloc(kv + 1);
  j.kd = malloc((size_t)(j.Hk * j.T + 1) * sizeof *j.kd);
  j.vq = j.fp8 ? malloc((kv + 1) * sizeof *j.vq) : NULL;
  j.vs = j.fp8 ? malloc((kv + 1) * sizeof *j.vs) : NULL;
  j.tmp = malloc((W * (size_t)j.longest * D + 1) * sizeof *j.tmp);
  j.sc = malloc((W * SAGE_SOFTMAX_KEYS + 1) * sizeof *j.sc);
  j.o = malloc((W * D + 1) * sizeof *j.o);
  int8_t *qc = given ? NULL : malloc((size_t)(j.Hq * P) * D + 1);
  float *qd = given ? NULL : malloc((size_t)(j.Hq * P / SAGE_BLOCK + 1) * sizeof *qd);
  j.qc = given ? in[3].data : qc;
  j.qd = given ? in[4].data : qd;
  h3_status st = H3_OK;
  if (!j.kc || !j.kd || (j.fp8 && (!j.vq || !j.vs)) || !j.tmp || !j.sc || !j.o || !j.qc || !j.qd) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for the quantized keys");
    st = H3_ERR;
  } else if (j.T > 0 && (given || (st = h3cpu_sage_quantize_q(c, op, j.q, qc, qd)) == H3_OK)) {
    h3cpu_parallel(c->pool, j.n_seg * j.Hk, prologue_range, &j);
    h3cpu_parallel(c->pool, j.T * j.Hq, row_range, &j);
  }
  free(j.seg), free(j.kc), free(j.kd), free(j.vq), free(j.vs);
  free(j.tmp), free(j.sc), free(j.o), free(qc), free(qd);
  return st;
}
