/* sema_expr.c: evaluation of expressions (sema.h): literals, names, arithmetic, member
 * access into parameters and groups, indexing, and the compile-time folding rules.
 *
 * Arithmetic on two numbers folds at compile time: integers are 64-bit with overflow an
 * error, `/` and `%` want non-negative operands and a non-zero divisor; any float operand
 * makes the result a double. A number meeting a tensor becomes a rank-0 `const` of the
 * tensor's dtype; two tensors give the elementwise op (the registry checks broadcasting
 * and dtypes). Member access walks dotted parameter paths (`condition_proj.weight`), group
 * members (`blocks[i].attn.qkv_proj.weight` -> index(@param, %i)) and named graph results.
 */
#include "sema.h"

#include <math.h>
#include <string.h>

sval sv_error(void) { return (sval){.kind = SV_ERROR}; }
sval sv_int(int64_t i) { return (sval){.kind = SV_INT, .i = i}; }
sval sv_float(double f) { return (sval){.kind = SV_FLOAT, .f = f}; }
sval sv_tensor(h3_value *v) { return v ? (sval){.kind = SV_TENSOR, .v = v} : sv_error(); }
bool sv_is_num(const sval *v) { return v->kind == SV_INT || v->kind == SV_FLOAT; }
double sv_num(const sval *v) { return v->kind == SV_INT ? (double)v->i : v->f; }

const char *sv_describe(sema *S, const sval *v) {
  char buf[96];
  switch (v->kind) {
  case SV_INT: return h3_arena_printf(S->tmp, "an integer (%lld)", (long long)v->i);
  case SV_FLOAT: return h3_arena_printf(S->tmp, "a float (%g)", v->f);
  case SV_STRING: return "a string";
  case SV_DTYPE: return h3_arena_printf(S->tmp, "the dtype %s", h3_dtype_name(v->dt));
  case SV_LIST: return "a list";
  case SV_TENSOR:
    return h3_arena_printf(S->tmp, "a tensor %s", h3_type_str(&v->v->type, buf, sizeof buf));
  case SV_TUPLE: return h3_arena_printf(S->tmp, "%d values", v->n);
  case SV_GROUP: return h3_arena_printf(S->tmp, "the parameter group '%s'", v->group->name);
  case SV_MEMBER:
    if (v->path[0]) return h3_arena_printf(S->tmp, "a part '%s' of group '%s'", v->path, v->group->name);
    return h3_arena_printf(S->tmp, "a member of group '%s'", v->group->name);
  case SV_PREFIX: return h3_arena_printf(S->tmp, "the start '%s' of parameter names", v->path);
  case SV_VOID: return "nothing";
  case SV_ERROR: return "an error";
  }
  return "?";
}

/* ---- numbers ----------------------------------------------------------------------------- */
sval sema_fold(sema *S, char op, sval a, sval b, h3_span sp) {
  if (a.kind == SV_INT && b.kind == SV_INT) {
    int64_t x = a.i, y = b.i, r = 0;
    bool ovf = false;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(x, y, &r); break;
    case '-': ovf = __builtin_sub_overflow(x, y, &r); break;
    case '*': ovf = __builtin_mul_overflow(x, y, &r); break;
    case '/':
    case '%':
      if (y == 0) {
        h3_diag_error(S->d, sp, "the divisor evaluates to 0 when the model is compiled", "division by zero");
        return sv_error();
      }
      if (x < 0 || y < 0) {
        h3_diag_error(S->d, sp, "integer '/' and '%' are defined for non-negative operands",
                      "'%c' of negative integers (%lld %c %lld)", op, (long long)x, op, (long long)y);
        return sv_error();
      }
      r = op == '/' ? x / y : x % y;
      break;
    default: break;
    }
    if (ovf) {
      h3_diag_error(S->d, sp, "integers are 64-bit", "integer overflow in %lld %c %lld",
                    (long long)x, op, (long long)y);
      return sv_error();
    }
    return sv_int(r);
  }
  double x = sv_num(&a), y = sv_num(&b), r = 0;
  switch (op) {
  case '+': r = x + y; break;
  case '-': r = x - y; break;
  case '*': r = x * y; break;
  case '/':
    if (y == 0) {
      h3_diag_error(S->d, sp, "the divisor evaluates to 0 when the model is compiled", "division by zero");
      return sv_error();
    }
    r = x / y;
    break;
  case '%':
    h3_diag_error(S->d, sp, "'%' is for integers; a float let or literal made an operand a float",
                  "'%%' needs integers, got %g %% %g", x, y);
    return sv_error();
  default: break;
  }
  if (!isfinite(r)) {
    h3_diag_error(S->d, sp, "check the operands' lets and config values", "float overflow in %g %c %g", x, op,
                  y);
    return sv_error();
  }
  return sv_float(r);
}

