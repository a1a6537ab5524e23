/* ast.c: constructors of the syntax tree (ast.h).
 *
 * Each constructor allocates in the parse arena, joins the spans of its children and
 * records the expression depth (1 + the deepest child) that the parser checks against
 * AST_MAX_DEPTH. They return NULL only when the arena is out of memory.
 */
#include "ast.h"

#include <string.h>

h3_span ast_span_join(h3_span a, h3_span b) {
  h3_span s = a;
  if (b.end_line > a.end_line || (b.end_line == a.end_line && b.end_col > a.end_col)) {
    s.end_line = b.end_line;
    s.end_col = b.end_col;
  }
  return s;
}

ast_expr *ast_expr_new(h3_arena *a, ast_expr_kind kind, h3_span span) {
  ast_expr *e = h3_arena_alloc(a, sizeof *e);
  if (!e) return NULL;
  e->kind = kind;
  e->span = span;
  e->depth = 1;
  return e;
}

static int max_depth(const ast_expr *a, const ast_expr *b) {
  int da = a ? a->depth : 0, db = b ? b->depth : 0;
  return da > db ? da : db;
}

ast_expr *ast_binary(h3_arena *a, char op, ast_expr *l, ast_expr *r) {
  if (!l || !r) return NULL;
  ast_expr *e = ast_expr_new(a, AST_BINARY, ast_span_join(l->span, r->span));
  if (!e) return NULL;
  e->op = op;
  e->lhs = l;
  e->rhs = r;
  e->depth = 1 + max_depth(l, r);
  return e;
}

ast_expr *ast_unary_neg(h3_arena *a, h3_span span, ast_expr *x) {
  if (!x) return NULL;
  ast_expr *e = ast_expr_new(a, AST_NEG, ast_span_join(span, x->span));
  if (!e) return NULL;
  e->lhs = x;
  e->depth = 1 + x->depth;
  return e;
}

static int args_depth(const ast_arg *l) {
  int d = 0;
  for (; l; l = l->next)
    if (l->value && l->value->depth > d) d = l->value->depth;
  return d;
}

ast_expr *ast_call(h3_arena *a, const char *name, h3_span span, ast_arg *args, h3_span end) {
  ast_expr *e = ast_expr_new(a, AST_CALL, ast_span_join(span, end));
  if (!e) return NULL;
  e->str = name;
  e->args = args;
  e->n_args = ast_count_args(args);
  e->depth = 1 + args_depth(args);
  return e;
}

ast_expr *ast_member(h3_arena *a, ast_expr *base, const char *name, h3_span end) {
  if (!base) return NULL;
  ast_expr *e = ast_expr_new(a, AST_MEMBER, ast_span_join(base->span, end));
  if (!e) return NULL;
  e->lhs = base;
  e->str = name;
  e->depth = 1 + base->depth;
  return e;
}

ast_expr *ast_index(h3_arena *a, ast_expr *base, ast_expr *idx, h3_span end) {
  if (!base || !idx) return NULL;
  ast_expr *e = ast_expr_new(a, AST_INDEX, ast_span_join(base->span, end));
  if (!e) return NULL;
  e->lhs = base;
  e->rhs = idx;
  e->depth = 1 + max_depth(base, idx);
  return e;
}

ast_expr *ast_list(h3_arena *a, h3_span span, ast_arg *elems) {
  ast_expr *e = ast_expr_new(a, AST_LIST, span);
  if (!e) return NULL;
  e->args = elems;
  e->n_args = ast_count_args(elems);
  e->depth = 1 + args_depth(elems);
  return e;
}

ast_arg *ast_arg_new(h3_arena *a, const char *name, h3_span name_span, ast_expr *value) {
  ast_arg *g = h3_arena_alloc(a, sizeof *g);
  if (!g) return NULL;
  g->name = name;
  g->name_span = name_span;
  g->value = value;
  return g;
}

h3_span ast_call_name_span(const ast_expr *call) {
  h3_span s = call->span;
  s.end_line = s.line;
  s.end_col = s.col + (int)strlen(call->str);
  return s;
}

int ast_count_args(const ast_arg *l) {
  int n = 0;
  for (; l; l = l->next) n++;
  return n;
}

const char *ast_path_text(h3_arena *a, const ast_part *p) {
  size_t len = 0;
  for (const ast_part *q = p; q && q->name; q = q->next) len += strlen(q->name) + 1;
  char *s = h3_arena_alloc(a, len + 1);
  if (!s) return NULL;
  char *w = s;
  for (const ast_part *q = p; q && q->name; q = q->next) {
    if (w != s) *w++ = '.';
    size_t n = strlen(q->name);
    memcpy(w, q->name, n);
    w += n;
  }
  *w = 0;
  return s;
}
