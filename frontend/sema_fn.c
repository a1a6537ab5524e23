/* sema_fn.c: functions, graphs and programs (docs/language.md "Functions, graphs and
 * programs").
 *
 * A function is inlined at each call: its arguments are checked against the declared
 * types in a fresh scope (`int` arguments first, so later dims may use them; a dim that
 * is a name not known yet binds that name to the actual size, e.g. S in bf16[S, dim]),
 * its body runs in the caller's region, and its return values are checked against the
 * declared results. A graph or program becomes an IR graph: inputs, the body, a `return`
 * whose operands are the named outputs. Programs call graphs with `call` ops.
 */
#include "sema.h"

#include <string.h>

static const char *type_text(sema *S, const h3_type *t) {
  char buf[128];
  return h3_arena_strdup(S->tmp, h3_type_str(t, buf, sizeof buf));
}

/* Checks actual type `t` against a declared tensor type; binds unknown dim names.
 * `what` names the value in messages; errors are reported at `at`. */
static bool match_type(sema *S, const ast_type *decl, const h3_type *t, const char *what, h3_span at) {
  h3_dtype dt;
  if (!decl->has_dims || !h3_dtype_from_name(decl->name, &dt)) {
    h3_diag_error(S->d, decl->span, "write a tensor type like bf16[rows, dim]", "'%s' is not a tensor type",
                  decl->name);
    return false;
  }
  const char *src = sema_span_text(S, decl->span);
  if (dt != t->dtype || decl->n_dims != t->rank) {
    h3_diag_error(S->d, at, "pass a value of the declared type, or change the declaration", "%s is %s, but %s is declared", what, type_text(S, t), src);
    return false;
  }
  int k = 0;
  for (ast_arg *a = decl->dims; a; a = a->next, k++) {
    ast_expr *x = a->value;
    if (x->kind == AST_NAME && !sema_find_local(S, x->str) && !h3_strmap_get(&S->consts, x->str)) {
      if (!sema_bind(S, x->str, sv_int(t->dims[k]))) return false;
      continue;
    }
    int64_t v;
    if (!sema_int(S, x, &v)) return false;
    if (v != t->dims[k]) {
      h3_diag_error(S->d, at, "pass a value of the declared type, or change the declaration",
                    "%s is %s, but %s is declared (dim %d: %lld != %lld)", what,
                    type_text(S, t), src, k, (long long)t->dims[k], (long long)v);
      return false;
    }
  }
  return true;
}

/* Binds function argument `p` to value v (evaluated in the caller). */
static bool bind_arg(sema *S, gcall *g, ast_decl *p, sval v, ast_expr *arg) {
  const char *fname = g->item->name;
  const char *what = h3_arena_printf(S->tmp, "argument '%s' of '%s'", p->name, fname);
  if (v.kind == SV_ERROR) return false;
  if (!p->type.has_dims && strcmp(p->type.name, "int") == 0) {
    if (v.kind != SV_INT) {
      h3_diag_error(S->d, arg->span, "pass an integer expression of config keys, lets or int arguments",
                    "%s is an int, got %s", what, sv_describe(S, &v));
      return false;
    }
    return sema_bind(S, p->name, v);
  }
  if (!p->type.has_dims) {
    gname *gn = h3_strmap_get(&S->names, p->type.name);
    if (!gn || !gn->group) {
      h3_diag_error(S->d, p->type.span, "a type is DTYPE[dims], int, or the name of a parameter group",
                    "unknown type '%s'", p->type.name);
      g->broken = true;
      return false;
    }
    if (v.kind != SV_MEMBER || v.group != gn->group || v.whole || v.path[0]) {
      h3_diag_error(S->d, arg->span, "pass one member of the group", "%s must be a member of group '%s' (like %s[i]), got %s", what,
                    gn->group->name, gn->group->name, sv_describe(S, &v));
      return false;
    }
    return sema_bind(S, p->name, v);
  }
  if (v.kind != SV_TENSOR) {
    h3_diag_error(S->d, arg->span, "pass a tensor: an input, a parameter or the result of an op",
                  "%s must be a tensor, got %s", what, sv_describe(S, &v));
    return false;
  }
  if (!match_type(S, &p->type, &v.v->type, what, arg->span)) return false;
  return sema_bind(S, p->name, v);
}

