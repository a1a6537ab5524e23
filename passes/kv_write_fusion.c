/* kv_write_fusion.c: the `kv-write-fusion` pass: a paged-cache write of rows that
 * rms_norm_rope has just made becomes one op that norms, ropes and writes them, and writes
 * v's rows of the same x beside them.
 *
 * Pattern "norm-rope-write" (root kv_write):
 *   %k  = rms_norm_rope(%x, %w, %cos, %sin) {start, heads, eps, offset?}   bf16[T, H, D]
 *   %k2 = reshape(%k) {shape = [T, ..]}            (optional: the indexer's k, [T, H*D])
 *   %c2 = kv_write(%c, %k | %k2, %slot)            cache bf16[P, page, ..]
 *   %v  = slice(%x) {axis = 1, start = V, len = H*D}; %v3 = reshape(%v) {shape = [T, H, D]}
 *   %d2 = kv_write(%d, %v3, %slot)                 (optional: v, right after k's write)
 *   %q  = rms_norm_rope(%x, %wq, %cos, %sin) {start = Q, heads = HQ, eps, offset?}
 *                                                  (optional, with v: q of the same x)
 * becomes %c2, %d2, %q = rms_norm_rope_write(%c, %x, %w, %cos, %sin, %slot, %d, %wq)
 * {start, heads, eps, offset?, v_start = V, q_start = Q, q_heads = HQ} (ops.def; without q:
 * 7 operands, two results; without v: 6 operands, one result): the same rows by the same
 * arithmetic, written at the same slots with the same rule for a slot written twice, so the
 * pass is bitwise neutral and runs at every --quality. In M3.1 the attention reads k, v and
 * the indexer's k only from the caches, so every layer's q, k and v become one launch (and
 * every sparse layer's ik write one with ik's norm + rope): a small decode step's 11 cache
 * writes and 11 norm + rope launches (q, k, iq, ik) become 7.
 *
 * Legality: the rms_norm_rope is the bf16 form (4 operands; the int8 form is left alone),
 * its result (and the reshape's, if any) has exactly one use, and the chain is in the
 * kv_write's region. The fused op takes the kv_write's place: the cache and the slots are
 * available there, and x, w, cos, sin were available at the rms_norm_rope before it.
 * v joins (match_v) only where moving its write up to k's changes nothing another op could
 * see, and where the two caches are different buffers; q (match_q) only where it is the same
 * row arithmetic (x, tables, eps, offset, D), nothing reads it before the fused op defines it
 * and its rows go to no cache of their own (such a norm + rope fuses with its own write: an
 * x holding q | k | v | the indexer's k). The fused op's own type inference checks
 * the rest (cache rows of heads*D bf16 values).
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites, n_v, n_q;
  /* the match just found: k's chain, v's write with its reshape and slice (or NULL), q's
     rms_norm_rope (or NULL) */
  h3_op *norm_rope, *reshape;
  h3_op *v_write, *v_reshape, *v_slice, *q;
} kw_state;

/* The one op that uses v, or NULL. */
static h3_op *sole_user(const h3_module *m, const h3_value *v) {
  h3_op *user = NULL;
  return v->uses == 1 && h3_value_users(m, v, &user, 1) == 1 ? user : NULL;
}

/* v's write beside k's: the first kv_write after `write` in its region with the same slots,
 * a cache of the same type and rows reshape(slice(x, axis 1, v_start, H*D)) of k's x, with no
 * op between the two that reads or updates a buffer (so the v cache can be written at k's
 * write: nothing between sees the difference) and the v cache defined before k's write. */
