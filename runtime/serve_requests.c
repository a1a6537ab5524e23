/* serve_requests.c: the request file reader of serve_io.h (h3_requests_read).
 *
 * The file is read in 64 KiB blocks and cut into lines (a line lying inside one block is
 * parsed where it stands, a longer one is gathered in a buffer that grows up to the line
 * limit, past which the rest of the line is only skipped), so reading is linear in the file
 * and works on pipes. Each line that is not blank is one JSON object, parsed in one pass by
 * the scanner of serve_json.h, each field converted and range-checked where it stands.
 * The first error of a line ends that line: it becomes a rejected request (place, message,
 * the id when the line has a valid one: the one parsed before the error, else the first
 * "id" a plain scan of the line finds) and one error in the h3_diag; the next line is read
 * as if nothing happened, unless the options say strict. Ids are unique through a hash map
 * of the valid requests' ids (id -> line). A UTF-8 byte order mark at the start of the file
 * is skipped; columns count bytes after it.
 */
#include "h3/serve_io.h"
#include "h3/strmap.h"
#include "serve_json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { K_ID, K_PROMPT, K_MAX_NEW_TOKENS, K_TEMPERATURE, K_SEED, K_EOS, K_ARRIVAL, N_KEYS };
static const char *const KEYS[N_KEYS] = {"id",   "prompt", "max_new_tokens", "temperature",
                                         "seed", "eos",    "arrival"};
static const char *const KEYS_HINT =
    "the keys are \"id\", \"prompt\", \"max_new_tokens\" (required), \"temperature\", "
    "\"seed\", \"eos\", \"arrival\"";
static const char *const REQUEST_HINT =
    "one request per line: {\"id\": \"a\", \"prompt\": [1, 2, 3], \"max_new_tokens\": 16}";
static const char *const ID_HINT =
    "an id is a string (\"a\") or an integer (7), unique in the file";
/* The range of each integer key and the hint of each number key's errors. */
static const struct {
  int64_t lo, hi;
  const char *hint;
} RULES[N_KEYS] = {
    [K_MAX_NEW_TOKENS] = {1, INT32_MAX, "how many tokens to generate at most"},
    [K_TEMPERATURE] = {0, 0, "0 samples greedily; 1 is the model's distribution"},
    [K_SEED] = {0, INT64_MAX, "a sampling seed is an integer in [0, 2^63)"},
    [K_EOS] = {0, INT32_MAX, "the end-of-sequence token id, in [0, vocab)"},
    [K_ARRIVAL] = {0, 0, "seconds after the start at which the request arrives"},
};

/* ---- lines -------------------------------------------------------------------------- */
enum { BLOCK = 1 << 16 };

typedef struct {
  FILE *f;         /* NULL: every byte is in blk */
  const char *blk; /* bytes read and not yet taken: blk[bpos .. blen) */
  size_t bpos, blen;
  char *buf;       /* f's block */
  char *line;      /* a line that spans blocks, gathered (at most `max` bytes) */
  size_t len, cap; /* its length and capacity */
  size_t max;      /* the line limit */
  bool too_long;   /* the current line is longer than max (only max bytes are kept) */
} lines;

/* Appends p[0 .. n) to the gathered line, keeping at most `max` bytes; -2: no memory. */
static int gather(lines *L, const char *p, size_t n) {
  if (L->len + n > L->max) {
    L->too_long = true;
    n = L->max - L->len;
  }
  if (L->len + n > L->cap) {
    size_t cap = L->cap ? L->cap : 4096;
    while (cap < L->len + n) cap = cap > L->max / 2 ? L->max : cap * 2;
    char *nl = realloc(L->line, cap);
    if (!nl) return -2;
    L->line = nl;
    L->cap = cap;
  }
  if (n) memcpy(L->line + L->len, p, n);
  L->len += n;
  return 0;
}

/* The next line without its '\n' in *text, *len (valid until the next call). Returns 1 for
 * a line, 0 at the end of the input, -1 for a read error (errno), -2 for no memory. */
