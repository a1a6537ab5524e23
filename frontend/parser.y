/* parser.y: the grammar of the h3 graph language (docs/language.md), building the AST.
 *
 * Pure, with locations (h3_span), LALR(1) with no conflicts (%expect 0) and LAC so the
 * expected-token sets of syntax errors are exact. Syntax errors are rewritten into plain
 * words ("expected ')' before 'x'"). Recovery: a bad top-level item is skipped up to the
 * next line that starts with an item keyword; a bad statement, config entry or parameter
 * field up to the next line start (or '}'), so one run reports several errors.
 * Expression trees deeper than AST_MAX_DEPTH are refused (recursion in sema is bounded).
 */
%define api.pure full
%define api.prefix {h3yy}
%define api.location.type {h3_span}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%lex-param {void *scanner}
%parse-param {void *scanner} {h3_parse_ctx *ctx}

%code requires {
#include "parse.h"
}

%code {
#include <string.h>

int h3yylex(H3YYSTYPE *lval, h3_span *lloc, void *scanner);
static void h3yyerror(h3_span *loc, void *scanner, h3_parse_ctx *ctx, const char *msg);

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                        \
  do {                                                                     \
    if (N) {                                                               \
      (Cur) = ast_span_join(YYRHSLOC(Rhs, 1), YYRHSLOC(Rhs, N));           \
    } else {                                                               \
      (Cur) = YYRHSLOC(Rhs, 0);                                            \
      (Cur).line = (Cur).end_line;                                         \
      (Cur).col = (Cur).end_col;                                           \
    }                                                                      \
  } while (0)

/* Out of memory in an action: report once and stop. */
#define NEED(x)                        \
  do {                                 \
    if (!(x)) {                        \
      h3_parse_oom(ctx, yylloc);       \
      YYABORT;                         \
    }                                  \
  } while (0)

#define NEW(T) ((T *)h3_arena_alloc(ctx->arena, sizeof(T)))

static ast_expr *deep_check(h3_parse_ctx *ctx, ast_expr *e);
static ast_part *part_new(h3_parse_ctx *ctx, const char *name, ast_expr *count, h3_span sp);

/* Error recovery of a list (items: item = true): the offending token is dropped with the
 * rest of its line unless it starts a line (or closes a block). */
#define RECOVER(is_item)                                                          \
  do {                                                                            \
    if (yychar != H3YYEMPTY && yychar != H3YYEOF && yychar != '}' &&               \
        !(ctx->last_bol && (!(is_item) || is_item_keyword(yychar)))) {            \
      yyclearin;                                                                  \
      ctx->skip_line = true;                                                      \
      ctx->skip_item = (is_item);                                                 \
      yyerrok;                                                                    \
    }                                                                             \
  } while (0)
static int is_item_keyword(int tok);
}

%initial-action {
  @$ = (h3_span){ctx->file, 1, 1, 1, 1};
}

%union {
  int64_t ival;
  double fval;
  const char *str;
  ast_expr *expr;
  ast_arg *arg;
  ast_part *part;
  ast_type type;
  ast_stmt *stmt;
  ast_name *name;
  ast_decl *decl;
  ast_init *init;
  ast_field *field;
  ast_item *item;
}

%token MODEL "'model'" CONFIG "'config'" LET "'let'" PARAM "'param'" PARAMS "'params'"
%token AS "'as'" INIT "'init'" FN "'fn'" GRAPH "'graph'" PROGRAM "'program'"
%token REPEAT "'repeat'" FOR "'for'" IN "'in'" RETURN "'return'"
%token ARROW "'->'" DOTDOT "'..'"
%token CHECK "'check'" LE "'<='" GE "'>='" EQ "'=='" NE "'!='"
%token <str> IDENT "a name"
%token <str> STRING "a string"
%token <ival> INT "an integer"
%token <fval> FLOAT "a number"

%left '+' '-'
%left '*' '/' '%'
%precedence UMINUS

%type <item> items item
%type <arg> entries entry args_opt args arg exprs exprs_opt dims_opt
%type <field> fields field
%type <part> fpath gpath
%type <str> pname alias_opt
%type <type> type
%type <init> init_opt
%type <decl> decls_opt decls decl results rlist result
%type <stmt> stmts stmt block
%type <name> names
%type <expr> expr postfix primary
%type <ival> compare

%%

file: items { ctx->out.items = AST_REVERSE(ast_item, $1); }
    ;

items: %empty            { $$ = NULL; }
     | items item        { $$ = $1; if ($2) { $2->next = $1; $$ = $2; } }
     | items ';'         { $$ = $1; }
     | items error       { $$ = $1; RECOVER(true); }
     ;

