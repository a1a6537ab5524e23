/* serve.h: the M3.1 serving engine (docs/running.md "Serving").
 *
 * Many requests at once on one runtime: a KV page pool, continuous batching over the
 * plan's `serve_decode` graph (one row per running request, padded to the plan's `seqs`
 * rows) and chunked prefill through `serve_prefill` (the plan's `prompt_len` rows per
 * chunk). Requests arrive at their `arrival` time; a waiting request is admitted when a row
 * is free and the pool holds the pages of its whole sequence (prompt + max_new_tokens,
 * reserved at admission, so a running request never waits for memory); admitted requests
 * are prefilled before the next decode step (prefill first; with `mixed`, each chunk also
 * advances the running requests by a token; the plan's `serve_prefill_group` graph, when it
 * takes two or more prompts, prefills that many admitted one-chunk prompts in one call,
 * every weight read once for all of them); a request leaves the batch at
 * the step that gives its EOS or its last token, and its pages go back to the pool at once.
 * Tokens are sampled on the device (the `sample` op) from a key that depends only on the
 * request (its seed, or the run's seed and its id) and the token's position, so a request's
 * tokens do not depend on what else is in the batch.
 */
#ifndef H3_SERVE_H
#define H3_SERVE_H

#include "h3/runtime.h"
#include "h3/serve_io.h"

/* ---- the KV page pool (runtime/serve_pool.c) ------------------------------------------------ */
/* Physical pages 1 .. n_pages - 1 of the caches (page 0 is reserved: padding rows write
 * there); a free list, lowest pages first. */
typedef struct {
  int32_t *free; /* stack of free pages */
  int64_t n_free, n_pages, peak_used;
} h3_page_pool;

h3_status h3_page_pool_init(h3_page_pool *p, int64_t n_pages, h3_diag *d);
void h3_page_pool_free(h3_page_pool *p);
/* Usable pages (n_pages - 1) and pages in use now. */
int64_t h3_page_pool_capacity(const h3_page_pool *p);
int64_t h3_page_pool_used(const h3_page_pool *p);
/* Takes n pages into out[0 .. n); false (nothing taken) when fewer are free. */
bool h3_page_pool_take(h3_page_pool *p, int64_t n, int32_t *out);
/* Returns n pages taken before. */
void h3_page_pool_give(h3_page_pool *p, int64_t n, const int32_t *pages);

/* ---- the engine (runtime/serve.c) ------------------------------------------------------------ */
/* One finished request, as the engine hands it out (tokens and times valid during the
 * callback only). Times in seconds from the start of serving (the request's arrival is
 * req->arrival on the same clock). */
typedef struct {
  const h3_request *req;
  int64_t index;              /* the request's index in the list */
  const int32_t *tokens;      /* generated ids */
  int64_t n_tokens;
  const double *token_at;     /* [n_tokens] when each token reached the host */
  const float *margins;       /* [n_tokens] each token's decision margin (sample_tokens) */
  h3_finish_reason finish;
  const char *error;          /* the message of a refused / failed request, else NULL */
  const char *hint;           /* with error: what to change */
} h3_serve_result;

typedef void (*h3_serve_finished_fn)(void *ctx, const h3_serve_result *r);
/* Called after every engine step: requests finished (done, of total), rows running,
 * requests waiting, output tokens so far, seconds since the start. */
typedef void (*h3_serve_progress_fn)(void *ctx, int64_t done, int64_t total, int64_t running,
                                     int64_t waiting, int64_t tokens, double seconds);