static int next_line(lines *L, const char **text, size_t *len) {
  bool any = false;
  L->len = 0;
  L->too_long = false;
  for (;;) {
    if (L->bpos == L->blen) {
      size_t got = L->f ? fread(L->buf, 1, BLOCK, L->f) : 0;
      if (got == 0) {
        if (L->f && ferror(L->f)) return -1;
        *text = L->line;
        *len = L->len;
        return any ? 1 : 0;
      }
      L->blk = L->buf;
      L->bpos = 0;
      L->blen = got;
    }
    any = true;
    const char *p = L->blk + L->bpos;
    size_t avail = L->blen - L->bpos;
    const char *nl = memchr(p, '\n', avail);
    size_t take = nl ? (size_t)(nl - p) : avail;
    L->bpos += take + (nl ? 1 : 0);
    if (nl && L->len == 0 && !L->too_long && take <= L->max) { /* inside one block */
      *text = p;
      *len = take;
      return 1;
    }
    if (gather(L, p, take) != 0) return -2;
    if (nl) {
      *text = L->line;
      *len = L->len;
      return 1;
    }
  }
}

/* ---- the reader's state --------------------------------------------------------------- */
typedef struct {
  const char *file; /* the name in messages */
  bool strict;
  size_t max_line;
  h3_diag *d;
  h3_requests *out;
  int64_t cap_req, cap_rej;
  h3_strmap ids; /* id -> its line (as a pointer) for every valid request */
  int32_t *toks; /* the prompt being read */
  int64_t cap_toks;
  h3_strbuf str; /* a string being decoded */
  bool oom;
} reader;

