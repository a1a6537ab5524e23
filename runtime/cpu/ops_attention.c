/* ops_attention.c: CPU reference of attention, paged_attention, block_attention and
 * sparse_attention.
 *
 * All four share one core: for query row t and head n (kv head n / (Hq/Hk)), the op
 * lists its keys in ascending position order; then in fp32
 *   s_j = (sum_d q_d * k_jd) * scale      (d ascending)
 *   m = max_j s_j;  p_j = expf(s_j - m);  l = sum_j p_j  (j ascending)
 *   o_d = (sum_j p_j * v_jd) / l           (j ascending), rounded once to the result dtype.
 * The key lists: attention = the rows of t's segment (and j <= t when causal);
 * paged = cached positions 0..pos[t]; block = cached positions [0, ctx_len) then the T
 * block rows; sparse = positions of the selected blocks (ascending block ids, -1 skipped)
 * with j <= pos[t]. Cached position j of row t lives at flat row
 * table[j / page] * page + j % page of the [P, page, Hk, D] cache, table = the page table
 * ([NP]) or its row t / (T / R) ([R, NP], R dividing T; cpu_pages.c). Page-table
 * entries, positions and selections are checked before any work starts, so an error is
 * reported (naming the op and the bad value) instead of reading out of bounds.
 * attention's v_view = [start, row_stride] (ops.def): v is the 2D tensor holding v's
 * columns and key row r, kv head h reads v at r*row_stride + start + h*D (k at (r*Hk + h)*D
 * as always), the elements the removed column slice copied, so the result is bitwise that
 * of attention on the slice.
 * (row, head) pairs are split over the pool's workers; each is computed identically.
 */
#include "cpu_internal.h"

#include <stdlib.h>

typedef struct {
  const void *k, *v;
  int64_t off, voff; /* element offsets of the D-vector in k and in v */
} att_key;

typedef enum { ATT_DENSE, ATT_PAGED, ATT_BLOCK, ATT_SPARSE } att_kind;

typedef struct {
  att_kind kind;
  const h3_tensor *q, *k, *v, *kb, *vb; /* k, v: dense keys or the caches */
  const h3_tensor *pos, *sel;
  const h3_tensor *ctx; /* block: ctx_len, i32[] or i32[T] */
  int64_t block_rows;   /* block: rows per block (one sequence each) */
  h3cpu_pages pages;
  const h3_tensor *out;
  int64_t T, Hq, Hk, D, page, topk;
  int64_t v_start, v_row; /* dense v's layout: row r, head h at r*v_row + v_start + h*D */
  int causal;
  int n_seg;
  const int64_t *seg;
  float scale;
  int64_t max_keys;
  /* per-worker scratch */
  float *scores, *acc, *qrow;
  att_key *keys;
} att_job;

static void cache_key(const att_job *j, int64_t t, int64_t p, int64_t kvh, att_key *out) {
  out->k = j->k->data;
  out->v = j->v->data;
  out->off = out->voff = (h3cpu_page_slot(&j->pages, t, p, j->page) * j->Hk + kvh) * j->D;
}

static int64_t list_keys(const att_job *j, int64_t t, int64_t kvh, att_key *keys) {
  int64_t n = 0;
  switch (j->kind) {
  case ATT_DENSE: {
    int64_t lo = 0, hi = j->T;
    for (int s = 0; s < j->n_seg; s++) {
      if (j->seg[s] <= t && j->seg[s] > lo) lo = j->seg[s];
      if (j->seg[s] > t && j->seg[s] < hi) hi = j->seg[s];
    }
    if (j->causal && hi > t + 1) hi = t + 1;
    for (int64_t r = lo; r < hi; r++) {
      keys[n].k = j->k->data;
      keys[n].v = j->v->data;
      keys[n].voff = r * j->v_row + j->v_start + kvh * j->D;
      keys[n++].off = (r * j->Hk + kvh) * j->D;
    }
    break;
  }
  case ATT_PAGED: {
    int64_t p = h3cpu_ldi(j->pos->data, j->pos->type.dtype, t);
    for (int64_t q = 0; q <= p; q++) cache_key(j, t, q, kvh, &keys[n++]);
    break;
  }
  case ATT_BLOCK: {
    int64_t ctx = h3cpu_ldi(j->ctx->data, j->ctx->type.dtype, j->ctx->type.rank ? t : 0);
    int64_t r0 = t / j->block_rows * j->block_rows;
    for (int64_t q = 0; q < ctx; q++) cache_key(j, t, q, kvh, &keys[n++]);
    for (int64_t r = r0; r < r0 + j->block_rows; r++) {
      keys[n].k = j->kb->data;
      keys[n].v = j->vb->data;
      keys[n].voff = keys[n].off = (r * j->Hk + kvh) * j->D;
      n++;
    }
    break;
  }
  case ATT_SPARSE: {
    int64_t p = h3cpu_ldi(j->pos->data, j->pos->type.dtype, t);
    for (int64_t s = 0; s < j->topk; s++) {
      int64_t b = h3cpu_ldi(j->sel->data, j->sel->type.dtype, (t * j->Hk + kvh) * j->topk + s);
      if (b < 0) continue;
      for (int64_t q = b * j->page; q < (b + 1) * j->page && q <= p; q++)
        cache_key(j, t, q, kvh, &keys[n++]);
    }
    break;
  }
  }
  return n;
}