static sval fold_neg(sema *S, sval a, h3_span sp) {
  if (a.kind == SV_FLOAT) return sv_float(-a.f);
  if (a.i == INT64_MIN) {
    h3_diag_error(S->d, sp, "integers are 64-bit", "integer overflow in -(%lld)", (long long)a.i);
    return sv_error();
  }
  return sv_int(-a.i);
}

/* ---- IR helpers ------------------------------------------------------------------------ */
h3_op *sema_build(sema *S, h3_opcode code, int n, h3_value **operands, int n_attrs,
                  const h3_attr *attrs, h3_span sp) {
  if (!S->graph) {
    h3_diag_error(S->d, sp, "compute tensors in a fn, graph or program body; lets and shapes are numbers",
                  "tensor operations are allowed only inside a function, graph or program");
    return NULL;
  }
  if (!sema_charge(S, sp)) return NULL;
  S->b.span = sp;
  h3_op *op = h3_build_op(&S->b, code, n, operands, n_attrs, attrs, 0, S->d);
  if (S->m->oom) sema_oom(S, sp);
  return op;
}

h3_value *sema_const_scalar(sema *S, double value, h3_dtype dt, h3_span sp) {
  h3_attr at[2] = {h3_attr_float(S->m, "value", value), h3_attr_dtype(S->m, "dtype", dt)};
  h3_op *op = sema_build(S, H3_OP_CONST, 0, NULL, 2, at, sp);
  return op ? op->results[0] : NULL;
}

h3_value *sema_index_op(sema *S, h3_value *x, h3_value *idx, int64_t off, h3_span sp) {
  if (!idx) {
    if (x->type.rank >= 1 && (off < 0 || off >= x->type.dims[0])) {
      h3_diag_error(S->d, sp, "give an index from 0 to the size of dim 0 minus 1",
                    "index %lld is out of range for dim 0 of size %lld", (long long)off,
                    (long long)x->type.dims[0]);
      return NULL;
    }
    idx = sema_const_scalar(S, (double)off, H3_I32, sp);
    if (!idx) return NULL;
    off = 0;
  }
  h3_value *ops[2] = {x, idx};
  h3_attr at = h3_attr_int(S->m, "offset", off);
  h3_op *op = sema_build(S, H3_OP_INDEX, 2, ops, off ? 1 : 0, &at, sp);
  return op ? op->results[0] : NULL;
}

/* A tensor operand from a value: numbers become constants of dtype `like`. */
static h3_value *as_operand(sema *S, const sval *v, h3_dtype like, h3_span sp) {
  if (v->kind == SV_TENSOR) return v->v;
  if (sv_is_num(v)) return sema_const_scalar(S, sv_num(v), like, sp);
  return NULL;
}

static h3_opcode binop_code(char op) {
  switch (op) {
  case '+': return H3_OP_ADD;
  case '-': return H3_OP_SUB;
  case '*': return H3_OP_MUL;
  case '/': return H3_OP_DIV;
  default: return H3_OP_MOD;
  }
}

static sval eval_binary(sema *S, ast_expr *e, bool konst) {
  sval a = sema_eval(S, e->lhs, konst);
  sval b = sema_eval(S, e->rhs, konst);
  if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
  if (sv_is_num(&a) && sv_is_num(&b)) return sema_fold(S, e->op, a, b, e->span);
  bool ta = a.kind == SV_TENSOR, tb = b.kind == SV_TENSOR;
  if ((ta || sv_is_num(&a)) && (tb || sv_is_num(&b)) && !konst) {
    h3_dtype like = ta ? a.v->type.dtype : b.v->type.dtype;
    h3_value *x = as_operand(S, &a, like, e->lhs->span);
    h3_value *y = x ? as_operand(S, &b, like, e->rhs->span) : NULL;
    if (!x || !y) return sv_error();
    h3_value *ops[2] = {x, y};
    h3_op *op = sema_build(S, binop_code(e->op), 2, ops, 0, NULL, e->span);
    return op ? sv_tensor(op->results[0]) : sv_error();
  }
  const sval *bad = (ta || sv_is_num(&a)) ? &b : &a;
  h3_diag_error(S->d, bad == &a ? e->lhs->span : e->rhs->span, "use numbers or tensors on both sides",
                "'%c' needs numbers or tensors, got %s", e->op, sv_describe(S, bad));
  return sv_error();
}

