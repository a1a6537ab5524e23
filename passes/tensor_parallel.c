/* tensor_parallel.c: the `tensor-parallel` pass (opt-in, `h3c compile --gpus N`): tensor
 * parallelism of attention and the dense MLPs, expert parallelism of the MoE, over N ranks
 * (docs/parallel.md, "M3.1").
 *
 * It rewrites the function graphs that hold a layer stack (a loop labelled `*_stack`: M3.1's
 * dense_stack and sparse_stack). Rank r computes the heads [r*H/N, (r+1)*H/N) of every
 * attention and the columns [r*F/N, (r+1)*F/N) of every dense MLP; each layer's input and
 * output are whole (replicated) on every rank.
 *   - Head split: every attention of a stack (paged_attention, sparse_attention) runs on its
 *     rank's q heads and kv heads (axis 1 of q, axis 2 of the per-layer caches). The split is
 *     propagated over the values around it (q/k norms, rope, reshapes, kv_write, the caches'
 *     index / set_index, the loop-carried caches, the graph's cache inputs and outputs:
 *     rank r's cache inputs hold its kv heads only, [.., kv_heads/N, head_dim]). The
 *     indexer stays whole: sparse_attention reads its rank's heads of the block selection
 *     through `shard {axis = 1}`.
 *   - Column split: the slices `slice(linear(h, W), axis = last, start_i, len_i)` of a split
 *     value (q, k, v of the fused qkv projection; gate and up of an MLP) read one linear of
 *     the rank's rows of W, `concat(shard(slice(W, axis = 0, start_i, len_i), axis = 0) ..)`.
 *   - Row split: `linear(x, W)` whose x is split along its last axis (o_proj, down_proj)
 *     becomes `all_reduce(linear(x, shard(W, axis = 1), dtype = f32)) {dtype = bf16}`: fp32
 *     partial sums added over the ranks, rounded once.
 *   A dense MLP is split when every value from its down_proj's input back to its
 *   projection splits; otherwise (the qkv / indexer projections, which read the norm of
 *   the whole residual) the linear stays whole.
 *   - Expert split: `moe` of a stack reads its rank's E/N experts (`shard {axis = 0}` of both
 *     expert weights, attribute `ranks = N`) for all tokens with the router's full top-k,
 *     and `all_reduce` sums the ranks' contributions.
 * Everything else (embedding, norms, router, indexer, lm_head, the draft graphs) runs whole
 * on every rank. The programs' cache buffers (`zeros` passed to a graph) get the graphs'
 * per-rank cache types. A head count, kv head count, MLP width or expert count that N does
 * not divide is an error at its place, with the counts that work.
 */
#include "h3/op_registry.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

static const char PASS[] = "tensor-parallel";

typedef struct {
  h3_value *v;
  int axis;    /* v is split along this axis: rank r holds part r of N */
  bool source; /* made split by the pass (a shard): its type is already the part's */
} tp_fact;

typedef struct {
  h3_module *m;
  h3_diag *d;
  int64_t n;       /* ranks */
  h3_op **ops;     /* every op of the graph being split (nested ones included) */
  int n_ops, cap_ops;
  tp_fact *fact;   /* the split values of the graph */
  int n_fact, cap_fact;
  h3_op **cols;    /* slices of a projection to compute as the rank's columns */
  int n_cols, cap_cols;
  h3_op **rows;    /* linears whose x is split along its contraction axis */
  int n_rows, cap_rows;
  bool tentative;  /* an MLP being tried: a conflict undoes it silently */
  bool stopped;          /* the split could not go on ... */
  const h3_op *conflict; /* ... at this op (NULL: at a value outside every op) */
  bool oom;
  int graphs, heads, mlps, experts, reduces, inputs; /* for the report */
} tp_ctx;

static int fact_axis(const tp_ctx *c, const h3_value *v) {
  for (int i = 0; i < c->n_fact; i++)
    if (c->fact[i].v == v) return c->fact[i].axis;
  return -1;
}

static void stop(tp_ctx *c, const h3_op *at) {
  if (!c->stopped) c->stopped = true, c->conflict = at;
}

