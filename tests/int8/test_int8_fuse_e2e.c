/* test_int8_fuse_e2e.c: the int8-fuse-quant pass end to end on the CPU backend, on the small
 * H3 of test_int8_e2e.c (widths 256, one block): the `step` graph with --int8=rotate=0 with
 * and without the pass, on the same random weights and inputs.
 *   - exact: the fused plan has norm_modulate ops with quantize = 1 and no standalone
 *     quantizer left on their outputs, and its outputs are bitwise equal to the unfused plan;
 *   - lossless: the fused quantizer codes the fp32 value before rounding; the relative L2
 *     of the outputs against the unfused lossless plan is reported and must be <= 1e-2;
 *   - rotate=256: nothing is fused (the quantizers stay standalone), outputs bitwise equal.
 * And the full H3 with the passes h3c --int8 enables (int8-lowering, row-split,
 * int8-fuse-quant, int8-dequant-split) at the exact and lossless tiers: in the step graph's
 * trunk the qkv input (Plan A) and the fc1 input (Plan B) are quantized by their norm
 * kernels, only the out_proj and fc2 inputs keep a standalone quantize_rows, and the CUDA
 * kernels of the fused ops are emitted without the store of their unused y.
 */
#include "int8_e2e.h"

#include "h3/codegen.h"
#include "h3/op_registry.h"

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

typedef struct {
  int fused_a, fused_b, standalone, emitted, stores_y;
  h3_tier tier;
  h3_arena *a;
} trunk_count;

/* Counts the fused norm ops and the activation quantizers inside loops (the block trunks)
 * and emits each fused op's kernel. */
static int count_trunk(h3_op *op, void *arg) {
  trunk_count *c = arg;
  const bool in_loop = op->parent && op->parent->parent && op->parent->parent->code == H3_OP_LOOP;
  if (!in_loop) return 0;
  if (op->code == H3_OP_QUANTIZE_ROWS && !h3_op_is_load_time(op)) c->standalone++;
  if ((op->code == H3_OP_NORM_MODULATE || op->code == H3_OP_RESIDUAL_NORM_MODULATE) &&
      h3_op_attr_int(op, "quantize", 0)) {
    if (op->code == H3_OP_NORM_MODULATE) c->fused_a++;
    else c->fused_b++;
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    if (h3_codegen_emit_op(op, c->tier, c->a, &k, &d) == H3_OK) {
      c->emitted++;
      c->stores_y += strstr(k.source, "(y, u * 8, yr)") != NULL;
    } else {
      h3_diag_print(&d, stderr);
    }
    h3_diag_free(&d);
  }
  return 0;
}

static void test_full_h3(h3_tier tier) {
  h3_frontend_options fo = {.config = "full"};
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = "";
  o.enable = "int8-lowering,row-split,int8-fuse-quant,int8-dequant-split"; /* part of H3_INT8_PASSES */
  h3_module *m = minimax_h3_load(&fo, &o);
  bool ok = m != NULL;
  CHECK(ok, "full H3 --int8 at %s", h3_tier_name(tier));
  if (ok) {
    h3_arena a;
    h3_arena_init(&a);
    trunk_count c = {0, 0, 0, 0, 0, tier, &a};
    case_walk_graph(m, "step", count_trunk, &c);
    printf("  full H3 --int8 --quality %s, step trunk: fused into norm kernels %d Plan A + %d "
           "Plan B; standalone activation quantizers %d; kernels emitted %d (y stored in %d)\n",
           h3_tier_name(c.tier), c.fused_a, c.fused_b, c.standalone, c.emitted, c.stores_y);
    CHECK(c.fused_a == 1 && c.fused_b == 1 && c.standalone == 2,
          "expected qkv (Plan A) and fc1 (Plan B) fused, out_proj and fc2 standalone");
    CHECK(c.emitted == 2 && c.stores_y == 0, "fused kernels: %d emitted, %d store y", c.emitted,
          c.stores_y);
    h3_arena_free(&a);
  }
  h3_module_free(m);
}

int main(void) {
  test_full_h3(H3_TIER_EXACT);
  test_full_h3(H3_TIER_LOSSLESS);
  test_tier(H3_TIER_EXACT, "rotate=0", true);
  test_tier(H3_TIER_LOSSLESS, "rotate=0", true);
  test_tier(H3_TIER_EXACT, "rotate=256", false);
  return check_summary("test_int8_fuse_e2e");
}
