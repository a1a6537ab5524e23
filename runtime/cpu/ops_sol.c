/* ops_sol.c: CPU reference of `sol_attention` (ops.def; docs/models/accelerations.md §5):
 * Sol block-sparse attention, every rounding as the contract fixes it.
 *
 * Blocks: each segment cut into 64-row blocks from its start, numbered globally (block b:
 * its segment, first row, length). A prologue computes per kv head the key / value centroids
 * of every block and per q head the query means, then per (q head, query block) which key
 * blocks of its segment are exact (score above the threshold, diagonal and neighbours,
 * sinks). Rows: per (row, q head), the scores of the exact keys and of one pseudo-key per
 * other block in block order, their max m, then sum w e^(s - m) and sum w e^(s - m) v in
 * the same order (w = 1 for a key, the block's length for a pseudo-key). With every block
 * exact the entries are attention's keys in ascending order with attention's arithmetic, so
 * the result is attention's bit for bit. Work items are split over the pool's workers.
 */
#include "cpu_internal.h"

#include <stdlib.h>
#include <string.h>

enum { SOL_BLOCK = 64 };

typedef struct {
  int64_t seg, start, len; /* segment, first row, rows */
} sol_block;

typedef struct {
  const h3_tensor *q, *k, *v, *out;
  int64_t T, Hq, Hk, D, NB;
  sol_block *blk;
  int64_t *first_blk, *seg; /* per segment: its first block; the boundaries (0 and T included) */
  int n_seg;
  float scale, tau;
  bool exact_cov;
  int64_t sink_tokens, sink_start;
  float *kc, *vc, *qbar; /* [Hk][NB][D], [Hk][NB][D], [Hq][NB][D] */
  uint8_t *exact;        /* [Hq][NB][NB]: query block i, key block j (same segment) */
  float *work;           /* per worker: 2 * (T + NB) scores and weights, D accumulators, D q */
} sol_job;

static float ldf(const h3_tensor *t, int64_t i) { return h3cpu_ld(t->data, t->type.dtype, i); }

/* The centroids of block b for kv head h (K and V) or the query mean for q head h. */
static void centroid(const sol_job *j, const h3_tensor *x, int64_t H, int64_t b, int64_t h, float *out) {
  const sol_block *B = &j->blk[b];
  for (int64_t d = 0; d < j->D; d++) {
    float s = 0.0f;
    for (int64_t r = B->start; r < B->start + B->len; r++) s += ldf(x, (r * H + h) * j->D + d);
    out[d] = s / (float)B->len;
  }
}

static float dotf(const float *a, const float *b, int64_t D) {
  float s = 0.0f;
  for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
  return s;
}

/* Item (q head n, query block i): its exact key blocks. */
static void decide(const sol_job *j, int64_t n, int64_t i) {
  int64_t D = j->D, h = n / (j->Hq / j->Hk), s = j->blk[i].seg;
  int64_t b0 = j->first_blk[s], b1 = j->first_blk[s + 1], nb = b1 - b0;
  const float *qb = j->qbar + (n * j->NB + i) * D;
  uint8_t *ex = j->exact + (n * j->NB + i) * j->NB;
  float mean[512], var[512], mu, sig2 = 0.0f, c = j->scale;
  for (int64_t d = 0; d < D; d++) {
    float acc = 0.0f;
    for (int64_t b = b0; b < b1; b++) acc += j->kc[(h * j->NB + b) * D + d];
    mean[d] = acc / (float)nb;
    float v = 0.0f;
    for (int64_t b = b0; b < b1; b++) {
      float e = j->kc[(h * j->NB + b) * D + d] - mean[d];
      v += e * e;
    }
    var[d] = v / (float)nb;
  }
  mu = c * dotf(qb, mean, D);
  if (j->exact_cov) {
    for (int64_t b = b0; b < b1; b++) {
      float p = 0.0f;
      for (int64_t d = 0; d < D; d++) p += qb[d] * (j->kc[(h * j->NB + b) * D + d] - mean[d]);
      sig2 += p * p;
    }
    sig2 = c * c * (sig2 / (float)nb);
  } else {
    for (int64_t d = 0; d < D; d++) sig2 += qb[d] * qb[d] * var[d];
    sig2 = c * c * sig2;
  }
  float theta = mu + j->tau * sqrtf(sig2 + 1e-6f);
  int64_t sk0 = j->sink_start, sk1 = j->sink_start + j->sink_tokens, seg0 = j->seg[s];
  for (int64_t b = b0; b < b1; b++) {
    const sol_block *B = &j->blk[b];
    int64_t p0 = B->start - seg0, p1 = p0 + B->len;
    bool sink = p0 < sk1 && sk0 < p1;
    float sij = c * dotf(qb, j->kc + (h * j->NB + b) * D, D);
    ex[b] = sij > theta || llabs(b - i) <= 1 || sink;
  }
}

