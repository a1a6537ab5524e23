/* serve_json.c: the strict one-line JSON scanner and the JSON string writer of
 * serve_json.h. Every function is linear in the bytes it passes; nothing reads past
 * s[n - 1]; values nest through h3_json_skip's recursion at most H3_JSON_MAX_DEPTH deep.
 * Numbers are converted with strtod (h3 never changes the C locale).
 */
#include "serve_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const LINE_HINT = "each request is one whole line of JSON";

void h3_json_init(h3_json *j, const char *s, size_t n) {
  memset(j, 0, sizeof *j);
  j->s = s;
  j->n = n;
}

h3_status h3_json_fail(h3_json *j, size_t pos, const char *hint, const char *fmt, ...) {
  if (j->failed) return H3_ERR;
  j->failed = true;
  j->err_pos = pos;
  snprintf(j->hint, sizeof j->hint, "%s", hint ? hint : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(j->msg, sizeof j->msg, fmt, ap);
  va_end(ap);
  return H3_ERR;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
/* A byte that may stand in a mistyped number or word: 1.2.3, 0x1F, 1e+, NaN. */
static bool is_numch(char c) { return is_word(c) || c == '.' || c == '+' || c == '-'; }

bool h3_json_end(h3_json *j) {
  while (j->pos < j->n && is_ws(j->s[j->pos])) j->pos++;
  return j->pos >= j->n;
}

bool h3_json_eat(h3_json *j, char c) {
  if (j->failed || h3_json_end(j) || j->s[j->pos] != c) return false;
  j->pos++;
  return true;
}

/* True when the literal `w` stands at the cursor as a whole word. */
static bool literal_at(const h3_json *j, const char *w) {
  size_t k = strlen(w);
  return j->n - j->pos >= k && memcmp(j->s + j->pos, w, k) == 0 &&
         (j->pos + k == j->n || !is_word(j->s[j->pos + k]));
}

h3_json_kind h3_json_peek(h3_json *j) {
  if (j->failed || h3_json_end(j)) return H3_JSON_BAD;
  char c = j->s[j->pos];
  if (c == '"') return H3_JSON_STRING;
  if (c == '-' || is_digit(c)) return H3_JSON_NUMBER;
  if (c == '[') return H3_JSON_ARRAY;
  if (c == '{') return H3_JSON_OBJECT;
  if (literal_at(j, "true")) return H3_JSON_TRUE;
  if (literal_at(j, "false")) return H3_JSON_FALSE;
  if (literal_at(j, "null")) return H3_JSON_NULL;
  return H3_JSON_BAD;
}

const char *h3_json_kind_name(h3_json_kind k) {
  static const char *const names[] = {"nothing",   "a string", "a number", "an array",
                                      "an object", "true",     "false",    "null"};
  return names[k];
}

/* The word at p (letters, digits, '_', '.', '+', '-'; at least one byte, at most 24). */
static int word_len(const h3_json *j, size_t p) {
  size_t e = p + 1;
  while (e < j->n && e - p < 24 && is_numch(j->s[e])) e++;
  return (int)(e - p);
}

h3_status h3_json_fail_value(h3_json *j) {
  if (j->failed) return H3_ERR;
  if (h3_json_end(j))
    return h3_json_fail(j, j->pos, LINE_HINT, "the line ends where a value should be");
  size_t p = j->pos;
  unsigned char c = (unsigned char)j->s[p];
  if (c == ']' || c == '}' || c == ',')
    return h3_json_fail(j, p, "JSON allows no trailing comma and no empty element",
                        "expected a value, found '%c'", c);
  if (c == '\'')
    return h3_json_fail(j, p, "JSON strings are in double quotes", "invalid value: a single quote");
  if (c < 0x20 || c >= 0x7f)
    return h3_json_fail(j, p, "save the file as UTF-8 text; only strings may hold non-ASCII",
                        "unexpected byte 0x%02X", c);
  const char *hint = "a value is a string, a number, an array, an object, true, false or null";
  int w = word_len(j, p);
  const char *s = j->s + p;
  if ((w >= 3 && strncmp(s, "NaN", 3) == 0) || (w >= 3 && strncasecmp(s, "inf", 3) == 0) ||
      (w >= 4 && strncasecmp(s, "+inf", 4) == 0))
    hint = "JSON has no NaN or Infinity";
  else if (c == '+' || c == '.')
    hint = "JSON numbers start with a digit or '-': 0.5, not .5 or +0.5";
  else if (strchr("TFN", c))
    hint = "JSON's literals are lowercase: true, false, null";
  return h3_json_fail(j, p, hint, "invalid value '%.*s'", w, s);
}

/* ---- strings ---------------------------------------------------------------------- */
size_t h3_utf8_char(const unsigned char *p, size_t avail) {
  if (avail == 0) return 0;
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0; /* no overlong forms */
    if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
  } else
    return 0;
  if (avail < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < len; k++)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return len;
}

static void put_utf8(h3_strbuf *out, unsigned cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | (cp >> 6));
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | (cp >> 12));
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  h3_strbuf_appendn(out, b, n);
}

