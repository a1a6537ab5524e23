/* sequence_parallel.c: the `sequence-parallel` pass (opt-in, `h3c compile --gpus N`):
 * Ulysses sequence parallelism of the block stack over N ranks (docs/parallel.md).
 *
 * Every loop labelled `trunk` or `trunk.*` (the H3 block stack; Cache-DiT's trunk.front and
 * trunk.rest; the attention schedule's pieces) is rewritten so that rank r holds rows
 * [r*S/N, (r+1)*S/N) of the S rows the loop carries:
 *   - the row values are the carried state and every value row-aligned with it through the
 *     row-local ops of the body (row_operands below), found by a fixpoint over the body;
 *     their types get S/N rows (a reshape's shape too);
 *   - a value from outside that the body reads at a row position (the loop's initial
 *     state, the AdaLN indices, the RoPE tables) is read through `shard {axis = 0}`, made
 *     before the loop;
 *   - attention (sage_attention, sol_attention) runs on all S rows of H/N heads: q, k and v
 *     each go through `all_to_all {split_axis = 1, concat_axis = 0}` ([S/N, H, D] ->
 *     [S, H/N, D]) and its result through `all_to_all {split_axis = 0, concat_axis = 1}`
 *     back; its `segments` keep their meaning (full rows);
 *   - each loop result is `all_gather {axis = 0}`ed after the loop, so everything after the
 *     stack (the final layer, Spectrum's features, Cache-DiT's residual and decision) sees
 *     the full rows on every rank: the same values on every rank.
 * An op that reads or makes a row value and is not row-local is an error at its place, as
 * are S or a head count that N does not divide. Row-local ops compute each row alone, the
 * per-head attention math is unchanged and the collectives only move data, so the N-rank
 * program is bitwise the one-rank program.
 */
#include "h3/op_registry.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

static const char PASS[] = "sequence-parallel";
static const char ROW_LOCAL_HINT[] =
    "sequence parallelism splits the rows of the `trunk` loop: only row-local ops (elementwise, "
    "rms_norm and linear of x, gather by row indices, slices and reshapes that keep the rows, "
    "rope) and attention may touch them; compute this outside the trunk, or compile without "
    "--gpus";

typedef struct {
  h3_module *m;
  h3_diag *d;
  int64_t n;            /* ranks */
  h3_op *loop;          /* the trunk loop being split */
  int64_t rows;         /* S: the rows it carries */
  h3_value **row;       /* the row values of this loop (inside and outside its body) */
  int n_row, cap_row;
  bool oom;
  int loops, exchanges, gathers, shards; /* for the report */
} sp_ctx;

static bool is_row(const sp_ctx *c, const h3_value *v) {
  for (int i = 0; i < c->n_row; i++)
    if (c->row[i] == v) return true;
  return false;
}

/* Adds v to the row values; true when it was not one yet. */
static bool add_row(sp_ctx *c, h3_value *v) {
  if (is_row(c, v)) return false;
  if (c->n_row == c->cap_row) {
    int cap = c->cap_row ? 2 * c->cap_row : 32;
    h3_value **row = realloc(c->row, (size_t)cap * sizeof *row);
    if (!row) {
      c->oom = true;
      return false;
    }
    c->row = row, c->cap_row = cap;
  }
  c->row[c->n_row++] = v;
  return true;
}

static bool is_attention(h3_opcode code) {
  return code == H3_OP_ATTENTION || code == H3_OP_SAGE_ATTENTION || code == H3_OP_SOL_ATTENTION;
}

/* The operands of op that are row-aligned with its result when op is row-local (bit i for
 * operand i; its result is then a row value), or -1 when op is not row-local: computing a
 * part of its rows would not give those rows of its result. Attention counts as row-local
 * here (q, k, v and the result are row-aligned); the rewrite puts the exchanges around it. */