/* v is split along axis; a different axis already known for v stops the split at `at`. */
static void split(tp_ctx *c, h3_value *v, int axis, const h3_op *at, bool source) {
  int have = fact_axis(c, v);
  if (have == axis) return;
  if (have >= 0 || axis < 0 || axis >= v->type.rank) {
    stop(c, at);
    return;
  }
  if (c->n_fact == c->cap_fact) {
    int cap = c->cap_fact ? 2 * c->cap_fact : 64;
    tp_fact *f = realloc(c->fact, (size_t)cap * sizeof *f);
    if (!f) {
      c->oom = true;
      stop(c, at);
      return;
    }
    c->fact = f, c->cap_fact = cap;
  }
  c->fact[c->n_fact++] = (tp_fact){v, axis, source};
}

static void record(tp_ctx *c, h3_op ***list, int *n, int *cap, h3_op *op) {
  for (int i = 0; i < *n; i++)
    if ((*list)[i] == op) return;
  if (!h3_ops_push(list, n, cap, op)) c->oom = true, stop(c, op);
}

static int64_t outer(const h3_type *t, int axis) {
  int64_t p = 1;
  for (int i = 0; i < axis; i++) p *= t->dims[i];
  return p;
}

/* The axis of `to` whose split holds the same elements as splitting `from` along axis
 * (a reshape keeps the element order: the same outer extent splits the same runs), or -1. */
static int reshape_axis(const h3_type *from, int axis, const h3_type *to) {
  for (int b = 0; b < to->rank; b++)
    if (outer(to, b) == outer(from, axis) && to->dims[b] > 1) return b;
  return -1;
}

static bool is_attention(h3_opcode code) {
  return code == H3_OP_PAGED_ATTENTION || code == H3_OP_SPARSE_ATTENTION;
}

/* op touches a split value: operand i (res < 0) or result res, split along axis. Adds the
 * splits this implies for op's other values, records the rewrites, or stops at op. */
