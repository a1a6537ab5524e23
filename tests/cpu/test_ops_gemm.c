/* test_ops_gemm.c: linear, moe, router_topk and markov_draft, whose dot products run on the
 * register tiles of runtime/cpu/cpu_gemm.c, against the straight loops they replaced (written
 * out below: one fp32 chain per output, k ascending), BITWISE, on shapes that leave partial
 * tiles, panels and k ranges (M = 1, 3, 17, 300; N not a multiple of 16; K odd and past 256
 * and 512), bf16 / f16 / f32 weights, with and without bias, f32 and bf16 results. Inputs are
 * random, never zero, over a wide range of magnitudes so that any change of the order of
 * the operations shows in the bits. Every op runs with 1, 2 and 3 threads, on the engine's
 * SIMD path and on its generic path. This file is compiled with -ffp-contract=off so that
 * the reference loops round every product.
 */
#include "harness.h"

#include "cpu_gemm.h"

/* +-2^e * (1 + u), e in [-6, 4): never zero. */
static double t_value(T *t) {
  double v = ldexp(1.0 + t_uniform(t, 0, 1), (int)floor(t_uniform(t, -6, 4)));
  return t_next(t) & 1 ? v : -v;
}

static h3_tensor t_values(T *t, h3_type ty) {
  h3_tensor x = t_alloc(ty);
  for (int64_t i = 0; i < h3_type_numel(&ty); i++) t_set(&x, i, t_value(t));
  return x;
}

/* Runs op on both engine paths with 1, 2 and 3 threads; each result must equal want[i]. */
static void run_all(h3_op *op, const h3_tensor *in, const h3_tensor *want, const char *what) {
  for (int simd = 0; simd < 2; simd++) {
    h3cpu_gemm_allow_simd(simd);
    for (int threads = 1; threads <= 3; threads++) {
      h3_tensor out[2];
      for (int i = 0; i < op->n_results; i++) out[i] = t_alloc(op->results[i]->type);
      h3_diag d;
      h3_diag_init(&d);
      h3_status st = h3_cpu_run_op(op, in, op->n_operands, out, op->n_results, threads, 0, &d);
      if (st != H3_OK) h3_diag_print(&d, stderr);
      h3_diag_free(&d);
      CHECK(st == H3_OK, "%s: run", what);
      for (int i = 0; st == H3_OK && i < op->n_results; i++)
        CHECK(memcmp(out[i].data, want[i].data, (size_t)h3_type_bytes(&want[i].type)) == 0,
              "%s: result %d differs from the straight loop (simd %d, %d threads)", what, i, simd,
              threads);
      t_free_all(out, op->n_results);
    }
  }
  h3cpu_gemm_allow_simd(true);
}

/* ---- linear ------------------------------------------------------------------------------ */
/* The old linear: one fp32 chain per output over k ascending, the bias last, one rounding. */
static void old_linear(const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, int64_t M,
                       int64_t N, int64_t K, const h3_tensor *y) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; k++) s += (float)t_get(x, m * K + k) * (float)t_get(w, n * K + k);
      if (b) s += (float)t_get(b, n);
      t_set(y, m * N + n, s);
    }
}

static void check_linear(T *t, int64_t M, int64_t N, int64_t K, h3_dtype xd, h3_dtype wd,
                         bool bias, h3_dtype yd) {
  h3_value *x = t_in(t, "x", TY(xd, M, K)), *w = t_in(t, "w", TY(wd, N, K));
  h3_value *b = t_in(t, "b", TY(H3_F32, N));
  h3_tensor in[3] = {t_values(t, x->type), t_values(t, w->type), t_values(t, b->type)};
  h3_attr dt = h3_attr_dtype(t->m, "dtype", yd);
  h3_op *op = t_op(t, H3_OP_LINEAR, bias ? 3 : 2, (h3_value *[]){x, w, b}, 1, &dt);
  h3_tensor want = t_alloc(op->results[0]->type);
  old_linear(&in[0], &in[1], bias ? &in[2] : NULL, M, N, K, &want);
  char what[128];
  snprintf(what, sizeof what, "linear M %lld N %lld K %lld x %s w %s%s -> %s", (long long)M,
           (long long)N, (long long)K, h3_dtype_name(xd), h3_dtype_name(wd), bias ? " bias" : "",
           h3_dtype_name(yd));
  run_all(op, in, &want, what);
  t_free_all(in, 3), t_free_all(&want, 1);
}

