/* op_infer_norm_rope.c: result type inference of ops.def's rms_norm_rope, the per-head
 * q/k RMSNorm + RoPE of an attention block in one op (made by qk-norm-rope-fusion,
 * passes/qk_norm_rope_fusion.c). x bf16[T, C] is read at columns [start, start + heads*D)
 * (in place of the column slice the pass removed); w [D] gives the head width; cos and sin
 * [T, R/2] rotate R <= D dims. The result is bf16[T, heads, D].
 * The int8 form (made by int8-qk-norm-rope, passes/int8_qk_norm_rope.c) has x = the i32[T, C]
 * accumulators of an int8 GEMM and three more operands, s_x f32[T], s_w f32[C] and
 * bias?[C] (bf16, f16 or f32): x is dequantized as dequant_i8 does, rounded to bf16.
 * With sage_quant = 1 (sage-q-fusion) either form adds q's sage codes and deltas
 * (op_infer_sage_q.c).
 * rms_norm_rope_write (made by kv-write-fusion) takes a paged cache before the bf16 form's
 * operands and the slots after them, and returns the cache.
 */
#include "op_infer.h"

/* A float dtype the kernels read as fp32 (no f64). */
static bool narrow_float(h3_dtype t) { return t == H3_BF16 || t == H3_F16 || t == H3_F32; }

/* The dequantization operands of the int8 form: s_x f32[T], s_w f32[C], bias?[C]. */
static int check_dequant(const h3_op *op, const h3_type *x, char *why, size_t why_len) {
  if (op->n_operands == 5)
    FAIL("rms_norm_rope: 5 operands; the int8 form takes x i32[T, C], w, cos, sin, s_x f32[T], "
         "s_w f32[C] and an optional bias[C]");
  const h3_type *sx = TY(4), *sw = TY(5);
  if (sx->rank != 1 || sx->dtype != H3_F32 || sx->dims[0] != x->dims[0])
    FAIL("rms_norm_rope: s_x must be f32[%lld] (one scale per row of x %s), got %s",
         LL(x->dims[0]), TS(x), TS(sx));
  if (sw->rank != 1 || sw->dtype != H3_F32 || sw->dims[0] != x->dims[1])
    FAIL("rms_norm_rope: s_w must be f32[%lld] (one scale per column of x %s), got %s",
         LL(x->dims[1]), TS(x), TS(sw));
  if (op->n_operands == 7) {
    const h3_type *b = TY(6);
    if (b->rank != 1 || b->dims[0] != x->dims[1] || !narrow_float(b->dtype))
      FAIL("rms_norm_rope: bias must be a bf16, f16 or f32 [%lld] (one per column of x), got %s",
           LL(x->dims[1]), TS(b));
  }
  return 0;
}

/* The head rows both forms compute: x at operand b (bf16, or i32 with acc), w, cos, sin at
 * b + 1..3; y = bf16[T, heads, D]. */
static int infer_rows(const h3_op *op, int b, bool acc, const char *name, h3_type *y, char *why,
                      size_t why_len) {
  const h3_type *x = TY(b), *w = TY(b + 1), *c = TY(b + 2), *s = TY(b + 3);
  if (x->rank != 2 || x->dtype != (acc ? H3_I32 : H3_BF16))
    FAIL("%s: x must be %s[T, C]%s, got %s", name, acc ? "i32" : "bf16",
         acc ? " (int8 accumulators, with s_x and s_w)" : "", TS(x));
  if (acc && check_dequant(op, x, why, why_len)) return -1;
  if (w->rank != 1 || w->dims[0] < 1 || !narrow_float(w->dtype))
    FAIL("%s: w must be a bf16, f16 or f32 [D] with D >= 1, got %s", name, TS(w));
  if (h3_infer_want_rank(op, b + 2, "cos", 2, "[T, R/2]", why, why_len)) return -1;
  if (!h3_type_equal(c, s))
    FAIL("%s: cos is %s but sin is %s (same type needed)", name, TS(c), TS(s));
  if (!narrow_float(c->dtype))
    FAIL("%s: cos and sin must be bf16, f16 or f32, got %s", name, TS(c));
  if (h3_infer_want_dim(op, b, "x", 0, b + 2, "cos", 0, "T", "[T, R/2]", why, why_len)) return -1;
  const int64_t D = w->dims[0], heads = h3_op_attr_int(op, "heads", 0);
  const int64_t start = h3_op_attr_int(op, "start", -1);
  if (2 * c->dims[1] > D)
    FAIL("%s: cos %s rotates R = %lld dims but w has D = %lld (w is [D])", name, TS(c),
         LL(2 * c->dims[1]), LL(D));
  if (heads < 1) FAIL("%s: heads = %lld must be positive", name, LL(heads));
  if (start < 0 || heads > (x->dims[1] - start) / D)
    FAIL("%s: columns [start, start + heads*D) = [%lld, %lld + %lld*%lld) must lie in x's C = "
         "%lld",
         name, LL(start), LL(start), LL(heads), LL(D), LL(x->dims[1]));
  int64_t d[3] = {x->dims[0], heads, D};
  *y = h3_type_make(H3_BF16, 3, d);
  return 0;
}

