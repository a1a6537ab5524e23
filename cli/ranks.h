/* ranks.h: the ranks 1 .. N-1 of `h3exec --backend cpu --gpus N` (docs/parallel.md).
 *
 * Rank 0 is h3exec's own run on the calling thread (it alone writes outputs, traces and the
 * report); each other rank is a thread with its own cpu backend (rank r of the shared
 * h3_comm) and runtime over the same module, weights and inputs, running the graph as many
 * times as rank 0 does (warm-up and measured runs), its outputs dropped. The collectives
 * keep the ranks in step; a rank that fails aborts the communicator, so the others fail at
 * their next collective instead of waiting.
 */
#ifndef H3_CLI_RANKS_H
#define H3_CLI_RANKS_H

#include "h3/comm.h"
#include "h3/runtime.h"

typedef struct ranks ranks;

typedef struct {
  const h3_module *m;
  const h3_graph *g;
  const h3_weights *w;      /* NULL: random weights made by each rank's runtime */
  const h3_host_tensor *in; /* g's inputs, read by every rank */
  h3_comm *comm;            /* of N ranks; these threads are ranks 1 .. N-1 */
  int threads;              /* cpu worker threads per rank */
  uint64_t seed;
  int runs;                 /* runs of g per rank */
} ranks_options;

/* Starts ranks 1 .. N-1; NULL after reporting (then no thread runs). */
ranks *ranks_start(const ranks_options *o, h3_diag *d);
/* Waits for every rank; their errors join d, each prefixed with its rank. H3_ERR when one
 * failed. Frees the handle. */
h3_status ranks_finish(ranks *r, h3_diag *d);

#endif