/* The 4 hex digits of a \u escape at s[p + 2 ..]; -1 when they are not there. */
static long hex4(const h3_json *j, size_t p) {
  if (j->n - p < 6) return -1;
  long v = 0;
  for (size_t k = p + 2; k < p + 6; k++) {
    char c = j->s[k];
    int d = is_digit(c)              ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static const char *const ESCAPE_HINT =
    "JSON escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX";

/* The escape at s[p] == '\\'; its character appended to out; returns its length or 0. */
static size_t escape(h3_json *j, size_t p, h3_strbuf *out) {
  if (p + 1 >= j->n) return 0; /* the caller reports the unterminated string */
  char e = j->s[p + 1];
  const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
  const char *k = e ? strchr(from, e) : NULL;
  if (k) {
    if (out) h3_strbuf_appendn(out, to + (k - from), 1);
    return 2;
  }
  if (e != 'u') {
    if ((unsigned char)e < 0x20 || (unsigned char)e >= 0x7f)
      h3_json_fail(j, p, ESCAPE_HINT, "invalid escape: '\\' then byte 0x%02X", (unsigned char)e);
    else
      h3_json_fail(j, p, ESCAPE_HINT, "invalid escape '\\%c'", e);
    return 0;
  }
  long cp = hex4(j, p);
  if (cp < 0) {
    h3_json_fail(j, p, ESCAPE_HINT, "invalid \\u escape: it takes 4 hex digits");
    return 0;
  }
  size_t len = 6;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    long lo = j->n - p >= 8 && j->s[p + 6] == '\\' && j->s[p + 7] == 'u' ? hex4(j, p + 6) : -1;
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      len = 12;
    } else
      cp = -cp;
  } else if (cp >= 0xDC00 && cp <= 0xDFFF)
    cp = -cp;
  if (cp < 0) {
    h3_json_fail(j, p,
                 "a character above U+FFFF is a pair of escapes (\\uD800-\\uDBFF, then "
                 "\\uDC00-\\uDFFF), or plain UTF-8",
                 "invalid \\u escape: a lone surrogate \\u%04lX", -cp);
    return 0;
  }
  if (out) put_utf8(out, (unsigned)cp);
  return len;
}

