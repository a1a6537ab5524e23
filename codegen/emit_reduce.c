/* emit_reduce.c: kernels for the ops that reduce the last axis: rms_norm, argmax,
 * sample_tokens and reduce_sum.
 *
 * One block per row ([rows, N] with rows = product of the leading dims). Each thread walks
 * the row in chunks of 8 (16-byte loads when N % 8 == 0, else single elements) at stride
 * blockDim, accumulating in a fixed order; the warp combines with an xor butterfly
 * (__shfl_xor_sync, every lane ends with the same bits) and warp 0's partials are combined
 * by every thread in warp order from shared memory. The reduction order depends only on
 * N and the block size, both compile-time constants, so results are deterministic and
 * identical for every row (batch invariant). The rms_norm reduction (emit_row_block,
 * emit_rms_accum, emit_rms_finish) is shared with the fused norm_modulate kernels of
 * emit_normmod.c, whose exact tier must reproduce rms_norm's r bitwise.
 *   rms_norm: r = 1/sqrt(sum(x^2)/N + eps); y = (x*r)*(w + offset), one rounding to y's dtype.
 *   add_rms_norm: x = a + b (rounded as add rounds, stored), then rms_norm of x: the same
 *     kernel with a + b as the loaded values (recomputed in the second pass, not read back).
 *   argmax: first index of the maximum (ties -> lowest index; a row of NaN gives 0).
 *   sample_tokens: argmax of the row's scores: the logits (temperature <= 0 or NaN) or logit / T
 *     plus Gumbel noise (h3_rng_sample_score); one block per row, so batch invariant. A second
 *     result, the winner's score minus the best of the others (h3_rng_sample_margin), from
 *     the top two scores kept in the same pass.
 *   reduce_sum: fp32 sum (fp64 for f64 inputs), rounded once to the result dtype.
 */
#include "emit_internal.h"

#include <stdio.h>
#include <string.h>

/* Threads per block for a row of `units` chunks: a multiple of 32 in [32, 256] (1024 for
 * argmax over long rows such as a vocabulary). */
int emit_row_block(int64_t units, int cap) {
  int64_t b = (units + 31) / 32 * 32;
  if (b < 32) b = 32;
  if (b > cap) b = cap;
  return (int)b;
}

/* Emits the per-row preamble: rows guard and row pointers x / y. */
static void row_head(h3_strbuf *s, int64_t rows, int64_t n, const char *xt, const char *yt,
                     int64_t ystride) {
  h3_strbuf_printf(s, "  const long long row = blockIdx.x;\n  if (row >= %lldll) return;\n",
                   (long long)rows);
  h3_strbuf_printf(s, "  const %s *x = in0 + row * %lldll;\n", xt, (long long)n);
  h3_strbuf_printf(s, "  %s *y = out0 + row * %lldll;\n", yt, (long long)ystride);
  h3_strbuf_append(s, "  const int tid = threadIdx.x;\n");
}

/* Loop header over chunks u = from, from + block, ... < end (C expressions): declares
 * `float|... v[VEC]` loaded at element u*VEC. */
static void chunk_loop_span(h3_strbuf *s, int vec, const char *from, const char *end, int block,
                            const char *ct, const char *ptr, const char *arr) {
  h3_strbuf_printf(s, "  for (int u = %s; u < %s; u += %d) {\n", from, end, block);
  if (vec == 8) h3_strbuf_printf(s, "    %s %s[8];\n    h3_ld8(%s, u * 8, %s);\n", ct, arr, ptr, arr);
  else h3_strbuf_printf(s, "    %s %s[1] = {h3_ld(%s, u)};\n", ct, arr, ptr);
}

/* "#pragma unroll N" for a chunk loop of `units` chunks strided by `block` threads: N the
 * most chunks a thread takes, at most 4 (their loads in flight at once; a decode row of 6144
 * is 3 chunks per thread: one memory round trip instead of three), 1 when it takes one: no
 * copies of the body that never run (a vocabulary's split argmax or sampler: 1 chunk a
 * thread, 4 copies of the sampler's hash before). The sums' order is the loop's either way. */
static void chunk_unroll(h3_strbuf *s, int64_t units, int block) {
  const int64_t most = (units + block - 1) / block;
  h3_strbuf_printf(s, "#pragma unroll %d\n", most < 1 ? 1 : most > 4 ? 4 : (int)most);
}

