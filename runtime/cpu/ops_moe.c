/* ops_moe.c: CPU reference of M3.1's mixture-of-experts ops and DSpark's Markov head:
 * router_topk, moe, markov_draft.
 *
 * router_topk(h[T, H], w f32[E, H], bias f32[E]) {k, scale}: logit_e = sum_i fp32(h_i) *
 *   w_ei (i ascending); s_e = 1 / (1 + expf(-logit_e)); the k experts with the largest
 *   s_e + bias_e (ties: lower id) are written in ascending id order with weights
 *   (s_e / sum_sel s) * scale, the sum taken in ascending id order. Rows are split over the
 *   pool's workers.
 * moe(h[T, H], gate_up[E, 2F, H], down[E, H, F], ids i32[T, k], weights f32[T, k])
 *   {alpha, limit} -> f32[T, H]: per row, for each chosen expert in ascending id order:
 *   u = bf16(h . gate_up_e^T) (fp32 sums, i ascending); with g = min(u[:F], limit) and
 *   v = clamp(u[F:], -limit, limit): a = bf16((g * (1 / (1 + expf(-(alpha * g))))) * (v + 1));
 *   y = bf16(a . down_e^T); out += w_e * y (fp32, starting from 0; a repeated id counts once,
 *   with its first slot's weight). Each row is computed identically whatever the batch.
 * The dot products of both ops are one fp32 chain each on cpu_gemm.c's tiles (each product
 * and sum rounded, never fused). moe groups the rows by expert and runs the experts in
 * ascending id order, each as two GEMMs over its rows split over the pool's workers, so one
 * expert's weights are widened once per panel for all of its rows while every row still
 * receives its experts' terms in ascending id order.
 * markov_draft(base f32[N, V], w1[V, r], w2[V, r], prev i32[] or i32[S]) -> (z f32[N, V],
 *   draft i32[N]): for k = 0..N-1 (prev = prev[k / G] where a sequence's chain of G = N / S
 *   rows starts): e = fp32(w1[prev]); z_k[v] = base[k, v] + (sum_i w2[v, i] * e_i) (fp32,
 *   i ascending, on cpu_gemm.c with v split over the workers); d_k = first argmax of z_k (a
 *   NaN never wins over an earlier value); prev = d_k.
 */
#include "cpu_gemm.h"

#include <stdlib.h>

static float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

/* ---- router_topk ----------------------------------------------------------------------- */
typedef struct {
  const h3_tensor *bias, *ids, *wts;
  float *s;    /* [T, E] sigmoids of the logits */
  char *taken;    /* per worker: [E] */
  int64_t E, k;
  float scale;
} router_job;

static void router_sigmoid(void *arg, int64_t m, int64_t n0, int64_t nn, const float *sum) {
  const router_job *j = arg;
  float *s = j->s + m * j->E + n0;
  for (int64_t i = 0; i < nn; i++) s[i] = sigmoid_f(sum[i]);
}

/* Rows [begin, end): the k largest s_e + bias_e, written in ascending id order. */
static void router_select(void *arg, int worker, int64_t begin, int64_t end) {
  const router_job *j = arg;
  int64_t E = j->E, k = j->k;
  char *taken = j->taken + worker * E;
  for (int64_t t = begin; t < end; t++) {
    const float *s = j->s + t * E;
    memset(taken, 0, (size_t)E);
    for (int64_t r = 0; r < k; r++) {
      int64_t bi = -1;
      float bv = 0.0f;
      for (int64_t e = 0; e < E; e++) {
        if (taken[e]) continue;
        float v = s[e] + h3cpu_ld(j->bias->data, j->bias->type.dtype, e);
        if (bi < 0 || v > bv) {
          bi = e;
          bv = v;
        }
      }
      if (bi < 0) break;
      taken[bi] = 1;
    }
    float sum = 0.0f;
    for (int64_t e = 0; e < E; e++)
      if (taken[e]) sum += s[e];
    int64_t n = 0;
    for (int64_t e = 0; e < E; e++) {
      if (!taken[e]) continue;
      h3cpu_sti(j->ids->data, j->ids->type.dtype, t * k + n, e);
      h3cpu_st(j->wts->data, j->wts->type.dtype, t * k + n, (s[e] / sum) * j->scale);
      n++;
    }
  }
}

