/* builder.c: creating, linking, rewiring, moving, erasing and walking ops, and where a value
 * is defined (ir.h).
 *
 * Invariants kept here: an op is in at most one region's doubly linked list (op->parent
 * is that region, NULL when unlinked); every value's `uses` equals the number of operand
 * slots of linked ops that hold it. h3_build_op checks operand counts and attributes
 * against the registry and infers result types; a failure is a diagnostic at b->span
 * whose message is the registry's one-line reason, and nothing is inserted.
 */
#include "h3/op_registry.h"
#include "ir_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static void link_op(h3_region *r, h3_op *before, h3_op *op) {
  op->parent = r;
  op->next = before;
  op->prev = before ? before->prev : r->last;
  if (op->prev)
    op->prev->next = op;
  else
    r->first = op;
  if (before)
    before->prev = op;
  else
    r->last = op;
}

static void unlink_op(h3_op *op) {
  h3_region *r = op->parent;
  if (!r) return;
  if (op->prev)
    op->prev->next = op->next;
  else
    r->first = op->next;
  if (op->next)
    op->next->prev = op->prev;
  else
    r->last = op->prev;
  op->prev = op->next = NULL;
  op->parent = NULL;
}

/* Allocates an unlinked op with copies of operands and attributes and empty regions;
 * use counts are not touched. NULL when out of memory. */
static h3_op *op_new(h3_module *m, h3_opcode code, int n_operands, h3_value **operands,
                     int n_attrs, const h3_attr *attrs, int n_regions, h3_span span) {
  h3_op *op = ir_alloc(m, sizeof *op);
  if (!op) return NULL;
  op->id = m->next_op_id++;
  op->code = code;
  op->span = span;
  op->n_operands = n_operands;
  if (n_operands > 0) {
    op->operands = ir_alloc(m, (size_t)n_operands * sizeof(h3_value *));
    if (!op->operands) return NULL;
    memcpy(op->operands, operands, (size_t)n_operands * sizeof(h3_value *));
  }
  for (int i = 0; i < n_attrs; i++) ir_attrs_set(m, &op->attrs, &op->n_attrs, attrs[i]);
  if (n_regions > 0) {
    op->regions = ir_alloc(m, (size_t)n_regions * sizeof(h3_region));
    if (!op->regions) return NULL;
    op->n_regions = n_regions;
    for (int i = 0; i < n_regions; i++) op->regions[i].parent = op;
  }
  return m->oom ? NULL : op;
}

/* Gives `op` n results of the given types, then links it and counts its operand uses. */
static h3_op *op_finish(h3_builder *b, h3_op *op, int n, const h3_type *types) {
  h3_module *m = b->m;
  if (n > 0) {
    op->results = ir_alloc(m, (size_t)n * sizeof(h3_value *));
    if (!op->results) return NULL;
    for (int i = 0; i < n; i++) {
      h3_value *v = ir_value_new(m, H3_VALUE_RESULT, types[i], NULL, b->span);
      if (!v) return NULL;
      v->def = op;
      v->index = i;
      op->results[i] = v;
    }
  }
  op->n_results = n;
  for (int i = 0; i < op->n_operands; i++) op->operands[i]->uses++;
  link_op(b->region, b->before, op);
  return op;
}

h3_op *h3_build_op(h3_builder *b, h3_opcode code, int n_operands, h3_value **operands,
                   int n_attrs, const h3_attr *attrs, int n_regions, h3_diag *d) {
  const h3_op_info *info = h3_op_info_get(code);
  if (!info) {
    h3_diag_error(d, b->span, NULL, "internal error: unknown opcode %d", (int)code);
    return NULL;
  }
  for (int i = 0; i < n_operands; i++)
    if (!operands[i]) {
      h3_diag_error(d, b->span, NULL, "internal error: %s: operand %d is missing", info->name, i);
      return NULL;
    }
  h3_op *op = op_new(b->m, code, n_operands, operands, n_attrs, attrs, n_regions, b->span);
  if (!op) {
    h3_diag_error(d, b->span, H3_HINT_OOM, "out of memory while building the IR");
    return NULL;
  }
  h3_type types[4];
  char why[256];
  int n = h3_op_infer(op, types, why, sizeof why);
  if (n < 0) { /* the operands' types as the op's contract wants them: `h3c ops` lists it */
    char hint[160];
    snprintf(hint, sizeof hint, "`h3c ops` gives %s's operands and attributes", info->name);
    h3_diag_error(d, b->span, hint, "%s", why);
    return NULL;
  }
  if (!op_finish(b, op, n, types)) {
    h3_diag_error(d, b->span, H3_HINT_OOM, "out of memory while building the IR");
    return NULL;
  }
  return op;
}

h3_op *h3_build_op_typed(h3_builder *b, h3_opcode code, int n_operands, h3_value **operands,
                         int n_attrs, const h3_attr *attrs, int n_results,
                         const h3_type *result_types, int n_regions) {
  for (int i = 0; i < n_operands; i++) assert(operands[i] != NULL);
  h3_op *op = op_new(b->m, code, n_operands, operands, n_attrs, attrs, n_regions, b->span);
  if (!op) return NULL;
  return op_finish(b, op, n_results, result_types);
}

h3_value *h3_region_add_arg(h3_module *m, h3_region *r, h3_type type, const char *name,
                            h3_span span) {
  h3_value **args = ir_array_grow(m, r->args, r->n_args, sizeof *args);
  h3_value *v = ir_value_new(m, H3_VALUE_REGION_ARG, type, name, span);
  if (!args || !v) return NULL;
  v->region = r;
  v->index = r->n_args;
  args[r->n_args++] = v;
  r->args = args;
  return v;
}

