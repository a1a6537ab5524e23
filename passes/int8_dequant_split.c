/* int8_dequant_split.c: the `int8-dequant-split` pass: every linear_int8 becomes its GEMM
 * and its epilogue, so that elementwise-fusion can compute the dequantization inside the
 * kernels of the GEMM's consumers (SwiGLU, gated residuals) instead of a separate pass over
 * memory (docs/int8.md section 5).
 *
 *   %y = linear_int8(%q, %sx, %wq, %sw, %b?) {dtype?, chunk_rows?}
 * ==>
 *   %y.acc = matmul_i8(%q, %wq) {chunk_rows?}               // i32[.., N], exact
 *   %y     = dequant_i8(%y.acc, %sx, %sw, %b?) {dtype?}     // the fixed epilogue
 *
 * dequant_i8 is elementwise (ops.def), so elementwise-fusion takes it into the group of
 * its elementwise consumers (gated residual: `x + gate * y`). When EVERY use of %y is a
 * slice (the SwiGLU split of fc1 into its two halves), each slice moves onto the operands:
 *
 *   %a = slice(%y) {axis, start, len}
 * ==>
 *   %a = dequant_i8(slice(%y.acc), %sx', %sw', %b'?)  // axis = last: %sw' / %b' sliced the
 *                                                      // same way; else %sx' sliced
 *
 * so the consumer group reads the int32 accumulators at the slice's indices (elementwise-
 * fusion copies slices of outside values into the group) and no bf16 y is written at all.
 * Each element is computed by the same operations on the same values either way, and
 * dequant_i8 rounds to its dtype in every tier, so the pass is bitwise neutral at every
 * --quality (tests/int8). A %y with other users keeps one standalone dequant_i8 (the same
 * traffic as linear_int8's own epilogue) for the later int8 passes to take apart: the qkv
 * output's (rms_norm_rope and attention's v) by int8-qk-norm-rope, out_proj's (Plan B) by
 * int8-resid-dequant (docs/int8.md sections 9-10). The pass runs after the fusions that match linear_int8's
 * result (norm+modulate, q/k norm+rope, attention's v view) and before elementwise-fusion.
 * `--int8` enables it with int8-lowering and row-split; `--int8 --disable-pass
 * int8-dequant-split` keeps linear_int8 (the backends run GEMM + epilogue as one op).
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_module *m;
  h3_diag *d;
  h3_op **ops; /* linear_int8 ops, then the slices of one dequant_i8 */
  int n, cap;
  bool oom;
  int split, sunk_slices, sunk_values;
} split_state;

static int collect_linear(h3_op *op, void *arg) {
  split_state *s = arg;
  if (op->code != H3_OP_LINEAR_INT8) return 0;
  if (h3_ops_push(&s->ops, &s->n, &s->cap, op)) return 0;
  s->oom = true;
  return 1;
}

static h3_op *build(split_state *s, h3_op *before, h3_opcode code, int n, h3_value **operands,
                    int n_attrs, const h3_attr *attrs) {
  h3_builder b = {s->m, before->parent, before, before->span};
  h3_op *op = h3_build_op(&b, code, n, operands, n_attrs, attrs, 0, s->d);
  if (!op) h3_diag_note(s->d, before->span, "while splitting linear_int8 (a bug in int8-dequant-split)");
  return op;
}

static const char *suffixed(h3_module *m, const char *name, const char *suffix) {
  if (!name) return NULL;
  size_t a = strlen(name), b = strlen(suffix);
  char *p = h3_arena_alloc(&m->arena, a + b + 1);
  if (p) {
    memcpy(p, name, a);
    memcpy(p + a, suffix, b + 1);
  }
  return p;
}

/* dequant_i8(acc, sx, sw, bias?) with the dtype attribute of `like` (a linear_int8 or a
 * dequant_i8), before `before`. */
static h3_op *build_dequant(split_state *s, h3_op *before, const h3_op *like, h3_value *acc,
                            h3_value *sx, h3_value *sw, h3_value *bias) {
  const h3_attr *dt = h3_op_attr(like, "dtype");
  h3_value *ops[4] = {acc, sx, sw, bias};
  return build(s, before, H3_OP_DEQUANT_I8, bias ? 4 : 3, ops, dt ? 1 : 0, dt);
}

/* linear_int8 -> matmul_i8 + dequant_i8; returns the dequant_i8 (NULL on error). */
static h3_op *split_one(split_state *s, h3_op *op) {
  h3_value *gemm_ops[2] = {op->operands[0], op->operands[2]};
  const h3_attr *chunk = h3_op_attr(op, "chunk_rows");
  h3_op *mm = build(s, op, H3_OP_MATMUL_I8, 2, gemm_ops, chunk ? 1 : 0, chunk);
  if (!mm) return NULL;
  h3_value *y = op->results[0];
  mm->results[0]->name = suffixed(s->m, y->name, ".acc");
  h3_op *dq = build_dequant(s, op, op, mm->results[0], op->operands[1], op->operands[3],
                            op->n_operands > 4 ? op->operands[4] : NULL);
  if (!dq) return NULL;
  dq->results[0]->name = y->name;
  h3_value_replace_all_uses(s->m, y, dq->results[0]);
  h3_op_erase(op);
  s->split++;
  return dq;
}

