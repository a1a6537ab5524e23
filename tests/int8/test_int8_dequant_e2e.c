/* test_int8_dequant_e2e.c: int8-dequant-split end to end on the CPU backend (docs/int8.md
 * section 5), on the small H3 of int8_e2e.h (one block, widths 256):
 *   - the IR: no linear_int8 is left, 9 matmul_i8 (5 text + 4 step); in `step` the SwiGLU
 *     group holds fc1's two dequant_i8 (its bf16 output is never written), the gated
 *     residual group holds fc2's, and qkv and out_proj keep a standalone dequant_i8 (read
 *     by rms_norm_rope / attention's v view and by residual_norm_modulate);
 *   - bitwise: the `step` and `text` graphs compiled with and without int8-dequant-split
 *     give identical outputs at --quality exact and lossless, for rotate 0 and for
 *     rotate 256 with row chunks of 24 (64 rows: 2 x 24 + 16), also with int8-fuse-quant on
 *     (as h3c --int8 compiles), and the 4-step `sample` program at exact;
 *   - row chunks stay neutral on the split plan: H3_INT8_MAX_ROWS-style re-chunking of the
 *     matmul_i8 ops to 0 and 16 gives the same bits.
 */
#include "int8_e2e.h"

#define LOWER "int8-lowering,row-split"
#define SPLIT "int8-lowering,row-split,int8-dequant-split"

typedef struct {
  int linear_int8, matmul, dequant_alone, groups_with_dequant, dequant_in_groups, swiglu_dequant;
} census;

static int count_op(h3_op *op, void *arg) {
  census *c = arg;
  bool in_group = case_in_group(op);
  if (op->code == H3_OP_LINEAR_INT8) c->linear_int8++;
  if (op->code == H3_OP_MATMUL_I8) c->matmul++;
  if (op->code == H3_OP_DEQUANT_I8) {
    if (in_group) c->dequant_in_groups++;
    else c->dequant_alone++;
  }
  if (op->code == H3_OP_FUSED) {
    int n = 0;
    bool silu = false;
    for (const h3_op *o = op->regions[0].first; o; o = o->next) {
      n += o->code == H3_OP_DEQUANT_I8;
      silu |= o->code == H3_OP_SILU;
    }
    c->groups_with_dequant += n > 0;
    if (silu) c->swiglu_dequant = n;
  }
  return 0;
}

static census count(const h3_module *m, const char *graph) {
  census c = {0};
  case_walk_graph(m, graph, count_op, &c);
  return c;
}

static void test_ir(void) {
  h3_module *m = small_h3("rotate=0", H3_TIER_LOSSLESS, SPLIT);
  CHECK(m != NULL, "compile");
  if (!m) return;
  census t = count(m, "text"), s = count(m, "step");
  CHECK(t.linear_int8 + s.linear_int8 == 0, "linear_int8 left: %d", t.linear_int8 + s.linear_int8);
  CHECK(t.matmul == 5 && s.matmul == 4, "matmul_i8: text %d (want 5), step %d (want 4)", t.matmul,
        s.matmul);
  CHECK(s.swiglu_dequant == 2, "the SwiGLU group holds %d dequant_i8 (want fc1's 2)", s.swiglu_dequant);
  CHECK(s.groups_with_dequant == 2 && s.dequant_in_groups == 3,
        "step: %d groups with %d dequant_i8 (want SwiGLU 2 + gated residual 1)",
        s.groups_with_dequant, s.dequant_in_groups);
  CHECK(s.dequant_alone == 2, "step: %d standalone dequant_i8 (want qkv and out_proj)",
        s.dequant_alone);
  h3_int8_summary sum;
  h3_int8_summarize(m, &sum);
  CHECK(sum.n_gemms == 9, "summary counts %d int8 GEMMs", sum.n_gemms);
  h3_module_free(m);
}

static void test_bitwise(void) {
  const char *variants[] = {"rotate=0", "rotate=256,max_rows=24,min_split_n=0"};
  h3_tier tiers[] = {H3_TIER_EXACT, H3_TIER_LOSSLESS};
  for (int t = 0; t < 2; t++)
    for (int v = 0; v < 2; v++) {
      same_graph(variants[v], tiers[t], LOWER, SPLIT, "step");
      same_graph(variants[v], tiers[t], LOWER, SPLIT, "text");
    }
  same_graph("rotate=256", H3_TIER_LOSSLESS, LOWER ",int8-fuse-quant",
             LOWER ",int8-fuse-quant,int8-dequant-split", "step");
  same_graph("rotate=256", H3_TIER_EXACT, LOWER, SPLIT, "sample");
}

static void test_rechunk(void) {
  h3_module *m = small_h3("max_rows=24,min_split_n=0", H3_TIER_EXACT, SPLIT);
  CHECK(m != NULL, "compile");
  if (!m) return;
  h3_int8_summary s;
  h3_int8_summarize(m, &s);
  CHECK(s.n_split == 4, "%d matmul_i8 split (want the 4 step GEMMs of 64 rows)", s.n_split);
  run_result a = run(m, "step");
  h3_int8_set_max_rows(m, 16);
  run_result b = run(m, "step");
  h3_int8_set_max_rows(m, 0);
  h3_int8_summarize(m, &s);
  CHECK(s.n_split == 0, "re-chunked to 0: %d still split", s.n_split);
  run_result c = run(m, "step");
  CHECK(same_bits(&a, &b) && same_bits(&a, &c), "matmul_i8 chunks of 24, 16, none differ");
  result_free(&a, m, "step");
  result_free(&b, m, "step");
  result_free(&c, m, "step");
  h3_module_free(m);
}

int main(void) {
  test_ir();
  test_bitwise();
  test_rechunk();
  return check_summary("test_int8_dequant_e2e");
}
