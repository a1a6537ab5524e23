/* gpu_ranks.h: the processes of `h3exec --backend cuda --gpus N` (docs/parallel.md).
 *
 * h3exec forks N rank processes and stays as their supervisor. Rank r runs the plan on GPU r
 * with its own cuda backend, joined to the ranks' NCCL communicator; rank 0 alone writes the
 * outputs, the trace and the report, as the cpu backend's thread ranks do. Nothing may touch
 * CUDA before the fork (a forked process cannot use its parent's CUDA state): the plan is
 * read, the backends are made after.
 *
 * The NCCL id: one pipe per rank 1 .. N-1, made before the fork; rank 0 makes the id once
 * its backend exists and writes it into each pipe; rank j reads it from its own. No network
 * and no file. A rank whose pipe closes before the id came (rank 0 failed first) fails
 * saying so.
 *
 * Failure: the supervisor waits for every rank. When one fails (a nonzero exit status or a
 * signal) it stops the others, which may be waiting for it inside a collective (SIGTERM,
 * SIGKILL 5 s later), and reports how each rank ended; each rank prints its own errors
 * first, as "h3exec (rank r): error: ...". A rank dies with the supervisor
 * (PR_SET_PDEATHSIG), so no rank outlives an interrupted run.
 */
#ifndef H3_CLI_GPU_RANKS_H
#define H3_CLI_GPU_RANKS_H

#include "h3/backend.h"

typedef struct gpu_ranks gpu_ranks;

/* Forks ranks 0 .. n-1. Returns in the supervisor with *rank = -1 and in rank r's process
 * with *rank = r (d's program then names the rank). NULL after reporting, in the supervisor
 * (a rank forked by then is stopped and reaped). */
gpu_ranks *gpu_ranks_fork(int n, int *rank, h3_diag *d);
/* Supervisor: waits for every rank, stopping the others once one fails, and reports each
 * rank that did not exit with status 0. Returns h3exec's exit status: 0 when every rank
 * exited 0, else 1. Frees g. */
int gpu_ranks_wait(gpu_ranks *g, h3_diag *d);
/* Rank r: its cuda backend on device r (o: as for h3_backend_create), joined to the ranks'
 * communicator. NULL after reporting. */
h3_backend *gpu_ranks_backend(gpu_ranks *g, const h3_backend_options *o, h3_diag *d);
/* Rank r: closes what it holds of the pipes. */
void gpu_ranks_free(gpu_ranks *g);

#endif
