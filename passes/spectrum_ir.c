/* spectrum_ir.c: the IR helpers of the step-skipping passes (spectrum.h): finding the
 * site (program sampling loop -> call of the step graph -> its `trunk` loop), cloning
 * ops, regions and graphs through a value map, splitting loops, sweeping dead ops and
 * dropping graphs that nothing calls any more.
 */
#include "h3/rewrite.h"

#include "spectrum.h"

#include <stdlib.h>
#include <string.h>

h3_status h3_skip_oom(h3_diag *d, const char *pass) {
  h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "%s: out of memory while rewriting the IR", pass);
  return H3_ERR;
}

/* ---- the site ------------------------------------------------------------------------------ */
static h3_op *trunk_of(const h3_graph *g) {
  for (h3_op *op = g->body.first; op; op = op->next)
    if (op->code == H3_OP_LOOP && strcmp(h3_op_attr_string(op, "label", ""), "trunk") == 0)
      return op;
  return NULL;
}

int h3_skip_site_find(h3_module *m, const char *pass, h3_skip_site *s, h3_diag *d) {
  int found = 0;
  memset(s, 0, sizeof *s);
  for (int gi = 0; gi < m->n_graphs; gi++) {
    h3_graph *prog = m->graphs[gi];
    if (prog->kind != H3_GRAPH_PROGRAM) continue;
    for (h3_op *loop = prog->body.first; loop; loop = loop->next) {
      if (loop->code != H3_OP_LOOP) continue;
      for (h3_op *op = loop->regions[0].first; op; op = op->next) {
        if (op->code != H3_OP_CALL) continue;
        h3_graph *g = h3_module_graph(m, h3_op_attr_string(op, "callee", ""));
        h3_op *trunk = g ? trunk_of(g) : NULL;
        if (!trunk) continue;
        if (found) {
          h3_diag_error(d, op->span, "keep one call of the stepping graph per sampling loop",
                        "%s: two sampling-loop calls reach a `trunk` loop ('%s' and '%s')", pass,
                        s->step->name, g->name);
          return -1;
        }
        *s = (h3_skip_site){prog, loop, op, g, trunk};
        found = 1;
      }
    }
  }
  if (!found) return 0;
  h3_op *t = s->trunk;
  if (t->n_operands != 1 || t->results[0]->type.rank != 2) {
    h3_diag_error(d, t->span,
                  "the block stack must carry one [rows, dim] hidden state: "
                  "trunk: repeat i in layers { x = block(x, ...) }",
                  "%s: graph '%s': the `trunk` loop carries %d values; expected one [rows, dim] "
                  "tensor",
                  pass, s->step->name, t->n_operands);
    return -1;
  }
  return 1;
}

/* ---- value maps ------------------------------------------------------------------------------ */
h3_status h3_value_map_init(h3_value_map *vm, const h3_module *m) {
  vm->n = m->next_value_id;
  vm->to = calloc((size_t)vm->n + 1, sizeof *vm->to);
  return vm->to ? H3_OK : H3_ERR;
}

void h3_value_map_free(h3_value_map *vm) {
  free(vm->to);
  vm->to = NULL;
  vm->n = 0;
}

void h3_value_map_set(h3_value_map *vm, const h3_value *from, h3_value *to) {
  if (from->id >= 0 && from->id < vm->n) vm->to[from->id] = to;
}

h3_value *h3_value_map_get(const h3_value_map *vm, h3_value *v) {
  if (v->id >= 0 && v->id < vm->n && vm->to[v->id]) return vm->to[v->id];
  return v;
}