static void relate(tp_ctx *c, h3_op *op, int i, int res, int axis) {
  h3_value *v = res >= 0 ? op->results[res] : op->operands[i];
  int last = v->type.rank - 1;
  switch (op->code) {
  case H3_OP_LOOP: { /* operand k, body argument k + 1, yield operand k, result k */
    int k = res >= 0 ? res : i;
    split(c, op->operands[k], axis, op, false);
    split(c, op->regions[0].args[k + 1], axis, op, false);
    split(c, op->regions[0].last->operands[k], axis, op, false);
    split(c, op->results[k], axis, op, false);
    return;
  }
  case H3_OP_YIELD: {
    h3_op *loop = op->parent->parent;
    if (loop && loop->code == H3_OP_LOOP) relate(c, loop, i, -1, axis);
    else stop(c, op);
    return;
  }
  case H3_OP_RETURN: /* a cache output: its type becomes the rank's part */
    if (c->tentative) stop(c, op);
    return;
  case H3_OP_RMS_NORM:
  case H3_OP_ROPE: /* per head: any axis but the normalised / rotated one */
    if (axis == last || (res < 0 && i != 0)) stop(c, op);
    else split(c, op->operands[0], axis, op, false), split(c, op->results[0], axis, op, false);
    return;
  case H3_OP_RESHAPE: {
    h3_value *other = res >= 0 ? op->operands[0] : op->results[0];
    split(c, other, reshape_axis(&v->type, axis, &other->type), op, false);
    return;
  }
  case H3_OP_SLICE:
    if (h3_op_attr_int(op, "axis", 0) != axis) {
      split(c, op->operands[0], axis, op, false), split(c, op->results[0], axis, op, false);
    } else if (res >= 0 && axis == last && op->operands[0]->kind == H3_VALUE_RESULT &&
               op->operands[0]->def->code == H3_OP_LINEAR) {
      record(c, &c->cols, &c->n_cols, &c->cap_cols, op); /* the rank's columns */
    } else {
      stop(c, op);
    }
    return;
  case H3_OP_CONCAT:
    if (h3_op_attr_int(op, "axis", 0) == axis) {
      stop(c, op);
      return;
    }
    for (int k = 0; k < op->n_operands; k++) split(c, op->operands[k], axis, op, false);
    split(c, op->results[0], axis, op, false);
    return;
  case H3_OP_INDEX: /* index(all, i): the result is all[i] */
    if (res >= 0) split(c, op->operands[0], axis + 1, op, false);
    else if (i == 0 && axis >= 1) split(c, op->results[0], axis - 1, op, false);
    else stop(c, op);
    return;
  case H3_OP_SET_INDEX: /* set_index(all, i, part) */
  case H3_OP_KV_WRITE:  /* kv_write(cache [P, page, ..], x [T, ..], slot): x's axis a is
                           the cache's a + 1 */
  {
    bool set = op->code == H3_OP_SET_INDEX;
    int part = set ? 2 : 1, whole = res >= 0 || i == 0 ? axis : axis + 1;
    if ((res < 0 && i != 0 && i != part) || whole < (set ? 1 : 2)) {
      stop(c, op); /* the index, the slots, or a cache's page axes */
      return;
    }
    split(c, op->operands[0], whole, op, false);
    split(c, op->results[0], whole, op, false);
    split(c, op->operands[part], whole - 1, op, false);
    return;
  }
  case H3_OP_PAGED_ATTENTION:
  case H3_OP_SPARSE_ATTENTION: { /* q and the result by heads (1), the caches by kv heads (2) */
    bool cache = res < 0 && (i == 1 || i == 2);
    if (axis != (cache ? 2 : 1) || (res < 0 && i > 3) || (res < 0 && i == 3 && op->code != H3_OP_SPARSE_ATTENTION)) {
      stop(c, op);
      return;
    }
    split(c, op->operands[0], 1, op, false);
    split(c, op->operands[1], 2, op, false);
    split(c, op->operands[2], 2, op, false);
    if (op->code == H3_OP_SPARSE_ATTENTION) split(c, op->operands[3], 1, op, false);
    split(c, op->results[0], 1, op, false);
    return;
  }
  case H3_OP_LINEAR: /* x split along the contraction axis: partial sums, all_reduced */
    if (res < 0 && i == 0 && axis == last) record(c, &c->rows, &c->n_rows, &c->cap_rows, op);
    else stop(c, op);
    return;
  case H3_OP_SHARD:
    if (res < 0) stop(c, op);
    return;
  default: break;
  }
  if (!h3_op_is_elementwise(op->code) || op->n_results != 1) {
    stop(c, op);
    return;
  }
  const h3_type *r = &op->results[0]->type; /* same-shaped operands split; broadcasts stay */
  if (axis >= r->rank || r->rank != v->type.rank) {
    stop(c, op);
    return;
  }
  for (int k = 0; k < op->n_operands; k++) {
    const h3_type *t = &op->operands[k]->type;
    if (t->rank == r->rank && t->dims[axis] == r->dims[axis] && r->dims[axis] != 1)
      split(c, op->operands[k], axis, op, false);
  }
  split(c, op->results[0], axis, op, false);
}

/* Propagates the facts from index `from` on until every split value's definition and uses
 * agree, or the split stops (c->conflict). */
static void propagate(tp_ctx *c, int from) {
  for (int f = from; f < c->n_fact && !c->stopped; f++) {
    h3_value *v = c->fact[f].v;
    int axis = c->fact[f].axis;
    if (!c->fact[f].source) {
      if (v->kind == H3_VALUE_RESULT) {
        relate(c, v->def, -1, v->index, axis);
      } else if (v->kind == H3_VALUE_REGION_ARG) {
        h3_op *loop = v->region->parent;
        if (loop && loop->code == H3_OP_LOOP && v->index > 0) relate(c, loop, -1, v->index - 1, axis);
        else stop(c, loop);
      } else if (v->kind != H3_VALUE_INPUT || c->tentative) {
        stop(c, NULL); /* a weight, or an input an MLP would split */
      }
    }
    for (int k = 0; k < c->n_ops && !c->stopped; k++)
      for (int i = 0; i < c->ops[k]->n_operands; i++)
        if (c->ops[k]->operands[i] == v) relate(c, c->ops[k], i, -1, axis);
  }
}