static sval eval_neg(sema *S, ast_expr *e, bool konst) {
  sval a = sema_eval(S, e->lhs, konst);
  if (a.kind == SV_ERROR) return a;
  if (sv_is_num(&a)) return fold_neg(S, a, e->span);
  if (a.kind == SV_TENSOR && !konst) {
    h3_op *op = sema_build(S, H3_OP_NEG, 1, &a.v, 0, NULL, e->span);
    return op ? sv_tensor(op->results[0]) : sv_error();
  }
  h3_diag_error(S->d, e->lhs->span, "negate a number or a tensor",
                "unary '-' needs a number or a tensor, got %s", sv_describe(S, &a));
  return sv_error();
}

/* ---- names ------------------------------------------------------------------------------ */
static sval global_name(sema *S, const char *name) {
  gname *g = h3_strmap_get(&S->names, name);
  if (!g) return (sval){.kind = SV_VOID};
  if (g->param) return sv_tensor(g->param->value);
  if (g->group) return (sval){.kind = SV_GROUP, .group = g->group};
  return (sval){.kind = SV_PREFIX, .path = name};
}

static sval eval_name(sema *S, ast_expr *e, bool konst) {
  const char *name = e->str;
  binding *b = sema_find_local(S, name);
  if (b) {
    if (konst && b->val.kind != SV_INT && b->val.kind != SV_FLOAT && b->val.kind != SV_ERROR) {
      h3_diag_error(S->d, e->span, "use a config key, a let or a number here", "'%s' is %s; a constant is needed here", name,
                    sv_describe(S, &b->val));
      return sv_error();
    }
    return b->val;
  }
  if (!konst) {
    sval g = global_name(S, name);
    if (g.kind != SV_VOID) return g;
  }
  gconst *c = h3_strmap_get(&S->consts, name);
  if (c) return c->is_float ? sv_float(c->f) : sv_int(c->i);
  h3_dtype dt;
  if (h3_dtype_from_name(name, &dt)) return (sval){.kind = SV_DTYPE, .dt = dt};
  if (konst && (h3_strmap_get(&S->names, name))) {
    h3_diag_error(S->d, e->span, "use a config key, a let or a number here",
                  "'%s' is a parameter name; a constant is needed here", name);
    return sv_error();
  }
  const char *hint = sema_suggest_name(S, name, konst);
  h3_diag_error(S->d, e->span, hint ? hint : "define it first: a let, a config key, a parameter or a function's argument",
                "unknown name '%s'", name);
  return sv_error();
}

/* ---- member access ----------------------------------------------------------------------- */
static const char *join_path(sema *S, const char *a, const char *b) {
  if (!a || !a[0]) return b;
  return h3_arena_printf(S->tmp, "%s.%s", a, b);
}

/* The tensor of field f for member m: index(@param, idx) (and the inner index). */
static sval member_tensor(sema *S, const sval *m, sfield *f, h3_span sp) {
  h3_value *v = f->param->value;
  if (!m->whole) {
    v = sema_index_op(S, v, m->idx, m->off + f->shift, sp);
    if (!v) return sv_error();
  }
  if (m->has_inner) {
    v = sema_index_op(S, v, m->inner_idx, m->inner_off, sp);
    if (!v) return sv_error();
  }
  return sv_tensor(v);
}

