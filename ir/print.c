/* print.c: h3_module_print, the text form of a module (docs/ir-text.md).
 *
 * Values print as %name when they carry a source name (made unique within their graph
 * with a ".N" suffix) and as %N (a per-graph counter) otherwise; names are assigned in
 * print order with a hash set, so printing is linear in the module size. A value with a
 * planned offset prints " at OFFSET" after its type. Floats use h3_strbuf_double, so
 * the text parses back to the same bits; attributes print in stored order.
 */
#include "h3/op_registry.h"
#include "ir_internal.h"

#include <stdlib.h>
#include <string.h>

const char *const ir_init_names[IR_INIT_COUNT] = {
    [H3_INIT_NORMAL] = "normal",
    [H3_INIT_UNIFORM] = "uniform",
    [H3_INIT_CONST] = "const",
    [H3_INIT_ONES_PLUS_NORMAL] = "ones_plus_normal",
    [H3_INIT_ROPE_INV_FREQ] = "rope_inv_freq",
};
const char *const ir_quant_names[H3_QUANT_COUNT] = {"", "nvfp4_packed", "nvfp4_scale",
                                                    "nvfp4_global"};

bool ir_name_is_bare(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '.'))
      return false;
  return true;
}

void ir_print_quoted(h3_strbuf *b, const char *s) {
  h3_strbuf_append(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': h3_strbuf_append(b, "\\\""); break;
    case '\\': h3_strbuf_append(b, "\\\\"); break;
    case '\n': h3_strbuf_append(b, "\\n"); break;
    case '\t': h3_strbuf_append(b, "\\t"); break;
    case '\r': h3_strbuf_append(b, "\\r"); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        h3_strbuf_printf(b, "\\x%02x", *p);
      else
        h3_strbuf_appendn(b, (const char *)p, 1);
    }
  }
  h3_strbuf_append(b, "\"");
}

/* Attribute names, config keys and output names: bare when an identifier. */
static void print_key(h3_strbuf *b, const char *s) {
  bool ident = s[0] && !(s[0] >= '0' && s[0] <= '9');
  for (const char *p = s; ident && *p; p++)
    ident = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
  if (ident)
    h3_strbuf_append(b, s);
  else
    ir_print_quoted(b, s);
}

static void print_name(h3_strbuf *b, char sigil, const char *s) {
  h3_strbuf_appendn(b, &sigil, 1);
  if (ir_name_is_bare(s))
    h3_strbuf_append(b, s);
  else
    ir_print_quoted(b, s);
}

/* Per-graph naming state. */
typedef struct {
  h3_strbuf *out;
  h3_arena names;     /* the assigned name strings */
  const char **by_id; /* value id -> assigned name */
  int n_ids;
  h3_strmap used;     /* assigned names */
  h3_strmap next_sfx; /* base name -> last ".N" tried (as intptr) */
  int counter;        /* next %N for unnamed values */
  int indent;
} pctx;

