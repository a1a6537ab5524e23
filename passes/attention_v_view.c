/* attention_v_view.c: the `attention-v-view` pass: attention reads its v operand in place
 * from the 2D tensor whose columns hold it (the qkv projection), so the column copy of v
 * is gone.
 *
 * Pattern "v-view" (root attention):
 *   %v  = slice(%x) {axis = 1, start = S, len = Hk*D}     [T, Hk*D] of %x [T, C]
 *   %v3 = reshape(%v) {shape = [T, Hk, D]}
 *   %o  = attention(%q, %k, %v3) {...}
 * becomes %o = attention(%q, %k, %x) {..., v_view = [S, C]} (ops.def): every backend reads
 * row t, kv head h, dim d of v at x[t*C + S + h*D + d], the element the slice copied, so the
 * result is the same bit for bit in every tier and the pass runs at every --quality. In
 * the H3 block this removes one slice kernel per block (a [T, 7168] copy out of the
 * [T, 21504] qkv, 0.25 ms at the full config). Pattern "sage-v-view": the same with
 * sage_attention at the root (--attention sage; attention-backend ran before), whose v_view
 * means the same (0.32 ms a block on an H100).
 *
 * Legality (the match decides everything; anything else is left alone): the attention has
 * no v_view yet; the reshape and the slice are in the attention's region and each result
 * has exactly one use (the reshape's is attention's v, the slice's is the reshape); the
 * slice is along axis 1 of a 2D x with x's T rows and the reshape gives it k's shape
 * [T, Hk, D]; S and C are multiples of 8 (16-byte aligned v rows for the GPU kernels'
 * vector loads, the rule of the v_view attribute); x is not aliased (not a loop-carried or
 * returned buffer, not updated in place by another op), so the buffer attention now reads
 * holds at the attention what it held at the slice. The memory plan keeps x live until
 * the attention, since x is now its operand.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites;
  /* the match just found */
  h3_op *reshape, *slice;
  h3_value *x;
  int64_t start;
} vv_state;

static bool match(h3_rewriter *rw, h3_op *att, void *state) {
  vv_state *s = state;
  (void)rw;
  if (att->n_operands != 3 || h3_op_attr(att, "v_view")) return false;
  h3_value *v3 = att->operands[2];
  const h3_type *kt = &att->operands[1]->type;
  h3_op *reshape = h3_value_def_of(v3, H3_OP_RESHAPE);
  if (!reshape || reshape->parent != att->parent || v3->uses != 1) return false;
  if (kt->rank != 3 || !h3_type_same_shape(&v3->type, kt)) return false;
  h3_value *v = reshape->operands[0];
  h3_op *slice = h3_value_def_of(v, H3_OP_SLICE);
  if (!slice || slice->parent != att->parent || v->uses != 1) return false;
  if (h3_op_attr_int(slice, "axis", -1) != 1) return false;
  h3_value *x = slice->operands[0];
  const h3_type *xt = &x->type;
  if (xt->rank != 2 || xt->dims[0] != kt->dims[0] || v->type.rank != 2 ||
      v->type.dims[1] != kt->dims[1] * kt->dims[2])
    return false;
  int64_t start = h3_op_attr_int(slice, "start", -1);
  if (start < 0 || start % 8 != 0 || xt->dims[1] % 8 != 0) return false;
  if (h3_value_is_aliased(x)) return false;
  s->reshape = reshape;
  s->slice = slice;
  s->x = x;
  s->start = start;
  return true;
}

static h3_status rewrite(h3_rewriter *rw, h3_op *att, void *state, h3_diag *d) {
  vv_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  int64_t view[2] = {s->start, s->x->type.dims[1]};
  h3_op_set_attr(m, att, h3_attr_ints(m, "v_view", 2, view));
  const h3_attr *a = h3_op_attr(att, "v_view");
  if (!a || a->n != 2) {
    h3_diag_error(d, att->span, H3_HINT_OOM, "attention-v-view: out of memory for the v_view attribute");
    return H3_ERR;
  }
  h3_op_set_operand(att, 2, s->x);
  h3_rewriter_erase(rw, s->reshape);
  h3_rewriter_erase(rw, s->slice);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern vv_patterns[] = {
    {.name = "v-view", .root = H3_OP_ATTENTION, .benefit = 1, .match = match, .rewrite = rewrite},
    {.name = "sage-v-view", .root = H3_OP_SAGE_ATTENTION, .benefit = 1, .match = match, .rewrite = rewrite},
};

static h3_status vv_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  vv_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, vv_patterns, 2, &s, ctx, NULL, d);
  if (st == H3_OK) h3_pass_report(ctx, "attention v read in place: %d", s.n_sites);
  return st;
}

const h3_pass h3_pass_attention_v_view = {
    .name = "attention-v-view",
    .description = "attention reads v in place from the 2D tensor whose columns hold it "
                   "(reshape(slice(x, axis 1)) -> v_view attribute): no column copy; bitwise "
                   "neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = vv_run,
};