H3_CPU_KERNEL(h3cpu_router_topk) {
  (void)n_in, (void)n_out;
  const h3_tensor *h = &in[0], *w = &in[1];
  int64_t T = h->type.dims[0], H = h->type.dims[1], E = w->type.dims[0];
  int64_t k = out[0].type.dims[1];
  if (k > E) {
    h3cpu_error(c, op, NULL, "k = %lld is larger than the %lld experts", (long long)k,
                (long long)E);
    return H3_ERR;
  }
  router_job j = {&in[2], &out[0], &out[1], NULL, NULL, E, k,
                  (float)h3_op_attr_float(op, "scale", 1.0)};
  float *x = h3cpu_f32_copy(h->data, h->type.dtype, T * H);
  float *s = malloc((size_t)(T * E + 1) * sizeof(float));
  j.s = s;
  j.taken = malloc((size_t)(h3cpu_pool_size(c->pool) * E + 1));
  h3cpu_gemm_args g = {x, H, w->data, w->type.dtype, T, E, H};
  h3_status st = x && s && j.taken ? h3cpu_gemm(c->pool, &g, router_sigmoid, &j) : H3_ERR;
  if (st == H3_OK) h3cpu_parallel(c->pool, T, router_select, &j);
  free(x), free(s), free(j.taken);
  if (st != H3_OK) h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
  return st;
}

/* ---- moe --------------------------------------------------------------------------------- */
/* The rows of each expert: expert e's are row[start[e] .. start[e + 1]), ascending, with the
   weights of their first slot naming e. */
typedef struct {
  int64_t *start; /* [E + 2] (one spare entry for moe_group's counting) */
  int64_t *row;   /* [T * k] */
  float *weight;  /* [T * k] */
} moe_routes;

/* Whether slot s of row t repeats the id of an earlier slot of the row. */
static bool moe_repeat(const h3_tensor *ids, int64_t t, int64_t k, int64_t s) {
  int64_t e = h3cpu_ldi(ids->data, ids->type.dtype, t * k + s);
  for (int64_t q = 0; q < s; q++)
    if (h3cpu_ldi(ids->data, ids->type.dtype, t * k + q) == e) return true;
  return false;
}

/* The local slot of slot i's expert (global id minus base), or -1 when it is a repeat of an
 * earlier slot of its row or an expert of another rank (outside [base, base + E)). */
static int64_t moe_local(const h3_tensor *ids, int64_t i, int64_t k, int64_t E, int64_t base) {
  int64_t e = h3cpu_ldi(ids->data, ids->type.dtype, i) - base;
  return e < 0 || e >= E || moe_repeat(ids, i / k, k, i % k) ? -1 : e;
}

/* Groups the rows by local expert (ids checked to lie in [0, N*E)); start must hold E + 2
 * zeros. */
static void moe_group(moe_routes *r, const h3_tensor *ids, const h3_tensor *wts, int64_t T,
                      int64_t k, int64_t E, int64_t base) {
  for (int64_t i = 0; i < T * k; i++) {
    int64_t e = moe_local(ids, i, k, E, base);
    if (e >= 0) r->start[e + 2]++;
  }
  for (int64_t e = 0; e < E; e++) r->start[e + 2] += r->start[e + 1];
  for (int64_t i = 0; i < T * k; i++) { /* start[e + 1] counts expert e's rows placed so far */
    int64_t e = moe_local(ids, i, k, E, base);
    if (e < 0) continue;
    int64_t at = r->start[e + 1]++;
    r->row[at] = i / k;
    r->weight[at] = h3cpu_ld(wts->data, wts->type.dtype, i);
  }
}

typedef struct {
  int64_t H, F;
  float alpha, limit;
  const int64_t *row; /* the expert's rows and weights (moe_routes, from its start) */
  const float *weight;
  float *u;   /* [n, 2F]: bf16(h . gate_up_e^T) */
  float *a;   /* [n, F]: the activation */
  float *acc; /* [T, H]: the sum over the row's experts so far */
} moe_job;

