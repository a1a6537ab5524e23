/* test_ops_sample.c: the CPU reference of `sample_tokens` (ops.def) against its contract:
 *   - temperature <= 0, -0 or NaN is argmax (the argmax op's result: ties to the lowest
 *     index, NaN never wins, an all-NaN row gives 0);
 *   - temperature > 0 is the first maximum of logit / T + g, g = -log(-log(u)), u from
 *     h3_rng_uniform on the stream "sample" at index pos * 2^32 + v under the row's seed,
 *     recomputed here from the rng.h primitives; it changes with the seed and the position;
 *   - a row's token does not depend on the other rows (alone vs row 3 of a batch of 5);
 *   - frequencies over 20000 seeds and over 20000 positions are within 0.02 of
 *     softmax(logits / T) for a 4-token row (T = 1, 0.5, and T = 100: near uniform);
 *   - NaN and -inf logits are never drawn;
 *   - the margin (second result) is the winner's score minus the best other score, bit for
 *     bit: greedy top1 - top2 of the logits, sampled rows recomputed from
 *     h3_rng_sample_score; ties give +0 (+inf ties and -0 / +0 ties too), V = 1 and rows
 *     whose other scores are NaN / -inf give +inf, an all-NaN row NaN (0x7fc00000).
 * spec_accept (ops.def), the DSpark acceptance over the same rules:
 *   - greedy: n = the agreeing prefix of the draft with the rows' argmaxes, the emitted tokens
 *     d_1 .. d_n, t_n with sample_tokens' greedy margins, -1 / NaN past them;
 *   - sampling: over 20000 sequences (seeds) with one set of rows and drafts, the first
 *     emitted token is distributed as softmax(row 0 / T), and given d_1 was accepted the
 *     second as softmax(row 1 / T) (rejection sampling against a point-mass draft is exact),
 *     within 0.02; a draft token of probability 0 is never accepted;
 *   - the shapes' errors.
 * Every run also checks 1 thread against 2 (harness.h).
 */
#include "harness.h"
#include "h3/rng.h"

/* One sample_tokens op over R rows of V logits (new graph inputs each call); returns the tokens
 * (malloc'd) and, when margin is not NULL, the margins in *margin (malloc'd). */
static int32_t *run_sample(T *t, int64_t R, int64_t V, const float *x, const float *temp,
                           const int32_t *seed, const int32_t *pos, float **margin) {
  static int calls;
  char name[4][32];
  static const char *const what[4] = {"logits", "temperature", "seed", "pos"};
  for (int i = 0; i < 4; i++) snprintf(name[i], sizeof name[i], "%s%d", what[i], calls);
  calls++;
  h3_value *v[4] = {t_in(t, name[0], TY(H3_F32, R, V)), t_in(t, name[1], TY(H3_F32, R)),
                    t_in(t, name[2], TY(H3_I32, R)), t_in(t, name[3], TY(H3_I32, R))};
  h3_op *op = t_op(t, H3_OP_SAMPLE_TOKENS, 4, v, 0, NULL);
  const void *src[4] = {x, temp, seed, pos};
  const size_t bytes[4] = {(size_t)(R * V) * 4, (size_t)R * 4, (size_t)R * 4, (size_t)R * 4};
  h3_tensor in[4], out[2];
  for (int i = 0; i < 4; i++) {
    in[i] = t_alloc(v[i]->type);
    memcpy(in[i].data, src[i], bytes[i]);
  }
  CHECK(t_run(op, in, out) == H3_OK, "sample_tokens R %lld V %lld", (long long)R, (long long)V);
  t_free_all(in, 4);
  if (margin) *margin = out[1].data;
  else free(out[1].data);
  return out[0].data;
}

/* The float's bits. */
static uint32_t bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

/* The contract's margin of a row of scores s (first maximum b): NaN when every score is
 * NaN; second = the largest of the other non-NaN scores; +inf when there is none or it is
 * -inf; 0 on a tie; else s[b] - second. */
