/* ops_moe.c: CPU reference of M3.1's mixture-of-experts ops and DSpark's Markov head:
 * router_topk, moe, markov_draft.
 *
 * router_topk(h[T, H], w f32[E, H], bias f32[E]) {k, scale}: logit_e = sum_i fp32(h_i) *
 *   w_ei (i ascending); s_e = 1 / (1 + expf(-logit_e)); the k experts with the largest
 *   s_e + bias_e (ties: lower id) are written in ascending id order with weights
 *   (s_e / sum_sel s) * scale, the sum taken in ascending id order.
 * moe(h[T, H], gate_up[E, 2F, H], down[E, H, F], ids i32[T, k], weights f32[T, k])
 *   {alpha, limit} -> f32[T, H]: per row, for each chosen expert in ascending id order:
 *   u = bf16(h . gate_up_e^T) (fp32 sums, i ascending); with g = min(u[:F], limit) and
 *   v = clamp(u[F:], -limit, limit): a = bf16((g * (1 / (1 + expf(-(alpha * g))))) * (v + 1));
 *   y = bf16(a . down_e^T); out += w_e * y (fp32, starting from 0). Rows are split over the
 *   pool's workers; each row is computed identically whatever the batch.
 * markov_draft(base f32[G, V], w1[V, r], w2[V, r], prev i32[]) -> (z f32[G, V], draft i32[G]):
 *   for k = 0..G-1: e = fp32(w1[prev]); z_k[v] = base[k, v] + (sum_i w2[v, i] * e_i);
 *   d_k = first argmax of z_k; prev = d_k.
 */
#include "cpu_internal.h"

#include <stdlib.h>

static float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

