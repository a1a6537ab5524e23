/* int8_fuse_quant.c: the `int8-fuse-quant` pass (`--int8`, docs/models/accelerations.md §4.1 rules
 * 3-4): absorbs an activation quantizer into the norm + modulate op that produces its
 * input. A `quantize_rows(y) {rotate = 0}` whose operand y is the modulated result of a
 * norm_modulate / residual_norm_modulate (no other user of y) becomes results of that op:
 *
 *   %y = norm_modulate(x, gamma, scale, shift, idx) {tier = T, ...}
 *   %q, %s = quantize_rows(%y)
 * ->
 *   %y, %q, %s = norm_modulate(x, gamma, scale, shift, idx) {tier = T, ..., quantize = 1}
 *
 * (residual_norm_modulate: residual', y, q, s). The op's `tier` decides the arithmetic
 * (ops.def, runtime/cpu/ops_normmod.c, codegen/emit_normmod.c): exact quantizes the bf16 y
 * with quantize_rows' arithmetic (codes and scales bitwise equal), lossless the fp32 value
 * before rounding. y stays a result (unused after the rewrite: the CUDA kernel then skips
 * its store). Quantizers with rotate = 256 stay standalone (the fused kernel has no
 * Hadamard stage yet); the report counts them. Opt-in like the other int8 passes: h3c
 * --int8 enables it (docs/int8.md section 8).
 */
#include "pass_internal.h"

#include "h3/op_registry.h"

#include <stdlib.h>

/* The norm op whose modulated result (its last) is v, or NULL (h3_quant_producer_fn). */
static h3_op *norm_producer(const h3_value *v, const h3_op *q) {
  (void)q;
  if (v->kind != H3_VALUE_RESULT || !v->def) return NULL;
  h3_op *p = v->def;
  if (p->code != H3_OP_NORM_MODULATE && p->code != H3_OP_RESIDUAL_NORM_MODULATE) return NULL;
  if (h3_op_attr_int(p, "quantize", 0) || v->index != p->n_results - 1) return NULL;
  return p;
}

/* Rewrites one quantizer and its producer; returns H3_ERR (reported) on failure. */
static h3_status fuse_one(h3_module *m, h3_op *quant, h3_diag *d) {
  h3_op *p = quant->operands[0]->def;
  h3_attr attrs[H3_MAX_ATTR_SCHEMA + 1];
  int na = 0;
  for (int i = 0; i < p->n_attrs && na < H3_MAX_ATTR_SCHEMA; i++) attrs[na++] = p->attrs[i];
  attrs[na++] = h3_attr_int(m, "quantize", 1);
  h3_builder b = {m, p->parent, p, p->span};
  h3_op *f = h3_build_op(&b, p->code, p->n_operands, p->operands, na, attrs, 0, d);
  if (!f) return H3_ERR;
  for (int i = 0; i < p->n_results; i++) {
    f->results[i]->name = p->results[i]->name;
    h3_value_replace_all_uses(m, p->results[i], f->results[i]);
  }
  for (int i = 0; i < 2; i++) {
    f->results[p->n_results + i]->name = quant->results[i]->name;
    h3_value_replace_all_uses(m, quant->results[i], f->results[p->n_results + i]);
  }
  h3_op_erase(quant);
  h3_op_erase(p);
  return H3_OK;
}

static h3_status fuse_quant_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  for (int g = 0; g < m->n_graphs; g++) {
    h3_quant_sites s;
    h3_status st = h3_quant_sites_find(m->graphs[g], norm_producer, "int8-fuse-quant", &s, d);
    int plan_a = 0;
    for (int i = 0; st == H3_OK && i < s.n; i++) {
      plan_a += s.ops[i]->operands[0]->def->code == H3_OP_NORM_MODULATE;
      st = fuse_one(m, s.ops[i], d);
    }
    free(s.ops);
    if (st != H3_OK) return st;
    if (s.n || s.rotated)
      h3_pass_report(ctx, "graph %s: %d activation quantizers fused into norm_modulate (%d Plan A, "
                          "%d Plan B); %d kept standalone (rotate = 256)",
                     m->graphs[g]->name, s.n, plan_a, s.n - plan_a, s.rotated);
  }
  return H3_OK;
}

const h3_pass h3_pass_int8_fuse_quant = {
    .name = "int8-fuse-quant",
    .description = "--int8: fuse an activation quantize_rows (rotate 0) into the norm_modulate "
                   "that produces its input (exact: bitwise the same codes; docs/int8.md §8)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-lowering", NULL},
    .run = fuse_quant_run,
};