/* ---- finding the split ------------------------------------------------------------------ */
static bool is_stack(const h3_op *op) {
  const char *l = op->code == H3_OP_LOOP ? h3_op_attr_string(op, "label", "") : "";
  size_t n = strlen(l);
  return n > 6 && !strcmp(l + n - 6, "_stack");
}

static int collect(h3_op *op, void *p) {
  tp_ctx *c = p;
  if (!h3_ops_push(&c->ops, &c->n_ops, &c->cap_ops, op)) c->oom = true;
  return 0;
}

/* Whether op is inside a layer stack. */
static bool in_stack(const h3_op *op) {
  for (const h3_region *r = op->parent; r && r->parent; r = r->parent->parent)
    if (is_stack(r->parent)) return true;
  return false;
}

/* "(here: 1 2 4)": the rank counts that divide every count of `counts`. */
static void counts_hint(char *hint, size_t len, const char *what, const int64_t *counts, int n) {
  int k = snprintf(hint, len, "pick --gpus N dividing %s (here:", what);
  for (int64_t g = 1; g <= counts[0] && k < (int)len - 24; g++) {
    bool all = true;
    for (int i = 0; i < n; i++) all = all && counts[i] % g == 0;
    if (all) k += snprintf(hint + k, len - (size_t)k, " %lld", (long long)g);
  }
  snprintf(hint + k, len - (size_t)k, ")");
}

static h3_value *build1(tp_ctx *c, h3_op *before, h3_opcode code, int n_in, h3_value **in,
                        int na, const h3_attr *a) {
  h3_builder b = {c->m, before->parent, before, before->span};
  h3_op *op = h3_build_op(&b, code, n_in, in, na, a, 0, c->d);
  return op ? op->results[0] : NULL;
}

static h3_value *shard(tp_ctx *c, h3_op *before, h3_value *x, int axis) {
  h3_attr a[2] = {h3_attr_int(c->m, "ranks", c->n), h3_attr_int(c->m, "axis", axis)};
  return build1(c, before, H3_OP_SHARD, 1, &x, 2, a);
}

/* The heads of every attention of a stack: checked, each sparse_attention's selection
 * read through a shard (first: the split of one attention reaches the others through the
 * caches), then split with all they touch. */
static h3_status split_heads(tp_ctx *c) {
  for (int k = 0; k < c->n_ops; k++) {
    h3_op *op = c->ops[k];
    if (!is_attention(op->code) || !in_stack(op)) continue;
    int64_t heads[2] = {op->operands[0]->type.dims[1], op->operands[1]->type.dims[2]};
    if (heads[0] % c->n || heads[1] % c->n) {
      char hint[200];
      counts_hint(hint, sizeof hint, "the kv head count", (int64_t[]){heads[1], heads[0]}, 2);
      h3_diag_error(c->d, op->span, hint,
                    "%s: attention has %lld query and %lld kv heads, which do not split over "
                    "--gpus %lld (each rank computes H/N heads)",
                    PASS, (long long)heads[0], (long long)heads[1], (long long)c->n);
      return H3_ERR;
    }
    if (op->code == H3_OP_SPARSE_ATTENTION) { /* the indexer's selection, whole: its heads */
      h3_value *sel = shard(c, op, op->operands[3], 1);
      if (!sel) return H3_ERR;
      h3_op_set_operand(op, 3, sel);
      split(c, sel, 1, op, true);
    }
  }
  for (int k = 0; k < c->n_ops && !c->oom; k++) {
    h3_op *op = c->ops[k];
    if (!is_attention(op->code) || !in_stack(op)) continue;
    int from = c->n_fact;
    split(c, op->results[0], 1, op, false);
    propagate(c, from);
    if (c->stopped && !c->oom) {
      const h3_op *at = c->conflict ? c->conflict : op;
      h3_diag_error(c->d, at->span,
                    "tensor parallelism splits attention by heads: only per-head ops (q/k norm, "
                    "rope, reshapes, kv_write and the caches' index / set_index), projections "
                    "and o_proj may touch q, k, v and the caches; compile without --gpus",
                    "%s: %s reads or makes a value split by heads but cannot take a part of them",
                    PASS, h3_opcode_name(at->code));
      return H3_ERR;
    }
    c->heads++;
  }
  return c->oom ? H3_ERR : H3_OK;
}