/* The same over the whole row's n / vec chunks from tid. */
static void chunk_loop(h3_strbuf *s, int vec, int64_t n, int block, const char *ct,
                       const char *ptr, const char *arr) {
  char end[24];
  snprintf(end, sizeof end, "%lld", (long long)(n / vec));
  chunk_loop_span(s, vec, "tid", end, block, ct, ptr, arr);
}

void emit_rms_accum(h3_strbuf *s, int vec, const char *arr, bool lean) {
  if (lean)
    h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) ss = __fmaf_rn(%s[k], "
                        "%s[k], ss);\n", vec, arr, arr);
  else
    h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) ss = __fadd_rn(ss, "
                        "__fmul_rn(%s[k], %s[k]));\n", vec, arr, arr);
}

/* A block of one warp (block == 32) needs no shared memory: tot = 0 + the warp's sum, the
 * same arithmetic as the general combine over one warp, so r is the same bits. That form
 * also serves kernels that give each warp a row of its own. block == 16: a row on half a
 * warp (the other half holds another row; emit_norm_rope.c): the butterfly starts at 8.
 * That is the same bits as block == 32 with lanes 16..31 empty, whose first step adds
 * +0.0 to a sum of squares (never -0.0), which changes nothing. */
void emit_rms_finish(h3_strbuf *s, int block, int64_t n, double eps, bool lean) {
  h3_strbuf_printf(s, "#pragma unroll\n  for (int o = %d; o > 0; o >>= 1) "
                      "ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));\n",
                   block == 16 ? 8 : 16);
  if (block <= 32) {
    h3_strbuf_append(s, "  const float tot = __fadd_rn(0.0f, ss);\n");
  } else {
    h3_strbuf_append(s, "  if ((tid & 31) == 0) part[tid >> 5] = ss;\n  __syncthreads();\n"
                        "  float tot = 0.0f;\n");
    h3_strbuf_printf(s, "#pragma unroll\n  for (int w = 0; w < %d; w++) tot = __fadd_rn(tot, part[w]);\n",
                     block / 32);
  }
  h3_strbuf e;
  h3_strbuf_init(&e);
  emit_literal(&e, H3_F32, eps, false);
  if (lean) {
    h3_strbuf inv;
    h3_strbuf_init(&inv);
    emit_literal(&inv, H3_F32, (double)(1.0f / (float)n), false);
    h3_strbuf_printf(s, "  const float r = __frsqrt_rn(__fmaf_rn(tot, %s, %s));\n",
                     inv.data ? inv.data : "0", e.data ? e.data : "0");
    if (inv.oom) s->oom = true;
    h3_strbuf_free(&inv);
  } else {
    h3_strbuf_printf(s, "  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, "
                        "%lld.0f), %s)));\n", (long long)n, e.data ? e.data : "0");
  }
  if (e.oom) s->oom = true;
  h3_strbuf_free(&e);
}

/* The statements shared by both forms of rms_norm / add_rms_norm, on a chunk of `vec` values
 * at element u * vec (u declared by the caller) held in arrays named by the caller:
 *   add_round: a[k] = a + b rounded to x's dtype as add rounds;
 *   store:     ptr's chunk u = arr;
 *   norm_out:  o[k] = (v * r) * (w + offset), then y's chunk u = o. */
static void add_round(h3_strbuf *s, int vec, h3_dtype dt, const char *a, const char *b) {
  h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) %s[k] = %s(%s[k], %s[k])%s;\n", vec, a,
                   dt == H3_BF16 ? "h3_rbf16(__fadd_rn" : "__fadd_rn", a, b, dt == H3_BF16 ? ")" : "");
}

static void store(h3_strbuf *s, int vec, const char *guard, const char *ptr, const char *arr) {
  if (vec == 8) h3_strbuf_printf(s, "    %sh3_st8(%s, u * 8, %s);\n", guard, ptr, arr);
  else h3_strbuf_printf(s, "    %sh3_st(%s, u, %s[0]);\n", guard, ptr, arr);
}

