/* module.c: the module, its config, parameters, graphs and graph inputs/outputs, and
 * attributes (ir.h), plus the arena helpers of ir_internal.h.
 *
 * Everything is allocated in the module's arena; an allocation failure sets m->oom and
 * the function returns NULL (or does nothing), so callers check one flag at the end.
 * Attribute values are deep-copied into the arena when stored, so callers may pass
 * attributes built on the stack.
 */
#include "ir_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- arena helpers ----------------------------------------------------------------------- */
void *ir_alloc(h3_module *m, size_t size) {
  void *p = h3_arena_alloc(&m->arena, size);
  if (!p) m->oom = true;
  return p;
}

const char *ir_strdup(h3_module *m, const char *s) {
  if (!s) return NULL;
  char *p = h3_arena_strdup(&m->arena, s);
  if (!p) m->oom = true;
  return p;
}

int ir_cap(int n) {
  int c = 4;
  while (c < n) c *= 2;
  return c;
}

void *ir_array_new(h3_module *m, int n, size_t elem) {
  return ir_alloc(m, (size_t)ir_cap(n) * elem);
}

void *ir_array_grow(h3_module *m, void *arr, int n, size_t elem) {
  if (arr && n + 1 <= ir_cap(n)) return arr;
  void *na = ir_array_new(m, n + 1, elem);
  if (na && n > 0) memcpy(na, arr, (size_t)n * elem);
  return na;
}

h3_value *ir_value_new(h3_module *m, h3_value_kind kind, h3_type type, const char *name,
                       h3_span span) {
  h3_value *v = ir_alloc(m, sizeof *v);
  if (!v) return NULL;
  v->id = m->next_value_id++;
  v->kind = kind;
  v->type = type;
  v->name = ir_strdup(m, name);
  v->offset = -1;
  v->span = span;
  return v;
}

/* ---- attributes ------------------------------------------------------------------------- */
static h3_attr attr_copy(h3_module *m, h3_attr a) {
  h3_attr c = a;
  c.name = ir_strdup(m, a.name);
  c.s = ir_strdup(m, a.s);
  c.ints = NULL;
  c.floats = NULL;
  if (a.kind == H3_ATTR_INTS && a.n > 0) {
    c.ints = ir_alloc(m, (size_t)a.n * sizeof(int64_t));
    if (c.ints && a.ints) memcpy(c.ints, a.ints, (size_t)a.n * sizeof(int64_t));
  } else if (a.kind == H3_ATTR_FLOATS && a.n > 0) {
    c.floats = ir_alloc(m, (size_t)a.n * sizeof(double));
    if (c.floats && a.floats) memcpy(c.floats, a.floats, (size_t)a.n * sizeof(double));
  }
  return c;
}

const h3_attr *ir_attrs_find(const h3_attr *attrs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (attrs[i].name && strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return NULL;
}

void ir_attrs_set(h3_module *m, h3_attr **attrs, int *n, h3_attr a) {
  h3_attr c = attr_copy(m, a);
  for (int i = 0; i < *n; i++)
    if ((*attrs)[i].name && a.name && strcmp((*attrs)[i].name, a.name) == 0) {
      (*attrs)[i] = c;
      return;
    }
  h3_attr *na = ir_array_grow(m, *attrs, *n, sizeof(h3_attr));
  if (!na) return;
  na[*n] = c;
  *attrs = na;
  (*n)++;
}

h3_attr h3_attr_int(h3_module *m, const char *name, int64_t v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_INT, .i = v};
  return a;
}

h3_attr h3_attr_float(h3_module *m, const char *name, double v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_FLOAT, .f = v};
  return a;
}

h3_attr h3_attr_string(h3_module *m, const char *name, const char *v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_STRING, .s = ir_strdup(m, v)};
  return a;
}

h3_attr h3_attr_ints(h3_module *m, const char *name, int n, const int64_t *v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_INTS, .n = n};
  if (n > 0) {
    a.ints = ir_alloc(m, (size_t)n * sizeof(int64_t));
    if (a.ints) memcpy(a.ints, v, (size_t)n * sizeof(int64_t));
    else a.n = 0;
  }
  return a;
}