item: MODEL IDENT {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_MODEL; $$->name = $2; $$->span = @2;
      }
    | CONFIG IDENT '{' entries '}' {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_CONFIG; $$->name = $2; $$->span = @2;
        $$->entries = AST_REVERSE(ast_arg, $4);
      }
    | LET IDENT '=' expr {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_LET; $$->name = $2; $$->span = @2; $$->value = $4;
      }
    | CHECK expr compare expr ',' STRING {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_CHECK; $$->span = ast_span_join($2->span, $4->span);
        $$->value = $2; $$->rhs = $4; $$->compare = (int)$3; $$->message = $6;
      }
    | PARAM field {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_PARAM; $$->span = $2->span; $$->fields = $2;
      }
    | PARAMS gpath '[' expr ']' alias_opt '{' fields '}' {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_PARAMS; $$->span = @2; $$->path = AST_REVERSE(ast_part, $2);
        $$->count = $4; $$->alias = $6; $$->alias_span = @6;
        $$->fields = AST_REVERSE(ast_field, $8);
      }
    | PARAMS gpath '[' expr DOTDOT expr ']' alias_opt '{' fields '}' {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_PARAMS; $$->span = @2; $$->path = AST_REVERSE(ast_part, $2);
        $$->first = $4; $$->count = $6; $$->alias = $8; $$->alias_span = @8;
        $$->fields = AST_REVERSE(ast_field, $10);
      }
    | FN IDENT '(' decls_opt ')' ARROW results block {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_FN; $$->name = $2; $$->span = @2; $$->args = $4;
        $$->results = $7; $$->results_paren = ctx->results_paren;
        $$->body = $8; $$->end_span = ctx->block_end;
      }
    | GRAPH IDENT '(' decls_opt ')' ARROW results block {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_GRAPH; $$->name = $2; $$->span = @2; $$->args = $4;
        $$->results = $7; $$->results_paren = ctx->results_paren;
        $$->body = $8; $$->end_span = ctx->block_end;
      }
    | PROGRAM IDENT '(' decls_opt ')' ARROW results block {
        NEED($$ = NEW(ast_item));
        $$->kind = ITEM_PROGRAM; $$->name = $2; $$->span = @2; $$->args = $4;
        $$->results = $7; $$->results_paren = ctx->results_paren;
        $$->body = $8; $$->end_span = ctx->block_end;
      }
    ;

compare: '<'             { $$ = '<'; }
       | '>'             { $$ = '>'; }
       | LE              { $$ = 'l'; }
       | GE              { $$ = 'g'; }
       | EQ              { $$ = '='; }
       | NE              { $$ = '!'; }
       ;

entries: %empty          { $$ = NULL; }
       | entries entry   { $$ = $2; $2->next = $1; }
       | entries ','     { $$ = $1; }
       | entries ';'     { $$ = $1; }
       | entries error   { $$ = $1; RECOVER(false); }
       ;

entry: IDENT '=' expr    { NEED($$ = ast_arg_new(ctx->arena, $1, @1, $3)); }
     ;

alias_opt: %empty        { $$ = NULL; }
         | AS IDENT      { $$ = $2; }
         ;

fields: %empty           { $$ = NULL; }
      | fields field     { $$ = $2; $2->next = $1; }
      | fields ';'       { $$ = $1; }
      | fields error     { $$ = $1; RECOVER(false); }
      ;

field: fpath ':' type init_opt {
         NEED($$ = NEW(ast_field));
         $$->path = AST_REVERSE(ast_part, $1); $$->span = @1; $$->type = $3; $$->init = $4;
       }
     ;

/* parts are built in reverse */
fpath: IDENT                 { NEED($$ = part_new(ctx, $1, NULL, @1)); }
     | fpath '.' pname       { NEED($$ = part_new(ctx, $3, NULL, @3)); $$->next = $1; }
     | fpath '[' expr ']'    { NEED($$ = part_new(ctx, NULL, $3, @$)); $$->next = $1; }
     ;

gpath: IDENT                 { NEED($$ = part_new(ctx, $1, NULL, @1)); }
     | gpath '.' pname       { NEED($$ = part_new(ctx, $3, NULL, @3)); $$->next = $1; }
     ;