static void str_reset(h3_strbuf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

static h3_status out_of_memory(reader *R, h3_json *j) {
  R->oom = true;
  return h3_json_fail(j, j->pos, "use smaller requests", "out of memory");
}

/* ---- fields -------------------------------------------------------------------------- */
/* "LABEL must be WHAT in [lo, hi], found X" at the value (X: the number, cut at 24 bytes,
 * or the kind of the value). */
static h3_status bad_int(h3_json *j, h3_json_kind k, const h3_json_num *num, const char *label,
                         const char *what, int64_t lo, int64_t hi, const char *hint) {
  if (k == H3_JSON_BAD) return h3_json_fail_value(j);
  if (k != H3_JSON_NUMBER)
    return h3_json_fail(j, j->pos, hint, "%s must be %s in [%lld, %lld], found %s", label, what,
                        (long long)lo, (long long)hi, h3_json_kind_name(k));
  size_t n = num->end - num->start;
  return h3_json_fail(j, num->start, hint, "%s must be %s in [%lld, %lld], found %.*s%s", label,
                      what, (long long)lo, (long long)hi, (int)(n > 24 ? 24 : n), j->s + num->start,
                      n > 24 ? "..." : "");
}

/* An integer key in its RULES range. */
static h3_status int_field(h3_json *j, int key, int64_t *v) {
  h3_json_kind k = h3_json_peek(j);
  h3_json_num num = {0};
  if (k == H3_JSON_NUMBER && h3_json_number(j, &num) == H3_OK &&
      h3_json_num_int(j, &num, RULES[key].lo, RULES[key].hi, v))
    return H3_OK;
  char label[32];
  snprintf(label, sizeof label, "\"%s\"", KEYS[key]);
  return bad_int(j, k, &num, label, key == K_EOS ? "a token id" : "an integer", RULES[key].lo,
                 RULES[key].hi, RULES[key].hint);
}

/* A number key, finite and >= 0 (and finite as an fp32 when `f32`). */
static h3_status real_field(h3_json *j, int key, bool f32, double *v) {
  const char *hint = RULES[key].hint;
  h3_json_kind k = h3_json_peek(j);
  if (k == H3_JSON_BAD) return h3_json_fail_value(j);
  if (k != H3_JSON_NUMBER)
    return h3_json_fail(j, j->pos, hint, "\"%s\" must be a number >= 0, found %s", KEYS[key],
                        h3_json_kind_name(k));
  h3_json_num num;
  if (h3_json_number(j, &num) != H3_OK) return H3_ERR;
  bool ok = h3_json_num_double(j, &num, v);
  if (ok && *v >= 0 && (!f32 || isfinite((float)*v))) {
    *v += 0.0; /* -0 is 0 */
    return H3_OK;
  }
  size_t n = num.end - num.start;
  return h3_json_fail(j, num.start, hint, "\"%s\" must be %s, found %.*s%s", KEYS[key],
                      ok && *v < 0 ? "a number >= 0" : "a finite number", (int)(n > 24 ? 24 : n),
                      j->s + num.start, n > 24 ? "..." : "");
}

/* "id": a non-empty string without U+0000, or an integer (kept as its digits). */
static h3_status id_field(reader *R, h3_json *j, h3_request *q) {
  h3_json_kind k = h3_json_peek(j);
  size_t at = j->pos;
  if (k == H3_JSON_STRING) {
    str_reset(&R->str);
    if (h3_json_string(j, &R->str) != H3_OK) return H3_ERR;
    if (R->str.oom) return out_of_memory(R, j);
    if (R->str.len == 0) return h3_json_fail(j, at, ID_HINT, "\"id\" is empty");
    if (memchr(R->str.data, '\0', R->str.len))
      return h3_json_fail(j, at, ID_HINT, "\"id\" contains U+0000");
    q->id = strndup(R->str.data, R->str.len);
  } else if (k == H3_JSON_NUMBER) {
    h3_json_num num;
    if (h3_json_number(j, &num) != H3_OK) return H3_ERR;
    size_t n = num.end - num.start;
    if (!num.integer)
      return h3_json_fail(j, at, ID_HINT, "\"id\" must be a string or an integer, found %.*s%s",
                          (int)(n > 24 ? 24 : n), j->s + at, n > 24 ? "..." : "");
    q->id = strndup(j->s + at, n);
    q->id_is_int = true;
  } else if (k == H3_JSON_BAD) {
    return h3_json_fail_value(j);
  } else {
    return h3_json_fail(j, at, ID_HINT, "\"id\" must be a string or an integer, found %s",
                        h3_json_kind_name(k));
  }
  return q->id ? H3_OK : out_of_memory(R, j);
}

/* The '[' or '{' of an array or object (`want`): consumed, its offset in *open; another
 * value is the error "WHAT, found KIND". */
static h3_status opening(h3_json *j, h3_json_kind want, const char *hint, const char *what,
                         size_t *open) {
  h3_json_kind k = h3_json_peek(j);
  if (k == H3_JSON_BAD) return h3_json_fail_value(j);
  if (k != want) return h3_json_fail(j, j->pos, hint, "%s, found %s", what, h3_json_kind_name(k));
  *open = j->pos++;
  return H3_OK;
}

/* "prompt": a non-empty array of token ids in [0, 2^31). */
static h3_status prompt_field(reader *R, h3_json *j, h3_request *q) {
  static const char *const hint = "the request file holds token ids: tokenize the text first, "
                                  "e.g. \"prompt\": [1, 2, 3]";
  size_t open = 0;
  if (opening(j, H3_JSON_ARRAY, hint, "\"prompt\" must be an array of token ids", &open) != H3_OK)
    return H3_ERR;
  if (h3_json_eat(j, ']'))
    return h3_json_fail(j, open, "give at least one token id", "\"prompt\" is empty");
  int64_t n = 0, v = 0;
  for (bool more = true; more;) {
    h3_json_kind k = h3_json_peek(j);
    h3_json_num num = {0};
    if (!(k == H3_JSON_NUMBER && h3_json_number(j, &num) == H3_OK &&
          h3_json_num_int(j, &num, 0, INT32_MAX, &v))) {
      char label[48];
      snprintf(label, sizeof label, "prompt[%lld]", (long long)n);
      return bad_int(j, k, &num, label, "a token id", 0, INT32_MAX,
                     "token ids are integers in [0, vocab)");
    }
    if (n == R->cap_toks) {
      int64_t cap = R->cap_toks ? 2 * R->cap_toks : 1024;
      int32_t *t = realloc(R->toks, (size_t)cap * sizeof *t);
      if (!t) return out_of_memory(R, j);
      R->toks = t;
      R->cap_toks = cap;
    }
    R->toks[n++] = (int32_t)v;
    if (h3_json_next(j, ']', &more) != H3_OK) return H3_ERR;
  }
  if (!(q->prompt = malloc((size_t)n * sizeof *q->prompt))) return out_of_memory(R, j);
  memcpy(q->prompt, R->toks, (size_t)n * sizeof *q->prompt);
  q->prompt_len = n;
  return H3_OK;
}

static h3_status field(reader *R, h3_json *j, h3_request *q, int key) {
  if (key != K_ID && key != K_PROMPT && key != K_MAX_NEW_TOKENS && h3_json_peek(j) == H3_JSON_NULL)
    return h3_json_skip(j); /* an optional key given as null: its default */
  if (key == K_ID) return id_field(R, j, q);
  if (key == K_PROMPT) return prompt_field(R, j, q);
  if (key == K_TEMPERATURE || key == K_ARRIVAL) {
    double x;
    if (real_field(j, key, key == K_TEMPERATURE, &x) != H3_OK) return H3_ERR;
    if (key == K_TEMPERATURE)
      q->temperature = (float)x;
    else
      q->arrival = x;
    return H3_OK;
  }
  int64_t v;
  if (int_field(j, key, &v) != H3_OK) return H3_ERR;
  if (key == K_MAX_NEW_TOKENS) {
    q->max_new_tokens = v;
  } else if (key == K_SEED) {
    q->seed = (uint64_t)v;
    q->has_seed = true;
  } else {
    q->eos = (int32_t)v;
    q->has_eos = true;
  }
  return H3_OK;
}

/* The key at the cursor: its index, or -1 after an error. */
static int key_at(reader *R, h3_json *j, const bool *seen, const size_t *where) {
  size_t at = j->pos;
  h3_json_kind k = h3_json_peek(j);
  if (k != H3_JSON_STRING) {
    if (h3_json_end(j))
      h3_json_fail(j, j->pos, "each request is one whole line of JSON",
                   "the line ends inside the request");
    else if (j->s[j->pos] == '}')
      h3_json_fail(j, j->pos, "JSON allows no trailing comma", "expected a key after ','");
    else if (k != H3_JSON_BAD)
      h3_json_fail(j, j->pos, "keys are strings in double quotes", "expected a key, found %s",
                   h3_json_kind_name(k));
    else if ((unsigned char)j->s[j->pos] < 0x20 || (unsigned char)j->s[j->pos] >= 0x7f)
      h3_json_fail_value(j); /* "unexpected byte" */
    else
      h3_json_fail(j, j->pos, "keys are strings in double quotes", "expected a key, found '%c'",
                   j->s[j->pos]);
    return -1;
  }
  str_reset(&R->str);
  if (h3_json_string(j, &R->str) != H3_OK) return -1;
  if (R->str.oom) {
    out_of_memory(R, j);
    return -1;
  }
  for (int key = 0; key < N_KEYS; key++)
    if (R->str.len == strlen(KEYS[key]) && memcmp(R->str.data, KEYS[key], R->str.len) == 0) {
      if (seen[key]) {
        char hint[96];
        snprintf(hint, sizeof hint, "each key appears once; the first \"%s\" is at column %zu",
                 KEYS[key], where[key] + 1);
        h3_json_fail(j, at, hint, "duplicate key \"%s\"", KEYS[key]);
        return -1;
      }
      return key;
    }
  h3_strbuf shown;
  h3_strbuf_init(&shown);
  h3_json_quote(&shown, R->str.data, R->str.len, 48);
  h3_json_fail(j, at, KEYS_HINT, "unknown key %s", shown.data ? shown.data : "");
  h3_strbuf_free(&shown);
  return -1;
}

/* One line's object into *q; *id_at gets the offset of the id's value. */
static h3_status parse_request(reader *R, h3_json *j, h3_request *q, size_t *id_at) {
  bool seen[N_KEYS] = {0};
  size_t where[N_KEYS] = {0}; /* each key's offset */
  size_t open = 0;
  if (opening(j, H3_JSON_OBJECT, REQUEST_HINT, "a request is a JSON object", &open) != H3_OK)
    return H3_ERR;
  if (!h3_json_eat(j, '}'))
    for (bool more = true; more;) {
      h3_json_end(j);
      size_t at = j->pos;
      int key = key_at(R, j, seen, where);
      if (key < 0) return H3_ERR;
      seen[key] = true;
      where[key] = at;
      if (!h3_json_eat(j, ':'))
        return h3_json_fail(j, j->pos, "a key is followed by ':' and its value",
                            "expected ':' after the key \"%s\"", KEYS[key]);
      h3_json_end(j);
      if (key == K_ID) *id_at = j->pos;
      if (field(R, j, q, key) != H3_OK || h3_json_next(j, '}', &more) != H3_OK) return H3_ERR;
    }
  if (!h3_json_end(j))
    return h3_json_fail(j, j->pos, REQUEST_HINT, "unexpected text after the request's '}'");
  static const int required[] = {K_ID, K_PROMPT, K_MAX_NEW_TOKENS};
  for (int i = 0; i < 3; i++)
    if (!seen[required[i]])
      return h3_json_fail(j, open, REQUEST_HINT, "missing \"%s\"", KEYS[required[i]]);
  return H3_OK;
}

/* The id of a line whose parse failed before its id: the first "id" member a plain scan of
 * the object meets, if it is a valid id and all before it is valid JSON. */
static void find_id(reader *R, const char *text, size_t len, h3_request *q) {
  h3_json j;
  h3_json_init(&j, text, len);
  if (!h3_json_eat(&j, '{')) return;
  for (bool more = !h3_json_eat(&j, '}'); more;) {
    str_reset(&R->str);
    if (h3_json_string(&j, &R->str) != H3_OK || R->str.oom || !h3_json_eat(&j, ':')) return;
    if (R->str.len == 2 && memcmp(R->str.data, "id", 2) == 0) {
      (void)id_field(R, &j, q);
      return;
    }
    if (h3_json_skip(&j) != H3_OK || h3_json_next(&j, '}', &more) != H3_OK) return;
  }
}

/* ---- lines into requests ---------------------------------------------------------------- */
static void request_release(h3_request *q) {
  free(q->id);
  free(q->prompt);
  memset(q, 0, sizeof *q);
}

/* Records the line's error (j) as a rejected request and in the diag. H3_ERR when the
 * reading stops: strict, or no memory. */
static h3_status reject(reader *R, const h3_json *j, const char *text, size_t len, h3_request *q) {
  if (!q->id) find_id(R, text, len, q);
  int col = (int)j->err_pos + 1;
  h3_strbuf who;
  h3_strbuf_init(&who);
  if (q->id && q->id_is_int)
    h3_strbuf_printf(&who, "request %s: ", q->id);
  else if (q->id) {
    h3_strbuf_append(&who, "request ");
    h3_json_quote(&who, q->id, strlen(q->id), 48);
    h3_strbuf_append(&who, ": ");
  }
  h3_span at = {R->file, q->line, col, q->line, col};
  h3_diag_error(R->d, at, j->hint[0] ? j->hint : REQUEST_HINT, "%s%s", who.data ? who.data : "", j->msg);
  h3_strbuf_free(&who);
  if (R->out->n_rejected == R->cap_rej) {
    int64_t cap = R->cap_rej ? 2 * R->cap_rej : 16;
    h3_request_error *e = realloc(R->out->rejected, (size_t)cap * sizeof *e);
    if (!e)
      R->oom = true;
    else {
      R->out->rejected = e;
      R->cap_rej = cap;
    }
  }
  if (!R->oom) {
    h3_request_error *e = &R->out->rejected[R->out->n_rejected];
    *e = (h3_request_error){q->line, col, q->id, q->id_is_int, strdup(j->msg), NULL};
    h3_strbuf where;
    h3_strbuf_init(&where);
    h3_strbuf_printf(&where, "%s:%d:%d: %s", R->file, q->line, col, j->msg);
    e->error = where.oom ? NULL : where.data;
    if (!e->message || !e->error) {
      free(e->message);
      free(e->error);
      R->oom = true;
    } else {
      R->out->n_rejected++;
      q->id = NULL; /* now the rejected entry's */
    }
  }
  request_release(q);
  return R->oom || R->strict ? H3_ERR : H3_OK;
}

/* Adds a parsed request; a duplicate id instead rejects it. */
static h3_status accept(reader *R, h3_json *j, const char *text, size_t len, h3_request *q,
                        size_t id_at) {
  void *first = h3_strmap_get(&R->ids, q->id);
  if (first) {
    char hint[96];
    snprintf(hint, sizeof hint, "ids are unique in a request file; line %d has this one",
             (int)(intptr_t)first);
    h3_json_fail(j, id_at, hint, "the id is already used on line %d", (int)(intptr_t)first);
    return reject(R, j, text, len, q);
  }
  if (R->out->n == R->cap_req) {
    int64_t cap = R->cap_req ? 2 * R->cap_req : 64;
    h3_request *r = realloc(R->out->req, (size_t)cap * sizeof *r);
    if (!r) {
      R->oom = true;
      return H3_ERR;
    }
    R->out->req = r;
    R->cap_req = cap;
  }
  h3_request *r = &R->out->req[R->out->n++];
  *r = *q;
  memset(q, 0, sizeof *q);
  if (h3_strmap_put(&R->ids, r->id, (void *)(intptr_t)r->line) != 0) R->oom = true;
  return R->oom ? H3_ERR : H3_OK;
}

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
  return true;
}

