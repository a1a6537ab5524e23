/* test_int8_e2e.c: --int8 end to end on the CPU backend, on a small H3: the tiny config
 * with the widths raised to multiples of 256 (dim 256, 2 heads of 128, ffn 256, text_dim
 * 256) so that the lowering rule applies, and one block (layers 1).
 *   - the `step` graph compiled with the default pipeline and with --int8 (rotate 0 and
 *     256), per tier (exact, lossless), on the same random weights and inputs: the
 *     relative L2 of both velocity outputs against bf16 of the same tier is reported and
 *     must be <= 5e-2;
 *   - weights are quantized at load: the runtime holds bf16 - lowered bf16 + int8 + scales;
 *   - row splitting is bitwise neutral: --int8=max_rows=16,min_split_n=1 (every GEMM of 64
 *     rows in 4 chunks, the text graph's 8-row GEMMs unsplit) equals max_rows=0, and so
 *     does the split plan after H3_INT8_MAX_ROWS-style re-chunking to 0 and to 24 (a
 *     remainder chunk);
 *   - the `sample` program (4 steps) with --int8=rotate=256 runs to the end; its relative
 *     L2 against bf16 is reported.
 */
#include "h3/frontend.h"
#include "h3/int8.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;
#define CHECK(cond, ...)                                                                 \
  do {                                                                                   \
    checks++;                                                                            \
    if (!(cond)) {                                                                       \
      failures++;                                                                        \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
    }                                                                                    \
  } while (0)

static h3_config_override sets[] = {{"dim", 256},  {"heads", 2},          {"head_dim", 128},
                                    {"ffn", 256},  {"text_dim", 256},     {"layers", 1},
                                    {"steps", 4}};