static void match_v(kw_state *s, const h3_module *m, h3_op *write, const h3_value *x,
                    const h3_type *y) {
  s->v_write = s->v_reshape = s->v_slice = NULL;
  h3_op *vw = write->next;
  for (; vw && vw->code != H3_OP_KV_WRITE; vw = vw->next)
    if (vw->code != H3_OP_RESHAPE && vw->code != H3_OP_SLICE && vw->code != H3_OP_INDEX) return;
  if (!vw || vw->operands[2] != write->operands[2] ||
      !h3_type_equal(&vw->operands[0]->type, &write->operands[0]->type))
    return;
  const h3_value *vcache = vw->operands[0], *v3 = vw->operands[1];
  if (vcache == write->results[0]) return; /* v's cache is k's write: no second cache */
  /* two views of one buffer: the memory plan joins neither in-place result to its operand
     (each sees the other in its buffer), and the runtime would copy both caches a call */
  if (h3_value_root(vcache) == h3_value_root(write->operands[0])) return;
  for (const h3_op *o = write->next; o != vw; o = o->next)
    if (o->results[0] == vcache || h3_op_reads(o, vcache)) return;
  h3_op *reshape = h3_value_def_of(v3, H3_OP_RESHAPE);
  h3_op *slice = reshape ? h3_value_def_of(reshape->operands[0], H3_OP_SLICE) : NULL;
  if (!slice || slice->operands[0] != x || h3_op_attr_int(slice, "axis", -1) != 1 ||
      slice->results[0]->type.dims[1] != y->dims[1] * y->dims[2] || sole_user(m, v3) != vw)
    return;
  s->v_write = vw;
  s->v_reshape = reshape;
  s->v_slice = slice;
}

/* q's norm + rope of the same x before k's write: an rms_norm_rope of x (bf16 form, one
 * result: not sage-q-fusion's, which also writes q's codes) with k's tables, eps, offset and
 * head width, in the write's region after x's definition, whose result no op up to v's write
 * reads (the fused op defines it at k's write, and takes the caches of both writes as
 * operands) and that is not written into a cache itself (its only use a kv_write, through a
 * reshape or not): the nearest such op back from k's write. */
static h3_op *match_q(const h3_module *m, const h3_op *nr, const h3_op *write, const h3_op *vw) {
  const h3_op *x_def = nr->operands[0]->kind == H3_VALUE_RESULT ? nr->operands[0]->def : NULL;
  for (h3_op *q = write->prev; q && q != x_def; q = q->prev) {
    if (q == nr || q->code != H3_OP_RMS_NORM_ROPE || q->n_operands != 4 || q->n_results != 1 ||
        q->operands[0] != nr->operands[0] || q->operands[2] != nr->operands[2] ||
        q->operands[3] != nr->operands[3] || q->results[0]->type.dims[2] != nr->results[0]->type.dims[2] ||
        h3_op_attr_float(q, "eps", 1e-5) != h3_op_attr_float(nr, "eps", 1e-5) ||
        h3_op_attr_float(q, "offset", 0.0) != h3_op_attr_float(nr, "offset", 0.0) ||
        !h3_type_equal(&q->operands[1]->type, &nr->operands[1]->type))
      continue;
    /* a norm + rope whose rows go to a cache of their own fuses with that write instead */
    const h3_op *u = sole_user(m, q->results[0]);
    if (u && u->code == H3_OP_RESHAPE) u = sole_user(m, u->results[0]);
    if (u && u->code == H3_OP_KV_WRITE) continue;
    for (const h3_op *o = q->next; o != vw->next; o = o->next)
      if (h3_op_reads(o, q->results[0])) return NULL;
    return q;
  }
  return NULL;
}

