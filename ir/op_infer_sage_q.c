/* op_infer_sage_q.c: the types of sage_attention's q codes (ops.def; made by sage-q-fusion,
 * passes/sage_q_fusion.c): the results rms_norm_rope adds with sage_quant = 1 and the two
 * operands sage_attention reads them from, both in the padded layout of include/h3/sage.h
 * (codes i8[H*P*D], deltas f32[H*P/64], P the padded rows of the segments).
 */
#include "op_infer.h"

#include "h3/sage.h"

/* The codes' and deltas' types for q [T, H, D] cut at the op's segments. */
static void q_code_types(const h3_op *op, const h3_type *q, h3_type *codes, h3_type *deltas) {
  const int64_t P = h3_sage_q_rows(h3_op_attr(op, "segments"), q->dims[0]);
  const int64_t nc = q->dims[1] * P * q->dims[2], nd = q->dims[1] * P / H3_SAGE_QBLOCK;
  *codes = h3_type_make(H3_I8, 1, &nc);
  *deltas = h3_type_make(H3_F32, 1, &nd);
}

int h3_infer_sage_q_results(const h3_op *op, const h3_type *y, h3_type *out, char *why, size_t why_len) {
  const int64_t on = h3_op_attr_int(op, "sage_quant", 0);
  const h3_attr *seg = h3_op_attr(op, "segments");
  if (on != 0 && on != 1) FAIL("%s: sage_quant = %lld, expected 0 or 1", OPN, LL(on));
  if (!on && seg) FAIL("%s: segments without sage_quant = 1 (they cut q's code blocks only)", OPN);
  int64_t prev = -1;
  for (int i = 0; seg && i < seg->n; prev = seg->ints[i++])
    if (seg->ints[i] <= prev || seg->ints[i] > y->dims[0])
      FAIL("%s: segments must ascend strictly within [0, T = %lld], got %lld at position %d", OPN,
           LL(y->dims[0]), LL(seg->ints[i]), i);
  if (!on) return 0;
  q_code_types(op, y, &out[0], &out[1]);
  return 2;
}

int h3_infer_sage_q_operands(const h3_op *op, char *why, size_t why_len) {
  if (op->n_operands == 3) return 0;
  if (op->n_operands != 5)
    FAIL("sage_attention: 3 operands (q, k, v), or 5 with q's codes i8 and deltas f32 after them");
  h3_type codes, deltas;
  q_code_types(op, TY(0), &codes, &deltas);
  if (!h3_type_equal(TY(3), &codes))
    FAIL("sage_attention: q's codes must be %s (include/h3/sage.h's layout over the op's segments), got %s",
         TS(&codes), TS(TY(3)));
  if (!h3_type_equal(TY(4), &deltas))
    FAIL("sage_attention: q's deltas must be %s (one per 64-row block and q head of the padded segments), "
         "got %s", TS(&deltas), TS(TY(4)));
  return 0;
}
