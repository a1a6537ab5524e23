/* ast.h: the syntax tree of a .g file, as the parser builds it (private to frontend/).
 *
 * Every node lives in the parse arena and keeps its source span. Lists are singly linked
 * through `next` in source order. Expressions record their nesting depth so the parser
 * can refuse trees deep enough to overflow the C stack of the recursive passes
 * (AST_MAX_DEPTH). Paths (`blocks.attn.qkv_proj.weight`, `mlp.experts[experts].w`) are
 * lists of parts; a part is a name or, in a parameter field, one `[COUNT]` inner array.
 */
#ifndef H3_FRONTEND_AST_H
#define H3_FRONTEND_AST_H

#include "h3/support.h"

#include <stdbool.h>

/* Deepest expression tree accepted (each level is a few C stack frames in sema). */
#define AST_MAX_DEPTH 256

typedef enum {
  AST_INT,    /* ival */
  AST_FLOAT,  /* fval */
  AST_STRING, /* str */
  AST_NAME,   /* str */
  AST_BINARY, /* op is one of + - * / %; lhs, rhs */
  AST_NEG,    /* lhs */
  AST_CALL,   /* str = callee name, args (kwargs have a name) */
  AST_MEMBER, /* lhs . str */
  AST_INDEX,  /* lhs [ rhs ] */
  AST_LIST,   /* [ args ] */
  AST_ERROR,  /* placeholder after a reported error */
} ast_expr_kind;

typedef struct ast_arg ast_arg;

typedef struct ast_expr {
  ast_expr_kind kind;
  h3_span span;
  int depth;
  int64_t ival;
  double fval;
  const char *str;
  char op;
  struct ast_expr *lhs, *rhs;
  ast_arg *args;
  int n_args;
} ast_expr;

/* A call argument or list element: `name = value` (keyword) or `value` (name NULL). */
struct ast_arg {
  const char *name;
  h3_span name_span;
  ast_expr *value;
  ast_arg *next;
};

/* One part of a dotted path; `count` is set for a `[COUNT]` part (name NULL then). */
typedef struct ast_part {
  const char *name;
  ast_expr *count;
  h3_span span;
  struct ast_part *next;
} ast_part;

/* `bf16[dim, 3*heads]`, `f32[]`, `int` (name "int", no dims) or a group name. */
typedef struct ast_type {
  const char *name; /* dotted name */
  h3_span span;
  bool has_dims;
  ast_arg *dims; /* positional args holding the dim expressions */
  int n_dims;
} ast_type;

typedef struct ast_stmt ast_stmt;

typedef enum { STMT_ASSIGN, STMT_LOOP, STMT_RETURN } ast_stmt_kind;

/* One name of `a, b = ...` or of an argument list. */
typedef struct ast_name {
  const char *name;
  h3_span span;
  struct ast_name *next;
} ast_name;

struct ast_stmt {
  ast_stmt_kind kind;
  h3_span span;
  ast_name *names;   /* ASSIGN: the bound names */
  int n_names;
  ast_expr *value;   /* ASSIGN: the expression; LOOP: the count */
  ast_arg *values;   /* RETURN: the returned expressions */
  int n_values;
  const char *label; /* LOOP: optional label */
  bool is_for;       /* LOOP: `for` (programs) rather than `repeat` */
  const char *var;   /* LOOP: index name */
  h3_span var_span;
  ast_stmt *body;    /* LOOP */
  h3_span end_span;  /* LOOP: the closing brace */
  ast_stmt *next;
};

/* A function argument or a named result: `x: bf16[S, dim]`. */
typedef struct ast_decl {
  const char *name; /* NULL for an unnamed function result */
  h3_span span;
  ast_type type;
  struct ast_decl *next;
} ast_decl;

/* `init normal(fan_in = dim)` */
typedef struct ast_init {
  const char *name;
  h3_span span;
  ast_arg *args;
} ast_init;

