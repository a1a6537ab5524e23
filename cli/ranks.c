/* ranks.c: the helper ranks of h3exec --gpus N (ranks.h): one thread per rank, each with
 * its own cpu backend, runtime, outputs and diagnostics.
 */
#include "ranks.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  const ranks_options *o;
  int rank;
  h3_diag d;
  h3_status st;
} rank_job;

struct ranks {
  ranks_options o;
  int n;             /* threads started */
  pthread_t *thread; /* [N - 1] */
  rank_job *job;     /* [N - 1] */
};

static void *rank_main(void *p) {
  rank_job *j = p;
  const ranks_options *o = j->o;
  h3_backend_options bo = {.threads = o->threads, .seed = o->seed, .comm = o->comm, .rank = j->rank};
  h3_runtime_options ro = {.weight_seed = o->seed};
  h3_backend *b = h3_backend_create("cpu", &bo, &j->d);
  h3_runtime *rt = b ? h3_runtime_new(o->m, b, o->w, &ro, &j->d) : NULL;
  h3_host_tensor *out = calloc((size_t)o->g->n_outputs + 1, sizeof *out);
  j->st = rt && out ? H3_OK : H3_ERR;
  for (int it = 0; it < o->runs && j->st == H3_OK; it++) {
    j->st = h3_runtime_run(rt, o->g, o->in, out, &j->d);
    for (int i = 0; i < o->g->n_outputs; i++) {
      free(out[i].data);
      out[i].data = NULL;
    }
  }
  if (j->st != H3_OK) h3_comm_abort(o->comm);
  if (out) h3_host_tensors_free(out, o->g->n_outputs);
  h3_runtime_free(rt);
  h3_backend_free(b);
  return NULL;
}

ranks *ranks_start(const ranks_options *o, h3_diag *d) {
  int helpers = h3_comm_ranks(o->comm) - 1;
  ranks *r = calloc(1, sizeof *r);
  if (r) {
    r->o = *o;
    r->thread = calloc((size_t)helpers + 1, sizeof *r->thread);
    r->job = calloc((size_t)helpers + 1, sizeof *r->job);
  }
  if (!r || !r->thread || !r->job) {
    if (r) free(r->thread), free(r->job);
    free(r);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory starting %d ranks", helpers + 1);
    return NULL;
  }
  for (; r->n < helpers; r->n++) {
    rank_job *j = &r->job[r->n];
    *j = (rank_job){&r->o, r->n + 1, {0}, H3_OK};
    h3_diag_init(&j->d);
    j->d.program = d->program;
    if (pthread_create(&r->thread[r->n], NULL, rank_main, j) != 0) {
      h3_diag_free(&j->d);
      h3_comm_abort(o->comm);
      h3_diag_error(d, (h3_span){0}, "run fewer ranks (--gpus)", "cannot start the thread of rank %d",
                    r->n + 1);
      ranks_finish(r, d);
      return NULL;
    }
  }
  return r;
}

h3_status ranks_finish(ranks *r, h3_diag *d) {
  h3_status st = H3_OK;
  for (int i = 0; i < r->n; i++) {
    rank_job *j = &r->job[i];
    pthread_join(r->thread[i], NULL);
    if (j->st != H3_OK) st = H3_ERR;
    for (const h3_diag_msg *msg = j->d.head; msg; msg = msg->next)
      if (msg->level == H3_DIAG_ERROR)
        h3_diag_error(d, msg->span, msg->hint, "rank %d: %s", j->rank, msg->message);
    h3_diag_free(&j->d);
  }
  free(r->thread);
  free(r->job);
  free(r);
  return st;
}