static sval eval_member(sema *S, ast_expr *e) {
  sval base = sema_eval(S, e->lhs, false);
  const char *name = e->str;
  switch (base.kind) {
  case SV_ERROR: return base;
  case SV_PREFIX: {
    const char *path = join_path(S, base.path, name);
    sval g = global_name(S, path);
    if (g.kind != SV_VOID) return g;
    suggest_t sg;
    suggest_init(&sg, path);
    for (size_t i = 0; i < S->names.cap; i++)
      if (h3_strmap_key(&S->names, i)) suggest_try(&sg, h3_strmap_key(&S->names, i));
    h3_diag_error(S->d, e->span, suggest_hint(S->tmp, &sg), "unknown parameter '%s'", path);
    return sv_error();
  }
  case SV_GROUP:
    base = (sval){.kind = SV_MEMBER, .group = base.group, .path = "", .whole = true};
    /* fall through */
  case SV_MEMBER: {
    const char *path = join_path(S, base.path, name);
    sfield *f = sema_group_field(base.group, path);
    if (f && !(f->inner_at && strcmp(f->inner_at, path) == 0)) return member_tensor(S, &base, f, e->span);
    if (sema_group_has_prefix(base.group, path)) {
      base.path = path;
      return base;
    }
    suggest_t sg;
    suggest_init(&sg, path);
    for (int i = 0; i < base.group->n_fields; i++) suggest_try(&sg, base.group->fields[i].path);
    const char *hint = suggest_hint(S->tmp, &sg);
    if (!hint) {
      h3_strbuf b;
      h3_strbuf_init(&b);
      for (int i = 0; i < base.group->n_fields && i < 6; i++)
        h3_strbuf_printf(&b, "%s%s", i ? ", " : "", base.group->fields[i].path);
      if (base.group->n_fields > 6) h3_strbuf_append(&b, ", ...");
      hint = h3_arena_printf(S->tmp, "the fields of '%s' are: %s", base.group->name, b.data ? b.data : "");
      h3_strbuf_free(&b);
    }
    h3_diag_error(S->d, e->span, hint, "group '%s' has no field '%s'", base.group->name, path);
    return sv_error();
  }
  case SV_TUPLE:
    if (base.names)
      for (int i = 0; i < base.n; i++)
        if (strcmp(base.names[i], name) == 0) return base.elems[i];
    h3_diag_error(S->d, e->span,
                  "bind the values with a, b = ..., or read a graph's output by its declared name",
                  "these values have no result named '%s'", name);
    return sv_error();
  default:
    h3_diag_error(S->d, e->span,
                  "'.' reads a parameter path, a group member's field or a graph call's named output",
                  "'.%s': %s has no fields", name, sv_describe(S, &base));
    return sv_error();
  }
}

/* ---- indexing ----------------------------------------------------------------------------- */
/* Reads an index expression as (value + offset) or a constant (value NULL). */
static bool eval_index(sema *S, ast_expr *x, h3_value **v, int64_t *off) {
  *v = NULL;
  *off = 0;
  sval s;
  if (x->kind == AST_BINARY && (x->op == '+' || x->op == '-')) {
    sval l = sema_eval(S, x->lhs, false);
    if (l.kind == SV_ERROR) return false;
    if (l.kind == SV_TENSOR) {
      int64_t k;
      if (!sema_int(S, x->rhs, &k)) return false;
      if (x->op == '-') {
        if (k == INT64_MIN) {
          h3_diag_error(S->d, x->rhs->span, "give a smaller offset", "index offset out of range");
          return false;
        }
        k = -k;
      }
      s = l;
      *off = k;
    } else {
      sval r = sema_eval(S, x->rhs, false);
      if (r.kind == SV_ERROR) return false;
      if (sv_is_num(&l) && sv_is_num(&r)) {
        s = sema_fold(S, x->op, l, r, x->span);
        if (s.kind == SV_ERROR) return false;
      } else if (x->op == '+' && sv_is_num(&r) == false && r.kind == SV_TENSOR && l.kind == SV_INT) {
        s = r;
        *off = l.i;
      } else {
        h3_diag_error(S->d, x->span, "an index is an i32[] value (a loop index) plus or minus an integer",
                      "this index is not of the form i + k");
        return false;
      }
    }
  } else {
    s = sema_eval(S, x, false);
    if (s.kind == SV_ERROR) return false;
  }
  if (s.kind == SV_INT) {
    *off += s.i;
    return true;
  }
  if (s.kind == SV_TENSOR && s.v->type.dtype == H3_I32 && s.v->type.rank == 0) {
    /* `i + a - b` reads as (i + a) - b: the adds and subtractions of a constant that the
       value went through become offset too, so that the row stays the loop index's (a view
       the runtime places without reading the device) */
    for (h3_value *t = s.v; t->kind == H3_VALUE_RESULT && t->def &&
                            (t->def->code == H3_OP_ADD || t->def->code == H3_OP_SUB) &&
                            t->def->n_operands == 2;
         t = s.v) {
      h3_value *a = t->def->operands[0], *b = t->def->operands[1];
      int64_t k;
      bool sub = t->def->code == H3_OP_SUB;
      if (h3_value_const_int(b, &k) && a->type.dtype == H3_I32 && a->type.rank == 0 &&
          k != INT64_MIN && !__builtin_add_overflow(*off, sub ? -k : k, off))
        s.v = a;
      else if (!sub && h3_value_const_int(a, &k) && b->type.dtype == H3_I32 && b->type.rank == 0 &&
               !__builtin_add_overflow(*off, k, off))
        s.v = b;
      else
        break;
    }
    *v = s.v;
    return true;
  }
  h3_diag_error(S->d, x->span, "an index is an integer or an i32[] value such as a loop index",
                "an index must be an integer, got %s", sv_describe(S, &s));
  return false;
}

