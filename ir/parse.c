/* parse.c: h3_module_parse, the recursive-descent reader of the IR text form
 * (docs/ir-text.md), building the module through the builder API.
 *
 * Names resolve through hash maps (params module-wide, values per graph), so parsing is
 * linear. A value must be written before its use; scope, terminators and types are then
 * checked by h3_verify_module on the finished module. The first syntax error stops the
 * parse (reported at file:line:col with what was expected). Region nesting is limited
 * to IR_MAX_DEPTH so no input can exhaust the stack.
 */
#include "h3/op_registry.h"
#include "ir_lex.h"

#include <stdlib.h>
#include <string.h>

#define IR_MAX_DEPTH 64

typedef struct {
  ir_lexer lx;
  ir_tok tok;
  h3_module *m;
  h3_diag *d;
  h3_arena tmp; /* token texts and scratch arrays */
  h3_strmap params, values;
  const char *file; /* in the module's arena */
  bool failed;
  int depth;
} pctx;

static void next(pctx *p) { p->tok = ir_lex_next(&p->lx); }

static const char *tok_desc(const ir_tok *t, char *buf, size_t n) {
  switch (t->kind) {
  case TK_EOF: return "end of input";
  case TK_STRING: snprintf(buf, n, "string \"%.40s\"", t->text); return buf;
  case TK_VNAME: snprintf(buf, n, "'%%%.40s'", t->text); return buf;
  case TK_GNAME: snprintf(buf, n, "'@%.40s'", t->text); return buf;
  default: snprintf(buf, n, "'%.40s'", t->text); return buf;
  }
}

__attribute__((format(printf, 3, 4))) static void fail_at(pctx *p, h3_span at, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = true;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  h3_diag_error(p->d, at, "docs/ir-text.md describes the IR text form", "%s", msg);
}

/* "expected WHAT, got TOKEN" at the current token (or its lexical error). */
static void expected(pctx *p, const char *what) {
  if (p->tok.kind == TK_ERROR) {
    fail_at(p, p->tok.span, "%s", p->tok.text);
    return;
  }
  char buf[64];
  fail_at(p, p->tok.span, "expected %s, got %s", what, tok_desc(&p->tok, buf, sizeof buf));
}

static bool at_punct(const pctx *p, char c) { return p->tok.kind == TK_PUNCT && p->tok.text[0] == c; }
static bool at_word(const pctx *p, const char *w) { return p->tok.kind == TK_IDENT && strcmp(p->tok.text, w) == 0; }

static bool accept(pctx *p, char c) {
  if (!at_punct(p, c)) return false;
  next(p);
  return true;
}

static bool expect(pctx *p, char c) {
  if (p->failed) return false;
  if (accept(p, c)) return true;
  char what[8] = {'\'', c, '\'', 0};
  expected(p, what);
  return false;
}

static bool expect_word(pctx *p, const char *w) {
  if (p->failed) return false;
  if (at_word(p, w)) {
    next(p);
    return true;
  }
  char what[40];
  snprintf(what, sizeof what, "'%s'", w);
  expected(p, what);
  return false;
}

/* The token after the current one, without consuming anything. */
static ir_tok peek2(pctx *p) {
  ir_lexer copy = p->lx;
  return ir_lex_next(&copy);
}

static const char *mstr(pctx *p, const char *s) {
  const char *r = ir_strdup(p->m, s);
  if (!r) fail_at(p, p->tok.span, "out of memory");
  return r;
}

/* Scratch array growth in the tmp arena (capacity doubles at powers of two). */
static void *grow(pctx *p, void *arr, int n, size_t elem) {
  if (n > 0 && (n & (n - 1)) != 0) return arr;
  void *na = h3_arena_alloc(&p->tmp, (size_t)(n ? 2 * n : 1) * elem);
  if (!na) {
    fail_at(p, p->tok.span, "out of memory");
    return NULL;
  }
  if (n) memcpy(na, arr, (size_t)n * elem);
  return na;
}

static bool parse_int(pctx *p, int64_t *out, const char *what) {
  if (p->failed) return false;
  if (p->tok.kind != TK_INT) {
    expected(p, what);
    return false;
  }
  *out = p->tok.i;
  next(p);
  return true;
}

