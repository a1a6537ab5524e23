/* row_split.c: the `row-split` pass (`--int8`, docs/models/accelerations.md §4.2): splits the rows
 * of large int8 GEMMs into chunks.
 *
 * For every int8 GEMM (linear_int8; a matmul_i8 made from one by int8-dequant-split, which
 * runs later and carries the attribute over, is handled alike) with M rows (the product of
 * q's leading dims), N outputs and K inputs, h3_int8_split_rows (plan/int8_rules.c)
 * decides the chunk size: the measured table per (N, K) shape family unless --int8 gives max_rows / min_split_n, else the rule
 * "split iff M > max_rows and N >= min_split_n". A split GEMM gets the attribute
 * `chunk_rows = max_rows`: the backend runs it as ceil(M / max_rows) GEMMs of max_rows
 * rows and one remainder (M = 32,704 at 8192: 3 x 8192 + 8128), each writing its slice of
 * the one output buffer and reading s_x of its rows. Each output row depends only on its
 * q row, its s_x and the weights, the int32 sums are exact and the epilogue elementwise,
 * so the split is bitwise neutral in every tier. Each graph with int8 GEMMs records the
 * rule's values as graph attributes `int8_max_rows` / `int8_min_split_n`, which
 * H3_INT8_MAX_ROWS (h3_int8_apply_env, at h3exec load) re-applies.
 */
#include "h3/int8.h"

#include "pass_internal.h"

typedef struct {
  const h3_int8_options *o;
  h3_module *m;
  int gemms, split;
  int64_t chunks;
} split_state;

static int split_op(h3_op *op, void *arg) {
  split_state *s = arg;
  const h3_value *wv = h3_int8_gemm_weight(op);
  if (!wv) return 0;
  const h3_type *q = &op->operands[0]->type, *w = &wv->type;
  int64_t k = q->dims[q->rank - 1], rows = k ? h3_type_numel(q) / k : 0;
  int64_t chunk = h3_int8_split_rows(rows, w->dims[0], k, s->o);
  s->gemms++;
  if (chunk <= 0) return 0;
  h3_op_set_attr(s->m, op, h3_attr_int(s->m, "chunk_rows", chunk));
  s->split++;
  s->chunks += (rows + chunk - 1) / chunk;
  return 0;
}

static h3_status row_split_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  h3_int8_options o;
  if (h3_int8_options_parse(h3_pass_options_of(ctx)->int8, &o, d) != H3_OK) return H3_ERR;
  for (int g = 0; g < m->n_graphs; g++) {
    split_state s = {&o, m, 0, 0, 0};
    h3_region_walk(&m->graphs[g]->body, split_op, &s);
    if (s.gemms == 0) continue;
    h3_graph_set_attr(m, m->graphs[g], h3_attr_int(m, "int8_max_rows", o.max_rows));
    h3_graph_set_attr(m, m->graphs[g], h3_attr_int(m, "int8_min_split_n", o.min_split_n));
    h3_pass_report(ctx, "graph %s: %d of %d int8 GEMMs split into %lld row chunks (%s)",
                   m->graphs[g]->name, s.split, s.gemms, (long long)s.chunks,
                   o.rule_given ? "rule: rows > max_rows and N >= min_split_n"
                                : "measured table, else the default rule");
  }
  return H3_OK;
}

const h3_pass h3_pass_row_split = {
    .name = "row-split",
    .description = "--int8: run int8 GEMMs with many rows as row chunks of max_rows "
                   "(bitwise neutral; H3_INT8_MAX_ROWS overrides at load)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-lowering", NULL},
    .run = row_split_run,
};
