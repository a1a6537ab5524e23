/* sema_stmt.c: statements (docs/language.md "Statements"): bindings, `repeat`/`for` loops
 * and `return`.
 *
 * A loop is ONE `loop` op {count, label?} whose region takes (i32[] index, carried...):
 * the carried names are those bound before the loop and rebound anywhere in its body
 * (nested loops included), in the order of their first assignment. Inside the body they
 * are the region arguments; the `yield` gives their last bindings, which must keep their
 * types; after the loop the names are rebound to the loop's results. Names first bound
 * inside the body stay local to it.
 */
#include "sema.h"

#include <stdlib.h>
#include <string.h>

/* Gives an unnamed op result the source name it is bound to (for the IR text). */
static void name_value(sema *S, sval *v, const char *name) {
  if (v->kind == SV_TENSOR && v->v->kind == H3_VALUE_RESULT && !v->v->name) {
    v->v->name = h3_arena_strdup(&S->m->arena, name);
    if (!v->v->name) S->m->oom = true;
  }
}

static void exec_stmts(sema *S, ast_stmt *list);

static void exec_assign(sema *S, ast_stmt *st) {
  sval v = sema_eval(S, st->value, false);
  if (v.kind == SV_VOID) {
    h3_diag_error(S->d, st->value->span, "bind only ops and functions that give a value",
                  "this expression gives no value");
    v = sv_error();
  }
  if (st->n_names == 1) {
    name_value(S, &v, st->names->name);
    sema_bind(S, st->names->name, v);
    return;
  }
  if (v.kind != SV_ERROR && (v.kind != SV_TUPLE || v.n != st->n_names)) {
    int got = v.kind == SV_TUPLE ? v.n : 1;
    h3_diag_error(S->d, st->value->span, "bind one name per value", "%d names are bound but the right side gives %d value%s",
                  st->n_names, got, got == 1 ? "" : "s");
    v = sv_error();
  }
  int i = 0;
  for (ast_name *n = st->names; n; n = n->next, i++) {
    sval e = v.kind == SV_TUPLE ? v.elems[i] : sv_error();
    name_value(S, &e, n->name);
    sema_bind(S, n->name, e);
  }
}

/* Collects the names assigned in a body (nested loops included), in first-assignment
 * order, without duplicates. */
typedef struct {
  const char **names;
  h3_span *spans;
  int n, cap;
  h3_strmap seen;
  bool oom;
} name_set;

static void collect(name_set *ns, ast_stmt *list) {
  for (ast_stmt *st = list; st; st = st->next) {
    if (st->kind == STMT_LOOP) {
      collect(ns, st->body);
      continue;
    }
    if (st->kind != STMT_ASSIGN) continue;
    for (ast_name *n = st->names; n; n = n->next) {
      if (h3_strmap_get(&ns->seen, n->name)) continue;
      if (ns->n == ns->cap) {
        int nc = ns->cap ? ns->cap * 2 : 8;
        const char **nn = realloc(ns->names, sizeof(char *) * (size_t)nc);
        if (nn) ns->names = nn;
        h3_span *sp = realloc(ns->spans, sizeof(h3_span) * (size_t)nc);
        if (sp) ns->spans = sp;
        if (!nn || !sp) {
          ns->oom = true;
          return;
        }
        ns->cap = nc;
      }
      if (h3_strmap_put(&ns->seen, n->name, (void *)n)) {
        ns->oom = true;
        return;
      }
      ns->spans[ns->n] = n->span;
      ns->names[ns->n++] = n->name;
    }
  }
}

