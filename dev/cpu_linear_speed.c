/* cpu_linear_speed.c: times the CPU backend's linear (runtime/cpu/ops_linear.c, as built in
 * libh3_runtime.a) against a copy of its old algorithm (the whole w widened to a fresh fp32
 * matrix on one thread, then one dependent fp32 chain per output over the pool's split of
 * the M*N outputs), on bf16 x[M, K] and w[N, K], and checks that the two agree bitwise.
 *
 *   cc -O3 -std=gnu11 -Iinclude -Iruntime/cpu dev/cpu_linear_speed.c build/libh3_runtime.a \
 *      build/libh3_ir.a -lpthread -lm -o build/cpu_linear_speed
 *   build/cpu_linear_speed [N K THREADS M...]      default: 9216 6144 2 1 384
 *
 * Not part of the product or of CI (dev/README.md).
 */
#include "cpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
  const float *x, *w;
  int64_t N, K;
  uint16_t *out;
} old_job;

/* The old linear_range: output i = (m, n), one chain over k. */
static void old_range(void *arg, int worker, int64_t begin, int64_t end) {
  (void)worker;
  const old_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    const float *xr = j->x + i / j->N * j->K, *wr = j->w + i % j->N * j->K;
    float s = 0.0f;
    for (int64_t k = 0; k < j->K; k++) s += xr[k] * wr[k];
    j->out[i] = h3_f32_to_bf16(s);
  }
}

static void old_linear(h3_cpu_pool *pool, const uint16_t *x, const uint16_t *w, int64_t M,
                       int64_t N, int64_t K, uint16_t *out) {
  float *xf = malloc((size_t)(M * K) * sizeof(float));
  float *wf = malloc((size_t)(N * K) * sizeof(float));
  if (!xf || !wf) exit(1);
  h3cpu_to_f32(xf, x, H3_BF16, M * K);
  h3cpu_to_f32(wf, w, H3_BF16, N * K);
  old_job j = {xf, wf, N, K, out};
  h3cpu_parallel(pool, M * N, old_range, &j);
  free(xf), free(wf);
}

static uint16_t *rand_bf16(int64_t n, uint64_t seed) {
  uint16_t *p = malloc((size_t)n * 2);
  if (!p) exit(1);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = h3_f32_to_bf16((float)((double)(seed >> 11) / 9007199254740992.0 - 0.5));
  }
  return p;
}

int main(int argc, char **argv) {
  int64_t N = argc > 2 ? atoll(argv[1]) : 9216, K = argc > 2 ? atoll(argv[2]) : 6144;
  int threads = argc > 3 ? atoi(argv[3]) : 2;
  int64_t Ms[8] = {1, 384};
  int nm = 2;
  if (argc > 4)
    for (nm = 0; nm < 8 && 4 + nm < argc; nm++) Ms[nm] = atoll(argv[4 + nm]);
  h3_cpu_ctx c = {h3cpu_pool_new(threads), 0, NULL};
  uint16_t *w = rand_bf16(N * K, 1);
  printf("linear bf16 w[%lld, %lld], %d threads\n", (long long)N, (long long)K, threads);
  for (int i = 0; i < nm; i++) {
    int64_t M = Ms[i];
    h3_tensor in[2] = {{h3_type_make(H3_BF16, 2, (int64_t[]){M, K}), rand_bf16(M * K, 2)},
                       {h3_type_make(H3_BF16, 2, (int64_t[]){N, K}), w}};
    h3_tensor out = {h3_type_make(H3_BF16, 2, (int64_t[]){M, N}), malloc((size_t)(M * N) * 2)};
    uint16_t *ref = malloc((size_t)(M * N) * 2);
    double t0 = now();
    h3_status st = h3cpu_linear(&c, NULL, in, 2, &out, 1);
    double t1 = now();
    old_linear(c.pool, in[0].data, w, M, N, K, ref);
    double t2 = now();
    double gmac = (double)M * (double)N * (double)K * 1e-9;
    printf("M=%-4lld new %8.3f s (%6.2f GMAC/s)  old %8.3f s (%6.2f GMAC/s)  speedup %5.1fx  %s\n",
           (long long)M, t1 - t0, gmac / (t1 - t0), t2 - t1, gmac / (t2 - t1),
           (t2 - t1) / (t1 - t0),
           st == H3_OK && memcmp(out.data, ref, (size_t)(M * N) * 2) == 0 ? "bitwise equal"
                                                                         : "MISMATCH");
    free(in[0].data), free(out.data), free(ref);
  }
  free(w);
  h3cpu_pool_free(c.pool);
  return 0;
}