static float want_margin(const float *s, int64_t V) {
  int64_t b = -1;
  for (int64_t v = 0; v < V; v++)
    if (s[v] == s[v] && (b < 0 || s[v] > s[b])) b = v;
  if (b < 0) return NAN;
  float second = -INFINITY;
  for (int64_t v = 0; v < V; v++)
    if (v != b && s[v] == s[v] && s[v] > second) second = s[v];
  if (second == -INFINITY) return INFINITY;
  return s[b] == second ? 0.0f : s[b] - second;
}

/* The contract's token for one row at T > 0, from rng.h's primitives; *margin gets the
 * margin of the scores, which must be h3_rng_sample_score's (checked: score_ok). */
static int score_ok = 1;
static int32_t want_token(const float *x, int64_t V, float temp, int32_t seed, int32_t pos,
                          float *margin) {
  uint32_t stream = h3_rng_stream_id("sample");
  int32_t best = 0;
  float bv = -INFINITY, *sc = malloc(sizeof(float) * (size_t)V);
  for (int64_t v = 0; v < V; v++) {
    uint64_t index = ((uint64_t)(uint32_t)pos << 32) | (uint64_t)v;
    float u = h3_rng_uniform((uint32_t)seed, stream, index);
    float g = -h3_rng_log(-h3_rng_log(u));
    float s = x[v] / temp + g;
    sc[v] = s;
    score_ok &= bits(s) == bits(h3_rng_sample_score(x[v], temp, (uint32_t)seed, (uint32_t)pos, (uint32_t)v));
    if (s > bv) bv = s, best = (int32_t)v;
  }
  *margin = want_margin(sc, V);
  free(sc);
  return best;
}

static void test_greedy(void) {
  T t;
  t_init(&t, 11);
  enum { R = 6, V = 50 };
  float x[R * V], temp[R] = {0.0f, -1.0f, NAN, -0.0f, 0.0f, -INFINITY};
  int32_t seed[R] = {1, 2, 3, 4, 5, 6}, pos[R] = {0, 1, 2, 3, 4, 5};
  for (int i = 0; i < R * V; i++) x[i] = (float)t_uniform(&t, -3, 3);
  for (int v = 0; v < V; v++) {
    x[1 * V + v] = v == 7 || v == 20 ? 5.0f : -1.0f; /* tie: 7 */
    x[2 * V + v] = v < 3 ? NAN : v == 30 ? 4.0f : 0.0f; /* NaN first: 30 */
    x[3 * V + v] = NAN;                                 /* all NaN: 0 */
    x[4 * V + v] = v == 11 ? 2.0f : -INFINITY;          /* 11 */
  }
  float *margin;
  int32_t *got = run_sample(&t, R, V, x, temp, seed, pos, &margin);
  h3_value *xv = t_in(&t, "x_argmax", TY(H3_F32, R, V));
  h3_op *am = t_op(&t, H3_OP_ARGMAX, 1, &xv, 0, NULL);
  h3_tensor in = t_alloc(xv->type), oa[1];
  memcpy(in.data, x, sizeof x);
  CHECK(t_run(am, &in, oa) == H3_OK, "argmax");
  for (int r = 0; r < R; r++)
    CHECK(got[r] == ((int32_t *)oa[0].data)[r], "greedy row %d: %d, argmax %d", r, got[r],
          ((int32_t *)oa[0].data)[r]);
  static const int32_t want[R - 1] = {-1, 7, 30, 0, 11};
  for (int r = 1; r < R - 1; r++) CHECK(got[r] == want[r], "greedy row %d: %d, want %d", r, got[r], want[r]);
  /* greedy margins: top1 - top2 of the logits; the tie 0, 4 - 0, all NaN, one finite */
  for (int r = 0; r < R; r++) {
    float w = want_margin(x + r * V, V);
    CHECK(bits(margin[r]) == bits(w), "greedy row %d: margin %.9g, want %.9g", r, margin[r], w);
  }
  float top[2] = {-INFINITY, -INFINITY};
  for (int v = 0; v < V; v++) {
    const float a = x[v];
    if (a > top[0]) top[1] = top[0], top[0] = a;
    else if (a > top[1]) top[1] = a;
  }
  CHECK(margin[0] == top[0] - top[1] && margin[0] > 0, "greedy row 0: margin %.9g, top1 - top2 %.9g",
        margin[0], top[0] - top[1]);
  static const uint32_t want_bits[R - 1] = {0, 0, 0x40800000u, 0x7fc00000u, 0x7f800000u};
  for (int r = 1; r < R - 1; r++)
    CHECK(bits(margin[r]) == want_bits[r], "greedy row %d: margin 0x%08x, want 0x%08x", r, bits(margin[r]),
          want_bits[r]);
  free(got), free(margin);
  free(in.data);
  t_free_all(oa, 1);
  t_free(&t);
}

