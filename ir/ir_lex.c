/* ir_lex.c: the tokenizer of the IR text form (ir_lex.h).
 *
 * Works on a byte range that need not be NUL-terminated; never reads past `end`.
 * Spans are 1-based line/col in bytes. Integers must fit int64; a number with '.',
 * an exponent, or the words inf / nan (optionally after '-') is a float.
 */
#include "ir_lex.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ir_lex_init(ir_lexer *lx, const char *file, const char *text, size_t len, h3_arena *arena) {
  lx->file = file;
  lx->p = text;
  lx->end = text + len;
  lx->line = 1;
  lx->line_start = text;
  lx->arena = arena;
}

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_name(int c) { return is_alpha(c) || is_digit(c) || c == '.'; }

static int peekc(const ir_lexer *lx, size_t k) {
  return lx->p + k < lx->end ? (unsigned char)lx->p[k] : -1;
}

static ir_tok make(ir_lexer *lx, ir_tok_kind kind, const char *start, const char *text) {
  ir_tok t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.text = text;
  t.span.file = lx->file;
  t.span.line = lx->line;
  t.span.col = (int)(start - lx->line_start) + 1;
  t.span.end_line = lx->line;
  t.span.end_col = (int)(lx->p - lx->line_start) + 1;
  return t;
}

static ir_tok error(ir_lexer *lx, const char *start, const char *msg) {
  if (lx->p == start && lx->p < lx->end) lx->p++; /* always make progress */
  return make(lx, TK_ERROR, start, msg);
}

static char *copy(ir_lexer *lx, const char *s, size_t n) { return h3_arena_strndup(lx->arena, s, n); }