static h3_status one_line(reader *R, int line, const char *text, size_t len, bool too_long) {
  h3_request q = {0};
  q.line = line;
  h3_json j;
  h3_json_init(&j, text, len);
  size_t id_at = 0;
  if (too_long) {
    char hint[128];
    snprintf(hint, sizeof hint, "a request line holds at most %zu bytes%s", R->max_line,
             R->max_line == H3_REQUESTS_MAX_LINE ? " (64 MiB: about 8 million token ids)" : "");
    h3_json_fail(&j, len, hint, "the line is longer than %zu bytes", R->max_line);
  } else if (parse_request(R, &j, &q, &id_at) == H3_OK) {
    return accept(R, &j, text, len, &q, id_at);
  }
  if (R->oom) {
    request_release(&q);
    return H3_ERR;
  }
  return reject(R, &j, text, len, &q);
}

static h3_status read_all(reader *R, lines *L) {
  int line = 0;
  const char *text = NULL;
  size_t len = 0;
  for (int got; (got = next_line(L, &text, &len)) != 0;) {
    if (got < 0 || line == INT_MAX) {
      h3_span none = {0};
      if (got == -2)
        R->oom = true;
      else
        h3_diag_error(R->d, none, "check that the path names a readable regular file or pipe",
                      "cannot read %s: %s", R->file,
                      got < 0 ? strerror(errno ? errno : EIO) : "more than 2^31 lines");
      return H3_ERR;
    }
    line++;
    if (line == 1 && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
      text += 3;
      len -= 3;
    }
    if (blank(text, len)) continue;
    if (one_line(R, line, text, len, L->too_long) != H3_OK) return H3_ERR;
  }
  if (R->out->n + R->out->n_rejected == 0) {
    h3_span none = {R->file, 0, 0, 0, 0};
    h3_diag_error(R->d, none, REQUEST_HINT,
                  "no requests: the file is empty or has only blank lines");
    return H3_ERR;
  }
  return H3_OK;
}