static void norm_out(h3_strbuf *s, int vec, const char *guard, const char *v, const char *wv, const char *off) {
  h3_strbuf_printf(s, "    float o[%d];\n#pragma unroll\n    for (int k = 0; k < %d; k++) "
                      "o[k] = __fmul_rn(__fmul_rn(%s[k], r), __fadd_rn((float)%s[k], %s));\n",
                   vec, vec, v, wv, off);
  store(s, vec, guard, "y", "o");
}

/* The chunk's values of the norm's input: x's, or for add_rms_norm a + b (in0 + in1, the
 * second array loaded beside the first) rounded to x's dtype as add rounds, stored to out0
 * in the first pass (`store_x`) and recomputed in the second. */
static void add_prologue(h3_strbuf *s, int vec, h3_dtype dt, bool store_x, const char *guard) {
  if (vec == 8) h3_strbuf_append(s, "    float v2[8];\n    h3_ld8(x2, u * 8, v2);\n");
  else h3_strbuf_append(s, "    float v2[1] = {h3_ld(x2, u)};\n");
  add_round(s, vec, dt, "v", "v2");
  if (store_x) store(s, vec, guard, "xo", "v");
}

/* What the two forms' bodies take: the op's kind and x's dtype, the chunking (vec elements a
 * chunk, `block` threads, `units` chunks a row of n), w's operand and C type, the store guard,
 * eps and the offset's literal. */
typedef struct {
  bool add;
  h3_dtype xdt;
  int vec, block, n_in;
  int64_t units, n;
  const char *w, *guard, *off;
  double eps;
} norm_body;

/* The body when a thread takes at most 4 chunks of the row (`most`; a decode row of 6144 is 3):
 * every load of the thread's chunks (x, add's second operand, w) issued before any use, x (for
 * add the rounded sum, stored to out0) kept in registers for the second pass. One memory round
 * trip instead of two (the two-pass form loads w and x again after the reduction); the sums
 * and roundings are the two-pass form's, so are the bits. */
static void rms_norm_in_registers(h3_strbuf *s, const norm_body *nb, int most) {
  const int vec = nb->vec;
  h3_strbuf_printf(s, "  float v[%d][%d];\n  %s wv[%d][%d];\n", most, vec, nb->w, most, vec);
  if (nb->add) h3_strbuf_printf(s, "  float v2[%d][%d];\n", most, vec);
  char each[160]; /* the head of a loop over the thread's chunks c, u its chunk index */
  snprintf(each, sizeof each, "#pragma unroll\n  for (int c = 0; c < %d; c++) {\n    const int u = tid + c * %d;\n"
                              "    if (u >= %lld) continue;\n", most, nb->block, (long long)nb->units);
  h3_strbuf_append(s, each);
  if (vec == 8) {
    h3_strbuf_append(s, "    h3_ld8(x, u * 8, v[c]);\n");
    if (nb->add) h3_strbuf_append(s, "    h3_ld8(x2, u * 8, v2[c]);\n");
    h3_strbuf_printf(s, "    h3_ld8(in%d, u * 8, wv[c]);\n  }\n", nb->n_in - 1);
  } else {
    h3_strbuf_append(s, "    v[c][0] = h3_ld(x, u);\n");
    if (nb->add) h3_strbuf_append(s, "    v2[c][0] = h3_ld(x2, u);\n");
    h3_strbuf_printf(s, "    wv[c][0] = h3_ld(in%d, u);\n  }\n", nb->n_in - 1);
  }
  h3_strbuf_append(s, "  float ss = 0.0f;\n");
  h3_strbuf_append(s, each);
  if (nb->add) {
    add_round(s, vec, nb->xdt, "v[c]", "v2[c]");
    store(s, vec, nb->guard, "xo", "v[c]");
  }
  emit_rms_accum(s, vec, "v[c]", false);
  h3_strbuf_append(s, "  }\n");
  emit_rms_finish(s, nb->block, nb->n, nb->eps, false);
  h3_strbuf_append(s, each);
  norm_out(s, vec, nb->guard, "v[c]", "wv[c]", nb->off);
  h3_strbuf_append(s, "  }\n}\n");
}

/* The body over longer rows: two passes over the row, each with the loads of a thread's
 * chunks in flight (chunk_unroll), x (and add's sum) loaded again in the second. */