/* Every other linear of a stack whose input can split along its contraction axis back to
 * a projection (a dense MLP: down_proj's input from gate and up): tried, kept when the
 * split goes through. */
static void split_mlps(tp_ctx *c) {
  for (int k = 0; k < c->n_ops && !c->oom; k++) {
    h3_op *op = c->ops[k];
    if (op->code != H3_OP_LINEAR || !in_stack(op) || fact_axis(c, op->operands[0]) >= 0 ||
        fact_axis(c, op->results[0]) >= 0)
      continue;
    int facts = c->n_fact, cols = c->n_cols, rows = c->n_rows;
    c->tentative = true;
    split(c, op->operands[0], op->operands[0]->type.rank - 1, op, false);
    propagate(c, facts);
    c->tentative = false;
    if (!c->stopped) {
      c->mlps++;
      continue;
    }
    c->n_fact = facts, c->n_cols = cols, c->n_rows = rows;
    c->stopped = false, c->conflict = NULL;
  }
}

/* Every split extent divides by N. */
static h3_status check_parts(tp_ctx *c) {
  for (int f = 0; f < c->n_fact; f++) {
    const tp_fact *t = &c->fact[f];
    int64_t n = t->v->type.dims[t->axis];
    if (t->source || n % c->n == 0) continue;
    char hint[200];
    counts_hint(hint, sizeof hint, "this extent", &n, 1);
    h3_span at = t->v->kind == H3_VALUE_RESULT ? t->v->def->span : t->v->span;
    char ts[96];
    h3_diag_error(c->d, at, hint, "%s: %s %s is split along axis %d, whose %lld entries do not "
                  "split over --gpus %lld", PASS, t->v->name ? t->v->name : "a value",
                  h3_type_str(&t->v->type, ts, sizeof ts), t->axis, (long long)n, (long long)c->n);
    return H3_ERR;
  }
  return H3_OK;
}

/* ---- applying it ------------------------------------------------------------------------ */
/* The split values get their part's type (a reshape's shape with it, and a filled buffer's:
 * a `zeros` / `full` const has the same value in every part). */
static void shrink(tp_ctx *c) {
  for (int f = 0; f < c->n_fact; f++) {
    tp_fact *t = &c->fact[f];
    if (t->source) continue;
    h3_value *v = t->v;
    v->type.dims[t->axis] /= c->n;
    if (v->kind == H3_VALUE_INPUT) c->inputs++;
    if (v->kind == H3_VALUE_RESULT &&
        (v->def->code == H3_OP_RESHAPE || (v->def->code == H3_OP_CONST && h3_op_attr(v->def, "shape"))))
      h3_op_set_attr(c->m, v->def, h3_attr_ints(c->m, "shape", v->type.rank, v->type.dims));
  }
}

/* The split slices s_1 .. s_k of one projection linear(h, W) (along its last axis, at
 * start_i, len_i) read linear(h, concat(shard(slice(W, axis = 0, start_i, len_i), axis = 0)
 * .., axis = 0)): the rank's columns of each, one after the other (s_i at the sum of the
 * len_j / N before it). Keeping one linear and its slices keeps the shape the fusions of
 * the one-rank plan match (qk-norm-rope-fusion, attention-v-view). */
