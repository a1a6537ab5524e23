/* test_int8_fuse_e2e.c: the int8-fuse-quant pass end to end on the CPU backend, on the small
 * H3 of test_int8_e2e.c (widths 256, one block): the `step` graph with --int8=rotate=0 with
 * and without the pass, on the same random weights and inputs.
 *   - exact: the fused plan has norm_modulate ops with quantize = 1 and no standalone
 *     quantizer left on their outputs, and its outputs are bitwise equal to the unfused plan;
 *   - lossless: the fused quantizer codes the fp32 value before rounding; the relative L2
 *     of the outputs against the unfused lossless plan is reported and must be <= 1e-2;
 *   - rotate=256: nothing is fused (the quantizers stay standalone), outputs bitwise equal.
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

/* The small H3 after the pipeline of `tier` with --int8=int8, with or without int8-fuse-quant. */
static h3_module *compile_tier(const char *int8, h3_tier tier, bool fuse) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {"tiny", (int)(sizeof sets / sizeof sets[0]), sets};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = int8;
  o.enable = fuse ? "int8-lowering,row-split,int8-fuse-quant" : "int8-lowering,row-split";
  if (m && h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}


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

typedef struct {
  int fused, standalone;
} fuse_count;

static int count_op(h3_op *op, void *arg) {
  fuse_count *c = arg;
  if ((op->code == H3_OP_NORM_MODULATE || op->code == H3_OP_RESIDUAL_NORM_MODULATE) &&
      h3_op_attr_int(op, "quantize", 0))
    c->fused++;
  if (op->code == H3_OP_QUANTIZE_ROWS && op->operands[0]->kind == H3_VALUE_RESULT &&
      (op->operands[0]->def->code == H3_OP_NORM_MODULATE ||
       op->operands[0]->def->code == H3_OP_RESIDUAL_NORM_MODULATE))
    c->standalone++;
  return 0;
}

static fuse_count count(h3_module *m) {
  fuse_count c = {0, 0};
  h3_module_walk(m, count_op, &c);
  return c;
}

static void test_tier(h3_tier tier, const char *int8, bool expect_fused) {
  h3_module *a = compile_tier(int8, tier, false), *b = compile_tier(int8, tier, true);
  CHECK(a && b, "compile");
  if (a && b) {
    fuse_count ca = count(a), cb = count(b);
    printf("  --quality %s --int8=%s: unfused %d quantizers on norm outputs; fused %d ops, %d "
           "standalone left\n", h3_tier_name(tier), int8, ca.standalone, cb.fused, cb.standalone);
    if (expect_fused)
      CHECK(ca.standalone > 0 && cb.fused == ca.standalone && cb.standalone == 0,
            "fusion count: %d candidates, %d fused, %d left", ca.standalone, cb.fused,
            cb.standalone);
    else
      CHECK(cb.fused == 0 && cb.standalone == ca.standalone, "rotated quantizers must stay");
    run_result ra = run(a, "step"), rb = run(b, "step");
    if (ra.n && rb.n) {
      if (tier == H3_TIER_EXACT || !expect_fused) {
        CHECK(same_bits(&ra, &rb), "fused plan differs from the unfused plan");
      } else {
        double ev = rel_l2(&rb, &ra, 0), ea = rel_l2(&rb, &ra, 1);
        printf("  lossless fused vs unfused: relative L2 v_video %.3e, v_audio %.3e (identical "
               "bits: %s)\n", ev, ea, same_bits(&ra, &rb) ? "yes" : "no");
        CHECK(ev <= 1e-2 && ea <= 1e-2, "relative L2 %g / %g above 1e-2", ev, ea);
      }
    }
    result_free(&ra, a, "step");
    result_free(&rb, b, "step");
  }
  h3_module_free(a);
  h3_module_free(b);
}

int main(void) {
  test_tier(H3_TIER_EXACT, "rotate=0", true);
  test_tier(H3_TIER_LOSSLESS, "rotate=0", true);
  test_tier(H3_TIER_EXACT, "rotate=256", false);
  if (failures) {
    fprintf(stderr, "test_int8_fuse_e2e: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_int8_fuse_e2e: %d checks passed\n", checks);
  return 0;
}
