/* emit_internal.h: what the emitters of codegen/ share (not part of the public API).
 *
 * An emitter writes one kernel's CUDA C into ec->src with the kernel's name written as
 * the placeholder `@K@`, fills the launch rule in ec->k, then emit_finish() hashes the
 * source (placeholder -> "h3_<op>"), derives the name and substitutes it. Helpers here
 * give C type names, the compute type of a dtype, literals, the standard signature and
 * launch-rule arithmetic. Every index expression uses `ix_t` (int when every tensor of
 * the kernel has fewer than 2^31 elements, else long long), typedef'd by the kernels of
 * emit_fused.c; the other emitters index with long long.
 */
#ifndef H3_EMIT_INTERNAL_H
#define H3_EMIT_INTERNAL_H

#include "h3/codegen.h"
#include "h3/op_registry.h"

#define EMIT_BLOCK 256     /* threads per block of the elementwise-style kernels */
#define EMIT_MAX_GRID 8192 /* grid-stride loops cover the rest */

typedef struct {
  const h3_op *op;
  const char *opname; /* registry name, used in the kernel name */
  bool exact;
  h3_arena *a;
  h3_kernel *k;
  h3_diag *d;
  h3_strbuf src;
  int tmp; /* counter for fresh local names */
} emit_ctx;

/* Stored element type: "h3_bf16", "float", "long long", ... */
/* Compute type of a dtype: "float" (bf16/f16/f32), "double" (f64), "long long" (ints). */
const char *emit_comptype(h3_dtype t);
bool emit_is_float(h3_dtype t);
/* A literal of `v` in the compute type of t (exact tier: rounded to t first). */
void emit_literal(h3_strbuf *b, h3_dtype t, double v, bool round_to_dtype);
/* Wraps expression `e` (compute type of t) in the rounding to t: "h3_rbf16(e)", ... */
void emit_round(h3_strbuf *b, h3_dtype t, const char *e);

/* "extern "C" __global__ void __launch_bounds__(B) @K@(" + operands and results
 * (+ extra) + ") {\n". `restrict_io` is false for in-place kernels. */
void emit_signature(emit_ctx *ec, int n_in, const h3_type *in, int n_out,
                    const h3_type *out, const char *extra, int block, bool restrict_io);
/* Sets the standard args list in0.. out0.. (+ "seed" when with_seed). */
h3_status emit_args(emit_ctx *ec, int n_in, int n_out, bool with_seed);
/* Sets a 1-D launch rule: min(ceil(work / block), EMIT_MAX_GRID) blocks of `block`. */
void emit_launch_1d(emit_ctx *ec, int64_t work, int block);
/* True when some tensor of the op has 2^31 elements or more (ix_t = long long). */
bool emit_needs_wide(const h3_op *op);

/* Hashes, names and installs the kernel source; H3_ERR when out of memory. */
h3_status emit_finish(emit_ctx *ec);
/* Reports an emitter limitation at the op's span. */
h3_status emit_unsupported(emit_ctx *ec, const char *what);

/* The emitters, one per family (emit_fused.c, emit_reduce.c, emit_move.c, emit_model.c). */
h3_status emit_fused(emit_ctx *ec); /* fused regions and every elementwise-style op */
h3_status emit_reduce(emit_ctx *ec); /* rms_norm, argmax, sample_tokens, reduce_sum */
h3_status emit_move(emit_ctx *ec);   /* concat, pad, slice, set_index, scatter_rows, kv_write */
h3_status emit_model(emit_ctx *ec);  /* timestep_embedding, rope*, randn */
h3_status emit_normmod(emit_ctx *ec); /* norm_modulate, residual_norm_modulate (emit_normmod.c) */
h3_status emit_norm_rope(emit_ctx *ec); /* rms_norm_rope (emit_norm_rope.c) */
/* rms_norm_rope's sage_quant = 1 form (emit_norm_rope_sage.c): open declares the block's
   segment, lane, the kept values and opens the loop over the passes of 64 / (256 / lanes)
   rows with each pass's live, t, row (hd is blockIdx.y); emit_norm_rope.c's row code follows
   (with `store` and the roped o[vec]); close keeps the pass's values, ends the loop, reduces
   the block's amax and writes the codes (out1) and the delta (out2), and sets the grid. */
void emit_sage_q_open(h3_strbuf *s, const h3_op *op, int lanes, int vec, int64_t T, int64_t H);
void emit_sage_q_close(emit_ctx *ec, int lanes, int vec, int64_t units, int64_t H, int64_t D);

/* The rms_norm row reduction, shared by rms_norm and the fused norm ops so that the
 * exact-tier kernels sum x^2 in one order (emit_reduce.c). Threads per block for a row of
 * `units` chunks: a multiple of 32 in [32, cap]. */
int emit_row_block(int64_t units, int cap);
/* Adds the squares of arr[0..vec) to the thread's fp32 `ss`, in order (one chunk):
 * ss = ss + x*x rounded twice (rms_norm's form), or with `lean` one fma, ss = fma(x, x, ss)
 * (the lossless tier's fused kernels, emit_normmod.c). */
void emit_rms_accum(h3_strbuf *s, int vec, const char *arr, bool lean);
/* Combines every thread's `ss` (warp xor butterfly, then the warps' partials in order from
 * `__shared__ float part[block / 32]`, declared by the kernel) and declares r, identical in
 * every thread: rms_norm's `1/sqrt(tot/n + eps)` (a division, a square root, a division, each
 * rounded), or with `lean` the correctly rounded reciprocal square root of
 * fma(tot, fl(1/n), eps) (one instruction sequence instead of three). Uses `tid`. block 16:
 * a row on one half of a warp (same bits as block 32 with the other half empty). */
void emit_rms_finish(h3_strbuf *s, int block, int64_t n, double eps, bool lean);
h3_status emit_int8(emit_ctx *ec);   /* quantize_rows (emit_int8.c) */
h3_status emit_spectrum(emit_ctx *ec); /* spectrum_update/forecast, cache_dit_decide */

/* Row-major strides of a type (elements). */
void emit_strides(const h3_type *t, int64_t *strides);

#endif