h3_attr h3_attr_floats(h3_module *m, const char *name, int n, const double *v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_FLOATS, .n = n};
  if (n > 0) {
    a.floats = ir_alloc(m, (size_t)n * sizeof(double));
    if (a.floats) memcpy(a.floats, v, (size_t)n * sizeof(double));
    else a.n = 0;
  }
  return a;
}

h3_attr h3_attr_dtype(h3_module *m, const char *name, h3_dtype v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_DTYPE, .i = v};
  return a;
}

h3_attr h3_attr_tier(h3_module *m, const char *name, h3_tier v) {
  h3_attr a = {.name = ir_strdup(m, name), .kind = H3_ATTR_TIER, .i = v};
  return a;
}

h3_tier h3_op_attr_tier(const h3_op *op, const char *name, h3_tier fallback) {
  const h3_attr *a = h3_op_attr(op, name);
  return a && a->kind == H3_ATTR_TIER ? (h3_tier)a->i : fallback;
}

const h3_attr *h3_op_attr(const h3_op *op, const char *name) {
  return ir_attrs_find(op->attrs, op->n_attrs, name);
}

int64_t h3_op_attr_int(const h3_op *op, const char *name, int64_t fallback) {
  const h3_attr *a = h3_op_attr(op, name);
  return a && (a->kind == H3_ATTR_INT || a->kind == H3_ATTR_DTYPE) ? a->i : fallback;
}

double h3_op_attr_float(const h3_op *op, const char *name, double fallback) {
  const h3_attr *a = h3_op_attr(op, name);
  if (!a) return fallback;
  if (a->kind == H3_ATTR_FLOAT) return a->f;
  if (a->kind == H3_ATTR_INT) return (double)a->i;
  return fallback;
}

bool h3_value_const_int(const h3_value *v, int64_t *out) {
  const h3_op *c = v->kind == H3_VALUE_RESULT ? v->def : NULL;
  h3_dtype t = v->type.dtype;
  if (!c || c->code != H3_OP_CONST || v->type.rank != 0 ||
      (t != H3_I32 && t != H3_I64 && t != H3_I8 && t != H3_U8))
    return false;
  *out = (int64_t)h3_op_attr_float(c, "value", 0.0);
  return true;
}

const char *h3_op_attr_string(const h3_op *op, const char *name, const char *fallback) {
  const h3_attr *a = h3_op_attr(op, name);
  return a && a->kind == H3_ATTR_STRING ? a->s : fallback;
}

void h3_op_set_attr(h3_module *m, h3_op *op, h3_attr a) {
  ir_attrs_set(m, &op->attrs, &op->n_attrs, a);
}

void h3_graph_set_attr(h3_module *m, h3_graph *g, h3_attr a) {
  ir_attrs_set(m, &g->attrs, &g->n_attrs, a);
}

const h3_attr *h3_graph_attr(const h3_graph *g, const char *name) {
  return ir_attrs_find(g->attrs, g->n_attrs, name);
}

/* ---- module --------------------------------------------------------------------------- */
h3_module *h3_module_new(const char *model, const char *config) {
  h3_module *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  h3_arena_init(&m->arena);
  m->model = ir_strdup(m, model ? model : "");
  m->config = ir_strdup(m, config ? config : "");
  if (m->oom) {
    h3_module_free(m);
    return NULL;
  }
  return m;
}

void h3_module_free(h3_module *m) {
  if (!m) return;
  h3_strmap_free(&m->config_index);
  h3_arena_free(&m->arena);
  free(m);
}

int64_t h3_module_config(const h3_module *m, const char *key, int64_t fallback) {
  intptr_t at = (intptr_t)h3_strmap_get(&m->config_index, key);
  return at > 0 ? m->config_entries[at - 1].value : fallback;
}