static void test_gumbel(void) {
  T t;
  t_init(&t, 12);
  CHECK(h3_rng_stream_id("sample") == H3_RNG_SAMPLE_STREAM, "the stream constant");
  /* the contract's token, rows of V = 1000 at several temperatures, seeds and positions
     (negative ones included: their 32-bit patterns) */
  enum { R = 8, V = 1000 };
  float *x = malloc(sizeof(float) * R * V);
  float temp[R] = {1.0f, 0.5f, 2.0f, 0.01f, 1e-30f, 3.0f, 0.7f, 1.0f};
  int32_t seed[R] = {0, 1, -1, 7, 123456789, -5, 42, 42}, pos[R] = {0, 5, 17, -3, 100000, 2, 0, 1};
  for (int i = 0; i < R * V; i++) x[i] = (float)t_uniform(&t, -4, 4);
  float *margin, *margin2;
  int32_t *got = run_sample(&t, R, V, x, temp, seed, pos, &margin);
  for (int r = 0; r < R; r++) {
    float wm;
    int32_t w = want_token(x + r * V, V, temp[r], seed[r], pos[r], &wm);
    CHECK(got[r] == w, "row %d: token %d, want %d", r, got[r], w);
    CHECK(bits(margin[r]) == bits(wm) && margin[r] > 0, "row %d: margin %.9g, want %.9g", r, margin[r], wm);
  }
  CHECK(score_ok, "the recomputed scores are h3_rng_sample_score's");
  int32_t *again = run_sample(&t, R, V, x, temp, seed, pos, &margin2);
  CHECK(memcmp(got, again, sizeof(int32_t) * R) == 0, "the same inputs give the same tokens");
  CHECK(memcmp(margin, margin2, sizeof(float) * R) == 0, "the same inputs give the same margins");
  free(again), free(margin), free(margin2);
  /* flat logits: the token moves with the seed and with the position */
  enum { N = 16 };
  float *flat = calloc(N * V, sizeof(float)), ones[N];
  int32_t ids[N], zero[N] = {0};
  for (int i = 0; i < N; i++) ones[i] = 1.0f, ids[i] = i;
  int32_t *by_seed = run_sample(&t, N, V, flat, ones, ids, zero, NULL);
  int32_t *by_pos = run_sample(&t, N, V, flat, ones, zero, ids, NULL);
  int distinct_seed = 0, distinct_pos = 0;
  for (int i = 0; i < N; i++) {
    bool s_new = true, p_new = true;
    for (int j = 0; j < i; j++) s_new = s_new && by_seed[j] != by_seed[i], p_new = p_new && by_pos[j] != by_pos[i];
    distinct_seed += s_new, distinct_pos += p_new;
  }
  CHECK(distinct_seed >= 12 && distinct_pos >= 12, "16 seeds give %d tokens, 16 positions %d",
        distinct_seed, distinct_pos);
  free(by_seed), free(by_pos), free(flat), free(got), free(x);
  t_free(&t);
}

