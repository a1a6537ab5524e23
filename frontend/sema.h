/* sema.h: semantic analysis of a parsed .g file into the IR (private to frontend/).
 *
 * sema.c drives it: configs and overrides, lets, parameters (sema_params.c), then graphs
 * and programs in file order. Expressions are evaluated (sema_expr.c) into `sval`s: a
 * compile-time number, string, dtype or list, an IR tensor value, a tuple of values, or a
 * reference into the parameters (a group, a group member, a partial parameter path).
 * Calls (sema_call.c) build registry ops, built-ins and casts; functions are inlined and
 * graphs called from programs (sema_fn.c); statements and loops are in sema_stmt.c.
 *
 * Two evaluation modes: CONST (shapes, counts, attributes, `int` arguments: names are
 * config keys, lets and local integers; no IR is built) and TENSOR (everything else).
 * An error is reported once and yields SV_ERROR, which every consumer passes on
 * silently, so one mistake does not cascade into many messages.
 */
#ifndef H3_FRONTEND_SEMA_H
#define H3_FRONTEND_SEMA_H

#include "ast.h"
#include "h3/frontend.h"
#include "h3/ir.h"
#include "h3/op_registry.h"
#include "h3/strmap.h"

/* Most ops one compile may build (after inlining): a runaway program stops with an error. */
#define SEMA_MAX_OPS 400000
/* Deepest chain of inlined function calls. */
#define SEMA_MAX_INLINE 64

typedef enum {
  SV_ERROR,  /* already reported */
  SV_VOID,   /* no value */
  SV_INT,    /* i */
  SV_FLOAT,  /* f */
  SV_STRING, /* s */
  SV_DTYPE,  /* dt */
  SV_LIST,   /* elems[n] (numbers) */
  SV_TENSOR, /* v */
  SV_TUPLE,  /* elems[n] (tensors), names[n] or NULL */
  SV_GROUP,  /* group */
  SV_MEMBER, /* group, path, idx/off, inner */
  SV_PREFIX, /* path: the start of parameter names */
} sv_kind;

struct sgroup;

typedef struct sval {
  sv_kind kind;
  int64_t i;
  double f;
  const char *s;
  h3_dtype dt;
  h3_value *v;
  struct sval *elems;
  int n;
  const char **names;
  struct sgroup *group;
  const char *path; /* MEMBER: field path read so far ("" = the member); PREFIX */
  bool whole;       /* MEMBER of the whole group (stacked parameters), no index */
  h3_value *idx;    /* MEMBER index value (NULL: the constant `off`) */
  int64_t off;
  bool has_inner; /* MEMBER: an inner-array index was given */
  h3_value *inner_idx;
  int64_t inner_off;
} sval;

/* A field of a parameter group. */
typedef struct {
  const char *path;     /* "mlp.experts.down_proj.weight" (no inner array) */
  const char *inner_at; /* "mlp.experts" when the field has an inner array, else NULL */
  h3_param *param;      /* stacked: [count, (inner,) dims...] */
  int64_t shift;        /* member i is row i + shift of param (groups sharing a path) */
} sfield;

typedef struct sgroup {
  const char *name; /* the name in code: alias or path */
  const char *path; /* declared path */
  int64_t first, count;
  sfield *fields;
  int n_fields;
  h3_span span;
} sgroup;

/* S->names: parameters, groups and the prefixes of dotted parameter paths. */
typedef struct {
  h3_param *param;
  sgroup *group;
  bool prefix;
  h3_span span;
} gname;

/* S->consts: config keys and lets. */
typedef struct {
  bool is_float;
  int64_t i;
  double f;
  bool is_let;
  h3_span span;
} gconst;

/* S->calls: functions, graphs and programs. */
typedef struct {
  ast_item *item;
  int order; /* position among the file's items */
  bool broken;     /* an error was reported in its body or signature */
  bool used;
  /* graphs and programs, once their signature is evaluated */
  h3_graph *graph;
  int n_in, n_out;
  h3_type *in_types, *out_types;
  const char **out_names;
} gcall;

typedef struct {
  const char *name;
  sval val;
} binding;

typedef struct sema {
  h3_diag *d;
  h3_arena *tmp; /* the parse arena: svals, temporary strings */
  h3_module *m;
  const char *file;
  const char *text;
  size_t len;
  h3_strmap names, consts, calls;
  h3_strmap weights; /* weight-name pattern -> h3_param of group fields */
  /* local bindings: a stack; lookups see [frame, n) */
  binding *env;
  int n_env, cap_env, frame;
  h3_builder b;
  h3_graph *graph;     /* the graph being built, NULL at top level */
  bool in_program;
  int cur_order;       /* order of the item being compiled */
  int inline_depth;
  int64_t ops_left;
  bool budget_reported;
  bool oom_reported;
  bool check_failed; /* a `check` item failed: the items after it are not compiled */
  /* the chosen config, after the overrides */
  int n_config;
  const char **config_keys;
  int64_t *config_vals;
} sema;

