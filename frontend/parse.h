/* parse.h: the state shared by the scanner (lexer.l) and the parser (parser.y), and the
 * entry point that runs them over one source text (private to frontend/).
 *
 * Positions are 1-based lines and byte columns; spans are half-open (end_col exclusive).
 * The scanner tracks whether a token is the first on its line: after a syntax error the
 * parser drops the rest of the offending line (skip_line) and resumes at the next line
 * start, so one run reports the errors of several statements. Bracket nesting deeper than
 * PARSE_MAX_NEST stops the parse with an error: no input can exhaust the C stack.
 */
#ifndef H3_FRONTEND_PARSE_H
#define H3_FRONTEND_PARSE_H

#include "ast.h"

#include <stdbool.h>

#define PARSE_MAX_NEST 128

typedef struct h3_parse_ctx {
  h3_arena *arena; /* the AST and its strings */
  h3_diag *d;
  const char *file; /* arena copy */
  ast_file out;
  /* scanner */
  int line, col;     /* position of the next byte */
  int nest;          /* open ( [ { */
  int prev_tok;      /* the previous token returned (0 at the start) */
  bool bol;          /* no token yet on the current line */
  bool last_bol;     /* the last token returned started its line */
  bool skip_line;    /* recovering: drop tokens until the next line start or '}' */
  bool skip_item;    /* ... and, at the top level, until a line that starts an item */
  bool stop;         /* a fatal error (nesting, memory) ended the parse */
  char tok[48];      /* text of the last token returned, for messages */
  h3_span tok_span;
  char prev_text[48]; /* ... and of the one before it */
  h3_span prev_span;
  int lex_error_line; /* last line with a lexical error: its syntax errors are not shown */
  /* parser */
  bool depth_reported;
  bool results_paren; /* the last result list read was written `(...)` */
  h3_span block_end;  /* the '}' of the last block read */
} h3_parse_ctx;

/* Parses text into ctx->out. Errors go to ctx->d; returns H3_OK when none was reported
 * by the scanner or the parser. */
h3_status h3_parse_text(h3_parse_ctx *ctx, const char *text, size_t len);

/* Reports an out-of-memory error once and stops the parse. */
void h3_parse_oom(h3_parse_ctx *ctx, h3_span span);

#endif
