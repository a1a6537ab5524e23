/* serve_run.c: h3exec's serving mode (cli/serve_run.h): reads or makes the requests, opens
 * the results file, runs the engine with a progress line on a terminal, prints the report
 * and writes the JSON summary. */
#include "serve_run.h"

#include "h3/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool serve_wanted(const serve_flags *f) { return f->requests || f->random_prompts > 0; }

typedef struct {
  const char *file; /* the request file, for the place of a failed request */
  h3_results_writer *w;
  h3_status st; /* the first failed write stops writing */
  h3_diag *d;
  int64_t failed;
  int64_t forced_acceptance; /* the bench-only switch, marked in every result line */
} result_sink;

static void on_finished(void *ctx, const h3_serve_result *r) {
  result_sink *s = ctx;
  if (r->finish == H3_FINISH_ERROR) { /* at once, in the one error format */
    s->failed++;
    if (r->req->line > 0)
      fprintf(stderr, "%s:%d:1: error: request \"%s\": %s\n", s->file, r->req->line, r->req->id,
              r->error);
    else
      fprintf(stderr, "h3exec: error: request \"%s\": %s\n", r->req->id, r->error);
    fprintf(stderr, "hint: %s\n", r->hint);
  }
  if (!s->w || s->st != H3_OK) return;
  h3_result res = {r->req->id,    r->req->id_is_int, r->tokens,
                   r->n_tokens,   r->finish,         r->req->prompt_len,
                   r->req->arrival, r->n_tokens ? r->token_at : NULL, r->error,
                   r->n_tokens ? r->margins : NULL, s->forced_acceptance};
  s->st = h3_results_write(s->w, &res, s->d);
}

typedef struct {
  double last; /* when the line was last drawn */
} progress_line;

static void on_progress(void *ctx, int64_t done, int64_t total, int64_t running, int64_t waiting,
                        int64_t tokens, double seconds) {
  progress_line *p = ctx;
  if (done < total && seconds - p->last < 0.1) return;
  p->last = seconds;
  int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
  fprintf(stderr, "\rserving [");
  for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
  fprintf(stderr, "] %lld/%lld requests, %lld running, %lld waiting, %.0f tok/s, %.1f s   ",
          (long long)done, (long long)total, (long long)running, (long long)waiting,
          seconds > 0 ? (double)tokens / seconds : 0.0, seconds);
  if (done == total) fputc('\n', stderr);
  fflush(stderr);
}

/* Poisson arrivals at `rate` per second in list order: exponential gaps -log(u) / rate
 * from Philox stream "serve.arrival" under the run's seed. */
static h3_status set_arrivals(h3_requests *r, double rate, uint64_t seed) {
  float *u = malloc((size_t)(r->n + 1) * sizeof *u);
  if (!u) return H3_ERR;
  h3_rng_fill_uniform(seed, h3_rng_stream_id("serve.arrival"), 0, (size_t)r->n, u);
  double t = 0;
  for (int64_t i = 0; i < r->n; i++) {
    r->req[i].arrival = t;
    t += -log((double)u[i]) / rate;
  }
  free(u);
  return H3_OK;
}

/* The report as one JSON line into `path` (written atomically). */
static h3_status write_summary(const char *path, const h3_serve_stats *s, const char *device,
                               h3_diag *d) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return H3_ERR;
  h3_serve_report_json(f, s, device);
  fclose(f);
  h3_status st = h3_write_file_atomic(path, text, len, d);
  free(text);
  return st;
}

