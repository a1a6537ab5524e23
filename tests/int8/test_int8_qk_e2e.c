/* test_int8_qk_e2e.c: int8-qk-norm-rope end to end on the CPU backend (docs/int8.md
 * section 9), on the small H3 of int8_e2e.h (one block, widths 256, 2 heads of 128):
 *   - the IR: in `step` both rms_norm_rope take the qkv int32 accumulators (int8 form, 6
 *     operands), attention reads a [T, 2, 128] v without v_view, and the only dequant_i8
 *     left outside groups is out_proj's (v's is a group of its column slice, [T, 256]);
 *   - bitwise: `step` and `text` compiled with and without the pass give identical outputs
 *     at --quality exact and lossless, for rotate 0 and for rotate 256 with row chunks of
 *     24, also with int8-fuse-quant on, and the 4-step `sample` program at exact.
 */
#include "int8_e2e.h"

#define SPLIT "int8-lowering,row-split,int8-dequant-split"
#define QK SPLIT ",int8-qk-norm-rope"

typedef struct {
  int norm_rope_i32, norm_rope_bf16, dequant_alone, v_views, v_group_cols;
} census;

static int count_op(h3_op *op, void *arg) {
  census *c = arg;
  bool in_group = case_in_group(op);
  if (op->code == H3_OP_RMS_NORM_ROPE) {
    if (op->n_operands == 6 && op->operands[0]->type.dtype == H3_I32) c->norm_rope_i32++;
    else c->norm_rope_bf16++;
  }
  if (op->code == H3_OP_DEQUANT_I8 && !in_group) c->dequant_alone++;
  if (op->code == H3_OP_DEQUANT_I8 && in_group && op->operands[0]->def &&
      op->operands[0]->def->code == H3_OP_SLICE && op->results[0]->type.rank == 2)
    c->v_group_cols = (int)op->results[0]->type.dims[1];
  if (op->code == H3_OP_ATTENTION && h3_op_attr(op, "v_view")) c->v_views++;
  return 0;
}

static census count(const h3_module *m, const char *graph) {
  census c = {0};
  case_walk_graph(m, graph, count_op, &c);
  return c;
}

static void test_ir(void) {
  h3_module *m = small_h3("rotate=0", H3_TIER_LOSSLESS, QK);
  CHECK(m != NULL, "compile");
  if (!m) return;
  census s = count(m, "step");
  CHECK(s.norm_rope_i32 == 2 && s.norm_rope_bf16 == 0,
        "step: %d int8-form rms_norm_rope, %d bf16-form (want 2, 0)", s.norm_rope_i32,
        s.norm_rope_bf16);
  CHECK(s.v_views == 0, "step: %d attention with v_view (want 0)", s.v_views);
  CHECK(s.dequant_alone == 1, "step: %d standalone dequant_i8 (want out_proj's only)",
        s.dequant_alone);
  CHECK(s.v_group_cols == 256, "step: v's dequant group has %d columns (want 2 x 128)",
        s.v_group_cols);
  h3_module_free(m);
  /* without the pass: the bf16 form and the v view (the baseline the bitwise test uses) */
  m = small_h3("rotate=0", H3_TIER_LOSSLESS, SPLIT);
  CHECK(m != NULL, "compile without the pass");
  if (!m) return;
  s = count(m, "step");
  CHECK(s.norm_rope_bf16 == 2 && s.v_views == 1 && s.dequant_alone == 2,
        "baseline step: %d bf16 rms_norm_rope, %d v views, %d standalone dequant_i8 (want 2, 1, 2)",
        s.norm_rope_bf16, s.v_views, s.dequant_alone);
  h3_module_free(m);
}

static void test_bitwise(void) {
  const char *variants[] = {"rotate=0", "rotate=256,max_rows=24,min_split_n=0"};
  h3_tier tiers[] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int t = 0; t < 2; t++)
    for (int v = 0; v < 2; v++) {
      same_graph(variants[v], tiers[t], SPLIT, QK, "step");
      same_graph(variants[v], tiers[t], SPLIT, QK, "text");
    }
  same_graph("rotate=0", H3_TIER_LOSSLESS, SPLIT ",int8-fuse-quant", QK ",int8-fuse-quant", "step");
  same_graph("rotate=256", H3_TIER_EXACT, SPLIT, QK, "sample");
}

int main(void) {
  test_ir();
  test_bitwise();
  return check_summary("test_int8_qk_e2e");
}