static void moe_gate_up(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s) {
  const moe_job *j = arg;
  float *u = j->u + m * 2 * j->F + n0;
  for (int64_t i = 0; i < nn; i++) u[i] = h3_bf16_round(s[i]);
}

static void moe_act(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const moe_job *j = arg;
  int64_t F = j->F;
  for (int64_t m = begin; m < end; m++) {
    const float *u = j->u + m * 2 * F;
    for (int64_t o = 0; o < F; o++) {
      float g = u[o] < j->limit ? u[o] : j->limit;
      float v = u[F + o];
      v = v < -j->limit ? -j->limit : v > j->limit ? j->limit : v;
      j->a[m * F + o] = h3_bf16_round((g * sigmoid_f(j->alpha * g)) * (v + 1.0f));
    }
  }
}

static void moe_down(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s) {
  const moe_job *j = arg;
  float *acc = j->acc + j->row[m] * j->H + n0;
  for (int64_t i = 0; i < nn; i++)
    acc[i] += h3cpu_mul_nofuse(j->weight[m], h3_bf16_round(s[i]));
}

/* Expert e's part of every row routed to it: xe [n, H] gathered rows of x. */
static h3_status moe_expert(h3_cpu_pool *pool, moe_job *j, const float *x, float *xe,
                            const h3_tensor *gu, const h3_tensor *down, int64_t e, int64_t n) {
  int64_t H = j->H, F = j->F;
  for (int64_t m = 0; m < n; m++) memcpy(xe + m * H, x + j->row[m] * H, (size_t)H * sizeof(float));
  const char *gw = (const char *)gu->data + e * 2 * F * H * (int64_t)h3_dtype_size(gu->type.dtype);
  const char *dw = (const char *)down->data + e * H * F * (int64_t)h3_dtype_size(down->type.dtype);
  h3cpu_gemm_args g1 = {xe, H, gw, gu->type.dtype, n, 2 * F, H};
  if (h3cpu_gemm(pool, &g1, moe_gate_up, j) != H3_OK) return H3_ERR;
  h3cpu_parallel(pool, n, moe_act, j);
  h3cpu_gemm_args g2 = {j->a, F, dw, down->type.dtype, n, H, F};
  return h3cpu_gemm(pool, &g2, moe_down, j);
}

/* Every expert in ascending id order, then out = acc. */
static h3_status moe_run(const h3_cpu_ctx *c, const h3_tensor *in, const h3_tensor *out,
                         moe_job *j, const moe_routes *r, int64_t T, int64_t E) {
  int64_t H = j->H, F = j->F, most = 0;
  for (int64_t e = 0; e < E; e++)
    if (r->start[e + 1] - r->start[e] > most) most = r->start[e + 1] - r->start[e];
  float *x = h3cpu_f32_copy(in[0].data, in[0].type.dtype, T * H);
  float *buf = malloc((size_t)(most * (H + 3 * F) + 1) * sizeof(float));
  j->acc = calloc((size_t)(T * H + 1), sizeof(float));
  h3_status st = x && buf && j->acc ? H3_OK : H3_ERR;
  if (st == H3_OK) { /* buf: xe [most, H], then u [most, 2F], a [most, F] */
    j->u = buf + most * H;
    j->a = j->u + most * 2 * F;
  }
  for (int64_t e = 0; e < E && st == H3_OK; e++) {
    j->row = r->row + r->start[e];
    j->weight = r->weight + r->start[e];
    int64_t n = r->start[e + 1] - r->start[e];
    if (n > 0) st = moe_expert(c->pool, j, x, buf, &in[1], &in[2], e, n);
  }
  for (int64_t i = 0; st == H3_OK && i < T * H; i++)
    h3cpu_st(out->data, out->type.dtype, i, j->acc[i]);
  free(x), free(buf), free(j->acc);
  return st;
}

