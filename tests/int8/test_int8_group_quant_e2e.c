/* test_int8_group_quant_e2e.c: the int8-fuse-group-quant pass end to end on the CPU
 * backend, on the small H3 of int8_e2e.h (widths 256, one block) (docs/int8.md, section `int8-fuse-group-quant`):
 *   - IR: with --int8=rotate=0 the SwiGLU group of the step graph's block and of the text
 *     refiner ends in quantize_rows and yields (q, s); no standalone quantizer of a fused
 *     group's output is left; with rotate=256 nothing is fused;
 *   - bitwise: `step`, `text` and `sample` with and without the pass are equal, at the
 *     exact and lossless tiers, rotate 0 and 256 (with row chunks), with the other --int8
 *     passes on (the quantizer reads g rounded to bf16 in every tier).
 */
#include "int8_e2e.h"

#define BASE "int8-lowering,row-split,int8-fuse-quant,int8-dequant-split"
#define WITH BASE ",int8-fuse-group-quant"

typedef struct {
  int fused_quant, standalone_on_group;
} census;

static int count_op(h3_op *op, void *arg) {
  census *c = arg;
  if (op->code == H3_OP_QUANTIZE_ROWS) {
    bool in_group = case_in_group(op);
    const h3_value *g = op->operands[0];
    if (in_group) c->fused_quant++;
    else if (g->kind == H3_VALUE_RESULT && g->def && g->def->code == H3_OP_FUSED)
      c->standalone_on_group++;
  }
  return 0;
}

static census count(const h3_module *m, const char *graph) {
  census c = {0};
  case_walk_graph(m, graph, count_op, &c);
  return c;
}

static void test_ir(const char *int8, int want) {
  h3_module *a = small_h3(int8, H3_TIER_LOSSLESS, BASE), *b = small_h3(int8, H3_TIER_LOSSLESS, WITH);
  CHECK(a && b, "compile --int8=%s", int8);
  if (a && b) {
    census sa = count(a, "step"), sb = count(b, "step"), ta = count(a, "text"), tb = count(b, "text");
    printf("  --int8=%s: quantizers of group outputs: step %d -> %d fused, %d left; text %d -> "
           "%d fused, %d left\n", int8, sa.standalone_on_group, sb.fused_quant,
           sb.standalone_on_group, ta.standalone_on_group, tb.fused_quant, tb.standalone_on_group);
    CHECK(sa.standalone_on_group == 1 && ta.standalone_on_group == 1,
          "unfused: step %d, text %d quantizers of group outputs (want the SwiGLU's 1 each)",
          sa.standalone_on_group, ta.standalone_on_group);
    CHECK(sb.fused_quant == want && tb.fused_quant == want, "fused: step %d, text %d (want %d)",
          sb.fused_quant, tb.fused_quant, want);
    CHECK(sb.standalone_on_group == 1 - want && tb.standalone_on_group == 1 - want,
          "left: step %d, text %d", sb.standalone_on_group, tb.standalone_on_group);
  }
  h3_module_free(a);
  h3_module_free(b);
}

int main(void) {
  test_ir("rotate=0", 1);
  test_ir("rotate=256", 0);
  const char *variants[] = {"rotate=0", "rotate=256,max_rows=24,min_split_n=0"};
  h3_tier tiers[] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int t = 0; t < 2; t++)
    for (int v = 0; v < 2; v++) {
      same_graph(variants[v], tiers[t], BASE, WITH, "step");
      same_graph(variants[v], tiers[t], BASE, WITH, "text");
    }
  same_graph("rotate=0", H3_TIER_LOSSLESS, BASE, WITH, "sample");
  return check_summary("test_int8_group_quant_e2e");
}