sval sema_inline(sema *S, gcall *g, ast_expr *call) {
  ast_item *fn = g->item;
  g->used = true;
  if (g->order == S->cur_order) {
    h3_diag_error(S->d, ast_call_name_span(call), "write the repetition as a `repeat` loop", "function '%s' calls itself; recursion is not supported",
                  fn->name);
    return sv_error();
  }
  if (g->order > S->cur_order) {
    h3_diag_error(S->d, ast_call_name_span(call), "move the function above its first use",
                  "function '%s' is declared below (line %d)", fn->name, fn->span.line);
    return sv_error();
  }
  if (g->broken) return sv_error();
  if (S->inline_depth >= SEMA_MAX_INLINE) {
    h3_diag_error(S->d, call->span, "check for functions that call each other many times",
                  "function calls nested more than %d deep", SEMA_MAX_INLINE);
    return sv_error();
  }
  if (!sema_charge(S, call->span)) return sv_error();
  int nparams = 0;
  for (ast_decl *p = fn->args; p; p = p->next) nparams++;
  int nargs = 0;
  for (ast_arg *a = call->args; a; a = a->next) {
    if (a->name) {
      h3_diag_error(S->d, a->name_span,
                    "pass the arguments in the order of the function's parameters, without names",
                    "function '%s' takes positional arguments only", fn->name);
      return sv_error();
    }
    nargs++;
  }
  if (nargs != nparams) {
    h3_diag_error(S->d, call->span, "pass one argument per parameter of its definition", "function '%s' takes %d argument%s, got %d", fn->name, nparams,
                  nparams == 1 ? "" : "s", nargs);
    return sv_error();
  }
  /* evaluate the arguments in the caller's scope */
  sval *vals = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)(nargs + 1));
  if (!vals) {
    sema_oom(S, call->span);
    return sv_error();
  }
  bool ok = true;
  int k = 0;
  ast_arg *a = call->args;
  for (ast_decl *p = fn->args; p; p = p->next, a = a->next, k++) {
    bool is_int = !p->type.has_dims && strcmp(p->type.name, "int") == 0;
    vals[k] = sema_eval(S, a->value, is_int);
    if (vals[k].kind == SV_ERROR) ok = false;
  }
  if (!ok) return sv_error();
  /* a fresh scope: int arguments first, then the others in order */
  int saved_frame = S->frame, saved_n = S->n_env, saved_order = S->cur_order;
  S->frame = S->n_env;
  S->cur_order = g->order; /* its body may call only functions above it */
  S->inline_depth++;
  for (int pass = 0; pass < 2 && ok; pass++) {
    k = 0;
    a = call->args;
    for (ast_decl *p = fn->args; p && ok; p = p->next, a = a->next, k++) {
      bool is_int = !p->type.has_dims && strcmp(p->type.name, "int") == 0;
      if (is_int == (pass == 0)) ok = bind_arg(S, g, p, vals[k], a->value);
    }
  }
  sval result = sv_error();
  if (ok) {
    int before = S->d->errors;
    ast_stmt *ret = sema_body(S, fn->body, fn->end_span, fn->name);
    h3_value **rv = NULL;
    int nr = ret ? sema_return_values(S, ret, &rv) : -1;
    int ndecl = 0;
    for (ast_decl *r = fn->results; r; r = r->next) ndecl++;
    if (nr >= 0 && nr != ndecl) {
      h3_diag_error(S->d, ret->span, "make the return list match the function's declared results",
                    "'%s' returns %d value%s but declares %d", fn->name, nr, nr == 1 ? "" : "s", ndecl);
      nr = -1;
    }
    if (nr >= 0) {
      int i = 0;
      ast_arg *ra = ret->values;
      for (ast_decl *r = fn->results; r && nr >= 0; r = r->next, i++) {
        h3_span at = ra ? ra->value->span : ret->span;
        const char *what = h3_arena_printf(S->tmp, "result %d of '%s'", i + 1, fn->name);
        if (!match_type(S, &r->type, &rv[i]->type, what, at)) nr = -1;
        if (ra && ra->next) ra = ra->next;
      }
    }
    if (nr >= 0 && S->d->errors == before) {
      if (nr == 1) {
        result = sv_tensor(rv[0]);
      } else {
        result = (sval){.kind = SV_TUPLE, .n = nr};
        result.elems = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)nr);
        if (!result.elems) {
          sema_oom(S, call->span);
          result = sv_error();
        } else {
          for (int i = 0; i < nr; i++) result.elems[i] = sv_tensor(rv[i]);
        }
      }
    } else {
      g->broken = true;
      h3_diag_note(S->d, call->span, "in this call of '%s'", fn->name);
    }
  }
  S->inline_depth--;
  S->cur_order = saved_order;
  S->n_env = saved_n;
  S->frame = saved_frame;
  return result;
}

