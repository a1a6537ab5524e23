/* cpu_internal.h: what the files of the CPU reference backend share.
 *
 * - element access: load any dtype widened to fp32 / fp64 / int64, store with ONE rounding
 *   to the destination dtype (bf16 and f16 via bf16.h: round-to-nearest-even, NaN kept; float ->
 * int truncates toward zero, saturating at the integer range so no input is undefined behaviour);
 * - the worker pool: a fixed set of pthreads that split an index range [0, n) into
 *   contiguous chunks, one per worker; each index is computed exactly as it would be on one
 *   thread, so results never depend on the thread count;
 * - the kernel context and the prototypes of every op kernel (one file per op family).
 */
#ifndef H3_CPU_INTERNAL_H
#define H3_CPU_INTERNAL_H

#include "h3/backend.h"
#include "h3/op_registry.h"

#include "h3/bf16.h"
#include "h3/scalar.h"

#include <math.h>
#include <string.h>

/* ---- dtype conversion (bf16.h: RNE, NaN kept) ------------------------------------------ */
static inline int h3cpu_is_float(h3_dtype t) {
  return t == H3_BF16 || t == H3_F16 || t == H3_F32 || t == H3_F64;
}

static inline float h3cpu_ld(const void *p, h3_dtype t, int64_t i) {
  switch (t) {
  case H3_BF16: return h3_bf16_to_f32(((const uint16_t *)p)[i]);
  case H3_F16: return h3_f16_to_f32(((const uint16_t *)p)[i]);
  case H3_F32: return ((const float *)p)[i];
  case H3_F64: return (float)((const double *)p)[i];
  case H3_I8: return (float)((const int8_t *)p)[i];
  case H3_I32: return (float)((const int32_t *)p)[i];
  case H3_I64: return (float)((const int64_t *)p)[i];
  case H3_U8: return (float)((const uint8_t *)p)[i];
  default: return 0.0f;
  }
}
static inline double h3cpu_ld64(const void *p, h3_dtype t, int64_t i) {
  switch (t) {
  case H3_F64: return ((const double *)p)[i];
  case H3_I32: return (double)((const int32_t *)p)[i];
  case H3_I64: return (double)((const int64_t *)p)[i];
  default: return (double)h3cpu_ld(p, t, i);
  }
}
static inline int64_t h3cpu_ldi(const void *p, h3_dtype t, int64_t i) {
  switch (t) {
  case H3_I8: return ((const int8_t *)p)[i];
  case H3_I32: return ((const int32_t *)p)[i];
  case H3_I64: return ((const int64_t *)p)[i];
  case H3_U8: return ((const uint8_t *)p)[i];
  default: {
    double v = h3cpu_ld64(p, t, i);
    if (!(v == v)) return 0;
    if (v >= 9.2e18) return INT64_MAX;
    if (v <= -9.2e18) return INT64_MIN;
    return (int64_t)v;
  }
  }
}
static inline int64_t h3cpu_sat(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
static inline void h3cpu_sti(void *p, h3_dtype t, int64_t i, int64_t v) {
  switch (t) {
  case H3_I8: ((int8_t *)p)[i] = (int8_t)h3cpu_sat(v, INT8_MIN, INT8_MAX); break;
  case H3_I32: ((int32_t *)p)[i] = (int32_t)h3cpu_sat(v, INT32_MIN, INT32_MAX); break;
  case H3_I64: ((int64_t *)p)[i] = v; break;
  case H3_U8: ((uint8_t *)p)[i] = (uint8_t)h3cpu_sat(v, 0, UINT8_MAX); break;
  case H3_F64: ((double *)p)[i] = (double)v; break;
  case H3_F32: ((float *)p)[i] = (float)v; break;
  case H3_BF16: ((uint16_t *)p)[i] = h3_f32_to_bf16((float)v); break;
  case H3_F16: ((uint16_t *)p)[i] = h3_f32_to_f16((float)v); break;
  default: break;
  }
}
/* Float -> int conversion: truncation toward zero, NaN -> 0, saturating. */
static inline int64_t h3cpu_trunc_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}
static inline void h3cpu_st(void *p, h3_dtype t, int64_t i, float v) {
  switch (t) {
  case H3_BF16: ((uint16_t *)p)[i] = h3_f32_to_bf16(v); break;
  case H3_F16: ((uint16_t *)p)[i] = h3_f32_to_f16(v); break;
  case H3_F32: ((float *)p)[i] = v; break;
  case H3_F64: ((double *)p)[i] = (double)v; break;
  default: h3cpu_sti(p, t, i, h3cpu_trunc_i64((double)v)); break;
  }
}
static inline void h3cpu_st64(void *p, h3_dtype t, int64_t i, double v) {
  switch (t) {
  case H3_F64: ((double *)p)[i] = v; break;
  case H3_F32: ((float *)p)[i] = (float)v; break;
  default:
    if (h3cpu_is_float(t))
      h3cpu_st(p, t, i, (float)v);
    else
      h3cpu_sti(p, t, i, h3cpu_trunc_i64(v));
    break;
  }
}
/* Converts n elements of src (dtype t) to fp32. */
void h3cpu_to_f32(float *dst, const void *src, h3_dtype t, int64_t n);

