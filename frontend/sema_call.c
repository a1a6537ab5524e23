/* sema_call.c: calls (docs/language.md "Expressions"): functions and graphs (handed to
 * sema_fn.c), the built-ins split / zeros / full / rows, casts (`bf16(x)`), the constant
 * functions ceildiv / min / max / sqrt, and every op of the registry.
 *
 * An op call takes tensors positionally (a number becomes a constant of the dtype of the
 * first tensor operand) and attributes as `name = value`, checked against the op's schema
 * here so the messages can name the attribute and suggest the right one; an integer is
 * converted where the op wants a float, a negative `axis` counts from the end. Result
 * types come from the registry's inference (h3_build_op), whose reason becomes the
 * diagnostic at the call's span.
 */
#include "sema.h"

#include <math.h>
#include <string.h>

/* ---- constant functions -------------------------------------------------------------------- */
static bool is_const_fn(const char *n) {
  return !strcmp(n, "ceildiv") || !strcmp(n, "min") || !strcmp(n, "max") || !strcmp(n, "sqrt");
}

/* Folds ceildiv/min/max/sqrt over evaluated numeric arguments. */
static sval fold_call(sema *S, ast_expr *e, sval *a, int n) {
  const char *f = e->str;
  int want = strcmp(f, "sqrt") == 0 ? 1 : 2;
  if (n != want) {
    h3_diag_error(S->d, e->span, "ceildiv, min and max take (a, b); sqrt takes (x)",
                  "%s takes %d argument%s, got %d", f, want, want == 1 ? "" : "s", n);
    return sv_error();
  }
  if (!strcmp(f, "sqrt")) {
    double x = sv_num(&a[0]);
    if (x < 0) {
      h3_diag_error(S->d, e->span, "check the lets and config keys under the sqrt",
                    "sqrt of a negative number (%g)", x);
      return sv_error();
    }
    return sv_float(sqrt(x));
  }
  if (!strcmp(f, "ceildiv")) {
    if (a[0].kind != SV_INT || a[1].kind != SV_INT) {
      h3_diag_error(S->d, e->span, "write ceildiv(a, b) with integer expressions (no float lets or literals)",
                    "ceildiv takes integers");
      return sv_error();
    }
    int64_t x = a[0].i, y = a[1].i;
    if (y <= 0 || x < 0) {
      h3_diag_error(S->d, e->span, "check the config keys and --set values of its operands",
                    "ceildiv(%lld, %lld): wants a >= 0 and b > 0", (long long)x, (long long)y);
      return sv_error();
    }
    return sv_int(x / y + (x % y != 0));
  }
  bool mx = !strcmp(f, "max");
  if (a[0].kind == SV_INT && a[1].kind == SV_INT)
    return sv_int(mx ? (a[0].i > a[1].i ? a[0].i : a[1].i) : (a[0].i < a[1].i ? a[0].i : a[1].i));
  double x = sv_num(&a[0]), y = sv_num(&a[1]);
  return sv_float(mx ? fmax(x, y) : fmin(x, y));
}

/* ---- argument helpers -------------------------------------------------------------------------- */
typedef struct {
  sval *pos; /* positional values */
  ast_arg **pos_ast;
  int npos;
  ast_arg **kw; /* keyword arguments (not evaluated yet) */
  int nkw;
} call_args;