static void exec_loop(sema *S, ast_stmt *st) {
  if (st->is_for && !S->in_program)
    h3_diag_error(S->d, st->span, "use 'repeat' outside programs", "'for' loops belong in programs");
  int64_t count = 0;
  if (sema_int(S, st->value, &count) && count < 0) {
    h3_diag_error(S->d, st->value->span, "check the config keys and --set values the count is computed from",
                  "loop count must be non-negative, got %lld", (long long)count);
    count = 0;
  }
  name_set ns = {0};
  h3_strmap_init(&ns.seen);
  collect(&ns, st->body);
  if (ns.oom) {
    sema_oom(S, st->span);
    goto done;
  }
  /* the carried names and their values before the loop */
  const char **cname = h3_arena_alloc(S->tmp, sizeof(char *) * (size_t)(ns.n + 1));
  h3_value **init = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)(ns.n + 1));
  h3_type *types = h3_arena_alloc(S->tmp, sizeof(h3_type) * (size_t)(ns.n + 1));
  if (!cname || !init || !types) {
    sema_oom(S, st->span);
    goto done;
  }
  int nc = 0;
  for (int i = 0; i < ns.n; i++) {
    if (strcmp(ns.names[i], st->var) == 0) continue;
    binding *b = sema_find_local(S, ns.names[i]);
    if (!b || b->val.kind == SV_ERROR) continue;
    if (b->val.kind != SV_TENSOR) {
      h3_diag_error(S->d, ns.spans[i], "use a new name inside the loop",
                    "'%s' is bound before the loop and rebound in it, but it is %s: only tensors are carried",
                    ns.names[i], sv_describe(S, &b->val));
      continue;
    }
    cname[nc] = ns.names[i];
    init[nc] = b->val.v;
    types[nc] = b->val.v->type;
    nc++;
  }
  if (!sema_charge(S, st->span)) goto done;
  h3_attr at[2] = {h3_attr_int(S->m, "count", count), h3_attr_string(S->m, "label", st->label)};
  S->b.span = st->span;
  h3_op *loop = h3_build_op_typed(&S->b, H3_OP_LOOP, nc, init, st->label ? 2 : 1, at, nc, types, 1);
  if (!loop) {
    sema_oom(S, st->span);
    goto done;
  }
  h3_region *r = &loop->regions[0];
  h3_type i32 = h3_type_make(H3_I32, 0, NULL);
  h3_value *index = h3_region_add_arg(S->m, r, i32, st->var, st->var_span);
  h3_value **args = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)(nc + 1));
  bool ok = index && args;
  for (int k = 0; k < nc && ok; k++) {
    args[k] = h3_region_add_arg(S->m, r, types[k], cname[k], st->span);
    ok = args[k] != NULL;
  }
  if (!ok) {
    sema_oom(S, st->span);
    goto done;
  }
  h3_builder saved = S->b;
  int mark = S->n_env;
  S->b.region = r;
  S->b.before = NULL;
  sema_bind(S, st->var, sv_tensor(index));
  for (int k = 0; k < nc; k++) sema_bind(S, cname[k], sv_tensor(args[k]));
  exec_stmts(S, st->body);
  /* the yield: each carried name's last binding, same type as before the loop */
  h3_value **yv = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)(nc + 1));
  if (!yv) {
    sema_oom(S, st->span);
    goto done;
  }
  char b1[96], b2[96];
  for (int k = 0; k < nc; k++) {
    binding *b = sema_find_local(S, cname[k]);
    yv[k] = args[k];
    if (!b || b->val.kind == SV_ERROR) continue;
    if (b->val.kind != SV_TENSOR) {
      h3_diag_error(S->d, st->span, "use a new name inside the loop",
                    "'%s' is carried through the loop but is rebound to %s", cname[k], sv_describe(S, &b->val));
    } else if (!h3_type_equal(&b->val.v->type, &types[k])) {
      h3_diag_error(S->d, st->span, "use a new name inside the loop if the value is local to it",
                    "'%s' is carried through the loop but its type changes from %s to %s", cname[k],
                    h3_type_str(&types[k], b1, sizeof b1), h3_type_str(&b->val.v->type, b2, sizeof b2));
    } else {
      yv[k] = b->val.v;
    }
  }
  S->b.span = st->end_span;
  if (!h3_build_op_typed(&S->b, H3_OP_YIELD, nc, yv, 0, NULL, 0, NULL, 0)) sema_oom(S, st->span);
  S->b = saved;
  S->n_env = mark;
  for (int k = 0; k < nc; k++) {
    sval v = sv_tensor(loop->results[k]);
    name_value(S, &v, cname[k]);
    sema_bind(S, cname[k], v);
  }
done:
  free(ns.names);
  free(ns.spans);
  h3_strmap_free(&ns.seen);
}

static void exec_stmts(sema *S, ast_stmt *list) {
  for (ast_stmt *st = list; st; st = st->next) {
    if (S->oom_reported) return;
    switch (st->kind) {
    case STMT_ASSIGN: exec_assign(S, st); break;
    case STMT_LOOP: exec_loop(S, st); break;
    case STMT_RETURN:
      h3_diag_error(S->d, st->span, "loops give their results through the names they rebind",
                    "'return' inside a loop");
      break;
    }
  }
}

ast_stmt *sema_body(sema *S, ast_stmt *body, h3_span end, const char *what) {
  ast_stmt *ret = NULL;
  for (ast_stmt *st = body; st; st = st->next) {
    if (S->oom_reported) return NULL;
    if (ret) {
      h3_diag_error(S->d, st->span,
                    "move the return to the end of the body, or remove the statements after it",
                    "statement after 'return' (the return must come last)");
      return NULL;
    }
    switch (st->kind) {
    case STMT_ASSIGN: exec_assign(S, st); break;
    case STMT_LOOP: exec_loop(S, st); break;
    case STMT_RETURN: ret = st; break;
    }
  }
  if (!ret) h3_diag_error(S->d, end, "end it with `return VALUE`", "'%s' ends without 'return'", what);
  return ret;
}

int sema_return_values(sema *S, ast_stmt *ret, h3_value ***out) {
  int n = 0, cap = 8;
  h3_value **vals = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)cap);
  bool ok = vals != NULL;
  for (ast_arg *a = ret->values; a && vals; a = a->next) {
    sval v = sema_eval(S, a->value, false);
    int add = v.kind == SV_TUPLE ? v.n : 1;
    if (v.kind == SV_ERROR) {
      ok = false;
      continue;
    }
    if (v.kind != SV_TENSOR && v.kind != SV_TUPLE) {
      h3_diag_error(S->d, a->value->span, "return tensors; a cast makes a number one, e.g. f32(1.5)",
                    "only tensors can be returned, got %s", sv_describe(S, &v));
      ok = false;
      continue;
    }
    if (n + add > cap) {
      while (n + add > cap) cap *= 2;
      h3_value **nv = h3_arena_alloc(S->tmp, sizeof(h3_value *) * (size_t)cap);
      if (nv) memcpy(nv, vals, sizeof(h3_value *) * (size_t)n);
      vals = nv;
      if (!vals) break;
    }
    for (int i = 0; i < add; i++) vals[n++] = v.kind == SV_TUPLE ? v.elems[i].v : v.v;
  }
  if (!vals) {
    sema_oom(S, ret->span);
    return -1;
  }
  *out = vals;
  return ok ? n : -1;
}