/* ---- worker pool ------------------------------------------------------------------------ */
typedef struct h3_cpu_pool h3_cpu_pool;
/* Runs indices [begin, end) on worker `worker` (0 .. h3cpu_pool_size - 1). */
typedef void (*h3_cpu_range_fn)(void *arg, int worker, int64_t begin, int64_t end);
/* NULL when threads <= 1 or when threads cannot be started (then work runs serially). */
h3_cpu_pool *h3cpu_pool_new(int threads);
void h3cpu_pool_free(h3_cpu_pool *p);
int h3cpu_pool_size(const h3_cpu_pool *p); /* 1 for NULL */
/* Splits [0, n) into one contiguous chunk per worker; the caller runs chunk 0. */
void h3cpu_parallel(h3_cpu_pool *p, int64_t n, h3_cpu_range_fn fn, void *arg);

/* ---- kernels -------------------------------------------------------------------------------- */
typedef struct {
  h3_cpu_pool *pool; /* may be NULL: serial */
  uint64_t seed;     /* request seed for randn */
  h3_diag *d;
  h3_comm *comm;     /* the ranks of a parallel plan; NULL: one rank */
  int rank;          /* this backend's rank in comm (0 without one) */
} h3_cpu_ctx;

typedef h3_status (*h3_cpu_kernel)(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in,
                                   int n_in, const h3_tensor *out, int n_out);

#define H3_CPU_KERNEL(name)                                                                        \
  h3_status name(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int n_in,              \
                 const h3_tensor *out, int n_out)

/* ops_elementwise.c: every H3_PK_ELEMENTWISE op, cast, clamp, const, iota */
H3_CPU_KERNEL(h3cpu_elementwise);
/* ops_generate.c */
H3_CPU_KERNEL(h3cpu_randn);
H3_CPU_KERNEL(h3cpu_sigma_schedule);
/* ops_movement.c */
H3_CPU_KERNEL(h3cpu_reshape);
H3_CPU_KERNEL(h3cpu_slice);
H3_CPU_KERNEL(h3cpu_concat);
H3_CPU_KERNEL(h3cpu_pad);
H3_CPU_KERNEL(h3cpu_gather);
H3_CPU_KERNEL(h3cpu_index);
H3_CPU_KERNEL(h3cpu_set_index);
H3_CPU_KERNEL(h3cpu_scatter_rows);
H3_CPU_KERNEL(h3cpu_kv_write);
/* ops_norm.c */
H3_CPU_KERNEL(h3cpu_rms_norm);
H3_CPU_KERNEL(h3cpu_add_rms_norm); /* the residual add + rms_norm (add-norm-fusion) */
H3_CPU_KERNEL(h3cpu_argmax);
H3_CPU_KERNEL(h3cpu_reduce_sum);
/* ops_sample.c: sample_tokens, temperature sampling (Gumbel-max on include/h3/rng.h; greedy at T <= 0) */
H3_CPU_KERNEL(h3cpu_sample_tokens);
H3_CPU_KERNEL(h3cpu_spec_accept);
/* 1/sqrt(sum_k x_k^2 / D + eps) of row `row` of x[.., D]: fp32, k ascending (rms_norm's
   reduction, shared with the fused norm ops so that they match it bitwise). */
