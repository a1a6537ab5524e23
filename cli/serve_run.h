/* serve_run.h: h3exec's serving mode (--requests / --random-prompts): the request list,
 * the results file, the progress line and the report around h3_serve_run. */
#ifndef H3_CLI_SERVE_RUN_H
#define H3_CLI_SERVE_RUN_H

#include "h3/serve.h"

typedef struct {
  const char *requests; /* JSON Lines file, "-" for standard input */
  const char *out;      /* results JSON Lines, "-" for standard output, or NULL */
  const char *summary;  /* the report as one JSON object, or NULL */
  int64_t random_prompts, prompt_len, output_len; /* --random-prompts N: L prompt, M new */
  double temperature;   /* of the random requests */
  double request_rate;  /* requests per second (Poisson arrivals); 0: as the file says */
  int64_t concurrency, kv_pages;
  uint64_t seed;
  bool margins; /* results give each token's decision margin */
  bool mixed;   /* --mixed-steps */
  bool no_prefill_group; /* --no-prefill-group */
  bool speculative; /* --speculative dspark */
  int64_t force_accept;  /* --spec-force-accept A:FILE (bench only): A, and */
  const char *oracle;    /* FILE, a plain greedy run's results */
} serve_flags;

/* True when the flags ask for serving. */
bool serve_wanted(const serve_flags *f);
/* Runs the serving mode on rt (an M3.1 plan's runtime on backend b). Exit status: 0 when
 * every request completed, 1 when any failed or serving could not run. */
int serve_run(const serve_flags *f, h3_runtime *rt, const h3_module *m, h3_backend *b,
              h3_diag *d);

#endif