static void prologue_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const sol_job *j = arg;
  int64_t D = j->D;
  for (int64_t it = begin; it < end; it++) { /* items: kv-head centroids, then q means */
    if (it < j->Hk * j->NB) {
      int64_t h = it / j->NB, b = it % j->NB;
      centroid(j, j->k, j->Hk, b, h, j->kc + (h * j->NB + b) * D);
      centroid(j, j->v, j->Hk, b, h, j->vc + (h * j->NB + b) * D);
    } else {
      int64_t r = it - j->Hk * j->NB, n = r / j->NB, b = r % j->NB;
      centroid(j, j->q, j->Hq, b, n, j->qbar + (n * j->NB + b) * D);
    }
  }
}

static void decide_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const sol_job *j = arg;
  for (int64_t it = begin; it < end; it++) decide(j, it / j->NB, it % j->NB);
}

static void row_range(void *arg, int worker, int64_t begin, int64_t end) {
  const sol_job *j = arg;
  int64_t D = j->D, cap = j->T + j->NB;
  float *sc = j->work + (size_t)worker * (size_t)(2 * cap + 2 * D), *w = sc + cap, *acc = w + cap, *q = acc + D;
  for (int64_t it = begin; it < end; it++) {
    int64_t t = it / j->Hq, n = it % j->Hq, h = n / (j->Hq / j->Hk), s = 0;
    while (j->seg[s + 1] <= t) s++;
    int64_t i = j->first_blk[s] + (t - j->seg[s]) / SOL_BLOCK;
    const uint8_t *ex = j->exact + (n * j->NB + i) * j->NB;
    for (int64_t d = 0; d < D; d++) q[d] = ldf(j->q, (t * j->Hq + n) * D + d);
    /* the entries in block then key order: scores and weights; m their max */
    int64_t e = 0;
    float m = -INFINITY;
    for (int64_t b = j->first_blk[s]; b < j->first_blk[s + 1]; b++) {
      const sol_block *B = &j->blk[b];
      if (ex[b]) {
        for (int64_t r = B->start; r < B->start + B->len; r++) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; d++) dot += q[d] * ldf(j->k, (r * j->Hk + h) * D + d);
          sc[e] = dot * j->scale, w[e] = 1.0f;
          if (sc[e] > m) m = sc[e];
          e++;
        }
      } else {
        sc[e] = dotf(q, j->kc + (h * j->NB + b) * D, D) * j->scale, w[e] = (float)B->len;
        if (sc[e] > m) m = sc[e];
        e++;
      }
    }
    float l = 0.0f;
    for (int64_t x = 0; x < e; x++) {
      sc[x] = w[x] == 1.0f ? expf(sc[x] - m) : w[x] * expf(sc[x] - m);
      l += sc[x];
    }
    for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
    e = 0;
    for (int64_t b = j->first_blk[s]; b < j->first_blk[s + 1]; b++) {
      const sol_block *B = &j->blk[b];
      if (ex[b]) {
        for (int64_t r = B->start; r < B->start + B->len; r++, e++)
          for (int64_t d = 0; d < D; d++) acc[d] += sc[e] * ldf(j->v, (r * j->Hk + h) * D + d);
      } else {
        const float *vc = j->vc + (h * j->NB + b) * D;
        for (int64_t d = 0; d < D; d++) acc[d] += sc[e] * vc[d];
        e++;
      }
    }
    for (int64_t d = 0; d < D; d++) h3cpu_st(j->out->data, j->out->type.dtype, (t * j->Hq + n) * D + d, e ? acc[d] / l : 0.0f);
  }
}