/* Reads from `f`, or from text[0 .. len) when f is NULL. */
static h3_status read_requests(const char *name, FILE *f, const char *text, size_t len,
                               const h3_requests_options *opt, h3_requests *out, h3_diag *d) {
  memset(out, 0, sizeof *out);
  reader R = {.file = name, .d = d, .out = out};
  R.strict = opt && opt->strict;
  R.max_line = opt && opt->max_line ? opt->max_line : H3_REQUESTS_MAX_LINE;
  if (R.max_line > ((size_t)1 << 30)) R.max_line = (size_t)1 << 30; /* columns fit an int */
  h3_strmap_init(&R.ids);
  h3_strbuf_init(&R.str);
  lines L = {.f = f, .blk = text, .blen = f ? 0 : len, .max = R.max_line};
  h3_status st = H3_ERR;
  if (f && !(L.buf = malloc(BLOCK)))
    R.oom = true;
  else
    st = read_all(&R, &L);
  if (R.oom) {
    h3_span none = {0};
    h3_diag_error(d, none, "free memory, or split the request file", "out of memory reading %s", name);
    st = H3_ERR;
  }
  free(L.buf);
  free(L.line);
  free(R.toks);
  h3_strbuf_free(&R.str);
  h3_strmap_free(&R.ids);
  return st;
}

h3_status h3_requests_read(const char *path, const h3_requests_options *opt, h3_requests *out,
                           h3_diag *d) {
  bool std_in = strcmp(path, "-") == 0;
  FILE *f = std_in ? stdin : fopen(path, "rb");
  if (!f) {
    memset(out, 0, sizeof *out);
    h3_span none = {0};
    h3_diag_error(d, none, "check the path and its permissions", "cannot read %s: %s", path,
                  strerror(errno));
    return H3_ERR;
  }
  if (!std_in) h3_input_register(fileno(f), path, "request file");
  h3_status st = read_requests(std_in ? "<stdin>" : path, f, NULL, 0, opt, out, d);
  if (!std_in) fclose(f);
  return st;
}

h3_status h3_requests_read_memory(const char *name, const char *text, size_t len,
                                  const h3_requests_options *opt, h3_requests *out, h3_diag *d) {
  return read_requests(name, NULL, text, len, opt, out, d);
}
