/* test_model.c: side-streams on the two models, on the CPU backend (which runs the marked
 * ops in the plan's order, as the cuda backend does with H3_SIDE_STREAM=0).
 *   - M3.1 (models/minimax_m3_1.g): at the small config the pass branches each sparse layer
 *     of `decode` twice (the indexer joined by sparse_attention, the shared expert joined by
 *     the final add), at tiny once (the indexer) when kv-write-fusion is off (with it, the
 *     main work beside tiny's indexer is one launch fewer than the cost model's threshold:
 *     no branch); tiny's `decode` and whole `generate` program, compiled so, give bitwise the
 *     outputs of the plan compiled without side-streams (outputs not all zero);
 *   - tiny H3 (models/minimax_h3.g): `step` and the 49-step `sample` bitwise equal without
 *     the pass, at exact and lossless.
 * Usage: sidestream_model_test.
 */
#include "../common/case_data.h"
#include "../common/check.h"
#include "../common/tiny_h3.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int side, join;
  int side_ops_joined_by[2]; /* joins by sparse_attention, by a fused group */
} marks;

static int count_marks(h3_op *op, void *ctx) {
  marks *c = ctx;
  c->side += h3_op_attr_int(op, "side", 0) != 0;
  if (!h3_op_attr_int(op, "join", 0)) return 0;
  c->join++;
  if (op->code == H3_OP_SPARSE_ATTENTION) c->side_ops_joined_by[0]++;
  if (op->code == H3_OP_FUSED) c->side_ops_joined_by[1]++;
  return 0;
}

/* Where the pass branches `decode`: at the small config (every real width) each sparse
 * layer twice, the indexer joined by sparse_attention and the shared expert by the final add;
 * at tiny (launch-bound: below the cost model's threshold but for the indexer, and for it
 * only without kv-write-fusion) once; tiny: both plans compiled without kv-write-fusion. */
static const char *const TINY_OFF = "kv-write-fusion", *const TINY_OFF_SIDE = "kv-write-fusion,side-streams";

static void check_marks(const char *config, int want_fused_joins, bool tiny) {
  h3_module *with = m31_compile(config, tiny ? TINY_OFF : NULL);
  h3_module *without = m31_compile(config, tiny ? TINY_OFF_SIDE : "side-streams");
  CHECK(with && without, "m31 %s: compiling the model", config);
  if (with && without) {
    marks mw = {0}, mo = {0};
    case_walk_graph(with, "decode", count_marks, &mw);
    case_walk_graph(without, "decode", count_marks, &mo);
    CHECK(mw.side_ops_joined_by[0] == 1 && mw.side_ops_joined_by[1] == want_fused_joins && mw.side > 0,
          "m31 %s decode: %d side ops, %d joins by sparse_attention and %d by a fused group "
          "(want 1 and %d in the sparse layer's body)", config, mw.side, mw.side_ops_joined_by[0],
          mw.side_ops_joined_by[1], want_fused_joins);
    CHECK(mo.side == 0 && mo.join == 0, "m31 %s decode without the pass: %d side ops, %d joins",
          config, mo.side, mo.join);
  }
  h3_module_free(with);
  h3_module_free(without);
}

static void check_m31(void) {
  check_marks("small", 1, false);
  check_marks("tiny", 0, true);
  h3_module *with = m31_compile("tiny", TINY_OFF), *without = m31_compile("tiny", TINY_OFF_SIDE);
  CHECK(with && without, "m31: compiling the tiny model");
  const char *graphs[2] = {"decode", "generate"};
  for (int i = 0; with && without && i < 2; i++) {
    CHECK(tiny_h3_differences(with, without, graphs[i], "m31") == 0,
          "m31 %s: the plan with the pass differs from the plan without it", graphs[i]);
    printf("m31 %s: side streams == one stream, bitwise\n", graphs[i]);
  }
  h3_module_free(with);
  h3_module_free(without);
}

static void check_h3(void) {
  const h3_tier tiers[2] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int k = 0; k < 2; k++) {
    const char *tn = h3_tier_name(tiers[k]);
    h3_module *with = tiny_h3_compile(tiers[k], NULL);
    h3_module *without = tiny_h3_compile(tiers[k], "side-streams");
    CHECK(with && without, "h3 %s: compiling the tiny model", tn);
    if (with && without) {
      const char *graphs[2] = {"step", "sample"};
      for (int i = 0; i < 2; i++) {
        CHECK(tiny_h3_differences(with, without, graphs[i], tn) == 0,
              "h3 %s %s: the plan with the pass differs from the plan without it", tn, graphs[i]);
        printf("h3 %s %s: side streams == one stream, bitwise\n", tn, graphs[i]);
      }
    }
    h3_module_free(with);
    h3_module_free(without);
  }
}

int main(void) {
  check_m31();
  check_h3();
  return check_summary("sidestream_model");
}
