/* test_model.c: the tiny MiniMax-H3 model (models/minimax_h3.g) on the CPU backend with
 * and without qk-norm-rope-fusion, at the exact and lossless tiers.
 *   - the pass finds the two sites of the trunk block (q and k: one rms_norm_rope each, no
 *     rope and no per-head rms_norm left in `step`); the text refiner's q/k norms have no
 *     rope and stay rms_norm;
 *   - at each tier, `step` is bitwise equal to the same pipeline with the pass disabled;
 *     at exact, the whole `sample` program (49 Euler steps) is too.
 * Usage: qkrope_model_test.
 */
#include "../common/tiny_h3.h"
#include "qk_test.h"

#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"


typedef struct {
  int fused, rope, rms_norm;
} counts;

static int count_op(h3_op *op, void *ctx) {
  counts *c = ctx;
  c->fused += op->code == H3_OP_RMS_NORM_ROPE;
  c->rope += op->code == H3_OP_ROPE;
  c->rms_norm += op->code == H3_OP_RMS_NORM;
  return 0;
}

static counts count_graph(const h3_module *m, const char *name) {
  counts c = {0};
  h3_graph *g = h3_module_graph(m, name);
  if (g) h3_region_walk(&g->body, count_op, &c);
  return c;
}

/* Runs graph `name` of m (random weights, default inputs); out gets its outputs. */
static bool run(const h3_module *m, const char *name, h3_host_tensor *out) {
  h3_diag d;
  h3_diag_init(&d);
  const h3_graph *g = h3_module_graph(m, name);
  h3_backend_options bo = {2, 33};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  h3_weights *w = b ? h3_weights_random(m, 33, &d) : NULL;
  h3_runtime *rt = w ? h3_runtime_new(m, b, w, NULL, &d) : NULL;
  h3_host_tensor *in = g ? calloc((size_t)g->n_inputs + 1, sizeof *in) : NULL;
  h3_input_defaults defs = {5, 0};
  bool ok = rt && in && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK &&
            h3_runtime_run(rt, g, in, out, &d) == H3_OK;
  if (!ok) h3_diag_print(&d, stderr);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  return ok;
}

static void outputs_free(h3_host_tensor *o, int n) {
  for (int i = 0; i < n; i++) free(o[i].data);
}

/* `name` of the fused and the unfused module: bitwise equal outputs (2 of them). */
static void compare(const h3_module *fused, const h3_module *unfused, const char *name,
                    const char *tier) {
  h3_host_tensor a[2], b[2];
  bool ok = run(fused, name, a) && run(unfused, name, b);
  CHECK(ok, "%s %s: running", tier, name);
  if (!ok) return;
  for (int i = 0; i < 2; i++) {
    CHECK(a[i].bytes == b[i].bytes && memcmp(a[i].data, b[i].data, a[i].bytes) == 0,
          "%s %s output %s: the fused plan differs from the plan without the pass", tier, name,
          a[i].name);
    bool nonzero = false;
    for (size_t k = 0; k < a[i].bytes && !nonzero; k++) nonzero = ((unsigned char *)a[i].data)[k];
    CHECK(nonzero, "%s %s output %s is all zero", tier, name, a[i].name);
  }
  printf("%s %s: fused == unfused, bitwise\n", tier, name);
  outputs_free(a, 2), outputs_free(b, 2);
}

int main(void) {
  const h3_tier tiers[2] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int k = 0; k < 2; k++) {
    const char *tn = h3_tier_name(tiers[k]);
    h3_module *fused = tiny_h3_compile(tiers[k], NULL), *unfused = tiny_h3_compile(tiers[k], "qk-norm-rope-fusion");
    CHECK(fused && unfused, "%s: compiling the tiny model", tn);
    if (fused && unfused) {
      counts s = count_graph(fused, "step"), u = count_graph(unfused, "step");
      counts t = count_graph(fused, "text");
      CHECK(s.fused == 2 && s.rope == 0 && s.rms_norm == 0,
            "%s step: %d rms_norm_rope, %d rope, %d rms_norm (want 2, 0, 0)", tn, s.fused, s.rope,
            s.rms_norm);
      CHECK(u.fused == 0 && u.rope == 2, "%s unfused step: %d rms_norm_rope, %d rope", tn, u.fused,
            u.rope);
      CHECK(t.fused == 0 && t.rms_norm > 0, "%s text graph: %d rms_norm_rope, %d rms_norm", tn,
            t.fused, t.rms_norm);
      compare(fused, unfused, "step", tn);
      if (tiers[k] == H3_TIER_EXACT) compare(fused, unfused, "sample", tn);
    }
    h3_module_free(fused);
    h3_module_free(unfused);
  }
  return check_summary("qkrope_model");
}