/* slice(v) {axis, start, len} of sl's attributes (axis given), before `before`. */
static h3_value *slice_like(split_state *s, h3_op *before, const h3_op *sl, h3_value *v, int64_t axis) {
  h3_attr attrs[3] = {h3_attr_int(s->m, "axis", axis),
                      h3_attr_int(s->m, "start", h3_op_attr_int(sl, "start", 0)),
                      h3_attr_int(s->m, "len", h3_op_attr_int(sl, "len", 0))};
  h3_op *op = build(s, before, H3_OP_SLICE, 1, &v, 3, attrs);
  return op ? op->results[0] : NULL;
}

/* When every use of dq's result is a slice: each slice becomes a dequant_i8 of sliced
 * operands, and dq goes away. */
static h3_status sink_slices(split_state *s, h3_op *dq) {
  h3_value *y = dq->results[0];
  if (y->uses == 0) return H3_OK;
  if (y->uses > s->cap) {
    h3_op **o = realloc(s->ops, (size_t)y->uses * sizeof *o);
    if (!o) {
      s->oom = true;
      return H3_ERR;
    }
    s->ops = o;
    s->cap = y->uses;
  }
  int n = h3_value_users(s->m, y, s->ops, s->cap);
  if (n != y->uses) return H3_OK;
  for (int i = 0; i < n; i++)
    if (s->ops[i]->code != H3_OP_SLICE) return H3_OK;
  int last = y->type.rank - 1;
  for (int i = 0; i < n; i++) {
    h3_op *sl = s->ops[i];
    int64_t axis = h3_op_attr_int(sl, "axis", 0);
    h3_value *acc = slice_like(s, sl, sl, dq->operands[0], axis);
    h3_value *sx = dq->operands[1], *sw = dq->operands[2];
    h3_value *bias = dq->n_operands > 3 ? dq->operands[3] : NULL;
    if (axis == last) {
      sw = slice_like(s, sl, sl, sw, 0);
      if (bias) bias = slice_like(s, sl, sl, bias, 0);
    } else {
      sx = slice_like(s, sl, sl, sx, axis);
    }
    if (!acc || !sx || !sw || (dq->n_operands > 3 && !bias)) return H3_ERR;
    h3_op *part = build_dequant(s, sl, dq, acc, sx, sw, bias);
    if (!part) return H3_ERR;
    part->results[0]->name = sl->results[0]->name;
    h3_value_replace_all_uses(s->m, sl->results[0], part->results[0]);
    h3_op_erase(sl);
    s->sunk_slices++;
  }
  h3_op_erase(dq);
  s->sunk_values++;
  return H3_OK;
}

static h3_status split_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  split_state s = {.m = m, .d = d};
  h3_status st = H3_OK;
  for (int g = 0; g < m->n_graphs && st == H3_OK && !s.oom; g++) {
    s.n = 0;
    h3_region_walk(&m->graphs[g]->body, collect_linear, &s);
    int n = s.n;
    h3_op **linears = n ? malloc((size_t)n * sizeof *linears) : NULL;
    if (n && !linears) {
      s.oom = true;
      break;
    }
    if (n) memcpy(linears, s.ops, (size_t)n * sizeof *linears);
    for (int i = 0; i < n && st == H3_OK; i++) {
      h3_op *dq = split_one(&s, linears[i]);
      st = dq ? sink_slices(&s, dq) : H3_ERR;
    }
    free(linears);
  }
  if (s.oom) {
    h3_diag_error(d, (h3_span){0}, "free memory or use a smaller --config",
                  "out of memory in int8-dequant-split");
    st = H3_ERR;
  }
  if (st == H3_OK && s.split)
    h3_pass_report(ctx,
                   "%d linear_int8 split into matmul_i8 + dequant_i8; %d slices of %d results "
                   "read the int32 accumulators",
                   s.split, s.sunk_slices, s.sunk_values);
  free(s.ops);
  return st;
}

const h3_pass h3_pass_int8_dequant_split = {
    .name = "int8-dequant-split",
    .description = "--int8: linear_int8 -> matmul_i8 (int32) + dequant_i8 (elementwise, fused "
                   "into the consumers; slices read the accumulators); bitwise neutral "
                   "(docs/int8.md §5)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {"int8-lowering", NULL},
    .run = split_run,
};