h3_status h3_json_string(h3_json *j, h3_strbuf *out) {
  if (h3_json_peek(j) != H3_JSON_STRING) {
    if (!j->failed)
      h3_json_fail(j, j->pos, "keys are strings in double quotes",
                   "expected a string in double quotes");
    return H3_ERR;
  }
  size_t start = j->pos, p = start + 1;
  const unsigned char *s = (const unsigned char *)j->s;
  while (p < j->n) {
    unsigned char c = s[p];
    if (c == '"') {
      j->pos = p + 1;
      return H3_OK;
    }
    size_t len;
    if (c == '\\') {
      len = escape(j, p, out);
      if (j->failed) return H3_ERR;
      if (!len) break;
    } else if (c < 0x20) {
      return h3_json_fail(j, p, "write it as an escape: \\n, \\t, \\u00XX",
                          "control character U+%04X in a string", c);
    } else if (c < 0x80) {
      for (len = 1; p + len < j->n && s[p + len] >= 0x20 && s[p + len] < 0x80 &&
                    s[p + len] != '"' && s[p + len] != '\\';
           len++) {
      }
      if (out) h3_strbuf_appendn(out, j->s + p, len);
    } else {
      len = h3_utf8_char(s + p, j->n - p);
      if (!len)
        return h3_json_fail(j, p, "save the file as UTF-8",
                            "invalid UTF-8 in a string (byte 0x%02X)", c);
      if (out) h3_strbuf_appendn(out, j->s + p, len);
    }
    p += len;
  }
  return h3_json_fail(j, start, LINE_HINT, "the string is not closed on its line");
}

/* ---- numbers ---------------------------------------------------------------------- */
static size_t digits(const h3_json *j, size_t p) {
  while (p < j->n && is_digit(j->s[p])) p++;
  return p;
}

h3_status h3_json_number(h3_json *j, h3_json_num *num) {
  if (h3_json_peek(j) != H3_JSON_NUMBER) {
    if (!j->failed) h3_json_fail_value(j);
    return H3_ERR;
  }
  size_t start = j->pos, p = start;
  const char *hint = NULL;
  num->negative = j->s[p] == '-';
  num->integer = true;
  if (num->negative) p++;
  if (p < j->n && j->s[p] == '0') {
    p++;
    if (p < j->n && is_digit(j->s[p])) hint = "JSON numbers have no leading zeros";
  } else if (p < j->n && is_digit(j->s[p])) {
    p = digits(j, p);
  } else {
    hint = "a '-' is followed by digits";
  }
  if (!hint && p < j->n && j->s[p] == '.') {
    num->integer = false;
    size_t q = digits(j, p + 1);
    if (q == p + 1) hint = "a '.' has digits on both sides: 1.0, not 1.";
    p = q;
  }
  if (!hint && p < j->n && (j->s[p] == 'e' || j->s[p] == 'E')) {
    num->integer = false;
    size_t q = p + 1;
    if (q < j->n && (j->s[q] == '+' || j->s[q] == '-')) q++;
    size_t r = digits(j, q);
    if (r == q) hint = "an exponent has digits: 1e5, 2.5E-3";
    p = r;
  }
  if (!hint && p < j->n && is_numch(j->s[p]))
    hint = "JSON numbers are decimal: digits, an optional fraction and exponent";
  if (hint)
    return h3_json_fail(j, start, hint, "invalid number '%.*s'", word_len(j, start), j->s + start);
  num->start = start;
  num->end = p;
  j->pos = p;
  return H3_OK;
}

bool h3_json_num_int(const h3_json *j, const h3_json_num *num, int64_t lo, int64_t hi, int64_t *v) {
  if (!num->integer) return false;
  uint64_t mag = 0, limit = num->negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (size_t p = num->start + (num->negative ? 1 : 0); p < num->end; p++) {
    unsigned d = (unsigned)(j->s[p] - '0');
    if (mag > (limit - d) / 10) return false;
    mag = mag * 10 + d;
  }
  int64_t x =
      num->negative ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (x < lo || x > hi) return false;
  *v = x;
  return true;
}

bool h3_json_num_double(const h3_json *j, const h3_json_num *num, double *v) {
  char small[64], *text = small;
  size_t len = num->end - num->start;
  if (len >= sizeof small && !(text = malloc(len + 1))) return false;
  memcpy(text, j->s + num->start, len);
  text[len] = '\0';
  *v = strtod(text, NULL);
  if (text != small) free(text);
  return isfinite(*v); /* an underflow to 0 or a subnormal is a value */
}

