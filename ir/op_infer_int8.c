/* op_infer_int8.c: result type inference of the INT8 linear lowering ops of ops.def
 * (quantize_rows, linear_int8), and the load-time rule that makes a quantize_rows of a
 * parameter the runtime's weight quantization (h3_op_is_load_time).
 *
 * Contracts (ops.def): quantize_rows(x[.., K]) {rotate} -> (i8[.., K], f32[..]) with
 * rotate 0 or 256 (then K % 256 == 0); linear_int8(q i8[.., K], s_x f32[..], wq i8[N, K],
 * s_w f32[N], bias?[N]) {dtype = bf16, chunk_rows >= 0} -> dtype[.., N] with K <= 131071,
 * so that the int32 accumulator cannot overflow (|acc| <= 128 * 128 * K < 2^31).
 */
#include "op_infer.h"

#define INT8_MAX_K 131071

H3_INFER_DECL(h3_infer_quantize_rows) {
  const h3_type *x = TY(0);
  if (x->rank < 1) FAIL("quantize_rows: x must be [.., K], got %s", TS(x));
  if (!h3_dtype_is_float(x->dtype)) FAIL("quantize_rows: x must be a float tensor, got %s", TS(x));
  int64_t k = x->dims[x->rank - 1];
  int64_t rot = h3_op_attr_int(op, "rotate", 0);
  if (rot != 0 && rot != 256)
    FAIL("quantize_rows: rotate = %lld, expected 0 (off) or 256 (Hadamard groups of 256)", LL(rot));
  if (rot && k % rot != 0)
    FAIL("quantize_rows: rotate = %lld needs K %% %lld == 0, but x has K = %lld", LL(rot), LL(rot), LL(k));
  out[0] = *x;
  out[0].dtype = H3_I8;
  out[1] = h3_type_make(H3_F32, x->rank - 1, x->dims);
  return 2;
}

H3_INFER_DECL(h3_infer_linear_int8) {
  const h3_type *q = TY(0), *sx = TY(1), *w = TY(2), *sw = TY(3);
  if (q->rank < 1 || q->dtype != H3_I8) FAIL("linear_int8: q must be i8[.., K], got %s", TS(q));
  h3_type want_sx = h3_type_make(H3_F32, q->rank - 1, q->dims);
  if (!h3_type_equal(sx, &want_sx))
    FAIL("linear_int8: s_x must be %s (one scale per row of q %s), got %s", TS(&want_sx), TS(q), TS(sx));
  if (w->rank != 2 || w->dtype != H3_I8) FAIL("linear_int8: wq must be i8[N, K], got %s", TS(w));
  int64_t k = q->dims[q->rank - 1], n = w->dims[0];
  if (k != w->dims[1])
    FAIL("linear_int8: q has K = %lld but wq has K = %lld (wq is [N, K])", LL(k), LL(w->dims[1]));
  if (k > INT8_MAX_K)
    FAIL("linear_int8: K = %lld exceeds %d, where the int32 accumulator could overflow", LL(k), INT8_MAX_K);
  if (sw->rank != 1 || sw->dtype != H3_F32 || sw->dims[0] != n)
    FAIL("linear_int8: s_w must be f32[%lld] (one scale per row of wq), got %s", LL(n), TS(sw));
  if (op->n_operands == 5) {
    const h3_type *b = TY(4);
    if (b->rank != 1 || b->dims[0] != n || !h3_dtype_is_float(b->dtype))
      FAIL("linear_int8: wq has N = %lld but bias is %s (bias is a float [N])", LL(n), TS(b));
  }
  int64_t chunk = h3_op_attr_int(op, "chunk_rows", 0);
  if (chunk < 0) FAIL("linear_int8: chunk_rows = %lld is negative (0 or absent: one chunk)", LL(chunk));
  return h3_infer_quant_linear_result(op, q, n, out, why, why_len);
}

bool h3_op_is_load_time(const h3_op *op) {
  return op && op->code == H3_OP_QUANTIZE_ROWS && op->n_operands == 1 &&
         op->operands[0]->kind == H3_VALUE_PARAM && op->parent && !op->parent->parent;
}