static void att_range(void *arg, int worker, int64_t begin, int64_t end) {
  const att_job *j = arg;
  int64_t D = j->D, group = j->Hq / j->Hk;
  float *sc = j->scores + worker * j->max_keys, *acc = j->acc + worker * D;
  float *q = j->qrow + worker * D;
  att_key *keys = j->keys + worker * j->max_keys;
  h3_dtype kd = j->k->type.dtype, vd = j->v->type.dtype;
  h3_dtype bkd = j->kb ? j->kb->type.dtype : kd, bvd = j->vb ? j->vb->type.dtype : vd;
  for (int64_t i = begin; i < end; i++) {
    int64_t t = i / j->Hq, h = i % j->Hq, kvh = h / group;
    for (int64_t d = 0; d < D; d++) q[d] = h3cpu_ld(j->q->data, j->q->type.dtype, i * D + d);
    int64_t n = list_keys(j, t, kvh, keys);
    float m = -INFINITY;
    for (int64_t s = 0; s < n; s++) {
      h3_dtype dt = keys[s].k == j->k->data ? kd : bkd;
      float dot = 0.0f;
      for (int64_t d = 0; d < D; d++) dot += q[d] * h3cpu_ld(keys[s].k, dt, keys[s].off + d);
      sc[s] = dot * j->scale;
      if (sc[s] > m) m = sc[s];
    }
    float l = 0.0f;
    for (int64_t s = 0; s < n; s++) {
      sc[s] = expf(sc[s] - m);
      l += sc[s];
    }
    for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
    for (int64_t s = 0; s < n; s++) {
      h3_dtype dt = keys[s].v == j->v->data ? vd : bvd;
      for (int64_t d = 0; d < D; d++) acc[d] += sc[s] * h3cpu_ld(keys[s].v, dt, keys[s].voff + d);
    }
    for (int64_t d = 0; d < D; d++)
      h3cpu_st(j->out->data, j->out->type.dtype, i * D + d, n ? acc[d] / l : 0.0f);
  }
}

static h3_status att_run(const h3_cpu_ctx *c, const h3_op *op, att_job *j) {
  int W = h3cpu_pool_size(c->pool);
  if (j->Hk <= 0 || j->Hq % j->Hk != 0) {
    h3cpu_error(c, op, NULL, "q heads %lld are not a multiple of kv heads %lld", (long long)j->Hq,
                (long long)j->Hk);
    return H3_ERR;
  }
  int64_t mk = j->max_keys ? j->max_keys : 1;
  j->scores = malloc((size_t)(W * mk) * sizeof(float));
  j->keys = malloc((size_t)(W * mk) * sizeof(att_key));
  j->acc = malloc((size_t)(W * (j->D + 1)) * sizeof(float));
  j->qrow = malloc((size_t)(W * (j->D + 1)) * sizeof(float));
  h3_status st = H3_OK;
  if (!j->scores || !j->keys || !j->acc || !j->qrow) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory for %lld keys", (long long)mk);
    st = H3_ERR;
  } else {
    h3cpu_parallel(c->pool, j->T * j->Hq, att_range, j);
  }
  free(j->scores), free(j->keys), free(j->acc), free(j->qrow);
  return st;
}

static void att_init(att_job *j, att_kind kind, const h3_op *op, const h3_tensor *in,
                     const h3_tensor *out, const h3_type *cache) {
  memset(j, 0, sizeof *j);
  j->kind = kind;
  j->q = &in[0];
  j->k = &in[1];
  j->v = &in[2];
  j->out = &out[0];
  j->T = in[0].type.dims[0];
  j->Hq = in[0].type.dims[1];
  j->D = in[0].type.dims[2];
  j->Hk = cache->dims[cache->rank - 2];
  j->scale = (float)h3_op_attr_float(op, "scale", 1.0);
  j->page = h3_op_attr_int(op, "page", cache->rank == 4 ? cache->dims[1] : 1);
}

/* Checks the page, pos[t] and the page-table entries that each row's positions use
 * (positions 0..last without pos). */