/* ---- any value -------------------------------------------------------------------- */
/* After an element of an array or a member of an object: ',' (more) or `close`. */
static h3_status after_element(h3_json *j, char close, bool *more) {
  *more = h3_json_eat(j, ',');
  if (*more || h3_json_eat(j, close)) return H3_OK;
  if (h3_json_end(j))
    return h3_json_fail(j, j->pos, LINE_HINT, "the line ends inside %s",
                        close == ']' ? "an array" : "an object");
  return h3_json_fail(j, j->pos,
                      close == ']' ? "an array's elements are separated by ','"
                                   : "an object's members are separated by ','",
                      "expected ',' or '%c', found '%c'", close, j->s[j->pos]);
}

static h3_status skip_at(h3_json *j, int depth) {
  h3_json_kind k = h3_json_peek(j);
  if (k == H3_JSON_STRING) return h3_json_string(j, NULL);
  if (k == H3_JSON_NUMBER) {
    h3_json_num num;
    return h3_json_number(j, &num);
  }
  if (k == H3_JSON_BAD) return h3_json_fail_value(j);
  if (k != H3_JSON_ARRAY && k != H3_JSON_OBJECT) {
    j->pos += k == H3_JSON_FALSE ? 5 : 4;
    return H3_OK;
  }
  if (depth >= H3_JSON_MAX_DEPTH)
    return h3_json_fail(j, j->pos, "requests hold flat values and arrays of numbers",
                        "values nest deeper than %d levels", H3_JSON_MAX_DEPTH);
  char close = k == H3_JSON_ARRAY ? ']' : '}';
  j->pos++;
  if (h3_json_eat(j, close)) return H3_OK;
  for (bool more = true; more;) {
    if (k == H3_JSON_OBJECT) {
      if (h3_json_string(j, NULL) != H3_OK) return H3_ERR;
      if (!h3_json_eat(j, ':'))
        return h3_json_fail(j, j->pos, "a key is followed by ':' and its value",
                            "expected ':' after an object's key");
    }
    if (skip_at(j, depth + 1) != H3_OK || after_element(j, close, &more) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}

h3_status h3_json_skip(h3_json *j) { return j->failed ? H3_ERR : skip_at(j, 0); }

h3_status h3_json_next(h3_json *j, char close, bool *more) {
  return j->failed ? H3_ERR : after_element(j, close, more);
}

/* ---- output ------------------------------------------------------------------------ */
void h3_json_quote(h3_strbuf *b, const char *s, size_t n, size_t max) {
  const unsigned char *u = (const unsigned char *)s;
  bool cut = max > 0 && n > max;
  size_t stop = cut ? max : n;
  h3_strbuf_append(b, "\"");
  for (size_t p = 0; p < stop;) {
    unsigned char c = u[p];
    size_t len = h3_utf8_char(u + p, n - p);
    if (c == '"' || c == '\\') {
      h3_strbuf_appendn(b, "\\", 1);
      h3_strbuf_appendn(b, s + p, 1);
    } else if (c < 0x20 || c == 0x7f) {
      const char *k = c ? strchr("\b\f\n\r\t", c) : NULL;
      if (k)
        h3_strbuf_printf(b, "\\%c", "bfnrt"[k - "\b\f\n\r\t"]);
      else
        h3_strbuf_printf(b, "\\u%04x", c);
    } else if (len == 0) {
      h3_strbuf_append(b, "\\ufffd");
      len = 1;
    } else if (p + len > stop) {
      break; /* a character cut by `max` */
    } else {
      h3_strbuf_appendn(b, s + p, len);
    }
    p += len ? len : 1;
  }
  h3_strbuf_append(b, cut ? "...\"" : "\"");
}