static void rms_norm_two_pass(h3_strbuf *s, const norm_body *nb) {
  const int vec = nb->vec;
  h3_strbuf_append(s, "  float ss = 0.0f;\n");
  chunk_unroll(s, nb->units, nb->block);
  chunk_loop(s, vec, nb->n, nb->block, "float", "x", "v");
  if (nb->add) add_prologue(s, vec, nb->xdt, true, nb->guard);
  emit_rms_accum(s, vec, "v", false);
  h3_strbuf_append(s, "  }\n");
  emit_rms_finish(s, nb->block, nb->n, nb->eps, false);
  chunk_unroll(s, nb->units, nb->block);
  chunk_loop(s, vec, nb->n, nb->block, "float", "x", "v");
  if (nb->add) add_prologue(s, vec, nb->xdt, false, nb->guard);
  if (vec == 8) h3_strbuf_printf(s, "    %s wv[8];\n    h3_ld8(in%d, u * 8, wv);\n", nb->w, nb->n_in - 1);
  else h3_strbuf_printf(s, "    %s wv[1] = {h3_ld(in%d, u)};\n", nb->w, nb->n_in - 1);
  norm_out(s, vec, nb->guard, "v", "wv", nb->off);
  h3_strbuf_append(s, "  }\n}\n");
}

/* rms_norm, and add_rms_norm (in0 + in1 = x written to out0, the norm of x to out1, w = in2). */
static h3_status emit_rms_norm(emit_ctx *ec, int64_t rows, int64_t n) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  const bool add = op->code == H3_OP_ADD_RMS_NORM;
  const int n_in = add ? 3 : 2, n_out = add ? 2 : 1;
  int vec = n % 8 == 0 ? 8 : 1;
  int block = emit_row_block(n / vec, 256);
  /* short rows (one warp per row, e.g. per-head q/k norms of 128): each warp of a 256-thread
     block takes a row of its own, with the single-warp reduction (same bits) */
  const int rows_per_block = block == 32 ? 8 : 1;
  h3_type in_t[3], out_t[2];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  for (int i = 0; i < n_out; i++) out_t[i] = op->results[i]->type;
  const h3_type *wt = &in_t[n_in - 1], *yt = &out_t[n_out - 1];
  emit_signature(ec, n_in, in_t, n_out, out_t, NULL, block * rows_per_block, true);
  /* add_rms_norm lets a kernel launched programmatically after it start at once (M3.1's
     router, which loads its weights before it waits for this kernel's output) */
  if (add) h3_strbuf_append(s, "  h3_pdl_launch_dependents();\n");
  const char *guard = rows_per_block > 1 ? "if (live) " : "";
  if (rows_per_block == 1) {
    h3_strbuf_printf(s, "  __shared__ float part[%d];\n", block / 32);
    h3_strbuf_printf(s, "  const long long row = blockIdx.x;\n  if (row >= %lldll) return;\n",
                     (long long)rows);
    h3_strbuf_append(s, "  const int tid = threadIdx.x;\n");
  } else {
    /* a warp past the last row works on the last row and stores nothing: every thread of
       the block reaches every shuffle */
    h3_strbuf_printf(s, "  const long long wrow = blockIdx.x * %dll + (threadIdx.x >> 5);\n"
                        "  const bool live = wrow < %lldll;\n"
                        "  const long long row = live ? wrow : %lldll;\n"
                        "  const int tid = threadIdx.x & 31;\n",
                     rows_per_block, (long long)rows, (long long)(rows > 0 ? rows - 1 : 0));
  }
  const char *xc = h3_kernel_ctype(in_t[0].dtype);
  h3_strbuf_printf(s, "  const %s *x = in0 + row * %lldll;\n  %s *y = out%d + row * %lldll;\n", xc,
                   (long long)n, h3_kernel_ctype(yt->dtype), n_out - 1, (long long)n);
  if (add)
    h3_strbuf_printf(s, "  const %s *x2 = in1 + row * %lldll;\n  %s *xo = out0 + row * %lldll;\n", xc,
                     (long long)n, xc, (long long)n);
  h3_strbuf off;
  h3_strbuf_init(&off);
  emit_literal(&off, H3_F32, h3_op_attr_float(op, "offset", 0.0), false);
  const norm_body nb = {add, in_t[0].dtype, vec, block, n_in, n / vec, n,
                        wt->dtype == H3_F64 ? "double" : "float", guard, off.data ? off.data : "0",
                        h3_op_attr_float(op, "eps", 1e-5)};
  const int64_t most = (nb.units + block - 1) / block;
  if (most <= 4) rms_norm_in_registers(s, &nb, (int)most);
  else rms_norm_two_pass(s, &nb);
  if (off.oom) s->oom = true;
  h3_strbuf_free(&off);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  ec->k->grid[0] = blocks > 0 ? blocks : 1;
  ec->k->block[0] = block * rows_per_block;
  return emit_args(ec, n_in, n_out, false);
}

