/* serve.c: the M3.1 serving engine's loop (include/h3/serve.h).
 *
 * State per request: waiting -> (admitted: pages reserved, a decode row) prefilled in
 * chunks -> running (one decode row) -> done. Each turn of the loop: arrivals join the
 * waiting queue (arrival order, then list order); waiting requests are admitted first come
 * first served while a row and their pages are free, and each admitted one is prefilled at
 * once (its first token comes from the last chunk); then one decode step runs every
 * running row. A request that can never run (bad ids, too long, more pages than the pool)
 * is refused before serving starts and does not disturb the others.
 *
 * Mixed steps (option `mixed`): a prefill chunk also carries one decode row of every request
 * running (serve_mixed), which takes its token from it, so running requests keep decoding
 * while others are prefilled and the chunk's weight reads serve both.
 *
 * Prefill groups (the plan's serve_prefill_group with P >= 2 prompts, at a concurrency of at
 * least P, not with `mixed` or speculative serving, not with `no_prefill_group`): admitted
 * requests whose prompt fits one chunk are gathered, and every P of them are prefilled in one
 * call (one weight read for all P prompts; their first tokens arrive together); those left
 * over when admission stops are prefilled one by one.
 *
 * Device state: the three caches (allocated here at the graphs' types), and the argument
 * buffers of both graphs, allocated once so that the backend can replay its recorded calls
 * (CUDA graphs) with the same addresses. Positions: the prompt occupies 0 .. L-1, generated
 * token k sits at L + k and is sampled with position L + k; decode feeds token k at L + k.
 * Padding rows of a decode step: token 0 at position 0 through an all-zero page table (they
 * write page 0, which no request owns). Padding rows of a prefill chunk (past the prompt)
 * write slots past the prompt, overwritten by the decode steps before any row reads them,
 * or page 0 where the page table holds no page.
 */
#include "serve_engine.h"

#include "h3/rng.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const cache_names[5] = {"k_cache", "v_cache", "ik_cache", "kd_cache",
                                            "vd_cache"};

static int cache_index(const char *name) {
  int k = 0;
  while (k < 5 && strcmp(name, cache_names[k])) k++;
  return k;
}

double serve_now(const engine *e) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - e->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - e->t0.tv_nsec);
}

static h3_status push(double **v, int64_t *n, int64_t *cap, double x) {
  if (*n == *cap) {
    int64_t c = *cap ? 2 * *cap : 256;
    double *p = realloc(*v, (size_t)c * sizeof *p);
    if (!p) return H3_ERR;
    *v = p, *cap = c;
  }
  (*v)[(*n)++] = x;
  return H3_OK;
}

static int input_index(const h3_graph *g, const char *name) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i]->name && strcmp(g->inputs[i]->name, name) == 0) return i;
  return -1;
}

static const h3_type *input_type(const call_args *c, const char *name) {
  int i = input_index(c->g, name);
  return i >= 0 ? &c->g->inputs[i]->type : NULL;
}

/* Finds graph `name`, checks that its inputs are exactly names[0 .. n_names) (in any
 * order), gives the caches the engine's buffers and every other input a buffer of its own. */
h3_status serve_setup_call(engine *e, const h3_module *m, const char *name,
                           const char *const *names, int n_names, call_args *c) {
  h3_span none = {0};
  const char *hint = "compile the plan from this h3's models/minimax_m3_1.g";
  c->g = h3_module_graph(m, name);
  if (!c->g) {
    h3_diag_error(e->d, none, hint, "the plan has no graph '%s': it cannot serve M3.1 requests",
                  name);
    return H3_ERR;
  }
  bool ok = c->g->n_inputs == n_names;
  for (int k = 0; ok && k < n_names; k++) ok = input_index(c->g, names[k]) >= 0;
  if (!ok) {
    h3_diag_error(e->d, c->g->span, hint, "graph '%s' does not have the inputs the engine gives it",
                  name);
    return H3_ERR;
  }
  c->args = calloc((size_t)c->g->n_inputs, sizeof *c->args);
  c->results = calloc((size_t)c->g->n_outputs + 1, sizeof *c->results);
  if (!c->args || !c->results) return H3_ERR;
  for (int i = 0; i < c->g->n_inputs; i++) {
    const h3_value *v = c->g->inputs[i];
    int k = cache_index(v->name);
    h3_tensor *own = k < 5 ? &e->caches[k] : &c->args[i];
    if (own->data && !h3_type_equal(&own->type, &v->type)) {
      h3_diag_error(e->d, v->span, hint, "graph '%s': '%s' differs from the other graph's", name,
                    v->name);
      return H3_ERR;
    }
    if (!own->data && h3_runtime_buffer(e->rt, &v->type, own, e->d) != H3_OK) return H3_ERR;
    c->args[i] = *own;
  }
  return H3_OK;
}