/* a part of a dotted path after '.': a name, a number or a keyword */
pname: IDENT       { $$ = $1; }
     | INT         { NEED($$ = h3_arena_printf(ctx->arena, "%lld", (long long)$1)); }
     | MODEL       { $$ = "model"; }
     | CONFIG      { $$ = "config"; }
     | LET         { $$ = "let"; }
     | CHECK       { $$ = "check"; }
     | PARAM       { $$ = "param"; }
     | PARAMS      { $$ = "params"; }
     | AS          { $$ = "as"; }
     | INIT        { $$ = "init"; }
     | FN          { $$ = "fn"; }
     | GRAPH       { $$ = "graph"; }
     | PROGRAM     { $$ = "program"; }
     | REPEAT      { $$ = "repeat"; }
     | FOR         { $$ = "for"; }
     | IN          { $$ = "in"; }
     | RETURN      { $$ = "return"; }
     ;

type: gpath {
        NEED($$.name = ast_path_text(ctx->arena, AST_REVERSE(ast_part, $1)));
        $$.span = @1; $$.has_dims = false; $$.dims = NULL; $$.n_dims = 0;
      }
    | gpath '[' dims_opt ']' {
        NEED($$.name = ast_path_text(ctx->arena, AST_REVERSE(ast_part, $1)));
        $$.span = @$; $$.has_dims = true; $$.dims = $3; $$.n_dims = ast_count_args($3);
      }
    ;

dims_opt: %empty  { $$ = NULL; }
        | exprs   { $$ = AST_REVERSE(ast_arg, $1); }
        ;

init_opt: %empty  { $$ = NULL; }
        | INIT IDENT '(' args_opt ')' {
            NEED($$ = NEW(ast_init));
            $$->name = $2; $$->span = ast_span_join(@2, @5); $$->args = $4;
          }
        ;

decls_opt: %empty { $$ = NULL; }
         | decls  { $$ = AST_REVERSE(ast_decl, $1); }
         ;

decls: decl              { $$ = $1; }
     | decls ',' decl    { $$ = $3; $3->next = $1; }
     ;

decl: IDENT ':' type {
        NEED($$ = NEW(ast_decl)); $$->name = $1; $$->span = @1; $$->type = $3;
      }
    ;

results: type {
           NEED($$ = NEW(ast_decl)); $$->span = @1; $$->type = $1;
           ctx->results_paren = false;
         }
       | '(' rlist ')' { $$ = AST_REVERSE(ast_decl, $2); ctx->results_paren = true; }
       ;

rlist: result            { $$ = $1; }
     | rlist ',' result  { $$ = $3; $3->next = $1; }
     ;

result: type {
          NEED($$ = NEW(ast_decl)); $$->span = @1; $$->type = $1;
        }
      | IDENT ':' type {
          NEED($$ = NEW(ast_decl)); $$->name = $1; $$->span = @1; $$->type = $3;
        }
      ;

block: '{' stmts '}'  { $$ = AST_REVERSE(ast_stmt, $2); ctx->block_end = @3; }
     ;

stmts: %empty         { $$ = NULL; }
     | stmts stmt     { $$ = $2; $2->next = $1; }
     | stmts ';'      { $$ = $1; }
     | stmts error    { $$ = $1; RECOVER(false); }
     ;

stmt: names '=' expr {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_ASSIGN; $$->span = @$;
        $$->names = AST_REVERSE(ast_name, $1);
        for (ast_name *n = $$->names; n; n = n->next) $$->n_names++;
        $$->value = $3;
      }
    | REPEAT IDENT IN expr block {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_LOOP; $$->span = ast_span_join(@1, @4); $$->var = $2;
        $$->var_span = @2; $$->value = $4; $$->body = $5; $$->end_span = ctx->block_end;
      }
    | FOR IDENT IN expr block {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_LOOP; $$->is_for = true; $$->span = ast_span_join(@1, @4);
        $$->var = $2; $$->var_span = @2; $$->value = $4; $$->body = $5;
        $$->end_span = ctx->block_end;
      }
    | IDENT ':' REPEAT IDENT IN expr block {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_LOOP; $$->span = ast_span_join(@1, @6); $$->label = $1;
        $$->var = $4; $$->var_span = @4; $$->value = $6; $$->body = $7;
        $$->end_span = ctx->block_end;
      }
    | IDENT ':' FOR IDENT IN expr block {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_LOOP; $$->is_for = true; $$->span = ast_span_join(@1, @6);
        $$->label = $1; $$->var = $4; $$->var_span = @4; $$->value = $6; $$->body = $7;
        $$->end_span = ctx->block_end;
      }
    | RETURN exprs {
        NEED($$ = NEW(ast_stmt));
        $$->kind = STMT_RETURN; $$->span = @$;
        $$->values = AST_REVERSE(ast_arg, $2); $$->n_values = ast_count_args($$->values);
      }
    ;