/* Row r of a batch of 5 with other contents equals the same row alone. */
static void test_batch_invariance(void) {
  T t;
  t_init(&t, 13);
  enum { B = 5, V = 333 };
  float x[B * V], temp[B] = {0.8f, 0.0f, 1.5f, 1.0f, 0.3f};
  int32_t seed[B] = {9, 8, 7, 1234, 5}, pos[B] = {1, 2, 3, 77, 5};
  for (int i = 0; i < B * V; i++) x[i] = (float)t_uniform(&t, -5, 5);
  float *bm, *am;
  int32_t *batch = run_sample(&t, B, V, x, temp, seed, pos, &bm);
  for (int r = 0; r < B; r++) {
    int32_t *alone = run_sample(&t, 1, V, x + r * V, temp + r, seed + r, pos + r, &am);
    CHECK(alone[0] == batch[r], "row %d: alone %d, in the batch %d", r, alone[0], batch[r]);
    CHECK(bits(am[0]) == bits(bm[r]), "row %d: margin alone %.9g, in the batch %.9g", r, am[0], bm[r]);
    free(alone), free(am);
  }
  free(batch), free(bm);
  t_free(&t);
}

/* 20000 draws of a 4-token row with logits log(p) at temperature T, over seeds (by_pos false)
 * or positions; each frequency within tol of softmax(log(p) / T). */
static void check_frequencies(T *t, float T_, bool by_pos, double tol) {
  enum { N = 20000, V = 4 };
  static const double p[V] = {0.1, 0.2, 0.3, 0.4};
  float *x = malloc(sizeof(float) * N * V), *temp = malloc(sizeof(float) * N);
  int32_t *seed = malloc(sizeof(int32_t) * N), *pos = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) {
    for (int v = 0; v < V; v++) x[i * V + v] = (float)log(p[v]);
    temp[i] = T_;
    seed[i] = by_pos ? 31337 : i;
    pos[i] = by_pos ? i : 4096;
  }
  int32_t *tok = run_sample(t, N, V, x, temp, seed, pos, NULL);
  double want[V], z = 0, count[V] = {0};
  for (int v = 0; v < V; v++) z += want[v] = pow(p[v], 1.0 / T_);
  for (int i = 0; i < N; i++)
    if (tok[i] >= 0 && tok[i] < V) count[tok[i]] += 1.0 / N;
  for (int v = 0; v < V; v++)
    CHECK(fabs(count[v] - want[v] / z) <= tol, "T %g over %s: token %d drawn %.4f, p %.4f", T_,
          by_pos ? "positions" : "seeds", v, count[v], want[v] / z);
  free(tok), free(x), free(temp), free(seed), free(pos);
}

static void test_statistics(void) {
  T t;
  t_init(&t, 14);
  check_frequencies(&t, 1.0f, false, 0.02);
  check_frequencies(&t, 1.0f, true, 0.02);
  check_frequencies(&t, 0.5f, false, 0.02);
  check_frequencies(&t, 100.0f, true, 0.02); /* near uniform: p^(1/100) in [0.977, 0.991] */
  t_free(&t);
}

/* NaN and -inf logits are never drawn, whatever the seed; a row of NaN gives 0. */
static void test_nan(void) {
  T t;
  t_init(&t, 15);
  enum { N = 2000, V = 16 };
  float *x = malloc(sizeof(float) * N * V), *temp = malloc(sizeof(float) * N);
  int32_t *seed = malloc(sizeof(int32_t) * N), *pos = calloc(N, sizeof(int32_t));
  for (int i = 0; i < N; i++) {
    for (int v = 0; v < V; v++)
      x[i * V + v] = v % 3 == 0 ? NAN : v % 5 == 1 ? -INFINITY : (float)t_uniform(&t, -1, 1);
    x[i * V + 3] = NAN; /* would be a likely token */
    temp[i] = 2.0f;
    seed[i] = i;
  }
  for (int v = 0; v < V; v++) x[7 * V + v] = NAN; /* row 7: all NaN */
  float *margin;
  int32_t *tok = run_sample(&t, N, V, x, temp, seed, pos, &margin);
  int bad = 0, bad_margin = 0;
  for (int i = 0; i < N; i++) {
    float chosen = x[i * V + (tok[i] >= 0 && tok[i] < V ? tok[i] : 0)];
    if (i != 7 && !(chosen > -INFINITY)) bad++;
    float wm;
    want_token(x + i * V, V, temp[i], seed[i], pos[i], &wm);
    bad_margin += bits(margin[i]) != bits(wm);
  }
  CHECK(bad == 0, "%d rows drew a NaN or -inf logit", bad);
  CHECK(tok[7] == 0, "an all-NaN row gives %d", tok[7]);
  CHECK(bad_margin == 0, "%d rows have another margin than the contract's", bad_margin);
  CHECK(bits(margin[7]) == 0x7fc00000u, "an all-NaN row's margin 0x%08x", bits(margin[7]));
  free(tok), free(margin), free(x), free(temp), free(seed), free(pos);
  t_free(&t);
}