static bool parse_type(pctx *p, h3_type *t) {
  if (p->failed) return false;
  h3_dtype dt;
  if (p->tok.kind != TK_IDENT || !h3_dtype_from_name(p->tok.text, &dt)) {
    expected(p, "a type like bf16[8, 64]");
    return false;
  }
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  next(p);
  if (!expect(p, '[')) return false;
  while (!at_punct(p, ']')) {
    if (t->rank && !expect(p, ',')) return false;
    h3_span at = p->tok.span;
    int64_t d;
    if (!parse_int(p, &d, "a dimension")) return false;
    if (d < 0) fail_at(p, at, "dimension %lld is negative", (long long)d);
    if (t->rank == H3_MAX_RANK) fail_at(p, at, "a type has at most %d dimensions", H3_MAX_RANK);
    if (p->failed) return false;
    t->dims[t->rank++] = d;
  }
  next(p);
  return true;
}

/* Optional " at OFFSET" (in the arena) or " at input J" (in donated input J's buffer)
 * after a type. */
static bool parse_at(pctx *p, h3_value *v) {
  if (!at_word(p, "at")) return !p->failed;
  next(p);
  bool input = at_word(p, "input");
  if (input) next(p);
  h3_span s = p->tok.span;
  int64_t off;
  if (!parse_int(p, &off, input ? "an input index" : "a byte offset")) return false;
  if (off < 0) fail_at(p, s, "%s %lld is negative", input ? "input index" : "offset", (long long)off);
  if (off > (1ll << 30) && input) fail_at(p, s, "input index %lld is too large", (long long)off);
  if (v) v->offset = input ? h3_offset_of_input((int)off) : off;
  return !p->failed;
}

/* An attribute name, config key or output name: identifier or string. */
static const char *parse_key(pctx *p, const char *what) {
  if (p->failed) return NULL;
  if (p->tok.kind != TK_IDENT && p->tok.kind != TK_STRING) {
    expected(p, what);
    return NULL;
  }
  const char *k = p->tok.text;
  next(p);
  return k;
}

static bool parse_list(pctx *p, h3_attr *a, bool floats) {
  if (!expect(p, '[')) return false;
  int n = 0;
  int64_t *ints = NULL;
  double *fl = NULL;
  while (!at_punct(p, ']')) {
    if (n && !expect(p, ',')) return false;
    if (p->tok.kind != TK_INT && p->tok.kind != TK_FLOAT) {
      expected(p, "a number");
      return false;
    }
    if (!(ints = grow(p, ints, n, sizeof *ints)) || !(fl = grow(p, fl, n, sizeof *fl))) return false;
    floats |= p->tok.kind == TK_FLOAT;
    ints[n] = p->tok.i;
    fl[n] = p->tok.kind == TK_FLOAT ? p->tok.f : (double)p->tok.i;
    n++;
    next(p);
  }
  next(p);
  a->kind = floats ? H3_ATTR_FLOATS : H3_ATTR_INTS;
  a->n = n;
  a->ints = floats ? NULL : ints;
  a->floats = floats ? fl : NULL;
  return true;
}

static bool parse_attr_value(pctx *p, h3_attr *a) {
  h3_dtype dt;
  h3_tier tier;
  switch (p->tok.kind) {
  case TK_INT: a->kind = H3_ATTR_INT; a->i = p->tok.i; break;
  case TK_FLOAT: a->kind = H3_ATTR_FLOAT; a->f = p->tok.f; break;
  case TK_STRING: a->kind = H3_ATTR_STRING; a->s = p->tok.text; break;
  case TK_IDENT:
    if (h3_dtype_from_name(p->tok.text, &dt)) {
      a->kind = H3_ATTR_DTYPE;
      a->i = dt;
      break;
    }
    if (h3_tier_parse(p->tok.text, &tier)) {
      a->kind = H3_ATTR_TIER;
      a->i = tier;
      break;
    }
    if (strcmp(p->tok.text, "floats") == 0) {
      next(p);
      return parse_list(p, a, true);
    }
    expected(p, "an attribute value");
    return false;
  default:
    if (at_punct(p, '[')) return parse_list(p, a, false);
    expected(p, "an attribute value");
    return false;
  }
  next(p);
  return true;
}

