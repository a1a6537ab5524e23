/* serve_results.c: the results writer of serve_io.h (h3_results_*).
 *
 * Each result is formatted into one line in a buffer and written with one call, under the
 * writer's lock, so lines never interleave and a reader of the file (tail -f, a FIFO) sees
 * whole lines only. Files go through the output writer of support.h; after each line
 * h3_output_keep marks everything so far complete, so an interrupt renames the finished
 * lines into place and cuts a half-written one. "-" is stdout, flushed after each line.
 */
#include "h3/serve_io.h"
#include "serve_json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct h3_results_writer {
  h3_output *out; /* NULL: standard output */
  unsigned flags;
  h3_strbuf line; /* the line being formatted */
  pthread_mutex_t lock;
};

h3_status h3_results_open(const char *path, unsigned flags, h3_results_writer **out, h3_diag *d) {
  *out = NULL;
  h3_results_writer *w = calloc(1, sizeof *w);
  if (!w) {
    h3_span none = {0};
    h3_diag_error(d, none, H3_HINT_OOM, "cannot write %s: out of memory", path);
    return H3_ERR;
  }
  if (strcmp(path, "-") != 0 && h3_output_open(path, &w->out, d) != H3_OK) {
    free(w);
    return H3_ERR;
  }
  w->flags = flags;
  h3_strbuf_init(&w->line);
  pthread_mutex_init(&w->lock, NULL);
  *out = w;
  return H3_OK;
}

/* A JSON integer: -?(0|[1-9][0-9]*). */
static bool json_integer(const char *s) {
  if (*s == '-') s++;
  if (*s == '0') return s[1] == '\0';
  if (*s < '1' || *s > '9') return false;
  while (*s >= '0' && *s <= '9') s++;
  return *s == '\0';
}

/* Milliseconds with three decimals; null when not finite. */
static void ms(h3_strbuf *b, double seconds) {
  if (isfinite(seconds * 1e3))
    h3_strbuf_printf(b, "%.3f", seconds * 1e3);
  else
    h3_strbuf_append(b, "null");
}

static void format(h3_strbuf *b, const h3_result *r, unsigned flags) {
  static const char *const reasons[] = {"length", "eos", "error"};
  b->len = 0;
  h3_strbuf_append(b, "{\"id\": ");
  if (!r->id)
    h3_strbuf_append(b, "null");
  else if (r->id_is_int && json_integer(r->id))
    h3_strbuf_append(b, r->id);
  else
    h3_json_quote(b, r->id, strlen(r->id), 0);
  h3_strbuf_append(b, ", \"tokens\": [");
  for (int64_t i = 0; i < r->n_tokens; i++)
    h3_strbuf_printf(b, i ? ", %d" : "%d", (int)r->tokens[i]);
  h3_strbuf_printf(b, "], \"finish_reason\": \"%s\", \"prompt_len\": ",
                   reasons[r->finish <= H3_FINISH_ERROR ? r->finish : H3_FINISH_ERROR]);
  if (r->prompt_len >= 0)
    h3_strbuf_printf(b, "%lld", (long long)r->prompt_len);
  else
    h3_strbuf_append(b, "null");
  int64_t n = r->token_at ? r->n_tokens : 0;
  h3_strbuf_append(b, ", \"ttft_ms\": ");
  ms(b, n >= 1 ? r->token_at[0] - r->arrival : NAN);
  h3_strbuf_append(b, ", \"tpot_ms\": ");
  ms(b, n >= 2 ? (r->token_at[n - 1] - r->token_at[0]) / (double)(n - 1) : NAN);
  if (flags & H3_RESULTS_ITL) {
    h3_strbuf_append(b, r->token_at ? ", \"itl_ms\": [" : ", \"itl_ms\": null");
    for (int64_t i = 1; i < n; i++) {
      if (i > 1) h3_strbuf_append(b, ", ");
      ms(b, r->token_at[i] - r->token_at[i - 1]);
    }
    if (r->token_at) h3_strbuf_append(b, "]");
  }
  if (flags & H3_RESULTS_MARGINS) {
    h3_strbuf_append(b, r->margins ? ", \"margins\": [" : ", \"margins\": null");
    for (int64_t i = 0; r->margins && i < r->n_tokens; i++) {
      if (i) h3_strbuf_append(b, ", ");
      if (isfinite(r->margins[i]))
        h3_strbuf_printf(b, "%.6g", (double)r->margins[i]);
      else
        h3_strbuf_append(b, "null");
    }
    if (r->margins) h3_strbuf_append(b, "]");
  }
  if (r->forced_acceptance > 0)
    h3_strbuf_printf(b, ", \"forced_acceptance\": %lld", (long long)r->forced_acceptance);
  if (r->finish == H3_FINISH_ERROR) {
    const char *e = r->error ? r->error : "unknown error";
    h3_strbuf_append(b, ", \"error\": ");
    h3_json_quote(b, e, strlen(e), 0);
  }
  h3_strbuf_append(b, "}\n");
}

h3_status h3_results_write(h3_results_writer *w, const h3_result *r, h3_diag *d) {
  pthread_mutex_lock(&w->lock);
  format(&w->line, r, w->flags);
  h3_status st = H3_OK;
  h3_span none = {0};
  if (w->line.oom) {
    h3_diag_error(d, none, H3_HINT_OOM, "cannot write a result: out of memory");
    w->line.oom = 0;
    st = H3_ERR;
  } else if (w->out) {
    st = h3_output_write(w->out, w->line.data, w->line.len, d);
    if (st == H3_OK) h3_output_keep(w->out);
  } else if ((errno = 0, fwrite(w->line.data, 1, w->line.len, stdout)) != w->line.len ||
             fflush(stdout) != 0) {
    h3_diag_error(d, none, "check where standard output goes",
                  "cannot write results to "
                  "standard output: %s",
                  strerror(errno ? errno : EIO));
    st = H3_ERR;
  }
  pthread_mutex_unlock(&w->lock);
  return st;
}

h3_status h3_results_write_rejected(h3_results_writer *w, const h3_request_error *e, h3_diag *d) {
  h3_result r = {.id = e->id,
                 .id_is_int = e->id_is_int,
                 .finish = H3_FINISH_ERROR,
                 .prompt_len = -1,
                 .error = e->error};
  return h3_results_write(w, &r, d);
}

static void release(h3_results_writer *w) {
  h3_strbuf_free(&w->line);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

h3_status h3_results_close(h3_results_writer *w, h3_diag *d) {
  h3_status st = H3_OK;
  if (w->out)
    st = h3_output_commit(w->out, d);
  else if (fflush(stdout) != 0) {
    h3_span none = {0};
    h3_diag_error(d, none, "check where standard output goes",
                  "cannot write results to standard output: %s", strerror(errno));
    st = H3_ERR;
  }
  release(w);
  return st;
}

void h3_results_abort(h3_results_writer *w) {
  if (!w) return;
  h3_output_abort(w->out);
  release(w);
}
