/* cpu_util.c: the CPU backend's shared helpers: bulk widening to fp32, the error helper
 * and the worker pool.
 *
 * The pool keeps `threads - 1` pthreads waiting on a condition variable; a parallel call
 * publishes (fn, arg, n) with a new generation number, runs chunk 0 on the caller and
 * waits until every worker has finished its chunk. Chunks are contiguous and fixed by
 * (n, worker count), and kernels compute every index independently of the chunking, so
 * results are identical to a serial run.
 */
#include "cpu_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void h3cpu_to_f32(float *dst, const void *src, h3_dtype t, int64_t n) {
  if (t == H3_F32) {
    memcpy(dst, src, (size_t)n * sizeof(float));
    return;
  }
  if (t == H3_BF16) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = h3_bf16_to_f32(s[i]);
    return;
  }
  for (int64_t i = 0; i < n; i++) dst[i] = h3cpu_ld(src, t, i);
}

void h3cpu_error(const h3_cpu_ctx *c, const h3_op *op, const char *hint, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->d) h3_diag_error(c->d, op->span, hint, "%s: %s", h3_opcode_name(op->code), msg);
}

/* ---- pool ------------------------------------------------------------------------------ */
struct h3_cpu_pool {
  int n; /* workers including the caller */
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t start, done;
  uint64_t gen;
  int pending, stop;
  h3_cpu_range_fn fn;
  void *arg;
  int64_t items;
};

typedef struct {
  h3_cpu_pool *p;
  int index;
} pool_worker_arg;

static void chunk(int64_t n, int workers, int w, int64_t *b, int64_t *e) {
  *b = n * w / workers;
  *e = n * (w + 1) / workers;
}

static void *pool_main(void *varg) {
  pool_worker_arg *wa = varg;
  h3_cpu_pool *p = wa->p;
  int me = wa->index;
  free(wa);
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->gen == seen && !p->stop) pthread_cond_wait(&p->start, &p->mu);
    if (p->stop) break;
    seen = p->gen;
    h3_cpu_range_fn fn = p->fn;
    void *arg = p->arg;
    int64_t items = p->items;
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    chunk(items, p->n, me, &b, &e);
    if (b < e) fn(arg, me, b, e);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

h3_cpu_pool *h3cpu_pool_new(int threads) {
  if (threads <= 1) return NULL;
  h3_cpu_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = calloc((size_t)threads, sizeof(pthread_t));
  if (!p->threads) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->done, NULL);
  p->n = 1;
  for (int i = 1; i < threads; i++) {
    pool_worker_arg *wa = malloc(sizeof *wa);
    if (!wa) break;
    wa->p = p;
    wa->index = i;
    if (pthread_create(&p->threads[i], NULL, pool_main, wa) != 0) {
      free(wa);
      break;
    }
    p->n = i + 1;
  }
  if (p->n == 1) {
    h3cpu_pool_free(p);
    return NULL;
  }
  return p;
}

void h3cpu_pool_free(h3_cpu_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done);
  free(p->threads);
  free(p);
}

int h3cpu_pool_size(const h3_cpu_pool *p) { return p ? p->n : 1; }

void h3cpu_parallel(h3_cpu_pool *p, int64_t n, h3_cpu_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (!p || n == 1) {
    fn(arg, 0, 0, n);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  p->items = n;
  p->pending = p->n - 1;
  p->gen++;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  int64_t b, e;
  chunk(n, p->n, 0, &b, &e);
  if (b < e) fn(arg, 0, b, e);
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
