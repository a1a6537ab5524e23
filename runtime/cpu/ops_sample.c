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

/* The token of one row; *margin gets its decision margin. */
static int32_t sample_row(const float *x, int64_t V, float t, uint32_t seed, uint32_t pos,
                          float *margin) {
  const int greedy = !(t > 0.0f);
  int64_t best = 0;
  float bv = 0.0f, second = -INFINITY;
  int found = 0;
  for (int64_t v = 0; v < V; v++) {
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
                           (uint32_t)j->pos[r], &j->margin[r]);
}

H3_CPU_KERNEL(h3cpu_sample_tokens) {
  (void)op, (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  sample_job j = {in[0].data, in[1].data, in[2].data, in[3].data, out[0].data, out[1].data,
                  xt->dims[1]};
  h3cpu_parallel(c->pool, xt->dims[0], sample_range, &j);
  return H3_OK;
}