static bool match(h3_rewriter *rw, h3_op *write, void *state) {
  kw_state *s = state;
  const h3_module *m = h3_rewriter_module(rw);
  h3_value *rows = write->operands[1];
  h3_op *reshape = h3_value_def_of(rows, H3_OP_RESHAPE);
  h3_value *nr_val = reshape ? reshape->operands[0] : rows;
  h3_op *nr = h3_value_def_of(nr_val, H3_OP_RMS_NORM_ROPE);
  if (!nr || nr->n_operands != 4 || nr->parent != write->parent) return false;
  if (reshape && (reshape->parent != write->parent || sole_user(m, rows) != write)) return false;
  if (sole_user(m, nr_val) != (reshape ? reshape : write)) return false;
  const h3_type *cache = &write->operands[0]->type, *y = &nr_val->type;
  if (cache->dtype != H3_BF16 || cache->rank < 3 || y->rank != 3) return false;
  int64_t row = 1;
  for (int i = 2; i < cache->rank; i++) row *= cache->dims[i];
  if (row != y->dims[1] * y->dims[2]) return false;
  s->norm_rope = nr;
  s->reshape = reshape;
  match_v(s, m, write, nr->operands[0], y);
  s->q = s->v_write ? match_q(m, nr, write, s->v_write) : NULL;
  return true;
}

static void erase_if_dead(h3_rewriter *rw, h3_op *op) {
  if (op->results[0]->uses == 0) h3_rewriter_erase(rw, op);
}

static h3_status rewrite(h3_rewriter *rw, h3_op *write, void *state, h3_diag *d) {
  kw_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  h3_op *nr = s->norm_rope;
  h3_op *vw = s->v_write, *q = s->q;
  h3_builder b = {m, write->parent, write, nr->span};
  h3_value *in[8] = {write->operands[0], nr->operands[0], nr->operands[1],  nr->operands[2],
                     nr->operands[3],    write->operands[2], vw ? vw->operands[0] : NULL,
                     q ? q->operands[1] : NULL};
  h3_attr attrs[12];
  int na = 0;
  for (int i = 0; i < nr->n_attrs && na < 9; i++) attrs[na++] = nr->attrs[i];
  if (vw) attrs[na++] = h3_attr_int(m, "v_start", h3_op_attr_int(s->v_slice, "start", 0));
  if (q) {
    attrs[na++] = h3_attr_int(m, "q_start", h3_op_attr_int(q, "start", 0));
    attrs[na++] = h3_attr_int(m, "q_heads", h3_op_attr_int(q, "heads", 1));
  }
  h3_op *f = h3_build_op(&b, H3_OP_RMS_NORM_ROPE_WRITE, q ? 8 : vw ? 7 : 6, in, na, attrs, 0, d);
  if (!f) return H3_ERR; /* the match checked every type: only out of memory gets here */
  h3_value_replace_all_uses(m, write->results[0], f->results[0]);
  h3_rewriter_erase(rw, write);
  if (s->reshape) h3_rewriter_erase(rw, s->reshape);
  h3_rewriter_erase(rw, nr);
  if (vw) {
    h3_value_replace_all_uses(m, vw->results[0], f->results[1]);
    h3_rewriter_erase(rw, vw);
    erase_if_dead(rw, s->v_reshape);
    erase_if_dead(rw, s->v_slice);
    s->n_v++;
  }
  if (q) {
    h3_value_replace_all_uses(m, q->results[0], f->results[2]);
    h3_rewriter_erase(rw, q);
    s->n_q++;
  }
  h3_rewriter_notify_new(rw, f);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern kw_patterns[] = {
    {.name = "norm-rope-write", .root = H3_OP_KV_WRITE, .benefit = 1, .match = match,
     .rewrite = rewrite},
};

static h3_status kw_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  kw_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, kw_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK)
    h3_pass_report(ctx, "fused norm+rope cache writes: %d (%d with v's write, %d with q)", s.n_sites,
                   s.n_v, s.n_q);
  return st;
}

const h3_pass h3_pass_kv_write_fusion = {
    .name = "kv-write-fusion",
    .description = "a kv_write of rms_norm_rope's rows (M3.1's k and indexer k), with v's "
                   "kv_write and q's norm + rope beside it, becomes one rms_norm_rope_write op "
                   "that norms, ropes and writes them into the paged caches; bitwise neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = kw_run,
};