/* Checks the parsed file and builds its module (NULL after any error, all in d). tmp is
 * the parse arena (it holds f); text/len the source, for snippets in messages. */
h3_module *sema_run(h3_diag *d, h3_arena *tmp, const char *file, const char *text, size_t len,
                    ast_file *f, const h3_frontend_options *opt);

/* ---- sema.c ---- */
void sema_oom(sema *S, h3_span sp);
/* Source text of a one-line span (arena copy), for messages. */
const char *sema_span_text(sema *S, h3_span sp);
/* Local bindings. */
bool sema_bind(sema *S, const char *name, sval v);
binding *sema_find_local(sema *S, const char *name);
/* Charges one unit against SEMA_MAX_OPS; false (error reported once) when exhausted. */
bool sema_charge(sema *S, h3_span sp);

/* ---- suggest.c ---- */
typedef struct {
  const char *want;
  const char *best;
  int dist;
} suggest_t;
void suggest_init(suggest_t *g, const char *want);
void suggest_try(suggest_t *g, const char *cand);
/* "did you mean 'x'?" in the arena, or NULL when nothing is close. */
const char *suggest_hint(h3_arena *a, const suggest_t *g);
/* The nearest of every name visible here (locals, globals, ops, built-ins, dtypes). */
const char *sema_suggest_name(sema *S, const char *name, bool konst);

/* ---- sema_params.c ---- */
void sema_param(sema *S, ast_item *it);
void sema_params(sema *S, ast_item *it);
/* Evaluates a tensor type (dims in CONST mode). false after an error. */
bool sema_eval_type(sema *S, const ast_type *t, h3_type *out);
/* Whether t passes h3_type_fits; else reports the tensor as too large at span. */
bool sema_type_fits(sema *S, const h3_type *t, h3_span span);
/* Finds a field of a group by path; NULL when none. */
sfield *sema_group_field(sgroup *g, const char *path);
/* True when some field path of g starts with `path.` or has its inner array at path. */
bool sema_group_has_prefix(sgroup *g, const char *path);

/* ---- sema_expr.c ---- */
sval sema_eval(sema *S, ast_expr *e, bool konst);
/* Integer in CONST mode; false after an error. */
bool sema_int(sema *S, ast_expr *e, int64_t *out);
sval sv_error(void);
sval sv_int(int64_t i);
sval sv_float(double f);
sval sv_tensor(h3_value *v);
bool sv_is_num(const sval *v);
double sv_num(const sval *v);
/* Words for a value in messages: "an integer (3)", "a tensor bf16[4, 8]", "a group". */
const char *sv_describe(sema *S, const sval *v);
/* Numeric folding with overflow and division checks (CONST arithmetic rules). */
sval sema_fold(sema *S, char op, sval a, sval b, h3_span sp);
/* A rank-0 constant tensor of dtype dt. NULL after an error. */
h3_value *sema_const_scalar(sema *S, double value, h3_dtype dt, h3_span sp);
/* index(x, idx) {offset}; idx NULL: the constant index `off`. NULL after an error. */
h3_value *sema_index_op(sema *S, h3_value *x, h3_value *idx, int64_t off, h3_span sp);
/* Builds one op through the registry at span sp; NULL after an error (reported). */
h3_op *sema_build(sema *S, h3_opcode code, int n, h3_value **operands, int n_attrs,
                  const h3_attr *attrs, h3_span sp);

/* ---- sema_call.c ---- */
sval sema_call(sema *S, ast_expr *e, bool konst);

/* ---- sema_fn.c ---- */
sval sema_inline(sema *S, gcall *g, ast_expr *call);
sval sema_graph_call(sema *S, gcall *g, ast_expr *call);
/* Builds a graph or program from its item. */
void sema_graph(sema *S, gcall *g);

/* ---- sema_stmt.c ---- */
/* Runs a body; returns its final `return` statement (NULL after an error: reported,
 * including a missing return, at `end`). `what` names the body in messages. */
ast_stmt *sema_body(sema *S, ast_stmt *body, h3_span end, const char *what);
/* Evaluates the values of a return statement, splicing tuples; the array is in S->tmp.
 * Returns the count, or -1 after an error. */
int sema_return_values(sema *S, ast_stmt *ret, h3_value ***out);

#endif