/* Constant time per key (a config of many keys must not take quadratic time). */
void h3_module_set_config(h3_module *m, const char *key, int64_t value) {
  intptr_t at = (intptr_t)h3_strmap_get(&m->config_index, key);
  if (at > 0) {
    m->config_entries[at - 1].value = value;
    return;
  }
  h3_config_entry *e = ir_array_grow(m, m->config_entries, m->n_config, sizeof *e);
  const char *k = ir_strdup(m, key);
  if (!e || !k || h3_strmap_put(&m->config_index, k, (void *)(intptr_t)(m->n_config + 1))) {
    m->oom = true;
    return;
  }
  e[m->n_config].key = k;
  e[m->n_config].value = value;
  m->config_entries = e;
  m->n_config++;
}

h3_graph *h3_module_graph(const h3_module *m, const char *name) {
  for (int i = 0; i < m->n_graphs; i++)
    if (strcmp(m->graphs[i]->name, name) == 0) return m->graphs[i];
  return NULL;
}

int h3_graph_donated_output(const h3_graph *g, int input) {
  const char *name = input >= 0 && input < g->n_inputs ? g->inputs[input]->name : NULL;
  for (int i = 0; name && i < g->n_outputs; i++)
    if (g->output_names[i] && strcmp(g->output_names[i], name) == 0) return i;
  return -1;
}

h3_param *h3_module_param(const h3_module *m, const char *name) {
  for (int i = 0; i < m->n_params; i++)
    if (strcmp(m->params[i]->name, name) == 0) return m->params[i];
  return NULL;
}

/* Grows a (pointer array, count, cap) triple by one slot; 0 on success. */
static int grow_ptrs(h3_module *m, void ***arr, int n, int *cap) {
  if (n < *cap) return 0;
  int nc = *cap ? *cap * 2 : 16;
  void **na = ir_alloc(m, (size_t)nc * sizeof(void *));
  if (!na) return -1;
  if (n > 0) memcpy(na, *arr, (size_t)n * sizeof(void *));
  *arr = na;
  *cap = nc;
  return 0;
}

h3_param *h3_module_add_param(h3_module *m, const char *name, h3_type type, h3_span span) {
  h3_param *p = ir_alloc(m, sizeof *p);
  if (!p || grow_ptrs(m, (void ***)&m->params, m->n_params, &m->cap_params)) return NULL;
  p->name = ir_strdup(m, name);
  p->type = type;
  p->span = span;
  p->init = H3_INIT_NORMAL;
  p->value = ir_value_new(m, H3_VALUE_PARAM, type, name, span);
  if (!p->name || !p->value) return NULL;
  p->value->param = p;
  m->params[m->n_params++] = p;
  return p;
}

h3_graph *h3_module_add_graph(h3_module *m, const char *name, h3_graph_kind kind, h3_span span) {
  h3_graph *g = ir_alloc(m, sizeof *g);
  if (!g || grow_ptrs(m, (void ***)&m->graphs, m->n_graphs, &m->cap_graphs)) return NULL;
  g->name = ir_strdup(m, name);
  if (!g->name) return NULL;
  g->kind = kind;
  g->span = span;
  m->graphs[m->n_graphs++] = g;
  return g;
}

h3_value *h3_graph_add_input(h3_module *m, h3_graph *g, const char *name, h3_type type,
                             h3_span span) {
  h3_value **in = ir_array_grow(m, g->inputs, g->n_inputs, sizeof *in);
  h3_value *v = ir_value_new(m, H3_VALUE_INPUT, type, name, span);
  if (!in || !v) return NULL;
  v->graph = g;
  v->index = g->n_inputs;
  in[g->n_inputs++] = v;
  g->inputs = in;
  return v;
}

void h3_graph_add_output(h3_module *m, h3_graph *g, const char *name) {
  const char **o = ir_array_grow(m, (void *)g->output_names, g->n_outputs, sizeof *o);
  const char *n = ir_strdup(m, name);
  if (!o || !n) return;
  o[g->n_outputs++] = n;
  g->output_names = o;
}