/* With ranks = N, this rank r holds experts [r*E, (r+1)*E) of N*E (ops.def). */
H3_CPU_KERNEL(h3cpu_moe) {
  (void)n_in, (void)n_out;
  int64_t T = in[0].type.dims[0], E = in[1].type.dims[0], k = in[3].type.dims[1];
  int64_t ranks = h3_op_attr_int(op, "ranks", 1); /* 1: every expert, whole on every rank */
  if (ranks > 1 && !h3cpu_ranks_ok(c, op, &ranks)) return H3_ERR;
  int64_t base = ranks > 1 ? c->rank * E : 0;
  moe_job j = {in[0].type.dims[1], in[1].type.dims[1] / 2,
               (float)h3_op_attr_float(op, "alpha", 1.702),
               (float)h3_op_attr_float(op, "limit", 7.0), NULL, NULL, NULL, NULL, NULL};
  for (int64_t i = 0; i < T * k; i++) {
    int64_t e = h3cpu_ldi(in[3].data, in[3].type.dtype, i);
    if (e < 0 || e >= ranks * E) {
      h3cpu_error(c, op, "expert ids come from router_topk",
                  "expert id %lld (entry %lld) is outside [0, %lld)", (long long)e, (long long)i,
                  (long long)(ranks * E));
      return H3_ERR;
    }
  }
  moe_routes r = {calloc((size_t)(E + 2), sizeof(int64_t)),
                  malloc((size_t)(T * k + 1) * sizeof(int64_t)),
                  malloc((size_t)(T * k + 1) * sizeof(float))};
  h3_status st = r.start && r.row && r.weight ? H3_OK : H3_ERR;
  if (st == H3_OK) {
    moe_group(&r, &in[3], &in[4], T, k, E, base);
    st = moe_run(c, in, &out[0], &j, &r, T, E);
  }
  free(r.start), free(r.row), free(r.weight);
  if (st != H3_OK) h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
  return st;
}

typedef struct {
  const h3_tensor *base, *z;
  float *zf; /* [V]: step k's z in fp32, for the argmax */
  int64_t k, V;
} markov_job;

static void markov_store(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s) {
  (void)m;
  const markov_job *j = arg;
  for (int64_t i = 0; i < nn; i++) {
    int64_t at = j->k * j->V + n0 + i;
    float z = h3cpu_ld(j->base->data, j->base->type.dtype, at) + s[i];
    j->zf[n0 + i] = z;
    h3cpu_st(j->z->data, j->z->type.dtype, at, z);
  }
}

H3_CPU_KERNEL(h3cpu_markov_draft) {
  (void)n_in, (void)n_out;
  const h3_tensor *w1 = &in[1], *w2 = &in[2];
  int64_t N = in[0].type.dims[0], V = in[0].type.dims[1], r = w1->type.dims[1];
  int64_t S = in[3].type.rank ? in[3].type.dims[0] : 1, G = S ? N / S : 0;
  for (int64_t s = 0; s < S; s++) {
    int64_t prev = h3cpu_ldi(in[3].data, in[3].type.dtype, s);
    if (prev < 0 || prev >= V) {
      char at[32] = "";
      if (in[3].type.rank) snprintf(at, sizeof at, "[%lld]", (long long)s);
      h3cpu_error(c, op, "prev is the bonus token id",
                  "prev%s = %lld is outside the vocabulary [0, %lld)", at, (long long)prev,
                  (long long)V);
      return H3_ERR;
    }
  }
  float *e = malloc((size_t)(r + 1) * sizeof(float));
  markov_job j = {&in[0], &out[0], malloc((size_t)(V + 1) * sizeof(float)), 0, V};
  h3_status st = e && j.zf ? H3_OK : H3_ERR;
  int64_t prev = 0;
  for (int64_t k = 0; k < N && st == H3_OK; k++) {
    if (k % G == 0) prev = h3cpu_ldi(in[3].data, in[3].type.dtype, k / G); /* a chain starts */
    for (int64_t i = 0; i < r; i++) e[i] = h3cpu_ld(w1->data, w1->type.dtype, prev * r + i);
    j.k = k;
    h3cpu_gemm_args g = {e, r, w2->data, w2->type.dtype, 1, V, r};
    st = h3cpu_gemm(c->pool, &g, markov_store, &j);
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
      if (j.zf[v] > j.zf[best]) best = v;
    h3cpu_sti(out[1].data, out[1].type.dtype, k, best);
    prev = best;
  }
  free(e), free(j.zf);
  if (st != H3_OK) h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
  return st;
}