static int check_paged(const h3_cpu_ctx *c, const h3_op *op, att_job *j, const h3_tensor *pt,
                       int64_t last) {
  if (j->page <= 0 || j->page != j->k->type.dims[1]) {
    h3cpu_error(c, op, NULL, "page %lld does not match the cache's page dim %lld",
                (long long)j->page, (long long)j->k->type.dims[1]);
    return 0;
  }
  j->pages = h3cpu_pages_of(pt, j->T);
  int64_t maxp;
  if (!h3cpu_check_pages(c, op, &j->pages, j->pos, last, j->T, j->k->type.dims[0], j->page, &maxp))
    return 0;
  j->max_keys = maxp + 1;
  return 1;
}

H3_CPU_KERNEL(h3cpu_attention) {
  (void)n_in, (void)n_out;
  att_job j;
  att_init(&j, ATT_DENSE, op, in, out, &in[1].type);
  j.causal = (int)h3_op_attr_int(op, "causal", 0);
  const h3_attr *seg = h3_op_attr(op, "segments");
  if (seg && seg->kind == H3_ATTR_INTS) {
    j.n_seg = seg->n;
    j.seg = seg->ints;
  }
  j.v_row = j.Hk * j.D;
  h3_op_v_view(op, &j.v_start, &j.v_row);
  j.max_keys = j.T;
  return att_run(c, op, &j);
}

H3_CPU_KERNEL(h3cpu_paged_attention) {
  (void)n_in, (void)n_out;
  att_job j;
  att_init(&j, ATT_PAGED, op, in, out, &in[1].type);
  j.pos = &in[3];
  if (!check_paged(c, op, &j, &in[4], -1)) return H3_ERR;
  return att_run(c, op, &j);
}

H3_CPU_KERNEL(h3cpu_block_attention) {
  (void)n_in, (void)n_out;
  att_job j;
  att_init(&j, ATT_BLOCK, op, in, out, &in[1].type);
  j.ctx = &in[3];
  j.kb = &in[5];
  j.vb = &in[6];
  j.block_rows = h3_op_attr_int(op, "block_rows", j.T);
  if (j.block_rows < 1 || j.T % j.block_rows) {
    h3cpu_error(c, op, NULL, "block_rows %lld does not divide %lld rows", (long long)j.block_rows,
                (long long)j.T);
    return H3_ERR;
  }
  /* the cached positions 0 .. ctx_len - 1 of every row must lie in its page table */
  int64_t n_ctx = j.ctx->type.rank ? j.T : 1, last = -1;
  for (int64_t t = 0; t < n_ctx; t++) {
    int64_t n = h3cpu_ldi(j.ctx->data, j.ctx->type.dtype, t);
    if (n < 0) {
      h3cpu_error(c, op, "the values come from the graph's inputs: check the --inputs file",
                  "ctx_len[%lld] = %lld is negative", (long long)t, (long long)n);
      return H3_ERR;
    }
    if (n - 1 > last) last = n - 1;
  }
  if (!check_paged(c, op, &j, &in[4], last)) return H3_ERR;
  if (last >= j.pages.np * j.page) {
    h3cpu_error(c, op, "ctx_len must fit the page table", "ctx_len %lld is beyond the %lld positions of the page table",
                (long long)last + 1, (long long)(j.pages.np * j.page));
    return H3_ERR;
  }
  for (int64_t t = 0; j.pages.rows > 1 && t < j.T; t++) {
    int64_t p = h3cpu_ldi(j.ctx->data, j.ctx->type.dtype, j.ctx->type.rank ? t : 0) - 1;
    if (!h3cpu_check_table_row(c, op, &j.pages, t, p, j.k->type.dims[0], j.page)) return H3_ERR;
  }
  j.max_keys = last + 1 + j.block_rows;
  return att_run(c, op, &j);
}

H3_CPU_KERNEL(h3cpu_sparse_attention) {
  (void)n_in, (void)n_out;
  att_job j;
  att_init(&j, ATT_SPARSE, op, in, out, &in[1].type);
  j.sel = &in[3];
  j.pos = &in[4];
  j.topk = in[3].type.dims[in[3].type.rank - 1];
  if (!check_paged(c, op, &j, &in[5], -1)) return H3_ERR;
  int64_t NP = j.pages.np, n = h3cpu_numel(j.sel);
  for (int64_t i = 0; i < n; i++) {
    int64_t b = h3cpu_ldi(j.sel->data, j.sel->type.dtype, i);
    if (b < -1 || b >= NP) {
      h3cpu_error(c, op, "the values come from the graph's inputs: check the --inputs file",
                  "selected block %lld is outside [-1, %lld)", (long long)b, (long long)NP);
      return H3_ERR;
    }
  }
  j.max_keys = j.topk * j.page;
  return att_run(c, op, &j);
}