/* Splits a call's arguments; evaluates the positional ones (konst: in CONST mode). */
static bool split_args(sema *S, ast_expr *e, bool konst, call_args *c) {
  memset(c, 0, sizeof *c);
  int n = e->n_args > 0 ? e->n_args : 1;
  c->pos = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)n);
  c->pos_ast = h3_arena_alloc(S->tmp, sizeof(ast_arg *) * (size_t)n);
  c->kw = h3_arena_alloc(S->tmp, sizeof(ast_arg *) * (size_t)n);
  if (!c->pos || !c->pos_ast || !c->kw) {
    sema_oom(S, e->span);
    return false;
  }
  bool ok = true;
  for (ast_arg *a = e->args; a; a = a->next) {
    if (a->name) {
      for (int i = 0; i < c->nkw; i++)
        if (strcmp(c->kw[i]->name, a->name) == 0) {
          h3_diag_error(S->d, a->name_span, "give each attribute once", "attribute '%s' is given twice",
                        a->name);
          ok = false;
        }
      c->kw[c->nkw++] = a;
      continue;
    }
    if (c->nkw > 0) {
      h3_diag_error(S->d, a->value->span, "write the tensors first, then the KEY = VALUE attributes",
                    "a positional argument follows a keyword argument");
      ok = false;
    }
    c->pos_ast[c->npos] = a;
    c->pos[c->npos] = sema_eval(S, a->value, konst);
    if (c->pos[c->npos].kind == SV_ERROR) ok = false;
    c->npos++;
  }
  return ok;
}

static bool no_kwargs(sema *S, const call_args *c, const char *what) {
  if (c->nkw == 0) return true;
  h3_diag_error(S->d, c->kw[0]->name_span, "remove the KEY = VALUE arguments",
                "%s takes no keyword arguments", what);
  return false;
}

static bool want_npos(sema *S, ast_expr *e, const call_args *c, int n, const char *usage) {
  if (c->npos == n) return true;
  h3_diag_error(S->d, e->span, usage, "%s takes %d positional argument%s, got %d", e->str, n,
                n == 1 ? "" : "s", c->npos);
  return false;
}

static h3_value *want_tensor(sema *S, const sval *v, ast_arg *a, const char *what) {
  if (v->kind == SV_TENSOR) return v->v;
  h3_diag_error(S->d, a->value->span, "pass a tensor: an input, a parameter or the result of an op",
                "%s must be a tensor, got %s", what, sv_describe(S, v));
  return NULL;
}

static bool want_int(sema *S, const sval *v, ast_arg *a, const char *what, int64_t *out) {
  if (v->kind == SV_INT) {
    *out = v->i;
    return true;
  }
  h3_diag_error(S->d, a->value->span, "write an integer expression of config keys and lets",
                "%s must be an integer, got %s", what, sv_describe(S, v));
  return false;
}

/* A list of integers (a shape). */
static bool want_ints(sema *S, const sval *v, ast_arg *a, const char *what, int64_t *out, int *n) {
  if (v->kind != SV_LIST) {
    h3_diag_error(S->d, a->value->span, "write the shape as a list, e.g. [rows, dim]",
                  "%s must be a list [d, ...] of integers, got %s", what, sv_describe(S, v));
    return false;
  }
  if (v->n > H3_MAX_RANK) {
    h3_diag_error(S->d, a->value->span, "merge dims so the shape has at most 6",
                  "%s has %d dims; at most %d are allowed", what, v->n, H3_MAX_RANK);
    return false;
  }
  for (int i = 0; i < v->n; i++) {
    if (v->elems[i].kind != SV_INT || v->elems[i].i < 0) {
      h3_diag_error(S->d, a->value->span, "write each dim as a non-negative integer expression",
                    "%s must hold non-negative integers", what);
      return false;
    }
    out[i] = v->elems[i].i;
  }
  *n = v->n;
  return true;
}

static h3_value *build1(sema *S, h3_opcode code, int n, h3_value **ops, int na, h3_attr *at,
                        h3_span sp) {
  h3_op *op = sema_build(S, code, n, ops, na, at, sp);
  return op ? op->results[0] : NULL;
}

static sval slice_op(sema *S, h3_value *x, int64_t axis, int64_t start, int64_t len, h3_span sp) {
  h3_attr at[3] = {h3_attr_int(S->m, "axis", axis), h3_attr_int(S->m, "start", start),
                   h3_attr_int(S->m, "len", len)};
  return sv_tensor(build1(S, H3_OP_SLICE, 1, &x, 3, at, sp));
}

