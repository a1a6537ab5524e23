/* cpu_gemm.h: the CPU backend's dot-product engine, shared by linear, moe and router_topk.
 *
 * Numerics (the contracts of those ops rest on it): the sum of output (m, n) is
 *   s = +0.0f; for k = 0, 1, .., K-1: s = s + x[m, k] * w[n, k]
 * where the product and the sum are each one fp32 operation rounded to nearest even and
 * never fused into one, and w[n, k] is widened to fp32 as h3cpu_ld widens it (exactly, for
 * every float dtype). Each sum is one chain of its own, so its bits do not depend on M, on
 * the tiling, on the instruction set used or on the worker that computes it.
 *
 * Work: outputs are computed in panels of H3CPU_GEMM_NR consecutive n by blocks of rows;
 * the (panel, row block) pairs are split over the pool's workers. w is widened per panel
 * and k range inside the workers: no fp32 copy of the whole matrix is made.
 */
#ifndef H3_CPU_GEMM_H
#define H3_CPU_GEMM_H

#include "cpu_internal.h"

#include <stdbool.h>

typedef struct {
  const float *x; /* [M, K] fp32, row stride ldx */
  int64_t ldx;
  const void *w; /* [N, K] of dtype wd, row-major */
  h3_dtype wd;
  int64_t M, N, K;
} h3cpu_gemm_args;

/* Receives the finished sums s[0..nn) of row m, outputs n0 .. n0 + nn - 1. Called on the
   workers, once per (m, n), with no two calls sharing an output. */
typedef void (*h3cpu_gemm_epilogue)(void *arg, int64_t m, int64_t n0, int64_t nn, const float *s);

/* Computes every sum of g and hands them to epi. H3_ERR (nothing computed) only when the
   workers' scratch cannot be allocated. */
h3_status h3cpu_gemm(h3_cpu_pool *pool, const h3cpu_gemm_args *g, h3cpu_gemm_epilogue epi,
                     void *arg);

/* Tests: false keeps the engine on its generic (baseline x86-64) path; true (the default)
   lets it use the widest instruction set the CPU has. Results are the same bits either way. */
void h3cpu_gemm_allow_simd(bool on);

/* fp32 copy of n elements of src (malloc'd; NULL when out of memory). */
float *h3cpu_f32_copy(const void *src, h3_dtype t, int64_t n);

/* a * b rounded to fp32, kept from fusing with an addition that follows (a compiler that
   contracts a * b + c into an FMA would round once instead of twice). */
static inline float h3cpu_mul_nofuse(float a, float b) {
  float p = a * b;
#if defined(__x86_64__)
  __asm__("" : "+x"(p));
#elif defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  __asm__("" : "+m"(p));
#endif
  return p;
}

#endif
