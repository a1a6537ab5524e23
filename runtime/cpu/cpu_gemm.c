/* cpu_gemm.c: the dot-product engine of cpu_gemm.h (numerics contract there).
 *
 * A work item is one panel of GEMM_NR outputs n by one block of rows m. For each range of
 * GEMM_KC k's, the worker widens the panel's part of w to fp32 [kc][NR] (transposed, so
 * that one vector load gives NR outputs' weights at one k) and runs the register tiles of
 * cpu_gemm_tile.h over its rows; the rows' partial sums stay in an fp32 buffer between k
 * ranges (an fp32 store is exact, so this is the same chain as one pass). With GCC on x86-64
 * the tiles are compiled twice, for baseline x86-64 and for AVX2, and picked at run time;
 * both compute the same operations in the same order.
 */
#include "cpu_gemm.h"

#include <stdlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define GEMM_NR 16        /* outputs per panel: two 8-lane vectors */
#define GEMM_MR 4         /* rows per register tile (cpu_gemm_tile.h handles 1 .. 4) */
#define GEMM_KC 256       /* k's per widened panel: [KC][NR] fp32 is 16 KiB */
#define GEMM_ROWS_MAX 256 /* rows per work item: their sums are [ROWS][NR] fp32, 16 KiB */

typedef float v8f __attribute__((vector_size(32)));

float *h3cpu_f32_copy(const void *src, h3_dtype t, int64_t n) {
  float *dst = malloc((size_t)(n + 1) * sizeof(float));
  if (dst) h3cpu_to_f32(dst, src, t, n);
  return dst;
}

/* panel[k][j] = fp32 w[n0 + j, k0 + k] for j in [j0, j1), k in [ka, kb): w's rows are read
   along k and written down the panel's columns, one element at a time. */
static void pack_cols(float *panel, const h3cpu_gemm_args *g, int64_t n0, int64_t j0, int64_t j1,
                      int64_t k0, int64_t ka, int64_t kb) {
  for (int64_t j = j0; j < j1; j++) {
    int64_t at = (n0 + j) * g->K + k0;
    float *col = panel + j;
    if (g->wd == H3_BF16) {
      const uint16_t *s = (const uint16_t *)g->w + at;
      for (int64_t k = ka; k < kb; k++) col[k * GEMM_NR] = h3_bf16_to_f32(s[k]);
    } else if (g->wd == H3_F32) {
      const float *s = (const float *)g->w + at;
      for (int64_t k = ka; k < kb; k++) col[k * GEMM_NR] = s[k];
    } else {
      for (int64_t k = ka; k < kb; k++) col[k * GEMM_NR] = h3cpu_ld(g->w, g->wd, at + k);
    }
  }
}

/* The two functions of an instruction set (cpu_gemm_tile.h). */
typedef struct {
  void (*pack)(float *panel, const h3cpu_gemm_args *g, int64_t n0, int64_t nn, int64_t k0,
               int64_t kc);
  void (*block)(const float *x, int64_t ldx, int64_t rows, const float *panel, int64_t kc,
                float *sums);
} gemm_isa;

#define GEMM_ISA(name) name##_generic
#include "cpu_gemm_tile.h"
#undef GEMM_ISA
static const gemm_isa isa_generic = {pack_generic, block_generic};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx2")
#define GEMM_ISA(name) name##_avx2
#include "cpu_gemm_tile.h"
#undef GEMM_ISA
#pragma GCC pop_options
static const gemm_isa isa_avx2 = {pack_avx2, block_avx2};
#endif

static bool allow_simd = true;

void h3cpu_gemm_allow_simd(bool on) { allow_simd = on; }

static const gemm_isa *pick_isa(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (allow_simd && __builtin_cpu_supports("avx2")) return &isa_avx2;
#endif
  return &isa_generic;
}

typedef struct {
  const h3cpu_gemm_args *g;
  h3cpu_gemm_epilogue epi;
  void *arg;
  const gemm_isa *isa;
  int64_t rows, blocks; /* rows per block (a multiple of MR), blocks per panel */
  int64_t scratch_per_worker;
  float *scratch; /* per worker: panel [KC][NR], then sums [rows][NR] */
} gemm_job;

static void gemm_range(void *arg, int worker, int64_t begin, int64_t end) {
  const gemm_job *j = arg;
  const h3cpu_gemm_args *g = j->g;
  float *panel = j->scratch + worker * j->scratch_per_worker, *sums = panel + GEMM_KC * GEMM_NR;
  for (int64_t i = begin; i < end; i++) {
    int64_t n0 = i / j->blocks * GEMM_NR, m0 = i % j->blocks * j->rows;
    int64_t nn = g->N - n0 < GEMM_NR ? g->N - n0 : GEMM_NR;
    int64_t rows = g->M - m0 < j->rows ? g->M - m0 : j->rows;
    memset(sums, 0, (size_t)(rows * GEMM_NR) * sizeof(float)); /* every chain starts at +0 */
    for (int64_t k0 = 0; k0 < g->K; k0 += GEMM_KC) {
      int64_t kc = g->K - k0 < GEMM_KC ? g->K - k0 : GEMM_KC;
      j->isa->pack(panel, g, n0, nn, k0, kc);
      j->isa->block(g->x + m0 * g->ldx + k0, g->ldx, rows, panel, kc, sums);
    }
    for (int64_t r = 0; r < rows; r++) j->epi(j->arg, m0 + r, n0, nn, sums + r * GEMM_NR);
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Rows per block: at most GEMM_ROWS_MAX, fewer when there are too few panels to give every
   worker about two items. */
static int64_t block_rows(int64_t M, int64_t panels, int workers) {
  int64_t tiles = ceil_div(M, GEMM_MR);
  int64_t blocks = ceil_div(M, GEMM_ROWS_MAX), want = ceil_div(2 * (int64_t)workers, panels);
  if (blocks < want) blocks = want < tiles ? want : tiles;
  return ceil_div(tiles, blocks) * GEMM_MR;
}

h3_status h3cpu_gemm(h3_cpu_pool *pool, const h3cpu_gemm_args *g, h3cpu_gemm_epilogue epi,
                     void *arg) {
  if (g->M <= 0 || g->N <= 0) return H3_OK;
  int workers = h3cpu_pool_size(pool);
  int64_t panels = ceil_div(g->N, GEMM_NR);
  gemm_job j = {g, epi, arg, pick_isa(), block_rows(g->M, panels, workers), 0, 0, NULL};
  j.blocks = ceil_div(g->M, j.rows);
  j.scratch_per_worker = (GEMM_KC + j.rows) * GEMM_NR; /* a multiple of 16 floats: 64 bytes */
  j.scratch = aligned_alloc(64, (size_t)(workers * j.scratch_per_worker) * sizeof(float));
  if (!j.scratch) return H3_ERR;
  h3cpu_parallel(pool, panels * j.blocks, gemm_range, &j);
  free(j.scratch);
  return H3_OK;
}