typedef struct {
  int64_t concurrency;   /* rows decoded at once: 1 .. the plan's seqs (0: seqs) */
  int64_t kv_pages;      /* pages of the pool to use, page 0 included (0: all the caches') */
  uint64_t seed;         /* sampling keys of requests without a seed of their own */
  bool mixed;            /* prefill chunks carry the running rows' decode (serve_mixed) */
  bool no_prefill_group; /* prefill prompts one by one even where the plan has a group graph */
  bool speculative;      /* DSpark rounds (serve_prefill_spec, serve_draft, serve_verify)
                            instead of decode steps */
  /* BENCH ONLY (speculative): the draft's first force_accept - 1 tokens of every round are
     replaced by the oracle's tokens at those output positions (a plain greedy run's) and the
     round takes the oracle's next force_accept tokens whatever its verify decided (on the
     GPU the verify's rows part from decode's at near-ties), so every round advances by
     force_accept; 0: off */
  int64_t force_accept;
  const h3_oracle *oracle;
  h3_serve_finished_fn finished;
  void *finished_ctx;
  h3_serve_progress_fn progress;
  void *progress_ctx;
} h3_serve_options;

/* What a serving run measured (filled by h3_serve_run, freed by h3_serve_stats_free). */
typedef struct {
  double warmup_seconds;           /* the untimed warm-up before serving */
  int64_t requests, completed, failed;
  int64_t prompt_tokens, output_tokens;
  double seconds;                  /* from the start to the last request's end */
  double *ttft, *tpot, *itl;       /* seconds: per request with a first token / with >= 2
                                      tokens; per gap between consecutive tokens */
  int64_t n_ttft, n_tpot, n_itl;
  int64_t decode_steps, decode_rows; /* steps run and running rows summed over them */
  int64_t chunk_rows;              /* rows of a prefill chunk (the plan's prompt_len) */
  int64_t prefill_chunks, prefill_rows; /* chunks run and their prompt rows (no padding) */
  int64_t mixed_chunks, mixed_rows; /* chunks that carried decode rows, and those rows */
  int64_t group_prompts;           /* prompts per prefill group (0: no groups in this run) */
  int64_t prefill_groups;          /* prefill groups run (their prompts are not chunks) */
  double group_seconds;            /* host time around the prefill groups */
  bool mixed;                      /* the schedule: mixed steps */
  double decode_seconds, prefill_seconds; /* host time around each kind of call */
  /* speculative serving: rounds run, request-rounds (running requests summed over them),
     accept_hist[n] = request-rounds that accepted n of the gamma draft tokens (n + 1
     tokens emitted before EOS / the length cut), and host time around the drafts, the
     verifies (with the draft K/V commit inside) and the acceptance */
  bool speculative;
  int64_t gamma, spec_rounds, spec_seq_rounds;
  int64_t forced_acceptance; /* the bench-only force_accept in effect (0: none) */
  int64_t forced_agreed;     /* forced request-rounds whose own acceptance agreed */
  int64_t *accept_hist; /* [gamma + 1] */
  double draft_seconds, verify_seconds, accept_seconds;
  int64_t concurrency, pool_pages, pool_peak_pages, page_tokens;
  int64_t page_bytes;              /* cache bytes of one page over every layer and cache */
} h3_serve_stats;

/* Serves requests reqs[0 .. n) with the module's serve_prefill / serve_decode graphs (or,
 * speculative, serve_prefill_spec / serve_draft / serve_verify) on rt
 * (the runtime of an M3.1 plan). Once serving has started, every request ends in exactly
 * one `finished` callback: refused ones (h3_request_check, more pages than the pool) at
 * once with H3_FINISH_ERROR, the others when they end. Returns H3_ERR when serving cannot
 * start (no serve graphs, concurrency or pool out of range: no callback) or fails (a device
 * error: every request not finished then ends with H3_FINISH_ERROR). */
h3_status h3_serve_run(h3_runtime *rt, const h3_module *m, const h3_request *reqs, int64_t n,
                       const h3_serve_options *o, h3_serve_stats *stats, h3_diag *d);
void h3_serve_stats_free(h3_serve_stats *s);

/* The report (runtime/serve_report.c): a human table, and the same as one JSON object
 * (engine, concurrency, requests, tokens, duration, throughput, TTFT / TPOT / ITL
 * percentiles in ms, the pool) on one line. */
void h3_serve_report_print(FILE *out, const h3_serve_stats *s, const char *device);
void h3_serve_report_json(FILE *out, const h3_serve_stats *s, const char *device);

#endif
