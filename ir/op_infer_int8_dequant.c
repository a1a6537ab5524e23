/* op_infer_int8_dequant.c: result type inference of the two halves of linear_int8
 * (ops.def): matmul_i8, the exact int32 GEMM, and dequant_i8, its fixed epilogue, which
 * int8-dequant-split (passes/int8_dequant_split.c) makes so that the epilogue can fuse into
 * the consumers of the GEMM.
 *
 * Contracts: matmul_i8(q i8[.., K], wq i8[N, K]) {chunk_rows >= 0} -> i32[.., N] with
 * K <= 131071 (|acc| <= 128 * 128 * K < 2^31); dequant_i8(acc i32[.., N], s_x f32[..],
 * s_w f32[N], bias?[N]) {dtype = bf16, a float} -> dtype[.., N], s_x one scale per row of
 * acc (acc's leading dims), bias a float [N].
 */
#include "op_infer.h"

#define INT8_MAX_K 131071

H3_INFER_DECL(h3_infer_matmul_i8) {
  const h3_type *q = TY(0), *w = TY(1);
  if (q->rank < 1 || q->dtype != H3_I8) FAIL("matmul_i8: q must be i8[.., K], got %s", TS(q));
  if (w->rank != 2 || w->dtype != H3_I8) FAIL("matmul_i8: wq must be i8[N, K], got %s", TS(w));
  int64_t k = q->dims[q->rank - 1];
  if (k != w->dims[1])
    FAIL("matmul_i8: q has K = %lld but wq has K = %lld (wq is [N, K])", LL(k), LL(w->dims[1]));
  if (k > INT8_MAX_K)
    FAIL("matmul_i8: K = %lld exceeds %d, where the int32 accumulator could overflow", LL(k), INT8_MAX_K);
  int64_t chunk = h3_op_attr_int(op, "chunk_rows", 0);
  if (chunk < 0) FAIL("matmul_i8: chunk_rows = %lld is negative (0 or absent: one chunk)", LL(chunk));
  out[0] = *q;
  out[0].dims[q->rank - 1] = w->dims[0];
  out[0].dtype = H3_I32;
  return 1;
}

H3_INFER_DECL(h3_infer_dequant_i8) {
  const h3_type *acc = TY(0), *sx = TY(1), *sw = TY(2);
  if (acc->rank < 1 || acc->dtype != H3_I32)
    FAIL("dequant_i8: acc must be i32[.., N] (matmul_i8's result), got %s", TS(acc));
  h3_type want_sx = h3_type_make(H3_F32, acc->rank - 1, acc->dims);
  if (!h3_type_equal(sx, &want_sx))
    FAIL("dequant_i8: s_x must be %s (one scale per row of acc %s), got %s", TS(&want_sx), TS(acc),
         TS(sx));
  int64_t n = acc->dims[acc->rank - 1];
  if (sw->rank != 1 || sw->dtype != H3_F32 || sw->dims[0] != n)
    FAIL("dequant_i8: s_w must be f32[%lld] (one scale per column of acc), got %s", LL(n), TS(sw));
  if (op->n_operands == 4) {
    const h3_type *b = TY(3);
    if (b->rank != 1 || b->dims[0] != n || !h3_dtype_is_float(b->dtype))
      FAIL("dequant_i8: acc has N = %lld but bias is %s (bias is a float [N])", LL(n), TS(b));
  }
  const h3_attr *dt = h3_op_attr(op, "dtype");
  h3_dtype od = dt ? (h3_dtype)dt->i : H3_BF16;
  if (!h3_dtype_is_float(od))
    FAIL("dequant_i8: dtype = %s, expected a float result dtype", h3_dtype_name(od));
  out[0] = *acc;
  out[0].dtype = od;
  return 1;
}
