/* support.c: the arena allocator and the growable string of support.h.
 *
 * The arena hands out zeroed, 16-byte aligned blocks from malloc'd chunks and frees them
 * all at once; a request larger than a chunk gets a chunk of its own. The strbuf keeps a
 * NUL-terminated malloc'd string; when growing fails it sets `oom` and keeps what it had,
 * so printers never crash and callers check `oom` once at the end.
 * Diagnostics and file helpers live in diag.c and fileio.c; SHA-256 in sha256.c.
 */
#include "h3/support.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------------------- */
#define H3_ARENA_CHUNK (64 * 1024)
#define H3_ARENA_ALIGN 16

struct h3_arena_chunk {
  struct h3_arena_chunk *next;
  size_t used, cap;
  /* data follows, aligned to H3_ARENA_ALIGN */
};

static size_t align_up(size_t n) { return (n + H3_ARENA_ALIGN - 1) & ~(size_t)(H3_ARENA_ALIGN - 1); }

static unsigned char *chunk_data(h3_arena_chunk *c) {
  return (unsigned char *)c + align_up(sizeof(h3_arena_chunk));
}

void h3_arena_init(h3_arena *a) {
  a->head = NULL;
  a->bytes = 0;
}

void h3_arena_free(h3_arena *a) {
  h3_arena_chunk *c = a->head;
  while (c) {
    h3_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  a->head = NULL;
  a->bytes = 0;
}

void *h3_arena_alloc(h3_arena *a, size_t size) {
  if (size == 0) size = 1;
  if (size > SIZE_MAX / 2) return NULL;
  size = align_up(size);
  h3_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < size) {
    size_t cap = size > H3_ARENA_CHUNK ? size : H3_ARENA_CHUNK;
    h3_arena_chunk *nc = malloc(align_up(sizeof(h3_arena_chunk)) + cap);
    if (!nc) return NULL;
    nc->used = 0;
    nc->cap = cap;
    if (c && size > H3_ARENA_CHUNK) {
      /* a big block gets its own chunk behind the current one, which keeps its free space */
      nc->next = c->next;
      c->next = nc;
    } else {
      nc->next = c;
      a->head = nc;
    }
    c = nc;
  }
  void *p = chunk_data(c) + c->used;
  c->used += size;
  a->bytes += size;
  memset(p, 0, size);
  return p;
}

char *h3_arena_strndup(h3_arena *a, const char *s, size_t n) {
  char *p = h3_arena_alloc(a, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *h3_arena_strdup(h3_arena *a, const char *s) { return h3_arena_strndup(a, s, strlen(s)); }

char *h3_arena_printf(h3_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = NULL;
  if (n >= 0) {
    p = h3_arena_alloc(a, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
  }
  va_end(ap2);
  return p;
}

/* ---- strbuf ------------------------------------------------------------------------------ */
void h3_strbuf_init(h3_strbuf *b) {
  b->data = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}

void h3_strbuf_free(h3_strbuf *b) {
  free(b->data);
  h3_strbuf_init(b);
}

/* Makes room for `extra` more bytes plus the NUL; 0 on success. */
static int strbuf_reserve(h3_strbuf *b, size_t extra) {
  if (b->oom) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  if (extra > SIZE_MAX / 4 - b->len) {
    b->oom = 1;
    return -1;
  }
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *d = realloc(b->data, cap);
  if (!d) {
    b->oom = 1;
    return -1;
  }
  if (!b->data) d[0] = '\0';
  b->data = d;
  b->cap = cap;
  return 0;
}

void h3_strbuf_appendn(h3_strbuf *b, const char *s, size_t n) {
  if (strbuf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void h3_strbuf_append(h3_strbuf *b, const char *s) { h3_strbuf_appendn(b, s, strlen(s)); }

void h3_strbuf_vprintf(h3_strbuf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n >= 0 && strbuf_reserve(b, (size_t)n) == 0) {
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  } else if (n < 0) {
    b->oom = 1;
  }
  va_end(ap2);
}

void h3_strbuf_printf(h3_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  h3_strbuf_vprintf(b, fmt, ap);
  va_end(ap);
}

/* Shortest "%.*g" that strtod reads back to the same double; always shows a '.' or an
 * exponent so the text reads back as a float ("1.0", "1e-05", "inf", "-inf", "nan"). */
void h3_strbuf_double(h3_strbuf *b, double v) {
  if (isnan(v)) {
    h3_strbuf_append(b, "nan");
    return;
  }
  if (isinf(v)) {
    h3_strbuf_append(b, v < 0 ? "-inf" : "inf");
    return;
  }
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v) break;
  }
  h3_strbuf_append(b, tmp);
  if (!strpbrk(tmp, ".e")) h3_strbuf_append(b, ".0");
}

char *h3_str_replace_all(const char *s, const char *from, const char *to) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  size_t fl = strlen(from);
  const char *p = s, *q;
  while ((q = strstr(p, from))) {
    h3_strbuf_appendn(&b, p, (size_t)(q - p));
    h3_strbuf_append(&b, to);
    p = q + fl;
  }
  h3_strbuf_append(&b, p);
  if (b.oom) {
    h3_strbuf_free(&b);
    return NULL;
  }
  if (!b.data) {
    char *e = malloc(1);
    if (e) e[0] = 0;
    return e;
  }
  return b.data;
}