/* '{' key = value, ... '}' into a scratch array. */
static bool parse_attrs(pctx *p, h3_attr **out, int *n_out) {
  if (!expect(p, '{')) return false;
  h3_attr *attrs = NULL;
  int n = 0;
  while (!at_punct(p, '}')) {
    if (n && !expect(p, ',')) return false;
    h3_span at = p->tok.span;
    const char *k = parse_key(p, "an attribute name");
    if (!k || !expect(p, '=')) return false;
    for (int i = 0; i < n; i++)
      if (strcmp(attrs[i].name, k) == 0) fail_at(p, at, "attribute '%s' is given twice", k);
    if (p->failed || !(attrs = grow(p, attrs, n, sizeof *attrs))) return false;
    memset(&attrs[n], 0, sizeof attrs[n]);
    attrs[n].name = k;
    if (!parse_attr_value(p, &attrs[n])) return false;
    n++;
  }
  next(p);
  *out = attrs;
  *n_out = n;
  return true;
}

/* Registers a value under its printed name. */
static bool define_value(pctx *p, const char *text, h3_span at, h3_value *v) {
  if (h3_strmap_get(&p->values, text)) {
    fail_at(p, at, "value %%%s is defined twice in this graph", text);
    return false;
  }
  const char *key = mstr(p, text);
  if (!key) return false;
  v->name = key; /* all-digit names print as counters again (print.c) */
  v->span = at;
  v->span.file = p->file;
  if (h3_strmap_put(&p->values, key, v)) fail_at(p, at, "out of memory");
  return !p->failed;
}

static h3_value *parse_operand(pctx *p) {
  if (p->failed) return NULL;
  h3_value *v = NULL;
  if (p->tok.kind == TK_VNAME) {
    v = h3_strmap_get(&p->values, p->tok.text);
    if (!v) fail_at(p, p->tok.span, "unknown value %%%s (values must be defined before their use)", p->tok.text);
  } else if (p->tok.kind == TK_GNAME) {
    h3_param *pa = h3_strmap_get(&p->params, p->tok.text);
    if (!pa) fail_at(p, p->tok.span, "unknown parameter @%s", p->tok.text);
    v = pa ? pa->value : NULL;
  } else {
    expected(p, "an operand (%value or @param)");
  }
  if (v) next(p);
  return v;
}

static bool parse_ops(pctx *p, h3_region *r);

/* '{' '^' '(' args ')' ':' ops '}' */
static bool parse_region(pctx *p, h3_region *r) {
  if (++p->depth > IR_MAX_DEPTH) {
    fail_at(p, p->tok.span, "regions are nested more than %d deep", IR_MAX_DEPTH);
    return false;
  }
  if (!expect(p, '{') || !expect(p, '^') || !expect(p, '(')) return false;
  while (!p->failed && !at_punct(p, ')')) {
    if (r->n_args && !expect(p, ',')) return false;
    if (p->tok.kind != TK_VNAME) {
      expected(p, "a region argument %name");
      return false;
    }
    ir_tok name = p->tok;
    next(p);
    h3_type t;
    if (!expect(p, ':') || !parse_type(p, &t)) return false;
    h3_value *v = h3_region_add_arg(p->m, r, t, NULL, name.span);
    if (!v) {
      fail_at(p, name.span, "out of memory");
      return false;
    }
    if (!define_value(p, name.text, name.span, v) || !parse_at(p, v)) return false;
  }
  if (!expect(p, ')') || !expect(p, ':') || !parse_ops(p, r) || !expect(p, '}')) return false;
  p->depth--;
  return true;
}

