/* int8_qk_norm_rope.c: the `int8-qk-norm-rope` pass (--int8): the q/k norm+rope kernels read the
 * int32 accumulators of an int8 qkv GEMM themselves, and the qkv dequantization writes v's
 * columns only (docs/int8.md section 9).
 *
 * After int8-dequant-split, the qkv projection of an H3 block is
 *   %y = dequant_i8(%acc, %sx, %sw, %b?)                        bf16[T, C] of i32[T, C]
 *   %q = rms_norm_rope(%y, %wq, %cos, %sin) {start = Sq, ...}   (qk-norm-rope-fusion)
 *   %k = rms_norm_rope(%y, %wk, %cos, %sin) {start = Sk, ...}
 *   %o = attention(%q, %k, %y) {..., v_view = [Sv, C]}          (attention-v-view)
 * and becomes
 *   %q  = rms_norm_rope(%acc, %wq, %cos, %sin, %sx, %sw, %b?) {start = Sq, ...}
 *   %k  = rms_norm_rope(%acc, %wk, %cos, %sin, %sx, %sw, %b?) {start = Sk, ...}
 *   %v  = dequant_i8(slice(%acc) {axis 1, Sv, L}, %sx, slice(%sw) {axis 0, Sv, L},
 *                    slice(%b)?)                                bf16[T, L], L = Hk*D
 *   %v3 = reshape(%v) {shape = [T, Hk, D]}
 *   %o  = attention(%q, %k, %v3) {...}                          (no v_view)
 * The int8 form of rms_norm_rope (ops.def) dequantizes each element exactly as dequant_i8
 * does and rounds it to bf16, and the sliced dequant_i8 computes v's elements from the same
 * values with the same operations, so the pass is bitwise neutral at every --quality. v
 * gets its own contiguous [T, L] tensor (elementwise-fusion makes the slices + dequant one
 * kernel reading the accumulators at v's columns) rather than a view into a [T, C] buffer:
 * the qkv dequantization no longer writes the q and k columns, and nothing else needs a
 * [T, C] bf16 tensor. Per token row of the H3 block (C = 21504, L = 7168) the traffic goes
 * from 4C + 2C (dequant) + 2*2L (q, k reads) = 157,696 bytes to 4*2L (q, k read int32) +
 * 4L + 2L (v's dequant) = 100,352 bytes.
 *
 * Legality (anything else is left alone): the dequant_i8 is bf16[T, C] (rank 2, s_x [T]),
 * its bias (if any) bf16, f16 or f32; EVERY use of its result is x of a bf16-form
 * rms_norm_rope or v of an attention with v_view (no other operand of those ops), in the
 * dequant's region, and at least one is an rms_norm_rope (else there is nothing to gain).
 * The new ops take the places of the ops they replace (every operand is defined before the
 * dequant_i8, hence before them).
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_module *m;
  h3_diag *d;
  h3_op **ops; /* the dequant_i8 ops, then the users of one */
  int n, cap;
  bool oom;
  int sites, norms, views;
} qk_state;

static bool narrow_float(h3_dtype t) { return t == H3_BF16 || t == H3_F16 || t == H3_F32; }

static bool grow(qk_state *s, int want) {
  if (want <= s->cap) return true;
  int c = s->cap ? 2 * s->cap : 32;
  if (c < want) c = want;
  h3_op **o = realloc(s->ops, (size_t)c * sizeof *o);
  if (!o) {
    s->oom = true;
    return false;
  }
  s->ops = o;
  s->cap = c;
  return true;
}

static int collect_dequant(h3_op *op, void *arg) {
  qk_state *s = arg;
  if (op->code != H3_OP_DEQUANT_I8) return 0;
  if (!grow(s, s->n + 1)) return 1;
  s->ops[s->n++] = op;
  return 0;
}

/* Whether use u of y (an rms_norm_rope or attention) reads y as the operand the rewrite
 * replaces, and only there. */
static bool user_fits(const h3_op *u, const h3_value *y, const h3_op *dq) {
  if (u->parent != dq->parent) return false;
  int at;
  /* one result: a norm that also writes sage's q codes (sage-q-fusion) keeps its form */
  if (u->code == H3_OP_RMS_NORM_ROPE && u->n_operands == 4 && u->n_results == 1) at = 0;
  else if (u->code == H3_OP_ATTENTION && u->n_operands == 3 && h3_op_attr(u, "v_view")) at = 2;
  else return false;
  for (int i = 0; i < u->n_operands; i++)
    if ((u->operands[i] == y) != (i == at)) return false;
  return true;
}

static h3_op *build(qk_state *s, h3_op *before, h3_opcode code, int n, h3_value **operands,
                    int n_attrs, const h3_attr *attrs) {
  h3_builder b = {s->m, before->parent, before, before->span};
  h3_op *op = h3_build_op(&b, code, n, operands, n_attrs, attrs, 0, s->d);
  if (!op) h3_diag_note(s->d, before->span, "while rewriting q/k norm+rope (a bug in int8-qk-norm-rope)");
  return op;
}

static h3_value *slice_of(qk_state *s, h3_op *before, h3_value *v, int64_t axis, int64_t start,
                          int64_t len) {
  h3_attr attrs[3] = {h3_attr_int(s->m, "axis", axis), h3_attr_int(s->m, "start", start),
                      h3_attr_int(s->m, "len", len)};
  h3_op *op = build(s, before, H3_OP_SLICE, 1, &v, 3, attrs);
  return op ? op->results[0] : NULL;
}

/* u's result replaced by op's; u erased. */
static void replace(qk_state *s, h3_op *u, h3_op *op) {
  op->results[0]->name = u->results[0]->name;
  h3_value_replace_all_uses(s->m, u->results[0], op->results[0]);
  h3_op_erase(u);
}