static h3_status split_columns(tp_ctx *c) {
  for (int k = 0; k < c->n_cols; k++) {
    if (!c->cols[k]) continue; /* done with an earlier slice of its linear */
    h3_op *lin = c->cols[k]->operands[0]->def;
    h3_value *part[8];
    int n = 0;
    for (int q = k; q < c->n_cols; q++) {
      h3_op *s = c->cols[q];
      if (!s || s->operands[0]->def != lin) continue;
      if (n == 8) {
        h3_diag_error(c->d, lin->span, "split fewer slices of one projection",
                      "%s: more than 8 slices of one projection", PASS);
        return H3_ERR;
      }
      h3_attr a[3] = {h3_attr_int(c->m, "axis", 0),
                      h3_attr_int(c->m, "start", h3_op_attr_int(s, "start", 0)),
                      h3_attr_int(c->m, "len", h3_op_attr_int(s, "len", 0))};
      h3_value *w = build1(c, lin, H3_OP_SLICE, 1, &lin->operands[1], 3, a);
      if (!(part[n++] = w ? shard(c, lin, w, 0) : NULL)) return H3_ERR;
    }
    h3_attr cat = h3_attr_int(c->m, "axis", 0);
    h3_value *w = n > 1 ? build1(c, lin, H3_OP_CONCAT, n, part, 1, &cat) : part[0];
    h3_value *in[2] = {lin->operands[0], w};
    h3_value *y = w ? build1(c, lin, H3_OP_LINEAR, 2, in, lin->n_attrs, lin->attrs) : NULL;
    if (!y) return H3_ERR;
    int64_t at = 0;
    for (int q = k; q < c->n_cols; q++) {
      h3_op *s = c->cols[q];
      if (!s || s->operands[0]->def != lin) continue;
      c->cols[q] = NULL;
      int64_t len = s->results[0]->type.dims[s->results[0]->type.rank - 1];
      h3_op_set_operand(s, 0, y);
      h3_op_set_attr(c->m, s, h3_attr_int(c->m, "start", at));
      h3_op_set_attr(c->m, s, h3_attr_int(c->m, "len", len));
      at += len;
    }
    if (lin->results[0]->uses == 0) h3_op_erase(lin);
  }
  return H3_OK;
}

/* y = all_reduce(x) {ranks = N} placed after x's op, read by every user of x instead. */
static h3_value *reduce_after(tp_ctx *c, h3_value *x) {
  h3_attr a = h3_attr_int(c->m, "ranks", c->n);
  h3_value *y = build1(c, x->def->next, H3_OP_ALL_REDUCE, 1, &x, 1, &a);
  if (!y) return NULL;
  h3_value_replace_all_uses(c->m, x, y);
  h3_op_set_operand(y->def, 0, x);
  c->reduces++;
  return y;
}

/* linear(x, W) with x split along its contraction axis -> all_reduce(linear(x, shard(W,
 * axis = 1), dtype = f32)) {dtype = linear's}: fp32 partial sums, added over the ranks and
 * rounded once, as the whole linear rounds its fp32 sum once (no cast a fusion could drop). */
static h3_status split_rows(tp_ctx *c) {
  for (int k = 0; k < c->n_rows; k++) {
    h3_op *lin = c->rows[k];
    h3_value *w = shard(c, lin, lin->operands[1], 1);
    h3_value *in[2] = {lin->operands[0], w};
    h3_attr f32 = h3_attr_dtype(c->m, "dtype", H3_F32);
    h3_value *p = w ? build1(c, lin, H3_OP_LINEAR, 2, in, 1, &f32) : NULL;
    h3_attr a[2] = {h3_attr_int(c->m, "ranks", c->n),
                    h3_attr_dtype(c->m, "dtype", lin->results[0]->type.dtype)};
    h3_value *y = p ? build1(c, lin, H3_OP_ALL_REDUCE, 1, &p, 2, a) : NULL;
    if (!y) return H3_ERR;
    c->reduces++;
    h3_value_replace_all_uses(c->m, lin->results[0], y);
    h3_op_erase(lin);
  }
  return H3_OK;
}

/* moe of a stack: its rank's experts (shard of both expert weights, ranks = N), then the
 * ranks' contributions summed by all_reduce. */