/* One step of the (best, bi) reduction: takes the candidate (cb, ci) when it beats the
 * running best (ties: lower index). With `cs` (sample_tokens) it also merges the running
 * second-best `sec`: the new second is the largest of the losing best and both seconds
 * (a second never exceeds its best, so the loser of a win is the old best). */
static void top_merge(h3_strbuf *s, const char *ind, const char *cb, const char *ci, const char *cs) {
  h3_strbuf_printf(s, "%sif (%s > best || (%s == best && %s < bi)) { %sbest = %s; bi = %s; }\n",
                   ind, cb, cb, ci, cs ? "sec = best; " : "", cb, ci);
  if (cs) {
    h3_strbuf_printf(s, "%selse if (%s > sec) sec = %s;\n", ind, cb, cb);
    if (strcmp(cs, cb)) h3_strbuf_printf(s, "%sif (%s > sec) sec = %s;\n", ind, cs, cs);
  }
}

/* argmax, and sample_tokens (ops.def): argmax over per-token scores. A row's temperature,
 * seed and position are read once; score = x when !(t > 0) (greedy), else
 * h3_rng_sample_score (include/h3/rng.h, the CPU reference's own source: the same bits).
 * sample_tokens also keeps each thread's second-best score `sec` (NaN never enters: it
 * starts at -inf and only takes scores that compare greater), merged with the best in
 * the butterfly and across warps; h3_rng_sample_margin makes out1 of (best, sec). A +0 /
 * -0 second may come out either way, which h3_rng_sample_margin's result never shows.
 * Few long rows (a vocabulary, at most ARGMAX_SPLIT_ROWS rows): grid (rows, S), block
 * (row, s) takes the s-th of S equal runs of the row's chunks, its thread 0 leaves the run's
 * (best, index, second) in the kernel's own device arrays @K@_pb / _pi / _ps [rows, S]
 * and the row's last block to finish (h3_last_block on @K@_cnt[row], 0 at module load and
 * after every launch) merges the S of them. The merge keeps the lowest index among equal
 * maxima and the largest other score, whatever the order, so the result is the one-block
 * form's bit for bit. One launch at a time uses the arrays (the backend's one stream). */
#define ARGMAX_SPLIT_ROWS 64
#define ARGMAX_SPLIT_UNITS 8192 /* chunks per row from which a row is split */

/* Splits of a row of `units` chunks over `rows` rows: about 128 blocks, at most 32 per row
 * (1: the one-block form). */
static int argmax_splits(int64_t rows, int64_t units) {
  if (rows > ARGMAX_SPLIT_ROWS || units < ARGMAX_SPLIT_UNITS) return 1;
  int64_t s = 128 / rows;
  return (int)(s < 2 ? 1 : s > 32 ? 32 : s);
}