/* ---- built-ins -------------------------------------------------------------------------------- */
/* split(x, n, axis = a) -> n equal slices (axis defaults to the last). */
static sval builtin_split(sema *S, ast_expr *e) {
  call_args c;
  if (!split_args(S, e, false, &c)) return sv_error();
  if (!want_npos(S, e, &c, 2, "split(x, n, axis = a)")) return sv_error();
  h3_value *x = want_tensor(S, &c.pos[0], c.pos_ast[0], "split's first argument");
  int64_t n, axis = -1;
  if (!x || !want_int(S, &c.pos[1], c.pos_ast[1], "split's count", &n)) return sv_error();
  for (int i = 0; i < c.nkw; i++) {
    if (strcmp(c.kw[i]->name, "axis") != 0) {
      h3_diag_error(S->d, c.kw[i]->name_span, "write split(x, n, axis = a)",
                    "split takes only the attribute 'axis'");
      return sv_error();
    }
    if (!sema_int(S, c.kw[i]->value, &axis)) return sv_error();
  }
  int rank = x->type.rank;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    h3_diag_error(S->d, e->span, "give an axis in [-rank, rank) of the tensor",
                  "split: axis out of range for %s", sv_describe(S, &c.pos[0]));
    return sv_error();
  }
  int64_t dim = x->type.dims[axis];
  if (n < 1 || n > 64 || dim % n != 0) {
    h3_diag_error(S->d, e->span, "split into a number of parts that divides the dimension", "split: dim %lld (%lld) of %s is not a multiple of %lld",
                  (long long)axis, (long long)dim, sv_describe(S, &c.pos[0]), (long long)n);
    return sv_error();
  }
  sval t = {.kind = SV_TUPLE, .n = (int)n};
  t.elems = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)n);
  if (!t.elems) {
    sema_oom(S, e->span);
    return sv_error();
  }
  for (int64_t k = 0; k < n; k++) {
    t.elems[k] = slice_op(S, x, axis, k * (dim / n), dim / n, e->span);
    if (t.elems[k].kind == SV_ERROR) return sv_error();
  }
  return t;
}

/* zeros(DTYPE, [d, ...]) and full(DTYPE, [d, ...], value = F) -> const */
static sval builtin_fill(sema *S, ast_expr *e, bool full) {
  call_args c;
  if (!split_args(S, e, true, &c)) return sv_error();
  const char *usage = full ? "full(DTYPE, [d, ...], value = F)" : "zeros(DTYPE, [d, ...])";
  if (!want_npos(S, e, &c, 2, usage)) return sv_error();
  if (c.pos[0].kind != SV_DTYPE) {
    h3_diag_error(S->d, c.pos_ast[0]->value->span, usage, "%s's first argument must be a dtype, got %s",
                  e->str, sv_describe(S, &c.pos[0]));
    return sv_error();
  }
  int64_t dims[H3_MAX_RANK];
  int rank;
  if (!want_ints(S, &c.pos[1], c.pos_ast[1], "the shape", dims, &rank)) return sv_error();
  const h3_type made = h3_type_make(c.pos[0].dt, rank, dims);
  if (!sema_type_fits(S, &made, c.pos_ast[1]->value->span)) return sv_error();
  double value = 0;
  bool have_value = false;
  for (int i = 0; i < c.nkw; i++) {
    if (!full || strcmp(c.kw[i]->name, "value") != 0) {
      h3_diag_error(S->d, c.kw[i]->name_span, usage, "unknown attribute '%s' of %s", c.kw[i]->name, e->str);
      return sv_error();
    }
    sval v = sema_eval(S, c.kw[i]->value, true);
    if (v.kind == SV_ERROR) return v;
    if (!sv_is_num(&v)) {
      h3_diag_error(S->d, c.kw[i]->value->span, "write a number or a constant expression",
                    "value must be a number, got %s", sv_describe(S, &v));
      return sv_error();
    }
    value = sv_num(&v);
    have_value = true;
  }
  if (full && !have_value) {
    h3_diag_error(S->d, e->span, usage, "full needs the attribute 'value'");
    return sv_error();
  }
  h3_attr at[3] = {h3_attr_float(S->m, "value", value), h3_attr_dtype(S->m, "dtype", c.pos[0].dt),
                   h3_attr_ints(S->m, "shape", rank, dims)};
  return sv_tensor(build1(S, H3_OP_CONST, 0, NULL, rank > 0 ? 3 : 2, at, e->span));
}