float h3cpu_rms_inv(const void *x, h3_dtype xd, int64_t row, int64_t D, float eps);
/* rms_norm of one row x[0..D) into y[0..D) (dtype yd, one rounding each): the row function
   of rms_norm, shared with rms_norm_rope. w[D] = weight + offset in fp32. */
void h3cpu_rms_norm_row(const void *x, h3_dtype xd, int64_t D, const float *w, float eps, void *y,
                        h3_dtype yd);
/* w[0..D) + offset in fp32 (malloc'd; NULL when out of memory): rms_norm's weights. */
float *h3cpu_rms_weights(const h3_tensor *w, int64_t D, float offset);
/* ops_normmod.c: the fused RMSNorm + indexed AdaLN ops (docs/models/accelerations.md §3) */
H3_CPU_KERNEL(h3cpu_norm_modulate);
H3_CPU_KERNEL(h3cpu_residual_norm_modulate);
/* ops_linear.c */
H3_CPU_KERNEL(h3cpu_linear);
/* ops_int8.c: INT8 linear lowering (quantizer with the optional Hadamard rotation, GEMM) */
H3_CPU_KERNEL(h3cpu_quantize_rows);
H3_CPU_KERNEL(h3cpu_linear_int8);
H3_CPU_KERNEL(h3cpu_matmul_i8);  /* linear_int8's GEMM: int32 accumulators */
H3_CPU_KERNEL(h3cpu_dequant_i8); /* linear_int8's epilogue on given accumulators */
H3_CPU_KERNEL(h3cpu_linear_nvfp4); /* W4A16 over an NVFP4 weight (ops_nvfp4.c) */
/* Multiplies 256 floats in place by H256 = H4⊗H4⊗H4⊗H4 (ops.def quantize_rows). */
void h3cpu_hadamard256(float *v);
/* The per-row int8 quantizer of quantize_rows (ops_q8fuse.c): codes q[K], returns s. */
float h3cpu_quantize_row(const float *v, int64_t K, int8_t *q);
/* dequant_i8's fp32 value of one accumulator, before the rounding to its dtype:
   (float(acc) * sx) * sw (+ *bias), separate fp32 operations (ops_int8.c). */
float h3cpu_dequant_value(int32_t acc, float sx, float sw, const float *bias);
/* ops_rope.c */
H3_CPU_KERNEL(h3cpu_timestep_embedding);
H3_CPU_KERNEL(h3cpu_rope_table);
H3_CPU_KERNEL(h3cpu_rope_pos_table);
H3_CPU_KERNEL(h3cpu_rope);
/* rope of one row x[0..D) of token t into y[0..D) (rotate-half on [0, 2*half) with the
   cos/sin tables ct/st [T, half], the rest copied): the row function of rope, shared with rms_norm_rope. */
void h3cpu_rope_row(const void *x, h3_dtype xd, void *y, h3_dtype yd, int64_t D, int64_t half,
                    const h3_tensor *ct, const h3_tensor *st, int64_t t);
/* ops_norm_rope.c: the per-head RMSNorm + RoPE op (qk-norm-rope-fusion) */
H3_CPU_KERNEL(h3cpu_rms_norm_rope);
H3_CPU_KERNEL(h3cpu_rms_norm_rope_write);
/* ops_attention.c */
H3_CPU_KERNEL(h3cpu_attention);
H3_CPU_KERNEL(h3cpu_sage_attention);
/* ops_sage_q.c: sage_attention's int8 rule: a code, a block's delta, and q [T, H, D]'s codes
   and deltas over op's segments in include/h3/sage.h's layout (codes i8[H*P*D], deltas
   f32[H*P/64]; H3_ERR after reporting when out of memory). */
int8_t h3cpu_sage_code8(float x, float delta);
float h3cpu_sage_delta8(const float *x, int64_t n);
h3_status h3cpu_sage_quantize_q(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *q, int8_t *codes,
                                float *deltas);
/* The op's segments of T rows as sage_attention cuts them (include/h3/sage.h): *n of them,
   bounds[0 .. n] their boundaries (0 and T included), then pad[0 .. n] = bounds + n + 1 their
   padded first rows P_i (pad[n] = P), one allocation (free the result; NULL when out of
   memory, after reporting it). */