static void test_linear(void) {
  T t;
  t_init(&t, 21);
  const int64_t Ms[] = {1, 3, 17}, Ns[] = {5, 16, 33}, Ks[] = {1, 7, 301, 523};
  const h3_dtype wds[] = {H3_BF16, H3_F32, H3_F16};
  for (int mi = 0; mi < 3; mi++)
    for (int ni = 0; ni < 3; ni++)
      for (int ki = 0; ki < 4; ki++)
        for (int wi = 0; wi < 3; wi++)
          for (int bias = 0; bias < 2; bias++)
            check_linear(&t, Ms[mi], Ns[ni], Ks[ki], H3_BF16, wds[wi], bias,
                         bias ? H3_BF16 : H3_F32);
  check_linear(&t, 3, 33, 301, H3_F32, H3_BF16, true, H3_F32);
  check_linear(&t, 300, 20, 9, H3_BF16, H3_BF16, true, H3_F32); /* several row blocks */
  check_linear(&t, 2, 40, 0, H3_BF16, H3_BF16, true, H3_F32);   /* K = 0: the bias alone */
  t_free(&t);
}

/* ---- moe ---------------------------------------------------------------------------------- */
static float sig(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The old moe of row t into y[H] (f32): chosen experts in ascending id order (a repeated id
   counts once, with its first slot's weight), each a straight GEMV. */
static void old_moe_row(const h3_tensor *in, int64_t t, int64_t H, int64_t F, int64_t k,
                        float alpha, float limit, float *y) {
  const h3_tensor *h = &in[0], *gu = &in[1], *dn = &in[2], *ids = &in[3], *wts = &in[4];
  float u[64], a[32];
  for (int64_t o = 0; o < H; o++) y[o] = 0.0f;
  int64_t last = -1;
  for (int64_t r = 0; r < k; r++) {
    int64_t bi = -1, be = 0;
    for (int64_t s = 0; s < k; s++) {
      int64_t e = (int64_t)t_get(ids, t * k + s);
      if (e > last && (bi < 0 || e < be)) bi = s, be = e;
    }
    if (bi < 0) break;
    last = be;
    float we = (float)t_get(wts, t * k + bi);
    for (int64_t o = 0; o < 2 * F; o++) {
      float s = 0.0f;
      for (int64_t i = 0; i < H; i++)
        s += (float)t_get(h, t * H + i) * (float)t_get(gu, (be * 2 * F + o) * H + i);
      u[o] = rb(s);
    }
    for (int64_t o = 0; o < F; o++) {
      float g = u[o] < limit ? u[o] : limit, v = u[F + o];
      v = v < -limit ? -limit : v > limit ? limit : v;
      a[o] = rb((g * sig(alpha * g)) * (v + 1.0f));
    }
    for (int64_t o = 0; o < H; o++) {
      float s = 0.0f;
      for (int64_t i = 0; i < F; i++) s += a[i] * (float)t_get(dn, (be * H + o) * F + i);
      y[o] += we * rb(s);
    }
  }
}

static void check_moe(T *t, int64_t T_, int64_t H, int64_t F, int64_t E, int64_t k, h3_dtype wd) {
  h3_value *h = t_in(t, "h", TY(H3_BF16, T_, H)), *gu = t_in(t, "gu", TY(wd, E, 2 * F, H));
  h3_value *dn = t_in(t, "dn", TY(wd, E, H, F)), *ids = t_in(t, "ids", TY(H3_I32, T_, k));
  h3_value *wts = t_in(t, "wts", TY(H3_F32, T_, k));
  h3_tensor in[5] = {t_values(t, h->type), t_values(t, gu->type), t_values(t, dn->type),
                     t_alloc(ids->type), t_values(t, wts->type)};
  for (int64_t r = 0; r < T_; r++) /* distinct ids in random order; row 1 repeats its first */
    for (int64_t s = 0; s < k; s++) {
      int64_t e = (int64_t)t_get(&in[3], r * k);
      bool dup = !(r == 1 && s == k - 1);
      while (dup) {
        e = (int64_t)(t_next(t) % (uint64_t)E);
        dup = false;
        for (int64_t q = 0; q < s; q++) dup |= (int64_t)t_get(&in[3], r * k + q) == e;
      }
      t_set(&in[3], r * k + s, (double)e);
    }
  h3_attr ma[2] = {h3_attr_float(t->m, "alpha", 1.702), h3_attr_float(t->m, "limit", 7.0)};
  h3_op *op = t_op(t, H3_OP_MOE, 5, (h3_value *[]){h, gu, dn, ids, wts}, 2, ma);
  h3_tensor want = t_alloc(op->results[0]->type);
  for (int64_t r = 0; r < T_; r++)
    old_moe_row(in, r, H, F, k, 1.702f, 7.0f, (float *)want.data + r * H);
  char what[96];
  snprintf(what, sizeof what, "moe T %lld H %lld F %lld E %lld k %lld %s", (long long)T_,
           (long long)H, (long long)F, (long long)E, (long long)k, h3_dtype_name(wd));
  run_all(op, in, &want, what);
  t_free_all(in, 5), t_free_all(&want, 1);
}

static void test_moe(void) {
  T t;
  t_init(&t, 22);
  const int64_t Ts[] = {1, 3, 17};
  for (int ti = 0; ti < 3; ti++) {
    check_moe(&t, Ts[ti], 37, 21, 6, 3, H3_BF16);
    check_moe(&t, Ts[ti], 37, 21, 6, 3, H3_F32);
  }
  check_moe(&t, 17, 301, 29, 5, 2, H3_BF16);
  t_free(&t);
}

/* ---- router_topk -------------------------------------------------------------------------- */
/* The old router_topk of row t: sigmoid of straight dots, k largest of s + bias (ties: lower
   id), in ascending id order, weights normalised by their ascending-id sum. */
static void old_router_row(const h3_tensor *in, int64_t t, int64_t H, int64_t E, int64_t k,
                           float scale, const h3_tensor *ids, const h3_tensor *wts) {
  float s[64];
  char taken[64] = {0};
  for (int64_t e = 0; e < E; e++) {
    float acc = 0.0f;
    for (int64_t i = 0; i < H; i++)
      acc += (float)t_get(&in[0], t * H + i) * (float)t_get(&in[1], e * H + i);
    s[e] = sig(acc);
  }
  for (int64_t r = 0; r < k; r++) {
    int64_t bi = -1;
    float bv = 0.0f;
    for (int64_t e = 0; e < E; e++) {
      float v = s[e] + (float)t_get(&in[2], e);
      if (!taken[e] && (bi < 0 || v > bv)) bi = e, bv = v;
    }
    taken[bi] = 1;
  }
  float sum = 0.0f;
  for (int64_t e = 0; e < E; e++)
    if (taken[e]) sum += s[e];
  for (int64_t e = 0, n = 0; e < E; e++)
    if (taken[e]) {
      t_set(ids, t * k + n, (double)e);
      t_set(wts, t * k + n++, (s[e] / sum) * scale);
    }
}

static void check_router(T *t, int64_t T_, int64_t H, int64_t E, int64_t k) {
  h3_value *h = t_in(t, "h", TY(H3_BF16, T_, H)), *w = t_in(t, "w", TY(H3_F32, E, H));
  h3_value *bias = t_in(t, "bias", TY(H3_F32, E));
  h3_tensor in[3] = {t_values(t, h->type), t_alloc(w->type), t_alloc(bias->type)};
  for (int64_t i = 0; i < E * H; i++) t_set(&in[1], i, t_value(t) / 64); /* few saturate */
  for (int64_t e = 0; e < E; e++) t_set(&in[2], e, t_uniform(t, -0.01, 0.01));
  h3_attr ra[2] = {h3_attr_int(t->m, "k", k), h3_attr_float(t->m, "scale", 2.5)};
  h3_op *op = t_op(t, H3_OP_ROUTER_TOPK, 3, (h3_value *[]){h, w, bias}, 2, ra);
  h3_tensor want[2] = {t_alloc(op->results[0]->type), t_alloc(op->results[1]->type)};
  for (int64_t r = 0; r < T_; r++) old_router_row(in, r, H, E, k, 2.5f, &want[0], &want[1]);
  char what[64];
  snprintf(what, sizeof what, "router_topk T %lld H %lld E %lld k %lld", (long long)T_,
           (long long)H, (long long)E, (long long)k);
  run_all(op, in, want, what);
  t_free_all(in, 3), t_free_all(want, 2);
}

static void test_router(void) {
  T t;
  t_init(&t, 23);
  check_router(&t, 1, 301, 19, 4);
  check_router(&t, 3, 37, 19, 4);
  check_router(&t, 17, 523, 40, 8);
  t_free(&t);
}

/* ---- markov_draft ------------------------------------------------------------------------ */
/* The old markov_draft: per step the straight GEMV of w2 by e = w1[prev] (old_linear's
   loop), z = base + s, first argmax. */
static void old_markov(const h3_tensor *in, int64_t G, int64_t V, int64_t r, const h3_tensor *z,
                       const h3_tensor *draft) {
  h3_tensor e = t_alloc(TY(H3_F32, 1, r)), s = t_alloc(TY(H3_F32, 1, V));
  int64_t prev = (int64_t)t_get(&in[3], 0);
  for (int64_t k = 0; k < G; k++) {
    for (int64_t i = 0; i < r; i++) t_set(&e, i, t_get(&in[1], prev * r + i));
    old_linear(&e, &in[2], NULL, 1, V, r, &s);
    int64_t best = 0;
    for (int64_t v = 0; v < V; v++) {
      t_set(z, k * V + v, (float)t_get(&in[0], k * V + v) + (float)t_get(&s, v));
      if (t_get(z, k * V + v) > t_get(z, k * V + best)) best = v;
    }
    t_set(draft, k, (double)best);
    prev = best;
  }
  t_free_all(&e, 1), t_free_all(&s, 1);
}

static void check_markov(T *t, int64_t G, int64_t V, int64_t r, h3_dtype wd) {
  h3_value *base = t_in(t, "base", TY(H3_F32, G, V)), *w1 = t_in(t, "w1", TY(wd, V, r));
  h3_value *w2 = t_in(t, "w2", TY(wd, V, r)), *prev = t_in(t, "prev", SCALAR(H3_I32));
  h3_tensor in[4] = {t_values(t, base->type), t_values(t, w1->type), t_values(t, w2->type),
                     t_alloc(prev->type)};
  *(int32_t *)in[3].data = (int32_t)(V / 2);
  h3_op *op = t_op(t, H3_OP_MARKOV_DRAFT, 4, (h3_value *[]){base, w1, w2, prev}, 0, NULL);
  h3_tensor want[2] = {t_alloc(op->results[0]->type), t_alloc(op->results[1]->type)};
  old_markov(in, G, V, r, &want[0], &want[1]);
  char what[64];
  snprintf(what, sizeof what, "markov_draft G %lld V %lld r %lld %s", (long long)G,
           (long long)V, (long long)r, h3_dtype_name(wd));
  run_all(op, in, want, what);
  t_free_all(in, 4), t_free_all(want, 2);
}

static void test_markov(void) {
  T t;
  t_init(&t, 24);
  check_markov(&t, 3, 37, 301, H3_BF16);
  check_markov(&t, 4, 100, 7, H3_F32);
  t_free(&t);
}

int main(void) {
  test_linear();
  test_moe();
  test_router();
  test_markov();
  return t_report("test_ops_gemm");
}