/* rows(x, start, len) = slice(x, axis = 0, start, len) */
static sval builtin_rows(sema *S, ast_expr *e) {
  call_args c;
  if (!split_args(S, e, false, &c)) return sv_error();
  if (!no_kwargs(S, &c, "rows") || !want_npos(S, e, &c, 3, "rows(x, start, len)")) return sv_error();
  h3_value *x = want_tensor(S, &c.pos[0], c.pos_ast[0], "rows' first argument");
  int64_t start, len;
  if (!x || !want_int(S, &c.pos[1], c.pos_ast[1], "the start row", &start) ||
      !want_int(S, &c.pos[2], c.pos_ast[2], "the row count", &len))
    return sv_error();
  return slice_op(S, x, 0, start, len, e->span);
}

/* DTYPE(x): a cast (nothing when x already has the dtype); DTYPE(number): a constant. */
static sval builtin_cast(sema *S, ast_expr *e, h3_dtype dt) {
  call_args c;
  if (!split_args(S, e, false, &c)) return sv_error();
  if (!no_kwargs(S, &c, "a cast") || !want_npos(S, e, &c, 1, NULL)) return sv_error();
  if (sv_is_num(&c.pos[0])) return sv_tensor(sema_const_scalar(S, sv_num(&c.pos[0]), dt, e->span));
  h3_value *x = want_tensor(S, &c.pos[0], c.pos_ast[0], "the value cast");
  if (!x) return sv_error();
  if (x->type.dtype == dt) return c.pos[0];
  h3_attr at = h3_attr_dtype(S->m, "dtype", dt);
  return sv_tensor(build1(S, H3_OP_CAST, 1, &x, 1, &at, e->span));
}

/* ---- registry ops -------------------------------------------------------------------------- */
static const h3_attr_schema *find_schema(const h3_op_info *info, const char *name) {
  for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++)
    if (strcmp(info->attrs[j].name, name) == 0) return &info->attrs[j];
  return NULL;
}

static const char *attr_list(sema *S, const h3_op_info *info) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++)
    h3_strbuf_printf(&b, "%s%s", j ? ", " : "", info->attrs[j].name);
  const char *s = b.data ? h3_arena_strdup(S->tmp, b.data) : NULL;
  h3_strbuf_free(&b);
  return s && s[0] ? h3_arena_printf(S->tmp, "%s takes: %s", info->name, s)
                   : h3_arena_printf(S->tmp, "%s takes no attributes", info->name);
}

static const char *kind_words(h3_attr_kind k) {
  switch (k) {
  case H3_ATTR_INT: return "an integer";
  case H3_ATTR_FLOAT: return "a number";
  case H3_ATTR_STRING: return "a string";
  case H3_ATTR_INTS: return "a list of integers";
  case H3_ATTR_FLOATS: return "a list of numbers";
  case H3_ATTR_DTYPE: return "a dtype";
  case H3_ATTR_TIER: return "a tier";
  }
  return "?";
}

