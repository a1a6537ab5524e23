/* serve_oracle.c: the token lists of a results file, matched to a request list by id
 * (include/h3/serve_io.h, h3_oracle_read): what speculative serving's bench-only forced
 * acceptance proposes as the draft. */
#include "h3/serve_io.h"

#include "serve_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORACLE_HINT "give the results file (--out) of a plain greedy run of these requests"

/* One results line: its "id" (string, or an integer's digits) into id, "tokens" into *toks. */
static h3_status parse_line(h3_json *j, h3_strbuf *id, int32_t **toks, int64_t *n) {
  bool more = true, seen_id = false;
  *n = 0;
  if (!h3_json_eat(j, '{')) return h3_json_fail(j, j->pos, NULL, "a results line is a JSON object");
  if (h3_json_eat(j, '}')) more = false;
  while (more) {
    h3_strbuf key;
    h3_strbuf_init(&key);
    h3_status st = h3_json_string(j, &key);
    if (st == H3_OK && !h3_json_eat(j, ':')) st = h3_json_fail(j, j->pos, NULL, "expected ':'");
    if (st == H3_OK && key.len == 2 && !memcmp(key.data, "id", 2)) {
      seen_id = true;
      id->len = 0;
      h3_json_num num;
      if (h3_json_peek(j) == H3_JSON_NUMBER) {
        st = h3_json_number(j, &num);
        if (st == H3_OK) h3_strbuf_printf(id, "%.*s", (int)(num.end - num.start), j->s + num.start);
      } else {
        st = h3_json_string(j, id);
      }
    } else if (st == H3_OK && key.len == 6 && !memcmp(key.data, "tokens", 6)) {
      bool el = h3_json_eat(j, '[');
      if (!el) st = h3_json_fail(j, j->pos, NULL, "\"tokens\" must be an array");
      if (st == H3_OK && h3_json_eat(j, ']')) el = false;
      while (st == H3_OK && el) {
        h3_json_num num;
        int64_t v;
        st = h3_json_number(j, &num);
        if (st == H3_OK && !h3_json_num_int(j, &num, 0, INT32_MAX, &v))
          st = h3_json_fail(j, num.start, NULL, "a token id must be an integer in [0, 2^31)");
        int32_t *p = st == H3_OK ? realloc(*toks, (size_t)(*n + 1) * sizeof *p) : NULL;
        if (st == H3_OK && !p) st = h3_json_fail(j, j->pos, NULL, "out of memory");
        if (st == H3_OK) (*toks = p)[(*n)++] = (int32_t)v;
        if (st == H3_OK) st = h3_json_next(j, ']', &el);
      }
    } else if (st == H3_OK) {
      st = h3_json_skip(j);
    }
    h3_strbuf_free(&key);
    if (st == H3_OK) st = h3_json_next(j, '}', &more);
    if (st != H3_OK) return st;
  }
  return seen_id ? H3_OK : h3_json_fail(j, 0, NULL, "the line has no \"id\"");
}

h3_status h3_oracle_read(const char *path, const h3_request *reqs, int64_t n, h3_oracle *out,
                         h3_diag *d) {
  h3_span none = {0};
  memset(out, 0, sizeof *out);
  out->tokens = calloc((size_t)n + 1, sizeof *out->tokens);
  out->n_tokens = calloc((size_t)n + 1, sizeof *out->n_tokens);
  FILE *f = fopen(path, "rb");
  if (!out->tokens || !out->n_tokens || !f) {
    if (f) fclose(f);
    h3_diag_error(d, none, ORACLE_HINT, "cannot read %s: %s", path, f ? "out of memory" : strerror(errno));
    return H3_ERR;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  h3_status st = H3_OK;
  h3_strbuf id;
  h3_strbuf_init(&id);
  for (int no = 1; st == H3_OK && (len = getline(&line, &cap, f)) >= 0; no++) {
    h3_json j;
    h3_json_init(&j, line, (size_t)len);
    if (h3_json_end(&j)) continue;
    int32_t *toks = NULL;
    int64_t nt = 0;
    st = parse_line(&j, &id, &toks, &nt);
    if (st == H3_OK && !h3_json_end(&j)) st = h3_json_fail(&j, j.pos, NULL, "text after the object");
    if (st != H3_OK) {
      h3_diag_error(d, (h3_span){.file = path, .line = no, .col = (int)j.err_pos + 1},
                    j.hint[0] ? j.hint : ORACLE_HINT, "%s", j.msg);
      free(toks);
      break;
    }
    int64_t i = 0;
    while (i < n && (strlen(reqs[i].id) != id.len || memcmp(reqs[i].id, id.data, id.len))) i++;
    if (i < n && !out->tokens[i]) {
      out->tokens[i] = toks, out->n_tokens[i] = nt, out->matched++;
    } else {
      free(toks);
    }
  }
  h3_strbuf_free(&id);
  free(line);
  fclose(f);
  if (st != H3_OK) h3_oracle_free(out, n);
  return st;
}

void h3_oracle_free(h3_oracle *o, int64_t n) {
  for (int64_t i = 0; o->tokens && i < n; i++) free(o->tokens[i]);
  free(o->tokens);
  free(o->n_tokens);
  memset(o, 0, sizeof *o);
}