static bool parse_op(pctx *p, h3_region *r) {
  ir_tok *names = NULL;
  int n_res = 0;
  while (p->tok.kind == TK_VNAME) {
    if (!(names = grow(p, names, n_res, sizeof *names))) return false;
    names[n_res++] = p->tok;
    next(p);
    if (accept(p, ',')) {
      if (p->tok.kind != TK_VNAME) expected(p, "a result name");
      continue;
    }
    if (!expect(p, '=')) return false;
    break;
  }
  if (p->failed) return false;
  if (p->tok.kind != TK_IDENT) {
    expected(p, n_res ? "an op name" : "an op or '}'");
    return false;
  }
  h3_span op_span = p->tok.span;
  op_span.file = p->file;
  const h3_op_info *info = h3_op_info_find(p->tok.text);
  if (!info) {
    fail_at(p, p->tok.span, "unknown op '%s'", p->tok.text);
    return false;
  }
  next(p);
  h3_value **ops = NULL;
  int n_ops = 0;
  h3_attr *attrs = NULL;
  int n_attrs = 0;
  h3_type *types = NULL;
  bool term = info->code == H3_OP_YIELD || info->code == H3_OP_RETURN;
  if (term) {
    if (n_res) fail_at(p, op_span, "%s has no results", info->name);
    while (!p->failed && (p->tok.kind == TK_VNAME || p->tok.kind == TK_GNAME)) {
      if (!(ops = grow(p, ops, n_ops, sizeof *ops))) return false;
      ops[n_ops++] = parse_operand(p);
      if (!accept(p, ',')) break;
      if (p->tok.kind != TK_VNAME && p->tok.kind != TK_GNAME) expected(p, "an operand");
    }
  } else {
    if (!expect(p, '(')) return false;
    while (!p->failed && !at_punct(p, ')')) {
      if (n_ops && !expect(p, ',')) return false;
      if (!(ops = grow(p, ops, n_ops, sizeof *ops))) return false;
      ops[n_ops++] = parse_operand(p);
    }
    if (!expect(p, ')')) return false;
    if (at_punct(p, '{')) {
      ir_tok t2 = peek2(p);
      if (!(t2.kind == TK_PUNCT && t2.text[0] == '^') && !parse_attrs(p, &attrs, &n_attrs)) return false;
    }
    if (n_res) {
      if (!expect(p, ':')) return false;
      if (!(types = h3_arena_alloc(&p->tmp, (size_t)n_res * sizeof *types))) {
        fail_at(p, op_span, "out of memory");
        return false;
      }
    }
  }
  if (p->failed) return false;
  h3_builder b = {p->m, r, NULL, op_span};
  /* result types come before the regions; values get their offsets after the build */
  int64_t *offs = n_res ? h3_arena_alloc(&p->tmp, (size_t)n_res * sizeof *offs) : NULL;
  for (int i = 0; i < n_res; i++) {
    if (i && !expect(p, ',')) return false;
    if (!parse_type(p, &types[i])) return false;
    h3_value tmpv = {.offset = -1};
    if (!parse_at(p, &tmpv)) return false;
    if (offs) offs[i] = tmpv.offset;
  }
  if (at_punct(p, ',')) {
    fail_at(p, p->tok.span, "%s has %d result name%s but more result types", info->name, n_res, n_res == 1 ? "" : "s");
    return false;
  }
  h3_op *op = h3_build_op_typed(&b, info->code, n_ops, ops, n_attrs, attrs, n_res, types, info->n_regions);
  if (!op || (n_res && !offs)) {
    fail_at(p, op_span, "out of memory");
    return false;
  }
  for (int i = 0; i < n_res; i++) op->results[i]->offset = offs[i];
  for (int i = 0; i < op->n_regions; i++)
    if (!parse_region(p, &op->regions[i])) return false;
  for (int i = 0; i < n_res; i++)
    if (!define_value(p, names[i].text, names[i].span, op->results[i])) return false;
  return true;
}

static bool parse_ops(pctx *p, h3_region *r) {
  while (!p->failed && !at_punct(p, '}') && p->tok.kind != TK_EOF) parse_op(p, r);
  return !p->failed;
}