/* ---- cloning --------------------------------------------------------------------------------- */
h3_op *h3_op_clone(h3_builder *b, h3_value_map *vm, const h3_op *op) {
  h3_value *ops_buf[16];
  h3_value **ops = op->n_operands <= 16 ? ops_buf : malloc((size_t)op->n_operands * sizeof *ops);
  h3_type types_buf[8];
  h3_type *types =
      op->n_results <= 8 ? types_buf : malloc((size_t)op->n_results * sizeof *types);
  h3_op *nop = NULL;
  if (!ops || !types) goto done;
  for (int i = 0; i < op->n_operands; i++) ops[i] = h3_value_map_get(vm, op->operands[i]);
  for (int i = 0; i < op->n_results; i++) types[i] = op->results[i]->type;
  h3_span keep = b->span;
  b->span = op->span;
  nop = h3_build_op_typed(b, op->code, op->n_operands, ops, op->n_attrs, op->attrs, op->n_results,
                          types, op->n_regions);
  b->span = keep;
  if (!nop) goto done;
  for (int i = 0; i < op->n_results; i++) {
    nop->results[i]->name = op->results[i]->name;
    h3_value_map_set(vm, op->results[i], nop->results[i]);
  }
  for (int r = 0; r < op->n_regions; r++) {
    const h3_region *src = &op->regions[r];
    for (int i = 0; i < src->n_args; i++) {
      h3_value *a = h3_region_add_arg(b->m, &nop->regions[r], src->args[i]->type,
                                      src->args[i]->name, src->args[i]->span);
      if (!a) {
        nop = NULL;
        goto done;
      }
      h3_value_map_set(vm, src->args[i], a);
    }
    if (h3_region_clone_into(b->m, vm, src, &nop->regions[r]) != H3_OK) {
      nop = NULL;
      goto done;
    }
  }
done:
  if (ops != ops_buf) free(ops);
  if (types != types_buf) free(types);
  return nop;
}

h3_status h3_region_clone_into(h3_module *m, h3_value_map *vm, const h3_region *src,
                               h3_region *dst) {
  h3_builder b = {.m = m, .region = dst, .before = NULL};
  for (const h3_op *op = src->first; op; op = op->next)
    if (!h3_op_clone(&b, vm, op)) return H3_ERR;
  return m->oom ? H3_ERR : H3_OK;
}

h3_graph *h3_graph_clone(h3_module *m, h3_value_map *vm, const h3_graph *g, const char *name) {
  h3_graph *ng = h3_module_add_graph(m, name, g->kind, g->span);
  if (!ng) return NULL;
  for (int i = 0; i < g->n_inputs; i++) {
    const h3_value *in = g->inputs[i];
    h3_value *v = h3_graph_add_input(m, ng, in->name, in->type, in->span);
    if (!v) return NULL;
    h3_value_map_set(vm, in, v);
  }
  for (int i = 0; i < g->n_outputs; i++) h3_graph_add_output(m, ng, g->output_names[i]);
  if (h3_region_clone_into(m, vm, &g->body, &ng->body) != H3_OK || m->oom) return NULL;
  return ng;
}

/* ---- dead ops and unused graphs ------------------------------------------------------------ */
static bool sweep_region(h3_module *m, h3_region *r) {
  bool changed = false;
  for (h3_op *op = r->last; op;) {
    h3_op *prev = op->prev;
    bool used = false;
    for (int i = 0; i < op->n_results; i++) used |= op->results[i]->uses > 0;
    if (!used && op->code != H3_OP_YIELD && op->code != H3_OP_RETURN && h3_op_is_pure(m, op)) {
      h3_op_erase(op);
      changed = true;
    } else {
      for (int i = 0; i < op->n_regions; i++) changed |= sweep_region(m, &op->regions[i]);
    }
    op = prev;
  }
  return changed;
}

void h3_graph_sweep_dead(h3_module *m, h3_graph *g) {
  while (sweep_region(m, &g->body)) {
  }
}

typedef struct {
  const char *name;
  bool used;
} use_ctx;

static int names_graph(h3_op *op, void *p) {
  use_ctx *u = p;
  static const char *const keys[] = {"callee", "then_callee", "else_callee"};
  if (op->code != H3_OP_CALL && op->code != H3_OP_BRANCH) return 0;
  for (int i = 0; i < 3; i++)
    if (strcmp(h3_op_attr_string(op, keys[i], ""), u->name) == 0) u->used = true;
  return u->used;
}

void h3_graph_drop_if_unused(h3_module *m, const h3_graph *g) {
  use_ctx u = {g->name, false};
  h3_module_walk(m, names_graph, &u);
  if (u.used) return;
  /* erase its ops last to first so that the use counts of parameters stay right */
  for (h3_op *op = g->body.last; op;) {
    h3_op *prev = op->prev;
    h3_op_erase(op);
    op = prev;
  }
  int j = 0;
  for (int i = 0; i < m->n_graphs; i++)
    if (m->graphs[i] != g) m->graphs[j++] = m->graphs[i];
  m->n_graphs = j;
}

const char *h3_graph_fresh_name(h3_module *m, const char *base) {
  if (!h3_module_graph(m, base)) return h3_arena_strdup(&m->arena, base);
  for (int i = 1;; i++) {
    char *n = h3_arena_printf(&m->arena, "%s.%d", base, i);
    if (!n || !h3_module_graph(m, n)) return n;
  }
}

