/* add_norm_fusion.c: the `add-norm-fusion` pass: a residual add and the rms_norm of its sum
 * as one op that writes both.
 *
 * Pattern "add-norm" (root rms_norm):
 *   %x = add(%a, %b)                          [.., D], a, b and x one type, bf16 or f32
 *   ..                                        (no other use of %x in between)
 *   %y = rms_norm(%x, %w) {eps, offset?}      y of x's dtype
 * becomes %x, %y = add_rms_norm(%a, %b, %w) {eps, offset?} (ops.def) at the rms_norm's place.
 * The op computes x as add does (fp32 add, one rounding) and normalises the rounded x with
 * rms_norm's own reduction, so it is the pair bit for bit: the pass runs at every --quality.
 * In an M3.1 layer x + o_proj(attention) is both the residual carried on and the input of
 * post_attention_layernorm: one launch fewer per layer (4 a small decode step), and x is
 * read once instead of twice.
 *
 * Legality: the add is in the norm's region, has no broadcast (a, b and x one type), and
 * every other use of x comes after the norm (the fused op defines x there); the norm keeps
 * x's dtype (no `dtype` of another type); neither a nor b comes from an op that
 * elementwise-fusion would put in the add's kernel (an elementwise op such as --int8's
 * dequant_i8, a gather, a slice): there the add already costs no launch of its own.
 * Anything else is left alone, and elementwise-fusion, which runs later, groups such an
 * add as before.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites;
  h3_op *add; /* the match just found */
} an_state;

/* Whether elementwise-fusion would put v's producer in the add's kernel (an elementwise op,
 * e.g. --int8's dequant_i8 of out_proj, or a gather or slice): then the add stays there. */
static bool fuses_into_add(const h3_value *v) {
  const h3_op *p = v->kind == H3_VALUE_RESULT ? v->def : NULL;
  return p && (h3_op_is_elementwise(p->code) || p->code == H3_OP_GATHER || p->code == H3_OP_SLICE);
}

static bool match(h3_rewriter *rw, h3_op *norm, void *state) {
  an_state *s = state;
  (void)rw;
  h3_value *x = norm->operands[0];
  h3_op *add = x->kind == H3_VALUE_RESULT ? x->def : NULL;
  if (!add || add->code != H3_OP_ADD || add->parent != norm->parent || add->n_operands != 2) return false;
  const h3_type *xt = &x->type;
  if ((xt->dtype != H3_BF16 && xt->dtype != H3_F32) || xt->rank < 1 ||
      norm->results[0]->type.dtype != xt->dtype)
    return false;
  if (!h3_type_equal(&add->operands[0]->type, xt) || !h3_type_equal(&add->operands[1]->type, xt) ||
      fuses_into_add(add->operands[0]) || fuses_into_add(add->operands[1]))
    return false;
  if (norm->operands[1] == x) return false; /* the sum as its own weight */
  for (const h3_op *o = add->next; o && o != norm; o = o->next)
    if (h3_op_reads(o, x)) return false;
  s->add = add;
  return true;
}

static h3_status rewrite(h3_rewriter *rw, h3_op *norm, void *state, h3_diag *d) {
  an_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  h3_builder b = {m, norm->parent, norm, s->add->span};
  h3_value *in[3] = {s->add->operands[0], s->add->operands[1], norm->operands[1]};
  h3_attr attrs[2];
  int na = 0;
  attrs[na++] = h3_attr_float(m, "eps", h3_op_attr_float(norm, "eps", 1e-5));
  if (h3_op_attr(norm, "offset"))
    attrs[na++] = h3_attr_float(m, "offset", h3_op_attr_float(norm, "offset", 0.0));
  h3_op *f = h3_build_op(&b, H3_OP_ADD_RMS_NORM, 3, in, na, attrs, 0, d);
  if (!f) return H3_ERR; /* the match checked every type: only out of memory gets here */
  h3_value_replace_all_uses(m, norm->results[0], f->results[1]);
  h3_value_replace_all_uses(m, s->add->results[0], f->results[0]);
  h3_rewriter_erase(rw, norm);
  h3_rewriter_erase(rw, s->add);
  h3_rewriter_notify_new(rw, f);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern an_patterns[] = {
    {.name = "add-norm", .root = H3_OP_RMS_NORM, .benefit = 1, .match = match, .rewrite = rewrite},
};

static h3_status an_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  an_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, an_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK) h3_pass_report(ctx, "fused residual add + rms_norm sites: %d", s.n_sites);
  return st;
}

const h3_pass h3_pass_add_norm_fusion = {
    .name = "add-norm-fusion",
    .description = "a residual add and the rms_norm of its sum (M3.1's post-attention norm) "
                   "become one add_rms_norm op that writes both; bitwise neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = an_run,
};