static bool parse_graph(pctx *p, h3_graph_kind kind) {
  next(p); /* 'graph' or 'program' */
  if (p->tok.kind != TK_GNAME) {
    expected(p, "a graph name @name");
    return false;
  }
  if (h3_module_graph(p->m, p->tok.text)) {
    fail_at(p, p->tok.span, "graph @%s is defined twice", p->tok.text);
    return false;
  }
  h3_span gspan = p->tok.span;
  gspan.file = p->file;
  h3_graph *g = h3_module_add_graph(p->m, p->tok.text, kind, gspan);
  if (!g) {
    fail_at(p, gspan, "out of memory");
    return false;
  }
  next(p);
  h3_strmap_free(&p->values);
  h3_strmap_init(&p->values);
  if (!expect(p, '(')) return false;
  while (!p->failed && !at_punct(p, ')')) {
    if (g->n_inputs && !expect(p, ',')) return false;
    if (p->tok.kind != TK_VNAME) {
      expected(p, "an input %name");
      return false;
    }
    ir_tok name = p->tok;
    next(p);
    h3_type t;
    if (!expect(p, ':') || !parse_type(p, &t)) return false;
    h3_value *v = h3_graph_add_input(p->m, g, NULL, t, name.span);
    if (!v) fail_at(p, name.span, "out of memory");
    if (p->failed || !define_value(p, name.text, name.span, v) || !parse_at(p, v)) return false;
  }
  if (!expect(p, ')')) return false;
  if (p->tok.kind != TK_ARROW) {
    expected(p, "'->'");
    return false;
  }
  next(p);
  /* outputs: name [: type]; the types are checked against the return below */
  h3_type *otypes = NULL;
  bool *otyped = NULL;
  if (!expect(p, '(')) return false;
  while (!p->failed && !at_punct(p, ')')) {
    int n = g->n_outputs;
    if (n && !expect(p, ',')) return false;
    const char *name = parse_key(p, "an output name");
    if (!name || !(otypes = grow(p, otypes, n, sizeof *otypes)) || !(otyped = grow(p, otyped, n, sizeof *otyped)))
      return false;
    otyped[n] = accept(p, ':');
    if (otyped[n] && !parse_type(p, &otypes[n])) return false;
    h3_graph_add_output(p->m, g, name);
    if (p->m->oom) fail_at(p, p->tok.span, "out of memory");
  }
  if (!expect(p, ')')) return false;
  if (at_word(p, "attrs")) {
    next(p);
    h3_attr *attrs;
    int n;
    if (!parse_attrs(p, &attrs, &n)) return false;
    for (int i = 0; i < n; i++) h3_graph_set_attr(p->m, g, attrs[i]);
  }
  if (!expect(p, '{') || !parse_ops(p, &g->body)) return false;
  h3_op *ret = g->body.last;
  if (ret && ret->code == H3_OP_RETURN && ret->n_operands == g->n_outputs)
    for (int i = 0; i < g->n_outputs; i++)
      if (otyped[i] && !h3_type_equal(&otypes[i], &ret->operands[i]->type)) {
        char a[96], b[96];
        fail_at(p, ret->span, "return value %d is %s but output '%s' is declared %s", i,
                h3_type_str(&ret->operands[i]->type, a, sizeof a), g->output_names[i],
                h3_type_str(&otypes[i], b, sizeof b));
      }
  return expect(p, '}');
}

static bool parse_init(pctx *p, h3_param *pa);

static bool parse_param(pctx *p) {
  next(p); /* 'param' */
  if (p->tok.kind != TK_GNAME) {
    expected(p, "a parameter name @name");
    return false;
  }
  ir_tok name = p->tok;
  h3_span span = name.span;
  span.file = p->file;
  if (h3_strmap_get(&p->params, name.text)) {
    fail_at(p, span, "parameter @%s is declared twice", name.text);
    return false;
  }
  next(p);
  h3_type t;
  if (!expect(p, ':') || !parse_type(p, &t)) return false;
  h3_param *pa = h3_module_add_param(p->m, name.text, t, span);
  if (!pa || h3_strmap_put(&p->params, pa->name, pa)) {
    fail_at(p, span, "out of memory");
    return false;
  }
  if (at_word(p, "group")) {
    next(p);
    if (p->tok.kind != TK_STRING) {
      expected(p, "a group name string");
      return false;
    }
    if (!(pa->group = mstr(p, p->tok.text))) return false;
    next(p);
  }
  int64_t v;
  if (at_word(p, "dims")) {
    next(p);
    h3_span at = p->tok.span;
    if (!parse_int(p, &v, "a group dim count")) return false;
    if (v < 0 || v > t.rank) fail_at(p, at, "dims %lld is outside [0, rank %d]", (long long)v, t.rank);
    pa->group_dims = (int)v;
  }
  if (at_word(p, "base")) {
    next(p);
    if (!parse_int(p, &pa->group_base, "a group base index")) return false;
  }
  if (!p->failed && at_word(p, "init") && !parse_init(p, pa)) return false;
  if (p->failed || !at_word(p, "quant")) return !p->failed;
  next(p);
  for (int i = 1; i < H3_QUANT_COUNT && p->tok.kind == TK_IDENT; i++)
    if (strcmp(ir_quant_names[i], p->tok.text) == 0) pa->quant = (h3_param_quant)i;
  if (pa->quant == H3_QUANT_NONE) {
    expected(p, "a quantized form (nvfp4_packed, nvfp4_scale, nvfp4_global)");
    return false;
  }
  next(p);
  if (p->tok.kind != TK_STRING) {
    expected(p, "the quantized parameter's name string");
    return false;
  }
  if (!(pa->quant_source = mstr(p, p->tok.text))) return false;
  next(p);
  return true;
}