static h3_status emit_argmax(emit_ctx *ec, int64_t rows, int64_t n) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  const bool sample = op->code == H3_OP_SAMPLE_TOKENS;
  const int n_in = sample ? 4 : 1, n_out = sample ? 2 : 1;
  int vec = n % 8 == 0 ? 8 : 1;
  const int64_t units = n / vec;
  const int S = argmax_splits(rows, units);
  const int64_t per = (units + S - 1) / S; /* chunks per split */
  int block = emit_row_block(S > 1 ? per : units, 1024);
  h3_type in_t[4], out_t[2];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  for (int i = 0; i < n_out; i++) out_t[i] = op->results[i]->type;
  const char *ct = emit_comptype(in_t[0].dtype);
  const char *lowest = in_t[0].dtype == H3_F64 ? "-__longlong_as_double(0x7ff0000000000000ll)"
                       : emit_is_float(in_t[0].dtype) ? "-__int_as_float(0x7f800000)"
                                                      : "(-9223372036854775807ll - 1)";
  if (S > 1) {
    h3_strbuf_printf(s, "__device__ %s @K@_pb[%lld];\n__device__ int @K@_pi[%lld];\n", ct,
                     (long long)(rows * S), (long long)(rows * S));
    if (sample) h3_strbuf_printf(s, "__device__ float @K@_ps[%lld];\n", (long long)(rows * S));
    h3_strbuf_printf(s, "__device__ unsigned @K@_cnt[%lld];\n", (long long)rows);
  }
  emit_signature(ec, n_in, in_t, n_out, out_t, NULL, block, true);
  h3_strbuf_printf(s, "  __shared__ %s pb[%d];\n  __shared__ int pi[%d];\n", ct, block / 32,
                   block / 32);
  if (sample) h3_strbuf_printf(s, "  __shared__ float ps[%d];\n", block / 32);
  row_head(s, rows, n, h3_kernel_ctype(in_t[0].dtype), h3_kernel_ctype(out_t[0].dtype), 1);
  if (sample)
    h3_strbuf_append(s, "  const float t = in1[row];\n  const bool greedy = !(t > 0.0f);\n"
                        "  const unsigned int seed = (unsigned int)in2[row];\n"
                        "  const unsigned int pos = (unsigned int)in3[row];\n");
  h3_strbuf_printf(s, "  %s best = %s;\n  int bi = 0x7fffffff;\n", ct, lowest);
  if (sample) h3_strbuf_printf(s, "  float sec = %s;\n", lowest);
  if (S > 1) { /* this block's run of chunks: up to u1 - 1 */
    h3_strbuf_printf(s, "  const int u1 = (int)blockIdx.y * %lld + %lld < %lld ? (int)blockIdx.y * %lld + "
                        "%lld : %lld;\n",
                     (long long)per, (long long)per, (long long)units, (long long)per,
                     (long long)per, (long long)units);
  }
  /* a thread reading several chunks of a long row has their loads in flight at once */
  chunk_unroll(s, S > 1 ? per : units, block);
  if (S > 1) {
    char from[48];
    snprintf(from, sizeof from, "(int)blockIdx.y * %lld + tid", (long long)per);
    chunk_loop_span(s, vec, from, "u1", block, ct, "x", "v");
  } else {
    chunk_loop(s, vec, n, block, ct, "x", "v");
  }
  h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) {\n"
                      "      const int j = u * %d + k;\n", vec, vec);
  if (sample)
    h3_strbuf_append(s, "      const float sc = greedy ? v[k] : "
                        "h3_rng_sample_score(v[k], t, seed, pos, (unsigned int)j);\n");
  top_merge(s, "      ", sample ? "sc" : "v[k]", "j", sample ? "sc" : NULL);
  h3_strbuf_append(s, "    }\n  }\n"
                      "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) {\n"
                      "    const auto ob = __shfl_xor_sync(0xffffffffu, best, o);\n"
                      "    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);\n");
  if (sample) h3_strbuf_append(s, "    const float os = __shfl_xor_sync(0xffffffffu, sec, o);\n");
  top_merge(s, "    ", "ob", "oi", sample ? "os" : NULL);
  h3_strbuf_printf(s, "  }\n"
                      "  if ((tid & 31) == 0) { pb[tid >> 5] = best; pi[tid >> 5] = bi;%s }\n"
                      "  __syncthreads();\n  if (tid == 0) {\n",
                   sample ? " ps[tid >> 5] = sec;" : "");
  h3_strbuf_printf(s, "    for (int w = 1; w < %d; w++)%s\n", block / 32, sample ? " {" : "");
  top_merge(s, "      ", "pb[w]", "pi[w]", sample ? "ps[w]" : NULL);
  if (sample) h3_strbuf_append(s, "    }\n");
  if (S > 1) { /* the run's result out; the row's last block merges the S runs */
    h3_strbuf_printf(s, "    const long long at = row * %d + blockIdx.y;\n"
                        "    @K@_pb[at] = best;\n    @K@_pi[at] = bi;\n%s  }\n"
                        "  if (!h3_last_block(&@K@_cnt[row], %du)) return;\n  if (tid == 0) {\n"
                        "    best = %s;\n    bi = 0x7fffffff;\n",
                     S, sample ? "    @K@_ps[at] = sec;\n" : "", S, lowest);
    if (sample) h3_strbuf_printf(s, "    sec = %s;\n", lowest);
    h3_strbuf_printf(s, "    for (int r = 0; r < %d; r++) {\n"
                        "      const %s rb = h3_ldcg(&@K@_pb[row * %d + r]);\n"
                        "      const int ri = h3_ldcg(&@K@_pi[row * %d + r]);\n",
                     S, ct, S, S);
    if (sample) h3_strbuf_printf(s, "      const float rs = h3_ldcg(&@K@_ps[row * %d + r]);\n", S);
    top_merge(s, "      ", "rb", "ri", sample ? "rs" : NULL);
    h3_strbuf_append(s, "    }\n");
  }
  h3_strbuf_append(s, "    h3_st(y, 0, (long long)(bi == 0x7fffffff ? 0 : bi));\n");
  if (sample)
    h3_strbuf_append(s, "    out1[row] = h3_rng_sample_margin(bi == 0x7fffffff ? "
                        "__int_as_float(0x7fc00000) : best, sec);\n");
  h3_strbuf_append(s, "  }\n}\n");
  ec->k->grid[0] = rows > 0 ? rows : 1;
  ec->k->grid[1] = S;
  ec->k->block[0] = block;
  return emit_args(ec, n_in, n_out, false);
}

