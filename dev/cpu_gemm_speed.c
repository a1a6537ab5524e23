/* cpu_gemm_speed.c: times the CPU backend's linear and moe (runtime/cpu/ops_linear.c and
 * ops_moe.c, as built in libh3_runtime.a) against copies of their old algorithms, and checks
 * that the two agree bitwise:
 *   linear: old = the whole w widened to a fresh fp32 matrix on one thread, then one dependent
 *           fp32 chain per output over the pool's split of the M*N outputs; bf16 x[M, K],
 *           w[N, K], bf16 result;
 *   moe:    old = per row (split over the pool), each chosen expert's GEMVs with every weight
 *           loaded through h3cpu_ld; bf16 h[T, H], gate_up [E, 2F, H], down [E, H, F],
 *           k distinct random experts per row.
 *
 *   cc -O3 -std=gnu11 -Iinclude -Iruntime/cpu dev/cpu_gemm_speed.c build/libh3_runtime.a \
 *      build/libh3_ir.a -lpthread -lm -o build/cpu_gemm_speed
 *   build/cpu_gemm_speed linear [N K THREADS M...]       default: 9216 6144 2 1 384
 *   build/cpu_gemm_speed moe H F E k THREADS T...        e.g. 6144 3072 32 4 2 1 16
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

static void report(const char *dim, int64_t n, double macs, double t_new, double t_old, bool eq) {
  printf("%s=%-4lld new %8.3f s (%6.2f GMAC/s)  old %8.3f s (%6.2f GMAC/s)  speedup %5.1fx  %s\n",
         dim, (long long)n, t_new, macs * 1e-9 / t_new, t_old, macs * 1e-9 / t_old,
         t_old / t_new, eq ? "bitwise equal" : "MISMATCH");
}

static void linear_bench(int argc, char **argv) {
  int64_t N = argc > 1 ? atoll(argv[0]) : 9216, K = argc > 1 ? atoll(argv[1]) : 6144;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  int64_t Ms[8] = {1, 384};
  int nm = 2;
  if (argc > 3)
    for (nm = 0; nm < 8 && 3 + nm < argc; nm++) Ms[nm] = atoll(argv[3 + nm]);
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
    report("M", M, (double)M * (double)N * (double)K, t1 - t0, t2 - t1,
           st == H3_OK && memcmp(out.data, ref, (size_t)(M * N) * 2) == 0);
    free(in[0].data), free(out.data), free(ref);
  }
  free(w);
  h3cpu_pool_free(c.pool);
}

/* ---- moe ---------------------------------------------------------------------------------- */
static float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

typedef struct {
  const h3_tensor *h, *gu, *down, *ids, *w;
  float *out;
  int64_t H, F, k;
  float alpha, limit;
  float *scratch; /* per worker: x[H], u[2F], a[F], y[H], acc[H] */
} old_moe_job;

/* The old moe_range, verbatim but for the f32 result. */
static void old_moe_range(void *arg, int worker, int64_t begin, int64_t end) {
  const old_moe_job *j = arg;
  int64_t H = j->H, F = j->F;
  float *x = j->scratch + worker * (4 * H + 3 * F);
  float *u = x + H, *a = u + 2 * F, *y = a + F, *acc = y + H;
  h3_dtype gd = j->gu->type.dtype, dd = j->down->type.dtype;
  for (int64_t t = begin; t < end; t++) {
    for (int64_t i = 0; i < H; i++) {
      x[i] = h3cpu_ld(j->h->data, j->h->type.dtype, t * H + i);
      acc[i] = 0.0f;
    }
    int64_t last = -1;
    for (int64_t r = 0; r < j->k; r++) {
      int64_t bi = -1, be = 0;
      for (int64_t s = 0; s < j->k; s++) {
        int64_t e = h3cpu_ldi(j->ids->data, j->ids->type.dtype, t * j->k + s);
        if (e > last && (bi < 0 || e < be)) {
          bi = s;
          be = e;
        }
      }
      if (bi < 0) break;
      last = be;
      float we = h3cpu_ld(j->w->data, j->w->type.dtype, t * j->k + bi);
      int64_t gbase = be * 2 * F * H, dbase = be * H * F;
      for (int64_t o = 0; o < 2 * F; o++) {
        float s = 0.0f;
        for (int64_t i = 0; i < H; i++) s += x[i] * h3cpu_ld(j->gu->data, gd, gbase + o * H + i);
        u[o] = h3_bf16_round(s);
      }
      for (int64_t o = 0; o < F; o++) {
        float g = u[o] < j->limit ? u[o] : j->limit;
        float v = u[F + o];
        v = v < -j->limit ? -j->limit : v > j->limit ? j->limit : v;
        a[o] = h3_bf16_round((g * sigmoid_f(j->alpha * g)) * (v + 1.0f));
      }
      for (int64_t o = 0; o < H; o++) {
        float s = 0.0f;
        for (int64_t i = 0; i < F; i++) s += a[i] * h3cpu_ld(j->down->data, dd, dbase + o * F + i);
        y[o] = h3_bf16_round(s);
      }
      for (int64_t o = 0; o < H; o++) acc[o] += we * y[o];
    }
    for (int64_t o = 0; o < H; o++) j->out[t * H + o] = acc[o];
  }
}