H3_INFER_DECL(h3_infer_rms_norm_rope) {
  if (infer_rows(op, 0, op->n_operands > 4, "rms_norm_rope", &out[0], why, why_len)) return -1;
  const int extra = h3_infer_sage_q_results(op, &out[0], out + 1, why, why_len);
  return extra < 0 ? -1 : 1 + extra;
}

/* rms_norm_rope_write(cache [P, page, ..], x, w, cos, sin, slot i32[T], vcache?) -> (cache,
 * vcache?): the rows of rms_norm_rope (x bf16) written at their slots; the cache's dims after
 * [P, page] hold one row of heads*D bf16 values; vcache (cache's type) gets x's columns
 * [v_start, v_start + heads*D) at the same slots. */
H3_INFER_DECL(h3_infer_rms_norm_rope_write) {
  const h3_type *cache = TY(0);
  h3_type y;
  if (infer_rows(op, 1, false, "rms_norm_rope_write", &y, why, why_len)) return -1;
  int64_t row = 1;
  for (int i = 2; i < cache->rank; i++) row *= cache->dims[i];
  if (cache->rank < 3 || cache->dtype != H3_BF16 || row != y.dims[1] * y.dims[2])
    FAIL("rms_norm_rope_write: cache must be bf16[P, page, ..] with rows of heads*D = %lld*%lld "
         "values, got %s",
         LL(y.dims[1]), LL(y.dims[2]), TS(cache));
  if (h3_infer_want_i32(op, 5, "slot", 1, "[T]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "x", 0, 5, "slot", 0, "T", "[T]", why, why_len)) return -1;
  out[0] = *cache;
  const int64_t vs = h3_op_attr_int(op, "v_start", -1), C = TY(1)->dims[1];
  if (op->n_operands == 6) {
    if (h3_op_attr(op, "v_start")) FAIL("rms_norm_rope_write: v_start without a v cache (operand 7)");
    if (h3_op_attr(op, "q_start") || h3_op_attr(op, "q_heads"))
      FAIL("rms_norm_rope_write: q_start / q_heads without q's norm weight (operand 8)");
    return 1;
  }
  if (!h3_type_equal(TY(6), cache))
    FAIL("rms_norm_rope_write: the v cache is %s but the cache %s (same type needed)", TS(TY(6)),
         TS(cache));
  if (vs < 0 || y.dims[1] * y.dims[2] > C - vs)
    FAIL("rms_norm_rope_write: v's columns [v_start, v_start + heads*D) = [%lld, %lld + %lld) must "
         "lie in x's C = %lld (v_start is required with a v cache)",
         LL(vs), LL(vs), LL(y.dims[1] * y.dims[2]), LL(C));
  out[1] = *cache;
  const bool q_attrs = h3_op_attr(op, "q_start") || h3_op_attr(op, "q_heads");
  if (op->n_operands == 7) {
    if (q_attrs) FAIL("rms_norm_rope_write: q_start / q_heads without q's norm weight (operand 8)");
    return 2;
  }
  const h3_type *wq = TY(7);
  const int64_t D = y.dims[2], qs = h3_op_attr_int(op, "q_start", -1);
  const int64_t qh = h3_op_attr_int(op, "q_heads", 0);
  if (wq->rank != 1 || wq->dims[0] != D || !narrow_float(wq->dtype))
    FAIL("rms_norm_rope_write: q's norm weight must be a bf16, f16 or f32 [%lld] (k's D), got %s",
         LL(D), TS(wq));
  if (qh < 1 || qs < 0 || qh > (C - qs) / D)
    FAIL("rms_norm_rope_write: q's columns [q_start, q_start + q_heads*D) = [%lld, %lld + %lld*%lld) "
         "must lie in x's C = %lld (q_start and q_heads >= 1 are required with q's weight)",
         LL(qs), LL(qs), LL(qh), LL(D), LL(C));
  int64_t qd[3] = {y.dims[0], qh, D};
  out[2] = h3_type_make(H3_BF16, 3, qd);
  return 3;
}