/* The small H3 after the pipeline of `tier`, with --int8=int8 when int8 is not NULL. */
static h3_module *compile_tier(const char *int8, h3_tier tier) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {"tiny", (int)(sizeof sets / sizeof sets[0]), sets};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = int8;
  o.enable = int8 ? "int8-lowering,row-split" : NULL;
  if (m && h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

static h3_module *compile(const char *int8) { return compile_tier(int8, H3_TIER_EXACT); }

typedef struct {
  h3_host_tensor *out;
  int n;
  size_t weight_bytes;
} run_result;

/* Runs graph `name` of m on the CPU with random weights (seed 7) and default inputs. */
static run_result run(const h3_module *m, const char *name) {
  run_result r = {0};
  h3_diag d;
  h3_diag_init(&d);
  const h3_graph *g = h3_module_graph(m, name);
  h3_backend_options bo = {2, 7};
  h3_backend *b = h3_backend_cpu_new(&bo, &d);
  h3_weights *w = h3_weights_random(m, 7, &d);
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  h3_input_defaults defs = {7, 0};
  h3_runtime *rt = NULL;
  if (b && w && in && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK)
    rt = h3_runtime_new(m, b, w, NULL, &d);
  r.out = calloc((size_t)g->n_outputs + 1, sizeof *r.out);
  if (rt && r.out && h3_runtime_run(rt, g, in, r.out, &d) == H3_OK) {
    r.n = g->n_outputs;
    r.weight_bytes = h3_runtime_weight_bytes(rt);
  }
  if (!r.n) h3_diag_print(&d, stderr);
  CHECK(r.n > 0, "running '%s' failed", name);
  h3_runtime_free(rt);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  return r;
}

static void result_free(run_result *r, const h3_module *m, const char *name) {
  if (r->out) h3_host_tensors_free(r->out, h3_module_graph(m, name)->n_outputs);
  r->out = NULL;
}

/* Relative L2 of output i of a against b (f32 outputs). */
static double rel_l2(const run_result *a, const run_result *b, int i) {
  const float *x = a->out[i].data, *y = b->out[i].data;
  int64_t n = h3_type_numel(&a->out[i].type);
  double num = 0, den = 0;
  for (int64_t k = 0; k < n; k++) {
    num += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
    den += (double)y[k] * y[k];
  }
  return den > 0 ? sqrt(num / den) : INFINITY;
}

static bool same_bits(const run_result *a, const run_result *b) {
  if (!a->n || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->out[i].bytes != b->out[i].bytes || memcmp(a->out[i].data, b->out[i].data, a->out[i].bytes))
      return false;
  return true;
}

static void test_step_accuracy(h3_tier tier) {
  h3_module *ref_m = compile_tier(NULL, tier);
  CHECK(ref_m != NULL, "bf16 compile");
  if (!ref_m) return;
  run_result ref = run(ref_m, "step");
  const char *variants[] = {"rotate=0", "rotate=256"};
  for (int v = 0; v < 2 && ref.n; v++) {
    h3_module *m = compile_tier(variants[v], tier);
    CHECK(m != NULL, "int8 compile (%s)", variants[v]);
    if (!m) continue;
    h3_int8_summary s;
    h3_int8_summarize(m, &s);
    CHECK(s.n_gemms == 9 && s.n_layers == 9, "small H3 lowers 9 layers (5 text + 4 step), got %lld",
          (long long)s.n_layers);
    run_result r = run(m, "step");
    if (r.n) {
      double ev = rel_l2(&r, &ref, 0), ea = rel_l2(&r, &ref, 1);
      printf("  step, one block, --quality %s --int8=%s: relative L2 vs bf16: v_video %.3e, "
             "v_audio %.3e\n", h3_tier_name(tier), variants[v], ev, ea);
      CHECK(ev <= 5e-2 && ea <= 5e-2, "relative L2 %g / %g above 5e-2", ev, ea);
      size_t want = ref.weight_bytes - (size_t)s.bf16_bytes + (size_t)(s.int8_bytes + s.scale_bytes);
      CHECK(r.weight_bytes == want, "runtime weight bytes %zu, want %zu (bf16 lowered layers released)",
            r.weight_bytes, want);
    }
    result_free(&r, m, "step");
    h3_module_free(m);
  }
  result_free(&ref, ref_m, "step");
  h3_module_free(ref_m);
}

static void test_split_neutral(void) {
  h3_module *plain = compile("max_rows=0"), *split = compile("max_rows=16,min_split_n=1");
  CHECK(plain && split, "compile");
  if (!plain || !split) return;
  h3_int8_summary s0, s1;
  h3_int8_summarize(plain, &s0);
  h3_int8_summarize(split, &s1);
  CHECK(s0.n_split == 0 && s1.n_split == 4, "splits: %d unsplit plan, %d split plan (want 0, 4)",
        s0.n_split, s1.n_split);
  run_result a = run(plain, "step"), b = run(split, "step");
  CHECK(same_bits(&a, &b), "row chunks of 16 change the step's outputs");
  h3_int8_set_max_rows(split, 24); /* 64 rows: 2 x 24 + 16 */
  run_result c = run(split, "step");
  CHECK(same_bits(&a, &c), "row chunks of 24 (with a remainder) change the step's outputs");
  h3_int8_set_max_rows(split, 0);
  h3_int8_summarize(split, &s1);
  CHECK(s1.n_split == 0, "max_rows 0 leaves %d GEMMs split", s1.n_split);
  run_result e = run(split, "step");
  CHECK(same_bits(&a, &e), "re-chunked to 0: outputs differ");
  result_free(&a, plain, "step");
  result_free(&b, split, "step");
  result_free(&c, split, "step");
  result_free(&e, split, "step");
  h3_module_free(plain);
  h3_module_free(split);
}

static void test_sample(void) {
  h3_module *ref_m = compile(NULL), *m = compile("rotate=256");
  CHECK(ref_m && m, "compile");
  if (ref_m && m) {
    run_result ref = run(ref_m, "sample"), r = run(m, "sample");
    if (ref.n && r.n) {
      double ev = rel_l2(&r, &ref, 0), ea = rel_l2(&r, &ref, 1);
      printf("  sample (4 steps, text + 1 block), --int8=rotate=256: relative L2 vs bf16: video "
             "%.3e, audio %.3e\n", ev, ea);
      CHECK(isfinite(ev) && isfinite(ea), "non-finite outputs");
    }
    result_free(&ref, ref_m, "sample");
    result_free(&r, m, "sample");
  }
  h3_module_free(ref_m);
  h3_module_free(m);
}

int main(void) {
  test_step_accuracy(H3_TIER_EXACT);
  test_step_accuracy(H3_TIER_LOSSLESS);
  test_split_neutral();
  test_sample();
  if (failures) {
    fprintf(stderr, "test_int8_e2e: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_int8_e2e: %d checks passed\n", checks);
  return 0;
}