H3_CPU_KERNEL(h3cpu_router_topk) {
  (void)n_in, (void)n_out;
  const h3_tensor *h = &in[0], *w = &in[1], *bias = &in[2];
  int64_t T = h->type.dims[0], H = h->type.dims[1], E = w->type.dims[0];
  int64_t k = out[0].type.dims[1];
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  if (k > E) {
    h3cpu_error(c, op, NULL, "k = %lld is larger than the %lld experts", (long long)k,
                (long long)E);
    return H3_ERR;
  }
  float *s = malloc((size_t)(E + 1) * sizeof(float));
  char *taken = malloc((size_t)(E + 1));
  if (!s || !taken) {
    free(s), free(taken);
    h3cpu_error(c, op, NULL, "out of memory");
    return H3_ERR;
  }
  for (int64_t t = 0; t < T; t++) {
    for (int64_t e = 0; e < E; e++) {
      float acc = 0.0f;
      for (int64_t i = 0; i < H; i++)
        acc += h3cpu_ld(h->data, h->type.dtype, t * H + i) *
               h3cpu_ld(w->data, w->type.dtype, e * H + i);
      s[e] = sigmoid_f(acc);
      taken[e] = 0;
    }
    for (int64_t r = 0; r < k; r++) {
      int64_t bi = -1;
      float bv = 0.0f;
      for (int64_t e = 0; e < E; e++) {
        if (taken[e]) continue;
        float v = s[e] + h3cpu_ld(bias->data, bias->type.dtype, e);
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
      h3cpu_sti(out[0].data, out[0].type.dtype, t * k + n, e);
      h3cpu_st(out[1].data, out[1].type.dtype, t * k + n, (s[e] / sum) * scale);
      n++;
    }
  }
  free(s), free(taken);
  return H3_OK;
}

typedef struct {
  const h3_tensor *h, *gu, *down, *ids, *w, *out;
  int64_t H, F, k;
  float alpha, limit;
  float *scratch; /* per worker: x[H], u[2F], a[F], y[H], acc[H] */
} moe_job;

static void moe_range(void *arg, int worker, int64_t begin, int64_t end) {
  const moe_job *j = arg;
  int64_t H = j->H, F = j->F;
  float *x = j->scratch + worker * (4 * H + 3 * F);
  float *u = x + H, *a = u + 2 * F, *y = a + F, *acc = y + H;
  h3_dtype gd = j->gu->type.dtype, dd = j->down->type.dtype;
  for (int64_t t = begin; t < end; t++) {
    for (int64_t i = 0; i < H; i++) {
      x[i] = h3cpu_ld(j->h->data, j->h->type.dtype, t * H + i);
      acc[i] = 0.0f;
    }
    /* chosen experts in ascending id order (selection sort over the k entries) */
    int64_t last = -1;
    for (int64_t r = 0; r < j->k; r++) {
      int64_t bi = -1, be = 0;
      for (int64_t s = 0; s < j->k; s++) {
        int64_t e = h3cpu_ldi(j->ids->data, j->ids->type.dtype, t * j->k + s);
        if (e > last && (bi < 0 || e < be)) {
          bi = s;
          be = e;
        }
      }
      if (bi < 0) break;
      last = be;
      float we = h3cpu_ld(j->w->data, j->w->type.dtype, t * j->k + bi);
      int64_t gbase = be * 2 * F * H, dbase = be * H * F;
      for (int64_t o = 0; o < 2 * F; o++) {
        float s = 0.0f;
        for (int64_t i = 0; i < H; i++) s += x[i] * h3cpu_ld(j->gu->data, gd, gbase + o * H + i);
        u[o] = h3_bf16_round(s);
      }
      for (int64_t o = 0; o < F; o++) {
        float g = u[o] < j->limit ? u[o] : j->limit;
        float v = u[F + o];
        v = v < -j->limit ? -j->limit : v > j->limit ? j->limit : v;
        a[o] = h3_bf16_round((g * sigmoid_f(j->alpha * g)) * (v + 1.0f));
      }
      for (int64_t o = 0; o < H; o++) {
        float s = 0.0f;
        for (int64_t i = 0; i < F; i++) s += a[i] * h3cpu_ld(j->down->data, dd, dbase + o * F + i);
        y[o] = h3_bf16_round(s);
      }
      for (int64_t o = 0; o < H; o++) acc[o] += we * y[o];
    }
    for (int64_t o = 0; o < H; o++) h3cpu_st(j->out->data, j->out->type.dtype, t * H + o, acc[o]);
  }
}

H3_CPU_KERNEL(h3cpu_moe) {
  (void)n_in, (void)n_out;
  moe_job j = {&in[0], &in[1], &in[2], &in[3], &in[4], &out[0], 0, 0, 0, 0, 0, NULL};
  int64_t T = in[0].type.dims[0], E = in[1].type.dims[0];
  j.H = in[0].type.dims[1];
  j.F = in[1].type.dims[1] / 2;
  j.k = in[3].type.dims[1];
  j.alpha = (float)h3_op_attr_float(op, "alpha", 1.702);
  j.limit = (float)h3_op_attr_float(op, "limit", 7.0);
  for (int64_t i = 0; i < T * j.k; i++) {
    int64_t e = h3cpu_ldi(in[3].data, in[3].type.dtype, i);
    if (e < 0 || e >= E) {
      h3cpu_error(c, op, "expert ids come from router_topk",
                  "expert id %lld (entry %lld) is outside [0, %lld)", (long long)e, (long long)i,
                  (long long)E);
      return H3_ERR;
    }
  }
  int W = h3cpu_pool_size(c->pool);
  j.scratch = malloc((size_t)(W * (4 * j.H + 3 * j.F) + 1) * sizeof(float));
  if (!j.scratch) {
    h3cpu_error(c, op, NULL, "out of memory");
    return H3_ERR;
  }
  h3cpu_parallel(c->pool, T, moe_range, &j);
  free(j.scratch);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_markov_draft) {
  (void)n_in, (void)n_out;
  const h3_tensor *base = &in[0], *w1 = &in[1], *w2 = &in[2];
  int64_t G = base->type.dims[0], V = base->type.dims[1], r = w1->type.dims[1];
  int64_t prev = h3cpu_ldi(in[3].data, in[3].type.dtype, 0);
  if (prev < 0 || prev >= V) {
    h3cpu_error(c, op, "prev is the bonus token id",
                "prev = %lld is outside the vocabulary [0, %lld)", (long long)prev, (long long)V);
    return H3_ERR;
  }
  float *e = malloc((size_t)(r + 1) * sizeof(float));
  if (!e) {
    h3cpu_error(c, op, NULL, "out of memory");
    return H3_ERR;
  }
  for (int64_t k = 0; k < G; k++) {
    for (int64_t i = 0; i < r; i++) e[i] = h3cpu_ld(w1->data, w1->type.dtype, prev * r + i);
    int64_t best = 0;
    float bv = 0.0f;
    for (int64_t v = 0; v < V; v++) {
      float s = 0.0f;
      for (int64_t i = 0; i < r; i++) s += h3cpu_ld(w2->data, w2->type.dtype, v * r + i) * e[i];
      float z = h3cpu_ld(base->data, base->type.dtype, k * V + v) + s;
      h3cpu_st(out[0].data, out[0].type.dtype, k * V + v, z);
      if (v == 0 || z > bv) {
        best = v;
        bv = z;
      }
    }
    h3cpu_sti(out[1].data, out[1].type.dtype, k, best);
    prev = best;
  }
  free(e);
  return H3_OK;
}