static int hexval(int c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A quoted string starting at lx->p (the '"'); unescapes into the arena. */
static ir_tok lex_string(ir_lexer *lx, const char *start, ir_tok_kind kind) {
  lx->p++;
  h3_strbuf b;
  h3_strbuf_init(&b);
  const char *msg = NULL;
  for (;;) {
    int c = peekc(lx, 0);
    if (c < 0 || c == '\n') {
      msg = "unterminated string";
      break;
    }
    lx->p++;
    if (c == '"') break;
    if (c != '\\') {
      char ch = (char)c;
      h3_strbuf_appendn(&b, &ch, 1);
      continue;
    }
    int e = peekc(lx, 0);
    char ch;
    if (e == 'n') ch = '\n';
    else if (e == 't') ch = '\t';
    else if (e == 'r') ch = '\r';
    else if (e == '"' || e == '\\') ch = (char)e;
    else if (e == 'x' && hexval(peekc(lx, 1)) >= 0 && hexval(peekc(lx, 2)) >= 0) {
      ch = (char)(hexval(peekc(lx, 1)) * 16 + hexval(peekc(lx, 2)));
      lx->p += 2;
    } else {
      msg = "unknown escape in string (use \\\" \\\\ \\n \\t \\r or \\xHH)";
      break;
    }
    lx->p++;
    if (ch == '\0') {
      msg = "a string may not contain \\x00";
      break;
    }
    h3_strbuf_appendn(&b, &ch, 1);
  }
  if (!msg && b.oom) msg = "out of memory";
  char *text = msg ? NULL : copy(lx, b.data ? b.data : "", b.len);
  h3_strbuf_free(&b);
  if (msg) return error(lx, start, msg);
  if (!text) return error(lx, start, "out of memory");
  return make(lx, kind, start, text);
}

static ir_tok lex_number(ir_lexer *lx, const char *start) {
  const char *q = lx->p;
  if (*q == '-') q++;
  bool is_float = false;
  if (lx->end - q >= 3 && (memcmp(q, "inf", 3) == 0 || memcmp(q, "nan", 3) == 0) &&
      (lx->end - q == 3 || !is_name((unsigned char)q[3]))) {
    bool neg = *lx->p == '-';
    bool nan = q[0] == 'n';
    lx->p = q + 3;
    ir_tok t = make(lx, TK_FLOAT, start, nan ? "nan" : neg ? "-inf" : "inf");
    t.f = nan ? NAN : neg ? -INFINITY : INFINITY;
    return t;
  }
  while (q < lx->end && is_digit((unsigned char)*q)) q++;
  if (q < lx->end && *q == '.') {
    is_float = true;
    q++;
    while (q < lx->end && is_digit((unsigned char)*q)) q++;
  }
  if (q < lx->end && (*q == 'e' || *q == 'E')) {
    const char *r = q + 1;
    if (r < lx->end && (*r == '+' || *r == '-')) r++;
    if (r < lx->end && is_digit((unsigned char)*r)) {
      is_float = true;
      q = r;
      while (q < lx->end && is_digit((unsigned char)*q)) q++;
    }
  }
  size_t n = (size_t)(q - lx->p);
  char *text = copy(lx, lx->p, n);
  lx->p = q;
  if (!text) return error(lx, start, "out of memory");
  if (q < lx->end && is_alpha((unsigned char)*q)) return error(lx, start, "malformed number");
  ir_tok t = make(lx, is_float ? TK_FLOAT : TK_INT, start, text);
  errno = 0;
  if (is_float) {
    t.f = strtod(text, NULL);
    if (isinf(t.f)) return make(lx, TK_ERROR, start, "float does not fit in a double (write inf for infinity)");
  } else {
    t.i = strtoll(text, NULL, 10);
    if (errno == ERANGE) return make(lx, TK_ERROR, start, "integer does not fit in 64 bits");
  }
  return t;
}

ir_tok ir_lex_next(ir_lexer *lx) {
  for (;;) {
    int c = peekc(lx, 0);
    if (c == '\n') {
      lx->p++;
      lx->line++;
      lx->line_start = lx->p;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      lx->p++;
    } else if (c == '#') {
      while (lx->p < lx->end && *lx->p != '\n') lx->p++;
    } else {
      break;
    }
  }
  const char *start = lx->p;
  int c = peekc(lx, 0);
  if (c < 0) return make(lx, TK_EOF, start, "end of input");
  if (c == '%' || c == '@') {
    ir_tok_kind kind = c == '%' ? TK_VNAME : TK_GNAME;
    lx->p++;
    if (peekc(lx, 0) == '"') {
      ir_tok t = lex_string(lx, start, kind);
      if (t.kind == kind && !t.text[0]) return make(lx, TK_ERROR, start, "empty name");
      return t;
    }
    const char *q = lx->p;
    while (q < lx->end && is_name((unsigned char)*q)) q++;
    if (q == lx->p) return error(lx, start, c == '%' ? "expected a value name after '%'" : "expected a name after '@'");
    char *text = copy(lx, lx->p, (size_t)(q - lx->p));
    lx->p = q;
    return text ? make(lx, kind, start, text) : error(lx, start, "out of memory");
  }
  if (c == '"') return lex_string(lx, start, TK_STRING);
  if (is_digit(c) || (c == '-' && (is_digit(peekc(lx, 1)) || peekc(lx, 1) == 'i' || peekc(lx, 1) == 'n')))
    return lex_number(lx, start);
  if (c == '-' && peekc(lx, 1) == '>') {
    lx->p += 2;
    return make(lx, TK_ARROW, start, "->");
  }
  if (is_alpha(c)) {
    if ((c == 'i' || c == 'n') && lx->end - lx->p >= 3 &&
        (memcmp(lx->p, "inf", 3) == 0 || memcmp(lx->p, "nan", 3) == 0) &&
        (lx->end - lx->p == 3 || !is_name((unsigned char)lx->p[3])))
      return lex_number(lx, start);
    const char *q = lx->p;
    while (q < lx->end && (is_alpha((unsigned char)*q) || is_digit((unsigned char)*q))) q++;
    char *text = copy(lx, lx->p, (size_t)(q - lx->p));
    lx->p = q;
    return text ? make(lx, TK_IDENT, start, text) : error(lx, start, "out of memory");
  }
  if (c != 0 && strchr("(){}[],:=^", c)) {
    lx->p++;
    static const char punct[] = "(){}[],:=^";
    const char *at = strchr(punct, c);
    char *text = copy(lx, at, 1);
    return text ? make(lx, TK_PUNCT, start, text) : error(lx, start, "out of memory");
  }
  lx->p++;
  return make(lx, TK_ERROR, start, "unexpected character");
}