static sval eval_indexing(sema *S, ast_expr *e) {
  sval base = sema_eval(S, e->lhs, false);
  if (base.kind == SV_ERROR) return base;
  h3_value *iv;
  int64_t off;
  if (!eval_index(S, e->rhs, &iv, &off)) return sv_error();
  switch (base.kind) {
  case SV_GROUP:
    if (!iv && (off < 0 || off >= base.group->count)) {
      h3_diag_error(S->d, e->rhs->span, "members are numbered from 0", "index %lld is out of range for group '%s' (%lld members)",
                    (long long)off, base.group->name, (long long)base.group->count);
      return sv_error();
    }
    return (sval){.kind = SV_MEMBER, .group = base.group, .path = "", .idx = iv, .off = off};
  case SV_MEMBER:
    for (int i = 0; i < base.group->n_fields; i++) {
      sfield *f = &base.group->fields[i];
      if (f->inner_at && strcmp(f->inner_at, base.path) == 0 && !base.has_inner) {
        base.has_inner = true;
        base.inner_idx = iv;
        base.inner_off = off;
        return base;
      }
    }
    h3_diag_error(S->d, e->span,
                  "index only an inner array of the group, like mlp.experts[e].down_proj.weight",
                  "'%s' of group '%s' is not an inner array", base.path[0] ? base.path : base.group->name,
                  base.group->name);
    return sv_error();
  case SV_TENSOR:
    if (base.v->type.rank < 1) {
      h3_diag_error(S->d, e->span, "index a tensor of rank 1 or more", "cannot index a scalar (%s)",
                    sv_describe(S, &base));
      return sv_error();
    }
    return sv_tensor(sema_index_op(S, base.v, iv, off, e->span));
  default:
    h3_diag_error(S->d, e->lhs->span, "index a tensor (x[i]) or a parameter group (blocks[i])",
                  "cannot index %s", sv_describe(S, &base));
    return sv_error();
  }
}

static sval eval_list(sema *S, ast_expr *e) {
  sval r = {.kind = SV_LIST, .n = e->n_args};
  if (e->n_args > 0) {
    r.elems = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)e->n_args);
    if (!r.elems) {
      sema_oom(S, e->span);
      return sv_error();
    }
  }
  int i = 0;
  bool bad = false;
  for (ast_arg *a = e->args; a; a = a->next, i++) {
    r.elems[i] = sema_eval(S, a->value, true);
    if (r.elems[i].kind == SV_ERROR) {
      bad = true;
    } else if (!sv_is_num(&r.elems[i])) {
      h3_diag_error(S->d, a->value->span, "write the list of integer or float expressions, e.g. [rows, dim]",
                    "list elements are numbers, got %s", sv_describe(S, &r.elems[i]));
      bad = true;
    }
  }
  return bad ? sv_error() : r;
}

sval sema_eval(sema *S, ast_expr *e, bool konst) {
  switch (e->kind) {
  case AST_INT: return sv_int(e->ival);
  case AST_FLOAT: return sv_float(e->fval);
  case AST_STRING: return (sval){.kind = SV_STRING, .s = e->str};
  case AST_NAME: return eval_name(S, e, konst);
  case AST_BINARY: return eval_binary(S, e, konst);
  case AST_NEG: return eval_neg(S, e, konst);
  case AST_CALL: return sema_call(S, e, konst);
  case AST_LIST: return eval_list(S, e);
  case AST_MEMBER:
  case AST_INDEX:
    if (konst) {
      h3_diag_error(S->d, e->span, "shapes, counts and attributes are expressions of config keys and lets",
                    "'%s' is not a constant", sema_span_text(S, e->span));
      return sv_error();
    }
    return e->kind == AST_MEMBER ? eval_member(S, e) : eval_indexing(S, e);
  case AST_ERROR: return sv_error();
  }
  return sv_error();
}

bool sema_int(sema *S, ast_expr *e, int64_t *out) {
  sval v = sema_eval(S, e, true);
  if (v.kind == SV_INT) {
    *out = v.i;
    return true;
  }
  if (v.kind != SV_ERROR)
    h3_diag_error(S->d, e->span, "write an integer expression of config keys and lets",
                  "expected an integer, got %s", sv_describe(S, &v));
  return false;
}
