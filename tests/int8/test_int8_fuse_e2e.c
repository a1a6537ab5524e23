/* test_int8_fuse_e2e.c: the int8-fuse-quant pass end to end on the CPU backend, on the small
 * H3 of test_int8_e2e.c (widths 256, one block): the `step` graph with --int8=rotate=0 with
 * and without the pass, on the same random weights and inputs.
 *   - exact: the fused plan has norm_modulate ops with quantize = 1 and no standalone
 *     quantizer left on their outputs, and its outputs are bitwise equal to the unfused plan;
 *   - lossless: the fused quantizer codes the fp32 value before rounding; the relative L2
 *     of the outputs against the unfused lossless plan is reported and must be <= 1e-2;
 *   - rotate=256: nothing is fused (the quantizers stay standalone), outputs bitwise equal.
 */
#include "int8_e2e.h"

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
  h3_module *a = small_h3(int8, tier, "int8-lowering,row-split"),
            *b = small_h3(int8, tier, "int8-lowering,row-split,int8-fuse-quant");
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