static h3_status emit_reduce_sum(emit_ctx *ec, int64_t rows, int64_t n) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  int vec = n % 8 == 0 ? 8 : 1;
  int block = emit_row_block(n / vec, 256);
  h3_type in_t = op->operands[0]->type, out_t = op->results[0]->type;
  const char *acc = in_t.dtype == H3_F64 ? "double" : "float";
  bool dbl = in_t.dtype == H3_F64;
  emit_signature(ec, 1, &in_t, 1, &out_t, NULL, block, true);
  h3_strbuf_printf(s, "  __shared__ %s part[%d];\n", acc, block / 32);
  row_head(s, rows, n, h3_kernel_ctype(in_t.dtype), h3_kernel_ctype(out_t.dtype), 1);
  h3_strbuf_printf(s, "  %s acc = 0;\n", acc);
  chunk_loop(s, vec, n, block, acc, "x", "v");
  h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) acc = %s(acc, v[k]);\n  }\n",
                   vec, dbl ? "__dadd_rn" : "__fadd_rn");
  h3_strbuf_printf(s, "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) "
                      "acc = %s(acc, __shfl_xor_sync(0xffffffffu, acc, o));\n"
                      "  if ((tid & 31) == 0) part[tid >> 5] = acc;\n  __syncthreads();\n"
                      "  if (tid == 0) {\n    %s tot = 0;\n"
                      "    for (int w = 0; w < %d; w++) tot = %s(tot, part[w]);\n"
                      "    h3_st(y, 0, tot);\n  }\n}\n",
                   dbl ? "__dadd_rn" : "__fadd_rn", acc, block / 32, dbl ? "__dadd_rn" : "__fadd_rn");
  ec->k->grid[0] = rows > 0 ? rows : 1;
  ec->k->block[0] = block;
  return emit_args(ec, 1, 1, false);
}

h3_status emit_reduce(emit_ctx *ec) {
  const h3_type *x = &ec->op->operands[0]->type;
  if (x->rank < 1) return emit_unsupported(ec, "the input must have at least one dim");
  int64_t n = x->dims[x->rank - 1];
  int64_t rows = n > 0 ? h3_type_numel(x) / n : 0;
  if (rows >= ((int64_t)1 << 31) || n >= ((int64_t)1 << 31))
    return emit_unsupported(ec, "more than 2^31 rows or columns");
  if (n == 0) return emit_unsupported(ec, "an empty last axis");
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  switch (ec->op->code) {
  case H3_OP_RMS_NORM:
  case H3_OP_ADD_RMS_NORM: return emit_rms_norm(ec, rows, n);
  case H3_OP_ARGMAX:
  case H3_OP_SAMPLE_TOKENS: return emit_argmax(ec, rows, n);
  default: return emit_reduce_sum(ec, rows, n);
  }
}