int64_t *h3cpu_sage_segments(const h3_cpu_ctx *c, const h3_op *op, int64_t T, int64_t *n);
H3_CPU_KERNEL(h3cpu_sol_attention);
H3_CPU_KERNEL(h3cpu_paged_attention);
H3_CPU_KERNEL(h3cpu_block_attention);
H3_CPU_KERNEL(h3cpu_sparse_attention);
/* ops_sparse.c */
H3_CPU_KERNEL(h3cpu_index_topk);
/* ops_moe.c */
H3_CPU_KERNEL(h3cpu_router_topk);
H3_CPU_KERNEL(h3cpu_moe);
H3_CPU_KERNEL(h3cpu_markov_draft);
/* ops_spectrum.c: step skipping (Spectrum running sums and forecast, Cache-DiT decision) */
H3_CPU_KERNEL(h3cpu_spectrum_update);
H3_CPU_KERNEL(h3cpu_spectrum_forecast);
H3_CPU_KERNEL(h3cpu_cache_dit_decide);
/* ops_collective.c: shard and the collectives over the ranks of c->comm (include/h3/comm.h) */
/* The op's rank count (`ranks`, 1 without it) into *n, checked against the backend's
 * communicator; false after reporting. */
bool h3cpu_ranks_ok(const h3_cpu_ctx *c, const h3_op *op, int64_t *n);
H3_CPU_KERNEL(h3cpu_shard);
H3_CPU_KERNEL(h3cpu_all_gather);
H3_CPU_KERNEL(h3cpu_all_to_all);
H3_CPU_KERNEL(h3cpu_all_reduce);

/* Runs one op (compute or fused) on host tensors. */
h3_status h3cpu_run(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int n_in,
                    const h3_tensor *out, int n_out);

/* Reports "OP: message" at the op's span. */
void h3cpu_error(const h3_cpu_ctx *c, const h3_op *op, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The page table of a paged op (cpu_pages.c): i32[NP] shared by every row, or [R, NP] with R
 * dividing the op's T rows: row t reads table t / (T / R) (R == T: a table per row; 1 < R <
 * T: R sequences of T / R consecutive rows). */
typedef struct {
  const h3_tensor *t;
  int64_t np, rows, per; /* entries per table, tables, query rows per table (T / rows; 0 when
                            the tables do not divide T, or T = 0) */
} h3cpu_pages;
/* The page table of an op of T query rows (h3cpu_check_pages reports a count of tables that
 * does not divide T). */
h3cpu_pages h3cpu_pages_of(const h3_tensor *page_table, int64_t T);
/* The table query row t reads. */
static inline int64_t h3cpu_table_row(const h3cpu_pages *pg, int64_t t) { return pg->per > 0 ? t / pg->per : 0; }
/* Flat cache row of position j of query row t: table[j / page] * page + j % page. */
int64_t h3cpu_page_slot(const h3cpu_pages *pg, int64_t t, int64_t j, int64_t page);
/* The entries of the table query row t reads that positions 0..p use (none for p < 0) name
 * pages of a P-page cache; an error naming the entry otherwise. */
bool h3cpu_check_table_row(const h3_cpu_ctx *c, const h3_op *op, const h3cpu_pages *pg, int64_t t,
                           int64_t p, int64_t P, int64_t page);
/* Checks, for each of T rows, that its last position (pos[t]; `last` when pos is NULL) fits
 * the table and that the entries positions 0..last use name pages of a P-page cache.
 * Reports the first bad value and returns false. *maxp: the largest last position. */
bool h3cpu_check_pages(const h3_cpu_ctx *c, const h3_op *op, const h3cpu_pages *pg,
                       const h3_tensor *pos, int64_t last, int64_t T, int64_t P, int64_t page,
                       int64_t *maxp);

/* Row-major helpers. */
static inline int64_t h3cpu_numel(const h3_tensor *t) { return h3_type_numel(&t->type); }
/* Product of dims [from, rank). */
static inline int64_t h3cpu_inner(const h3_type *t, int from) {
  int64_t n = 1;
  for (int i = from; i < t->rank; i++) n *= t->dims[i];
  return n;
}

#endif
