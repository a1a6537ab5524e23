/* comm.c: the thread communicator of comm.h: a generation-counted barrier (mutex + condition
 * variable) and one published buffer per rank.
 */
#include "h3/comm.h"

#include "h3/ir.h"

#include <pthread.h>
#include <stdlib.h>

struct h3_comm {
  int ranks;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;            /* ranks in the current barrier */
  unsigned long gen;      /* barriers completed */
  bool aborted;
  const void **buf;       /* [ranks]: the buffers of the current exchange */
};

h3_comm *h3_comm_new(int ranks, h3_diag *d) {
  if (ranks < 1 || ranks > H3_COMM_MAX_RANKS) {
    char hint[80];
    snprintf(hint, sizeof hint, "use 1 to %d ranks", H3_COMM_MAX_RANKS);
    h3_diag_error(d, (h3_span){0}, hint, "a communicator of %d ranks", ranks);
    return NULL;
  }
  h3_comm *c = calloc(1, sizeof *c);
  const void **buf = calloc((size_t)ranks, sizeof *buf);
  if (!c || !buf || pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c), free(buf);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory creating a communicator");
    return NULL;
  }
  if (pthread_cond_init(&c->cv, NULL) != 0) {
    pthread_mutex_destroy(&c->mu);
    free(c), free(buf);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cannot create a condition variable");
    return NULL;
  }
  c->ranks = ranks;
  c->buf = buf;
  return c;
}

void h3_comm_free(h3_comm *c) {
  if (!c) return;
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c->buf);
  free(c);
}

int h3_comm_ranks(const h3_comm *c) { return c->ranks; }

void h3_comm_abort(h3_comm *c) {
  pthread_mutex_lock(&c->mu);
  c->aborted = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* The barrier, with c->mu held; false when aborted. */
static bool barrier_locked(h3_comm *c) {
  if (c->aborted) return false;
  unsigned long gen = c->gen;
  if (++c->arrived == c->ranks) {
    c->arrived = 0;
    c->gen++;
    pthread_cond_broadcast(&c->cv);
    return true;
  }
  while (gen == c->gen && !c->aborted) pthread_cond_wait(&c->cv, &c->mu);
  return gen != c->gen;
}

bool h3_comm_exchange(h3_comm *c, int rank, const void *buf, const void **peers) {
  pthread_mutex_lock(&c->mu);
  c->buf[rank] = buf;
  bool ok = barrier_locked(c);
  for (int j = 0; ok && j < c->ranks; j++) peers[j] = c->buf[j];
  pthread_mutex_unlock(&c->mu);
  return ok;
}

bool h3_comm_release(h3_comm *c, int rank) {
  (void)rank;
  pthread_mutex_lock(&c->mu);
  bool ok = barrier_locked(c);
  pthread_mutex_unlock(&c->mu);
  return ok;
}
