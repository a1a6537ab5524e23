/* qk_norm_rope_fusion.c: the `qk-norm-rope-fusion` pass: the per-head q/k RMSNorm + RoPE of an
 * attention block as one op that reads the q/k columns of the qkv projection in place.
 *
 * Pattern "norm-rope" (root rope):
 *   %q  = slice(%qkv) {axis = 1, start = S, len = H*D}    bf16[T, H*D] of %qkv bf16[T, C]
 *   %q3 = reshape(%q) {shape = [T, H, D]}
 *   %n  = rms_norm(%q3, %w) {eps, offset?}                bf16[T, H, D]
 *   %y  = rope(%n, %cos, %sin)                            bf16[T, H, D]
 * becomes %y = rms_norm_rope(%qkv, %w, %cos, %sin) {start = S, heads = H, eps, offset?}
 * Without the slice (%q itself a [T, H*D] tensor, e.g. M3.1's indexer q and k, each its own
 * linear's result), %y = rms_norm_rope(%q, %w, %cos, %sin) {start = 0, heads = H, ...}
 * (ops.def), which is the chain bit for bit in every tier (the op's CPU reference and its
 * kernel reuse rms_norm's reduction and rope's arithmetic), so the pass runs at every
 * --quality. The column copy of the slice, the normed tensor and one read of it are gone:
 * in the H3 block, 3 launches and about 5 tensor passes per q and k become one kernel
 * that reads q once and writes the roped result.
 *
 * Legality (the match decides everything; anything else stays unfused): the rms_norm is
 * in the rope's region and the rope is its only user; the slice, where there is one, is
 * along the last axis of a 2D bf16 tensor (any other slice is left alone); the reshape
 * splits that slice's columns (or the whole 2D bf16 tensor) into [T, H, D] with the same T; x, the norm and the rope are bf16 (no
 * other rms_norm `dtype`); w, cos and sin are bf16, f16 or f32 (cos and sin one dtype);
 * the head row fits one warp of the kernel as rms_norm's own kernel reduces it (D % 8 == 0
 * with D <= 256, or D <= 32), so the fused kernel can use the same summation order. The
 * slice and the reshape keep their other users (they are erased only when unused). The
 * fused op takes the rope's place (every operand is available there).
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites;
  /* the match just found */
  h3_op *norm, *reshape, *slice;
  h3_value *x, *w;
  int64_t start, heads;
} nr_state;

static bool narrow_float(h3_dtype t) { return t == H3_BF16 || t == H3_F16 || t == H3_F32; }

/* The head rows the kernel reduces in rms_norm's order: one warp per row (vector chunks of
 * 8 when D % 8 == 0, else single elements), at most 32 chunks. */
static bool head_fits(int64_t d) { return d >= 1 && (d % 8 == 0 ? d <= 256 : d <= 32); }

static bool match(h3_rewriter *rw, h3_op *rope, void *state) {
  nr_state *s = state;
  const h3_module *m = h3_rewriter_module(rw);
  h3_value *n = rope->operands[0], *cs = rope->operands[1], *sn = rope->operands[2];
  h3_op *norm = h3_value_def_of(n, H3_OP_RMS_NORM), *user = NULL;
  if (!norm || norm->parent != rope->parent) return false;
  if (n->uses != 1 || h3_value_users(m, n, &user, 1) != 1 || user != rope) return false;
  const h3_type *nt = &n->type;
  if (nt->rank != 3 || nt->dtype != H3_BF16 || rope->results[0]->type.dtype != H3_BF16)
    return false;
  h3_value *x3 = norm->operands[0], *w = norm->operands[1];
  if (x3->type.dtype != H3_BF16 || !narrow_float(w->type.dtype) || !narrow_float(cs->type.dtype) ||
      cs->type.dtype != sn->type.dtype || cs->type.rank != 2)
    return false;
  const int64_t T = nt->dims[0], H = nt->dims[1], D = nt->dims[2];
  if (!head_fits(D)) return false;
  h3_op *reshape = h3_value_def_of(x3, H3_OP_RESHAPE);
  if (!reshape) return false;
  h3_value *q = reshape->operands[0];
  if (q->type.rank != 2 || q->type.dtype != H3_BF16 || q->type.dims[0] != T ||
      q->type.dims[1] != H * D)
    return false;
  h3_op *slice = h3_value_def_of(q, H3_OP_SLICE);
  if (slice && h3_op_attr_int(slice, "axis", -1) != 1) return false;
  h3_value *x = slice ? slice->operands[0] : q; /* no slice: q's own columns, from 0 */
  if (x->type.rank != 2 || x->type.dtype != H3_BF16 || x->type.dims[0] != T) return false;
  s->norm = norm;
  s->reshape = reshape;
  s->slice = slice;
  s->x = x;
  s->w = w;
  s->start = slice ? h3_op_attr_int(slice, "start", 0) : 0;
  s->heads = H;
  return true;
}

static void erase_if_dead(h3_rewriter *rw, h3_op *op) {
  if (op->results[0]->uses == 0) h3_rewriter_erase(rw, op);
}

static h3_status rewrite(h3_rewriter *rw, h3_op *rope, void *state, h3_diag *d) {
  nr_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  h3_builder b = {m, rope->parent, rope, s->norm->span};
  h3_attr attrs[4];
  int na = 0;
  attrs[na++] = h3_attr_int(m, "start", s->start);
  attrs[na++] = h3_attr_int(m, "heads", s->heads);
  attrs[na++] = h3_attr_float(m, "eps", h3_op_attr_float(s->norm, "eps", 1e-5));
  if (h3_op_attr(s->norm, "offset"))
    attrs[na++] = h3_attr_float(m, "offset", h3_op_attr_float(s->norm, "offset", 0.0));
  h3_value *in[4] = {s->x, s->w, rope->operands[1], rope->operands[2]};
  h3_op *f = h3_build_op(&b, H3_OP_RMS_NORM_ROPE, 4, in, na, attrs, 0, d);
  if (!f) return H3_ERR; /* the match checked every type: only out of memory gets here */
  h3_value_replace_all_uses(m, rope->results[0], f->results[0]);
  h3_rewriter_erase(rw, rope);
  h3_rewriter_erase(rw, s->norm);
  erase_if_dead(rw, s->reshape);
  if (s->slice) erase_if_dead(rw, s->slice);
  h3_rewriter_notify_new(rw, f);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern nr_patterns[] = {
    {.name = "norm-rope", .root = H3_OP_ROPE, .benefit = 1, .match = match, .rewrite = rewrite},
};

static h3_status nr_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  nr_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, nr_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK) h3_pass_report(ctx, "fused q/k norm+rope sites: %d", s.n_sites);
  return st;
}

const h3_pass h3_pass_qk_norm_rope_fusion = {
    .name = "qk-norm-rope-fusion",
    .description = "fuse column slice + per-head rms_norm + rope (attention q/k) into one "
                   "rms_norm_rope op reading the qkv columns in place; bitwise neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = nr_run,
};