static int row_operands(const h3_op *op) {
  if (op->n_results != 1 || op->n_regions) return -1;
  const h3_type *r = &op->results[0]->type, *x = op->n_operands ? &op->operands[0]->type : NULL;
  switch (op->code) {
  case H3_OP_RMS_NORM:
  case H3_OP_LINEAR: return x->rank >= 2 ? 1 : -1;
  case H3_OP_GATHER: return r->rank >= 2 ? 2 : -1;
  case H3_OP_ROPE: return 7;
  case H3_OP_SLICE: return h3_op_attr_int(op, "axis", 0) != 0 ? 1 : -1;
  case H3_OP_RESHAPE: return x->rank >= 1 && r->rank >= 1 && x->dims[0] == r->dims[0] ? 1 : -1;
  case H3_OP_ATTENTION:
  case H3_OP_SAGE_ATTENTION:
  case H3_OP_SOL_ATTENTION: return 7;
  default: break;
  }
  if (!h3_op_is_elementwise(op->code) || r->rank < 1) return -1;
  int mask = 0; /* operands of the result's rank and rows; the others broadcast */
  for (int i = 0; i < op->n_operands; i++) {
    const h3_type *t = &op->operands[i]->type;
    if (t->rank == r->rank && t->dims[0] == r->dims[0] && t->dims[0] != 1) mask |= 1 << i;
  }
  return mask ? mask : -1;
}

/* The row values of c->loop: seeds (carried values, their initial values and the yield's),
 * then the fixpoint of row alignment over the body's ops. */
static void find_rows(sp_ctx *c) {
  h3_region *body = &c->loop->regions[0];
  for (int i = 0; i < c->loop->n_operands; i++) {
    add_row(c, c->loop->operands[i]);
    add_row(c, body->args[i + 1]);
    add_row(c, body->last->operands[i]);
  }
  for (bool changed = true; changed && !c->oom;) {
    changed = false;
    for (h3_op *op = body->first; op; op = op->next) {
      int mask = row_operands(op);
      if (mask < 0) continue;
      bool any = is_row(c, op->results[0]);
      for (int i = 0; i < op->n_operands && !any; i++)
        any = (mask >> i & 1) && is_row(c, op->operands[i]);
      if (!any) continue;
      for (int i = 0; i < op->n_operands; i++)
        if (mask >> i & 1) changed |= add_row(c, op->operands[i]);
      changed |= add_row(c, op->results[0]);
    }
  }
}

/* Every row value is used at row positions by row-local ops, has S rows and is no weight;
 * S and the attention heads divide by N. H3_ERR after reporting each problem. */
static h3_status check_rows(sp_ctx *c) {
  h3_status st = H3_OK;
  h3_region *body = &c->loop->regions[0];
  if (c->rows % c->n != 0) {
    char hint[160];
    snprintf(hint, sizeof hint, "pick --gpus N dividing the %lld rows of the packed sequence",
             (long long)c->rows);
    h3_diag_error(c->d, c->loop->span, hint,
                  "%s: the trunk carries %lld rows, which do not split over --gpus %lld", PASS,
                  (long long)c->rows, (long long)c->n);
    st = H3_ERR;
  }
  for (int i = 0; i < c->n_row; i++) {
    h3_value *v = c->row[i];
    if (v->kind == H3_VALUE_PARAM) {
      h3_diag_error(c->d, v->span, ROW_LOCAL_HINT, "%s: weight '%s' is read as rows of the trunk",
                    PASS, v->param ? v->param->name : "?");
      st = H3_ERR;
    } else if (v->type.rank < 1 || v->type.dims[0] != c->rows) {
      char ts[96];
      h3_diag_error(c->d, v->span, ROW_LOCAL_HINT,
                    "%s: %s is row-aligned with the trunk's %lld rows but is %s", PASS,
                    v->name ? v->name : "a value", (long long)c->rows,
                    h3_type_str(&v->type, ts, sizeof ts));
      st = H3_ERR;
    }
  }
  for (h3_op *op = body->first; op; op = op->next) {
    if (op->code == H3_OP_YIELD) continue;
    int mask = row_operands(op);
    bool bad = mask < 0 && op->n_results && is_row(c, op->results[0]);
    for (int i = 0; i < op->n_operands && !bad; i++)
      bad = is_row(c, op->operands[i]) && (mask < 0 || !(mask >> i & 1));
    if (bad) {
      h3_diag_error(c->d, op->span, ROW_LOCAL_HINT,
                    "%s: %s reads or makes rows of the trunk but is not row-local", PASS,
                    h3_opcode_name(op->code));
      st = H3_ERR;
      continue;
    }
    if (!is_attention(op->code) || mask < 0 || !is_row(c, op->results[0])) continue;
    if (h3_op_attr(op, "v_view")) {
      h3_diag_error(c->d, op->span, "run sequence-parallel before attention-v-view",
                    "%s: attention reads v in place (v_view)", PASS);
      st = H3_ERR;
    }
    int64_t hq = op->operands[0]->type.dims[1], hk = op->operands[1]->type.dims[1];
    if (hq % c->n != 0 || hk % c->n != 0) {
      char hint[200];
      int k = snprintf(hint, sizeof hint, "pick --gpus N dividing the head count (here:");
      for (int64_t g = 1; g <= hk && k < (int)sizeof hint - 24; g++)
        if (hq % g == 0 && hk % g == 0) k += snprintf(hint + k, sizeof hint - (size_t)k, " %lld", (long long)g);
      snprintf(hint + k, sizeof hint - (size_t)k, ")");
      h3_diag_error(c->d, op->span, hint,
                    "%s: attention has %lld query and %lld key heads, which do not split over "
                    "--gpus %lld (Ulysses gives each rank H/N heads)",
                    PASS, (long long)hq, (long long)hk, (long long)c->n);
      st = H3_ERR;
    }
  }
  return st;
}

