/* int8_fuse_group_quant.c: the `int8-fuse-group-quant` pass (`--int8`, docs/models/accelerations.md §4.1
 * rule 3): absorbs an activation quantizer into the fused elementwise group that produces
 * its input (the MLP's SwiGLU group, whose g = bf16(silu(f32(gate)) * f32(up)) is fc2's
 * input). A `quantize_rows(g) {rotate = 0}` whose operand g is the only result of a
 * `fused` op, with no other user, moves into the group's region; the group yields the
 * codes and scales instead of g:
 *
 *   %g = fused(ins...) {tier = T} : bf16[M, N] { ...; yield %g.1 }
 *   %q, %s = quantize_rows(%g) : i8[M, N], f32[M]
 * ->
 *   %q, %s = fused(ins...) {tier = T} : i8[M, N], f32[M] {
 *     ...; %q.1, %s.1 = quantize_rows(%g.1); yield %q.1, %s.1 }
 *
 * g itself is no longer a result (no arena slot, no store). The arithmetic is exact in
 * every tier (ops.def `fused`): the quantizer reads g rounded to its IR dtype, as the
 * standalone quantize_rows read the stored g, so codes and scales are bitwise those of the
 * unfused plan at exact and lossless (runtime/cpu/cpu_backend.c's fused interpreter,
 * codegen/emit_fused.c's row kernel). Quantizers with rotate = 256 stay standalone (the
 * report counts them), as do rows longer than H3_GROUP_QUANT_MAX_K (the row kernel keeps
 * a row in registers). Opt-in: h3c --int8 enables it (docs/int8.md, section `int8-fuse-group-quant`).
 */
#include "pass_internal.h"

#include "h3/op_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest row the row kernel takes (emit_fused.c: 256 threads, <= 256 values each). */
#define H3_GROUP_QUANT_MAX_K 65536

/* The fused op whose only result is v, with v defined inside its region, in quantizer q's
 * region, or NULL (h3_quant_producer_fn). */
static h3_op *group_producer(const h3_value *v, const h3_op *q) {
  if (v->kind != H3_VALUE_RESULT || !v->def || v->def->code != H3_OP_FUSED) return NULL;
  h3_op *p = v->def;
  if (p->parent != q->parent) return NULL;
  if (p->n_results != 1 || p->n_regions != 1) return NULL;
  const h3_op *y = p->regions[0].last;
  if (!y || y->code != H3_OP_YIELD || y->n_operands != 1) return NULL;
  const h3_value *g = y->operands[0];
  if (g->kind != H3_VALUE_RESULT || !g->def || g->def->parent != &p->regions[0]) return NULL;
  if (!h3_dtype_is_float(v->type.dtype) || v->type.rank < 1) return NULL;
  int64_t k = v->type.dims[v->type.rank - 1];
  if (k < 1 || k > H3_GROUP_QUANT_MAX_K) return NULL;
  return p;
}

/* Rewrites one quantizer and its group; returns H3_ERR (reported) on failure. */
static h3_status fuse_one(h3_module *m, h3_op *quant, h3_diag *d) {
  h3_op *p = quant->operands[0]->def;
  h3_region *old = &p->regions[0];
  h3_op *old_yield = old->last;
  h3_value *g = old_yield->operands[0];
  h3_type rt[2] = {quant->results[0]->type, quant->results[1]->type};
  h3_attr attrs[H3_MAX_ATTR_SCHEMA];
  int na = 0;
  for (int i = 0; i < p->n_attrs && na < H3_MAX_ATTR_SCHEMA; i++) {
    attrs[na] = p->attrs[i];
    if (strcmp(p->attrs[i].name, "name") == 0) {
      char name[160];
      snprintf(name, sizeof name, "%s_quantize_rows", p->attrs[i].s ? p->attrs[i].s : "group");
      attrs[na] = h3_attr_string(m, "name", name);
    }
    na++;
  }
  h3_builder b = {m, quant->parent, quant, p->span};
  h3_op *f = h3_build_op_typed(&b, H3_OP_FUSED, p->n_operands, p->operands, na, attrs, 2, rt, 1);
  if (!f) goto oom;
  h3_region *body = &f->regions[0];
  for (int i = 0; i < old->n_args; i++) {
    h3_value *a = old->args[i];
    h3_value *na_ = h3_region_add_arg(m, body, a->type, a->name, a->span);
    if (!na_) goto oom;
    h3_value_replace_all_uses(m, a, na_);
  }
  while (old->first && old->first != old_yield) h3_op_move_before(old->first, body, NULL);
  h3_builder bb = {m, body, NULL, quant->span};
  h3_op *q = h3_build_op_typed(&bb, H3_OP_QUANTIZE_ROWS, 1, &g, quant->n_attrs, quant->attrs, 2,
                               rt, 0);
  if (!q) goto oom;
  bb.span = old_yield->span;
  if (!h3_build_op_typed(&bb, H3_OP_YIELD, 2, q->results, 0, NULL, 0, NULL, 0)) goto oom;
  for (int i = 0; i < 2; i++) {
    q->results[i]->name = quant->results[i]->name;
    f->results[i]->name = quant->results[i]->name;
    f->results[i]->span = quant->results[i]->span;
    h3_value_replace_all_uses(m, quant->results[i], f->results[i]);
  }
  h3_op_erase(quant);
  h3_op_erase(old_yield);
  h3_op_erase(p);
  return H3_OK;
oom:
  h3_diag_error(d, p->span, "free memory or use a smaller --config",
                "int8-fuse-group-quant: out of memory");
  return H3_ERR;
}

static h3_status group_quant_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    h3_quant_sites s;
    h3_status st =
        h3_quant_sites_find(m->graphs[gi], group_producer, "int8-fuse-group-quant", &s, d);
    for (int i = 0; st == H3_OK && i < s.n; i++) st = fuse_one(m, s.ops[i], d);
    free(s.ops);
    if (st != H3_OK) return st;
    if (s.n || s.rotated)
      h3_pass_report(ctx, "graph %s: %d activation quantizers fused into their elementwise "
                          "group; %d kept standalone (rotate = 256)",
                     m->graphs[gi]->name, s.n, s.rotated);
  }
  return H3_OK;
}

const h3_pass h3_pass_int8_fuse_group_quant = {
    .name = "int8-fuse-group-quant",
    .description = "--int8: fuse an activation quantize_rows (rotate 0) into the fused "
                   "elementwise group that produces its input (bitwise the same codes; "
                   "docs/int8.md §11)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-lowering", NULL},
    .run = group_quant_run,
};
