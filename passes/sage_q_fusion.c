/* sage_q_fusion.c: the `sage-q-fusion` pass (with `--attention sage`, docs/models/
 * accelerations.md §5): q's int8 quantization for sage_attention moves into the norm + rope
 * kernel that produces q, as int8-fuse-quant moves an activation quantizer into its
 * norm_modulate. Pattern "sage-q" (root sage_attention):
 *
 *   %q = rms_norm_rope(%x, %w, %cos, %sin, ..) {start, heads, eps, ..}        bf16[T, H, D]
 *   %o = sage_attention(%q, %k, %v) {scale, segments?, pv, smooth}
 * ->
 *   %q, %qc, %qd = rms_norm_rope(%x, %w, %cos, %sin, ..) {.., sage_quant = 1, segments?}
 *   %o = sage_attention(%q, %k, %v, %qc, %qd) {scale, segments?, pv, smooth}
 *
 * %qc i8[H*P*D] and %qd f32[H*P/64] are q's codes and deltas by sage_attention's own Q rule
 * (blocks of 64 rows from each segment's start, per q head; the attention's segments copied
 * to the norm) in the padded layout the attention kernels read (include/h3/sage.h), so the
 * attention skips its quantization pre-pass of q and the bf16 q is not read again for it.
 * The result is bitwise the unfused one at every --quality (the CPU reference and the kernels
 * apply one rule to the same bf16 values), so the pass runs in the default pipeline at
 * every tier; it changes nothing without sage_attention. `--disable-pass sage-q-fusion`
 * keeps the attention's pre-pass.
 *
 * K is not fused: its smoothing subtracts the mean of the segment's keys before any code, a
 * reduction over every row that the norm's (64 rows, head) tiles do not see.
 *
 * Legality (anything else stays unfused): q is a result of an rms_norm_rope (the bf16 or the
 * int8 form, not the write form) in the attention's region, without sage_quant yet, and the
 * attention (3 operands) is q's only use. The norm is rebuilt at its place, the attention at
 * its own.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites;
  h3_op *norm; /* the match just found */
} sq_state;

static bool match(h3_rewriter *rw, h3_op *att, void *state) {
  sq_state *s = state;
  (void)rw;
  h3_value *q = att->operands[0];
  if (att->n_operands != 3 || q->kind != H3_VALUE_RESULT || !q->def) return false;
  h3_op *norm = q->def;
  if (norm->code != H3_OP_RMS_NORM_ROPE || norm->n_results != 1 || norm->parent != att->parent ||
      h3_op_attr(norm, "sage_quant") || q->uses != 1)
    return false;
  s->norm = norm;
  return true;
}

static h3_status rewrite(h3_rewriter *rw, h3_op *att, void *state, h3_diag *d) {
  sq_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  h3_op *norm = s->norm;
  h3_attr attrs[H3_MAX_ATTR_SCHEMA];
  int na = 0;
  for (int i = 0; i < norm->n_attrs && na < H3_MAX_ATTR_SCHEMA - 2; i++) attrs[na++] = norm->attrs[i];
  attrs[na++] = h3_attr_int(m, "sage_quant", 1);
  const h3_attr *seg = h3_op_attr(att, "segments");
  if (seg) attrs[na++] = *seg;
  h3_builder b = {m, norm->parent, norm, norm->span};
  h3_op *f = h3_build_op(&b, H3_OP_RMS_NORM_ROPE, norm->n_operands, norm->operands, na, attrs, 0, d);
  if (!f) return H3_ERR; /* the types were inferred once already: only out of memory gets here */
  f->results[0]->name = norm->results[0]->name;
  h3_value_replace_all_uses(m, norm->results[0], f->results[0]);
  h3_value *in[5] = {f->results[0], att->operands[1], att->operands[2], f->results[1], f->results[2]};
  h3_builder ba = {m, att->parent, att, att->span};
  h3_op *g = h3_build_op(&ba, H3_OP_SAGE_ATTENTION, 5, in, att->n_attrs, att->attrs, 0, d);
  if (!g) return H3_ERR;
  g->results[0]->name = att->results[0]->name;
  h3_value_replace_all_uses(m, att->results[0], g->results[0]);
  h3_rewriter_erase(rw, att);
  h3_rewriter_erase(rw, norm);
  h3_rewriter_notify_new(rw, f);
  h3_rewriter_notify_new(rw, g);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern sq_patterns[] = {
    {.name = "sage-q", .root = H3_OP_SAGE_ATTENTION, .benefit = 1, .match = match, .rewrite = rewrite},
};

static h3_status sq_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  sq_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, sq_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK && s.n_sites)
    h3_pass_report(ctx, "sage_attention q quantized by its rms_norm_rope: %d sites", s.n_sites);
  return st;
}

const h3_pass h3_pass_sage_q_fusion = {
    .name = "sage-q-fusion",
    .description = "--attention sage: the rms_norm_rope that makes sage_attention's q also writes "
                   "q's int8 codes and deltas (the attention's Q rule); bitwise neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = sq_run,
};