/* One op of code with operand x and the attributes; NULL after reporting. */
static h3_value *build1(sp_ctx *c, h3_region *r, h3_op *before, h3_opcode code, h3_value *x,
                        int na, const h3_attr *a) {
  h3_builder b = {c->m, r, before, before ? before->span : c->loop->span};
  h3_op *op = h3_build_op(&b, code, 1, &x, na, a, 0, c->d);
  return op ? op->results[0] : NULL;
}

static h3_value *all_to_all(sp_ctx *c, h3_op *before, h3_value *x, int split, int concat) {
  h3_attr a[3] = {h3_attr_int(c->m, "ranks", c->n), h3_attr_int(c->m, "split_axis", split),
                  h3_attr_int(c->m, "concat_axis", concat)};
  c->exchanges++;
  return build1(c, before->parent, before, H3_OP_ALL_TO_ALL, x, 3, a);
}

/* Uses of `from` by ops of region r (nested ones included) other than `keep` read `to`. */
typedef struct {
  h3_value *from, *to;
  const h3_op *keep;
} replace_ctx;

static int replace_visit(h3_op *op, void *p) {
  replace_ctx *r = p;
  for (int i = 0; i < op->n_operands && op != r->keep; i++)
    if (op->operands[i] == r->from) h3_op_set_operand(op, i, r->to);
  return 0;
}

static void replace_in(h3_region *r, h3_value *from, h3_value *to, const h3_op *keep) {
  replace_ctx rc = {from, to, keep};
  h3_region_walk(r, replace_visit, &rc);
}

/* Rows of v become S/N (a reshape's shape attribute with them). */
static void shrink(sp_ctx *c, h3_value *v) {
  v->type.dims[0] = c->rows / c->n;
  if (v->kind != H3_VALUE_RESULT || v->def->code != H3_OP_RESHAPE) return;
  const h3_attr *s = h3_op_attr(v->def, "shape");
  int64_t dims[H3_MAX_RANK];
  for (int i = 0; i < s->n && i < H3_MAX_RANK; i++) dims[i] = s->ints[i];
  dims[0] = v->type.dims[0];
  h3_op_set_attr(c->m, v->def, h3_attr_ints(c->m, "shape", s->n, dims));
}