static void moe_bench(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "moe H F E k THREADS T...\n");
    exit(2);
  }
  int64_t H = atoll(argv[0]), F = atoll(argv[1]), E = atoll(argv[2]), k = atoll(argv[3]);
  int threads = atoi(argv[4]);
  h3_cpu_ctx c = {h3cpu_pool_new(threads), 0, NULL};
  uint16_t *gu = rand_bf16(E * 2 * F * H, 3), *dn = rand_bf16(E * H * F, 4);
  printf("moe bf16 H %lld F %lld E %lld k %lld, %d threads\n", (long long)H, (long long)F,
         (long long)E, (long long)k, threads);
  for (int a = 5; a < argc; a++) {
    int64_t T = atoll(argv[a]);
    int32_t *ids = malloc((size_t)(T * k) * sizeof(int32_t));
    float *wts = malloc((size_t)(T * k) * sizeof(float));
    for (int64_t t = 0; t < T; t++)
      for (int64_t s = 0; s < k; s++) {
        ids[t * k + s] = (int32_t)((t * 7 + s * 5) % E); /* distinct while 5k <= E or so */
        wts[t * k + s] = 0.25f + 0.125f * (float)s;
      }
    h3_tensor in[5] = {{h3_type_make(H3_BF16, 2, (int64_t[]){T, H}), rand_bf16(T * H, 5)},
                       {h3_type_make(H3_BF16, 3, (int64_t[]){E, 2 * F, H}), gu},
                       {h3_type_make(H3_BF16, 3, (int64_t[]){E, H, F}), dn},
                       {h3_type_make(H3_I32, 2, (int64_t[]){T, k}), ids},
                       {h3_type_make(H3_F32, 2, (int64_t[]){T, k}), wts}};
    h3_tensor out = {h3_type_make(H3_F32, 2, (int64_t[]){T, H}), malloc((size_t)(T * H) * 4)};
    float *ref = malloc((size_t)(T * H) * 4);
    h3_op op = {0}; /* moe reads alpha and limit from its attributes: none gives the defaults */
    op.code = H3_OP_MOE;
    double t0 = now();
    h3_status st = h3cpu_moe(&c, &op, in, 5, &out, 1);
    double t1 = now();
    old_moe_job j = {&in[0], &in[1], &in[2], &in[3], &in[4], ref, H, F, k, 1.702f, 7.0f,
                     malloc((size_t)(h3cpu_pool_size(c.pool) * (4 * H + 3 * F)) * 4)};
    h3cpu_parallel(c.pool, T, old_moe_range, &j);
    double t2 = now();
    report("T", T, (double)T * (double)k * 3.0 * (double)F * (double)H, t1 - t0, t2 - t1,
           st == H3_OK && memcmp(out.data, ref, (size_t)(T * H) * 4) == 0);
    free(in[0].data), free(ids), free(wts), free(out.data), free(ref), free(j.scratch);
  }
  free(gu), free(dn);
  h3cpu_pool_free(c.pool);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "moe") == 0)
    moe_bench(argc - 2, argv + 2);
  else
    linear_bench(argc > 1 ? argc - 2 : 0, argv + 2);
  return 0;
}
