/* test_model.c: the tiny MiniMax-H3 model (models/minimax_h3.g) on the CPU backend with
 * and without attention-v-view, at the exact and lossless tiers.
 *   - the pass finds the attention of the trunk block (graph `step`) and the text
 *     refiner's (graph `text`): every attention there reads v through v_view and no
 *     reshape/slice feeds it; without the pass none has a v_view;
 *   - at each tier, `step` and the whole `sample` program (49 Euler steps) are bitwise
 *     equal to the same pipeline with the pass disabled (outputs not all zero).
 * Usage: vview_model_test.
 */
#include "../common/case_data.h"
#include "../common/check.h"
#include "../common/tiny_h3.h"

#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int viewed, plain;
} counts;

static int count_op(h3_op *op, void *ctx) {
  counts *c = ctx;
  if (op->code != H3_OP_ATTENTION) return 0;
  if (h3_op_attr(op, "v_view")) c->viewed++;
  else c->plain++;
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
  printf("%s %s: v view == copied slice, bitwise\n", tier, name);
}

int main(void) {
  const h3_tier tiers[2] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int k = 0; k < 2; k++) {
    const char *tn = h3_tier_name(tiers[k]);
    h3_module *viewed = tiny_h3_compile(tiers[k], NULL);
    h3_module *plain = tiny_h3_compile(tiers[k], "attention-v-view");
    CHECK(viewed && plain, "%s: compiling the tiny model", tn);
    if (viewed && plain) {
      const char *graphs[2] = {"step", "text"};
      for (int i = 0; i < 2; i++) {
        counts v = count_graph(viewed, graphs[i]), p = count_graph(plain, graphs[i]);
        CHECK(v.viewed == 1 && v.plain == 0, "%s %s: %d attention with v_view, %d without "
              "(want 1, 0)", tn, graphs[i], v.viewed, v.plain);
        CHECK(p.viewed == 0 && p.plain == 1, "%s %s without the pass: %d with v_view, %d "
              "without (want 0, 1)", tn, graphs[i], p.viewed, p.plain);
      }
      compare(viewed, plain, "step", tn);
      compare(viewed, plain, "sample", tn);
    }
    h3_module_free(viewed);
    h3_module_free(plain);
  }
  return check_summary("vview_model");
}
