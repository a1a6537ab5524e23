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
  case_walk_graph(m, name, count_op, &c);
  return c;
}

/* `name` of the two modules: bitwise equal outputs, not all zero. */
static void compare(const h3_module *with, const h3_module *without, const char *name,
                    const char *tier) {
  CHECK(tiny_h3_differences(with, without, name, tier) == 0,
        "%s %s: the plan with the pass differs from the plan without it", tier, name);
  printf("%s %s: fused == unfused, bitwise\n", tier, name);
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