void serve_free_call(engine *e, call_args *c) {
  for (int i = 0; c->args && i < c->g->n_inputs; i++)
    if (cache_index(c->g->inputs[i]->name) == 5) h3_runtime_buffer_free(e->rt, &c->args[i]);
  free(c->args);
  free(c->results);
}

h3_status serve_upload(engine *e, call_args *c, const char *name, const void *host) {
  return h3_runtime_upload(e->rt, &c->args[input_index(c->g, name)], host, e->d);
}

h3_status serve_download(engine *e, call_args *c, const char *name, void *host) {
  for (int r = 0; r < c->g->n_outputs; r++)
    if (c->g->output_names[r] && strcmp(c->g->output_names[r], name) == 0)
      return h3_runtime_download(e->rt, host, &c->results[r], e->d);
  h3_diag_error(e->d, c->g->span, NULL, "graph '%s' has no output '%s'", c->g->name, name);
  return H3_ERR;
}

int64_t serve_pages_needed(const engine *e, const h3_request *r) {
  return (r->prompt_len + r->max_new_tokens + (e->spec ? e->gamma : 0) + e->page - 1) / e->page;
}

/* The sampling key of request i: its own seed, or the run's seed with its id (never its
 * place in the list or the batch). */
static int32_t sampling_key(const engine *e, const h3_request *r) {
  uint64_t h = r->has_seed ? r->seed : e->o->seed ^ 0x9E3779B97F4A7C15ull;
  if (!r->has_seed)
    for (const char *p = r->id; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return (int32_t)(uint32_t)h;
}

/* Ends request i: the callback, the statistics, its pages and row back. */
static void finish(engine *e, int64_t i, h3_finish_reason why, const char *error, const char *hint) {
  seq *q = &e->s[i];
  const h3_request *r = &e->reqs[i];
  h3_serve_result res = {r, i, q->out, q->n_out, q->at, q->margins, why, error, hint};
  if (e->o->finished) e->o->finished(e->o->finished_ctx, &res);
  h3_serve_stats *st = e->st;
  if (error) st->failed++;
  else {
    double first = q->at[0], last = q->at[q->n_out - 1]; /* every ended request has a token */
    st->completed++;
    st->output_tokens += q->n_out;
    push(&st->ttft, &st->n_ttft, &e->cap_ttft, first - r->arrival);
    if (q->n_out >= 2)
      push(&st->tpot, &st->n_tpot, &e->cap_tpot, (last - first) / (double)(q->n_out - 1));
    for (int64_t k = 1; k < q->n_out; k++) push(&st->itl, &st->n_itl, &e->cap_itl, q->at[k] - q->at[k - 1]);
    if (last > st->seconds) st->seconds = last;
  }
  if (q->n_pages) h3_page_pool_give(&e->pool, q->n_pages, q->pages);
  q->n_pages = 0;
  if (q->state == RUNNING && q->row >= 0) e->row_seq[q->row] = -1;
  q->state = DONE;
  e->done++;
}

bool serve_take_token(engine *e, int64_t i, int32_t t, float margin, double at) {
  seq *q = &e->s[i];
  const h3_request *r = &e->reqs[i];
  q->at[q->n_out] = at;
  q->margins[q->n_out] = margin;
  q->out[q->n_out++] = t;
  if (r->has_eos && t == r->eos)
    finish(e, i, H3_FINISH_EOS, NULL, NULL);
  else if (q->n_out >= r->max_new_tokens)
    finish(e, i, H3_FINISH_LENGTH, NULL, NULL);
  return q->state == DONE;
}

/* c's input or output named prefix + base ("d_" + "tokens": serve_mixed's decode rows). */
static const char *named(char *buf, size_t n, const char *prefix, const char *base) {
  snprintf(buf, n, "%s%s", prefix, base);
  return buf;
}

int64_t serve_fill_decode_rows(engine *e) {
  int64_t R = e->rows, n = 0;
  memset(e->h_tokens, 0, (size_t)R * sizeof *e->h_tokens);
  memset(e->h_pos, 0, (size_t)R * sizeof *e->h_pos);
  memset(e->h_key, 0, (size_t)R * sizeof *e->h_key);
  memset(e->h_temp, 0, (size_t)R * sizeof *e->h_temp);
  memset(e->h_table, 0, (size_t)(R * e->pt_len) * sizeof *e->h_table);
  for (int64_t row = 0; row < R; row++) {
    int64_t i = e->row_seq[row];
    e->live[row] = i >= 0 && e->s[i].n_out > 0 ? i : -1;
    if (e->live[row] < 0) continue;
    const seq *q = &e->s[i];
    e->h_tokens[row] = q->out[q->n_out - 1];
    e->h_pos[row] = (int32_t)(e->reqs[i].prompt_len + q->n_out - 1);
    e->h_key[row] = q->key;
    e->h_temp[row] = e->reqs[i].temperature;
    if (q->n_pages) memcpy(e->h_table + row * e->pt_len, q->pages, (size_t)q->n_pages * sizeof *e->h_table);
    n++;
  }
  return n;
}

/* Uploads the decode rows' images into c's inputs prefix + tokens, pos, page_table,
 * temperature, seed. */
static h3_status upload_decode_rows(engine *e, call_args *c, const char *prefix) {
  char b[32];
  h3_status st = serve_upload(e, c, named(b, sizeof b, prefix, "tokens"), e->h_tokens);
  if (st == H3_OK) st = serve_upload(e, c, named(b, sizeof b, prefix, "pos"), e->h_pos);
  if (st == H3_OK) st = serve_upload(e, c, named(b, sizeof b, prefix, "page_table"), e->h_table);
  if (st == H3_OK) st = serve_upload(e, c, named(b, sizeof b, prefix, "temperature"), e->h_temp);
  if (st == H3_OK) st = serve_upload(e, c, named(b, sizeof b, prefix, "seed"), e->h_key);
  return st;
}

/* Gives each live decode row its token from c's outputs prefix + next / margin (a sync),
 * at the time it arrived; returns that time in *at. */
static h3_status take_decode_rows(engine *e, call_args *c, const char *prefix, double *at) {
  char b[32];
  h3_status st = serve_download(e, c, named(b, sizeof b, prefix, "next"), e->h_next);
  if (st == H3_OK) st = serve_download(e, c, named(b, sizeof b, prefix, "margin"), e->h_margin);
  *at = serve_now(e);
  for (int64_t row = 0; st == H3_OK && row < e->rows; row++)
    if (e->live[row] >= 0) serve_take_token(e, e->live[row], e->h_next[row], e->h_margin[row], *at);
  return st;
}

/* Uploads the host images of a prefill call's inputs (serve_prefill / _spec / _mixed: one
 * prompt; serve_prefill_group: each input holds the group's prompts): tokens, pos0, n_valid,
 * page_table, temperature, seed. */
static h3_status upload_prefill(engine *e, call_args *c, const int32_t *tokens, const int32_t *pos0,
                                const int32_t *valid, const int32_t *table, const float *temp,
                                const int32_t *seed) {
  h3_status st = serve_upload(e, c, "tokens", tokens);
  if (st == H3_OK) st = serve_upload(e, c, "pos0", pos0);
  if (st == H3_OK) st = serve_upload(e, c, "n_valid", valid);
  if (st == H3_OK) st = serve_upload(e, c, "page_table", table);
  if (st == H3_OK) st = serve_upload(e, c, "temperature", temp);
  if (st == H3_OK) st = serve_upload(e, c, "seed", seed);
  return st;
}

/* Uploads chunk [pos0, pos0 + valid) of request i's prompt (padded to the chunk) into c's
 * prefill inputs. */
static h3_status upload_chunk(engine *e, call_args *c, int64_t i, int32_t pos0, int32_t valid) {
  const seq *q = &e->s[i];
  float temp = e->reqs[i].temperature;
  memset(e->h_chunk, 0, (size_t)e->chunk * sizeof *e->h_chunk);
  memcpy(e->h_chunk, e->reqs[i].prompt + pos0, (size_t)valid * sizeof *e->h_chunk);
  memset(e->h_ptable, 0, (size_t)e->pt_len * sizeof *e->h_ptable);
  if (q->n_pages) memcpy(e->h_ptable, q->pages, (size_t)q->n_pages * sizeof *e->h_ptable);
  return upload_prefill(e, c, e->h_chunk, &pos0, &valid, e->h_ptable, &temp, &q->key);
}

/* Prefills request i chunk by chunk and takes its first token. With mixed steps each chunk
 * also carries the decode rows of the requests running (serve_mixed), which take a token. */
static h3_status prefill(engine *e, int64_t i) {
  const h3_request *r = &e->reqs[i];
  /* chunk starts: multiples of the chunk, the last one moved back so that its padding rows
     stay inside the page table (it then recomputes rows already written, to the same K/V) */
  int64_t limit = e->pt_len * e->page - e->chunk;
  h3_status st = H3_OK;
  call_args *c = &e->pf;
  for (int64_t at = 0; st == H3_OK && at < r->prompt_len; at += e->chunk) {
    int32_t pos0 = (int32_t)(at < limit ? at : limit);
    int32_t valid = (int32_t)(r->prompt_len - pos0 < e->chunk ? r->prompt_len - pos0 : e->chunk);
    int64_t rows = e->mixed ? serve_fill_decode_rows(e) : 0;
    c = rows ? &e->mx : e->spec ? &e->sp : &e->pf;
    double t0 = serve_now(e), t1 = t0;
    st = upload_chunk(e, c, i, pos0, valid);
    if (st == H3_OK && rows) st = upload_decode_rows(e, c, "d_");
    if (st == H3_OK) st = h3_runtime_call(e->rt, c->g, c->args, c->results, e->d);
    if (st == H3_OK && rows) st = take_decode_rows(e, c, "d_", &t1);
    e->st->prefill_chunks++;
    e->st->prefill_rows += valid;
    e->st->mixed_chunks += rows > 0;
    e->st->mixed_rows += rows;
    e->st->prefill_seconds += (rows ? t1 : serve_now(e)) - t0;
  }
  int32_t next = 0;
  float margin = 0;
  double t0 = serve_now(e);
  if (st == H3_OK) st = serve_download(e, c, "next", &next);
  if (st == H3_OK) st = serve_download(e, c, "margin", &margin);
  double t1 = serve_now(e);
  e->st->prefill_seconds += t1 - t0;
  if (st == H3_OK) serve_take_token(e, i, next, margin, t1);
  return st;
}

/* One serve_prefill_group call over requests e->g_reqs[0 .. e->group) (each prompt's first
 * chunk, at positions 0 ..): next tokens and margins into g_next / g_margin; *rows = their
 * prompt rows. */
static h3_status group_call(engine *e, int64_t *rows) {
  int64_t P = e->group, C = e->chunk, L = e->pt_len;
  memset(e->g_tokens, 0, (size_t)(P * C) * sizeof *e->g_tokens);
  memset(e->g_table, 0, (size_t)(P * L) * sizeof *e->g_table);
  *rows = 0;
  for (int64_t p = 0; p < P; p++) {
    const h3_request *r = &e->reqs[e->g_reqs[p]];
    const seq *q = &e->s[e->g_reqs[p]];
    int64_t n = r->prompt_len < C ? r->prompt_len : C;
    memcpy(e->g_tokens + p * C, r->prompt, (size_t)n * sizeof *e->g_tokens);
    if (q->n_pages) memcpy(e->g_table + p * L, q->pages, (size_t)q->n_pages * sizeof *e->g_table);
    e->g_pos0[p] = 0;
    e->g_valid[p] = (int32_t)n;
    e->g_key[p] = q->key;
    e->g_temp[p] = r->temperature;
    *rows += n;
  }
  call_args *c = &e->pg;
  h3_status st = upload_prefill(e, c, e->g_tokens, e->g_pos0, e->g_valid, e->g_table, e->g_temp, e->g_key);
  if (st == H3_OK) st = h3_runtime_call(e->rt, c->g, c->args, c->results, e->d);
  if (st == H3_OK) st = serve_download(e, c, "next", e->g_next);
  if (st == H3_OK) st = serve_download(e, c, "margin", e->g_margin);
  return st;
}

/* Prefills the gathered group (every prompt one chunk) and gives each request its first
 * token. */
static h3_status prefill_group(engine *e) {
  int64_t rows;
  double t0 = serve_now(e);
  h3_status st = group_call(e, &rows);
  double t1 = serve_now(e);
  e->st->prefill_groups++;
  e->st->prefill_rows += rows;
  e->st->group_seconds += t1 - t0;
  for (int64_t p = 0; st == H3_OK && p < e->group; p++)
    serve_take_token(e, e->g_reqs[p], e->g_next[p], e->g_margin[p], t1);
  return st;
}

/* One decode step of every running row. */
static h3_status decode_step(engine *e) {
  int64_t running = serve_fill_decode_rows(e);
  double t0 = serve_now(e), t1;
  h3_status st = upload_decode_rows(e, &e->dc, "");
  if (st == H3_OK) st = h3_runtime_call(e->rt, e->dc.g, e->dc.args, e->dc.results, e->d);
  if (st == H3_OK) st = take_decode_rows(e, &e->dc, "", &t1);
  if (st != H3_OK) return st;
  e->st->decode_seconds += t1 - t0;
  e->st->decode_steps++;
  e->st->decode_rows += running;
  return H3_OK;
}

/* Runs each graph as serving will, before the clock starts: the backend loads its kernels,
 * tunes its GEMMs and records the decode step (CUDA graphs: a plain run, then a captured
 * one). All-zero page tables and no request: every row writes page 0, which no request
 * owns; a chunk of request 0's prompt (or padding) stands for the chunks. */
static h3_status warm_up(engine *e) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  seq blank = {.row = -1};
  seq keep = e->s[0];
  e->s[0] = blank; /* no pages: an all-zero table */
  int32_t valid = (int32_t)(e->reqs[0].prompt_len < e->chunk ? e->reqs[0].prompt_len : e->chunk);
  h3_status st = H3_OK;
  for (int k = 0; st == H3_OK && k < (e->mixed ? 2 : 1); k++) {
    call_args *c = k ? &e->mx : e->spec ? &e->sp : &e->pf;
    serve_fill_decode_rows(e);
    st = upload_chunk(e, c, 0, 0, valid);
    if (st == H3_OK && k) st = upload_decode_rows(e, c, "d_");
    if (st == H3_OK) st = h3_runtime_call(e->rt, c->g, c->args, c->results, e->d);
  }
  if (st == H3_OK && e->group) { /* request 0's blank state in every slot: page 0 only */
    int64_t rows;
    for (int64_t p = 0; p < e->group; p++) e->g_reqs[p] = 0;
    st = group_call(e, &rows);
  }
  e->s[0] = keep;
  for (int k = 0; st == H3_OK && k < 3; k++) { /* no row running: every row is padding */
    st = e->spec ? serve_spec_round(e) : decode_step(e);
    e->st->decode_steps = e->st->decode_rows = 0;
    e->st->decode_seconds = 0;
  }
  if (e->spec) serve_spec_stats_clear(e->st);
  h3_runtime_reset_stats(e->rt); /* a --profile covers the serving, not the warm-up */
  clock_gettime(CLOCK_MONOTONIC, &t1);
  e->st->warmup_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return st;
}

