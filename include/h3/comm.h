/* comm.h: the communicator of N ranks that run as threads of one process (the cpu
 * backend's emulation of N GPUs; docs/parallel.md).
 *
 * Every rank runs the same plan on its own backend and runtime; the cpu backend of rank r
 * holds the communicator and r (h3_backend_options.comm / .rank) and runs the collective
 * ops of ops.def through it. A collective is two barriers: each rank publishes its input
 * buffer, waits for all N, reads what it needs from the others' buffers into its own
 * result, and waits again before any rank may reuse its input. The ranks must call the
 * collectives in one order (they run one plan, so they do).
 *
 * A rank that fails calls h3_comm_abort: every rank waiting in a barrier, and every later
 * collective, then fails with "another rank failed" instead of waiting forever.
 */
#ifndef H3_COMM_H
#define H3_COMM_H

#include "h3/support.h"

#include <stdbool.h>

typedef struct h3_comm h3_comm;

/* A communicator of `ranks` threads (1 <= ranks <= H3_COMM_MAX_RANKS); NULL after reporting. */
h3_comm *h3_comm_new(int ranks, h3_diag *d);
void h3_comm_free(h3_comm *c);
int h3_comm_ranks(const h3_comm *c);
/* Marks the communicator failed and wakes every waiting rank. */
void h3_comm_abort(h3_comm *c);

/* Rank `rank` publishes `buf` and waits until all ranks have; then peers[j] is rank j's
 * buffer (valid until h3_comm_release). False when the communicator was aborted. */
bool h3_comm_exchange(h3_comm *c, int rank, const void *buf, const void **peers);
/* Waits until every rank is done reading the buffers of the last exchange. False when
 * aborted. */
bool h3_comm_release(h3_comm *c, int rank);

#endif