/* Margins at the edges, each row greedy (T 0) and sampled (T 0.8): V = 1 (finite, NaN, -inf,
 * +inf logit), then rows of 4: a tie at +inf, -0 / +0 tied over -inf (greedy: +0), all -inf,
 * one finite among -inf, a sum that overflows, exact differences. */
static void test_margin_edges(void) {
  T t;
  t_init(&t, 16);
  static const float one[4] = {1.5f, NAN, -INFINITY, INFINITY};
  static const uint32_t one_bits[4] = {0x7f800000u, 0x7fc00000u, 0x7f800000u, 0x7f800000u};
  enum { R4 = 7, V4 = 4 };
  static const float four[R4][V4] = {
      {1.0f, INFINITY, -2.0f, INFINITY},         {-INFINITY, -0.0f, 0.0f, -INFINITY},
      {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, {-INFINITY, NAN, 3.0f, -INFINITY},
      {3e38f, -3e38f, NAN, -INFINITY},           {1.0f, 0.75f, 0.5f, 0.9375f},
      {-1.0f, -0.5f, -0.25f, -0.375f}};
  /* greedy: token, margin bits */
  static const int32_t four_tok[R4] = {1, 1, 0, 2, 0, 0, 2};
  static const uint32_t four_bits[R4] = {0,           0,           0x7f800000u, 0x7f800000u,
                                         0x7f800000u, 0x3d800000u /* 0.0625 */,
                                         0x3e000000u /* 0.125 */};
  for (int pass = 0; pass < 2; pass++) {
    float temp[R4], *m;
    int32_t seed[R4], pos[R4];
    for (int r = 0; r < R4; r++) temp[r] = pass ? 0.8f : 0.0f, seed[r] = 100 + r, pos[r] = r;
    for (int i = 0; i < 4; i++) {
      int32_t *tok = run_sample(&t, 1, 1, &one[i], temp, seed, pos, &m);
      CHECK(tok[0] == 0 && bits(m[0]) == one_bits[i], "V = 1, logit %g, T %g: token %d margin %.9g", one[i],
            temp[0], tok[0], m[0]);
      free(tok), free(m);
    }
    int32_t *tok = run_sample(&t, R4, V4, &four[0][0], temp, seed, pos, &m);
    for (int r = 0; r < R4; r++) {
      float wm;
      int32_t wt = want_token(four[r], V4, 0.8f, seed[r], pos[r], &wm);
      if (!pass) wt = four_tok[r], wm = want_margin(four[r], V4);
      CHECK(tok[r] == wt && bits(m[r]) == bits(wm), "row %d, T %g: token %d margin %.9g, want %d %.9g", r,
            temp[r], tok[r], m[r], wt, wm);
      if (!pass) CHECK(bits(m[r]) == four_bits[r], "greedy row %d: margin 0x%08x, want 0x%08x", r,
                       bits(m[r]), four_bits[r]);
    }
    /* sampled: +inf ties stay a tie (0), all -inf and one finite among -inf stay +inf */
    if (pass) CHECK(bits(m[0]) == 0 && bits(m[2]) == 0x7f800000u && bits(m[3]) == 0x7f800000u,
                    "sampled edge margins %.9g %.9g %.9g", m[0], m[2], m[3]);
    free(tok), free(m);
  }
  t_free(&t);
}

/* One spec_accept op over S sequences of G draft tokens (V logits per row); n, tokens and
 * margins returned (malloc'd). */
static void run_accept(T *t, int64_t S, int64_t G, int64_t V, const float *x, const int32_t *draft,
                       const float *temp, const int32_t *seed, const int32_t *pos, int32_t **n,
                       int32_t **tok, float **margin) {
  static int calls;
  char name[5][32];
  static const char *const what[5] = {"alogits", "adraft", "atemp", "aseed", "apos"};
  for (int i = 0; i < 5; i++) snprintf(name[i], sizeof name[i], "%s%d", what[i], calls);
  calls++;
  h3_value *v[5] = {t_in(t, name[0], TY(H3_F32, S * (G + 1), V)), t_in(t, name[1], TY(H3_I32, S * G)),
                    t_in(t, name[2], TY(H3_F32, S)), t_in(t, name[3], TY(H3_I32, S)),
                    t_in(t, name[4], TY(H3_I32, S))};
  h3_op *op = t_op(t, H3_OP_SPEC_ACCEPT, 5, v, 0, NULL);
  const void *src[5] = {x, draft, temp, seed, pos};
  const size_t bytes[5] = {(size_t)(S * (G + 1) * V) * 4, (size_t)(S * G) * 4, (size_t)S * 4,
                           (size_t)S * 4, (size_t)S * 4};
  h3_tensor in[5], out[3];
  for (int i = 0; i < 5; i++) {
    in[i] = t_alloc(v[i]->type);
    memcpy(in[i].data, src[i], bytes[i]);
  }
  CHECK(t_run(op, in, out) == H3_OK, "spec_accept S %lld G %lld V %lld", (long long)S, (long long)G,
        (long long)V);
  t_free_all(in, 5);
  *n = out[0].data, *tok = out[1].data, *margin = out[2].data;
}

static void test_spec_accept_greedy(void) {
  T t;
  t_init(&t, 15);
  enum { S = 3, G = 3, V = 7 };
  float x[S * (G + 1) * V];
  for (int i = 0; i < S * (G + 1) * V; i++) x[i] = (float)((i * 37 % 11) - 5) * 0.25f;
  /* each row's argmax, then drafts agreeing for 0, 2 and all 3 tokens */
  int32_t arg[S * (G + 1)], draft[S * G], pos[S] = {10, 20, 30}, seed[S] = {1, 2, 3};
  float temp[S] = {0, -1, NAN};
  for (int r = 0; r < S * (G + 1); r++) {
    arg[r] = 0;
    for (int v = 1; v < V; v++)
      if (x[r * V + v] > x[r * V + arg[r]]) arg[r] = v;
  }
  const int agree[S] = {0, 2, 3};
  for (int s = 0; s < S; s++)
    for (int i = 0; i < G; i++)
      draft[s * G + i] = i < agree[s] ? arg[s * (G + 1) + i] : (arg[s * (G + 1) + i] + 1) % V;
  int32_t *n, *tok;
  float *mg;
  run_accept(&t, S, G, V, x, draft, temp, seed, pos, &n, &tok, &mg);
  for (int s = 0; s < S; s++) {
    CHECK(n[s] == agree[s], "greedy sequence %d: n %d, want %d", s, n[s], agree[s]);
    for (int i = 0; i <= G; i++) {
      int32_t want = i < agree[s] ? draft[s * G + i] : i == agree[s] ? arg[s * (G + 1) + i] : -1;
      CHECK(tok[s * (G + 1) + i] == want, "greedy sequence %d token %d: %d, want %d", s, i,
            tok[s * (G + 1) + i], want);
      float wm = i <= agree[s] ? want_margin(x + (s * (G + 1) + i) * V, V) : NAN;
      CHECK(bits(mg[s * (G + 1) + i]) == bits(wm), "greedy sequence %d margin %d", s, i);
    }
  }
  free(n), free(tok), free(mg);
  t_free(&t);
}

static void test_spec_accept_sampling(void) {
  T t;
  t_init(&t, 16);
  enum { N = 20000, G = 2, V = 4 };
  static const double p0[V] = {0.1, 0.2, 0.3, 0.4}, p1[V] = {0.4, 0.1, 0.25, 0.25};
  const float T_ = 1.0f;
  float *x = malloc(sizeof(float) * N * (G + 1) * V), *temp = malloc(sizeof(float) * N);
  int32_t *draft = malloc(sizeof(int32_t) * N * G), *seed = malloc(sizeof(int32_t) * N);
  int32_t *pos = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) {
    for (int v = 0; v < V; v++) {
      x[(i * (G + 1) + 0) * V + v] = (float)log(p0[v]);
      x[(i * (G + 1) + 1) * V + v] = (float)log(p1[v]);
      x[(i * (G + 1) + 2) * V + v] = v == 0 ? 0.0f : -INFINITY; /* row 2: token 0 only */
    }
    draft[i * G] = 2, draft[i * G + 1] = 1; /* d_1 = 2 (p 0.3), d_2 = 1 (p 0.1) */
    temp[i] = T_, seed[i] = i * 7 + 1, pos[i] = 100;
  }
  int32_t *n, *tok;
  float *mg;
  run_accept(&t, N, G, V, x, draft, temp, seed, pos, &n, &tok, &mg);
  double c0[V] = {0}, c1[V] = {0}, n1 = 0;
  int bad = 0;
  for (int i = 0; i < N; i++) {
    const int32_t *k = tok + i * (G + 1);
    bad += n[i] < 0 || n[i] > G || k[n[i]] < 0 || (n[i] < G && k[n[i] + 1] != -1);
    bad += !(mg[i * (G + 1)] != mg[i * (G + 1)]); /* sampling: NaN margins */
    if (k[0] >= 0 && k[0] < V) c0[k[0]] += 1.0 / N;
    if (n[i] >= 1) { /* d_1 accepted: the second token */
      n1++;
      if (k[1] >= 0 && k[1] < V) c1[k[1]] += 1.0;
    }
    bad += n[i] == 2 && k[2] != 0; /* all accepted: row 2's only token */
  }
  CHECK(bad == 0, "spec_accept sampling: %d malformed results", bad);
  for (int v = 0; v < V; v++) {
    CHECK(fabs(c0[v] - p0[v]) <= 0.02, "spec_accept first token %d drawn %.4f, p %.4f", v, c0[v], p0[v]);
    CHECK(n1 > 1000 && fabs(c1[v] / n1 - p1[v]) <= 0.03, "spec_accept second token %d drawn %.4f, p %.4f",
          v, n1 ? c1[v] / n1 : 0.0, p1[v]);
  }
  /* a draft of probability 0 is never accepted */
  for (int i = 0; i < N; i++) x[(i * (G + 1)) * V + 2] = -INFINITY;
  free(n), free(tok), free(mg);
  run_accept(&t, N, G, V, x, draft, temp, seed, pos, &n, &tok, &mg);
  int accepted = 0;
  for (int i = 0; i < N; i++) accepted += n[i] > 0 || tok[i * (G + 1)] == 2;
  CHECK(accepted == 0, "spec_accept: a probability-0 draft accepted %d times", accepted);
  free(n), free(tok), free(mg), free(x), free(temp), free(draft), free(seed), free(pos);
  t_free(&t);
}

int main(void) {
  test_greedy();
  test_gumbel();
  test_batch_invariance();
  test_statistics();
  test_nan();
  test_margin_edges();
  test_spec_accept_greedy();
  test_spec_accept_sampling();
  return t_report("test_ops_sample");
}
