/* ops_sample.c: CPU reference of `sample_tokens` (ops.def): temperature sampling, one token
 * per row, and the row's decision margin.
 *
 * sample_tokens(logits f32[R, V], temperature f32[R], seed i32[R], pos i32[R])
 *   -> (token i32[R], margin f32[R]):
 * row r scores every token v: s_v = logits[r, v] when T = temperature[r] is <= 0 or NaN
 * (greedy), else s_v = h3_rng_sample_score(logits[r, v], T, seed[r], pos[r], v)
 * (include/h3/rng.h: logit / T plus Gumbel noise, the GPU's bits); the token is the first
 * index of the largest s_v, a NaN score never wins and a row of NaN gives 0 (argmax's rule).
 * One pass keeps the best score and the largest of the others (NaN left out);
 * h3_rng_sample_margin makes the margin of them (0 on a tie, +inf with no other score, NaN
 * for an all-NaN row). Rows are split over the workers; a row reads nothing but its own
 * operands, so the result depends neither on the thread count nor on the other rows.
 *
 * spec_accept (ops.def): per sequence, its verify rows in order until one is not accepted:
 * greedy, row i's token by sample_row and the draft compared with it; sampling, p(d) of the
 * row (p_of: fp32, max subtracted, v ascending) against the accept stream's u, then
 * sample_row with d left out on a rejection. Sequences are split over the workers.
 */
#include "cpu_internal.h"
#include "h3/rng.h"

typedef struct {
  const float *x, *t;
  const int32_t *seed, *pos;
  int32_t *out;
  float *margin;
  int64_t V;
} sample_job;

/* The token of one row (token `skip` left out; -1: none); *margin gets its decision margin. */
static int32_t sample_row(const float *x, int64_t V, float t, uint32_t seed, uint32_t pos,
                          int64_t skip, float *margin) {
  const int greedy = !(t > 0.0f);
  int64_t best = 0;
  float bv = 0.0f, second = -INFINITY;
  int found = 0;
  for (int64_t v = 0; v < V; v++) {
    if (v == skip) continue;
    float s = greedy ? x[v] : h3_rng_sample_score(x[v], t, seed, pos, (uint32_t)v);
    if (s != s) continue;
    if (!found || s > bv) {
      if (found) second = bv;
      bv = s;
      best = v;
      found = 1;
    } else if (s > second) {
      second = s;
    }
  }
  *margin = h3_rng_sample_margin(found ? bv : NAN, second);
  return (int32_t)best;
}

static void sample_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const sample_job *j = arg;
  for (int64_t r = begin; r < end; r++)
    j->out[r] = sample_row(j->x + r * j->V, j->V, j->t[r], (uint32_t)j->seed[r],
                           (uint32_t)j->pos[r], -1, &j->margin[r]);
}

H3_CPU_KERNEL(h3cpu_sample_tokens) {
  (void)op, (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  sample_job j = {in[0].data, in[1].data, in[2].data, in[3].data, out[0].data, out[1].data,
                  xt->dims[1]};
  h3cpu_parallel(c->pool, xt->dims[0], sample_range, &j);
  return H3_OK;
}

/* softmax(x / t)[d] in fp32: m = max x_v / t, then exp(x_v / t - m) summed with v ascending
 * (NaN left out). */
static float p_of(const float *x, int64_t V, float t, int64_t d) {
  float m = -INFINITY, sum = 0.0f;
  for (int64_t v = 0; v < V; v++) {
    float s = x[v] / t;
    if (s > m) m = s;
  }
  for (int64_t v = 0; v < V; v++) {
    float e = expf(x[v] / t - m);
    if (e == e) sum += e;
  }
  float pd = expf(x[d] / t - m) / sum;
  return pd == pd ? pd : 0.0f;
}

typedef struct {
  const float *x, *t;
  const int32_t *draft, *seed, *pos;
  int32_t *n, *tokens;
  float *margin;
  int64_t V, G;
} accept_job;

static void accept_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const accept_job *j = arg;
  int64_t G = j->G, V = j->V;
  for (int64_t s = begin; s < end; s++) {
    const float *rows = j->x + s * (G + 1) * V;
    const int32_t *d = j->draft + s * G;
    int32_t *tok = j->tokens + s * (G + 1);
    float *mg = j->margin + s * (G + 1), t = j->t[s];
    uint32_t seed = (uint32_t)j->seed[s], p0 = (uint32_t)j->pos[s];
    for (int64_t i = 0; i <= G; i++) tok[i] = -1, mg[i] = NAN;
    int64_t n = 0;
    for (;; n++) { /* row n decides token n: d_{n+1} accepted, or the sequence's last token */
      const float *x = rows + n * V;
      uint32_t P = p0 + 1 + (uint32_t)n;
      if (!(t > 0.0f)) {
        float m;
        int32_t tn = sample_row(x, V, t, seed, P, -1, &m);
        mg[n] = m;
        if (n < G && d[n] == tn) {
          tok[n] = d[n];
          continue;
        }
        tok[n] = tn;
        break;
      }
      if (n < G) {
        float u = h3_rng_uniform(seed, H3_RNG_ACCEPT_STREAM, (unsigned long long)P << 32);
        int64_t dn = d[n] >= 0 && d[n] < V ? d[n] : -1;
        if (dn >= 0 && u < p_of(x, V, t, dn)) {
          tok[n] = d[n];
          continue;
        }
        float m;
        tok[n] = sample_row(x, V, t, seed, P, dn, &m);
        break;
      }
      float m;
      tok[n] = sample_row(x, V, t, seed, P, -1, &m);
      break;
    }
    j->n[s] = (int32_t)n;
  }
}

H3_CPU_KERNEL(h3cpu_spec_accept) {
  (void)op, (void)n_in, (void)n_out;
  int64_t S = in[2].type.dims[0], G = in[1].type.dims[0] / S;
  accept_job j = {in[0].data, in[2].data, in[1].data, in[3].data, in[4].data, out[0].data,
                  out[1].data, out[2].data, in[0].type.dims[1], G};
  h3cpu_parallel(c->pool, S, accept_range, &j);
  return H3_OK;
}