/* Evaluates keyword argument a for op `info` into *out. */
static bool make_attr(sema *S, const h3_op_info *info, ast_arg *a, h3_attr *out) {
  const h3_attr_schema *s = find_schema(info, a->name);
  if (!s) {
    suggest_t g;
    suggest_init(&g, a->name);
    for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++) suggest_try(&g, info->attrs[j].name);
    const char *hint = suggest_hint(S->tmp, &g);
    h3_diag_error(S->d, a->name_span, hint ? hint : attr_list(S, info), "'%s' is not an attribute of %s",
                  a->name, info->name);
    return false;
  }
  sval v = sema_eval(S, a->value, true);
  if (v.kind == SV_ERROR) return false;
  h3_module *m = S->m;
  switch (s->kind) {
  case H3_ATTR_INT:
    if (v.kind == SV_INT) {
      *out = h3_attr_int(m, s->name, v.i);
      return true;
    }
    break;
  case H3_ATTR_FLOAT:
    if (sv_is_num(&v)) {
      *out = h3_attr_float(m, s->name, sv_num(&v));
      return true;
    }
    break;
  case H3_ATTR_STRING:
    if (v.kind == SV_STRING) {
      *out = h3_attr_string(m, s->name, v.s);
      return true;
    }
    break;
  case H3_ATTR_DTYPE:
    if (v.kind == SV_DTYPE) {
      *out = h3_attr_dtype(m, s->name, v.dt);
      return true;
    }
    break;
  case H3_ATTR_TIER: {
    h3_tier t;
    if (v.kind == SV_STRING && h3_tier_parse(v.s, &t)) {
      *out = h3_attr_tier(m, s->name, t);
      return true;
    }
    break;
  }
  case H3_ATTR_INTS:
  case H3_ATTR_FLOATS:
    if (v.kind == SV_LIST) {
      int64_t *iv = h3_arena_alloc(S->tmp, sizeof(int64_t) * (size_t)(v.n + 1));
      double *fv = h3_arena_alloc(S->tmp, sizeof(double) * (size_t)(v.n + 1));
      if (!iv || !fv) {
        sema_oom(S, a->value->span);
        return false;
      }
      bool ints = true;
      for (int i = 0; i < v.n; i++) {
        if (v.elems[i].kind != SV_INT) ints = false;
        iv[i] = v.elems[i].i;
        fv[i] = sv_num(&v.elems[i]);
      }
      if (s->kind == H3_ATTR_FLOATS) {
        *out = h3_attr_floats(m, s->name, v.n, fv);
        return true;
      }
      if (ints) {
        *out = h3_attr_ints(m, s->name, v.n, iv);
        return true;
      }
    }
    break;
  }
  h3_diag_error(S->d, a->value->span, attr_list(S, info), "attribute '%s' of %s must be %s, got %s", s->name,
                info->name, kind_words(s->kind), sv_describe(S, &v));
  return false;
}

static sval build_registry_op(sema *S, const h3_op_info *info, ast_expr *e, call_args *c) {
  if (info->kind == H3_PK_CONTROL) {
    h3_diag_error(S->d, e->span, "loops are written with repeat/for, calls as name(...)",
                  "'%s' is a control op and cannot be called", info->name);
    return sv_error();
  }
  h3_value **ops = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)(c->npos + 1));
  h3_attr *at = h3_arena_alloc(S->tmp, sizeof(h3_attr) * (size_t)(c->nkw + 1));
  if (!ops || !at) {
    sema_oom(S, e->span);
    return sv_error();
  }
  /* numbers take the dtype of the first tensor operand */
  int like = -1;
  for (int i = 0; i < c->npos && like < 0; i++)
    if (c->pos[i].kind == SV_TENSOR) like = i;
  bool ok = true;
  for (int i = 0; i < c->npos; i++) {
    sval *v = &c->pos[i];
    if (v->kind == SV_TENSOR) {
      ops[i] = v->v;
    } else if (sv_is_num(v) && like >= 0) {
      ops[i] = sema_const_scalar(S, sv_num(v), c->pos[like].v->type.dtype, c->pos_ast[i]->value->span);
      if (!ops[i]) ok = false;
    } else {
      const char *hint = v->kind == SV_STRING || v->kind == SV_LIST || v->kind == SV_DTYPE || sv_is_num(v)
                             ? "attributes are given as name = value"
                             : "pass a tensor: an input, a parameter or the result of an op";
      h3_diag_error(S->d, c->pos_ast[i]->value->span, hint, "operand %d of %s must be a tensor, got %s",
                    i + 1, info->name, sv_describe(S, v));
      ok = false;
    }
  }
  for (int i = 0; i < c->nkw; i++)
    if (!make_attr(S, info, c->kw[i], &at[i])) ok = false;
  if (!ok) return sv_error();
  for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++) {
    if (!info->attrs[j].required) continue;
    bool given = false;
    for (int i = 0; i < c->nkw; i++)
      if (strcmp(at[i].name, info->attrs[j].name) == 0) given = true;
    if (!given) {
      h3_diag_error(S->d, e->span, attr_list(S, info), "%s needs the attribute '%s' (%s)", info->name,
                    info->attrs[j].name, kind_words(info->attrs[j].kind));
      return sv_error();
    }
  }
  /* a negative axis counts from the end of the first operand's dims */
  for (int i = 0; i < c->nkw; i++)
    if (!strcmp(at[i].name, "axis") && at[i].kind == H3_ATTR_INT && at[i].i < 0 && c->npos > 0)
      at[i].i += ops[0]->type.rank;
  h3_op *op = sema_build(S, info->code, c->npos, ops, c->nkw, at, e->span);
  if (!op) return sv_error();
  if (op->n_results == 0) return (sval){.kind = SV_VOID};
  if (op->n_results == 1) return sv_tensor(op->results[0]);
  sval t = {.kind = SV_TUPLE, .n = op->n_results};
  t.elems = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)op->n_results);
  if (!t.elems) {
    sema_oom(S, e->span);
    return sv_error();
  }
  for (int i = 0; i < op->n_results; i++) t.elems[i] = sv_tensor(op->results[i]);
  return t;
}

