/* ir_lex.h: the tokenizer of the IR text form (private to ir/; see docs/ir-text.md).
 * Tokens: identifiers, integers, floats (with '.', an exponent, inf or nan), strings,
 * %names and @names (bare [A-Za-z0-9_.]+ or quoted), punctuation ( ) { } [ ] , : = ^
 * and ->. '#' starts a comment to the end of the line. Every token has its span.
 */
#ifndef H3_IR_LEX_H
#define H3_IR_LEX_H

#include "ir_internal.h"

typedef enum {
  TK_EOF,
  TK_ERROR, /* a lexical error; text holds the message */
  TK_IDENT,
  TK_INT,
  TK_FLOAT,
  TK_STRING, /* text holds the unescaped bytes */
  TK_VNAME,  /* %name; text holds the name */
  TK_GNAME,  /* @name */
  TK_PUNCT,  /* one of ( ) { } [ ] , : = ^; text[0] is the char */
  TK_ARROW,  /* -> */
} ir_tok_kind;

typedef struct {
  ir_tok_kind kind;
  const char *text; /* NUL-terminated, in the lexer's arena */
  int64_t i;
  double f;
  h3_span span;
} ir_tok;

typedef struct {
  const char *file;
  const char *p, *end;
  int line;
  const char *line_start;
  h3_arena *arena;
} ir_lexer;

void ir_lex_init(ir_lexer *lx, const char *file, const char *text, size_t len, h3_arena *arena);
/* The next token; on out of memory a TK_ERROR token. */
ir_tok ir_lex_next(ir_lexer *lx);

#endif