int serve_run(const serve_flags *f, h3_runtime *rt, const h3_module *m, h3_backend *b,
              h3_diag *d) {
  h3_span none = {0};
  h3_requests reqs = {0};
  h3_status st;
  if (f->requests)
    st = h3_requests_read(f->requests, NULL, &reqs, d);
  else
    st = h3_requests_random(f->random_prompts, f->prompt_len, f->output_len,
                            h3_module_config(m, "vocab", 0), f->seed, &reqs, d);
  for (int64_t i = 0; st == H3_OK && !f->requests && i < reqs.n; i++)
    reqs.req[i].temperature = (float)f->temperature;
  if (st == H3_OK && f->request_rate > 0) st = set_arrivals(&reqs, f->request_rate, f->seed);
  if (st == H3_OK && f->summary) st = h3_output_check(f->summary, d);
  /* the rejected lines' errors now, before serving (not after minutes of it) */
  if (d->errors) {
    const char *program = d->program;
    h3_diag_print(d, stderr);
    h3_diag_free(d);
    h3_diag_init(d);
    d->program = program;
  }
  result_sink sink = {.file = f->requests, .st = H3_OK, .d = d,
                      .forced_acceptance = f->force_accept};
  h3_oracle oracle = {0};
  if (st == H3_OK && f->oracle) {
    st = h3_oracle_read(f->oracle, reqs.req, reqs.n, &oracle, d);
    if (st == H3_OK)
      fprintf(stderr, "h3exec: warning: --spec-force-accept %lld is a BENCH-ONLY switch: the draft "
                      "proposes the tokens of %s (%lld of %lld requests found there)\n",
              (long long)f->force_accept, f->oracle, (long long)oracle.matched, (long long)reqs.n);
  }
  if (st == H3_OK && f->out) st = h3_results_open(f->out, f->margins ? H3_RESULTS_MARGINS : 0, &sink.w, d);
  for (int64_t i = 0; st == H3_OK && sink.w && i < reqs.n_rejected; i++)
    st = h3_results_write_rejected(sink.w, &reqs.rejected[i], d);
  sink.failed = reqs.n_rejected;
  progress_line pl = {-1};
  h3_serve_options o = {.concurrency = f->concurrency,
                        .kv_pages = f->kv_pages,
                        .seed = f->seed,
                        .mixed = f->mixed,
                        .no_prefill_group = f->no_prefill_group,
                        .speculative = f->speculative,
                        .force_accept = f->force_accept,
                        .oracle = f->oracle ? &oracle : NULL,
                        .finished = on_finished,
                        .finished_ctx = &sink,
                        .progress = isatty(2) ? on_progress : NULL,
                        .progress_ctx = &pl};
  h3_serve_stats stats = {0};
  if (st == H3_OK) st = h3_serve_run(rt, m, reqs.req, reqs.n, &o, &stats, d);
  stats.failed += reqs.n_rejected;
  stats.requests += reqs.n_rejected;
  if (sink.w) {
    h3_status wst = sink.st == H3_OK ? h3_results_close(sink.w, d) : H3_ERR;
    if (sink.st != H3_OK) h3_results_abort(sink.w);
    if (st == H3_OK) st = wst;
  }
  const char *device = h3_backend_device_name(b);
  if (stats.requests) h3_serve_report_print(stdout, &stats, device);
  int64_t captured, replayed;
  if (stats.requests && h3_backend_graph_counts(b, &captured, &replayed)) {
    printf("CUDA graphs     %lld graph calls captured, %lld replayed\n", (long long)captured,
           (long long)replayed);
    h3_report_print_uncaptured(stdout, b, "                ");
    int64_t timed, read;
    double seconds;
    if (h3_backend_gemm_tuning(b, &timed, &read, &seconds))
      h3_report_print_gemm_tuning(stdout, timed, read, seconds, "                ");
  }
  if (st == H3_OK && f->summary) st = write_summary(f->summary, &stats, device, d);
  if (st == H3_OK && sink.failed)
    h3_diag_error(d, none, "each failed request's error is above and in its result line",
                  "%lld of %lld requests failed", (long long)sink.failed,
                  (long long)(reqs.n + reqs.n_rejected));
  int rc = st == H3_OK && !sink.failed ? 0 : 1;
  h3_serve_stats_free(&stats);
  h3_oracle_free(&oracle, reqs.n);
  h3_requests_free(&reqs);
  return rc;
}
