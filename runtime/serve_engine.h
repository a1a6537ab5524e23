/* serve_engine.h: the serving engine's state and the helpers that runtime/serve.c (the
 * loop, prefill and plain decode) and runtime/serve_spec.c (speculative rounds) share.
 * Internal to the runtime. */
#ifndef H3_SERVE_ENGINE_H
#define H3_SERVE_ENGINE_H

#include "h3/serve.h"

#include <time.h>

enum { WAITING, RUNNING, DONE };

typedef struct {
  int state;
  int64_t row; /* decode row while running */
  int32_t *pages, *out;
  double *at;     /* [max_new_tokens]: when each token reached the host */
  float *margins; /* [max_new_tokens]: each token's decision margin */
  int64_t n_pages, n_out;
  int32_t key; /* sampling key */
} seq;

/* A graph's argument buffers, by input. */
typedef struct {
  const h3_graph *g;
  h3_tensor *args, *results;
} call_args;

typedef struct {
  h3_runtime *rt;
  const h3_request *reqs;
  int64_t n;
  const h3_serve_options *o;
  h3_serve_stats *st;
  h3_diag *d;
  call_args pf, dc, mx; /* serve_prefill, serve_decode, serve_mixed (mx.g NULL: none) */
  call_args pg;         /* serve_prefill_group (pg.g NULL: prompts are prefilled one by one) */
  call_args sp, sd, sv;  /* speculative: serve_prefill_spec, serve_draft, serve_verify */
  bool mixed;            /* chunks carry the decode rows (serve_mixed) */
  bool spec;             /* speculative rounds instead of decode steps */
  int64_t gamma;         /* draft tokens per round (spec) */
  int64_t chunk, pt_len, rows, page, vocab, max_ctx, concurrency;
  int64_t group; /* prompts per serve_prefill_group call (0: no group graph in use) */
  h3_tensor caches[5]; /* k_cache, v_cache, ik_cache; kd_cache, vd_cache (spec) */
  /* host images of the arguments (decode: rows entries; tables rows * pt_len) */
  int32_t *h_tokens, *h_pos, *h_table, *h_key, *h_next, *h_chunk, *h_ptable;
  float *h_temp, *h_margin;
  /* a prefill group's images: group * chunk tokens, group * pt_len table entries, group
     pos0 / n_valid / seed / temperature entries */
  int32_t *g_tokens, *g_table, *g_pos0, *g_valid, *g_key, *g_next;
  float *g_temp, *g_margin;
  int64_t *g_reqs; /* the requests gathered for the next group */
  /* speculative: the verify rows' images (rows * (gamma + 1) entries; their page tables are
     h_table's), each running row's draft (rows * gamma) and its accepted count (v_n, rows); the
     verify's emitted tokens and margins land in v_next / v_margin */
  int32_t *v_tokens, *v_pos, *v_next, *v_draft, *v_n;
  float *v_margin;
  int64_t *live; /* by row: the request a decode call feeds, or -1 (serve_fill_decode_rows) */
  seq *s;
  int64_t *row_seq; /* by row: the running request, or -1 */
  h3_page_pool pool;
  struct timespec t0;
  int64_t done;
  int64_t cap_ttft, cap_tpot, cap_itl;
} engine;

double serve_now(const engine *e);
/* Uploads host into c's input `name`; downloads c's output `name` of its last call. */
h3_status serve_upload(engine *e, call_args *c, const char *name, const void *host);
h3_status serve_download(engine *e, call_args *c, const char *name, void *host);
/* Appends token t (made at time `at`) to request i; ends it at EOS or its last token.
 * Returns true when it ended. */
bool serve_take_token(engine *e, int64_t i, int32_t t, float margin, double at);
/* The host images of the decode rows (h_tokens, h_pos, h_table, h_key, h_temp): each row
 * whose request has a token (not one being prefilled) feeds its newest token at its
 * position; the others are padding (token 0 at position 0, an all-zero page table).
 * live[row] keeps the request fed (-1: padding). Returns how many. */
int64_t serve_fill_decode_rows(engine *e);

/* runtime/serve_spec.c */
/* Speculative serving's graphs (serve_prefill_spec, serve_draft, serve_verify), gamma and
 * the verify rows' host images; called by setup when e->spec. */
h3_status serve_spec_setup(engine *e, const h3_module *m);
void serve_spec_free(engine *e);
/* One DSpark round (§5.3) of every running request: a draft per request, one verify of all
 * of them, greedy acceptance on the host, the draft K/V committed inside the verify. */
h3_status serve_spec_round(engine *e);
/* Zeroes the speculative counters (after the warm-up's rounds). */
void serve_spec_stats_clear(h3_serve_stats *st);
/* Pages of request r: its prompt, new tokens and, speculative, the gamma rows a verify
 * writes past the last token. */
int64_t serve_pages_needed(const engine *e, const h3_request *r);

/* setup_call's shared part: graph `name` with exactly the inputs names[0 .. n_names); the
 * caches get the engine's buffers, every other input a buffer of its own. */
h3_status serve_setup_call(engine *e, const h3_module *m, const char *name,
                           const char *const *names, int n_names, call_args *c);
void serve_free_call(engine *e, call_args *c);

#endif