static bool all_digits(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

/* Gives v a unique printed name (once) and returns it; NULL when out of memory. */
static const char *assign(pctx *c, const h3_value *v) {
  if (v->id >= 0 && v->id < c->n_ids && c->by_id[v->id]) return c->by_id[v->id];
  char buf[64];
  const char *name = NULL;
  if (v->name && !all_digits(v->name) && !h3_strmap_get(&c->used, v->name)) {
    name = h3_arena_strdup(&c->names, v->name);
  } else if (v->name && !all_digits(v->name)) {
    intptr_t k = (intptr_t)h3_strmap_get(&c->next_sfx, v->name);
    char *cand;
    do {
      cand = h3_arena_printf(&c->names, "%s.%ld", v->name, (long)++k);
    } while (cand && h3_strmap_get(&c->used, cand));
    const char *base = h3_arena_strdup(&c->names, v->name);
    if (base && h3_strmap_put(&c->next_sfx, base, (void *)k)) return NULL;
    name = cand;
  } else {
    do snprintf(buf, sizeof buf, "%d", c->counter++);
    while (h3_strmap_get(&c->used, buf));
    name = h3_arena_strdup(&c->names, buf);
  }
  if (!name || h3_strmap_put(&c->used, name, (void *)1)) return NULL;
  if (v->id >= 0 && v->id < c->n_ids) c->by_id[v->id] = name;
  return name;
}

static void print_value_ref(pctx *c, const h3_value *v) {
  if (!v) {
    h3_strbuf_append(c->out, "%\"<missing>\"");
  } else if (v->kind == H3_VALUE_PARAM) {
    print_name(c->out, '@', v->param ? v->param->name : v->name ? v->name : "?");
  } else {
    const char *n = assign(c, v);
    if (!n) c->out->oom = 1;
    print_name(c->out, '%', n ? n : "?");
  }
}

static void print_typed(pctx *c, const h3_value *v) {
  h3_type_print(c->out, &v->type);
  if (v->offset >= 0) h3_strbuf_printf(c->out, " at %lld", (long long)v->offset);
  if (h3_offset_input(v->offset) >= 0) h3_strbuf_printf(c->out, " at input %d", h3_offset_input(v->offset));
}

static void print_attr_value(h3_strbuf *b, const h3_attr *a) {
  switch (a->kind) {
  case H3_ATTR_INT: h3_strbuf_printf(b, "%lld", (long long)a->i); break;
  case H3_ATTR_FLOAT: h3_strbuf_double(b, a->f); break;
  case H3_ATTR_STRING: ir_print_quoted(b, a->s ? a->s : ""); break;
  case H3_ATTR_DTYPE: h3_strbuf_append(b, h3_dtype_name((h3_dtype)a->i)); break;
  case H3_ATTR_TIER: h3_strbuf_append(b, h3_tier_name((h3_tier)a->i)); break;
  case H3_ATTR_INTS:
  case H3_ATTR_FLOATS:
    if (a->kind == H3_ATTR_FLOATS && a->n == 0) h3_strbuf_append(b, "floats");
    h3_strbuf_append(b, "[");
    for (int i = 0; i < a->n; i++) {
      if (i) h3_strbuf_append(b, ", ");
      if (a->kind == H3_ATTR_INTS)
        h3_strbuf_printf(b, "%lld", (long long)a->ints[i]);
      else
        h3_strbuf_double(b, a->floats[i]);
    }
    h3_strbuf_append(b, "]");
    break;
  }
}

static void print_attrs(h3_strbuf *b, int n, const h3_attr *attrs) {
  h3_strbuf_append(b, "{");
  for (int i = 0; i < n; i++) {
    if (i) h3_strbuf_append(b, ", ");
    print_key(b, attrs[i].name);
    h3_strbuf_append(b, " = ");
    print_attr_value(b, &attrs[i]);
  }
  h3_strbuf_append(b, "}");
}

static void print_indent(pctx *c) {
  for (int i = 0; i < c->indent; i++) h3_strbuf_append(c->out, "  ");
}

static void print_op(pctx *c, const h3_op *op);

static void print_region(pctx *c, const h3_region *r) {
  h3_strbuf_append(c->out, " {\n");
  print_indent(c);
  h3_strbuf_append(c->out, "^(");
  for (int i = 0; i < r->n_args; i++) {
    if (i) h3_strbuf_append(c->out, ", ");
    print_value_ref(c, r->args[i]);
    h3_strbuf_append(c->out, ": ");
    print_typed(c, r->args[i]);
  }
  h3_strbuf_append(c->out, "):\n");
  c->indent++;
  for (const h3_op *op = r->first; op; op = op->next) print_op(c, op);
  c->indent--;
  print_indent(c);
  h3_strbuf_append(c->out, "}");
}

static void print_op(pctx *c, const h3_op *op) {
  h3_strbuf *b = c->out;
  print_indent(c);
  const char *name = h3_opcode_name(op->code);
  if (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) {
    h3_strbuf_append(b, name);
    for (int i = 0; i < op->n_operands; i++) {
      h3_strbuf_append(b, i ? ", " : " ");
      print_value_ref(c, op->operands[i]);
    }
    h3_strbuf_append(b, "\n");
    return;
  }
  for (int i = 0; i < op->n_results; i++) {
    if (i) h3_strbuf_append(b, ", ");
    print_value_ref(c, op->results[i]);
  }
  if (op->n_results) h3_strbuf_append(b, " = ");
  h3_strbuf_append(b, name);
  h3_strbuf_append(b, "(");
  for (int i = 0; i < op->n_operands; i++) {
    if (i) h3_strbuf_append(b, ", ");
    print_value_ref(c, op->operands[i]);
  }
  h3_strbuf_append(b, ")");
  if (op->n_attrs) {
    h3_strbuf_append(b, " ");
    print_attrs(b, op->n_attrs, op->attrs);
  }
  for (int i = 0; i < op->n_results; i++) {
    h3_strbuf_append(b, i ? ", " : " : ");
    print_typed(c, op->results[i]);
  }
  for (int i = 0; i < op->n_regions; i++) print_region(c, &op->regions[i]);
  h3_strbuf_append(b, "\n");
}

static void print_graph(h3_strbuf *b, const h3_module *m, const h3_graph *g) {
  pctx c = {.out = b, .n_ids = m->next_value_id, .indent = 2};
  h3_arena_init(&c.names);
  h3_strmap_init(&c.used);
  h3_strmap_init(&c.next_sfx);
  c.by_id = calloc((size_t)(c.n_ids > 0 ? c.n_ids : 1), sizeof(char *));
  if (!c.by_id) b->oom = 1;
  if (c.by_id) {
    h3_strbuf_append(b, g->kind == H3_GRAPH_PROGRAM ? "  program " : "  graph ");
    print_name(b, '@', g->name);
    h3_strbuf_append(b, "(");
    for (int i = 0; i < g->n_inputs; i++) {
      if (i) h3_strbuf_append(b, ", ");
      print_value_ref(&c, g->inputs[i]);
      h3_strbuf_append(b, ": ");
      print_typed(&c, g->inputs[i]);
    }
    h3_strbuf_append(b, ") -> (");
    const h3_op *ret = g->body.last && g->body.last->code == H3_OP_RETURN ? g->body.last : NULL;
    for (int i = 0; i < g->n_outputs; i++) {
      if (i) h3_strbuf_append(b, ", ");
      print_key(b, g->output_names[i]);
      if (ret && i < ret->n_operands && ret->operands[i]) {
        h3_strbuf_append(b, ": ");
        h3_type_print(b, &ret->operands[i]->type);
      }
    }
    h3_strbuf_append(b, ")");
    if (g->n_attrs) {
      h3_strbuf_append(b, " attrs ");
      print_attrs(b, g->n_attrs, g->attrs);
    }
    h3_strbuf_append(b, " {\n");
    for (const h3_op *op = g->body.first; op; op = op->next) print_op(&c, op);
    h3_strbuf_append(b, "  }\n");
  }
  free(c.by_id);
  h3_strmap_free(&c.used);
  h3_strmap_free(&c.next_sfx);
  h3_arena_free(&c.names);
}

static void print_param(h3_strbuf *b, const h3_param *p) {
  h3_strbuf_append(b, "  param ");
  print_name(b, '@', p->name);
  h3_strbuf_append(b, " : ");
  h3_type_print(b, &p->type);
  if (p->group) {
    h3_strbuf_append(b, " group ");
    ir_print_quoted(b, p->group);
  }
  if (p->group_dims) h3_strbuf_printf(b, " dims %d", p->group_dims);
  if (p->group_base) h3_strbuf_printf(b, " base %lld", (long long)p->group_base);
  unsigned k = (unsigned)p->init;
  h3_strbuf_printf(b, " init %s(", k < IR_INIT_COUNT ? ir_init_names[k] : "normal");
  if (p->init_scale != 0 || p->init_value == 0) {
    h3_strbuf_append(b, "scale = ");
    h3_strbuf_double(b, p->init_scale);
  }
  if (p->init_value != 0) {
    h3_strbuf_append(b, p->init_scale != 0 ? ", value = " : "value = ");
    h3_strbuf_double(b, p->init_value);
  }
  h3_strbuf_append(b, ")");
  if (p->quant > H3_QUANT_NONE && p->quant < H3_QUANT_COUNT) {
    h3_strbuf_printf(b, " quant %s ", ir_quant_names[p->quant]);
    ir_print_quoted(b, p->quant_source ? p->quant_source : "");
  }
  h3_strbuf_append(b, "\n");
}

void h3_module_print(h3_strbuf *out, const h3_module *m) {
  h3_strbuf_append(out, "module ");
  print_name(out, '@', m->model ? m->model : "");
  h3_strbuf_append(out, " config ");
  ir_print_quoted(out, m->config ? m->config : "");
  h3_strbuf_append(out, " {\n");
  if (m->source) {
    h3_strbuf_append(out, "  source ");
    ir_print_quoted(out, m->source);
    h3_strbuf_append(out, "\n");
  }
  if (m->n_config) {
    h3_strbuf_append(out, "  config {");
    for (int i = 0; i < m->n_config; i++) {
      h3_strbuf_append(out, i ? ", " : " ");
      print_key(out, m->config_entries[i].key);
      h3_strbuf_printf(out, " = %lld", (long long)m->config_entries[i].value);
    }
    h3_strbuf_append(out, " }\n");
  }
  for (int i = 0; i < m->n_params; i++) print_param(out, m->params[i]);
  for (int i = 0; i < m->n_graphs; i++) print_graph(out, m, m->graphs[i]);
  h3_strbuf_append(out, "}\n");
}