sval sema_graph_call(sema *S, gcall *g, ast_expr *call) {
  ast_item *it = g->item;
  const char *kind = it->kind == ITEM_PROGRAM ? "program" : "graph";
  if (!S->in_program || it->kind == ITEM_PROGRAM) {
    h3_diag_error(S->d, call->span, "graphs are entry points; share code between graphs with 'fn'",
                  "%s '%s' can be called only from a program", kind, it->name);
    return sv_error();
  }
  if (g->order >= S->cur_order) {
    h3_diag_error(S->d, ast_call_name_span(call), "move the graph above the program",
                  "graph '%s' is declared below (line %d)", it->name, it->span.line);
    return sv_error();
  }
  g->used = true;
  int nargs = 0;
  for (ast_arg *a = call->args; a; a = a->next) {
    if (a->name) {
      h3_diag_error(S->d, a->name_span,
                    "pass the arguments in the order of the graph's inputs, without names",
                    "graph '%s' takes positional arguments only", it->name);
      return sv_error();
    }
    nargs++;
  }
  h3_value **ops = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)(nargs + 1));
  if (!ops) {
    sema_oom(S, call->span);
    return sv_error();
  }
  bool ok = true;
  int k = 0;
  for (ast_arg *a = call->args; a; a = a->next, k++) {
    sval v = sema_eval(S, a->value, false);
    if (v.kind == SV_ERROR) {
      ok = false;
    } else if (v.kind != SV_TENSOR) {
      h3_diag_error(S->d, a->value->span, "pass a tensor: an input, a parameter or the result of an op",
                    "argument %d of graph '%s' must be a tensor, got %s", k + 1, it->name,
                    sv_describe(S, &v));
      ok = false;
    } else {
      ops[k] = v.v;
    }
  }
  if (!ok || g->broken || !g->graph) return sv_error();
  if (nargs != g->n_in) {
    h3_diag_error(S->d, call->span, "pass one argument per input of the graph",
                  "graph '%s' takes %d input%s, got %d", it->name, g->n_in, g->n_in == 1 ? "" : "s", nargs);
    return sv_error();
  }
  k = 0;
  for (ast_arg *a = call->args; a; a = a->next, k++)
    if (!h3_type_equal(&ops[k]->type, &g->in_types[k])) {
      h3_diag_error(S->d, a->value->span,
                    "pass a value of exactly the input's type; cast a dtype with e.g. bf16(x)",
                    "input '%s' of graph '%s' is %s, got %s", g->graph->inputs[k]->name, it->name,
                    type_text(S, &g->in_types[k]), type_text(S, &ops[k]->type));
      ok = false;
    }
  if (!ok || !sema_charge(S, call->span)) return sv_error();
  h3_attr at = h3_attr_string(S->m, "callee", it->name);
  S->b.span = call->span;
  h3_op *op = h3_build_op_typed(&S->b, H3_OP_CALL, nargs, ops, 1, &at, g->n_out, g->out_types, 0);
  if (!op) {
    sema_oom(S, call->span);
    return sv_error();
  }
  if (g->n_out == 1) return sv_tensor(op->results[0]);
  sval t = {.kind = SV_TUPLE, .n = g->n_out, .names = g->out_names};
  t.elems = h3_arena_alloc(S->tmp, sizeof(sval) * (size_t)(g->n_out + 1));
  if (!t.elems) {
    sema_oom(S, call->span);
    return sv_error();
  }
  for (int i = 0; i < g->n_out; i++) t.elems[i] = sv_tensor(op->results[i]);
  return t;
}