/* rms_norm_rope(y, w, cos, sin) -> rms_norm_rope(acc, w, cos, sin, sx, sw, bias?). */
static h3_status rewrite_norm(qk_state *s, h3_op *dq, h3_op *u) {
  h3_value *in[7] = {dq->operands[0], u->operands[1], u->operands[2], u->operands[3],
                     dq->operands[1], dq->operands[2], dq->n_operands > 3 ? dq->operands[3] : NULL};
  h3_op *op = build(s, u, H3_OP_RMS_NORM_ROPE, dq->n_operands > 3 ? 7 : 6, in, u->n_attrs, u->attrs);
  if (!op) return H3_ERR;
  replace(s, u, op);
  s->norms++;
  return H3_OK;
}

/* attention(q, k, y) {v_view = [S, C]} -> attention(q, k, reshape(dequant_i8 of v's columns)). */
static h3_status rewrite_view(qk_state *s, h3_op *dq, h3_op *u) {
  const h3_type *kt = &u->operands[1]->type;
  const int64_t T = kt->dims[0], hk = kt->dims[1], D = kt->dims[2], L = hk * D;
  const int64_t start = h3_op_attr(u, "v_view")->ints[0];
  h3_value *acc = slice_of(s, u, dq->operands[0], 1, start, L);
  h3_value *sw = acc ? slice_of(s, u, dq->operands[2], 0, start, L) : NULL;
  h3_value *bias = sw && dq->n_operands > 3 ? slice_of(s, u, dq->operands[3], 0, start, L) : NULL;
  if (!sw || (dq->n_operands > 3 && !bias)) return H3_ERR;
  h3_value *dq_in[4] = {acc, dq->operands[1], sw, bias};
  const h3_attr *dt = h3_op_attr(dq, "dtype");
  h3_op *v = build(s, u, H3_OP_DEQUANT_I8, bias ? 4 : 3, dq_in, dt ? 1 : 0, dt);
  if (!v) return H3_ERR;
  const int64_t shape[3] = {T, hk, D};
  h3_attr rs = h3_attr_ints(s->m, "shape", 3, shape);
  h3_value *vv = v->results[0];
  h3_op *v3 = build(s, u, H3_OP_RESHAPE, 1, &vv, 1, &rs);
  if (!v3) return H3_ERR;
  h3_attr attrs[16];
  int na = 0;
  for (int i = 0; i < u->n_attrs && na < 16; i++)
    if (strcmp(u->attrs[i].name, "v_view") != 0) attrs[na++] = u->attrs[i];
  h3_value *in[3] = {u->operands[0], u->operands[1], v3->results[0]};
  h3_op *op = build(s, u, H3_OP_ATTENTION, 3, in, na, attrs);
  if (!op) return H3_ERR;
  replace(s, u, op);
  s->views++;
  return H3_OK;
}

static h3_status rewrite_one(qk_state *s, h3_op *dq) {
  h3_value *y = dq->results[0];
  const h3_type *yt = &y->type;
  if (yt->rank != 2 || yt->dtype != H3_BF16 || dq->operands[1]->type.rank != 1) return H3_OK;
  if (dq->n_operands > 3 && !narrow_float(dq->operands[3]->type.dtype)) return H3_OK;
  if (y->uses == 0 || !grow(s, y->uses)) return s->oom ? H3_ERR : H3_OK;
  int n = h3_value_users(s->m, y, s->ops, s->cap);
  if (n != y->uses) return H3_OK;
  int norms = 0;
  for (int i = 0; i < n; i++) {
    if (!user_fits(s->ops[i], y, dq)) return H3_OK;
    norms += s->ops[i]->code == H3_OP_RMS_NORM_ROPE;
  }
  if (norms == 0) return H3_OK;
  for (int i = 0; i < n; i++) {
    h3_op *u = s->ops[i];
    h3_status st = u->code == H3_OP_RMS_NORM_ROPE ? rewrite_norm(s, dq, u) : rewrite_view(s, dq, u);
    if (st != H3_OK) return st;
  }
  h3_op_erase(dq);
  s->sites++;
  return H3_OK;
}

static h3_status qk_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  qk_state s = {.m = m, .d = d};
  h3_status st = H3_OK;
  for (int g = 0; g < m->n_graphs && st == H3_OK && !s.oom; g++) {
    s.n = 0;
    h3_region_walk(&m->graphs[g]->body, collect_dequant, &s);
    int n = s.n;
    h3_op **dqs = n ? malloc((size_t)n * sizeof *dqs) : NULL;
    if (n && !dqs) {
      s.oom = true;
      break;
    }
    if (n) memcpy(dqs, s.ops, (size_t)n * sizeof *dqs);
    for (int i = 0; i < n && st == H3_OK; i++) st = rewrite_one(&s, dqs[i]);
    free(dqs);
  }
  if (s.oom) {
    h3_diag_error(d, (h3_span){0}, "free memory or use a smaller --config",
                  "out of memory in int8-qk-norm-rope");
    st = H3_ERR;
  }
  if (st == H3_OK && s.sites)
    h3_pass_report(ctx,
                   "%d qkv dequantizations: %d q/k norm+rope read the int32 accumulators, %d "
                   "attention v read a dequantized column slice",
                   s.sites, s.norms, s.views);
  free(s.ops);
  return st;
}

const h3_pass h3_pass_int8_qk_norm_rope = {
    .name = "int8-qk-norm-rope",
    .description = "--int8: q/k rms_norm_rope read the qkv int32 accumulators (dequantized "
                   "in the kernel); the qkv dequant writes v's columns only; bitwise neutral "
                   "(docs/int8.md §9)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-dequant-split", NULL},
    .run = qk_run,
};