names: IDENT {
         NEED($$ = NEW(ast_name)); $$->name = $1; $$->span = @1;
       }
     | names ',' IDENT {
         NEED($$ = NEW(ast_name)); $$->name = $3; $$->span = @3; $$->next = $1;
       }
     ;

exprs: expr {
         NEED($$ = ast_arg_new(ctx->arena, NULL, @1, $1));
       }
     | exprs ',' expr {
         NEED($$ = ast_arg_new(ctx->arena, NULL, @3, $3)); $$->next = $1;
       }
     ;

exprs_opt: %empty  { $$ = NULL; }
         | exprs   { $$ = AST_REVERSE(ast_arg, $1); }
         ;

expr: expr '+' expr            { NEED($$ = deep_check(ctx, ast_binary(ctx->arena, '+', $1, $3))); }
    | expr '-' expr            { NEED($$ = deep_check(ctx, ast_binary(ctx->arena, '-', $1, $3))); }
    | expr '*' expr            { NEED($$ = deep_check(ctx, ast_binary(ctx->arena, '*', $1, $3))); }
    | expr '/' expr            { NEED($$ = deep_check(ctx, ast_binary(ctx->arena, '/', $1, $3))); }
    | expr '%' expr            { NEED($$ = deep_check(ctx, ast_binary(ctx->arena, '%', $1, $3))); }
    | '-' expr %prec UMINUS    { NEED($$ = deep_check(ctx, ast_unary_neg(ctx->arena, @1, $2))); }
    | postfix                  { $$ = $1; }
    ;

postfix: primary                 { $$ = $1; }
       | postfix '.' pname       { NEED($$ = deep_check(ctx, ast_member(ctx->arena, $1, $3, @3))); }
       | postfix '[' expr ']'    { NEED($$ = deep_check(ctx, ast_index(ctx->arena, $1, $3, @4))); }
       ;

primary: INT {
           NEED($$ = ast_expr_new(ctx->arena, AST_INT, @1)); $$->ival = $1;
         }
       | FLOAT {
           NEED($$ = ast_expr_new(ctx->arena, AST_FLOAT, @1)); $$->fval = $1;
         }
       | STRING {
           NEED($$ = ast_expr_new(ctx->arena, AST_STRING, @1)); $$->str = $1;
         }
       | IDENT {
           NEED($$ = ast_expr_new(ctx->arena, AST_NAME, @1)); $$->str = $1;
         }
       | IDENT '(' args_opt ')' {
           NEED($$ = deep_check(ctx, ast_call(ctx->arena, $1, @1, $3, @4)));
         }
       | '(' expr ')' {
           $$ = $2; $$->span = @$;
         }
       | '[' exprs_opt ']' {
           NEED($$ = deep_check(ctx, ast_list(ctx->arena, @$, $2)));
         }
       ;

args_opt: %empty  { $$ = NULL; }
        | args    { $$ = AST_REVERSE(ast_arg, $1); }
        ;

args: arg           { $$ = $1; }
    | args ',' arg  { $$ = $3; $3->next = $1; }
    ;

arg: expr            { NEED($$ = ast_arg_new(ctx->arena, NULL, @1, $1)); }
   | IDENT '=' expr  { NEED($$ = ast_arg_new(ctx->arena, $1, @1, $3)); }
   ;

%%

static int is_item_keyword(int tok) {
  switch (tok) {
  case MODEL: case CONFIG: case LET: case PARAM: case PARAMS: case FN: case GRAPH:
  case PROGRAM: case CHECK:
    return 1;
  default:
    return 0;
  }
}

static ast_part *part_new(h3_parse_ctx *ctx, const char *name, ast_expr *count, h3_span sp) {
  ast_part *p = NEW(ast_part);
  if (!p) return NULL;
  p->name = name;
  p->count = count;
  p->span = sp;
  return p;
}

/* Refuses (once per file) an expression nested deeper than AST_MAX_DEPTH, replacing it
 * with an error node. NULL only when e is NULL (out of memory). */
static ast_expr *deep_check(h3_parse_ctx *ctx, ast_expr *e) {
  if (!e || e->depth <= AST_MAX_DEPTH) return e;
  if (!ctx->depth_reported)
    h3_diag_error(ctx->d, e->span, "split it into several statements",
                  "expression nested too deeply (more than %d levels)", AST_MAX_DEPTH);
  ctx->depth_reported = true;
  ast_expr *x = ast_expr_new(ctx->arena, AST_ERROR, e->span);
  return x;
}

