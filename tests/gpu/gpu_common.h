/* gpu_common.h: what the GPU tests and the attention benchmark share.
 *
 * - gpu_require(): exits 77 (ctest "skipped") when no GPU is usable, saying why;
 * - host tensors with random contents (xorshift, never all zeros): floats uniform in
 *   [lo, hi) rounded to the dtype, integers uniform in [0, int_hi);
 * - device copies with guard bytes: every output buffer gets GPU_GUARD bytes of a known
 *   pattern before and after it and is poisoned (all bits set: NaN for floats) before a run,
 *   so an out-of-bounds write or an element left unwritten shows up;
 * - comparison of a result with the CPU reference: NMSE = sum (g - c)^2 / sum c^2 over the
 *   elements where both are finite, NaN / Inf positions must agree, integers must be equal.
 */
#ifndef H3_TEST_GPU_COMMON_H
#define H3_TEST_GPU_COMMON_H

#include "h3/backend.h"
#include "h3/plan.h"
#include "h3/weights.h"

#include <stdbool.h>

#define GPU_GUARD 256
#define GPU_GUARD_BYTE 0xA5

void gpu_require(void);

typedef struct {
  uint64_t s;
} gpu_rng;
void gpu_rng_seed(gpu_rng *r, uint64_t seed);
double gpu_uniform(gpu_rng *r, double lo, double hi);

/* Fills t (its type and a malloc'd buffer; free with free()) with random values. */
void *gpu_host_random(gpu_rng *r, const h3_type *t, double lo, double hi, int64_t int_hi);

/* A device buffer of `bytes` with guards; `p` is the usable pointer. */
typedef struct {
  void *base, *p;
  size_t bytes;
} gpu_buf;
bool gpu_buf_alloc(h3_backend *b, gpu_buf *g, size_t bytes, h3_diag *d);
bool gpu_buf_upload(h3_backend *b, gpu_buf *g, const void *host, h3_diag *d);
/* Sets every byte of the buffer (not the guards) to 0xFF. */
bool gpu_buf_poison(h3_backend *b, gpu_buf *g, h3_diag *d);
/* Downloads the buffer into host; returns false when a guard byte changed. */
bool gpu_buf_download(h3_backend *b, gpu_buf *g, void *host, bool *guards_ok, h3_diag *d);
void gpu_buf_free(h3_backend *b, gpu_buf *g);

typedef struct {
  double nmse;
  int64_t mismatched_special; /* NaN / Inf positions that differ */
  int64_t int_diff;           /* integer elements that differ */
  int64_t n;
} gpu_cmp;

/* Compiles m into a plan at `tier` (the plan owns m, also on failure) and loads it into b,
 * so that m's ops find their kernels, as in h3exec. A load that fails only because some ops
 * are not supported by b is accepted (running those ops fails with that message). NULL after
 * printing the errors. */
h3_plan *gpu_plan_load(h3_backend *b, h3_module *m, h3_tier tier);

/* Compares got (GPU) with want (CPU reference), both of type t. */
gpu_cmp gpu_compare(const h3_type *t, const void *got, const void *want);
/* The NMSE a result of dtype dt may reach against the CPU reference in an op test. */
double gpu_nmse_limit(h3_dtype dt);
/* True when cmp is within the limit (and no special or integer mismatch). */
bool gpu_cmp_ok(const gpu_cmp *c, double limit);

/* Median device milliseconds (CUDA-event busy time, synchronised before and after each run)
 * of `iters` runs of op after a warm-up of at least warm_n runs and at least warm_s seconds of
 * the op itself (at most 100000 runs): the card settles at the clock this op's load holds it
 * at, whatever ran before (bench/peers_table.py warms PyTorch's ops the same way). -1 on
 * error (in d). The benches of bench/ time single ops with it. */
double gpu_time_op(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                   int iters, int warm_n, double warm_s, h3_diag *d);
/* An op and its device tensors, run as one unit (gpu_time_op_cold's eviction). */
typedef struct {
  const h3_op *op;
  const h3_tensor *in, *out;
  int n_in;
} gpu_op_run;
/* The same with the card's L2 emptied of the op's operands before every run (warm-up and
 * timed): `evict` runs first, outside the timed run (an op that reads at least twice the L2
 * and writes little, e.g. a one-row linear over a 256 MiB weight: clean lines, nothing written
 * back during the timed op); the warm-up's seconds count both ops. For ops whose operands
 * would otherwise stay in the L2 from one run to the next (a 28 MB NVFP4 weight in the H200's
 * 60 MB), where a model's own ops would have evicted them in between. */
double gpu_time_op_cold(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                        int iters, int warm_n, double warm_s, const gpu_op_run *evict, h3_diag *d);

/* Prints "ok  " or "FAIL" and the message, and counts it in gpu_passed / gpu_failed. */
void gpu_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern int gpu_passed, gpu_failed;

#endif