/* ---- shifted loop bodies --------------------------------------------------------------------- */
h3_status h3_loop_body_clone(h3_module *m, h3_value_map *vm, const h3_region *src, h3_region *dst,
                             int64_t shift, h3_body_hook hook, void *hook_ctx, h3_diag *d) {
  h3_value *k = dst->args[0], *old_k = src->args[0];
  h3_builder b = {.m = m, .region = dst, .before = NULL, .span = dst->parent->span};
  int idx_uses = 0;
  for (const h3_op *op = src->first; op; op = op->next)
    if ((op->code == H3_OP_INDEX || op->code == H3_OP_SET_INDEX) && op->operands[1] == old_k)
      idx_uses++;
  h3_value *kabs = k;
  if (shift != 0 && old_k->uses > idx_uses) { /* counter + shift for the other uses */
    h3_attr ca[2] = {h3_attr_float(m, "value", (double)shift), h3_attr_dtype(m, "dtype", k->type.dtype)};
    h3_op *c = h3_build_op(&b, H3_OP_CONST, 0, NULL, 2, ca, 0, d);
    h3_value *ops[2] = {k, c ? c->results[0] : NULL};
    h3_op *add = c ? h3_build_op(&b, H3_OP_ADD, 2, ops, 0, NULL, 0, d) : NULL;
    if (!add) return H3_ERR;
    kabs = add->results[0];
    kabs->name = "step";
  }
  h3_value_map_set(vm, old_k, kabs);
  for (const h3_op *op = src->first; op; op = op->next) {
    bool handled = false;
    if (hook && hook(hook_ctx, &b, vm, op, &handled) != H3_OK) return H3_ERR;
    if (handled) continue;
    h3_op *no = h3_op_clone(&b, vm, op);
    if (!no) return h3_skip_oom(d, "step skipping");
    if ((op->code == H3_OP_INDEX || op->code == H3_OP_SET_INDEX) && op->operands[1] == old_k) {
      h3_op_set_operand(no, 1, k);
      h3_op_set_attr(m, no, h3_attr_int(m, "offset", h3_op_attr_int(op, "offset", 0) + shift));
    }
  }
  return m->oom ? h3_skip_oom(d, "step skipping") : H3_OK;
}

h3_op *h3_loop_split(h3_module *m, h3_op *loop, int64_t at, const char *label, h3_diag *d) {
  const h3_region *body = &loop->regions[0];
  int n = loop->n_operands;
  h3_type types[16];
  h3_value_map vm;
  if (n > 16 || h3_value_map_init(&vm, m) != H3_OK) {
    h3_diag_error(d, loop->span, "carry at most 16 values in a loop that is split",
                  "splitting loop '%s': %d carried values", h3_op_attr_string(loop, "label", ""), n);
    return NULL;
  }
  for (int i = 0; i < n; i++) types[i] = loop->results[i]->type;
  h3_builder b = {.m = m, .region = loop->parent, .before = loop->next, .span = loop->span};
  h3_op *nl = h3_build_op_typed(&b, H3_OP_LOOP, n, loop->operands, loop->n_attrs, loop->attrs, n,
                                types, 1);
  bool ok = nl && h3_region_add_arg(m, &nl->regions[0], body->args[0]->type, body->args[0]->name,
                                    loop->span);
  for (int i = 0; ok && i < n; i++) {
    h3_value *a = h3_region_add_arg(m, &nl->regions[0], types[i], body->args[i + 1]->name, loop->span);
    ok = a != NULL;
    if (ok) h3_value_map_set(&vm, body->args[i + 1], a);
  }
  ok = ok && h3_loop_body_clone(m, &vm, body, &nl->regions[0], at, NULL, NULL, d) == H3_OK;
  h3_value_map_free(&vm);
  if (!ok) return h3_skip_oom(d, "splitting a loop"), NULL;
  h3_op_set_attr(m, nl, h3_attr_int(m, "count", h3_op_attr_int(loop, "count", 0) - at));
  h3_op_set_attr(m, nl, h3_attr_string(m, "label", label));
  h3_op_set_attr(m, loop, h3_attr_int(m, "count", at));
  for (int i = 0; i < n; i++) {
    nl->results[i]->name = loop->results[i]->name;
    h3_value_replace_all_uses(m, loop->results[i], nl->results[i]);
    h3_op_set_operand(nl, i, loop->results[i]);
  }
  return m->oom ? (h3_skip_oom(d, "splitting a loop"), NULL) : nl;
}
