/* verify.c: h3_verify_module, the structural and type checker of the IR (ir.h).
 *
 * One linear walk over every graph: values are indexed by id, so scope ("defined
 * earlier in this region or an enclosing one", graph inputs, params) is a mark per id
 * set when a value is defined and cleared when its region ends. Checked: SSA scope,
 * single definition, back links (value -> op/region/graph, op -> region, list links),
 * use counts, registry checks (operand/region counts, attribute schema) and re-inferred
 * result types, region terminators (every region ends with yield, a graph body with
 * return, nothing else is a terminator), loop/fused/call typing, graph output counts.
 * Each problem is an error at the op's span naming the graph and the op.
 */
#include "h3/op_registry.h"
#include "ir_internal.h"
#include "op_infer.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_module *m;
  h3_diag *d;
  const h3_graph *g;
  unsigned char *state; /* per value id: bit 0 in scope, bit 1 defined */
  int *uses;            /* counted uses per value id */
  h3_value **values;    /* every defined value, by id */
  int n_ids;
  int errors;
  const h3_op *ranked; /* the first op of a parallel plan: every other names its ranks */
} vctx;

#define IN_SCOPE 1
#define DEFINED 2

static const char *vname(const h3_value *v, char *buf, size_t n) {
  if (v->name)
    snprintf(buf, n, "%%%s", v->name);
  else
    snprintf(buf, n, "%%%d", v->id);
  return buf;
}
#define VN(v) vname((v), (char[80]){0}, 80)

__attribute__((format(printf, 3, 4))) static void verr(vctx *c, h3_span span, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->errors++;
  const char *hint = "the IR breaks an invariant of docs/ir-text.md; when a pass or the front end built it, that is a bug there";
  if (c->g)
    h3_diag_error(c->d, span, hint, "IR verifier: graph @%s: %s", c->g->name, msg);
  else
    h3_diag_error(c->d, span, hint, "IR verifier: %s", msg);
}

/* Registers a definition; reports a value defined twice or with a stray id. */
static void define(vctx *c, h3_value *v, h3_span span) {
  if (v->id < 0 || v->id >= c->n_ids) {
    verr(c, span, "value %s has id %d outside [0, %d)", VN(v), v->id, c->n_ids);
    return;
  }
  if (c->state[v->id] & DEFINED) {
    verr(c, span, "value %s is defined twice", VN(v));
    return;
  }
  c->state[v->id] = IN_SCOPE | DEFINED;
  c->values[v->id] = v;
  if (!h3_type_fits(&v->type)) {
    char ts[160];
    verr(c, span, "value %s: %s has a negative dim or more than 2^48 bytes (256 TiB), the most h3 "
         "keeps in one tensor", VN(v), h3_type_str(&v->type, ts, sizeof ts));
  }
}

static void leave(vctx *c, h3_value *v) {
  if (v->id >= 0 && v->id < c->n_ids) c->state[v->id] &= (unsigned char)~IN_SCOPE;
}