/* Applies the split to c->loop (rows found and checked). */
static h3_status split_loop(sp_ctx *c) {
  h3_op *loop = c->loop;
  h3_region *body = &loop->regions[0], *outer = loop->parent;
  /* outside row values: read through shard; the body's row values: S/N rows */
  for (int i = 0; i < c->n_row; i++) {
    h3_value *v = c->row[i];
    h3_region *home = h3_value_def_region(v);
    if (home == body || (home && h3_op_ancestor_in(home->parent, body))) {
      shrink(c, v);
      continue;
    }
    h3_attr a[2] = {h3_attr_int(c->m, "ranks", c->n), h3_attr_int(c->m, "axis", 0)};
    h3_value *part = build1(c, outer, loop, H3_OP_SHARD, v, 2, a);
    if (!part) return H3_ERR;
    c->shards++;
    for (int k = 0; k < loop->n_operands; k++)
      if (loop->operands[k] == v) h3_op_set_operand(loop, k, part);
    replace_in(body, v, part, NULL);
  }
  /* attention over all rows of H/N heads, between two all_to_all */
  for (h3_op *op = body->first; op; op = op->next) {
    if (!is_attention(op->code) || !is_row(c, op->results[0])) continue;
    for (int k = 0; k < 3; k++) {
      h3_value *t = all_to_all(c, op, op->operands[k], 1, 0);
      if (!t) return H3_ERR;
      h3_op_set_operand(op, k, t);
    }
    h3_value *o = op->results[0];
    o->type.dims[0] = c->rows;
    o->type.dims[1] = op->operands[0]->type.dims[1];
    h3_value *back = all_to_all(c, op->next, o, 0, 1);
    if (!back) return H3_ERR;
    replace_in(body, o, back, back->def);
    op = back->def;
  }
  /* the loop's results: S/N rows, gathered after it */
  for (int k = 0; k < loop->n_results; k++) {
    h3_value *r = loop->results[k];
    r->type.dims[0] = c->rows / c->n;
    h3_attr a[2] = {h3_attr_int(c->m, "ranks", c->n), h3_attr_int(c->m, "axis", 0)};
    h3_value *full = build1(c, outer, loop->next, H3_OP_ALL_GATHER, r, 2, a);
    if (!full) return H3_ERR;
    c->gathers++;
    h3_region *top = outer;
    while (top->parent) top = top->parent->parent;
    replace_in(top, r, full, full->def);
  }
  return H3_OK;
}

static h3_status split_graph(sp_ctx *c, h3_graph *g) {
  for (h3_op *op = g->body.first; op; op = op->next) {
    if (!h3_loop_is_trunk(op)) continue;
    c->loop = op;
    c->n_row = 0;
    if (op->n_operands < 1 || op->operands[0]->type.rank < 1) {
      h3_diag_error(c->d, op->span, ROW_LOCAL_HINT, "%s: the trunk loop carries no rows", PASS);
      return H3_ERR;
    }
    c->rows = op->operands[0]->type.dims[0];
    find_rows(c);
    if (c->oom) {
      h3_diag_error(c->d, op->span, H3_HINT_OOM, "%s: out of memory", PASS);
      return H3_ERR;
    }
    if (check_rows(c) != H3_OK || split_loop(c) != H3_OK) return H3_ERR;
    c->loops++;
    op = op->next; /* past the first all_gather after it */
  }
  return H3_OK;
}

static h3_status sequence_parallel_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  int gpus = h3_pass_rank_count(pc, PASS, d);
  if (!gpus) return H3_ERR;
  sp_ctx c = {.m = m, .d = d, .n = gpus};
  h3_status st = H3_OK;
  for (int i = 0; i < m->n_graphs && st == H3_OK; i++)
    if (m->graphs[i]->kind == H3_GRAPH_FUNCTION) st = split_graph(&c, m->graphs[i]);
  free(c.row);
  if (st != H3_OK) return st;
  if (c.loops == 0) { /* an LLM: tensor-parallel splits it, or refuses a model with neither */
    h3_pass_report(pc, "%d ranks: no loop labelled 'trunk': nothing split", gpus);
    return H3_OK;
  }
  h3_pass_report(pc, "%d ranks: %d trunk loop%s split by rows; %d all_to_all, %d all_gather, %d "
                     "shard",
                 gpus, c.loops, c.loops == 1 ? "" : "s", c.exchanges, c.gathers, c.shards);
  return H3_OK;
}

const h3_pass h3_pass_sequence_parallel = {
    .name = "sequence-parallel",
    .description = "--gpus N: Ulysses sequence parallelism of the block stack: each rank holds S/N "
                   "rows of every `trunk` loop (shard before it, all_gather after it), attention "
                   "runs on all rows of H/N heads between two all_to_all; bitwise neutral",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = sequence_parallel_run,
};
