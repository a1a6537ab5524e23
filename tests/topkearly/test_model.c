/* test_model.c: index-topk-early (opt-in: --enable-pass) on M3.1 (models/minimax_m3_1.g), CPU
 * backend.
 *   - where it rewrites: at the tiny config (one sequence) every sparse layer's index_topk
 *     of the one-row graphs (decode, decode_next, decode_batch, serve_decode) reads the index
 *     cache before the write, and no other (prefill's and verify's rows read the rows the
 *     step writes); without the pass none does;
 *   - at the small config, `decode`'s sparse layer: the index_topk on the branch, the index
 *     cache's write below the branch's join (side-streams);
 *   - tiny's one-row graphs and the whole `generate` program bitwise equal to the plan
 *     compiled without the pass (outputs not all zero; the caches included).
 * Usage: topkearly_model_test.
 */
#include "../common/case_data.h"
#include "../common/check.h"
#include "../common/tiny_h3.h"
#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int early, late; /* index_topk ops reading a cache operand that is / is not a write's result */
  int side_topk;   /* of them, on a side branch */
} topk_count;

static bool is_cache_write(const h3_value *v) {
  return v->kind == H3_VALUE_RESULT && v->def &&
         (v->def->code == H3_OP_KV_WRITE || v->def->code == H3_OP_RMS_NORM_ROPE_WRITE);
}

static int count_topk(h3_op *op, void *ctx) {
  topk_count *c = ctx;
  if (op->code != H3_OP_INDEX_TOPK) return 0;
  if (is_cache_write(op->operands[1]))
    c->late++;
  else
    c->early++;
  c->side_topk += h3_op_attr_int(op, "side", 0) != 0;
  return 0;
}

static topk_count count_in(h3_module *m, const char *graph) {
  topk_count c = {0};
  case_walk_graph(m, graph, count_topk, &c);
  return c;
}

/* without: the default pipeline, which does not run the pass */
static void check_sites(h3_module *with, h3_module *without) {
  const char *one_row[] = {"decode", "decode_next", "decode_batch", "serve_decode"};
  for (int i = 0; i < 4; i++) {
    topk_count w = count_in(with, one_row[i]), o = count_in(without, one_row[i]);
    CHECK(w.early > 0 && w.late == 0, "%s: %d index_topk before the write, %d after (want all before)",
          one_row[i], w.early, w.late);
    CHECK(o.early == 0 && o.late == w.early, "%s without the pass: %d before, %d after", one_row[i],
          o.early, o.late);
  }
  const char *many_rows[] = {"prefill", "verify"};
  for (int i = 0; i < 2; i++) {
    topk_count w = count_in(with, many_rows[i]);
    CHECK(w.early == 0 && w.late > 0, "%s: %d index_topk before the write (want none: its rows "
          "read what the step writes)", many_rows[i], w.early);
  }
}

/* The op after `op` in its region that is not a view. */
static const h3_op *next_kernel(const h3_op *op) {
  for (op = op->next; op && h3_op_is_view(op->code); op = op->next) {
  }
  return op;
}

static int find_join(h3_op *op, void *ctx) {
  const h3_op **found = ctx;
  if (op->code == H3_OP_SPARSE_ATTENTION && h3_op_attr_int(op, "join", 0)) *found = op;
  return 0;
}

static void check_small(void) {
  h3_module *m = m31_compile_enabling("small", "index-topk-early", NULL);
  CHECK(m != NULL, "compiling the small model");
  if (!m) return;
  topk_count c = count_in(m, "decode");
  CHECK(c.early > 0 && c.late == 0 && c.side_topk == c.early,
        "small decode: %d index_topk before the write, %d after, %d on a branch", c.early, c.late,
        c.side_topk);
  const h3_op *join = NULL;
  case_walk_graph(m, "decode", find_join, &join);
  const h3_op *after = join ? next_kernel(join) : NULL;
  CHECK(after && after->code == H3_OP_RMS_NORM_ROPE_WRITE && !h3_op_attr_int(after, "side", 0),
        "small decode: the index cache's write runs on the main stream right after the branch's "
        "join (found %s)", after ? h3_opcode_name(after->code) : "nothing");
  h3_module_free(m);
}

int main(void) {
  h3_module *with = m31_compile_enabling("tiny", "index-topk-early", NULL), *without = m31_compile("tiny", NULL);
  CHECK(with && without, "compiling the tiny model");
  if (with && without) {
    check_sites(with, without);
    const char *graphs[] = {"decode", "decode_next", "decode_batch", "serve_decode", "generate"};
    for (int i = 0; i < 5; i++) {
      CHECK(tiny_h3_differences(with, without, graphs[i], "m31") == 0,
            "m31 %s: the plan with the pass differs from the plan without it", graphs[i]);
      printf("m31 %s: top-k before the write == after it, bitwise\n", graphs[i]);
    }
  }
  h3_module_free(with);
  h3_module_free(without);
  check_small();
  return check_summary("topkearly_model");
}