static void h3yyerror(h3_span *loc, void *scanner, h3_parse_ctx *ctx, const char *msg) {
  (void)scanner;
  if (ctx->stop) return;
  if (strstr(msg, "exhausted"))
    h3_diag_error(ctx->d, *loc, "split the code into smaller parts", "the source nests too deeply");
  else
    h3_diag_error(ctx->d, *loc, NULL, "%s", msg);
  ctx->stop = true;
}

/* Tokens that can continue an expression; left out of "expected ..." lists when other
 * tokens are expected too. */
static int is_continuation(yysymbol_kind_t k) {
  const char *s = yysymbol_name(k);
  return strlen(s) == 3 && s[0] == '\'' && strchr("+-*/%.[(", s[1]);
}

/* The words for a token: "')'", "a name", "end of file". */
static void symbol_words(yysymbol_kind_t k, char *buf, size_t n) {
  if (k == YYSYMBOL_YYEOF) {
    snprintf(buf, n, "end of file");
    return;
  }
  const char *s = yysymbol_name(k);
  if (s[0] == '"') { /* "'->'" or "a name": drop bison's quotes */
    size_t len = strlen(s);
    snprintf(buf, n, "%.*s", (int)(len >= 2 ? len - 2 : 0), s + 1);
  } else {
    snprintf(buf, n, "%s", s);
  }
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, void *scanner, h3_parse_ctx *ctx) {
  (void)scanner;
  if (ctx->stop) return 0;
  enum { MAXE = 32 };
  yysymbol_kind_t exp[MAXE];
  int n = yypcontext_expected_tokens(yyctx, exp, MAXE);
  if (n < 0) n = 0;
  const h3_span *loc = yypcontext_location(yyctx);
  yysymbol_kind_t got = yypcontext_token(yyctx);
  /* a lexical error on this line (or just before it) explains this one */
  if (loc->line == ctx->lex_error_line ||
      (loc->line == ctx->lex_error_line + 1 && (ctx->last_bol || got == YYSYMBOL_YYEOF)))
    return 0;
  char gotw[80];
  if (got == YYSYMBOL_YYEOF)
    snprintf(gotw, sizeof gotw, "end of file");
  else
    snprintf(gotw, sizeof gotw, "'%s'", ctx->tok);
  /* An expression is expected when a name, a number and '(' all are. */
  int has_name = 0, has_int = 0, has_paren = 0, keep = 0;
  for (int i = 0; i < n; i++) {
    if (exp[i] == YYSYMBOL_IDENT) has_name = 1;
    if (exp[i] == YYSYMBOL_INT) has_int = 1;
    if (strcmp(yysymbol_name(exp[i]), "'('") == 0) has_paren = 1;
    if (!is_continuation(exp[i])) keep++;
  }
  if (has_name && has_int && has_paren) {
    h3_diag_error(ctx->d, *loc, "an expression is a name, a number, a call or two expressions joined by an operator",
                  "expected an expression before %s", gotw);
    return 0;
  }
  /* drop the operators that could continue the expression just read */
  int m = 0;
  for (int i = 0; i < n; i++)
    if (keep == 0 || !is_continuation(exp[i])) exp[m++] = exp[i];
  if (got == YYSYMBOL_YYEOF) {
    for (int i = 0; i < m; i++)
      if (strcmp(yysymbol_name(exp[i]), "'}'") == 0) {
        h3_diag_error(ctx->d, *loc, "a block opened above is not closed", "expected '}' before end of file");
        return 0;
      }
  }
  if (m == 0 || m > 3) {
    h3_diag_error(ctx->d, *loc, "docs/language.md lists the statements and items", "unexpected %s", gotw);
    return 0;
  }
  char words[3][48], msg[200];
  for (int i = 0; i < m; i++) symbol_words(exp[i], words[i], sizeof words[i]);
  if (m == 1)
    snprintf(msg, sizeof msg, "%s", words[0]);
  else if (m == 2)
    snprintf(msg, sizeof msg, "%s or %s", words[0], words[1]);
  else
    snprintf(msg, sizeof msg, "%s, %s or %s", words[0], words[1], words[2]);
  /* the next line's first token: the statement above is what is incomplete */
  if ((ctx->last_bol || got == YYSYMBOL_YYEOF) && ctx->prev_text[0] && got != YYSYMBOL_YYEOF)
    h3_diag_error(ctx->d, ctx->prev_span, "docs/language.md gives the grammar", "expected %s after '%s'", msg,
                  ctx->prev_text);
  else
    h3_diag_error(ctx->d, *loc, "docs/language.md gives the grammar", "expected %s before %s", msg, gotw);
  return 0;
}