static h3_status split_experts(tp_ctx *c) {
  for (int k = 0; k < c->n_ops; k++) {
    h3_op *op = c->ops[k];
    if (op->code != H3_OP_MOE || !in_stack(op)) continue;
    int64_t e = op->operands[1]->type.dims[0];
    if (e % c->n) {
      char hint[200];
      counts_hint(hint, sizeof hint, "the expert count", &e, 1);
      h3_diag_error(c->d, op->span, hint, "%s: moe has %lld experts, which do not split over "
                    "--gpus %lld (each rank holds E/N experts)", PASS, (long long)e, (long long)c->n);
      return H3_ERR;
    }
    for (int i = 1; i <= 2; i++) {
      h3_value *w = shard(c, op, op->operands[i], 0);
      if (!w) return H3_ERR;
      h3_op_set_operand(op, i, w);
    }
    h3_op_set_attr(c->m, op, h3_attr_int(c->m, "ranks", c->n));
    if (!reduce_after(c, op->results[0])) return H3_ERR;
    c->experts++;
  }
  return H3_OK;
}

static h3_status split_graph(tp_ctx *c, h3_graph *g) {
  c->n_ops = c->n_fact = c->n_cols = c->n_rows = 0;
  h3_region_walk(&g->body, collect, c);
  bool stacks = false;
  for (int k = 0; k < c->n_ops; k++) stacks = stacks || is_stack(c->ops[k]);
  if (!stacks || c->oom) return c->oom ? H3_ERR : H3_OK;
  if (split_heads(c) != H3_OK) return H3_ERR;
  split_mlps(c);
  if (c->oom) return H3_ERR;
  if (check_parts(c) != H3_OK) return H3_ERR;
  shrink(c);
  /* experts first: the other two erase ops that c->ops still lists */
  if (split_experts(c) != H3_OK || split_columns(c) != H3_OK || split_rows(c) != H3_OK)
    return H3_ERR;
  c->graphs++;
  return H3_OK;
}

/* ---- the programs ----------------------------------------------------------------------- */
static h3_graph *graph_named(h3_module *m, const char *name) {
  for (int i = 0; i < m->n_graphs; i++)
    if (name && !strcmp(m->graphs[i]->name, name)) return m->graphs[i];
  return NULL;
}

/* Gives v the type `want` where v is a buffer the program makes (`zeros`: a const with a
 * shape), or a loop-carried value whose initial value is one; false otherwise. */
static bool retype(tp_ctx *c, h3_value *v, const h3_type *want) {
  if (v->kind == H3_VALUE_RESULT && v->def->code == H3_OP_CONST && h3_op_attr(v->def, "shape") &&
      v->type.dtype == want->dtype) {
    h3_op_set_attr(c->m, v->def, h3_attr_ints(c->m, "shape", want->rank, want->dims));
    v->type = *want;
    return true;
  }
  h3_op *loop = v->kind == H3_VALUE_REGION_ARG ? v->region->parent : NULL;
  if (!loop || loop->code != H3_OP_LOOP || v->index == 0 ||
      !retype(c, loop->operands[v->index - 1], want))
    return false;
  v->type = *want;
  loop->results[v->index - 1]->type = *want;
  return true;
}

/* One walk over region r of a program: the operands of each call get the callee's input
 * types (retype), its results the callee's output types, a loop's carried values their
 * initial values' types. *changed when a type changed. */
static h3_status retype_calls(tp_ctx *c, h3_region *r, bool *changed) {
  for (h3_op *op = r->first; op; op = op->next) {
    if (op->code == H3_OP_LOOP) {
      for (int k = 0; k < op->n_operands; k++) {
        h3_type t = op->operands[k]->type;
        if (h3_type_equal(&t, &op->results[k]->type)) continue;
        op->regions[0].args[k + 1]->type = t, op->results[k]->type = t;
        *changed = true;
      }
      if (retype_calls(c, &op->regions[0], changed) != H3_OK) return H3_ERR;
    }
    h3_graph *g = op->code == H3_OP_CALL ? graph_named(c->m, h3_op_attr_string(op, "callee", NULL)) : NULL;
    if (!g) continue;
    for (int k = 0; k < op->n_operands && k < g->n_inputs; k++) {
      const h3_type *want = &g->inputs[k]->type;
      if (h3_type_equal(&op->operands[k]->type, want)) continue;
      if (!retype(c, op->operands[k], want)) {
        char ts[96];
        h3_diag_error(c->d, op->span,
                      "a graph's cache input holds one rank's part under --gpus: the program "
                      "must make it with zeros(...) (or carry such a buffer through its loops)",
                      "%s: the call of '%s' passes input %d, which must become %s on each rank",
                      PASS, g->name, k, h3_type_str(want, ts, sizeof ts));
        return H3_ERR;
      }
      *changed = true;
    }
    for (int k = 0; k < op->n_results && k < g->body.last->n_operands; k++)
      if (!h3_type_equal(&op->results[k]->type, &g->body.last->operands[k]->type)) {
        op->results[k]->type = g->body.last->operands[k]->type;
        *changed = true;
      }
  }
  return H3_OK;
}