/* The types of vals[0..n) equal those of want[0..n_want). */
static bool types_match(vctx *c, h3_op *op, const char *what, int n, h3_value **vals, int n_want,
                        h3_value *const *want, const char *want_what) {
  if (n != n_want) {
    verr(c, op->span, "%s: %s has %d values but %s has %d", h3_opcode_name(op->code), what, n, want_what, n_want);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (!vals[i] || !want[i]) {
      verr(c, op->span, "%s: %s %d is missing", h3_opcode_name(op->code), vals[i] ? want_what : what, i);
      return false;
    } else if (!h3_type_equal(&vals[i]->type, &want[i]->type)) {
      verr(c, op->span, "%s: %s %d is %s but %s %d is %s", h3_opcode_name(op->code), what, i,
           TS(&vals[i]->type), want_what, i, TS(&want[i]->type));
      return false;
    }
  return true;
}

static void verify_region(vctx *c, h3_region *r, h3_op *parent, bool graph_body);

static void verify_control(vctx *c, h3_op *op) {
  int nr = op->n_results;
  h3_region *r = op->n_regions > 0 ? &op->regions[0] : NULL;
  h3_op *y = r ? r->last : NULL;
  if (op->code == H3_OP_LOOP) {
    if (h3_op_attr_int(op, "count", 0) < 0) verr(c, op->span, "loop: count is negative");
    if (r->n_args != op->n_operands + 1) {
      verr(c, op->span, "loop: region has %d args, expected the index plus %d carried values", r->n_args, op->n_operands);
      return;
    }
    h3_type idx = h3_type_make(H3_I32, 0, NULL);
    if (!h3_type_equal(&r->args[0]->type, &idx))
      verr(c, op->span, "loop: region arg 0 (the index) is %s, expected i32[]", TS(&r->args[0]->type));
    types_match(c, op, "region carried arg list", r->n_args - 1, r->args + 1, op->n_operands, op->operands, "the operand list");
    types_match(c, op, "result list", nr, op->results, op->n_operands, op->operands, "the operand list");
    if (y && y->code == H3_OP_YIELD)
      types_match(c, op, "yield", y->n_operands, y->operands, op->n_operands, op->operands, "the carried list");
  } else if (op->code == H3_OP_FUSED) {
    types_match(c, op, "region arg list", r->n_args, r->args, op->n_operands, op->operands, "the operand list");
    if (y && y->code == H3_OP_YIELD)
      types_match(c, op, "yield", y->n_operands, y->operands, nr, op->results, "the result list");
  } else if (op->code == H3_OP_CALL) {
    const char *callee = h3_op_attr_string(op, "callee", "");
    const h3_graph *g = h3_module_graph(c->m, callee);
    if (!g) {
      verr(c, op->span, "call: no graph named '%s'", callee);
      return;
    }
    types_match(c, op, "argument list", op->n_operands, op->operands, g->n_inputs, g->inputs, "the callee's inputs");
    const h3_op *ret = g->body.last;
    if (ret && ret->code == H3_OP_RETURN)
      types_match(c, op, "result list", nr, op->results, ret->n_operands, ret->operands, "the callee's return");
  } else if (op->code == H3_OP_BRANCH) { /* cond, then both callees like a call of args */
    h3_type cond = h3_type_make(H3_I32, 0, NULL);
    if (!h3_type_equal(&op->operands[0]->type, &cond))
      verr(c, op->span, "branch: cond is %s, expected i32[]", TS(&op->operands[0]->type));
    static const char *const which[2] = {"then_callee", "else_callee"};
    for (int w = 0; w < 2; w++) {
      const char *callee = h3_op_attr_string(op, which[w], "");
      const h3_graph *g = h3_module_graph(c->m, callee);
      if (!g) {
        verr(c, op->span, "branch: %s names no graph '%s'", which[w], callee);
        continue;
      }
      types_match(c, op, "argument list", op->n_operands - 1, op->operands + 1, g->n_inputs, g->inputs, "the callee's inputs");
      const h3_op *ret = g->body.last;
      if (ret && ret->code == H3_OP_RETURN)
        types_match(c, op, "result list", nr, op->results, ret->n_operands, ret->operands, "the callee's return");
    }
  }
}

static void verify_op(vctx *c, h3_op *op, h3_region *r) {
  const char *name = h3_opcode_name(op->code);
  if (op->parent != r) verr(c, op->span, "%s: op's parent link does not point at its region", name);
  for (int i = 0; i < op->n_operands; i++) {
    h3_value *v = op->operands[i];
    if (!v) {
      verr(c, op->span, "%s: operand %d is missing", name, i);
      continue;
    }
    if (v->id >= 0 && v->id < c->n_ids) c->uses[v->id]++;
    if (v->id < 0 || v->id >= c->n_ids || !(c->state[v->id] & IN_SCOPE))
      verr(c, op->span, "%s: operand %d (%s) is not defined before this use in scope", name, i, VN(v));
  }
  char why[256];
  bool ok = h3_op_check(op, why, sizeof why) == 0;
  if (!ok) verr(c, op->span, "%s", why);
  const h3_op_info *info = h3_op_info_get(op->code);
  for (int i = 0; i < op->n_operands; i++)
    if (!op->operands[i]) ok = false;
  if (ok && info->infer) {
    h3_type t[4];
    int n = info->infer(op, t, why, sizeof why);
    if (n < 0) {
      verr(c, op->span, "%s", why);
    } else if (n != op->n_results) {
      verr(c, op->span, "%s: has %d results, inference gives %d", name, op->n_results, n);
    } else {
      for (int i = 0; i < n; i++)
        if (!h3_type_equal(&t[i], &op->results[i]->type))
          verr(c, op->span, "%s: result %d is %s but inference gives %s", name, i, TS(&op->results[i]->type), TS(&t[i]));
    }
  } else if (ok && (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) && op->n_results) {
    verr(c, op->span, "%s: a terminator has no results", name);
  }
  for (int i = 0; i < op->n_regions; i++) {
    if (op->regions[i].parent != op) verr(c, op->span, "%s: region %d's parent link is wrong", name, i);
    verify_region(c, &op->regions[i], op, false);
  }
  if (ok && !info->infer) verify_control(c, op);
  if (ok && h3_op_is_ranked(op)) { /* one plan, one rank count */
    int64_t n = h3_op_attr_int(op, "ranks", 1);
    if (!c->ranked) c->ranked = op;
    else if (h3_op_attr_int(c->ranked, "ranks", 1) != n)
      verr(c, op->span, "%s: ranks = %lld, but %s names ranks = %lld (a plan runs on one rank count)",
           name, (long long)n, h3_opcode_name(c->ranked->code),
           (long long)h3_op_attr_int(c->ranked, "ranks", 1));
  }
  for (int i = 0; i < op->n_results; i++) {
    h3_value *v = op->results[i];
    if (v->kind != H3_VALUE_RESULT || v->def != op || v->index != i)
      verr(c, op->span, "%s: result %d (%s) does not link back to its op", name, i, VN(v));
    define(c, v, op->span);
  }
}

static void verify_region(vctx *c, h3_region *r, h3_op *parent, bool graph_body) {
  h3_span span = parent ? parent->span : c->g->span;
  for (int i = 0; i < r->n_args; i++) {
    h3_value *v = r->args[i];
    if (v->kind != H3_VALUE_REGION_ARG || v->region != r || v->index != i)
      verr(c, span, "region arg %d (%s) does not link back to its region", i, VN(v));
    define(c, v, span);
  }
  h3_op *prev = NULL;
  for (h3_op *op = r->first; op; op = op->next) {
    if (op->prev != prev) verr(c, op->span, "%s: broken op list links", h3_opcode_name(op->code));
    bool term = op->code == H3_OP_YIELD || op->code == H3_OP_RETURN;
    if (term && op->next) verr(c, op->span, "%s: a terminator must be the last op of its region", h3_opcode_name(op->code));
    if (!op->next && op != r->last) verr(c, op->span, "region's last link does not point at its last op");
    verify_op(c, op, r);
    prev = op;
  }
  h3_op *last = r->last;
  int want = graph_body ? H3_OP_RETURN : H3_OP_YIELD;
  if (!last || (int)last->code != want)
    verr(c, last ? last->span : span, "%s must end with %s", graph_body ? "a graph body" : "a region",
         graph_body ? "return" : "yield");
  /* values of this region go out of scope (the parent's results are defined after) */
  for (int i = 0; i < r->n_args; i++) leave(c, r->args[i]);
  for (h3_op *op = r->first; op; op = op->next)
    for (int i = 0; i < op->n_results; i++) leave(c, op->results[i]);
}

static void verify_graph(vctx *c, h3_graph *g) {
  c->g = g;
  for (int i = 0; i < g->n_inputs; i++) {
    h3_value *v = g->inputs[i];
    if (v->kind != H3_VALUE_INPUT || v->graph != g || v->index != i)
      verr(c, g->span, "input %d (%s) does not link back to its graph", i, VN(v));
    define(c, v, g->span);
  }
  if (g->body.parent) verr(c, g->span, "the graph body has a parent op");
  verify_region(c, &g->body, NULL, true);
  const h3_op *ret = g->body.last;
  if (ret && ret->code == H3_OP_RETURN && ret->n_operands != g->n_outputs)
    verr(c, ret->span, "return gives %d values but the graph has %d outputs", ret->n_operands, g->n_outputs);
  for (int i = 0; i < g->n_inputs; i++) leave(c, g->inputs[i]);
}

h3_status h3_verify_module(h3_module *m, h3_diag *d) {
  h3_span none = {0};
  if (m->oom) {
    h3_diag_error(d, none, H3_HINT_OOM, "out of memory while building the IR of '%s'", m->model);
    return H3_ERR;
  }
  vctx c = {.m = m, .d = d, .n_ids = m->next_value_id};
  size_t n = (size_t)(c.n_ids > 0 ? c.n_ids : 1);
  c.state = calloc(n, 1);
  c.uses = calloc(n, sizeof(int));
  c.values = calloc(n, sizeof(h3_value *));
  if (!c.state || !c.uses || !c.values) {
    free(c.state);
    free(c.uses);
    free(c.values);
    h3_diag_error(d, none, H3_HINT_OOM, "out of memory while verifying the IR");
    return H3_ERR;
  }
  for (int i = 0; i < m->n_params; i++) {
    h3_param *p = m->params[i];
    c.g = NULL;
    if (!p->value || p->value->kind != H3_VALUE_PARAM || p->value->param != p ||
        !h3_type_equal(&p->value->type, &p->type)) {
      verr(&c, p->span, "param @%s: its value does not match it", p->name);
      continue;
    }
    if (p->group_dims < 0 || p->group_dims > p->type.rank)
      verr(&c, p->span, "param @%s: group_dims = %d is outside [0, rank %d]", p->name, p->group_dims, p->type.rank);
    for (int j = 0; j < i; j++)
      if (strcmp(m->params[j]->name, p->name) == 0) verr(&c, p->span, "param @%s is declared twice", p->name);
    define(&c, p->value, p->span);
  }
  for (int i = 0; i < m->n_graphs; i++) {
    for (int j = 0; j < i; j++)
      if (strcmp(m->graphs[j]->name, m->graphs[i]->name) == 0) {
        c.g = m->graphs[i];
        verr(&c, m->graphs[i]->span, "graph @%s is declared twice", m->graphs[i]->name);
      }
    verify_graph(&c, m->graphs[i]);
  }
  c.g = NULL;
  for (int id = 0; id < c.n_ids; id++) {
    h3_value *v = c.values[id];
    if (v && v->uses != c.uses[id])
      h3_diag_error(d, v->span, "the IR breaks an invariant of docs/ir-text.md; when a pass or the front end built it, that is a bug there",
                    "IR verifier: value %s records %d uses but has %d", VN(v), v->uses, c.uses[id]);
    if (v && v->uses != c.uses[id]) c.errors++;
  }
  free(c.state);
  free(c.uses);
  free(c.values);
  return c.errors ? H3_ERR : H3_OK;
}