/* A parameter (top-level `param`, or a field of a `params` group). */
typedef struct ast_field {
  ast_part *path;
  h3_span span; /* the path */
  ast_type type;
  ast_init *init;
  struct ast_field *next;
} ast_field;

typedef enum {
  ITEM_MODEL,
  ITEM_CONFIG,
  ITEM_LET,
  ITEM_PARAM,
  ITEM_PARAMS,
  ITEM_FN,
  ITEM_GRAPH,
  ITEM_PROGRAM,
  ITEM_CHECK,
} ast_item_kind;

typedef struct ast_item {
  ast_item_kind kind;
  h3_span span;      /* the item's name; CHECK: its condition */
  const char *name;  /* MODEL, CONFIG, LET, FN, GRAPH, PROGRAM */
  ast_arg *entries;  /* CONFIG: key = value entries */
  ast_expr *value;   /* LET; CHECK: the left side */
  ast_expr *rhs;     /* CHECK: the right side */
  int compare;       /* CHECK: '<', '>', 'l' (<=), 'g' (>=), '=' (==), '!' (!=) */
  const char *message; /* CHECK: the hint of a failed check */
  ast_field *fields; /* PARAM: one field; PARAMS: the group's fields */
  ast_part *path;    /* PARAMS: the group path */
  ast_expr *first;   /* PARAMS: range start (NULL for `P[COUNT]`) */
  ast_expr *count;   /* PARAMS: COUNT, or the range end */
  const char *alias; /* PARAMS */
  h3_span alias_span;
  ast_decl *args;    /* FN, GRAPH, PROGRAM */
  ast_decl *results;
  bool results_paren; /* results written as `(...)` */
  ast_stmt *body;
  h3_span end_span; /* closing brace of the body */
  struct ast_item *next;
} ast_item;

typedef struct {
  ast_item *items;
} ast_file;

/* ---- constructors (ast.c); all allocate in `a` and return NULL when out of memory ---- */
ast_expr *ast_expr_new(h3_arena *a, ast_expr_kind kind, h3_span span);
ast_expr *ast_binary(h3_arena *a, char op, ast_expr *l, ast_expr *r);
ast_expr *ast_unary_neg(h3_arena *a, h3_span span, ast_expr *e);
ast_expr *ast_call(h3_arena *a, const char *name, h3_span span, ast_arg *args, h3_span end);
ast_expr *ast_member(h3_arena *a, ast_expr *base, const char *name, h3_span end);
ast_expr *ast_index(h3_arena *a, ast_expr *base, ast_expr *idx, h3_span end);
ast_expr *ast_list(h3_arena *a, h3_span span, ast_arg *elems);
ast_arg *ast_arg_new(h3_arena *a, const char *name, h3_span name_span, ast_expr *value);
/* Joins two spans of one file into the span from the start of `a` to the end of `b`. */
h3_span ast_span_join(h3_span a, h3_span b);
int ast_count_args(const ast_arg *l);
/* The span of a call's callee name (the start of the call's span). */
h3_span ast_call_name_span(const ast_expr *call);
/* "a.b.c" for a path without count parts; the text up to the count part otherwise. */
const char *ast_path_text(h3_arena *a, const ast_part *p);

/* Lists are built in reverse by the parser (prepend is O(1)) and turned around once when
 * complete: AST_REVERSE(ast_stmt, list) returns the list in source order. */
#define AST_REVERSE(T, list)                                 \
  __extension__({                                            \
    T *ast_prev_ = NULL, *ast_cur_ = (list);                 \
    while (ast_cur_) {                                       \
      T *ast_nx_ = ast_cur_->next;                           \
      ast_cur_->next = ast_prev_;                            \
      ast_prev_ = ast_cur_;                                  \
      ast_cur_ = ast_nx_;                                    \
    }                                                        \
    ast_prev_;                                               \
  })

#endif