static h3_status retype_programs(tp_ctx *c) {
  for (int i = 0; i < c->m->n_graphs; i++) {
    if (c->m->graphs[i]->kind != H3_GRAPH_PROGRAM) continue;
    for (bool changed = true; changed;) {
      changed = false;
      if (retype_calls(c, &c->m->graphs[i]->body, &changed) != H3_OK) return H3_ERR;
    }
  }
  return H3_OK;
}

static h3_status tensor_parallel_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  int gpus = h3_pass_rank_count(pc, PASS, d);
  if (!gpus) return H3_ERR;
  tp_ctx c = {.m = m, .d = d, .n = gpus};
  h3_status st = H3_OK;
  for (int i = 0; i < m->n_graphs && st == H3_OK; i++)
    if (m->graphs[i]->kind == H3_GRAPH_FUNCTION) st = split_graph(&c, m->graphs[i]);
  if (c.oom) h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "%s: out of memory", PASS);
  if (st == H3_OK && c.graphs) st = retype_programs(&c);
  free(c.ops), free(c.fact), free(c.cols), free(c.rows);
  if (st != H3_OK || c.oom) return H3_ERR;
  if (c.graphs == 0) {
    if (h3_module_ranks(m) == gpus) { /* split by sequence-parallel */
      h3_pass_report(pc, "%d ranks: no layer stack (`*_stack` loop): nothing split", gpus);
      return H3_OK;
    }
    h3_diag_error(d, (h3_span){0},
                  "--gpus splits the H3 block stack (`trunk: repeat ...`, sequence-parallel) or "
                  "the layer stacks of an LLM (`dense_stack: repeat ...`, tensor-parallel); "
                  "compile this model without --gpus",
                  "--gpus %d: model '%s' has no loop to split (no `trunk`, no `*_stack`)", gpus,
                  m->model ? m->model : "?");
    return H3_ERR;
  }
  if (c.reduces > 0 && h3_pass_tier(pc) == H3_TIER_EXACT) { /* the tier's promise: bitwise */
    h3_diag_error(d, (h3_span){0},
                  "compile it with --quality lossless (within bf16 tolerance of one rank), or "
                  "without --gpus",
                  "--gpus %d at --quality exact: %s sums %d products across ranks (all_reduce), "
                  "in another order than one rank does, so the result is not bitwise the "
                  "one-rank program's", gpus, PASS, c.reduces);
    return H3_ERR;
  }
  h3_pass_report(pc, "%d ranks: %d graphs split: %d attentions by heads, %d MLPs by columns, "
                     "%d moe by experts; %d all_reduce; %d cache inputs per rank",
                 gpus, c.graphs, c.heads, c.mlps, c.experts, c.reduces, c.inputs);
  return H3_OK;
}

const h3_pass h3_pass_tensor_parallel = {
    .name = "tensor-parallel",
    .description = "--gpus N: tensor and expert parallelism of the layer stacks (`*_stack` loops): "
                   "attention by heads (each rank's kv cache holds its kv heads), MLPs by columns "
                   "(o_proj / down_proj row-split, all_reduce after), moe by experts (all_reduce "
                   "after); within bf16 tolerance (the all_reduce sums in another order), so "
                   "refused at --quality exact",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = tensor_parallel_run,
};