/* `init KIND(scale = S, value = V)` of a parameter. */
static bool parse_init(pctx *p, h3_param *pa) {
  next(p);
  int kind = -1;
  for (int i = 0; i < IR_INIT_COUNT && p->tok.kind == TK_IDENT; i++)
    if (strcmp(ir_init_names[i], p->tok.text) == 0) kind = i;
  if (kind < 0) {
    expected(p, "an init kind (normal, uniform, const, ones_plus_normal, rope_inv_freq)");
    return false;
  }
  pa->init = (h3_init_kind)kind;
  next(p);
  if (!expect(p, '(')) return false;
  for (int n = 0; !p->failed && !at_punct(p, ')'); n++) {
    if (n && !expect(p, ',')) return false;
    bool scale = at_word(p, "scale");
    if (!scale && !at_word(p, "value")) {
      expected(p, "'scale' or 'value'");
      return false;
    }
    next(p);
    if (!expect(p, '=')) return false;
    if (p->tok.kind != TK_FLOAT && p->tok.kind != TK_INT) {
      expected(p, "a number");
      return false;
    }
    double x = p->tok.kind == TK_FLOAT ? p->tok.f : (double)p->tok.i;
    *(scale ? &pa->init_scale : &pa->init_value) = x;
    next(p);
  }
  return expect(p, ')');
}

static bool parse_config(pctx *p) {
  next(p); /* 'config' */
  if (!expect(p, '{')) return false;
  for (int n = 0; !p->failed && !at_punct(p, '}'); n++) {
    if (n && !expect(p, ',')) return false;
    h3_span at = p->tok.span;
    const char *key = parse_key(p, "a config key");
    int64_t v;
    if (!key || !expect(p, '=') || !parse_int(p, &v, "an integer")) return false;
    if (h3_module_config(p->m, key, INT64_MIN) != INT64_MIN || h3_module_config(p->m, key, 0) != 0)
      fail_at(p, at, "config key '%s' is given twice", key);
    h3_module_set_config(p->m, key, v);
  }
  return expect(p, '}');
}

static void parse_module(pctx *p) {
  next(p);
  if (!expect_word(p, "module")) return;
  if (p->tok.kind != TK_GNAME) {
    expected(p, "a model name @name");
    return;
  }
  const char *model = p->tok.text;
  next(p);
  if (!expect_word(p, "config")) return;
  if (p->tok.kind != TK_STRING) {
    expected(p, "a config name string");
    return;
  }
  p->m = h3_module_new(model, p->tok.text);
  if (!p->m) {
    fail_at(p, p->tok.span, "out of memory");
    return;
  }
  p->file = ir_strdup(p->m, p->lx.file);
  next(p);
  if (!expect(p, '{')) return;
  while (!p->failed && !at_punct(p, '}')) {
    if (at_word(p, "source")) {
      next(p);
      if (p->tok.kind != TK_STRING) {
        expected(p, "a file name string");
        return;
      }
      p->m->source = mstr(p, p->tok.text);
      next(p);
    } else if (at_word(p, "config")) {
      parse_config(p);
    } else if (at_word(p, "param")) {
      parse_param(p);
    } else if (at_word(p, "graph")) {
      parse_graph(p, H3_GRAPH_FUNCTION);
    } else if (at_word(p, "program")) {
      parse_graph(p, H3_GRAPH_PROGRAM);
    } else {
      expected(p, "'source', 'config', 'param', 'graph', 'program' or '}'");
    }
  }
  if (expect(p, '}') && p->tok.kind != TK_EOF) expected(p, "end of input after the module");
}

h3_module *h3_module_parse(const char *file, const char *text, size_t len, h3_diag *d) {
  pctx p;
  memset(&p, 0, sizeof p);
  p.d = d;
  h3_arena_init(&p.tmp);
  h3_strmap_init(&p.params);
  h3_strmap_init(&p.values);
  ir_lex_init(&p.lx, file ? file : "<ir>", text, len, &p.tmp);
  parse_module(&p);
  h3_strmap_free(&p.params);
  h3_strmap_free(&p.values);
  h3_arena_free(&p.tmp);
  if (p.failed || !p.m) {
    h3_module_free(p.m);
    return NULL;
  }
  if (h3_verify_module(p.m, d) != H3_OK) {
    h3_module_free(p.m);
    return NULL;
  }
  return p.m;
}
