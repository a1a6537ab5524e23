/* test_models_run.c: both models, tiny configs, compiled by the front end and the pass
 * pipeline and run on the CPU backend through the runtime:
 *   - H3 `sample` (49 Euler steps, random weights, default inputs): finite, nonzero, the
 *     same bytes on a second run and with 1 thread instead of 2, within 30 s;
 *   - H3 `step` at --quality exact is bitwise equal to the unfused plan, and lossless is
 *     close to it (relative L2 < 1e-2);
 *   - M3.1 `generate` (greedy, 32 new tokens after a 20-token prompt, paged KV cache):
 *     every token equals the argmax of a `prefill` that recomputes the whole sequence
 *     (prompt + tokens so far) from empty caches;
 *   - M3.1 `generate_batch` (3 sequences, batched decode with a page table per row) equals
 *     `generate` of each prompt alone, token for token.
 * Usage: test_models_run [models-folder].
 */
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures, checks;
static const char *models_dir = H3_SOURCE_DIR "/models";

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Front end + pass pipeline. `passes` NULL: the default pipeline of `tier`. */
static h3_module *compile(const char *model, int n_sets, const h3_config_override *sets,
                          h3_tier tier, const char *passes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.g", models_dir, model);
  h3_frontend_options fo = {"tiny", n_sets, sets};
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(path, &fo, &d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  po.passes = passes;
  if (m && h3_pass_pipeline_run(m, &po, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) {
    h3_diag_print(&d, stderr);
    fprintf(stderr, "cannot compile %s\n", path);
    exit(1);
  }
  h3_diag_free(&d);
  return m;
}

typedef struct {
  h3_backend *b;
  h3_weights *w;
  h3_runtime *rt;
} runner;

static runner runner_new(const h3_module *m, int threads, uint64_t seed) {
  h3_diag d;
  h3_diag_init(&d);
  runner r = {0};
  h3_backend_options bo = {.threads = threads, .seed = seed};
  r.b = h3_backend_create("cpu", &bo, &d);
  r.w = r.b ? h3_weights_random(m, seed, &d) : NULL;
  r.rt = r.w ? h3_runtime_new(m, r.b, r.w, NULL, &d) : NULL;
  if (!r.rt) {
    h3_diag_print(&d, stderr);
    exit(1);
  }
  h3_diag_free(&d);
  return r;
}

static void runner_free(runner *r) {
  h3_runtime_free(r->rt);
  h3_weights_free(r->w);
  h3_backend_free(r->b);
}

/* Runs graph `name` with in (missing entries filled with defaults); out gets the outputs. */
static void run(runner *r, const h3_module *m, const char *name, h3_host_tensor *in,
                h3_host_tensor *out) {
  h3_diag d;
  h3_diag_init(&d);
  const h3_graph *g = h3_module_graph(m, name);
  h3_input_defaults defs = {5, 0};
  if (!g || h3_inputs_fill_defaults(m, g, in, &defs, &d) != H3_OK ||
      h3_runtime_run(r->rt, g, in, out, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    fprintf(stderr, "running '%s' failed\n", name);
    exit(1);
  }
  h3_diag_free(&d);
}

static h3_host_tensor *inputs_for(const h3_module *m, const char *name) {
  const h3_graph *g = h3_module_graph(m, name);
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  if (!in) exit(1);
  return in;
}

static void test_h3_sample(void) {
  h3_module *m = compile("minimax_h3", 0, NULL, H3_TIER_LOSSLESS, NULL);
  const h3_graph *g = h3_module_graph(m, "sample");
  runner r2 = runner_new(m, 2, 11), r1 = runner_new(m, 1, 11);
  h3_host_tensor *in = inputs_for(m, "sample"), a[2], b[2], c[2];
  double t0 = now();
  run(&r2, m, "sample", in, a);
  double wall = now() - t0;
  printf("h3 tiny sample: 49 steps in %.2f s (2 threads)\n", wall);
  CHECK(wall < 30.0, "sample took %.1f s (budget 30 s on 2 cores)", wall);
  run(&r2, m, "sample", in, b);
  run(&r1, m, "sample", in, c);
  for (int i = 0; i < g->n_outputs; i++) {
    CHECK(memcmp(a[i].data, b[i].data, a[i].bytes) == 0, "output %s differs between two runs",
          a[i].name);
    CHECK(memcmp(a[i].data, c[i].data, a[i].bytes) == 0, "output %s differs with 1 thread",
          a[i].name);
    int64_t n = (int64_t)(a[i].bytes / 4), bad = 0;
    double ss = 0;
    for (int64_t k = 0; k < n; k++) {
      float v = ((float *)a[i].data)[k];
      bad += !isfinite(v);
      ss += (double)v * v;
    }
    CHECK(bad == 0 && ss > 0, "output %s: %lld non-finite values, sum of squares %g", a[i].name,
          (long long)bad, ss);
  }
  const h3_op_stat *st = h3_runtime_op_stats(r1.rt);
  CHECK(st[H3_OP_TIMESTEP_EMBEDDING].count == 49,
        "timestep_embedding ran %lld times (once per step)",
        (long long)st[H3_OP_TIMESTEP_EMBEDDING].count);
  h3_host_tensors_free(in, g->n_inputs);
  for (int i = 0; i < g->n_outputs; i++) free(a[i].data), free(b[i].data), free(c[i].data);
  runner_free(&r2), runner_free(&r1);
  h3_module_free(m);
}

static double rel_l2(const h3_host_tensor *x, const h3_host_tensor *y) {
  double num = 0, den = 0;
  for (size_t k = 0; k < x->bytes / 4; k++) {
    double a = ((float *)x->data)[k], b = ((float *)y->data)[k];
    num += (a - b) * (a - b);
    den += b * b;
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static void test_h3_tiers(void) {
  h3_module *exact = compile("minimax_h3", 0, NULL, H3_TIER_EXACT, NULL);
  h3_module *unfused =
      compile("minimax_h3", 0, NULL, H3_TIER_EXACT, "verify,dce,memory-plan,verify");
  h3_module *lossless = compile("minimax_h3", 0, NULL, H3_TIER_LOSSLESS, NULL);
  h3_module *mods[3] = {exact, unfused, lossless};
  h3_host_tensor out[3][2];
  for (int k = 0; k < 3; k++) {
    runner r = runner_new(mods[k], 2, 21);
    h3_host_tensor *in = inputs_for(mods[k], "step");
    run(&r, mods[k], "step", in, out[k]);
    h3_host_tensors_free(in, h3_module_graph(mods[k], "step")->n_inputs);
    runner_free(&r);
  }
  for (int i = 0; i < 2; i++) {
    CHECK(memcmp(out[0][i].data, out[1][i].data, out[0][i].bytes) == 0,
          "exact-tier %s is not bitwise equal to the unfused plan", out[0][i].name);
    double e = rel_l2(&out[2][i], &out[1][i]);
    CHECK(e < 1e-2, "lossless %s: relative L2 %g against exact", out[2][i].name, e);
  }
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 2; i++) free(out[k][i].data);
    h3_module_free(mods[k]);
  }
}

static int32_t argmax_row(const float *v, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = (int32_t)i;
  return best;
}

static void test_m31_generate(void) {
  const int P = 20, N = 32;
  h3_config_override sets[2] = {{"max_new_tokens", N}, {"prompt_len", P}};
  h3_module *m = compile("minimax_m3_1", 2, sets, H3_TIER_LOSSLESS, NULL);
  runner r = runner_new(m, 2, 31);
  h3_host_tensor *in = inputs_for(m, "generate"), out[1];
  run(&r, m, "generate", in, out);
  const int32_t *prompt = in[0].data, *tok = out[0].data;
  CHECK(out[0].bytes == (size_t)N * 4, "generated %zu bytes", out[0].bytes);
  int32_t seq[64];
  memcpy(seq, prompt, (size_t)P * 4);
  memcpy(seq + P, tok, (size_t)N * 4);
  runner_free(&r);
  /* recompute: prefill over prompt + tokens[0..n) from empty caches gives token n */
  int mismatches = 0;
  for (int n = 0; n < N; n++) {
    h3_config_override s2[2] = {{"max_new_tokens", N}, {"prompt_len", P + n}};
    h3_module *mp = compile("minimax_m3_1", 2, s2, H3_TIER_LOSSLESS, NULL);
    runner rp = runner_new(mp, 2, 31);
    const h3_graph *g = h3_module_graph(mp, "prefill");
    h3_host_tensor *pin = inputs_for(mp, "prefill"), pout[8];
    for (int i = 0; i < g->n_inputs; i++) {
      pin[i].name = g->inputs[i]->name;
      pin[i].type = g->inputs[i]->type;
      pin[i].bytes = (size_t)h3_type_bytes(&pin[i].type);
      pin[i].data = calloc(1, pin[i].bytes + 8); /* tokens, pos0 = 0, empty caches */
      if (!pin[i].data) exit(1);
      if (strcmp(pin[i].name, "tokens") == 0) memcpy(pin[i].data, seq, (size_t)(P + n) * 4);
    }
    run(&rp, mp, "prefill", pin, pout);
    int32_t want = argmax_row(pout[0].data, (int64_t)(pout[0].bytes / 4));
    if (want != tok[n]) mismatches++;
    CHECK(want == tok[n], "token %d: KV-cache decode gave %d, recompute gives %d", n, tok[n], want);
    for (int i = 0; i < g->n_outputs; i++) free(pout[i].data);
    h3_host_tensors_free(pin, g->n_inputs);
    runner_free(&rp);
    h3_module_free(mp);
  }
  printf("m3.1 tiny generate: %d tokens, %d mismatches against recompute\n", N, mismatches);
  h3_host_tensors_free(in, 1);
  free(out[0].data);
  h3_module_free(m);
}

/* generate_batch over 3 sequences (one decode_batch step: rows of different sequences, each
 * with its own page table) equals `generate` of each prompt alone, token for token (the CPU
 * backend is batch-invariant). */
static void test_m31_generate_batch(void) {
  const int P = 20, N = 12, B = 3;
  h3_config_override sets[3] = {{"max_new_tokens", N}, {"prompt_len", P}, {"seqs", B}};
  h3_module *m = compile("minimax_m3_1", 3, sets, H3_TIER_LOSSLESS, NULL);
  runner r = runner_new(m, 2, 31);
  h3_host_tensor *in = inputs_for(m, "generate_batch"), out[1];
  run(&r, m, "generate_batch", in, out);
  CHECK(out[0].bytes == (size_t)N * B * 4, "generated %zu bytes", out[0].bytes);
  const int32_t *prompts = in[0].data, *tok = out[0].data; /* tok[k, b] */
  int mismatches = 0;
  for (int b = 0; b < B; b++) {
    h3_host_tensor *one = inputs_for(m, "generate"), o1[1];
    const h3_graph *g = h3_module_graph(m, "generate");
    one[0].name = g->inputs[0]->name;
    one[0].type = g->inputs[0]->type;
    one[0].bytes = (size_t)P * 4;
    one[0].data = malloc(one[0].bytes);
    if (!one[0].data) exit(1);
    memcpy(one[0].data, prompts + b * P, (size_t)P * 4);
    run(&r, m, "generate", one, o1);
    const int32_t *want = o1[0].data;
    for (int k = 0; k < N; k++) mismatches += want[k] != tok[k * B + b];
    h3_host_tensors_free(one, 1);
    free(o1[0].data);
  }
  CHECK(mismatches == 0, "%d of %d batched tokens differ from the single-sequence ones", mismatches, N * B);
  printf("m3.1 tiny generate_batch: %d sequences x %d tokens, %d differ from generate\n", B, N, mismatches);
  h3_host_tensors_free(in, 1);
  free(out[0].data);
  runner_free(&r);
  h3_module_free(m);
}

int main(int argc, char **argv) {
  if (argc > 1) models_dir = argv[1];
  test_h3_sample();
  test_h3_tiers();
  test_m31_generate();
  test_m31_generate_batch();
  if (failures) {
    fprintf(stderr, "test_models_run: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_models_run: %d checks passed\n", checks);
  return 0;
}