/* Evaluates the inputs and named outputs of a graph or program; binds the inputs. */
static bool graph_signature(sema *S, gcall *g) {
  ast_item *it = g->item;
  bool ok = true;
  for (ast_decl *p = it->args; p; p = p->next) g->n_in++;
  for (ast_decl *r = it->results; r; r = r->next) g->n_out++;
  g->in_types = h3_arena_alloc(S->tmp, sizeof(h3_type) * (size_t)(g->n_in + 1));
  g->out_types = h3_arena_alloc(S->tmp, sizeof(h3_type) * (size_t)(g->n_out + 1));
  g->out_names = h3_arena_alloc(S->tmp, sizeof(char *) * (size_t)(g->n_out + 1));
  if (!g->in_types || !g->out_types || !g->out_names) {
    sema_oom(S, it->span);
    return false;
  }
  int k = 0;
  for (ast_decl *p = it->args; p; p = p->next, k++) {
    for (ast_decl *q = it->args; q != p; q = q->next)
      if (strcmp(q->name, p->name) == 0) {
        h3_diag_error(S->d, p->span, "rename the input", "duplicate input '%s'", p->name);
        ok = false;
      }
    if (!sema_eval_type(S, &p->type, &g->in_types[k])) {
      ok = false;
      if (!sema_bind(S, p->name, sv_error())) return false;
      continue;
    }
    h3_value *v = h3_graph_add_input(S->m, g->graph, p->name, g->in_types[k], p->span);
    if (!v) {
      sema_oom(S, p->span);
      return false;
    }
    if (!sema_bind(S, p->name, sv_tensor(v))) return false;
  }
  k = 0;
  for (ast_decl *r = it->results; r; r = r->next, k++) {
    if (!r->name) {
      h3_diag_error(S->d, r->span, "write the outputs as -> (name: TYPE, ...)", "the outputs of %s '%s' need names",
                    it->kind == ITEM_PROGRAM ? "program" : "graph", it->name);
      ok = false;
      continue;
    }
    for (ast_decl *q = it->results; q != r; q = q->next)
      if (q->name && strcmp(q->name, r->name) == 0) {
        h3_diag_error(S->d, r->span, "rename the output", "duplicate output '%s'", r->name);
        ok = false;
      }
    g->out_names[k] = r->name;
    if (!sema_eval_type(S, &r->type, &g->out_types[k])) ok = false;
  }
  return ok;
}

void sema_graph(sema *S, gcall *g) {
  ast_item *it = g->item;
  bool program = it->kind == ITEM_PROGRAM;
  g->graph = h3_module_add_graph(S->m, it->name, program ? H3_GRAPH_PROGRAM : H3_GRAPH_FUNCTION, it->span);
  if (!g->graph) {
    sema_oom(S, it->span);
    return;
  }
  S->graph = g->graph;
  S->in_program = program;
  S->b = (h3_builder){.m = S->m, .region = &g->graph->body, .before = NULL, .span = it->span};
  S->n_env = 0;
  S->frame = 0;
  int before = S->d->errors;
  bool sig_ok = graph_signature(S, g);
  if (!S->oom_reported) { /* the body is checked even when the signature has errors */
    ast_stmt *ret = sema_body(S, it->body, it->end_span, it->name);
    h3_value **rv = NULL;
    int nr = ret && sig_ok ? sema_return_values(S, ret, &rv) : -1;
    if (nr >= 0 && nr != g->n_out) {
      h3_diag_error(S->d, ret->span, "make the return list match the declared outputs",
                    "'%s' returns %d value%s but declares %d output%s", it->name, nr, nr == 1 ? "" : "s",
                    g->n_out, g->n_out == 1 ? "" : "s");
      nr = -1;
    }
    ast_arg *ra = ret && nr >= 0 ? ret->values : NULL;
    for (int i = 0; i < nr; i++) {
      if (!h3_type_equal(&rv[i]->type, &g->out_types[i])) {
        bool dtype_only = h3_type_same_shape(&rv[i]->type, &g->out_types[i]);
        h3_diag_error(S->d, ra ? ra->value->span : ret->span,
                      dtype_only
                          ? h3_arena_printf(S->tmp, "cast it: %s(...)", h3_dtype_name(g->out_types[i].dtype))
                          : "return a value of the declared shape, or change the declaration",
                      "output '%s' is declared %s but the value is %s", g->out_names[i],
                      type_text(S, &g->out_types[i]), type_text(S, &rv[i]->type));
      }
      if (ra && ra->next) ra = ra->next;
    }
    if (nr >= 0 && S->d->errors == before) {
      S->b.span = ret->span;
      if (!h3_build_op_typed(&S->b, H3_OP_RETURN, nr, rv, 0, NULL, 0, NULL, 0)) sema_oom(S, ret->span);
      for (int i = 0; i < nr; i++) h3_graph_add_output(S->m, g->graph, g->out_names[i]);
    }
  }
  if (S->d->errors != before) g->broken = true;
  S->graph = NULL;
  S->in_program = false;
  S->n_env = 0;
}