H3_CPU_KERNEL(h3cpu_sol_attention) {
  (void)n_in, (void)n_out;
  sol_job j = {.q = &in[0], .k = &in[1], .v = &in[2], .out = &out[0], .T = in[0].type.dims[0],
               .Hq = in[0].type.dims[1], .Hk = in[1].type.dims[1], .D = in[0].type.dims[2],
               .scale = (float)h3_op_attr_float(op, "scale", 1.0), .tau = (float)h3_op_attr_float(op, "tau", 1.0),
               .exact_cov = !strcmp(h3_op_attr_string(op, "thresh", "diag"), "exact"),
               .sink_tokens = h3_op_attr_int(op, "sink_tokens", 0), .sink_start = h3_op_attr_int(op, "sink_start", 0)};
  if (j.D > 512) {
    h3cpu_error(c, op, "compile a config with a head dim of at most 512", "head dim %lld (at most 512)",
                (long long)j.D);
    return H3_ERR;
  }
  const h3_attr *sa = h3_op_attr(op, "segments");
  int64_t ns = sa && sa->kind == H3_ATTR_INTS ? sa->n : 0;
  j.seg = malloc((size_t)(ns + 2) * sizeof *j.seg);
  j.first_blk = malloc((size_t)(ns + 2) * sizeof *j.first_blk);
  if (!j.seg || !j.first_blk) {
    free(j.seg), free(j.first_blk);
    return H3_ERR;
  }
  j.seg[0] = 0, j.n_seg = 1;
  for (int64_t i = 0; i < ns; i++)
    if (sa->ints[i] > j.seg[j.n_seg - 1] && sa->ints[i] < j.T) j.seg[j.n_seg++] = sa->ints[i];
  j.seg[j.n_seg] = j.T;
  for (int s = 0; s < j.n_seg; s++) j.NB += (j.seg[s + 1] - j.seg[s] + SOL_BLOCK - 1) / SOL_BLOCK;
  j.blk = malloc((size_t)(j.NB + 1) * sizeof *j.blk);
  int W = h3cpu_pool_size(c->pool);
  size_t D = (size_t)j.D, NB = (size_t)j.NB;
  j.kc = malloc((size_t)j.Hk * NB * D * sizeof(float) + 1);
  j.vc = malloc((size_t)j.Hk * NB * D * sizeof(float) + 1);
  j.qbar = malloc((size_t)j.Hq * NB * D * sizeof(float) + 1);
  j.exact = malloc((size_t)j.Hq * NB * NB + 1);
  j.work = malloc((size_t)W * (size_t)(2 * (j.T + j.NB) + 2 * j.D) * sizeof(float) + 1);
  h3_status st = H3_OK;
  if (!j.blk || !j.kc || !j.vc || !j.qbar || !j.exact || !j.work) {
    h3cpu_error(c, op, "use fewer rows", "out of memory for %lld blocks", (long long)j.NB);
    st = H3_ERR;
  } else if (j.T > 0) {
    int64_t b = 0;
    for (int s = 0; s < j.n_seg; s++) {
      j.first_blk[s] = b;
      for (int64_t r = j.seg[s]; r < j.seg[s + 1]; r += SOL_BLOCK)
        j.blk[b++] = (sol_block){s, r, j.seg[s + 1] - r < SOL_BLOCK ? j.seg[s + 1] - r : SOL_BLOCK};
    }
    j.first_blk[j.n_seg] = b;
    h3cpu_parallel(c->pool, (j.Hk + j.Hq) * j.NB, prologue_range, &j);
    h3cpu_parallel(c->pool, j.Hq * j.NB, decide_range, &j);
    h3cpu_parallel(c->pool, j.T * j.Hq, row_range, &j);
  }
  free(j.seg), free(j.first_blk), free(j.blk), free(j.kc), free(j.vc), free(j.qbar), free(j.exact);
  free(j.work);
  return st;
}
