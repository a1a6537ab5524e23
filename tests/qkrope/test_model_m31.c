/* test_model_m31.c: MiniMax-M3.1 (models/minimax_m3_1.g) with kv-write-fusion and
 * add-norm-fusion against the same pipeline without them.
 *   - tiny on the CPU backend: `prefill`, `decode` and `verify` bitwise equal with and
 *     without the two passes (same weights, same inputs, random caches);
 *   - tiny and small: what the passes leave in `decode`: no kv_write; per layer body one
 *     rms_norm_rope_write with v and q (8 operands), per sparse body one more for the
 *     indexer's k (6 operands); one add_rms_norm per layer body;
 *   - tiny and small: every in-place result of an rms_norm_rope_write in every graph sits
 *     on its operand's buffer (the memory plan joined it: no cache copied per step).
 * Usage: qkrope_model_m31_test.
 */
#include "../common/tiny_h3.h"
#include "qk_test.h"

typedef struct {
  int kv_write, write6, write7, write8, add_norm, unjoined;
} m31_counts;

static int count_op(h3_op *op, void *ctx) {
  m31_counts *c = ctx;
  c->kv_write += op->code == H3_OP_KV_WRITE;
  c->add_norm += op->code == H3_OP_ADD_RMS_NORM;
  if (op->code != H3_OP_RMS_NORM_ROPE_WRITE) return 0;
  c->write6 += op->n_operands == 6;
  c->write7 += op->n_operands == 7;
  c->write8 += op->n_operands == 8;
  /* the caches: result 0 over operand 0, result 1 (with v) over operand 6 (the v cache) */
  for (int r = 0; r < (op->n_operands >= 7 ? 2 : 1); r++) {
    const h3_value *x = op->operands[r ? 6 : 0]; /* a graph input (a draft cache) or a view */
    const int64_t at = x->kind == H3_VALUE_INPUT ? h3_offset_of_input(x->index) : x->offset;
    c->unjoined += op->results[r]->offset != at;
  }
  return 0;
}

/* The decode graph's ops after the passes, and the joins of every graph's writes. */
static void check_shape(const h3_module *m, const char *config, int sparse) {
  m31_counts dec = {0}, all = {0};
  case_walk_graph(m, "decode", count_op, &dec);
  for (int g = 0; g < m->n_graphs; g++) case_walk_graph(m, m->graphs[g]->name, count_op, &all);
  CHECK(dec.kv_write == 0 && dec.write8 == (sparse ? 2 : 1) && dec.write6 == (sparse ? 1 : 0) &&
            dec.write7 == 0 && dec.add_norm == (sparse ? 2 : 1),
        "%s decode: %d kv_write, %d / %d / %d rms_norm_rope_write of 8 / 7 / 6 operands, %d "
        "add_rms_norm (want 0, %d / 0 / %d, %d: one loop body per kind of layer)",
        config, dec.kv_write, dec.write8, dec.write7, dec.write6, dec.add_norm, sparse ? 2 : 1,
        sparse ? 1 : 0, sparse ? 2 : 1);
  CHECK(all.unjoined == 0, "%s: %d in-place results of rms_norm_rope_write off their operand's buffer",
        config, all.unjoined);
  printf("%s: decode holds %d fused cache writes with v and q, %d indexer writes; every write "
         "in place (%d writes in all graphs)\n",
         config, dec.write8, dec.write6, all.write6 + all.write7 + all.write8);
}

int main(void) {
  const char *passes = "kv-write-fusion,add-norm-fusion";
  h3_module *fused = m31_compile("tiny", NULL), *unfused = m31_compile("tiny", passes);
  CHECK(fused && unfused, "compiling tiny M3.1");
  if (fused && unfused) {
    check_shape(fused, "tiny", 1);
    static const char *const graphs[] = {"prefill", "decode", "verify"};
    for (int i = 0; i < 3; i++) {
      CHECK(tiny_h3_differences(fused, unfused, graphs[i], "tiny") == 0,
            "tiny %s: the plan with the passes differs from the plan without them", graphs[i]);
      printf("tiny %s: fused == unfused, bitwise\n", graphs[i]);
    }
  }
  h3_module_free(fused);
  h3_module_free(unfused);
  h3_module *small = m31_compile("small", NULL);
  CHECK(small != NULL, "compiling small M3.1");
  if (small) check_shape(small, "small", 1);
  h3_module_free(small);
  return check_summary("qkrope_model_m31");
}