void h3_op_set_operand(h3_op *op, int i, h3_value *v) {
  assert(i >= 0 && i < op->n_operands && v);
  h3_value *old = op->operands[i];
  if (old == v) return;
  if (op->parent) {
    if (old) old->uses--;
    v->uses++;
  }
  op->operands[i] = v;
}

typedef struct {
  h3_value *from, *to;
  int left; /* uses still to replace */
} replace_ctx;

static int replace_visit(h3_op *op, void *p) {
  replace_ctx *c = p;
  for (int i = 0; i < op->n_operands; i++)
    if (op->operands[i] == c->from) {
      op->operands[i] = c->to;
      c->from->uses--;
      c->to->uses++;
      c->left--;
    }
  return c->left <= 0;
}

/* Visits the ops after `op` in its region (descending into their regions). */
static int walk_after(h3_op *op, h3_op_visitor fn, void *ctx) {
  h3_region rest = {.first = op->next};
  return h3_region_walk(&rest, fn, ctx);
}

/* Uses of a value can only follow its definition in its scope: a result's region after
 * its op, a region's ops, a graph's body; the whole module is the fallback for IR whose
 * scoping is (temporarily) broken. */
void h3_value_replace_all_uses(h3_module *m, h3_value *from, h3_value *to) {
  assert(h3_type_equal(&from->type, &to->type));
  if (from == to || from->uses == 0) return;
  replace_ctx c = {from, to, from->uses};
  if (from->kind == H3_VALUE_RESULT && from->def && from->def->parent)
    walk_after(from->def, replace_visit, &c);
  else if (from->kind == H3_VALUE_REGION_ARG && from->region)
    h3_region_walk(from->region, replace_visit, &c);
  else if (from->kind == H3_VALUE_INPUT && from->graph)
    h3_region_walk(&from->graph->body, replace_visit, &c);
  if (c.left > 0) h3_module_walk(m, replace_visit, &c);
}

/* Drops the use counts held by the operands of op and of every op nested in it. */
static void drop_uses(h3_op *op) {
  for (int i = 0; i < op->n_operands; i++) op->operands[i]->uses--;
  for (int r = 0; r < op->n_regions; r++)
    for (h3_op *o = op->regions[r].first; o; o = o->next) drop_uses(o);
}

void h3_op_erase(h3_op *op) {
  if (!op->parent) return;
  for (int i = 0; i < op->n_results; i++) assert(op->results[i]->uses == 0);
  drop_uses(op);
  unlink_op(op);
}

/* Adds back the use counts of op and its nested ops (an erased op being relinked). */
static void add_uses(h3_op *op) {
  for (int i = 0; i < op->n_operands; i++) op->operands[i]->uses++;
  for (int r = 0; r < op->n_regions; r++)
    for (h3_op *o = op->regions[r].first; o; o = o->next) add_uses(o);
}

void h3_op_move_before(h3_op *op, h3_region *region, h3_op *before) {
  assert(op != before);
  if (op->parent)
    unlink_op(op);
  else
    add_uses(op);
  link_op(region, before, op);
}

int h3_region_walk(h3_region *r, h3_op_visitor fn, void *ctx) {
  h3_op *op = r->first;
  while (op) {
    h3_op *next = op->next;
    int stop = fn(op, ctx);
    if (stop) return stop;
    if (op->parent) /* the visitor may have erased it */
      for (int i = 0; i < op->n_regions; i++) {
        stop = h3_region_walk(&op->regions[i], fn, ctx);
        if (stop) return stop;
      }
    op = next;
  }
  return 0;
}

int h3_module_walk(h3_module *m, h3_op_visitor fn, void *ctx) {
  for (int i = 0; i < m->n_graphs; i++) {
    int stop = h3_region_walk(&m->graphs[i]->body, fn, ctx);
    if (stop) return stop;
  }
  return 0;
}

h3_region *h3_value_def_region(const h3_value *v) {
  switch (v->kind) {
  case H3_VALUE_RESULT: return v->def ? v->def->parent : NULL;
  case H3_VALUE_REGION_ARG: return v->region;
  case H3_VALUE_INPUT: return v->graph ? &v->graph->body : NULL;
  case H3_VALUE_PARAM: return NULL;
  }
  return NULL;
}

h3_op *h3_op_ancestor_in(h3_op *op, const h3_region *r) {
  while (op) {
    if (op->parent == r) return op;
    op = op->parent ? op->parent->parent : NULL;
  }
  return NULL;
}

static void zero_region(h3_region *r) {
  for (int i = 0; i < r->n_args; i++) r->args[i]->uses = 0;
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_results; i++) op->results[i]->uses = 0;
    for (int j = 0; j < op->n_regions; j++) zero_region(&op->regions[j]);
  }
}

static int count_visit(h3_op *op, void *ctx) {
  (void)ctx;
  for (int i = 0; i < op->n_operands; i++) op->operands[i]->uses++;
  return 0;
}

void h3_module_recount_uses(h3_module *m) {
  for (int i = 0; i < m->n_params; i++) m->params[i]->value->uses = 0;
  for (int g = 0; g < m->n_graphs; g++) {
    h3_graph *gr = m->graphs[g];
    for (int i = 0; i < gr->n_inputs; i++) gr->inputs[i]->uses = 0;
    zero_region(&gr->body);
  }
  h3_module_walk(m, count_visit, NULL);
}