/* ---- dispatch ---------------------------------------------------------------------------------- */
sval sema_call(sema *S, ast_expr *e, bool konst) {
  const char *name = e->str;
  if (konst) {
    if (!is_const_fn(name)) {
      h3_diag_error(S->d, ast_call_name_span(e), "shapes, counts and attributes are integer or float expressions",
                    "'%s(...)' is not a constant", name);
      return sv_error();
    }
    call_args c;
    if (!split_args(S, e, true, &c) || !no_kwargs(S, &c, name)) return sv_error();
    for (int i = 0; i < c.npos; i++)
      if (!sv_is_num(&c.pos[i])) {
        h3_diag_error(S->d, c.pos_ast[i]->value->span,
                      "shapes, counts and attributes are integer or float expressions",
                      "%s takes numbers, got %s", name, sv_describe(S, &c.pos[i]));
        return sv_error();
      }
    return fold_call(S, e, c.pos, c.npos);
  }
  gcall *g = h3_strmap_get(&S->calls, name);
  if (g) {
    if (g->item->kind == ITEM_FN) return sema_inline(S, g, e);
    return sema_graph_call(S, g, e);
  }
  if (!strcmp(name, "split")) return builtin_split(S, e);
  if (!strcmp(name, "zeros")) return builtin_fill(S, e, false);
  if (!strcmp(name, "full")) return builtin_fill(S, e, true);
  if (!strcmp(name, "rows")) return builtin_rows(S, e);
  h3_dtype dt;
  if (h3_dtype_from_name(name, &dt)) return builtin_cast(S, e, dt);
  const h3_op_info *info = h3_op_info_find(name);
  if (!info && strcmp(name, "ceildiv") != 0) {
    const char *hint = sema_suggest_name(S, name, false);
    h3_diag_error(S->d, ast_call_name_span(e),
                  hint ? hint : "`h3c ops` lists the ops; declare a function above its use",
                  "unknown function or op '%s'", name);
    return sv_error();
  }
  call_args c;
  if (!split_args(S, e, false, &c)) return sv_error();
  bool nums = c.nkw == 0;
  for (int i = 0; i < c.npos; i++)
    if (!sv_is_num(&c.pos[i])) nums = false;
  if (is_const_fn(name) && (nums || !info)) {
    if (!nums) {
      h3_diag_error(S->d, e->span, "write ceildiv(a, b) with integer expressions of config keys and lets",
                    "%s takes numbers", name);
      return sv_error();
    }
    return fold_call(S, e, c.pos, c.npos);
  }
  return build_registry_op(S, info, e, &c);
}
