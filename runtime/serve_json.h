/* serve_json.h: a strict JSON (RFC 8259) scanner over one line of text, and JSON string
 * output: what the request reader and the results writer share (internal to runtime/;
 * the tests use it to read results back).
 *
 * The scanner walks the text with a cursor; the caller drives it (object, key, value ...),
 * so a field is converted where it stands, in one pass, in linear time. The first error
 * stops it: it keeps one message, a hint and the byte offset where the error is; every
 * later call fails at once. Strict means: no comments, no trailing commas, no single
 * quotes, no NaN / Infinity, no leading zeros or '+', strings in valid UTF-8 without raw
 * control characters and with valid escapes (surrogates only in pairs), nesting at most
 * H3_JSON_MAX_DEPTH. Numbers are checked for syntax; their values are the caller's to
 * convert (h3_json_num_int, h3_json_num_double).
 */
#ifndef H3_SERVE_JSON_H
#define H3_SERVE_JSON_H

#include "h3/support.h"

#include <stdbool.h>
#include <stdint.h>

#define H3_JSON_MAX_DEPTH 64

typedef enum {
  H3_JSON_BAD, /* no JSON value starts here */
  H3_JSON_STRING,
  H3_JSON_NUMBER,
  H3_JSON_ARRAY,
  H3_JSON_OBJECT,
  H3_JSON_TRUE,
  H3_JSON_FALSE,
  H3_JSON_NULL
} h3_json_kind;

typedef struct {
  const char *s; /* the text (not NUL-terminated) */
  size_t n;
  size_t pos;     /* the next byte */
  bool failed;    /* an error was recorded */
  size_t err_pos; /* its byte offset */
  char msg[256];  /* the error */
  char hint[256]; /* its hint; "" when none */
} h3_json;

/* A number token: text s[start, end); integer when it has no fraction and no exponent. */
typedef struct {
  size_t start, end;
  bool integer, negative;
} h3_json_num;

void h3_json_init(h3_json *j, const char *s, size_t n);
/* Records the first error at byte `pos` (later ones are dropped); returns H3_ERR. */
h3_status h3_json_fail(h3_json *j, size_t pos, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Skips white space (space, tab, CR, LF); true when the text ends there. */
bool h3_json_end(h3_json *j);
/* Skips white space; consumes `c` and returns true when it comes next. */
bool h3_json_eat(h3_json *j, char c);
/* Skips white space; the kind of the value starting there, by its first byte. */
h3_json_kind h3_json_peek(h3_json *j);
/* "a string", "an array", "an object", "true", "false", "null", "a number", "nothing". */
const char *h3_json_kind_name(h3_json_kind k);
/* The error for the value expected at the cursor: the line ended, or what stands there is
 * not JSON (with a hint for NaN, single quotes, Python's True ...). Returns H3_ERR. */
h3_status h3_json_fail_value(h3_json *j);

/* The string at the cursor; its decoded UTF-8 is appended to `out` (NULL: only checked). */
h3_status h3_json_string(h3_json *j, h3_strbuf *out);
/* The number at the cursor (syntax only). */
h3_status h3_json_number(h3_json *j, h3_json_num *num);
/* An integer token's value when it lies in [lo, hi]; false otherwise (also for a
 * fraction or an exponent). */
bool h3_json_num_int(const h3_json *j, const h3_json_num *num, int64_t lo, int64_t hi, int64_t *v);
/* A number token's value (correctly rounded); false when it overflows a double. */
bool h3_json_num_double(const h3_json *j, const h3_json_num *num, double *v);
/* After an array element or an object member: consumes ',' (*more = true) or `close`
 * (*more = false); anything else is an error. */
h3_status h3_json_next(h3_json *j, char close, bool *more);
/* Checks and skips any value at the cursor. */
h3_status h3_json_skip(h3_json *j);

/* Appends `s[0 .. n)` as a JSON string: quotes, escapes for '"', '\\' and control
 * characters (\n, \t ... where JSON has one, else \u00XX; also DEL), valid UTF-8 as it is,
 * each invalid byte as \ufffd. With max > 0 and a longer
 * string: its first `max` bytes (cut at a character) and "..." inside the quotes. */
void h3_json_quote(h3_strbuf *b, const char *s, size_t n, size_t max);
/* Length (1-4) of the valid UTF-8 character at p[0 .. avail), 0 when it is not one. */
size_t h3_utf8_char(const unsigned char *p, size_t avail);

#endif
