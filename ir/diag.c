/* diag.c: the diagnostic sink of support.h.
 *
 * Messages are recorded in order (each owns its text, hint and a copy of the file name)
 * and printed by h3_diag_print in the one format every h3 tool uses:
 *   file:line:col: error: message
 *      12 |   h = rms_norm(x, dmi)
 *         |                   ^~~
 *   hint: did you mean 'dim'?
 * The quoted line and the caret need the source text registered with
 * h3_diag_add_source; without it only the first and last lines are printed. A point span
 * (end_col <= col on the same line) gets a single '^'; a span running past its line is
 * underlined to the end of the line. Tabs in the source are kept in the caret line so the
 * caret stays under its column. A line of more than 160 characters is quoted as a window
 * around the span.
 */
#include "h3/support.h"

#include <stdlib.h>
#include <string.h>

void h3_diag_init(h3_diag *d) { memset(d, 0, sizeof *d); }

void h3_diag_free(h3_diag *d) {
  h3_diag_msg *m = d->head;
  while (m) {
    h3_diag_msg *n = m->next;
    free(m->message);
    free(m->hint);
    free((char *)m->span.file);
    free(m);
    m = n;
  }
  h3_diag_source *s = d->sources;
  while (s) {
    h3_diag_source *n = s->next;
    if (s->owned) free((char *)s->text);
    free((char *)s->file);
    free(s);
    s = n;
  }
  memset(d, 0, sizeof *d);
}

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *p = malloc(n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

void h3_diag_add_source(h3_diag *d, const char *file, const char *text, size_t len) {
  h3_diag_source *s = malloc(sizeof *s);
  char *f = dup_or_null(file ? file : "");
  if (!s || !f) {
    free(s);
    free(f);
    return; /* out of memory: messages still print, only without the quoted line */
  }
  s->file = f;
  s->text = text;
  s->len = len;
  s->owned = 0;
  s->next = d->sources;
  d->sources = s;
}

void h3_diag_add_source_owned(h3_diag *d, const char *file, char *text, size_t len) {
  h3_diag_source *before = d->sources;
  h3_diag_add_source(d, file, text, len);
  if (d->sources != before && d->sources->text == text)
    d->sources->owned = 1;
  else
    free(text);
}

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *p = NULL;
  if (n >= 0 && (p = malloc((size_t)n + 1)) != NULL) vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

static void diag_record(h3_diag *d, h3_diag_level level, h3_span span, const char *hint,
                        const char *fmt, va_list ap) {
  int max = d->max_errors > 0 ? d->max_errors : 50;
  if (level == H3_DIAG_ERROR) {
    d->errors++;
    if (d->errors > max) return;
  } else if (level == H3_DIAG_WARNING) {
    d->warnings++;
  }
  if (level == H3_DIAG_NOTE && d->errors > max) return; /* notes of dropped errors */
  h3_diag_msg *m = calloc(1, sizeof *m);
  if (!m) return;
  m->level = level;
  m->span = span;
  m->span.file = NULL;
  m->message = vformat(fmt, ap);
  m->hint = dup_or_null(hint);
  if (span.file) m->span.file = dup_or_null(span.file);
  if (!m->message) {
    free(m->hint);
    free((char *)m->span.file);
    free(m);
    return;
  }
  if (d->tail)
    d->tail->next = m;
  else
    d->head = m;
  d->tail = m;
}

void h3_diag_error(h3_diag *d, h3_span span, const char *hint, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_record(d, H3_DIAG_ERROR, span, hint, fmt, ap);
  va_end(ap);
}

void h3_diag_verror(h3_diag *d, h3_span span, const char *hint, const char *fmt, va_list ap) {
  diag_record(d, H3_DIAG_ERROR, span, hint, fmt, ap);
}

void h3_diag_warning(h3_diag *d, h3_span span, const char *hint, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_record(d, H3_DIAG_WARNING, span, hint, fmt, ap);
  va_end(ap);
}

void h3_diag_note(h3_diag *d, h3_span span, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_record(d, H3_DIAG_NOTE, span, NULL, fmt, ap);
  va_end(ap);
}

static const h3_diag_source *find_source(const h3_diag *d, const char *file) {
  for (const h3_diag_source *s = d->sources; s; s = s->next)
    if (strcmp(s->file, file) == 0) return s;
  return NULL;
}

/* Finds 1-based `line` in the source; sets *start and *len (without the newline). */
static int source_line(const h3_diag_source *s, int line, const char **start, size_t *len) {
  if (line < 1) return 0;
  const char *p = s->text, *end = s->text + s->len;
  for (int l = 1; l < line; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return 0;
    p = nl + 1;
  }
  if (p > end) return 0;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
  if (n > 0 && p[n - 1] == '\r') n--;
  *start = p;
  *len = n;
  return 1;
}

/* A quoted line longer than QUOTE_MAX characters is shown as a window of QUOTE_MAX around the
 * span's start (QUOTE_BEFORE before it), "..." marking the cut ends. */
enum { QUOTE_MAX = 160, QUOTE_BEFORE = 60 };

static void print_quote(const h3_diag_source *s, h3_span sp, FILE *out) {
  const char *line;
  size_t len;
  if (!source_line(s, sp.line, &line, &len)) return;
  size_t col0 = sp.col > 0 ? (size_t)sp.col - 1 : 0; /* 0-based start */
  size_t w0 = 0, w1 = len;
  if (len > QUOTE_MAX) {
    w0 = col0 > QUOTE_BEFORE ? col0 - QUOTE_BEFORE : 0;
    if (w0 > len) w0 = len;
    w1 = len - w0 > QUOTE_MAX ? w0 + QUOTE_MAX : len;
  }
  fprintf(out, "%5d | %s%.*s%s\n", sp.line, w0 ? "..." : "", (int)(w1 - w0), line + w0, w1 < len ? "..." : "");
  if (sp.col < 1) return;
  size_t width;
  if (sp.end_line > sp.line)
    width = len > col0 ? len - col0 : 1;
  else if (sp.end_line == sp.line && sp.end_col > sp.col)
    width = (size_t)(sp.end_col - sp.col);
  else
    width = 1;
  if (col0 < w1 && width > w1 - col0) width = w1 - col0; /* the underline ends with the window */
  fputs(w0 ? "      |    " : "      | ", out);
  for (size_t i = w0; i < col0; i++) fputc(i < len && line[i] == '\t' ? '\t' : ' ', out);
  fputc('^', out);
  for (size_t i = 1; i < width; i++) fputc('~', out);
  fputc('\n', out);
}

void h3_diag_print(const h3_diag *d, FILE *out) {
  static const char *const level_names[] = {"error", "warning", "note"};
  int shown_errors = 0;
  for (const h3_diag_msg *m = d->head; m; m = m->next) {
    const char *lv = level_names[m->level];
    if (m->level == H3_DIAG_ERROR) shown_errors++;
    if (m->span.file) {
      if (m->span.line > 0)
        fprintf(out, "%s:%d:%d: %s: %s\n", m->span.file, m->span.line, m->span.col, lv,
                m->message);
      else
        fprintf(out, "%s: %s: %s\n", m->span.file, lv, m->message);
      const h3_diag_source *s = find_source(d, m->span.file);
      if (s && m->span.line > 0) print_quote(s, m->span, out);
    } else {
      fprintf(out, "%s: %s: %s\n", d->program ? d->program : "h3", lv, m->message);
    }
    if (m->hint) fprintf(out, "hint: %s\n", m->hint);
  }
  if (d->errors > shown_errors)
    fprintf(out, "%s: note: %d more error%s not shown\n", d->program ? d->program : "h3", d->errors - shown_errors,
            d->errors - shown_errors == 1 ? "" : "s");
}