/* Refuses the requests that can never run; 0 when request i may. */
static int refuse(engine *e, int64_t i) {
  const h3_request *r = &e->reqs[i];
  char msg[512];
  const char *hint;
  if (h3_request_check(r, e->vocab, e->max_ctx, msg, sizeof msg, &hint) == H3_OK) {
    int64_t need = serve_pages_needed(e, r), have = h3_page_pool_capacity(&e->pool);
    if (need <= have) return 0;
    snprintf(msg, sizeof msg,
             "request '%s' needs %lld KV pages (%lld tokens of %lld per page); the pool holds %lld", r->id,
             (long long)need, (long long)(r->prompt_len + r->max_new_tokens), (long long)e->page,
             (long long)have);
    hint = "raise --kv-pages, or compile the plan with more seqs";
  }
  finish(e, i, H3_FINISH_ERROR, msg, hint);
  return 1;
}

typedef struct {
  double arrival;
  int64_t index;
} arrival_key;

static int by_arrival(const void *a, const void *b) {
  const arrival_key *x = a, *y = b;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The plan's serve_prefill_group, when it takes P >= 2 prompts of the chunk's rows and P
 * rows may run at once (concurrency >= P): its call and host images (e->group = P); none
 * (e->group = 0) otherwise. */
static h3_status setup_group(engine *e, const h3_module *m) {
  const h3_graph *g = h3_module_graph(m, "serve_prefill_group");
  int at = g ? input_index(g, "tokens") : -1;
  const h3_type *t = at >= 0 ? &g->inputs[at]->type : NULL;
  if (!t || t->rank != 2 || t->dims[0] < 2 || t->dims[0] > e->concurrency) return H3_OK;
  if (t->dims[1] != e->chunk) {
    h3_diag_error(e->d, g->span, "compile the plan from this h3's models/minimax_m3_1.g",
                  "graph 'serve_prefill_group' takes prompts of %lld rows, serve_prefill chunks of %lld",
                  (long long)t->dims[1], (long long)e->chunk);
    return H3_ERR;
  }
  static const char *const pg[] = {"tokens", "pos0", "n_valid", "page_table", "temperature",
                                   "seed", "k_cache", "v_cache", "ik_cache"};
  if (serve_setup_call(e, m, "serve_prefill_group", pg, 9, &e->pg) != H3_OK) return H3_ERR;
  int64_t P = e->group = t->dims[0];
  e->g_tokens = calloc((size_t)(P * e->chunk), sizeof *e->g_tokens);
  e->g_table = calloc((size_t)(P * e->pt_len), sizeof *e->g_table);
  e->g_pos0 = calloc((size_t)P, sizeof *e->g_pos0);
  e->g_valid = calloc((size_t)P, sizeof *e->g_valid);
  e->g_key = calloc((size_t)P, sizeof *e->g_key);
  e->g_next = calloc((size_t)P, sizeof *e->g_next);
  e->g_temp = calloc((size_t)P, sizeof *e->g_temp);
  e->g_margin = calloc((size_t)P, sizeof *e->g_margin);
  e->g_reqs = calloc((size_t)P, sizeof *e->g_reqs);
  if (!e->g_tokens || !e->g_table || !e->g_pos0 || !e->g_valid || !e->g_key || !e->g_next ||
      !e->g_temp || !e->g_margin || !e->g_reqs)
    return H3_ERR;
  e->st->group_prompts = P;
  return H3_OK;
}

static h3_status setup(engine *e, const h3_module *m) {
  static const char *const pf[] = {"tokens", "pos0", "n_valid", "page_table", "temperature",
                                   "seed", "k_cache", "v_cache", "ik_cache"};
  static const char *const dc[] = {"tokens", "pos", "page_table", "temperature", "seed",
                                   "k_cache", "v_cache", "ik_cache"};
  static const char *const mx[] = {"tokens", "pos0", "n_valid", "page_table", "temperature",
                                   "seed", "d_tokens", "d_pos", "d_page_table", "d_temperature",
                                   "d_seed", "k_cache", "v_cache", "ik_cache"};
  e->mixed = e->st->mixed = e->o->mixed;
  e->spec = e->o->speculative;
  if (e->mixed && e->spec) {
    h3_diag_error(e->d, (h3_span){0}, "drop one of the two flags",
                  "--mixed-steps and --speculative cannot be combined yet");
    return H3_ERR;
  }
  if (serve_setup_call(e, m, "serve_prefill", pf, 9, &e->pf) != H3_OK ||
      serve_setup_call(e, m, "serve_decode", dc, 8, &e->dc) != H3_OK ||
      (e->mixed && serve_setup_call(e, m, "serve_mixed", mx, 14, &e->mx) != H3_OK))
    return H3_ERR;
  e->chunk = input_type(&e->pf, "tokens")->dims[0];
  e->pt_len = input_type(&e->pf, "page_table")->dims[0];
  e->rows = input_type(&e->dc, "tokens")->dims[0];
  if (e->spec && serve_spec_setup(e, m) != H3_OK) return H3_ERR;
  const h3_type *kc = &e->caches[0].type;
  e->page = kc->dims[2];
  e->vocab = h3_module_config(m, "vocab", 0);
  e->max_ctx = h3_module_config(m, "max_ctx", 0);
  h3_span none = {0};
  e->concurrency = e->o->concurrency ? e->o->concurrency : e->rows;
  if (e->concurrency < 1 || e->concurrency > e->rows) {
    char hint[128];
    snprintf(hint, sizeof hint, "compile the plan with --set seqs=%lld", (long long)e->concurrency);
    h3_diag_error(e->d, none, hint, "--concurrency %lld: the plan decodes at most %lld rows at once",
                  (long long)e->concurrency, (long long)e->rows);
    return H3_ERR;
  }
  if (!e->mixed && !e->spec && !e->o->no_prefill_group && setup_group(e, m) != H3_OK) return H3_ERR;
  int64_t pages = kc->dims[1];
  if (e->o->kv_pages > pages) {
    h3_diag_error(e->d, none, "compile the plan with more seqs for a larger pool",
                  "--kv-pages %lld: the plan's caches hold %lld pages", (long long)e->o->kv_pages,
                  (long long)pages);
    return H3_ERR;
  }
  if (h3_page_pool_init(&e->pool, e->o->kv_pages ? e->o->kv_pages : pages, e->d) != H3_OK)
    return H3_ERR;
  for (int k = 0; k < 5; k++)
    if (e->caches[k].data) /* k/v/ik: pages in dim 1; kd/vd: in dim 0 */
      e->st->page_bytes += h3_type_bytes(&e->caches[k].type) / e->caches[k].type.dims[k < 3];
  int64_t R = e->rows, T = R * e->pt_len > e->chunk ? R * e->pt_len : e->chunk;
  e->h_tokens = calloc((size_t)(T + 1), sizeof *e->h_tokens);
  e->h_table = calloc((size_t)(T + 1), sizeof *e->h_table);
  e->h_pos = calloc((size_t)R, sizeof *e->h_pos);
  e->h_key = calloc((size_t)R, sizeof *e->h_key);
  e->h_next = calloc((size_t)R, sizeof *e->h_next);
  e->h_temp = calloc((size_t)R, sizeof *e->h_temp);
  e->h_chunk = calloc((size_t)e->chunk, sizeof *e->h_chunk);
  e->h_ptable = calloc((size_t)e->pt_len, sizeof *e->h_ptable);
  e->live = calloc((size_t)R, sizeof *e->live);
  e->h_margin = calloc((size_t)R, sizeof *e->h_margin);
  e->row_seq = malloc((size_t)R * sizeof *e->row_seq);
  e->s = calloc((size_t)e->n + 1, sizeof *e->s);
  if (!e->h_tokens || !e->h_table || !e->h_pos || !e->h_key || !e->h_next || !e->h_temp ||
      !e->h_margin || !e->h_chunk || !e->h_ptable || !e->live || !e->row_seq || !e->s)
    return H3_ERR;
  for (int64_t r = 0; r < R; r++) e->row_seq[r] = -1;
  e->st->concurrency = e->concurrency;
  e->st->chunk_rows = e->chunk;
  e->st->pool_pages = h3_page_pool_capacity(&e->pool);
  e->st->page_tokens = e->page;
  return H3_OK;
}

/* The serving loop over the requests in arrival order. */
static h3_status serve(engine *e, const int64_t *order) {
  int64_t *queue = malloc((size_t)e->n * sizeof *queue), head = 0, tail = 0, next = 0;
  if (!queue) return H3_ERR;
  h3_status st = H3_OK;
  while (st == H3_OK && e->done < e->n) {
    double t = serve_now(e);
    for (; next < e->n && e->reqs[order[next]].arrival <= t; next++)
      if (e->s[order[next]].state == WAITING) queue[tail++] = order[next];
    int64_t running = 0;
    for (int64_t row = 0; row < e->concurrency; row++) running += e->row_seq[row] >= 0;
    /* admission, first come first served; each admitted request is prefilled at once, or
       gathered into a prefill group (run when full; the rest one by one after admission) */
    int64_t gathered = 0;
    while (st == H3_OK && head < tail && running < e->concurrency) {
      int64_t i = queue[head];
      seq *q = &e->s[i];
      int64_t need = serve_pages_needed(e, &e->reqs[i]);
      if (!h3_page_pool_take(&e->pool, need, q->pages)) break;
      head++;
      q->n_pages = need;
      int64_t row = 0;
      while (e->row_seq[row] >= 0) row++;
      q->row = row;
      q->state = RUNNING;
      e->row_seq[row] = i;
      running++;
      if (e->group && e->reqs[i].prompt_len <= e->chunk) {
        e->g_reqs[gathered++] = i;
        if (gathered < e->group) continue;
        st = prefill_group(e);
        for (int64_t p = 0; p < gathered; p++) running -= e->s[e->g_reqs[p]].state != RUNNING;
        gathered = 0;
        continue;
      }
      st = prefill(e, i);
      running -= q->state != RUNNING;
    }
    for (int64_t p = 0; st == H3_OK && p < gathered; p++) {
      st = prefill(e, e->g_reqs[p]);
      running -= e->s[e->g_reqs[p]].state != RUNNING;
    }
    if (st == H3_OK && running == 0 && head < tail) { /* cannot happen: checked at the start */
      h3_diag_error(e->d, (h3_span){0}, NULL, "request '%s' does not fit the empty KV pool",
                    e->reqs[queue[head]].id);
      st = H3_ERR;
    }
    if (st == H3_OK && running > 0) st = e->spec ? serve_spec_round(e) : decode_step(e);
    else if (st == H3_OK && head == tail && next < e->n) { /* idle until the next arrival */
      double wait = e->reqs[order[next]].arrival - serve_now(e);
      if (wait > 0.05) wait = 0.05;
      if (wait > 0) nanosleep(&(struct timespec){0, (long)(wait * 1e9)}, NULL);
    }
    if (e->o->progress) {
      int64_t active = 0;
      for (int64_t row = 0; row < e->concurrency; row++) active += e->row_seq[row] >= 0;
      e->o->progress(e->o->progress_ctx, e->done, e->n, active, tail - head,
                     e->st->output_tokens, serve_now(e));
    }
  }
  free(queue);
  return st;
}

h3_status h3_serve_run(h3_runtime *rt, const h3_module *m, const h3_request *reqs, int64_t n,
                       const h3_serve_options *o, h3_serve_stats *stats, h3_diag *d) {
  *stats = (h3_serve_stats){.requests = n};
  engine e = {.rt = rt, .reqs = reqs, .n = n, .o = o, .st = stats, .d = d};
  int64_t *order = malloc((size_t)(n + 1) * sizeof *order);
  h3_status st = order ? setup(&e, m) : H3_ERR;
  for (int64_t i = 0; st == H3_OK && i < n; i++) {
    e.s[i].row = -1;
    e.s[i].key = sampling_key(&e, &reqs[i]);
    order[i] = i;
  }
  arrival_key *keys = st == H3_OK ? malloc((size_t)(n + 1) * sizeof *keys) : NULL;
  if (st == H3_OK && !keys) st = H3_ERR;
  for (int64_t i = 0; keys && i < n; i++) keys[i] = (arrival_key){reqs[i].arrival, i};
  if (keys) qsort(keys, (size_t)n, sizeof *keys, by_arrival);
  for (int64_t i = 0; keys && i < n; i++) order[i] = keys[i].index;
  free(keys);
  if (st == H3_OK && n > 0) st = warm_up(&e);
  clock_gettime(CLOCK_MONOTONIC, &e.t0);
  for (int64_t i = 0; st == H3_OK && i < n; i++) {
    if (refuse(&e, i)) continue;
    stats->prompt_tokens += reqs[i].prompt_len;
    e.s[i].pages = malloc((size_t)serve_pages_needed(&e, &reqs[i]) * sizeof *e.s[i].pages);
    e.s[i].out = malloc((size_t)reqs[i].max_new_tokens * sizeof *e.s[i].out);
    e.s[i].at = malloc((size_t)reqs[i].max_new_tokens * sizeof *e.s[i].at);
    e.s[i].margins = malloc((size_t)reqs[i].max_new_tokens * sizeof *e.s[i].margins);
    if (!e.s[i].pages || !e.s[i].out || !e.s[i].at || !e.s[i].margins) {
      h3_diag_error(d, (h3_span){0}, "free memory, or lower the requests' max_new_tokens",
                    "out of host memory for request '%s'", reqs[i].id);
      st = H3_ERR;
    }
  }
  if (st == H3_OK) st = serve(&e, order);
  if (st != H3_OK && e.s) { /* serving failed: every request not finished fails with it */
    const char *why = d->errors ? "serving failed (see the error above)" : "serving failed";
    for (int64_t i = 0; i < n; i++)
      if (e.s[i].state != DONE)
        finish(&e, i, H3_FINISH_ERROR, why, "the first error above says why serving stopped");
  }
  stats->pool_peak_pages = e.pool.peak_used;
  for (int64_t i = 0; e.s && i < n; i++) {
    free(e.s[i].pages);
    free(e.s[i].out);
    free(e.s[i].at);
    free(e.s[i].margins);
  }
  if (e.pf.g) serve_free_call(&e, &e.pf);
  if (e.dc.g) serve_free_call(&e, &e.dc);
  if (e.mx.g) serve_free_call(&e, &e.mx);
  if (e.pg.g) serve_free_call(&e, &e.pg);
  serve_spec_free(&e);
  for (int k = 0; k < 5; k++) h3_runtime_buffer_free(rt, &e.caches[k]);
  h3_page_pool_free(&e.pool);
  free(e.h_tokens);
  free(e.h_table);
  free(e.h_pos);
  free(e.h_key);
  free(e.h_next);
  free(e.h_temp);
  free(e.h_margin);
  free(e.h_chunk);
  free(e.h_ptable);
  free(e.g_tokens);
  free(e.g_table);
  free(e.g_pos0);
  free(e.g_valid);
  free(e.g_key);
  free(e.g_next);
  free(e.g_temp);
  free(e.g_margin);
  free(e.g_reqs);
  free(e.live);
  free(e.row_seq);
  free(e.s);
  free(order);
  return st;
}

void h3_serve_stats_free(h3_serve_stats *s) {
  free(s->ttft);
  free(s->tpot);
  free(s->itl);
  free(s->accept_hist);
  *s = (h3_serve_stats){0};
}
