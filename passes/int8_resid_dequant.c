/* int8_resid_dequant.c: the `int8-resid-dequant` pass (`--int8`, after int8-fuse-quant and
 * int8-dequant-split, before elementwise-fusion): Plan B reads out_proj's int32
 * accumulators. A dequant_i8 that feeds residual_norm_modulate's update and nothing else,
 *
 *   %u = dequant_i8(%acc, %s_x, %s_w) {dtype = bf16}            bf16[T, H]
 *   %r', %y, ... = residual_norm_modulate(%r, %u, %gate, %gamma, %scale, %shift, %idx) {...}
 * ->
 *   %r', %y, ... = residual_norm_modulate(%r, %acc, %gate, %gamma, %scale, %shift, %idx,
 *                                          %s_x, %s_w) {...}
 *
 * keeps every attribute (tier, modulate, quantize) and result of the op; the kernels
 * (runtime/cpu/ops_normmod.c, codegen/emit_normmod.c) form update = bf16(dequant_i8's
 * value) per element, so the results are bitwise the unfused pair's at every tier, and
 * the bf16 update is no longer written and read back. Left alone: a dequant with a bias
 * (out_proj has none), another dtype than bf16, acc not [T, H], or other users of %u.
 */
#include "pass_internal.h"

#include "h3/op_registry.h"

#include <stdlib.h>

typedef struct {
  h3_op **ops; /* residual_norm_modulate ops to rewrite */
  int n, cap;
  bool oom;
} resid_scan;

/* The dequant_i8 producing op's update when the rewrite applies to op, else NULL. */
static h3_op *fusible_dequant(const h3_op *op) {
  if (op->code != H3_OP_RESIDUAL_NORM_MODULATE || op->n_operands != 7) return NULL;
  const h3_value *u = op->operands[1];
  if (u->kind != H3_VALUE_RESULT || !u->def || u->uses != 1) return NULL;
  h3_op *dq = u->def;
  if (dq->code != H3_OP_DEQUANT_I8 || dq->n_operands != 3 || u->type.dtype != H3_BF16) return NULL;
  const h3_type *acc = &dq->operands[0]->type;
  if (acc->rank != 2 || !h3_type_same_shape(acc, &op->operands[0]->type)) return NULL;
  return dq;
}

static int scan_op(h3_op *op, void *arg) {
  resid_scan *s = arg;
  if (!fusible_dequant(op)) return 0;
  if (h3_ops_push(&s->ops, &s->n, &s->cap, op)) return 0;
  s->oom = true;
  return 1;
}

/* Rewrites one residual_norm_modulate and erases its dequant_i8. */
static h3_status fuse_one(h3_module *m, h3_op *p, h3_diag *d) {
  h3_op *dq = p->operands[1]->def;
  h3_value *in[9];
  for (int i = 0; i < 7; i++) in[i] = p->operands[i];
  in[1] = dq->operands[0]; /* acc i32[T, H] */
  in[7] = dq->operands[1]; /* s_x f32[T] */
  in[8] = dq->operands[2]; /* s_w f32[H] */
  h3_attr attrs[H3_MAX_ATTR_SCHEMA];
  int na = 0;
  for (int i = 0; i < p->n_attrs && na < H3_MAX_ATTR_SCHEMA; i++) attrs[na++] = p->attrs[i];
  h3_builder b = {m, p->parent, p, p->span};
  h3_op *f = h3_build_op(&b, p->code, 9, in, na, attrs, 0, d);
  if (!f) return H3_ERR;
  for (int i = 0; i < p->n_results; i++) {
    f->results[i]->name = p->results[i]->name;
    h3_value_replace_all_uses(m, p->results[i], f->results[i]);
  }
  h3_op_erase(p);
  h3_op_erase(dq);
  return H3_OK;
}

static h3_status resid_dequant_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  for (int g = 0; g < m->n_graphs; g++) {
    resid_scan s = {0};
    h3_region_walk(&m->graphs[g]->body, scan_op, &s);
    h3_status st = H3_OK;
    if (s.oom) {
      h3_diag_error(d, m->graphs[g]->span, "free memory or use a smaller --config",
                    "int8-resid-dequant: out of memory in graph %s", m->graphs[g]->name);
      st = H3_ERR;
    }
    for (int i = 0; st == H3_OK && i < s.n; i++) st = fuse_one(m, s.ops[i], d);
    free(s.ops);
    if (st != H3_OK) return st;
    if (s.n)
      h3_pass_report(ctx, "graph %s: %d out_proj dequantizations fused into residual_norm_modulate",
                     m->graphs[g]->name, s.n);
  }
  return H3_OK;
}

const h3_pass h3_pass_int8_resid_dequant = {
    .name = "int8-resid-dequant",
    .description = "--int8: residual_norm_modulate reads out_proj's int32 accumulators and "
                   "dequantizes them itself (bitwise the unfused dequant_i8 at every tier; "
                   "docs/int8.md §10)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-dequant-split", NULL},
    .run = resid_dequant_run,
};
